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
from dpspec.accounting import analytic_gaussian as GR
from dpspec.certificate.model import (
    Assumption,
    Certificate,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    Source,
    SpecRecord,
    TargetCertificate,
    Tool,
    sha256_text,
)
from dpspec.check.framework import Context, diag
from dpspec.compiler.common import (  # noqa: F401 - also re-exported under their old home
    _DPS201_HINT,
    EXTRA_DELTAS,
    MIN_CERTIFIED_EPSILON,
    CompiledTarget,
    _alpha_grid,
    _conversion,
    _deltas,
    _grid_text,
    _notion,
    _protected,
    _rdp_at,
    _smallest_sigma,
    _target,
    binding_text,
    certified_epsilon,
    composed_protected,
)
from dpspec.compiler.errors import CompileError
from dpspec.compiler.errors import fail as _fail
from dpspec.data import DataAccessError, DataNotFoundError
from dpspec.diagnostics import Diagnostic, SpecError
from dpspec.frontend import Spec, loads
from dpspec.ir import models as ir
from dpspec.limits import LimitExceeded, limit, memory_budget
from dpspec.limits import hint as limit_hint


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
    assert spec.ir is not None  # (a spec without errors was lowered)
    ctx = Context(spec.ir)
    compiled: dict[str, CompiledTarget] = {}
    errors: list[Diagnostic] = []
    from dpspec.progress import progress

    try:
        shares = split_shares(ctx)
    except CompileError as e:
        raise SpecError([e.diagnostic], spec.sources) from None
    for t in progress(spec.ir.targets(), desc="compile", unit="target"):
        if isinstance(t, ir.Release) and t.name in shares:  # its share of a `compose … split` block's target
            t = t.model_copy(update={"guarantee": shares[t.name]})
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
            errors.append(
                diag(
                    "DPS207",
                    f"`{t.name}`: a number of the certificate overflows or is not finite ({_first_error(e)})",
                    t.guarantee,
                    hint=NUMBERS_HINT,
                )
            )
        except DataNotFoundError as e:
            d = ctx.resolve_protects(t)
            assert d is not None  # data is found through the definition the target protects
            errors.append(
                diag(
                    "DPS419",
                    f"the data of `{d.name}` is not available: {e}",
                    d,
                    "data",
                    hint="set DPSPEC_DATA_DIR to the folder holding the datasets, or bind the data at compile time",
                )
            )
        except DataAccessError as e:
            d = ctx.resolve_protects(t) or t
            errors.append(diag("DPS010", f"the data of `{d.name}` cannot be read: {e}", d, "data", hint=e.hint))
        except LimitExceeded as e:
            d = ctx.resolve_protects(t) if e.name in _DATA_LIMITS else None
            node, field = (d, "data") if d is not None else (t, None)
            errors.append(diag("DPS009", f"`{t.name}`: {e.message}", node, field, hint=e.hint))
        except MemoryError:
            errors.append(
                diag(
                    "DPS009",
                    f"`{t.name}` needs more memory than the limit of {limit('memory_mb'):,} MB",
                    t,
                    hint=limit_hint("memory_mb"),
                )
            )
        except _INPUT_FAILURES as e:
            # the last line of defence: bad input that no stage turned into a diagnostic of its own
            # (a bug to fix with a precise rule, but never a traceback and never a certificate)
            errors.append(
                diag(
                    "DPS011",
                    f"`{t.name}` cannot be compiled from this input: {type(e).__name__}: {_short(e)}",
                    t,
                    hint="check the values and the data this target uses; if they look right, this is "
                    "a gap in dpspec's checks (rerun with DPSPEC_DEBUG=1 and report it)",
                )
            )
            if os.environ.get("DPSPEC_DEBUG"):
                raise
    if errors:
        raise SpecError(_once(errors), spec.sources)
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


def _once(errors: list[Diagnostic]) -> list[Diagnostic]:
    """Each diagnostic once: a data source that cannot be read is reported at its binding, once, however
    many targets read it."""
    seen, out = set(), []
    for d in errors:
        key = (d.rule, d.message, d.span)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def split_shares(ctx: Context) -> dict:
    """The guarantee each part of a ``compose … split`` block is compiled to: the share its family's ``split``
    hook assigns (dpspec.families), planned before any part is compiled."""
    from dpspec.families import family
    from dpspec.families.hooks import load_hook

    out: dict = {}
    for c in ctx.spec.compositions:
        if c.split is None:
            continue
        parts = [r for name in c.parts for r in ctx.spec.releases if r.name == name]
        hooks = {getattr(family(r.mechanism), "split", "") for r in parts}
        if len(parts) != len(c.parts) or len(hooks) != 1 or not next(iter(hooks)):
            _fail(
                "DPS151",
                f"composition `{c.name}` splits its budget, but not all its parts are releases whose "
                "mechanism can take a share",
                c,
                "split",
                hint="list only releases of mechanisms that take a share (`dpspec rules DPS151`)",
            )
        try:
            out.update(load_hook(next(iter(hooks)), "split")(ctx, c, parts))
        except (ArithmeticError, ValueError) as e:  # a share that cannot be calibrated: a located error
            _fail(
                "DPS202",
                f"composition `{c.name}` cannot share its budget among its parts: {_short(e)}",
                c,
                "split",
                hint="raise the target ε or δ, or use fewer parts or other mechanisms",
            )
    return out


def _compile_target(ctx: Context, t, data, compiled: dict) -> CompiledTarget:
    if isinstance(t, ir.Release):
        return _compile_release(ctx, t, data)
    if isinstance(t, ir.Training):
        return _compile_training(ctx, t, data)
    if isinstance(t, ir.Tuning):
        from dpspec.tuning.compile import compile_tuning

        return compile_tuning(ctx, t, data)
    return _compile_composition(ctx, t, compiled)


# limits whose size comes from the data (reported at the data binding, not at the target)
_DATA_LIMITS = ("records", "nodes", "columns", "data_file_bytes")
_INPUT_FAILURES = (
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    ArithmeticError,
    RecursionError,
    MemoryError,
    AssertionError,
    UnicodeError,
    OSError,
)


def _short(e: BaseException, width: int = 200) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= width else text[:width] + "…"


def compile_text(text: str, name: str = "<string>", **kw) -> Compiled:
    return compile_spec(loads(text, name=name), **kw)


# --- numbers a certificate can hold ----------------------------------------------------------------

#: positive scales and targets (ε, σ, σ/C, C, Δ, bound widths) must lie in this range, so that their
#: squares, products and quotients stay normal doubles
from dpspec.compiler.common import MAGNITUDE_RANGE  # noqa: E402 - kept importable from here

NUMBERS_HINT = (
    "bring the noise, clip norm, sensitivity or target closer to 1 (see `dpspec rules DPS205` "
    "and `dpspec rules DPS207`)"
)


def check_magnitudes(t) -> None:
    """DPS205: every positive scale or target of ``t`` lies in MAGNITUDE_RANGE (zero and negative values
    are other rules' business). DPS206: an (ε, δ) target is above the accountants' resolution."""
    lo, hi = MAGNITUDE_RANGE
    items = [(t.guarantee, "epsilon", getattr(t.guarantee, "epsilon", None), "the target ε")]
    own = t.settings if isinstance(t, ir.Training) else t  # a training's noise and clipping are its family's
    noise = getattr(own, "noise", None)
    if noise is not None:
        items += [
            (noise, "sigma", noise.sigma, "σ"),
            (noise, "noise_multiplier", noise.noise_multiplier, "the noise multiplier"),
        ]
    clip = getattr(own, "clipping", None)
    if clip is not None:
        items += [(clip, "C", c, "the clip norm C") for c in (clip.C if isinstance(clip.C, tuple) else (clip.C,))]
    items.append((t, "sensitivity", getattr(t, "sensitivity", None), "the sensitivity"))
    q = getattr(t, "query", None)
    if q is not None:
        items.append((q, "sensitivity", q.sensitivity, "the sensitivity"))
        for b_lo, b_hi in q.bounds:
            items += [
                (q, "bounds", abs(b_lo), "a bound"),
                (q, "bounds", abs(b_hi), "a bound"),
                (q, "bounds", b_hi - b_lo, "the width of the bounds"),
            ]
    for node, setting, v, what in items:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and not lo <= v <= hi:
            _fail(
                "DPS205",
                f"{what} = {v:g} is outside the range dpspec computes in ([{lo:g}, {hi:g}])",
                node,
                setting,
                hint="rescale the query or the units so that the number is nearer to 1",
            )
    g = t.guarantee
    if isinstance(g, ir.DpGuarantee) and g.epsilon is not None and 0 < g.epsilon < GR.MIN_TARGET_EPSILON:
        _fail(
            "DPS206",
            f"the target ε = {g.epsilon:g} is below {GR.MIN_TARGET_EPSILON:g}: the (ε, δ) accountants "
            f"state numerical errors up to {GR.ABS_ERROR:g}, so such a target cannot be certified to its precision",
            g,
            "epsilon",
            hint=f"use a target ε of at least {GR.MIN_TARGET_EPSILON:g}",
        )


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
            _fail(
                "DPS207",
                f"`{t.name}`: the noise {k} = {v!r} is zero or below the normal float range for a "
                f"nonzero sensitivity ({sens:.3g}); dpspec never certifies zero noise",
                t.guarantee,
                hint=NUMBERS_HINT,
            )
    g = rec.guarantee
    zero = [
        e
        for e in ([g.epsilon] if g.epsilon is not None else []) + list(g.rdp_epsilons) + [d.epsilon for d in g.dp]
        if not e > 0
    ]
    if zero:
        _fail(
            "DPS207",
            f"`{t.name}`: a certified ε is 0 for a nonzero sensitivity ({sens:.3g}): the privacy loss underflowed",
            t.guarantee,
            hint=NUMBERS_HINT,
        )


def _non_finite(e: ValidationError) -> bool:
    return any(x.get("type") == "finite_number" for x in e.errors())


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError):
        x = e.errors()[0]
        return f"{'.'.join(map(str, x['loc']))}: {x['msg']}"
    return str(e) or type(e).__name__


# --- dispatch to the families (dpspec.families) ---------------------------------------------------


def _compile_family(ctx: Context, t, data) -> CompiledTarget:
    """Compile ``t`` with the compile function its family declares (dpspec.families)."""
    from dpspec.families import family
    from dpspec.families.hooks import load_hook

    fam = family(t.mechanism)
    if fam is None or not fam.compile:
        _fail(
            "DPS110",
            f"mechanism `{t.mechanism}` cannot be compiled by this build",
            t,
            "mechanism",
            hint="`dpspec rules DPS110` lists the mechanisms this build compiles",
        )
    return load_hook(fam.compile, "compile")(ctx, t, data)


def _compile_release(ctx: Context, r: ir.Release, data) -> CompiledTarget:
    return _compile_family(ctx, r, data)


# --- where a training runs ------------------------------------------------------------------------

EXECUTION_SAMPLING = (
    "every rank draws the same global batch by the declared sampling over the whole dataset "
    "(shared seed, digest checked at every step) and clips its contiguous shard before the "
    "all-reduce"
)
EXECUTION_NOISE = (
    "N(0, σ²C² I) drawn once per step on rank 0 and added to its share before the all-reduce SUM; "
    "the other ranks add none"
)


def _with_execution(c: CompiledTarget, e: ir.Execution) -> CompiledTarget:
    """Record the execution target; every other field was computed without it."""
    from dpspec.certificate.model import ExecutionRecord

    dist = e.kind == "distributed"
    rec = ExecutionRecord(
        target=e.kind,
        workers=e.workers if dist else 1,
        backend=e.backend if dist else "none",
        sampling=EXECUTION_SAMPLING if dist else "single process",
        noise=EXECUTION_NOISE if dist else "single process",
        privacy_analysis="independent of the execution target: computed with it removed",
    )
    c.certificate = c.certificate.model_copy(update={"execution": rec})
    return c


def _compile_training(ctx: Context, t: ir.Training, data) -> CompiledTarget:
    if t.execution is not None:  # where it runs never changes what it guarantees
        return _with_execution(_compile_training(ctx, t.model_copy(update={"execution": None}), data), t.execution)
    return _compile_family(ctx, t, data)


# --- compositions ----------------------------------------------------------------------------------


def _compile_composition(ctx: Context, c: ir.Composition, done: dict[str, CompiledTarget]) -> CompiledTarget:
    parts = [done[p] for p in c.parts if p in done]
    if len(parts) != len(c.parts):
        missing = [p for p in c.parts if p not in done]
        _fail(
            "DPS108",
            f"composition `{c.name}` names parts that were not compiled: {', '.join(missing)}",
            c,
            "parts",
            hint="fix the errors reported for those parts; a composition is compiled after its parts",
        )
    from dpspec.families import family
    from dpspec.families.hooks import load_hook

    names = {p.certificate.mechanism.name for p in parts}
    own = family(next(iter(names))) if len(names) == 1 else None
    if own is not None and own.compose:  # the family composes by its own theorem
        return CompiledTarget(c.name, "compose", load_hook(own.compose, "compose")(c, parts), None)
    hooks = {getattr(family(n), "compose", "") for n in names}
    if len(hooks) == 1 and next(iter(hooks)):  # families sharing one composition theorem
        return CompiledTarget(c.name, "compose", load_hook(next(iter(hooks)), "compose")(c, parts), None)
    g = c.guarantee
    alphas = parts[0].rdp_alphas
    if alphas is None or any(p.rdp_alphas is None or not np.array_equal(p.rdp_alphas, alphas) for p in parts):
        _fail(
            "DPS122",
            "the parts were accounted on different α grids",
            c,
            "parts",
            hint="compose parts certified by the same family of accountants (RDP curves on one grid)",
        )
    curves = [p.rdp_values for p in parts if p.rdp_values is not None]
    assert len(curves) == len(parts)  # a part accounted on an α grid has its curve on it
    rdp = GR.round_up(np.sum(curves, axis=0), len(parts) + 1)  # sums rounded up
    mus = [p.gaussian_mu for p in parts if p.gaussian_mu is not None]
    exact_gaussian = len(mus) == len(parts)
    points = []
    theorems = ["Mironov 2017, Prop. 1 (RDP composition)"]
    best_alpha = None
    if exact_gaussian:
        mu = GR.round_up(math.sqrt(sum(m**2 for m in mus)), 2 * len(parts) + 2)
        theorems = [
            "Dong, Roth & Su 2019, Cor. 3.3 (Gaussian mechanisms compose to a Gaussian with μ = √Σμ_i²)",
            "Balle & Wang 2018, Thm 8 (analytic Gaussian mechanism)",
        ]
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
    from dpspec.compiler import accountant_selection as DA

    pld = DA.compose_pld(parts) if isinstance(g, ir.DpGuarantee) and not exact_gaussian else None
    if exact_gaussian:
        accounting = DA.gaussian_record(mu, lambda dl: GR.epsilon_of_delta(mu, dl), [p.delta for p in points])
    elif isinstance(g, ir.DpGuarantee):  # certified ε = min(RDP, PLD) when every part has a PLD
        floor = lambda e: certified_epsilon(e, 0.0) if np.any(rdp > 0) else e
        points, accounting = DA.select(
            lambda dl: floor(_conversion(alphas, rdp, dl)[0]), [p.delta for p in points], pld, floor=floor
        )
        pld = pld if accounting.pld is not None else None
        if pld is not None:
            theorems.append(f"PLD: {pld.theorem}")
            method += "; PLD of the composed dominating pairs (see accounting.pld)"
    else:
        accounting = DA.rdp_only(points)
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=list(map(float, alphas)),
        rdp_epsilons=list(map(float, rdp)),
        dp=points,
        best_alpha=best_alpha,
        theorems=theorems,
    )
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": points[0].epsilon, "delta": g.delta})
        if g.epsilon is not None and points[0].epsilon > g.epsilon:
            _fail(
                "DPS204",
                f"the composition's ε = {points[0].epsilon:.6g} exceeds the target {g.epsilon:g}",
                c,
                "guarantee",
                hint="give the parts smaller budgets (or more noise)",
            )
    elif isinstance(g, ir.RdpGuarantee):
        e_alpha = _rdp_at(alphas, rdp, g.alpha)
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": e_alpha})
        if g.epsilon is not None and e_alpha > g.epsilon:
            _fail(
                "DPS204",
                f"the composition's ε(α) = {e_alpha:.6g} exceeds the target {g.epsilon:g}",
                c,
                "guarantee",
                hint="raise the composition's epsilon, or give its parts more noise",
            )
    record = TargetCertificate(
        name=c.name,
        kind="compose",
        protected=composed_protected(parts),
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="composition",
            description="sequential composition of " + ", ".join(c.parts),
            parameters={"parts": ",".join(c.parts)},
            calibrated=False,
        ),
        guarantee=guarantee,
        assumptions=[
            Assumption(
                id="independent_noise",
                statement="the parts use independent randomness; later parts "
                "may depend on earlier outputs (adaptive composition)",
                source=Source(paper="Mironov 2017", ref="Prop. 1"),
            )
        ],
        numerics=Numerics(
            method=method,
            abs_error_bound=err,
            alpha_grid=_grid_text(alphas),
            conversion=theorems[-1] if pld is None else theorems[-2],
        ),
        accounting=accounting,
    )
    return CompiledTarget(
        c.name, "compose", record, None, alphas, rdp, gaussian_mu=mu if exact_gaussian else None, pld=pld
    )
