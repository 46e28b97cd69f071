"""Calibrate and emit: checked IR → (mechanism objects, certificate).

For each release, training and composition the compiler picks the tightest accountant that is
valid for the declared unit, relation and sampling, solves for the noise when the guarantee
gives a target ε (or reports ε for given noise), and writes one certificate entry. Failures at
this stage (an unreachable target, an accountant that does not cover the configuration) are
diagnostics with a location, like any other spec error, and no certificate is produced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpspec import __version__
from dpspec.certificate.model import (
    Assumption,
    Certificate,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Notion,
    Numerics,
    Protected,
    Source,
    SpecRecord,
    TargetCertificate,
    Tool,
    sha256_text,
)
from dpspec.check.framework import Context, diag
from dpspec.data import DataNotFoundError
from dpspec.compiler import formulas as F
from dpspec.compiler import gaussian_release as GR
from dpspec.compiler.errors import CompileError, fail as _fail
from dpspec.compiler.sensitivity import derive_sensitivity
from dpspec.diagnostics import Diagnostic, SpecError
from dpspec.frontend import Spec, loads
from dpspec.ir import models as ir

EXTRA_DELTAS = (1e-5, 1e-6, 1e-8, 1e-10)


@dataclass
class CompiledTarget:
    name: str
    kind: str
    certificate: TargetCertificate
    mechanism: Any = None
    # Numbers the compositions need (not part of the certificate's public surface).
    rdp_alphas: np.ndarray | None = None
    rdp_values: np.ndarray | None = None
    gaussian_mu: float | None = None


@dataclass
class Compiled:
    """The result of compiling a spec: runtime mechanisms and the certificate."""

    spec: Spec
    certificate: Certificate
    targets: dict[str, CompiledTarget] = field(default_factory=dict)

    @property
    def mechanism(self):
        """The mechanism object when the spec has exactly one release/training, else a dict by name."""
        mechs = {k: t.mechanism for k, t in self.targets.items() if t.mechanism is not None}
        if len(mechs) == 1:
            return next(iter(mechs.values()))
        return mechs

    @property
    def mechanisms(self) -> dict[str, Any]:
        return {k: t.mechanism for k, t in self.targets.items() if t.mechanism is not None}


def compile_spec(spec: Spec | str, *, data: dict | None = None) -> Compiled:
    """Compile a checked spec. Raises ``SpecError`` (with located diagnostics) on any error."""
    if isinstance(spec, str):
        from dpspec.frontend import load

        spec = load(spec)
    spec.raise_for_errors()
    ctx = Context(spec.ir)
    compiled: dict[str, CompiledTarget] = {}
    errors: list[Diagnostic] = []
    for t in spec.ir.targets():
        try:
            if isinstance(t, ir.Release):
                compiled[t.name] = _compile_release(ctx, t, data)
            elif isinstance(t, ir.Training):
                compiled[t.name] = _compile_training(ctx, t, data)
            else:
                compiled[t.name] = _compile_composition(ctx, t, compiled)
        except CompileError as e:
            errors.append(e.diagnostic)
        except DataNotFoundError as e:
            d = ctx.resolve_protects(t)
            errors.append(diag("DPS419", f"the data of `{d.name}` is not available: {e}", d, "data",
                               hint="set DPSPEC_DATA_DIR to the folder holding the datasets, or bind the data "
                                    "at compile time"))
    if errors:
        raise SpecError(errors, spec.sources)
    text = spec.canonical_text()
    cert = Certificate(
        tool=Tool(version=__version__),
        spec=SpecRecord(source_name=spec.program.root, canonical_text=text, sha256=sha256_text(text)),
        results=[c.certificate for c in compiled.values()],
    ).sealed()
    for c in compiled.values():  # the runtime objects carry the sealed certificate they run under
        bind = getattr(c.mechanism, "bind_certificate", None)
        if callable(bind):
            bind(cert, c.name)
    return Compiled(spec, cert, compiled)


def compile_text(text: str, name: str = "<string>", **kw) -> Compiled:
    return compile_spec(loads(text, name=name), **kw)


# --- shared pieces -------------------------------------------------------------------------------


def _protected(ctx: Context, t) -> tuple[Protected, Any, Any]:
    d = ctx.resolve_protects(t)
    if isinstance(d, ir.Scenario):
        u = ir.SecretUnit(scenario=d.name)
        desc = f"the secret `{d.secret.attribute}` of scenario `{d.name}`"
        return Protected(definition=d.name, unit="secret", description=desc), d, u
    u = d.unit
    rel = getattr(u, "relation", None)
    size = getattr(u, "size", None)
    desc = {
        "record": f"one record ({'insertion or removal' if rel == 'add_remove' else 'substitution'})",
        "group": f"any group of up to {size} records ({'insertion or removal' if rel == 'add_remove' else 'substitution'})",
        "node": "one node with all its incident edges (insertion or removal)",
        "edge": "one edge (insertion or removal)",
    }[u.kind]
    return Protected(definition=d.name, unit=u.kind, relation=rel, group_size=size, description=desc), d, u


def _notion(g) -> Notion:
    if isinstance(g, ir.DpGuarantee):
        return Notion(name="approximate_dp", description="(ε, δ)-differential privacy")
    if isinstance(g, ir.RdpGuarantee):
        return Notion(name="renyi_dp", description="(α, ε)-Rényi differential privacy (Mironov 2017)")
    pre = "sa_" if g.subsampling_aware else ""
    desc = f"{'subsampling-aware ' if pre else ''}{'Average' if g.flavour == 'ave' else 'Joint'} sliced Rényi " \
           "Pufferfish privacy" + (" (on average over the sampling; not plain SRPP)" if pre else "")
    return Notion(name=f"{pre}{g.flavour}_srpp", description=desc)


def _target(g) -> dict:
    out = {"notion": g.notion}
    for k in ("epsilon", "delta", "alpha"):
        v = getattr(g, k, None)
        if v is not None:
            out[k] = v
    return out


def _round_up(x: float) -> float:
    return float(np.nextafter(x, math.inf)) if math.isfinite(x) else x


def _alpha_grid(spec_ir: ir.SpecIR | None = None) -> np.ndarray:
    """The accountant's default orders plus every α a guarantee in the spec names, so that
    ε(α) at a requested order is read exactly and all parts of a composition share one grid."""
    from dpspec import accounting as acc

    grid = set(map(float, acc.DEFAULT_ALPHAS))
    if spec_ir is not None:
        for t in spec_ir.targets():
            a = getattr(t.guarantee, "alpha", None)
            if a is not None and a > 1:
                grid.add(float(a))
    return np.array(sorted(grid))


def _rdp_at(alphas, rdp, alpha: float) -> float:
    idx = np.flatnonzero(np.asarray(alphas) == alpha)
    if not len(idx):
        raise AssertionError(f"order {alpha} is not on the grid")
    return float(np.asarray(rdp)[idx[0]])


def _smallest_sigma(f, target: float, what: str) -> float:
    """Smallest σ (relative tolerance 1e-6) with f(σ) ≤ target, f decreasing in σ; the upper end of
    the final bracket is returned, so f(result) ≤ target always holds."""
    lo, hi = 1e-3, 1.0
    while f(hi) > target:
        lo, hi = hi, hi * 2
        if hi > 1e6:
            raise ValueError(f"no noise multiplier up to 1e6 reaches {what}")
    if f(lo) <= target:
        return lo
    while hi - lo > 1e-6 * hi:
        mid = 0.5 * (lo + hi)
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi


def _conversion(alphas, rdp, delta) -> tuple[float, float]:
    from dpspec import accounting as acc

    eps, best = acc.rdp_to_dp(alphas, rdp, delta)
    return float(eps), float(best)


# --- Gaussian release ----------------------------------------------------------------------------

GAUSSIAN_ASSUMPTIONS = [
    Assumption(id="sensitivity", statement="the query's ℓ2 sensitivity w.r.t. the protected unit is at most Δ",
               source=Source(paper="Dwork & Roth 2014", ref="Def. 3.8 (ℓ2 sensitivity)")),
    Assumption(id="fresh_noise", statement="the noise is a fresh N(0, σ² I) draw independent of the data and of "
               "other releases", source=Source(paper="Balle & Wang 2018", ref="Thm 8")),
    Assumption(id="real_arithmetic", statement="the noise sampler is treated as exact real-valued Gaussian sampling "
               "(floating-point attacks are out of scope unless secure mode is used)",
               source=Source(paper="Mironov 2012", ref="On significance of the least significant bits")),
]


def _compile_release(ctx: Context, r: ir.Release, data) -> CompiledTarget:
    if r.mechanism == "swm":
        return _compile_swm(ctx, r, data)
    if r.mechanism != "gaussian":
        _fail("DPS110", f"mechanism `{r.mechanism}` cannot be compiled by this build", r, "mechanism")
    protected, d, u = _protected(ctx, r)
    n = d.dataset_size if isinstance(d, ir.PrivacyUnitDecl) else None
    delta_sens, problem = derive_sensitivity(r, u, n)
    if problem:
        _fail("DPS129", problem[0], r, problem[1], hint=problem[2])
    g = r.guarantee
    alphas = _alpha_grid(ctx.spec)
    calibrated = r.noise is None
    theorems: list[str] = []
    if calibrated:
        if isinstance(g, ir.DpGuarantee):
            sigma = GR.sigma_for_target(g.epsilon, g.delta, delta_sens)
            cal = "analytic Gaussian: largest μ = Δ/σ with δ(ε; μ) ≤ δ by bisection (relative width 1e-13), σ rounded up"
        else:
            sigma = GR.sigma_for_rdp(g.alpha, g.epsilon, delta_sens)
            cal = "closed form σ = √(α Δ² / (2 ε)), rounded up"
    else:
        sigma = r.noise.sigma
        cal = None
    mu = delta_sens / sigma
    rdp = GR.rdp_curve(alphas, mu)
    points = []
    for dl in _deltas(g):
        points.append(DpPoint(epsilon=GR.epsilon_of_delta(mu, dl), delta=dl))
    theorems.append("Balle & Wang 2018, Thm 8 (analytic Gaussian mechanism, exact δ(ε))")
    theorems.append("Mironov 2017, Prop. 7 (Rényi DP of the Gaussian mechanism)")
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=list(map(float, alphas)),
        rdp_epsilons=list(map(float, rdp)),
        dp=points,
        theorems=theorems,
    )
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": points[0].epsilon, "delta": g.delta})
    else:
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": _round_up(g.alpha * mu * mu / 2)})
    if g.epsilon is not None and guarantee.epsilon is not None and guarantee.epsilon > g.epsilon * (1 + 1e-9):
        _fail("DPS201", f"certified ε = {guarantee.epsilon:.6g} exceeds the target {g.epsilon:g}", r, "guarantee")
    check_alphas = [2.0, 8.0, 32.0]
    formulas = [
        F.formula("rdp_gaussian", F.GAUSSIAN_RDP, {"Delta": delta_sens, "sigma": sigma},
                  checks=[(a, float(GR.rdp_curve(np.array([a]), mu)[0])) for a in check_alphas]),
        F.formula("delta_of_epsilon", F.ANALYTIC_GAUSSIAN_DELTA, {"mu": mu, "epsilon": points[0].epsilon},
                  value=GR.delta_of_epsilon(points[0].epsilon, mu)),
    ]
    dim = r.query.dimension if r.query is not None and r.query.dimension else (
        len(r.query.columns) if r.query is not None and r.query.function in ("sum", "mean") else None)
    mech_params = {"sigma": sigma, "sensitivity": delta_sens, "mu": mu}
    if dim:
        mech_params["dimension"] = dim
    record = TargetCertificate(
        name=r.name,
        kind="release",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(name="gaussian", description="adds N(0, σ² I) to the query answer",
                                  parameters=mech_params, calibrated=calibrated),
        guarantee=guarantee,
        assumptions=GAUSSIAN_ASSUMPTIONS,
        formulas=formulas,
        numerics=Numerics(method="closed form for ε(α); analytic Gaussian δ(ε) in log space (log_ndtr), "
                                 "ε by bisection, conservative end returned",
                          abs_error_bound=GR.ABS_ERROR, alpha_grid=_grid_text(alphas),
                          conversion="Balle & Wang 2018 Thm 8 (exact privacy profile)", calibration=cal),
    )
    from dpspec.mechanisms.gaussian import GaussianRelease

    mech = GaussianRelease(sigma=sigma, sensitivity=delta_sens, name=r.name)
    return CompiledTarget(r.name, "release", record, mech, alphas, rdp, gaussian_mu=mu)


def _compile_swm(ctx: Context, r: ir.Release, data) -> CompiledTarget:
    from dpspec.compiler.swm_release import compile_swm

    record, mech = compile_swm(ctx, r, ctx.resolve_protects(r), data)
    return CompiledTarget(r.name, "release", record, mech)


def _deltas(g) -> list[float]:
    base = [g.delta] if isinstance(g, ir.DpGuarantee) else []
    return base + [d for d in EXTRA_DELTAS if d not in base]


def _grid_text(alphas: np.ndarray) -> str:
    return f"{len(alphas)} orders from {alphas.min():g} to {alphas.max():g} (dpspec.accounting.DEFAULT_ALPHAS)"


# --- DP-SGD ----------------------------------------------------------------------------------------


def _dpsgd_plan(ctx: Context, t: ir.Training):
    """Sampling → (scheme name for the accountant, rate, batch size, dataset size, steps). The batch size is
    the public normaliser of the noisy sum (expected batch qN, B, or N for full batch); without it the
    normaliser would be read from the data (DPS160)."""
    from dpspec.check.rules import dataset_size

    n = dataset_size(ctx, t)
    s = t.sampling
    if isinstance(s, ir.PoissonSampling):
        rate = s.rate if s.rate is not None else s.expected_batch / n
        batch = s.expected_batch if s.expected_batch is not None else (rate * n if n else None)
        scheme = "poisson"
    elif isinstance(s, ir.WithoutReplacementSampling):
        rate, batch, scheme = s.batch_size / n, s.batch_size, "without_replacement"
    elif isinstance(s, ir.FullBatch):
        rate, batch, scheme = 1.0, n, "full_batch"
    else:
        _fail("DPS125", f"sampling `{s.scheme}` is not covered by the DP-SGD accountants", t, "sampling")
    if rate > 1:
        _fail("DPS126", f"the sampling rate {rate:g} is above 1", t, "sampling", hint="use a smaller batch")
    if batch is None:
        from dpspec.check.rules_runtime import NORMALISER_HINT

        _fail("DPS160", f"`{t.name}` would divide its noisy gradient sum by a batch size read from the data",
              t, "sampling", hint=NORMALISER_HINT)
    if t.schedule.steps is not None:
        steps = t.schedule.steps
    else:
        per_epoch = (1.0 / rate) if scheme != "full_batch" else 1.0
        steps = max(1, math.ceil(t.schedule.epochs * per_epoch))
    return scheme, rate, batch, n, steps


def _clip_norm(c) -> float:
    if isinstance(c, ir.PerLayerClipping):
        return math.sqrt(sum(x * x for x in c.C))
    return c.C


def _compile_gcon(ctx: Context, t: ir.Training, data) -> CompiledTarget:
    from dpspec.compiler.gcon_train import compile_gcon

    record, mech = compile_gcon(ctx, t, ctx.resolve_protects(t), data)
    return CompiledTarget(t.name, "train", record, mech)


EXECUTION_SAMPLING = ("every rank draws the same global batch by the declared sampling over the whole dataset "
                      "(shared seed, digest checked at every step) and clips its contiguous shard before the "
                      "all-reduce")
EXECUTION_NOISE = ("N(0, σ²C² I) drawn once per step on rank 0 and added to its share before the all-reduce SUM; "
                   "the other ranks add none")


def _with_execution(c: CompiledTarget, e: ir.Execution) -> CompiledTarget:
    """Record the execution target; every other field was computed without it."""
    from dpspec.certificate.model import ExecutionRecord

    dist = e.kind == "distributed"
    rec = ExecutionRecord(target=e.kind, workers=e.workers if dist else 1, backend=e.backend if dist else "none",
                          sampling=EXECUTION_SAMPLING if dist else "single process",
                          noise=EXECUTION_NOISE if dist else "single process",
                          privacy_analysis="independent of the execution target: computed with it removed")
    c.certificate = c.certificate.model_copy(update={"execution": rec})
    return c


def _compile_relational(ctx: Context, t: ir.Training, data) -> CompiledTarget:
    from dpspec.compiler.relational_train import compile_relational
    from dpspec.data import DataNotFoundError

    d = ctx.resolve_protects(t)
    try:
        record, mech = compile_relational(ctx, t, d, data)
    except DataNotFoundError as e:
        _fail("DPS419", f"the graph of `{d.name}` is not available: {e}", d, "data",
              hint="set DPSPEC_DATA_DIR to the folder holding the datasets")
    return CompiledTarget(t.name, "train", record, mech)


def _compile_srpp(ctx: Context, t: ir.Training, data) -> CompiledTarget:
    from dpspec.compiler.srpp_train import compile_srpp, srpp_dataset_size

    protected, d, _u = _protected(ctx, t)
    record, mech = compile_srpp(ctx, t, protected, srpp_dataset_size(ctx, t, d, data))
    return CompiledTarget(t.name, "train", record, mech)


def _compile_training(ctx: Context, t: ir.Training, data) -> CompiledTarget:
    if t.execution is not None:  # where it runs never changes what it guarantees
        return _with_execution(_compile_training(ctx, t.model_copy(update={"execution": None}), data), t.execution)
    if t.mechanism == "gcon":
        return _compile_gcon(ctx, t, data)
    if t.mechanism == "srpp_sgd":
        return _compile_srpp(ctx, t, data)
    if t.mechanism == "relational_dpsgd":
        return _compile_relational(ctx, t, data)
    if t.mechanism != "dpsgd":
        _fail("DPS110", f"mechanism `{t.mechanism}` cannot be compiled by this build", t, "mechanism")
    from dpspec import accounting as acc

    protected, d, u = _protected(ctx, t)
    scheme, rate, batch, n, steps = _dpsgd_plan(ctx, t)
    K = u.size if u.kind == "group" else 1
    rel = u.relation
    acc_sampling, relation = _accountant_for(t, scheme, rel, K)
    g = t.guarantee
    calibrated = t.noise is None
    alphas = _alpha_grid(ctx.spec)
    acc_name = acc_sampling if acc_sampling == "poisson" else (
        "wor_substitution" if relation == "substitution" else "wor")
    kw = dict(rate=rate, steps=steps, sampling=acc_name, group_size=K,
              dataset_size=n if acc_name != "poisson" else None)

    def curve_at(sigma, orders=alphas):
        return acc.dpsgd_rdp_curve(sigma, alphas=orders, **kw)

    if calibrated:
        try:
            if isinstance(g, ir.DpGuarantee):
                sigma = _smallest_sigma(lambda s: acc.dp_from_curve(curve_at(s), g.delta).epsilon, g.epsilon,
                                        f"epsilon = {g.epsilon:g}")
            else:
                sigma = _smallest_sigma(lambda s: float(curve_at(s, np.array([g.alpha])).rdp[0]), g.epsilon,
                                        f"epsilon({g.alpha:g}) = {g.epsilon:g}")
        except ValueError as e:
            _fail("DPS202", f"cannot reach the target: {e}", t, "guarantee",
                  hint="raise epsilon, train for fewer steps, or sample a smaller fraction per step")
        cal = ("bisection on σ for the smallest σ (relative tolerance 1e-6) whose certified ε is ≤ the target; "
               "the upper end of the final bracket is used")
    else:
        sigma = t.noise.noise_multiplier
        cal = None
    curve = curve_at(sigma)
    points = []
    best_alpha = None
    conv = None
    for dl in _deltas(g):
        res = acc.dp_from_curve(curve, dl)
        points.append(DpPoint(epsilon=res.epsilon, delta=dl))
        if best_alpha is None:
            best_alpha, conv = res.best_alpha, res.conversion
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=list(map(float, curve.alphas)),
        rdp_epsilons=list(map(float, curve.rdp)),
        dp=points,
        best_alpha=best_alpha if isinstance(g, ir.DpGuarantee) else None,
        theorems=[curve.theorem, conv] if isinstance(g, ir.DpGuarantee) else [curve.theorem],
    )
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": points[0].epsilon, "delta": g.delta})
        if g.epsilon is not None and points[0].epsilon > g.epsilon:
            _fail("DPS201", f"certified ε = {points[0].epsilon:.6g} exceeds the target {g.epsilon:g}", t, "guarantee")
    else:
        e_alpha = _rdp_at(curve.alphas, curve.rdp, g.alpha)
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": e_alpha})
        if g.epsilon is not None and e_alpha > g.epsilon:
            _fail("DPS201", f"certified ε(α) = {e_alpha:.6g} exceeds the target {g.epsilon:g}", t, "guarantee")
    C = _clip_norm(t.clipping)
    params = {"noise_multiplier": sigma, "clip_norm": C, "noise_std": sigma * C, "sampling": scheme,
              "sample_rate": rate, "steps": steps, "group_size": K}
    params["batch_size"] = batch
    params["normalizer"] = float(batch)  # the public constant the noisy sum is divided by, at run time too
    if n is not None:
        params["dataset_size"] = n
    if t.schedule.learning_rate is not None:
        params["learning_rate"] = t.schedule.learning_rate
    if t.schedule.momentum is not None:
        params["momentum"] = t.schedule.momentum
    if isinstance(t.clipping, ir.PerLayerClipping):
        params["per_layer_clip_norms"] = ",".join(f"{c:g}" for c in t.clipping.C)
    formulas = _accountant_formulas(acc_name, K, rate, sigma, steps, curve)
    if isinstance(g, ir.DpGuarantee):
        formulas.append(F.formula("rdp_to_dp", F.BALLE_CONVERSION,
                                  {"rdp": _rdp_at(curve.alphas, curve.rdp, best_alpha), "alpha": best_alpha,
                                   "delta": g.delta},
                                  value=points[0].epsilon))
    warnings = []
    if isinstance(g, ir.DpGuarantee) and best_alpha in (float(curve.alphas[0]), float(curve.alphas[-1])):
        warnings.append(f"the optimal order α = {best_alpha:g} is at the edge of the grid; ε may be loose")
    record = TargetCertificate(
        name=t.name,
        kind="train",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(name="dpsgd", description="DP-SGD: clip each per-example gradient to C, sum, add "
                                  "N(0, (σC)² I), over sampled batches", parameters=params, calibrated=calibrated),
        guarantee=guarantee,
        assumptions=_dpsgd_assumptions(scheme, K, rel),
        formulas=formulas,
        numerics=Numerics(method=curve.method, abs_error_bound=float(curve.abs_error),
                          alpha_grid=_grid_text(np.asarray(curve.alphas)), conversion=conv, calibration=cal),
        warnings=warnings,
    )
    from dpspec.mechanisms.dpsgd import DpSgd

    mech = DpSgd(noise_multiplier=sigma, clip_norm=C, sampling=scheme, sample_rate=rate, steps=steps,
                 batch_size=batch, dataset_size=n, learning_rate=t.schedule.learning_rate or 0.1,
                 momentum=t.schedule.momentum or 0.0,
                 per_layer_clip=tuple(t.clipping.C) if isinstance(t.clipping, ir.PerLayerClipping) else None,
                 name=t.name, normalizer=float(batch), group_size=K, relation=relation,
                 rdp_alphas=tuple(map(float, curve.alphas)),
                 delta=g.delta if isinstance(g, ir.DpGuarantee) else None,
                 alpha=None if isinstance(g, ir.DpGuarantee) else g.alpha)
    return CompiledTarget(t.name, "train", record, mech, np.asarray(curve.alphas), np.asarray(curve.rdp))


def _accountant_formulas(acc_name: str, K: int, rate: float, sigma: float, steps: int, curve) -> list:
    """The closed forms behind the curve, with the recorded value at a few integer orders where that
    closed form is exactly what was certified (the curve's ``sources`` say which bound won)."""
    on_grid = {float(a): (float(v), src) for a, v, src in
               zip(curve.alphas, curve.rdp, curve.sources or ("",) * len(curve.alphas))}

    def checks(orders, want):
        return [(a, on_grid[a][0]) for a in orders if a in on_grid and on_grid[a][1] in want]

    ints = (2.0, 4.0, 8.0, 16.0, 32.0)
    if acc_name == "poisson" and K == 1:
        return [F.formula("rdp_poisson_sgm_integer_alpha", F.POISSON_SGM_INTEGER,
                          {"q": rate, "sigma": sigma, "steps": steps}, checks=checks(ints, ("", "removal")))]
    if acc_name == "poisson":
        out = []
        for a in (2, 3):
            c = checks((float(a),), ("removal",))
            if c:
                out.append(F.formula(f"rdp_group_removal_alpha{a}", F.group_removal(a),
                                     {"q": rate, "sigma": sigma, "steps": steps, "K": K}, value=c[0][1]))
        return out
    if acc_name == "wor":  # Thm F.3: Poisson SGM at rate q/N with batch sensitivity 2, i.e. σ/2
        return [F.formula("rdp_wor_add_remove_integer_alpha", F.POISSON_SGM_INTEGER,
                          {"q": rate, "sigma": sigma / 2, "steps": steps}, checks=checks(ints, ("", "removal")))]
    out = []
    wang = checks(ints, ("wang2019_thm9",))
    if wang:
        out.append(F.formula("rdp_wor_substitution_wang_thm9", F.WANG_THM9,
                             {"w": rate, "sigma": sigma, "Delta": 2, "steps": steps}, checks=wang))
    mix = checks((2.0, 3.0), ("two_mixture",))
    if mix:
        out.append(F.formula("rdp_wor_substitution_two_mixture", F.TWO_MIXTURE,
                             {"w": rate, "sigma": sigma, "Delta": 2, "steps": steps}, checks=mix))
    return out


def _accountant_for(t: ir.Training, scheme: str, rel: str, K: int) -> tuple[str, str]:
    """Which accountant is valid for (sampling, relation, group size); errors name the gap."""
    if scheme == "poisson":
        if rel != "add_remove":
            _fail("DPS203", "Poisson sampling is analysed under insertion/removal, but the unit uses substitution",
                  t, "sampling", hint="declare `relation add_remove` (it implies protection against substitution "
                  "at a group of 2), or sample without replacement")
        return "poisson", "add_remove"
    if scheme == "without_replacement":
        if K > 1:
            _fail("DPS203", "group privacy with without-replacement sampling is not covered by a tight accountant",
                  t, "sampling", hint="use poisson(...) sampling for a group unit")
        return "without_replacement", rel
    # full batch: a Poisson rate of 1 is the plain Gaussian mechanism composed over steps
    if rel != "add_remove":
        _fail("DPS203", "full-batch training is accounted under insertion/removal", t, "sampling",
              hint="declare `relation add_remove`")
    return "poisson", "add_remove"


def _dpsgd_assumptions(scheme: str, K: int, rel: str) -> list[Assumption]:
    out = [
        Assumption(id="per_example_clipping", statement="every example's gradient is clipped to ℓ2 norm ≤ C before "
                   "summation, so one record changes the sum by at most C", source=Source(
                       paper="Abadi et al. 2016", ref="Alg. 1")),
        Assumption(id="noise", statement="each step adds fresh N(0, (σC)² I) noise to the clipped sum",
                   source=Source(paper="Abadi et al. 2016", ref="Alg. 1")),
        Assumption(id="adaptive_composition", statement="RDP adds up over the adaptively chosen steps",
                   source=Source(paper="Mironov 2017", ref="Prop. 1")),
    ]
    if scheme == "poisson":
        out.append(Assumption(id="poisson_sampling", statement="each step's batch contains every record "
                              "independently with probability q (batch size is random); the loader samples as "
                              "accounted", source=Source(paper="Mironov, Talwar & Zhang 2019", ref="§3")))
    elif scheme == "without_replacement":
        out.append(Assumption(id="wor_sampling", statement="each step's batch is a fresh uniformly random subset of "
                              "fixed size, drawn independently across steps", source=Source(
                                  paper="Wang, Balle & Kasiviswanathan 2019", ref="Thm 9 / Schuchardt et al. 2024 App. F")))
    if K > 1:
        out.append(Assumption(id="group", statement=f"the protected group has at most {K} records, and is inserted or "
                              "removed as a whole", source=Source(paper="Schuchardt et al. 2024", ref="Thm 4.1, 4.2")))
    return out


# --- compositions ----------------------------------------------------------------------------------


def _compile_composition(ctx: Context, c: ir.Composition, done: dict[str, CompiledTarget]) -> CompiledTarget:
    parts = [done[p] for p in c.parts if p in done]
    if len(parts) != len(c.parts):
        missing = [p for p in c.parts if p not in done]
        _fail("DPS108", f"composition `{c.name}` names parts that were not compiled: {', '.join(missing)}", c, "parts")
    if all(p.certificate.mechanism.name == "srpp_sgd" for p in parts):
        from dpspec.compiler.srpp_train import compose_srpp

        return CompiledTarget(c.name, "compose", compose_srpp(c, parts), None)
    g = c.guarantee
    first = parts[0].certificate
    alphas = parts[0].rdp_alphas
    if any(p.rdp_alphas is None or not np.array_equal(p.rdp_alphas, alphas) for p in parts):
        _fail("DPS122", "the parts were accounted on different α grids", c, "parts")
    rdp = np.sum([p.rdp_values for p in parts], axis=0)
    exact_gaussian = all(p.gaussian_mu is not None for p in parts)
    points = []
    theorems = ["Mironov 2017, Prop. 1 (RDP composition)"]
    best_alpha = None
    if exact_gaussian:
        mu = math.sqrt(sum(p.gaussian_mu ** 2 for p in parts))
        theorems = ["Dong, Roth & Su 2019, Cor. 3.3 (Gaussian mechanisms compose to a Gaussian with μ = √Σμ_i²)",
                    "Balle & Wang 2018, Thm 8 (analytic Gaussian mechanism)"]
        for dl in _deltas(g):
            points.append(DpPoint(epsilon=GR.epsilon_of_delta(mu, dl), delta=dl))
        method = "exact Gaussian composition; analytic Gaussian δ(ε)"
        err = GR.ABS_ERROR
    else:
        for dl in _deltas(g):
            eps, best = _conversion(alphas, rdp, dl)
            points.append(DpPoint(epsilon=eps, delta=dl))
            if best_alpha is None:
                best_alpha = best
        theorems.append("Balle et al. 2020, Thm 21 (RDP to (ε, δ))")
        method = "sum of the parts' RDP curves per order"
        err = sum(p.certificate.numerics.abs_error_bound for p in parts)
    guarantee = GuaranteeRecord(target=_target(g), rdp_alphas=list(map(float, alphas)),
                                rdp_epsilons=list(map(float, rdp)), dp=points,
                                best_alpha=best_alpha, theorems=theorems)
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": points[0].epsilon, "delta": g.delta})
        if g.epsilon is not None and points[0].epsilon > g.epsilon:
            _fail("DPS204", f"the composition's ε = {points[0].epsilon:.6g} exceeds the target {g.epsilon:g}", c,
                  "guarantee", hint="give the parts smaller budgets (or more noise)")
    elif isinstance(g, ir.RdpGuarantee):
        e_alpha = _rdp_at(alphas, rdp, g.alpha)
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": e_alpha})
        if g.epsilon is not None and e_alpha > g.epsilon:
            _fail("DPS204", f"the composition's ε(α) = {e_alpha:.6g} exceeds the target {g.epsilon:g}", c, "guarantee")
    record = TargetCertificate(
        name=c.name,
        kind="compose",
        protected=first.protected,
        notion=_notion(g),
        mechanism=MechanismRecord(name="composition", description="sequential composition of " + ", ".join(c.parts),
                                  parameters={"parts": ",".join(c.parts)}, calibrated=False),
        guarantee=guarantee,
        assumptions=[Assumption(id="independent_noise", statement="the parts use independent randomness; later parts "
                                "may depend on earlier outputs (adaptive composition)",
                                source=Source(paper="Mironov 2017", ref="Prop. 1"))],
        numerics=Numerics(method=method, abs_error_bound=err, alpha_grid=_grid_text(alphas),
                          conversion=theorems[-1]),
    )
    return CompiledTarget(c.name, "compose", record, None, alphas, rdp,
                          gaussian_mu=math.sqrt(sum(p.gaussian_mu ** 2 for p in parts)) if exact_gaussian else None)
