"""Compile a statistics release (``mechanism laplace | discrete_laplace | discrete_gaussian | auto``) and
compose such releases (the family's ``compile`` and ``compose`` hooks; proofs in PROOF.md here).

A release's *design* (:func:`design`) is everything its certificate states that does not depend on the
data: the noise, its scale for the release's (ε, δ), Δ, the query and its accuracy. It is computed from
the IR alone, so that ``compose … split`` (``split.py``) can plan the parts' shares before any data is
read, and ``verify`` recomputes it exactly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpspec.accounting import analytic_gaussian as GR
from dpspec.accounting import pld as PLD
from dpspec.certificate.model import (
    Assumption,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    QueryRecord,
    Source,
    TargetCertificate,
)
from dpspec.compiler.common import (
    _DPS201_HINT,
    CompiledTarget,
    _alpha_grid,
    _deltas,
    _fail,
    _grid_text,
    _notion,
    _protected,
    _target,
    binding_text,
    composed_protected,
)
from dpspec.families.statistics import accountant as A
from dpspec.ir import models as ir

if TYPE_CHECKING:
    from dpspec.check.framework import Context

#: the quantile's candidate grid: every integer of integer bounds up to this many, else this many points
QUANTILE_GRID = 1001

THEOREMS = {
    "laplace": "Dwork, McSherry, Nissim & Smith 2006, Prop. 1; Dwork & Roth 2014, Thm 3.6 (Laplace mechanism, "
    "pure ε-DP, δ = 0)",
    "discrete_laplace": "Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020, Alg. 2 (discrete "
    "Laplace mechanism, pure ε-DP, δ = 0, exact sampler)",
    "gaussian": "Balle & Wang 2018, Thm 8 (analytic Gaussian mechanism); Dong, Roth & Su 2022, Cor. 2.13 (μ-GDP)",
    "discrete_gaussian": "Canonne, Kamath & Steinke 2020, Thm 7 (exact privacy profile of the discrete Gaussian), "
    "dominated by the μ-GDP profile wherever that is ≥ 1e-29 (checked on an ε grid; Dong, Roth & Su 2022, "
    "Cor. 2.13), and Thm 4 (Δ²/(2σ²)-zCDP) below",
    "exponential": "McSherry & Talwar 2007, Thm 6 (exponential mechanism, pure ε-DP); Dwork & Roth 2014, Thm 3.11 "
    "(its utility bound)",
    "selection": "Korolova, Kenthapadi, Mishra & Ntoulas 2009; Wilson et al. 2020, §3 (partition selection by a "
    "thresholded Laplace count: a key present in one neighbour only is released with probability ≤ δ)",
    "basic": "Dwork & Roth 2014, Thm 3.16 (basic composition: ε and δ add)",
    "gdp": "Dong, Roth & Su 2022, Cor. 3.3 (μ_i-GDP parts compose to √(Σ μ_i²)-GDP)",
    "zcdp": "Bun & Steinke 2016, Lemma 2.3 (ρ_i-zCDP parts compose to Σρ_i-zCDP; Gaussian: μ²/2, discrete "
    "Gaussian: Δ²/(2σ²), Canonne, Kamath & Steinke 2020 Thm 4), converted by CKS20 Prop. 12 (Balle et al. 2020 "
    "Thm 21)",
    "pld": "Zhu, Dong & Wang 2022, Thm 10 (dominating pairs compose; PLD by FFT, dpspec.accounting.pld)",
}

#: the dominating pair of each kind of part in a PLD composition (the theorem the certificate states for it)
PAIR_THEOREMS = {
    "laplace": PLD.THEOREM_LAPLACE,
    "discrete_laplace": PLD.THEOREM_DLAPLACE,
    "discrete_gaussian": PLD.THEOREM_DGAUSS,
    "approx_dp": PLD.THEOREM_APPROX_DP + "; partition selection is (ε, δ)-DP: PROOF.md §3.3 of the statistics "
    "family (Korolova et al. 2009; Wilson et al. 2020 §3)",
    "gaussian": PLD.THEOREM_GAUSSIAN + "; the μ-GDP parts as one pair with μ = √Σμ_i² (Dong, Roth & Su 2022 Cor. 3.3)",
}


@dataclass
class Design:
    """What a release's certificate states, from the IR and its (ε, δ) alone."""

    noise: str
    function: str
    column: str | None
    bounds: tuple[float, float] | None
    sensitivity: float
    scale: float
    epsilon: float  # the budget it was designed for
    delta: float
    count_scale: float | None = None
    count_sensitivity: float | None = None
    threshold: float | None = None
    by: str | None = None
    keys: tuple[str, ...] | None = None
    where: ir.Filter | None = None
    q: float | None = None
    grid: int = 0
    n: int | None = None
    pure_eps: float = 0.0
    mu: float = 0.0
    approx_delta: float = 0.0
    derivation: str = ""
    error_95: float = 0.0
    expected_abs_error: float = 0.0
    count_error_95: float | None = None
    #: expected squared error at ε = 1 in units of Δ² (summed over coordinates): ``split optimal``'s cost
    unit_cost: float = 1.0
    components: list[tuple[str, float]] = field(default_factory=list)  # (noise, ε) of each pure component

    @property
    def dimension(self) -> int:
        return len(self.keys) if self.keys is not None else 1

    def epsilon_at(self, delta: float) -> float:
        """Certified ε at δ (inf where δ is below what the release needs). A discrete Gaussian release: its
        μ-GDP ε(δ) where the profile check proves it (``accountant.discrete_gaussian_epsilon``); a discrete
        Gaussian mean's two halves compose by their exact pairs or zCDP (``composed_bounds``), never as μ-GDP."""
        if delta < self.approx_delta or (self.mu and delta <= self.approx_delta):
            return math.inf
        if self.noise == "discrete_gaussian":
            if self.count_scale is not None:
                return min(composed_bounds([part_numbers(self)], delta))
            return A.discrete_gaussian_epsilon(self.scale, int(self.sensitivity), self.mu, delta)
        return A.compose([self.pure_eps], [self.mu] if self.mu else [], delta - self.approx_delta)


def _selection_delta(noise: str, thr: float, b: float) -> float:
    """P[1 + X ≥ T]: the probability that a key held by one record only is released."""
    if noise == "laplace":
        return math.exp(-(thr - 1) / b) / 2
    return math.exp(-(thr - 1) / b) / (1 + math.exp(-1 / b))


def _formulas(dz: Design, points) -> list:
    from dpspec.compiler import formulas as F
    from dpspec.families.statistics import formulas as own

    out = []
    if dz.noise == "exponential":
        out.append(
            F.formula("exponential_epsilon", own.EXPONENTIAL_EPSILON, {"Delta": 1.0, "b": dz.scale}, value=dz.pure_eps)
        )
    elif dz.noise in A.PURE:
        parts = [(dz.sensitivity, dz.scale)] + ([(1.0, dz.count_scale)] if dz.count_scale is not None else [])
        for sens, b in parts:
            out.append(
                F.formula("pure_dp_epsilon", F.PURE_DP_EPSILON, {"Delta": sens, "b": b}, value=A.pure_epsilon(sens, b))
            )
    elif not dz.approx_delta and not (
        dz.noise == "discrete_gaussian" and (dz.count_scale is not None or points[0].delta < A.DG_PROFILE_FLOOR)
    ):
        out.append(
            F.formula(
                "delta_of_epsilon",
                F.ANALYTIC_GAUSSIAN_DELTA,
                {"mu": dz.mu, "epsilon": points[0].epsilon},
                value=GR.delta_of_epsilon(points[0].epsilon, dz.mu),
            )
        )
    if dz.threshold is not None:
        name = f"selection_delta_{dz.noise}"
        out.append(
            F.formula(
                name,
                own.FORMULAS[name],
                {"T": dz.threshold, "b": dz.scale},
                value=_selection_delta(dz.noise, dz.threshold, dz.scale) * (1 + 1e-12),
            )
        )
    return out


def _integer_valued(fn: str, bounds) -> bool:
    return fn == "count" or (bounds is not None and all(float(b).is_integer() for b in bounds))


def choose_noise(mechanism: str, fn: str, by_without_keys: bool) -> tuple[str, ...]:
    """The noises ``auto`` picks from (the one of the others)."""
    if fn == "quantile":
        return ("exponential",)
    if mechanism != "auto":
        return (mechanism,)
    if by_without_keys:
        return ("discrete_laplace",)
    return ("discrete_laplace" if fn == "count" else "laplace", "gaussian")


def design(
    ctx: Context | None, r: ir.Release, epsilon: float, delta: float, n: int | None = None, planning: bool = False
) -> Design:
    """The release's noise and numbers for the budget (ε, δ): the lowest expected |error| among the noises
    its mechanism allows (``auto``), each calibrated so the release is (ε, δ)-DP."""
    q = r.query
    assert q is not None  # a statistics release states its query (DPS155)
    fn = q.function
    column = q.columns[0] if q.columns else None
    bounds = tuple(map(float, q.bounds[0])) if q.bounds else None
    selection = q.by is not None and q.keys is None
    use_n = n if (fn == "mean" and n is not None and q.by is None and q.where is None) else None
    best = None
    for noise in choose_noise(r.mechanism, fn, selection):
        d = _design_one(noise, fn, column, bounds, q, epsilon, delta, use_n, selection, planning)
        if best is None or d.expected_abs_error < best.expected_abs_error:
            best = d
    assert best is not None  # choose_noise names at least one noise
    return best


def _dg(sigma: float, sens: int, planning: bool) -> tuple[float, float]:
    """The discrete Gaussian's (σ, certified μ); while planning a split, the continuous (σ, Δ/σ) — an upper
    bound on the μ it will certify (the margin only lowers μ), so a plan meeting the target is met."""
    return (sigma, sens / sigma) if planning else A.discrete_gaussian(sigma, sens)


def _dg_mean(b: float, bc: float, sens: int, eps: float, delta: float, planning: bool):
    """(σ, σ_count, Δ/σ, 1/σ_count) of a discrete Gaussian mean's two halves, from the continuous calibration
    (b, bc). Their composition is certified by their exact pairs (PLD) or zCDP (``Design.epsilon_at``),
    never by μ-GDP, so no profile margin is needed: the σs are raised together by 0.2 % steps until the
    certified composition meets ε (the discrete Gaussian's δ(0) exceeds the continuous one by ~1/(24σ²), and
    the PLD's grid rounding costs up to ~0.1 % of ε). The μs are the zCDP ones (CKS20 Thm 4: the RDP curve
    α μ²/2), not a GDP claim."""
    if not planning:
        for _ in range(400):
            parts = [("discrete_gaussian", b, float(sens), bc, 1.0, 0.0, 0.0, 0.0)]
            if min(composed_bounds(parts, delta)) <= eps:
                break
            b, bc = b * 1.002, bc * 1.002
        else:
            raise ArithmeticError("the discrete Gaussian mean could not be calibrated")
    return b, bc, math.nextafter(sens / b, math.inf), math.nextafter(1.0 / bc, math.inf)


def _scales(noise: str, sens: float, eps: float, delta: float, planning: bool = False) -> tuple[float, float, float]:
    """(scale, pure ε, μ) of one noise for one answer of sensitivity Δ at (ε, δ)."""
    if noise in A.PURE:
        b = A.pure_scale(sens, eps)
        return b, A.pure_epsilon(sens, b), 0.0
    sigma = A.gaussian_sigma(sens, eps, delta)
    if noise == "gaussian":
        return sigma, 0.0, sens / sigma
    sigma, mu = _dg(sigma, int(sens), planning)  # certified μ-GDP with a margin (accountant)
    return sigma, 0.0, mu


def _design_one(noise, fn, column, bounds, q, eps, delta, n, selection, planning=False) -> Design:
    lo, hi = bounds if bounds is not None else (0.0, 0.0)
    big = max(abs(lo), abs(hi))
    common = dict(
        function=fn,
        column=column,
        bounds=bounds,
        epsilon=eps,
        delta=delta,
        by=q.by,
        keys=q.keys,
        where=q.where,
        q=q.q,
        n=n,
    )
    if fn == "quantile":
        grid = int(hi - lo) + 1 if _integer_valued("sum", bounds) and hi - lo + 1 <= QUANTILE_GRID else QUANTILE_GRID
        temp = A.pure_scale(2.0, eps)  # probabilities ∝ exp(u / temp) = exp(ε u / 2): Δu = 1
        e95 = temp * (math.log(grid) + math.log(1 / A.ALPHA))
        return Design(
            noise="exponential",
            sensitivity=1.0,
            scale=temp,
            grid=grid,
            pure_eps=A.pure_epsilon(2.0, temp),
            error_95=e95,
            expected_abs_error=temp * (math.log(grid) + 1),
            unit_cost=(2 * math.log(grid)) ** 2,
            derivation="u(c) = −|#{x < c} − q n| moves by at most max(q, 1 − q) ≤ 1 when one record is "
            "inserted or removed (values clamped to the bounds)",
            components=[("exponential", eps)],
            **common,
        )
    sens = 1.0 if fn == "count" else big
    how = (
        "one record inserted or removed changes "
        + ("the count of its group (one of the declared keys) by 1" if q.by else "the count by 1")
        if fn == "count"
        else f"one record inserted or removed moves the sum{' of its group' if q.by else ''} of values clamped "
        f"to [{lo:g}, {hi:g}] by at most max(|lo|, |hi|) = {big:g}"
    )
    if q.where is not None:
        how += "; the filter keeps or drops a row by its own value, so it changes at most one kept row"
    if selection:
        b, pe, _ = _scales(noise, 1.0, eps, delta)
        thr = 1.0 + b * math.log(1 / (2 * delta)) * (1 + 1e-12)
        if noise != "laplace":  # P[X ≥ k] = r^k / (1 + r) ≤ δ for discrete Laplace X
            thr = 1.0 + math.ceil(math.log(delta * (1 + math.exp(-1 / b))) / (-1 / b))
        while _selection_delta(noise, thr, b) > delta * (1 - 1e-12):
            thr += 1.0
        return Design(
            noise=noise,
            sensitivity=1.0,
            scale=b,
            threshold=thr,
            pure_eps=pe,
            approx_delta=delta,
            error_95=A.error_bound(noise, b),
            expected_abs_error=A.expected_abs_error(noise, b),
            unit_cost=A.variance(noise, b) * eps * eps * 8,
            components=[(noise, eps)],
            derivation=how + "; keys are those whose noisy count reaches the threshold",
            **common,
        )
    if fn == "mean" and n is None:  # noisy sum / noisy count, each with half the budget
        half_eps = eps / 2
        if noise in A.PURE:
            b, pe1, _ = _scales(noise, sens, half_eps, delta)
            bc, pe2, _ = _scales(noise, 1.0, half_eps, delta)
            pe, mu = math.nextafter(pe1 + pe2, math.inf), 0.0
            comps = [(noise, pe1), (noise, pe2)]
        else:
            mu_total = GR.mu_for_target(eps - 2 * GR.ABS_ERROR, delta) * (1 - 1e-12)
            mu_half = mu_total / math.sqrt(2) * (1 - 1e-12)
            b, bc = sens / mu_half * (1 + 1e-12), 1.0 / mu_half * (1 + 1e-12)
            if noise == "discrete_gaussian":
                b, bc, m1, m2 = _dg_mean(b, bc, int(sens), eps, delta, planning)
            else:
                m1, m2 = sens / b, 1.0 / bc
            pe, mu, comps = 0.0, math.sqrt(m1 * m1 + m2 * m2) * (1 + 1e-15), []
        cost = (A.variance(noise, b) + A.variance(noise, bc) * sens * sens) * eps * eps / (sens * sens)
        return Design(
            noise=noise,
            sensitivity=sens,
            scale=b,
            count_scale=bc,
            count_sensitivity=1.0,
            pure_eps=pe,
            mu=mu,
            error_95=A.error_bound(noise, b),
            expected_abs_error=A.expected_abs_error(noise, b),
            count_error_95=A.error_bound(noise, bc),
            unit_cost=cost,
            components=comps,
            derivation=how + "; and the count of kept rows by 1: the mean is the noisy sum over the noisy "
            "count (each with half the budget), clamped to the bounds",
            **common,
        )
    b, pe, mu = _scales(noise, sens, eps, delta, planning)
    dim = len(q.keys) if q.keys is not None else 1
    div = float(n) if (fn == "mean" and n) else 1.0
    if fn == "mean":
        how += f"; the mean divides that sum by the declared dataset_size n = {n}"
    return Design(
        noise=noise,
        sensitivity=sens,
        scale=b,
        pure_eps=pe,
        mu=mu,
        error_95=A.error_bound(noise, b) / div,
        expected_abs_error=A.expected_abs_error(noise, b) / div,
        unit_cost=dim * A.variance(noise, b) * eps * eps / (sens * sens),
        components=[(noise, pe)] if pe else [],
        derivation=how,
        **common,
    )


# --- the release's certificate ----------------------------------------------------------------------


def _rdp(dz: Design, alphas: np.ndarray) -> np.ndarray | None:
    if dz.approx_delta:
        return None
    out = np.array([dz.mu * dz.mu * a / 2 for a in alphas])
    for noise, e in dz.components:
        out += np.array([A.laplace_rdp(a, e) if noise == "laplace" else A.pure_rdp(a, e) for a in alphas])
    return GR.round_up(out, 3)


def _parameters(dz: Design) -> dict[str, Any]:
    dist = {
        "laplace": f"Laplace(b = {dz.scale:.6g})",
        "discrete_laplace": f"discrete Laplace(t = {dz.scale:.6g})",
        "gaussian": f"N(0, σ = {dz.scale:.6g})",
        "discrete_gaussian": f"discrete N(0, σ = {dz.scale:.6g})",
        "exponential": f"exponential mechanism, P(c) ∝ exp(u(c) / {dz.scale:.6g})",
    }[dz.noise]
    p: dict[str, Any] = {
        "distribution": dist,
        "error_unit": "ranks" if dz.noise == "exponential" else "value",
        "noise": dz.noise,
        "scale": dz.scale,
        "sensitivity": dz.sensitivity,
        "error_95": dz.error_95,
        "expected_abs_error": dz.expected_abs_error,
        "pure_epsilon": dz.pure_eps,
        "gdp_mu": dz.mu,
        "approx_delta": dz.approx_delta,
    }
    if dz.count_scale is not None:
        p.update(count_scale=dz.count_scale, count_sensitivity=dz.count_sensitivity, count_error_95=dz.count_error_95)
    if dz.threshold is not None:
        p["threshold"] = dz.threshold
    if dz.by is not None:
        p["by"] = dz.by
    if dz.keys is not None:
        p["keys"] = json.dumps(list(dz.keys), ensure_ascii=False)
    if dz.where is not None:
        p.update(where_column=dz.where.column, where_op=dz.where.op, where_value=dz.where.value)
    if dz.q is not None:
        p.update(q=dz.q, grid=dz.grid)
    return p


_NOISE_TEXT = {
    "laplace": "adds Laplace noise Lap(b), b = Δ/ε, to each answer",
    "discrete_laplace": "adds discrete Laplace noise (P(x) ∝ e^{−|x|/t}, t = Δ/ε) to each integer answer",
    "gaussian": "adds N(0, σ²) to each answer",
    "discrete_gaussian": "adds discrete Gaussian noise N_ℤ(0, σ²) to each integer answer",
    "exponential": "samples a candidate of the bounds' grid with probability ∝ exp(ε u / 2) (exponential mechanism)",
}


def _assumptions(dz: Design) -> list[Assumption]:
    out = [
        Assumption(
            id="sensitivity",
            statement="the runtime evaluates the query itself on the data — filter, "
            "groups, values clamped to the certified bounds — so one record moves one answer by at most "
            f"Δ = {dz.sensitivity:g}: {dz.derivation}",
            source=Source(paper="Dwork & Roth 2014", ref="Def. 3.1 (ℓ1 sensitivity)"),
        )
    ]
    if dz.noise in ("laplace", "gaussian", "exponential"):
        out.append(
            Assumption(
                id="real_arithmetic",
                statement="the noise sampler is treated as exact real-valued "
                "sampling (numpy PCG64; floating-point attacks are out of scope; use a discrete "
                "mechanism to remove this assumption)",
                source=Source(paper="Mironov 2012", ref="On significance of the least significant bits"),
            )
        )
    else:
        out.append(
            Assumption(
                id="exact_sampler",
                statement="the noise is drawn exactly in rational arithmetic from "
                "the operating system's CSPRNG (secrets); integer answers: values are rounded to integers "
                "inside the integer bounds before summing",
                source=Source(paper="Canonne, Kamath & Steinke 2020", ref="Algs. 1–3"),
            )
        )
    out.append(
        Assumption(
            id="fresh_noise",
            statement="the noise is fresh and independent of the data and of other releases",
            source=Source(paper="Dwork & Roth 2014", ref="Thm 3.16"),
        )
    )
    return out


def _query_text(q: ir.BoundedQuery) -> str:
    from dpspec.families.statistics.runtime import StatisticPlan

    w = (q.where.column, q.where.op, q.where.value) if q.where is not None else None
    return StatisticPlan(
        q.function,
        q.columns[0] if q.columns else None,
        q.bounds[0] if q.bounds else None,
        q.by,
        q.keys,
        w,
        q=q.q,
    ).text()


def certificate(ctx: Context, r: ir.Release, dz: Design, alphas) -> TargetCertificate:
    protected, d, _u = _protected(ctx, r)
    g = r.guarantee
    assert isinstance(g, ir.DpGuarantee)  # compile_release refuses any other target (DPS156)
    points = [DpPoint(epsilon=e, delta=dl) for dl in _deltas(g) if math.isfinite(e := dz.epsilon_at(dl))]
    rdp = _rdp(dz, alphas)
    theorems = [THEOREMS[dz.noise if dz.threshold is None else "selection"]]
    if dz.noise == "discrete_gaussian" and dz.count_scale is not None:
        theorems += [THEOREMS["pld"], PAIR_THEOREMS["discrete_gaussian"], THEOREMS["zcdp"]]
    elif dz.components and len(dz.components) > 1 or (dz.count_scale is not None):
        theorems.append(THEOREMS["basic"] if dz.pure_eps else THEOREMS["gdp"])
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=list(map(float, alphas)) if rdp is not None else [],
        rdp_epsilons=list(map(float, rdp)) if rdp is not None else [],
        dp=points,
        epsilon=points[0].epsilon,
        delta=g.delta,
        theorems=theorems,
    )
    if g.epsilon is not None and points[0].epsilon > g.epsilon * (1 + 1e-9):
        _fail(
            "DPS201",
            f"certified ε = {points[0].epsilon:.6g} exceeds the target {g.epsilon:g}",
            r,
            "guarantee",
            hint=_DPS201_HINT,
        )
    q = r.query
    assert q is not None  # a statistics release states its query (DPS155)
    qr = QueryRecord(
        function=q.function,
        columns=list(q.columns),
        bounds=[dz.bounds] if dz.bounds else [],
        dimension=dz.dimension,
        evaluated_on="data",
        sensitivity=dz.sensitivity,
        derived_sensitivity=dz.sensitivity,
        derivation=dz.derivation,
        dataset_size=dz.n,
        data=binding_text(d.data) if isinstance(d, ir.PrivacyUnitDecl) else None,
    )
    desc = _NOISE_TEXT[dz.noise] + (
        "; keys are selected from the data by a noisy-count threshold" if dz.threshold is not None else ""
    )
    method = (
        "pure ε-DP: ε = Σ Δ/b (rounded up), δ = 0"
        if dz.pure_eps and not dz.mu and not dz.approx_delta
        else "analytic Gaussian δ(ε) of μ-GDP in log space, ε by bisection, conservative end"
        if dz.mu
        else "pure ε-DP with a partition-selection δ"
    )
    if dz.noise == "discrete_gaussian":
        method = (
            "the two halves' exact discrete Gaussian pairs composed by PLD (pessimistic, all errors in δ), or "
            "their zCDP by CKS20 Prop. 12, the smaller"
            if dz.count_scale is not None
            else f"analytic Gaussian δ(ε) of μ-GDP in log space where δ ≥ {A.DG_PROFILE_FLOOR:g} (the discrete "
            "Gaussian's profile checked below it on an ε grid), zCDP by CKS20 Prop. 12 below"
        )
    return TargetCertificate(
        name=r.name,
        kind="release",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(name=r.mechanism, description=desc, parameters=_parameters(dz), calibrated=True),
        guarantee=guarantee,
        assumptions=_assumptions(dz),
        formulas=_formulas(dz, points),
        numerics=Numerics(
            method=method,
            abs_error_bound=GR.ABS_ERROR if dz.mu else 0.0,
            alpha_grid=_grid_text(alphas),
            conversion=theorems[0],
            calibration=f"{dz.noise}: scale {dz.scale:.6g} for ε = {dz.epsilon:.6g}"
            + (f", δ = {dz.delta:g}" if dz.mu or dz.approx_delta else ""),
        ),
        query=qr,
    )


# --- data ---------------------------------------------------------------------------------------------


def _table(r: ir.Release, d, bound):
    """The bound table (or None and the name of a `dataset(name)` bound at run time); its columns are
    checked (DPS416, DPS147)."""
    from dpspec.data.bind import DataBindingError, as_table, load_table
    from dpspec.diagnostics import did_you_mean

    b = d.data if isinstance(d, ir.PrivacyUnitDecl) else None
    if b is None:
        return None, None
    if isinstance(b, ir.NamedData) and not (bound and b.name in bound):
        return None, b.name
    try:
        table = as_table(bound[b.name], b.name) if isinstance(b, ir.NamedData) else load_table(b, bound, missing="keep")
    except (DataBindingError, ValueError) as e:
        _fail(
            "DPS418",
            f"cannot load the data of `{d.name}`: {e}",
            d,
            "data",
            hint="bind a table (a dict of columns, a pandas DataFrame or a list of rows) or fix the data file",
        )
    q = r.query
    assert q is not None  # a statistics release states its query (DPS155)
    for c, fld in [(c, "columns") for c in q.columns] + [(q.by, "by")] + [(q.where and q.where.column, "where")]:
        if c and c not in table.columns:
            _fail(
                "DPS416",
                f"the data of `{d.name}` has no column `{c}`",
                q,
                fld,
                hint=did_you_mean(c, table.columns, "column") or f"its columns are: {', '.join(table.columns)}",
            )
    if d.dataset_size is not None and len(table) != d.dataset_size:
        from dpspec.check.rules_conformance import size_mismatch

        msg, hint = size_mismatch(len(table), d.dataset_size, f"`{d.name}`")
        _fail("DPS142", msg, d, "dataset_size", hint=hint)
    for c in q.columns:
        if not table.is_numeric(c):
            _fail(
                "DPS147",
                f"column `{c}` of `{d.name}`'s data is categorical; `{q.function}` reads numbers",
                q,
                "columns",
                hint="use a numeric column, or group by the categorical one (`by = …`)",
            )
    return table, (b.name if isinstance(b, ir.NamedData) else None)


def compile_release(ctx: Context, r: ir.Release, data) -> CompiledTarget:
    from dpspec.families.statistics.runtime import StatisticRelease

    _p, d, _u = _protected(ctx, r)
    g = r.guarantee
    if not isinstance(g, ir.DpGuarantee) or g.epsilon is None:  # also a check rule (DPS156)
        _fail(
            "DPS156",
            f"release `{r.name}` needs a target dp(epsilon = …, delta = …)",
            r,
            "guarantee",
            hint="write `guarantee dp(epsilon = 1, delta = 1e-6)`",
        )
    n = d.dataset_size if isinstance(d, ir.PrivacyUnitDecl) else None
    try:
        dz = design(ctx, r, g.epsilon, g.delta, n)
    except (ArithmeticError, ValueError) as e:
        _fail(
            "DPS202",
            f"`{r.name}` cannot be calibrated to ε = {g.epsilon:g}, δ = {g.delta:g}: {e}",
            r,
            "guarantee",
            hint="raise ε or δ, or use another mechanism",
        )
    alphas = _alpha_grid(ctx.spec)
    rec = certificate(ctx, r, dz, alphas)
    table, data_name = _table(r, d, data)
    mech = StatisticRelease.from_certificate(rec, data=table, data_name=data_name)
    rdp = _rdp(dz, alphas)
    return CompiledTarget(r.name, "release", rec, mech, alphas if rdp is not None else None, rdp, gaussian_mu=None)


# --- composition ------------------------------------------------------------------------------------


def part_numbers(p) -> tuple:
    """(noise, scale, Δ, count scale, count Δ, pure ε, μ, selection δ) of a part's certificate parameters
    (a dict) or of its design (attributes)."""
    keys = (
        "noise",
        "scale",
        "sensitivity",
        "count_scale",
        "count_sensitivity",
        "pure_epsilon",
        "gdp_mu",
        "approx_delta",
    )
    if isinstance(p, dict):
        return tuple(p.get(k) for k in keys)
    return (p.noise, p.scale, p.sensitivity, p.count_scale, p.count_sensitivity, p.pure_eps, p.mu, p.approx_delta)


def _basic_blocks(parts: list[tuple]) -> tuple[list[float], list[float], list[float]]:
    """(pure ε, Gaussian μ, discrete Gaussian ρ) of the parts (``part_numbers`` tuples): a discrete Gaussian
    part enters as zCDP, ρ = Δ²/(2σ²) per half (CKS20 Thm 4), never by its μ (PROOF.md §3.4)."""
    pure, mus, rhos = [], [], []
    for noise, b, sens, cb, cs, pe, mu, _ad in parts:
        pure.append(float(pe))
        if noise == "discrete_gaussian":
            rho = A.discrete_gaussian_rho(b, sens)
            if cb is not None:
                rho += A.discrete_gaussian_rho(cb, cs or 1.0)
            rhos.append(rho)
        elif float(mu) > 0:
            mus.append(float(mu))
    return pure, mus, rhos


def _pld_inputs(parts: list[tuple]) -> tuple[list[tuple], list[float], list[tuple[int, str]]]:
    """(pairs, Gaussian μs, (part index, kind) of each pair) of the parts for ``accountant.pld_compose``."""
    pairs, mus, owners = [], [], []
    for i, p in enumerate(parts):
        noise, b, sens, cb, cs, pe, mu, ad = p
        if noise == "gaussian":
            mus.append(float(mu))
            owners.append((i, "gaussian"))
            continue
        for q in A.pld_pairs(noise, b, sens, cb, cs, float(pe), float(ad)):
            pairs.append(q)
            owners.append((i, q[0]))
    return pairs, mus, owners


def composed_bounds(parts: list[tuple], delta: float) -> tuple[float, float]:
    """(basic, PLD): two certified ε at δ of the parts' adaptive composition (``part_numbers`` tuples);
    inf when δ does not cover the partition selections.

    basic: the partition-selection δs are spent first; pure parts (selections' ε included) add, Gaussian
    parts combine as μ-GDP, or with discrete Gaussian parts all of these in zCDP (accountant.compose).
    PLD: every part's dominating pair (discrete Gaussian: its exact pair; partition selection: the
    four-output pair of its (ε, δ)) composed at δ (accountant.pld_compose). Both are upper bounds; the
    certificate takes the smaller."""
    pure, mus, rhos = _basic_blocks(parts)
    spent = math.fsum(float(p[7]) for p in parts)
    rest = delta - spent * (1 + 1e-12)
    if rest < 0 or ((mus or rhos) and rest <= 0):
        return math.inf, math.inf
    basic = A.compose(pure, mus, rest, rhos)
    if len(parts) < 2 and not any(p[3] is not None for p in parts):  # nothing to compose
        return basic, math.inf
    pairs, gmus, _ = _pld_inputs(parts)
    return basic, A.pld_compose(pairs, gmus, delta)


def pair_records(names: list[str], parts: list[tuple], delta: float) -> tuple[str, list[str], list]:
    """What a composition certificate states about its PLD bound: each part's dominating pair (text), the
    theorems of those pairs, and the truncation bound of each discrete Gaussian pair at δ as a formula
    (``verify`` re-evaluates it at 40 digits)."""
    from dpspec.compiler import formulas as F
    from dpspec.families.statistics import formulas as own

    pairs, gmus, owners = _pld_inputs(parts)
    texts, theorems = [], []
    labels = {
        "laplace": "Lap(0, b) vs Lap(Δ, b)",
        "discrete_laplace": "DLap(0, t) vs DLap(Δ, t)",
        "discrete_gaussian": "N_Z(0, σ²) vs N_Z(Δ, σ²)",
        "approx_dp": "(ε, δ)-DP four-output pair",
    }
    k = 0
    for i, kind in owners:
        if kind == "gaussian":
            texts.append(f"{names[i]}: μ-GDP, one Gaussian pair with the other μ-GDP parts (μ = {parts[i][6]:.6g})")
        else:
            _, a, b = pairs[k]
            k += 1
            what = {"approx_dp": f"ε = {a:.6g}, δ = {b:.6g}", "discrete_gaussian": f"σ = {a:.6g}, Δ = {b:g}"}.get(
                kind, f"scale {a:.6g}, Δ = {b:g}"
            )
            label = labels.get(kind, kind)
            if kind == "discrete_laplace" and parts[i][0] != "discrete_laplace":
                label = "randomized response with ε = 1/t, dominating any ε-DP mechanism"
            texts.append(f"{names[i]}: {kind} pair ({label}; {what})")
        if PAIR_THEOREMS[kind] not in theorems:
            theorems.append(PAIR_THEOREMS[kind])
    formulas = [
        F.formula("discrete_gaussian_tail_bound", own.DISCRETE_GAUSSIAN_TAIL_BOUND, {"K": K, "s": sg}, value=bound)
        for sg, K, bound in A.pld_truncations(pairs, gmus, delta)
    ]
    return "; ".join(texts), theorems, formulas


def composed_epsilon(parts: list[TargetCertificate], delta: float) -> float:
    """Certified ε at δ of the parts' adaptive composition: the smaller of the basic and the PLD bound
    (``composed_bounds``); inf when δ does not cover the partition selections."""
    return min(composed_bounds([part_numbers(p.mechanism.parameters) for p in parts], delta))


def compose(c: ir.Composition, parts) -> TargetCertificate:
    """The certificate of a composition of statistics releases (all parts of this family)."""
    recs = [p.certificate for p in parts]
    g = c.guarantee
    if not isinstance(g, ir.DpGuarantee):
        _fail(
            "DPS156",
            f"composition `{c.name}` of statistics releases needs a dp(…) guarantee",
            c,
            "guarantee",
            hint="write `guarantee dp(epsilon = 1, delta = 1e-6)`",
        )
    points = [DpPoint(epsilon=e, delta=dl) for dl in _deltas(g) if math.isfinite(e := composed_epsilon(recs, dl))]
    if not points or points[0].delta != g.delta:
        spent = sum(float(r.mechanism.parameters["approx_delta"]) for r in recs)
        _fail(
            "DPS204",
            f"the parts' partition selection spends δ = {spent:g}, more than the composition's δ = {g.delta:g}",
            c,
            "guarantee",
            hint="raise δ, or declare the keys (`keys = [...]`)",
        )
    eps = points[0].epsilon
    if g.epsilon is not None and eps > g.epsilon:
        _fail(
            "DPS204",
            f"the composition's ε = {eps:.6g} exceeds the target {g.epsilon:g}",
            c,
            "guarantee",
            hint="give the parts smaller budgets, or let `split` share the target among them",
        )
    numbers = [part_numbers(r.mechanism.parameters) for r in recs]
    basic, pld = composed_bounds(numbers, float(g.delta))
    pair_text, pair_theorems, formulas = pair_records([r.name for r in recs], numbers, float(g.delta))
    dg = any(p[0] == "discrete_gaussian" for p in numbers)
    theorems = [THEOREMS["basic"], THEOREMS["zcdp" if dg else "gdp"], THEOREMS["pld"], *pair_theorems]
    split = f"; budget split {c.split.kind}" if c.split is not None else ""
    shares = ", ".join(f"{r.name}: ε = {r.guarantee.epsilon:.4g}" for r in recs)
    return TargetCertificate(
        name=c.name,
        kind="compose",
        protected=composed_protected(parts),
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="composition",
            description="sequential composition of " + ", ".join(c.parts) + split,
            parameters={
                "parts": ",".join(c.parts),
                "shares": shares,
                "basic_epsilon": basic,
                "pld_epsilon": pld if math.isfinite(pld) else "n/a",
                "accounting": "pld" if pld < basic else "basic",
                "dominating_pairs": pair_text,
            },
            calibrated=c.split is not None,
        ),
        guarantee=GuaranteeRecord(target=_target(g), dp=points, epsilon=eps, delta=g.delta, theorems=theorems),
        formulas=formulas,
        assumptions=[
            Assumption(
                id="independent_noise",
                statement="the parts use independent randomness; later parts "
                "may depend on earlier outputs (adaptive composition)",
                source=Source(paper="Dwork & Roth 2014", ref="Thm 3.16"),
            )
        ],
        numerics=Numerics(
            method="the smaller of two certified bounds: (basic) pure and selection parts: ε add (rounded up); "
            "Gaussian parts: μ = √Σμ_i², analytic Gaussian ε(δ) at δ less the selection δs, or with discrete "
            "Gaussian parts all in zCDP (ρ = Σμ_i²/2 + ΣΔ_j²/(2σ_j²), CKS20 Prop. 12); (PLD) every part's "
            "dominating pair (Laplace, discrete Laplace, randomized response for other pure parts, the discrete "
            "Gaussian's exact pair with its truncated outputs on the loss +∞, the (ε, δ) four-output pair for a "
            "partition selection, one Gaussian pair for the μ-GDP parts) composed by FFT with pessimistic "
            "discretisation, all errors added to δ",
            abs_error_bound=GR.ABS_ERROR,
            alpha_grid="none",
            conversion=theorems[0],
        ),
    )
