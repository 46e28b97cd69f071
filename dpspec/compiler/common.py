"""Pieces every family's compile function shares: the certificate's notion/target/protected
records, the α grid, σ bisection, the certified-ε floor and the target record. They live here, not in
``compile.py``, so that a family module (``dpspec/families/<family>/compile.py``, …) imports them without
importing the compile driver, which imports the families."""

from __future__ import annotations

import contextvars
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpspec.certificate.model import Notion, Protected, TargetCertificate
from dpspec.compiler.errors import CompileError  # noqa: F401 - shared by the family modules
from dpspec.compiler.errors import fail as _fail  # noqa: F401 - shared by the family modules
from dpspec.ir import models as ir

if TYPE_CHECKING:
    from dpspec.check.framework import Context

EXTRA_DELTAS = (1e-5, 1e-6, 1e-8, 1e-10)


#: positive scales and targets (ε, σ, σ/C, C, Δ, bound widths) must lie in this range (DPS205), so that
#: their squares, products and quotients stay normal doubles
MAGNITUDE_RANGE = (1e-100, 1e100)

#: Set by ``dpspec verify`` only: the σ a certificate records for each calibrated target, by name. A
#: family whose σ search is expensive (relational DP-SGD) recomputes the certificate at that σ instead
#: of searching again; every certified number is still recomputed and must be ≤ the target, so a
#: recorded σ can only be accepted if the guarantee holds at it (and more noise is never less private).
CERTIFIED_SIGMA: contextvars.ContextVar[dict] = contextvars.ContextVar(
    "CERTIFIED_SIGMA",
    default={},  # noqa: B039 - never mutated: verify sets a fresh dict
)


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


# DPS201 is a safety net: calibration aims below the target, and the certified ε is re-evaluated
_DPS201_HINT = (
    "no certificate is written; raise the target ε a little, or give the noise explicitly and let dpspec report ε"
)


#: the smallest certified ε for a mechanism with a nonzero sensitivity (never 0: an upper bound that
#: underflowed or was clamped is recorded as at least this, or the stated error bound if larger)
MIN_CERTIFIED_EPSILON = sys.float_info.min


def certified_epsilon(eps: float, abs_error: float = 0.0) -> float:
    """A certified ε of a mechanism with a nonzero sensitivity: never 0 (an ε clamped at 0 or
    underflowed is recorded as the stated error bound, and at least MIN_CERTIFIED_EPSILON)."""
    return eps if eps > 0 else max(float(abs_error), MIN_CERTIFIED_EPSILON)


def target_epsilon(g: ir.Guarantee) -> float:
    """The ε a target without explicit noise is calibrated to: such a target states one (DPS124)."""
    assert g.epsilon is not None
    return g.epsilon


def _protected(ctx: Context, t) -> tuple[Protected, Any, Any]:
    """What the certificate protects, named as precisely as the analysis covers it: which rows of
    which data (a release's bound data, a training's examples), under which relation."""
    d = ctx.resolve_protects(t)
    u: ir.Unit
    if isinstance(d, ir.Scenario):
        u = ir.SecretUnit(scenario=d.name)
        sec = d.secret
        values = f" ∈ {{{', '.join(sec.values)}}}" if sec.values else ""
        desc = f"the value of the secret `{sec.attribute}`{values} of scenario `{d.name}`"
        return Protected(definition=d.name, unit="secret", description=desc), d, u
    assert d is not None  # the checker resolved what every target protects (DPS108, DPS109)
    u = d.unit
    rel = getattr(u, "relation", None)
    size = getattr(u, "size", None)
    if isinstance(t, ir.Release):
        data = binding_text(d.data)
        of = (
            f"of the data the release reads ({data}"
            + (", bound at run time)" if isinstance(d.data, ir.NamedData) else ")")
            if data
            else "of the data handed to release()"
        )
    else:
        of = "of the training data the loader samples from"
    n = f" of n = {d.dataset_size}" if d.dataset_size else ""
    graph = f"graph `{d.data.name}`" if isinstance(d.data, ir.GraphData) else "the graph"
    desc = {
        "record": (
            f"one record (row) {of}, inserted or removed"
            if rel == "add_remove"
            else f"one record (row) {of}, replaced by any other record (the number of records{n} is public)"
        ),
        "group": (
            f"any group of up to {size} records {of} (e.g. all rows of one person), inserted or removed together"
            if rel == "add_remove"
            else f"any up to {size} records {of}, replaced by other records (the number of records{n} is public)"
        ),
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
    desc = (
        f"{'subsampling-aware ' if pre else ''}{'Average' if g.flavour == 'ave' else 'Joint'} sliced Rényi "
        "Pufferfish privacy" + (" (on average over the sampling; not plain SRPP)" if pre else "")
    )
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


def binding_text(b) -> str | None:
    """A data binding as the spec writes it."""
    if b is None:
        return None
    if isinstance(b, ir.CsvData):
        extra = (f", schema = {b.schema_name}" if b.schema_name else "") + (
            f', separator = "{b.separator}"' if b.separator else ""
        )
        return f'csv("{b.path}"{extra})'
    if isinstance(b, ir.NamedData):
        return f"dataset({b.name})"
    if isinstance(b, ir.GraphData):
        return f"graph({b.name})"
    return f"synthetic(generator = {b.generator}, size = {b.size}, seed = {b.seed})"


def _deltas(g) -> list[float]:
    base = [g.delta] if isinstance(g, ir.DpGuarantee) else []
    return base + [d for d in EXTRA_DELTAS if d not in base]


def _grid_text(alphas: np.ndarray) -> str:
    return f"{len(alphas)} orders from {alphas.min():g} to {alphas.max():g} (dpspec.accounting.DEFAULT_ALPHAS)"


def composed_protected(parts) -> Protected:
    """The unit every part protects (DPS122 makes it one definition), with each part's own reading:
    the same record may sit in a release's bound data and in a training's examples."""
    first = parts[0].certificate.protected
    descs = list(dict.fromkeys(p.certificate.protected.description for p in parts))
    text = (
        descs[0] if len(descs) == 1 else "; ".join(f"`{p.name}`: {p.certificate.protected.description}" for p in parts)
    )
    return first.model_copy(update={"description": f"in every part, the same unit of `{first.definition}` — {text}"})
