"""``compose … split``: one (ε, δ) target shared among statistics releases, calibrated jointly.

The parts carry no guarantee of their own. Each part i gets a weight w_i — ``evenly``: 1; ``weights
(…)``: as written; ``optimal``: w_i = a_i^{1/3}, where a_i is the part's expected squared error at ε = 1
measured in units of its own sensitivity Δ_i² (summed over its coordinates; a quantile's in ranks):
with errors a_i/ε_i², the Lagrange condition of min Σ a_i/ε_i² subject to Σ ε_i = ε gives ε_i ∝ a_i^{1/3}
exactly for pure parts (and to first order for Gaussian ones, whose σ also scales as 1/ε). So
``optimal`` minimises the summed expected squared error *relative to each statistic's sensitivity*
(the error in units of one record's largest effect on it).

The shares are ε_i = c·w_i/Σw·ε. Partition-selection parts spend δ_i = δ/(2k) each (k of them; δ/k
without Gaussian parts) and Gaussian parts are calibrated at the remaining δ. The scalar c is the
largest value (bisection) with the composed ε (``compile.composed_bounds``: the smaller of the basic bound
— pure ε add, μ-GDP parts combine, discrete Gaussian parts in zCDP — and the PLD bound of the parts'
dominating pairs, partition selections and discrete Gaussians by their own pairs) ≤ ε, so the certified
composition meets the target to within 0.1 %; with pure parts only and the basic bound the tighter,
c = 1 − 10⁻¹² and the ε_i add up to the target (with δ > 0 the PLD bound of several pure parts is below
their sum, and c > 1). While planning, a discrete Gaussian part has the continuous calibration's σ (no
profile margin); the scale is then refined on the parts' certified numbers (their σ with the margin a
single release's μ-GDP certificate needs), which is what the composition certifies.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dpspec.families.statistics.compile import composed_bounds, design, part_numbers
from dpspec.ir import models as ir

if TYPE_CHECKING:
    from dpspec.check.framework import Context

_TOL = 1e-3  # the certified ε is within this relative distance below the target


def weights(c: ir.Composition, designs: list) -> list[float]:
    s = c.split
    assert s is not None  # only a composition that splits its budget is planned here
    if s.kind == "weights":
        return [float(w) for w in s.weights]
    if s.kind == "optimal":
        return [max(d.unit_cost, 1e-12) ** (1 / 3) for d in designs]
    return [1.0] * len(designs)


def _n(ctx, r):
    d = ctx.resolve_protects(r)
    return d.dataset_size if isinstance(d, ir.PrivacyUnitDecl) else None


def plan(ctx: Context, c: ir.Composition, releases: list[ir.Release]) -> dict[str, ir.DpGuarantee]:
    """Each part's (ε_i, δ_i) (module doc)."""
    g = c.guarantee
    # a split composition states a target dp(epsilon = …, delta = …) (DPS151)
    assert isinstance(g, ir.DpGuarantee) and g.epsilon is not None
    eps, delta = float(g.epsilon), float(g.delta)
    probe = [design(ctx, r, eps / len(releases), delta, _n(ctx, r), planning=True) for r in releases]
    w = weights(c, probe)
    total_w = math.fsum(w)
    selection = [d.threshold is not None for d in probe]
    k = sum(selection)

    def shares(scale: float):
        base = [scale * wi / total_w * eps for wi in w]
        designs = [design(ctx, r, e, delta, _n(ctx, r), planning=True) for r, e in zip(releases, base)]
        gauss = any(d.mu for d in designs)
        d_sel = delta * (1 - 1e-9) / (2 * k if gauss else k) if k else 0.0
        d_gauss = delta - k * d_sel * (1 + 1e-9) if k else delta
        out = []
        for _r, e, d, sel in zip(releases, base, designs, selection):
            dl = d_sel if sel else (d_gauss if d.mu else delta)
            out.append((e, dl))
        return out

    def composed(scale: float, planning: bool = True) -> float:
        sh = shares(scale)
        ds = [design(ctx, r, e, dl, _n(ctx, r), planning=planning) for r, (e, dl) in zip(releases, sh)]
        return min(composed_bounds([part_numbers(d) for d in ds], delta))

    scale = 1.0 - 1e-12  # pure parts only: the shares add up to the target (basic composition)
    at_one = composed(scale)
    if any(d.mu for d in probe) or at_one > eps or at_one < eps * (1 - _TOL):
        # Gaussian parts: the composed ε is increasing in the scale; bracket and bisect to within _TOL
        lo, hi = 1e-6, 1.0
        if composed(hi) <= eps:  # the PLD bound leaves budget: grow the shares
            lo, hi = 1.0, 1.25
        while composed(hi) <= eps and hi < 64:
            lo, hi = hi, hi * 2
        while hi - lo > _TOL * lo / 4:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if composed(mid) <= eps else (lo, mid)
        scale = lo
        if any(d.noise == "discrete_gaussian" for d in probe):
            # the discrete Gaussians certify a μ below the planned one (their verified margin): refine on the
            # certified numbers (the composition is re-certified when compiled, whatever this finds)
            lo, hi = scale, scale * 1.02
            while composed(hi, planning=False) <= eps and hi < 64:
                lo, hi = hi, hi * 1.5
            while hi - lo > _TOL * lo / 4:
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if composed(mid, planning=False) <= eps else (lo, mid)
            scale = lo
    return {r.name: ir.DpGuarantee(epsilon=e, delta=dl) for r, (e, dl) in zip(releases, shares(scale))}


def shares(ctx: Context, c: ir.Composition, releases: list[ir.Release]) -> dict[str, ir.DpGuarantee]:
    """The family's ``split`` hook."""
    return plan(ctx, c, releases)
