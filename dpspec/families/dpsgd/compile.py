"""Compile a `train` block with `mechanism dpsgd`: per-example clipping, Gaussian noise, subsampled
steps, accounted by the RDP accountants of dpspec.accounting (Poisson, without replacement,
groups). The family's compile function (dpspec.families); moved verbatim from compile.py."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dpspec.certificate.model import (
    Assumption,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    Source,
    TargetCertificate,
)
from dpspec.compiler import formulas as F
from dpspec.compiler.common import (
    _DPS201_HINT,
    CompiledTarget,
    _alpha_grid,
    _deltas,
    _fail,
    _grid_text,
    _notion,
    _protected,
    _rdp_at,
    _smallest_sigma,
    _target,
    certified_epsilon,
    target_epsilon,
)
from dpspec.families.dpsgd.settings import DpsgdSettings
from dpspec.ir import models as ir

if TYPE_CHECKING:
    from dpspec.check.framework import Context


def _dpsgd_plan(ctx: Context, t: ir.Training):
    """Sampling → (scheme name for the accountant, rate, batch size, dataset size, steps). The batch size is
    the public normaliser of the noisy sum (expected batch qN, B, or N for full batch); without it the
    normaliser would be read from the data (DPS160)."""
    st = t.settings_as(DpsgdSettings)
    from dpspec.check.rules import dataset_size

    n = dataset_size(ctx, t)
    s = st.sampling
    batch: float | None
    if isinstance(s, ir.PoissonSampling):
        if s.rate is not None:
            rate = s.rate
        else:  # a rate or an expected batch (DPS113), which needs the dataset size (DPS127)
            assert s.expected_batch is not None and n is not None
            rate = s.expected_batch / n
        batch = s.expected_batch if s.expected_batch is not None else (rate * n if n else None)
        scheme = "poisson"
    elif isinstance(s, ir.WithoutReplacementSampling):
        assert n is not None  # (DPS127)
        rate, batch, scheme = s.batch_size / n, s.batch_size, "without_replacement"
    elif isinstance(s, ir.FullBatch):
        rate, batch, scheme = 1.0, n, "full_batch"
    else:
        assert s is not None  # (a training says how it samples, DPS128)
        _fail(
            "DPS125",
            f"sampling `{s.scheme}` is not covered by the DP-SGD accountants",
            t,
            "sampling",
            hint="use poisson(expected_batch = 256), without_replacement(batch_size = 256) or full_batch",
        )
    if rate > 1:
        _fail("DPS126", f"the sampling rate {rate:g} is above 1", t, "sampling", hint="use a smaller batch")
    if batch is None:
        from dpspec.check.rules_runtime import NORMALISER_HINT

        _fail(
            "DPS160",
            f"`{t.name}` would divide its noisy gradient sum by a batch size read from the data",
            t,
            "sampling",
            hint=NORMALISER_HINT,
        )
    if t.schedule.steps is not None:
        steps = t.schedule.steps
    else:
        assert t.schedule.epochs is not None  # steps or epochs (DPS128)
        per_epoch = (1.0 / rate) if scheme != "full_batch" else 1.0
        steps = max(1, math.ceil(t.schedule.epochs * per_epoch))
    return scheme, rate, batch, n, steps


def _clip_norm(c) -> float:
    if isinstance(c, ir.PerLayerClipping):
        return math.sqrt(sum(x * x for x in c.C))
    return c.C


def compile_target(ctx: Context, t: ir.Training, data) -> CompiledTarget:
    st = t.settings_as(DpsgdSettings)
    from dpspec import accounting as acc

    protected, d, u = _protected(ctx, t)
    scheme, rate, batch, n, steps = _dpsgd_plan(ctx, t)
    K = u.size if u.kind == "group" else 1
    rel = u.relation
    acc_sampling, relation = _accountant_for(t, scheme, rel, K)
    g = t.guarantee
    assert isinstance(g, (ir.DpGuarantee, ir.RdpGuarantee))  # the family's notions (DPS121)
    calibrated = st.noise is None
    alphas = _alpha_grid(ctx.spec)
    acc_name = (
        acc_sampling if acc_sampling == "poisson" else ("wor_substitution" if relation == "substitution" else "wor")
    )
    kw = dict(
        rate=rate, steps=steps, sampling=acc_name, group_size=K, dataset_size=n if acc_name != "poisson" else None
    )

    def curve_at(sigma, orders=alphas):
        return acc.dpsgd_rdp_curve(sigma, alphas=orders, **kw)

    from dpspec.compiler import accountant_selection as DA

    pld_sigma = (
        calibrate_sigma(target_epsilon(g), g.delta, rate, steps, acc_name, K, kw["dataset_size"])
        if calibrated and isinstance(g, ir.DpGuarantee)
        else None
    )
    if pld_sigma is not None:
        sigma = pld_sigma
        cal = (
            "PLD calibration (calibrate_pld_sigma): smallest σ within relative 1e-3 whose certified PLD ε is ≤ the "
            "target; the upper end of the final bracket is used, then min(RDP, PLD) is certified at that σ"
        )
    elif calibrated:
        try:
            if isinstance(g, ir.DpGuarantee):
                sigma = _smallest_sigma(
                    lambda s: acc.dp_from_curve(curve_at(s), g.delta).epsilon,
                    target_epsilon(g),
                    f"epsilon = {g.epsilon:g}",
                )
            else:
                sigma = _smallest_sigma(
                    lambda s: float(curve_at(s, np.array([g.alpha])).rdp[0]),
                    target_epsilon(g),
                    f"epsilon({g.alpha:g}) = {g.epsilon:g}",
                )
        except ValueError as e:
            _fail(
                "DPS202",
                f"cannot reach the target: {e}",
                t,
                "guarantee",
                hint="raise epsilon, train for fewer steps, or sample a smaller fraction per step",
            )
        cal = (
            "bisection on σ for the smallest σ (relative tolerance 1e-6) whose certified ε is ≤ the target; "
            "the upper end of the final bracket is used"
        )
    else:
        assert st.noise is not None and st.noise.noise_multiplier is not None  # a training's noise (DPS124)
        sigma = st.noise.noise_multiplier
        cal = None
    curve = curve_at(sigma)
    points = []
    best_alpha = None
    conv = None
    C = _clip_norm(st.clipping)
    raw_eps = []
    for dl in _deltas(g):
        res = acc.dp_from_curve(curve, dl)
        raw_eps.append(res.epsilon)
        eps = certified_epsilon(res.epsilon, curve.abs_error) if C > 0 else res.epsilon
        points.append(DpPoint(epsilon=eps, delta=dl))
        if best_alpha is None:
            best_alpha, conv = res.best_alpha, res.conversion
    rdp_points, accounting, pld = points, None, None
    if isinstance(g, ir.DpGuarantee):  # certified ε = min over RDP and PLD (dpspec/compiler/accountant_selection.py)
        pld = dpsgd_pld(sigma, rate, steps, acc_name, K, kw["dataset_size"])
        points, accounting = DA.select(
            lambda dl: certified_epsilon(acc.dp_from_curve(curve, dl).epsilon, curve.abs_error),
            [p.delta for p in points],
            pld,
            floor=lambda e: certified_epsilon(e, 0.0),
        )
        pld = pld if accounting.pld is not None else None  # None: PLD could not evaluate it (RDP certifies)
    else:
        accounting = DA.rdp_only(points, note="the guarantee is Rényi DP: the RDP curve is the accountant")
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=list(map(float, curve.alphas)),
        rdp_epsilons=list(map(float, curve.rdp)),
        dp=points,
        best_alpha=best_alpha if isinstance(g, ir.DpGuarantee) else None,
        theorems=[curve.theorem, conv] + ([f"PLD: {pld.theorem}"] if pld is not None else [])
        if isinstance(g, ir.DpGuarantee)
        else [curve.theorem],
    )
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": points[0].epsilon, "delta": g.delta})
        if g.epsilon is not None and points[0].epsilon > g.epsilon:
            _fail(
                "DPS201",
                f"certified ε = {points[0].epsilon:.6g} exceeds the target {g.epsilon:g}",
                t,
                "guarantee",
                hint=_DPS201_HINT,
            )
    else:
        e_alpha = _rdp_at(curve.alphas, curve.rdp, g.alpha)
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": e_alpha})
        if g.epsilon is not None and e_alpha > g.epsilon:
            _fail(
                "DPS201",
                f"certified ε(α) = {e_alpha:.6g} exceeds the target {g.epsilon:g}",
                t,
                "guarantee",
                hint=_DPS201_HINT,
            )
    params = {
        "noise_multiplier": sigma,
        "clip_norm": C,
        "noise_std": sigma * C,
        "sampling": scheme,
        "sample_rate": rate,
        "steps": steps,
        "group_size": K,
    }
    params["batch_size"] = batch
    if accounting is not None:
        params["accountant"] = accounting.accountant
        params.update({f"epsilon_{c.accountant}": c.epsilon for c in accounting.candidates[:2]})
    params["normalizer"] = float(batch)  # the public constant the noisy sum is divided by, at run time too
    if n is not None:
        params["dataset_size"] = n
    if t.schedule.learning_rate is not None:
        params["learning_rate"] = t.schedule.learning_rate
    if t.schedule.momentum is not None:
        params["momentum"] = t.schedule.momentum
    if isinstance(st.clipping, ir.PerLayerClipping):
        params["per_layer_clip_norms"] = ",".join(f"{c:g}" for c in st.clipping.C)
    formulas = _accountant_formulas(acc_name, K, rate, sigma, steps, curve)
    if isinstance(g, ir.DpGuarantee) and raw_eps[0] > 0:  # not when ε is 0 by the TV shortcut (then floored)
        assert best_alpha is not None  # (the conversion at the first δ set it)
        formulas.append(
            F.formula(
                "rdp_to_dp",
                F.BALLE_CONVERSION,
                {"rdp": _rdp_at(curve.alphas, curve.rdp, best_alpha), "alpha": best_alpha, "delta": g.delta},
                value=rdp_points[0].epsilon,
            )
        )
    warnings = []
    if isinstance(g, ir.DpGuarantee) and best_alpha in (float(curve.alphas[0]), float(curve.alphas[-1])):
        warnings.append(f"the optimal order α = {best_alpha:g} is at the edge of the grid; ε may be loose")
    record = TargetCertificate(
        name=t.name,
        kind="train",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="dpsgd",
            description="DP-SGD: clip each per-example gradient to C, sum, add N(0, (σC)² I), over sampled batches",
            parameters=params,
            calibrated=calibrated,
        ),
        guarantee=guarantee,
        assumptions=_dpsgd_assumptions(scheme, K, rel),
        formulas=formulas,
        numerics=Numerics(
            method=curve.method + ("" if pld is None else "; PLD candidate: see accounting.pld"),
            abs_error_bound=float(curve.abs_error),
            alpha_grid=_grid_text(np.asarray(curve.alphas)),
            conversion=conv,
            calibration=cal,
        ),
        warnings=warnings,
        accounting=accounting,
    )
    from dpspec.families.dpsgd.runtime import DpSgd

    mech = DpSgd(
        noise_multiplier=sigma,
        clip_norm=C,
        sampling=scheme,
        sample_rate=rate,
        steps=steps,
        batch_size=batch,
        dataset_size=n,
        learning_rate=t.schedule.learning_rate or 0.1,
        momentum=t.schedule.momentum or 0.0,
        per_layer_clip=tuple(st.clipping.C) if isinstance(st.clipping, ir.PerLayerClipping) else None,
        name=t.name,
        normalizer=float(batch),
        group_size=K,
        relation=relation,
        rdp_alphas=tuple(map(float, curve.alphas)),
        delta=g.delta if isinstance(g, ir.DpGuarantee) else None,
        alpha=None if isinstance(g, ir.DpGuarantee) else g.alpha,
        accountant=accounting.accountant if accounting is not None else "rdp",
        certified=tuple((p.delta, p.epsilon) for p in points) if accounting is not None else (),
    )
    return CompiledTarget(t.name, "train", record, mech, np.asarray(curve.alphas), np.asarray(curve.rdp), pld=pld)


def _accountant_formulas(acc_name: str, K: int, rate: float, sigma: float, steps: int, curve) -> list:
    """The closed forms behind the curve, with the recorded value at a few integer orders where that
    closed form is exactly what was certified (the curve's ``sources`` say which bound won)."""
    on_grid = {
        float(a): (float(v), src)
        for a, v, src in zip(curve.alphas, curve.rdp, curve.sources or ("",) * len(curve.alphas))
    }

    def checks(orders, want):
        return [(a, on_grid[a][0]) for a in orders if a in on_grid and on_grid[a][1] in want]

    ints = (2.0, 4.0, 8.0, 16.0, 32.0)
    if acc_name == "poisson" and K == 1:
        return [
            F.formula(
                "rdp_poisson_sgm_integer_alpha",
                F.POISSON_SGM_INTEGER,
                {"q": rate, "sigma": sigma, "steps": steps},
                checks=checks(ints, ("", "removal")),
            )
        ]
    if acc_name == "poisson":
        out = []
        for a in F.GROUP_REMOVAL_ORDERS:
            c = checks((float(a),), ("removal",))
            if c and (K + 1) ** a <= F.MAX_SUM_TERMS:  # only what verify can re-evaluate within its bound
                out.append(
                    F.formula(
                        f"rdp_group_removal_alpha{a}",
                        F.group_removal(a),
                        {"q": rate, "sigma": sigma, "steps": steps, "K": K},
                        value=c[0][1],
                    )
                )
        return out
    if acc_name == "wor":  # Thm F.3: Poisson SGM at rate q/N with batch sensitivity 2, i.e. σ/2
        return [
            F.formula(
                "rdp_wor_add_remove_integer_alpha",
                F.POISSON_SGM_INTEGER,
                {"q": rate, "sigma": sigma / 2, "steps": steps},
                checks=checks(ints, ("", "removal")),
            )
        ]
    out = []
    wang = checks(ints, ("wang2019_thm9",))
    if wang:
        out.append(
            F.formula(
                "rdp_wor_substitution_wang_thm9",
                F.WANG_THM9,
                {"w": rate, "sigma": sigma, "Delta": 2, "steps": steps},
                checks=wang,
            )
        )
    mix = checks((2.0, 3.0), ("two_mixture",))
    if mix:
        out.append(
            F.formula(
                "rdp_wor_substitution_two_mixture",
                F.TWO_MIXTURE,
                {"w": rate, "sigma": sigma, "Delta": 2, "steps": steps},
                checks=mix,
            )
        )
    return out


def _accountant_for(t: ir.Training, scheme: str, rel: str, K: int) -> tuple[str, str]:
    """Which accountant is valid for (sampling, relation, group size); errors name the gap."""
    if scheme == "poisson":
        if rel != "add_remove":
            _fail(
                "DPS203",
                "Poisson sampling is analysed under insertion/removal, but the unit uses substitution",
                t,
                "sampling",
                hint="declare `relation add_remove` (it implies protection against substitution "
                "at a group of 2), or sample without replacement",
            )
        return "poisson", "add_remove"
    if scheme == "without_replacement":
        if K > 1:
            _fail(
                "DPS203",
                "group privacy with without-replacement sampling is not covered by a tight accountant",
                t,
                "sampling",
                hint="use poisson(...) sampling for a group unit",
            )
        return "without_replacement", rel
    # full batch: a Poisson rate of 1 is the plain Gaussian mechanism composed over steps
    if rel != "add_remove":
        _fail(
            "DPS203",
            "full-batch training is accounted under insertion/removal",
            t,
            "sampling",
            hint="declare `relation add_remove`",
        )
    return "poisson", "add_remove"


def _dpsgd_assumptions(scheme: str, K: int, rel: str) -> list[Assumption]:
    out = [
        Assumption(
            id="per_example_clipping",
            statement="every example's gradient is clipped to ℓ2 norm ≤ C before "
            "summation, so one record changes the sum by at most C",
            source=Source(paper="Abadi et al. 2016", ref="Alg. 1"),
        ),
        Assumption(
            id="noise",
            statement="each step adds fresh N(0, (σC)² I) noise to the clipped sum",
            source=Source(paper="Abadi et al. 2016", ref="Alg. 1"),
        ),
        Assumption(
            id="adaptive_composition",
            statement="RDP adds up over the adaptively chosen steps",
            source=Source(paper="Mironov 2017", ref="Prop. 1"),
        ),
        Assumption(
            id="noise_sampling",
            statement="the noise is treated as exact real-valued Gaussian sampling. By default it is drawn by "
            "torch's generator on the parameters' device (seeded, not cryptographic) in float32 or wider "
            "(float32 for 16-bit models) and added in floating point, whose rounding is outside the analysis; "
            "in secure mode (secure=True) the batches and the noise come from the OS CSPRNG and the noise is "
            "integer noise on a power-of-two grid added exactly to the rounded clipped sum (its scale raised by "
            "at most 2^-10 to cover the rounding), so no output bit depends on the data through a rounding, and "
            "the Box-Muller sampler's law is treated as the rounded Gaussian (docs/training.md)",
            source=Source(paper="Mironov 2012", ref="On significance of the least significant bits"),
        ),
    ]
    if scheme == "poisson":
        out.append(
            Assumption(
                id="poisson_sampling",
                statement="each step's batch contains every record "
                "independently with probability q (batch size is random); the loader samples as "
                "accounted",
                source=Source(paper="Mironov, Talwar & Zhang 2019", ref="§3"),
            )
        )
    elif scheme == "without_replacement":
        out.append(
            Assumption(
                id="wor_sampling",
                statement="each step's batch is a fresh uniformly random subset of "
                "fixed size, drawn independently across steps",
                source=Source(paper="Wang, Balle & Kasiviswanathan 2019", ref="Thm 9 / Schuchardt et al. 2024 App. F"),
            )
        )
    if K > 1:
        out.append(
            Assumption(
                id="group",
                statement=f"the protected group has at most {K} records, and is inserted or removed as a whole",
                source=Source(paper="Schuchardt et al. 2024", ref="Thm 4.1, 4.2"),
            )
        )
    return out


# --- PLD of a DP-SGD run (the candidates of dpspec.compiler.accountant_selection) ---


def pld_sampling(acc_name: str) -> str:
    """dpspec.accounting.dpsgd sampling name → pld_dpsgd sampling name."""
    return {"poisson": "poisson", "wor": "wor", "wor_substitution": "wor_substitution"}[acc_name]


def dpsgd_pld(sigma: float, rate: float, steps: int, acc_name: str, K: int, n: int | None):
    """The PLD of a DP-SGD run (automatic grid), or None where no PLD pair is implemented."""
    from dpspec.accounting.pld_select import dpsgd_pld as build

    return build(sigma, rate, steps, pld_sampling(acc_name), K, n)


def calibrate_sigma(
    target: float, delta: float, rate: float, steps: int, acc_name: str, K: int, n: int | None
) -> float | None:
    """Smallest σ (relative 1e-3) whose certified PLD ε is ≤ target; None when PLD does not apply or
    cannot reach the target (the caller then calibrates with RDP)."""
    from dpspec import accounting as acc

    try:
        return float(
            acc.calibrate_pld_sigma(
                target,
                delta,
                rate,
                steps,
                sampling=pld_sampling(acc_name),
                group_size=K,
                dataset_size=n if acc_name != "poisson" else None,
            )
        )
    except (ValueError, KeyError):
        return None
