"""Calibrate and emit: checked IR → (mechanism objects, certificate).

For each release, training and composition the compiler picks the tightest accountant that is
valid for the declared unit, relation and sampling, solves for the noise when the guarantee
gives a target ε (or reports ε for given noise), and writes one certificate entry. Failures at
this stage (an unreachable target, an accountant that does not cover the configuration) are
diagnostics with a location, like any other spec error, and no certificate is produced.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

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
    QueryRecord,
    Source,
    SpecRecord,
    TargetCertificate,
    Tool,
    sha256_text,
)
from dpspec.check.framework import Context, diag
from dpspec.data import DataAccessError, DataNotFoundError
from dpspec.limits import LimitExceeded, hint as limit_hint, limit, memory_budget
from dpspec.compiler import formulas as F
from dpspec.compiler import gaussian_release as GR
from dpspec.compiler.errors import CompileError, fail as _fail
from dpspec.compiler.sensitivity import column_bounds
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
    pld: Any = None  # dpspec.accounting.Pld of the target when it has one (compositions use it)


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
            with memory_budget():  # an allocation past the limit fails cleanly (DPS009 below)
                check_magnitudes(t)
                compiled[t.name] = _compile_target(ctx, t, data, compiled)
                check_certified_numbers(t, compiled[t.name].certificate)
        except CompileError as e:
            errors.append(e.diagnostic)
        except (OverflowError, ValidationError) as e:
            if isinstance(e, ValidationError) and not _non_finite(e):
                raise
            errors.append(diag("DPS207", f"`{t.name}`: a number of the certificate overflows or is not finite "
                                         f"({_first_error(e)})", t.guarantee, hint=NUMBERS_HINT))
        except DataNotFoundError as e:
            d = ctx.resolve_protects(t)
            errors.append(diag("DPS419", f"the data of `{d.name}` is not available: {e}", d, "data",
                               hint="set DPSPEC_DATA_DIR to the folder holding the datasets, or bind the data "
                                    "at compile time"))
        except DataAccessError as e:
            d = ctx.resolve_protects(t) or t
            errors.append(diag("DPS010", f"the data of `{d.name}` cannot be read: {e}", d, "data", hint=e.hint))
        except LimitExceeded as e:
            d = ctx.resolve_protects(t) if e.name in _DATA_LIMITS else None
            node, field = (d, "data") if d is not None else (t, None)
            errors.append(diag("DPS009", f"`{t.name}`: {e.message}", node, field, hint=e.hint))
        except MemoryError:
            errors.append(diag("DPS009", f"`{t.name}` needs more memory than the limit of "
                               f"{limit('memory_mb'):,} MB", t, hint=limit_hint("memory_mb")))
        except _INPUT_FAILURES as e:
            # the last line of defence: bad input that no stage turned into a diagnostic of its own
            # (a bug to fix with a precise rule, but never a traceback and never a certificate)
            errors.append(diag("DPS011", f"`{t.name}` cannot be compiled from this input: {type(e).__name__}: "
                               f"{_short(e)}", t,
                               hint="check the values and the data this target uses; if they look right, this is "
                                    "a gap in dpspec's checks (rerun with DPSPEC_DEBUG=1 and report it)"))
            if os.environ.get("DPSPEC_DEBUG"):
                raise
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


def _compile_target(ctx: Context, t, data, compiled: dict) -> CompiledTarget:
    if isinstance(t, ir.Release):
        return _compile_release(ctx, t, data)
    if isinstance(t, ir.Training):
        return _compile_training(ctx, t, data)
    return _compile_composition(ctx, t, compiled)


# DPS201 is a safety net: calibration aims below the target, and the certified ε is re-evaluated
_DPS201_HINT = ("no certificate is written; raise the target ε a little, or give the noise explicitly and let "
                "dpspec report ε")
# limits whose size comes from the data (reported at the data binding, not at the target)
_DATA_LIMITS = ("records", "nodes", "columns", "data_file_bytes")
_INPUT_FAILURES = (ValueError, KeyError, IndexError, TypeError, AttributeError, ArithmeticError, RecursionError,
                   MemoryError, AssertionError, UnicodeError, OSError)


def _short(e: BaseException, width: int = 200) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= width else text[:width] + "…"


def compile_text(text: str, name: str = "<string>", **kw) -> Compiled:
    return compile_spec(loads(text, name=name), **kw)


# --- numbers a certificate can hold ----------------------------------------------------------------

#: positive scales and targets (ε, σ, σ/C, C, Δ, bound widths) must lie in this range, so that their
#: squares, products and quotients stay normal doubles
MAGNITUDE_RANGE = (1e-100, 1e100)
#: the smallest certified ε for a mechanism with a nonzero sensitivity (never 0: an upper bound that
#: underflowed or was clamped is recorded as at least this, or the stated error bound if larger)
MIN_CERTIFIED_EPSILON = sys.float_info.min
NUMBERS_HINT = ("bring the noise, clip norm, sensitivity or target closer to 1 (see `dpspec rules DPS205` "
                "and `dpspec rules DPS207`)")


def check_magnitudes(t) -> None:
    """DPS205: every positive scale or target of ``t`` lies in MAGNITUDE_RANGE (zero and negative values
    are other rules' business). DPS206: an (ε, δ) target is above the accountants' resolution."""
    lo, hi = MAGNITUDE_RANGE
    items = [(t.guarantee, "epsilon", getattr(t.guarantee, "epsilon", None), "the target ε")]
    noise = getattr(t, "noise", None)
    if noise is not None:
        items += [(noise, "sigma", noise.sigma, "σ"), (noise, "noise_multiplier", noise.noise_multiplier,
                                                      "the noise multiplier")]
    clip = getattr(t, "clipping", None)
    if clip is not None:
        items += [(clip, "C", c, "the clip norm C") for c in (clip.C if isinstance(clip.C, tuple) else (clip.C,))]
    items.append((t, "sensitivity", getattr(t, "sensitivity", None), "the sensitivity"))
    q = getattr(t, "query", None)
    if q is not None:
        items.append((q, "sensitivity", q.sensitivity, "the sensitivity"))
        for b_lo, b_hi in q.bounds:
            items += [(q, "bounds", abs(b_lo), "a bound"), (q, "bounds", abs(b_hi), "a bound"),
                      (q, "bounds", b_hi - b_lo, "the width of the bounds")]
    for node, field, v, what in items:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and not lo <= v <= hi:
            _fail("DPS205", f"{what} = {v:g} is outside the range dpspec computes in ([{lo:g}, {hi:g}])", node,
                  field, hint="rescale the query or the units so that the number is nearer to 1")
    g = t.guarantee
    if isinstance(g, ir.DpGuarantee) and g.epsilon is not None and 0 < g.epsilon < GR.MIN_TARGET_EPSILON:
        _fail("DPS206", f"the target ε = {g.epsilon:g} is below {GR.MIN_TARGET_EPSILON:g}: the (ε, δ) accountants "
              f"state numerical errors up to {GR.ABS_ERROR:g}, so such a target cannot be certified to its precision",
              g, "epsilon", hint=f"use a target ε of at least {GR.MIN_TARGET_EPSILON:g}")


def certified_epsilon(eps: float, abs_error: float = 0.0) -> float:
    """A certified ε of a mechanism with a nonzero sensitivity: never 0 (an ε clamped at 0 or
    underflowed is recorded as the stated error bound, and at least MIN_CERTIFIED_EPSILON)."""
    return eps if eps > 0 else max(float(abs_error), MIN_CERTIFIED_EPSILON)


_NOISE_KEYS = ("sigma", "sigma2", "noise_multiplier", "noise_std", "amp_sigma")


def _sensitivity_of(rec: TargetCertificate) -> float | None:
    p = rec.mechanism.parameters
    if rec.sensitivity is not None:
        return max([0.0, *rec.sensitivity.deltas])
    for k in ("sensitivity", "h_total", "node_sensitivity", "sensitivity_psi", "clip_norm"):
        v = p.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def check_certified_numbers(t, rec: TargetCertificate) -> None:
    """DPS207, a safety net behind every mechanism: no zero, subnormal or negative noise and no zero ε
    for a nonzero sensitivity (a noise-free, "perfectly private" certificate is always a numerical
    accident)."""
    sens = _sensitivity_of(rec)
    if rec.kind == "compose" or not sens or sens <= 0:
        return
    p = rec.mechanism.parameters
    for k in _NOISE_KEYS:
        v = p.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not v >= sys.float_info.min:
            _fail("DPS207", f"`{t.name}`: the noise {k} = {v!r} is zero or below the normal float range for a "
                  f"nonzero sensitivity ({sens:.3g}); dpspec never certifies zero noise", t.guarantee,
                  hint=NUMBERS_HINT)
    g = rec.guarantee
    zero = [e for e in ([g.epsilon] if g.epsilon is not None else []) + list(g.rdp_epsilons)
            + [d.epsilon for d in g.dp] if not e > 0]
    if zero:
        _fail("DPS207", f"`{t.name}`: a certified ε is 0 for a nonzero sensitivity ({sens:.3g}): the privacy loss "
              "underflowed", t.guarantee, hint=NUMBERS_HINT)


def _non_finite(e: ValidationError) -> bool:
    return any(x.get("type") == "finite_number" for x in e.errors())


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError):
        x = e.errors()[0]
        return f"{'.'.join(map(str, x['loc']))}: {x['msg']}"
    return str(e) or type(e).__name__


# --- shared pieces -------------------------------------------------------------------------------


def _protected(ctx: Context, t) -> tuple[Protected, Any, Any]:
    """What the certificate protects, named as precisely as the analysis covers it: which rows of
    which data (a release's bound data, a training's examples), under which relation."""
    d = ctx.resolve_protects(t)
    if isinstance(d, ir.Scenario):
        u = ir.SecretUnit(scenario=d.name)
        sec = d.secret
        values = f" ∈ {{{', '.join(sec.values)}}}" if sec.values else ""
        desc = f"the value of the secret `{sec.attribute}`{values} of scenario `{d.name}`"
        return Protected(definition=d.name, unit="secret", description=desc), d, u
    u = d.unit
    rel = getattr(u, "relation", None)
    size = getattr(u, "size", None)
    if isinstance(t, ir.Release):
        data = binding_text(d.data)
        of = (f"of the data the release reads ({data}" + (", bound at run time)" if isinstance(d.data, ir.NamedData)
                                                            else ")") if data else
              "of the data handed to release()")
    else:
        of = "of the training data the loader samples from"
    n = f" of n = {d.dataset_size}" if d.dataset_size else ""
    graph = f"graph `{d.data.name}`" if isinstance(d.data, ir.GraphData) else "the graph"
    desc = {
        "record": (f"one record (row) {of}, inserted or removed" if rel == "add_remove" else
                   f"one record (row) {of}, replaced by any other record (the number of records{n} is public)"),
        "group": (f"any group of up to {size} records {of} (e.g. all rows of one person), inserted or removed "
                  "together" if rel == "add_remove" else
                  f"any up to {size} records {of}, replaced by other records (the number of records{n} is public)"),
        "node": f"one node of {graph} with all its incident edges (insertion or removal)",
        "edge": f"one edge of {graph} (insertion or removal; the node set is public)",
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
    Assumption(id="fresh_noise", statement="the noise is a fresh N(0, σ² I) draw independent of the data and of "
               "other releases", source=Source(paper="Balle & Wang 2018", ref="Thm 8")),
    Assumption(id="real_arithmetic", statement="the noise sampler is treated as exact real-valued Gaussian sampling "
               "(floating-point attacks are out of scope unless secure mode is used)",
               source=Source(paper="Mironov 2012", ref="On significance of the least significant bits")),
]


def _sensitivity_assumption(on_data: bool, derivation: str) -> Assumption:
    if on_data:
        return Assumption(id="sensitivity", statement="the runtime evaluates the query itself on values clamped to "
                          f"the certified bounds, so its ℓ2 sensitivity w.r.t. the protected unit is at most Δ: "
                          f"{derivation}", source=Source(paper="Dwork & Roth 2014", ref="Def. 3.8 (ℓ2 sensitivity)"))
    return Assumption(id="sensitivity", statement="the caller computes the answer (release_answer); its ℓ2 "
                      "sensitivity w.r.t. the protected unit is at most the declared Δ — declared by the spec, not "
                      "checked by dpspec", source=Source(paper="Dwork & Roth 2014", ref="Def. 3.8 (ℓ2 sensitivity)"))


def binding_text(b) -> str | None:
    """A data binding as the spec writes it."""
    if b is None:
        return None
    if isinstance(b, ir.CsvData):
        extra = (f", schema = {b.schema_name}" if b.schema_name else "") + (
            f", separator = \"{b.separator}\"" if b.separator else "")
        return f'csv("{b.path}"{extra})'
    if isinstance(b, ir.NamedData):
        return f"dataset({b.name})"
    if isinstance(b, ir.GraphData):
        return f"graph({b.name})"
    return f"synthetic(generator = {b.generator}, size = {b.size}, seed = {b.seed})"


def _release_table(r: ir.Release, d, bound):
    """The table a release's query reads, resolved now when its data is bound: (table or None, the
    name of a `dataset(name)` binding that arrives at run time). Columns and the declared size are
    checked against it (DPS416, DPS147, DPS142); a missing file is DPS419 (raised by the caller)."""
    from dpspec.check.rules_conformance import size_mismatch
    from dpspec.data.bind import DataBindingError, as_table, load_table
    from dpspec.diagnostics import did_you_mean

    b = d.data if isinstance(d, ir.PrivacyUnitDecl) else None
    if b is None:
        return None, None
    if isinstance(b, ir.NamedData) and not (bound and b.name in bound):
        return None, b.name  # checked by the runtime when the data arrives (DPS148)
    try:
        table = as_table(bound[b.name], b.name) if isinstance(b, ir.NamedData) else load_table(b, bound, missing="keep")
    except (DataBindingError, ValueError) as e:  # a malformed file, a wrong schema, an unusable bound object
        _fail("DPS418", f"cannot load the data of `{d.name}`: {e}", d, "data",
              hint="bind a table (a dict of columns, a pandas DataFrame or a list of rows) or fix the data file")
    q = r.query
    for c in q.columns:
        if c not in table.columns:
            _fail("DPS416", f"the data of `{d.name}` has no column `{c}`", q, "columns",
                  hint=did_you_mean(c, table.columns, "column") or f"its columns are: {', '.join(table.columns)}")
        if not table.is_numeric(c):
            _fail("DPS147", f"column `{c}` of `{d.name}`'s data is categorical; `{q.function}` reads numbers", q,
                  "columns", hint="use a numeric column, or encode the categories as numbers before binding the data")
    if d.dataset_size is not None and len(table) != d.dataset_size:
        msg, hint = size_mismatch(len(table), d.dataset_size, f"`{d.name}`")
        _fail("DPS142", msg, d, "dataset_size", hint=hint)
    return table, (b.name if isinstance(b, ir.NamedData) else None)


def _compile_release(ctx: Context, r: ir.Release, data) -> CompiledTarget:
    from dpspec.check.rules_pufferfish import query_dimension
    from dpspec.compiler.sensitivity import evaluated_on_data, release_sensitivity

    if r.mechanism == "swm":
        return _compile_swm(ctx, r, data)
    if r.mechanism != "gaussian":
        _fail("DPS110", f"mechanism `{r.mechanism}` cannot be compiled by this build", r, "mechanism",
              hint="`dpspec rules DPS110` lists the mechanisms this build compiles")
    protected, d, u = _protected(ctx, r)
    n = d.dataset_size if isinstance(d, ir.PrivacyUnitDecl) else None
    sens = release_sensitivity(r, u, n)
    if sens.problem or sens.used is None:
        msg, fld, hint = sens.problem or ("the release's sensitivity cannot be determined", None, None)
        _fail("DPS129", msg, r.query if (fld and r.query is not None and fld != "sensitivity") else r, fld, hint=hint)
    if sens.declared_below_derived:  # also a check-stage rule; never emit such a certificate
        _fail("DPS140", f"the declared sensitivity {sens.declared:g} is below Δ = {sens.derived.value:.6g} that the "
              f"query implies: {sens.derived.statement}", r, "sensitivity",
              hint=f"declare `sensitivity {sens.derived.value:.6g}` or more, or remove it and let dpspec derive it")
    delta_sens = sens.used
    on_data = evaluated_on_data(r, u, n)
    table, data_name = _release_table(r, d, data) if on_data else (None, None)
    from dpspec.compiler import dpsgd_accountants as DA

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
    if not all(math.isfinite(p.epsilon) for p in points):
        _fail("DPS202", f"with σ = {sigma:g} and Δ = {delta_sens:g} (μ = Δ/σ = {mu:.3g}) the release has no finite ε "
              f"at δ = {points[0].delta:g}", r, "noise", hint=f"give a σ of the order of Δ = {delta_sens:g} or more")
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
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": float(GR.rdp_curve([g.alpha], mu)[0])})
    if g.epsilon is not None and guarantee.epsilon is not None and guarantee.epsilon > g.epsilon * (1 + 1e-9):
        _fail("DPS201", f"certified ε = {guarantee.epsilon:.6g} exceeds the target {g.epsilon:g}", r, "guarantee",
              hint=_DPS201_HINT)
    check_alphas = [2.0, 8.0, 32.0]
    formulas = [
        F.formula("rdp_gaussian", F.GAUSSIAN_RDP, {"Delta": delta_sens, "sigma": sigma},
                  checks=[(a, float(GR.rdp_curve(np.array([a]), mu)[0])) for a in check_alphas]),
        F.formula("delta_of_epsilon", F.ANALYTIC_GAUSSIAN_DELTA, {"mu": mu, "epsilon": points[0].epsilon},
                  value=GR.delta_of_epsilon(points[0].epsilon, mu)),
    ]
    dim = query_dimension(r.query)
    mech_params = {"sigma": sigma, "sensitivity": delta_sens, "mu": mu}
    if dim:
        mech_params["dimension"] = dim
    derivation = sens.derived.statement if sens.derived is not None else "declared by the spec"
    if sens.derived is not None:
        fname = F.query_sensitivity_name(r.query.function, u.relation, len(r.query.columns))
        if fname is not None:  # (a sum over more columns than the formula table holds: value only)
            formulas.append(F.formula(fname, sens.derived.formula, sens.derived.variables, value=sens.derived.value))
        if sens.declared is not None and sens.declared > sens.derived.value:
            derivation += f"; the larger declared Δ = {sens.declared:g} is used"
    query_record = None
    if r.query is not None:
        q = r.query
        bounds = column_bounds(q) or []
        query_record = QueryRecord(
            function=q.function, columns=list(q.columns), bounds=[(float(lo), float(hi)) for lo, hi in bounds],
            bins=q.bins, dimension=dim or 1, evaluated_on="data" if on_data else "answer", sensitivity=delta_sens,
            derived_sensitivity=sens.derived.value if sens.derived is not None else None, derivation=derivation,
            dataset_size=n, data=binding_text(d.data) if isinstance(d, ir.PrivacyUnitDecl) else None)
    record = TargetCertificate(
        name=r.name,
        kind="release",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(name="gaussian", description="adds N(0, σ² I) to the query answer",
                                  parameters=mech_params, calibrated=calibrated),
        guarantee=guarantee,
        assumptions=[_sensitivity_assumption(on_data, derivation), *GAUSSIAN_ASSUMPTIONS],
        formulas=formulas,
        numerics=Numerics(method="closed form for ε(α); analytic Gaussian δ(ε) in log space (log_ndtr), "
                                 "ε by bisection, conservative end returned",
                          abs_error_bound=GR.ABS_ERROR, alpha_grid=_grid_text(alphas),
                          conversion="Balle & Wang 2018 Thm 8 (exact privacy profile)", calibration=cal),
        query=query_record,
        accounting=DA.gaussian_record(mu, lambda dl: GR.epsilon_of_delta(mu, dl), [p.delta for p in points]),
    )
    from dpspec.mechanisms.gaussian import GaussianRelease

    mech = GaussianRelease.from_certificate(record, data=table, data_name=data_name)
    return CompiledTarget(r.name, "release", record, mech, alphas, rdp, gaussian_mu=mu,
                          pld=DA.gaussian_release_pld(sigma, delta_sens, getattr(u, "relation", None),
                                                     getattr(u, "size", None) or 1, getattr(u, "kind", "")))


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
        _fail("DPS125", f"sampling `{s.scheme}` is not covered by the DP-SGD accountants", t, "sampling",
              hint="use poisson(expected_batch = 256), without_replacement(batch_size = 256) or full_batch")
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
        _fail("DPS110", f"mechanism `{t.mechanism}` cannot be compiled by this build", t, "mechanism",
              hint="`dpspec rules DPS110` lists the mechanisms this build compiles")
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

    from dpspec.compiler import dpsgd_accountants as DA

    pld_sigma = DA.calibrate_sigma(g.epsilon, g.delta, rate, steps, acc_name, K, kw["dataset_size"]) \
        if calibrated and isinstance(g, ir.DpGuarantee) else None
    if pld_sigma is not None:
        sigma = pld_sigma
        cal = ("PLD calibration (calibrate_pld_sigma): smallest σ within relative 1e-3 whose certified PLD ε is ≤ the "
               "target; the upper end of the final bracket is used, then min(RDP, PLD) is certified at that σ")
    elif calibrated:
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
    C = _clip_norm(t.clipping)
    raw_eps = []
    for dl in _deltas(g):
        res = acc.dp_from_curve(curve, dl)
        raw_eps.append(res.epsilon)
        eps = certified_epsilon(res.epsilon, curve.abs_error) if C > 0 else res.epsilon
        points.append(DpPoint(epsilon=eps, delta=dl))
        if best_alpha is None:
            best_alpha, conv = res.best_alpha, res.conversion
    rdp_points, accounting, pld = points, None, None
    if isinstance(g, ir.DpGuarantee):  # certified ε = min over RDP and PLD (dpspec/compiler/dpsgd_accountants.py)
        pld = DA.dpsgd_pld(sigma, rate, steps, acc_name, K, kw["dataset_size"])
        points, accounting = DA.select(
            lambda dl: certified_epsilon(acc.dp_from_curve(curve, dl).epsilon, curve.abs_error),
            [p.delta for p in points], pld, floor=lambda e: certified_epsilon(e, 0.0))
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
        if isinstance(g, ir.DpGuarantee) else [curve.theorem],
    )
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": points[0].epsilon, "delta": g.delta})
        if g.epsilon is not None and points[0].epsilon > g.epsilon:
            _fail("DPS201", f"certified ε = {points[0].epsilon:.6g} exceeds the target {g.epsilon:g}", t, "guarantee",
                  hint=_DPS201_HINT)
    else:
        e_alpha = _rdp_at(curve.alphas, curve.rdp, g.alpha)
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": e_alpha})
        if g.epsilon is not None and e_alpha > g.epsilon:
            _fail("DPS201", f"certified ε(α) = {e_alpha:.6g} exceeds the target {g.epsilon:g}", t, "guarantee",
                  hint=_DPS201_HINT)
    params = {"noise_multiplier": sigma, "clip_norm": C, "noise_std": sigma * C, "sampling": scheme,
              "sample_rate": rate, "steps": steps, "group_size": K}
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
    if isinstance(t.clipping, ir.PerLayerClipping):
        params["per_layer_clip_norms"] = ",".join(f"{c:g}" for c in t.clipping.C)
    formulas = _accountant_formulas(acc_name, K, rate, sigma, steps, curve)
    if isinstance(g, ir.DpGuarantee) and raw_eps[0] > 0:  # not when ε is 0 by the TV shortcut (then floored)
        formulas.append(F.formula("rdp_to_dp", F.BALLE_CONVERSION,
                                  {"rdp": _rdp_at(curve.alphas, curve.rdp, best_alpha), "alpha": best_alpha,
                                   "delta": g.delta},
                                  value=rdp_points[0].epsilon))
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
        numerics=Numerics(method=curve.method + ("" if pld is None else "; PLD candidate: see accounting.pld"),
                          abs_error_bound=float(curve.abs_error),
                          alpha_grid=_grid_text(np.asarray(curve.alphas)), conversion=conv, calibration=cal),
        warnings=warnings,
        accounting=accounting,
    )
    from dpspec.mechanisms.dpsgd import DpSgd

    mech = DpSgd(noise_multiplier=sigma, clip_norm=C, sampling=scheme, sample_rate=rate, steps=steps,
                 batch_size=batch, dataset_size=n, learning_rate=t.schedule.learning_rate or 0.1,
                 momentum=t.schedule.momentum or 0.0,
                 per_layer_clip=tuple(t.clipping.C) if isinstance(t.clipping, ir.PerLayerClipping) else None,
                 name=t.name, normalizer=float(batch), group_size=K, relation=relation,
                 rdp_alphas=tuple(map(float, curve.alphas)),
                 delta=g.delta if isinstance(g, ir.DpGuarantee) else None,
                 alpha=None if isinstance(g, ir.DpGuarantee) else g.alpha,
                 accountant=accounting.accountant if accounting is not None else "rdp",
                 certified=tuple((p.delta, p.epsilon) for p in points) if accounting is not None else ())
    return CompiledTarget(t.name, "train", record, mech, np.asarray(curve.alphas), np.asarray(curve.rdp), pld=pld)


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
        for a in F.GROUP_REMOVAL_ORDERS:
            c = checks((float(a),), ("removal",))
            if c and (K + 1) ** a <= F.MAX_SUM_TERMS:  # only what verify can re-evaluate within its bound
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


def composed_protected(parts) -> Protected:
    """The unit every part protects (DPS122 makes it one definition), with each part's own reading:
    the same record may sit in a release's bound data and in a training's examples."""
    first = parts[0].certificate.protected
    descs = list(dict.fromkeys(p.certificate.protected.description for p in parts))
    text = descs[0] if len(descs) == 1 else "; ".join(
        f"`{p.name}`: {p.certificate.protected.description}" for p in parts)
    return first.model_copy(update={"description": f"in every part, the same unit of `{first.definition}` — {text}"})



def _compile_composition(ctx: Context, c: ir.Composition, done: dict[str, CompiledTarget]) -> CompiledTarget:
    parts = [done[p] for p in c.parts if p in done]
    if len(parts) != len(c.parts):
        missing = [p for p in c.parts if p not in done]
        _fail("DPS108", f"composition `{c.name}` names parts that were not compiled: {', '.join(missing)}", c, "parts",
              hint="fix the errors reported for those parts; a composition is compiled after its parts")
    if all(p.certificate.mechanism.name == "srpp_sgd" for p in parts):
        from dpspec.compiler.srpp_train import compose_srpp

        return CompiledTarget(c.name, "compose", compose_srpp(c, parts), None)
    g = c.guarantee
    first = parts[0].certificate
    alphas = parts[0].rdp_alphas
    if any(p.rdp_alphas is None or not np.array_equal(p.rdp_alphas, alphas) for p in parts):
        _fail("DPS122", "the parts were accounted on different α grids", c, "parts",
              hint="compose parts certified by the same family of accountants (RDP curves on one grid)")
    rdp = GR.round_up(np.sum([p.rdp_values for p in parts], axis=0), len(parts) + 1)  # sums rounded up
    exact_gaussian = all(p.gaussian_mu is not None for p in parts)
    points = []
    theorems = ["Mironov 2017, Prop. 1 (RDP composition)"]
    best_alpha = None
    if exact_gaussian:
        mu = GR.round_up(math.sqrt(sum(p.gaussian_mu ** 2 for p in parts)), 2 * len(parts) + 2)
        theorems = ["Dong, Roth & Su 2019, Cor. 3.3 (Gaussian mechanisms compose to a Gaussian with μ = √Σμ_i²)",
                    "Balle & Wang 2018, Thm 8 (analytic Gaussian mechanism)"]
        for dl in _deltas(g):
            points.append(DpPoint(epsilon=GR.epsilon_of_delta(mu, dl), delta=dl))
        method = "exact Gaussian composition; analytic Gaussian δ(ε)"
        err = GR.ABS_ERROR
    else:
        for dl in _deltas(g):
            eps, best = _conversion(alphas, rdp, dl)
            points.append(DpPoint(epsilon=certified_epsilon(eps, 0.0) if np.any(rdp > 0) else eps, delta=dl))
            if best_alpha is None:
                best_alpha = best
        theorems.append("Balle et al. 2020, Thm 21 (RDP to (ε, δ))")
        method = "sum of the parts' RDP curves per order"
        err = sum(p.certificate.numerics.abs_error_bound for p in parts)
    from dpspec.compiler import dpsgd_accountants as DA

    pld = DA.compose_pld(parts) if isinstance(g, ir.DpGuarantee) and not exact_gaussian else None
    if exact_gaussian:
        accounting = DA.gaussian_record(mu, lambda dl: GR.epsilon_of_delta(mu, dl), [p.delta for p in points])
    elif isinstance(g, ir.DpGuarantee):  # certified ε = min(RDP, PLD) when every part has a PLD
        floor = (lambda e: certified_epsilon(e, 0.0) if np.any(rdp > 0) else e)
        points, accounting = DA.select(lambda dl: floor(_conversion(alphas, rdp, dl)[0]), [p.delta for p in points],
                                       pld, floor=floor)
        pld = pld if accounting.pld is not None else None
        if pld is not None:
            theorems.append(f"PLD: {pld.theorem}")
            method += "; PLD of the composed dominating pairs (see accounting.pld)"
    else:
        accounting = DA.rdp_only(points)
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
            _fail("DPS204", f"the composition's ε(α) = {e_alpha:.6g} exceeds the target {g.epsilon:g}", c, "guarantee",
                  hint="raise the composition's epsilon, or give its parts more noise")
    record = TargetCertificate(
        name=c.name,
        kind="compose",
        protected=composed_protected(parts),
        notion=_notion(g),
        mechanism=MechanismRecord(name="composition", description="sequential composition of " + ", ".join(c.parts),
                                  parameters={"parts": ",".join(c.parts)}, calibrated=False),
        guarantee=guarantee,
        assumptions=[Assumption(id="independent_noise", statement="the parts use independent randomness; later parts "
                                "may depend on earlier outputs (adaptive composition)",
                                source=Source(paper="Mironov 2017", ref="Prop. 1"))],
        numerics=Numerics(method=method, abs_error_bound=err, alpha_grid=_grid_text(alphas),
                          conversion=theorems[-1] if pld is None else theorems[-2]),
        accounting=accounting,
    )
    return CompiledTarget(c.name, "compose", record, None, alphas, rdp, gaussian_mu=mu if exact_gaussian else None,
                          pld=pld)
