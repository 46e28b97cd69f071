"""Relational DP-SGD's part in ``dpspec plot`` (``Family.curve`` and ``Family.steps_curve`` in
:mod:`dpspec.families`): δ pays NEG-SAMPLE-WOR's overflow probability before the RDP conversion."""

from __future__ import annotations

import numpy as np

from dpspec.plot import Panel, Series, _agreement, _rdp_line, _step_counts, _text


def curve(r, grid, deltas) -> Series | None:
    """ε(δ) from the certified ε(α) curve at δ minus the recorded overflow probability."""
    if not r.guarantee.rdp_alphas:
        return None
    paid = r.mechanism.parameters.get("overflow_probability", 0.0)
    paid = float(paid) if isinstance(paid, (int, float)) else 0.0
    return _rdp_line(r, grid, paid)


def steps_panel(r, common: dict, certified: Series, steps: int, rdp_target: bool) -> Panel:
    ts = _step_counts(steps)
    try:
        eps = _epsilons(r, ts)
    except (ValueError, TypeError, KeyError, ArithmeticError) as e:
        return Panel(**common, series=(certified,), note=f"cannot recompute: {_text(str(e))}")
    line = Series("recomputed with dpspec.accounting", tuple(float(t) for t in ts), tuple(eps), certified=False)
    return Panel(**common, series=(certified, line), note=_agreement(eps[-1], r.guarantee.epsilon))


def _epsilons(r, ts: np.ndarray) -> list[float]:
    """Every valid accountant's RDP is a per-step bound composed over steps, so the pointwise minimum
    scales with t; δ pays the overflow probability of the negatives over t steps, as the compiler does."""
    from dpspec.accounting.conversion import rdp_to_dp
    from dpspec.accounting.relational import RelationalConfig, overflow_probability, relational_accountants

    p, g = r.mechanism.parameters, r.guarantee
    config = RelationalConfig(
        int(p["num_edges"]),
        int(p["num_nodes"]),
        float(p["sample_rate"]),
        int(p["degree_cap"]),
        int(p["negatives_per_positive"]),
        str(p["clipping"]),
        str(p["negatives"]),
        "poisson",
    )
    one = relational_accountants(config, float(p["noise_multiplier"]), 1, g.delta, np.asarray(g.rdp_alphas)).curve
    return [rdp_to_dp(one.alphas, t * one.rdp, g.delta - overflow_probability(config, int(t)))[0] for t in ts]
