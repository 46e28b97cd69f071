"""DP-SGD's part in ``dpspec plot`` (``Family.curve`` and ``Family.steps_curve`` in :mod:`dpspec.families`):
min(RDP, PLD) as certified, and ε after t steps recomputed from the recorded σ, rate and group size."""

from __future__ import annotations

import numpy as np

from dpspec.plot import Panel, Series, _agreement, _step_counts, _text


def curve(r, grid, deltas) -> Series | None:
    """min(RDP, PLD) per δ, as certified (None when no PLD was certified: the RDP conversion)."""
    from dpspec.accounting.conversion import rdp_to_dp

    g = r.guarantee
    a = getattr(r, "accounting", None)
    if a is None or a.pld is None or not g.rdp_alphas:
        return None
    # PLD on a coarser δ grid (each δ is one PLD evaluation)
    grid = np.unique(np.concatenate([np.geomspace(grid[0], grid[-1], 12), [p.delta for p in a.curve], list(deltas)]))
    pe = _pld_epsilons(r, None, grid)
    eps = [min(rdp_to_dp(g.rdp_alphas, g.rdp_epsilons, float(d))[0], e) for d, e in zip(grid, pe)]
    return Series("min of RDP and PLD, recomputed (as certified)", tuple(grid), tuple(eps), False)


def steps_panel(r, common: dict, certified: Series, steps: int, rdp_target: bool) -> Panel:
    g = r.guarantee
    ts = _step_counts(steps)
    try:
        eps = _epsilons(r, ts, rdp_target)
    except (ValueError, TypeError, KeyError, ArithmeticError) as e:
        return Panel(**common, series=(certified,), note=f"cannot recompute: {_text(str(e))}")
    line = Series("recomputed with dpspec.accounting", tuple(float(t) for t in ts), tuple(eps), certified=False)
    a = getattr(r, "accounting", None)
    if not rdp_target and a is not None and a.pld is not None:
        # as certified: min(RDP, PLD) after t steps (PLD at ≤ 12 step counts, each one evaluation)
        idx = np.unique(np.linspace(0, len(ts) - 1, min(len(ts), 12)).round().astype(np.int64))
        try:
            pe = _pld_epsilons(r, ts[idx])
        except (ValueError, TypeError, KeyError, ArithmeticError) as e:
            return Panel(**common, series=(certified, line), note=f"cannot recompute PLD: {_text(str(e))}")
        both = [min(eps[i], e) for i, e in zip(idx, pe)]
        rdp_line = Series("RDP alone, recomputed", line.x, line.y, certified=False)
        line = Series("recomputed with dpspec.accounting", tuple(float(ts[i]) for i in idx), tuple(both), False)
        return Panel(**common, series=(certified, line, rdp_line), note=_agreement(both[-1], g.epsilon))
    return Panel(**common, series=(certified, line), note=_agreement(eps[-1], g.epsilon))


def _pld_epsilons(r, ts: np.ndarray | None, deltas=None) -> list[float]:
    """The certified PLD construction (dpspec.accounting.pld_select) after each t of ``ts`` steps at the
    spec's δ, or after all steps at each δ of ``deltas``."""
    from dpspec.accounting.pld_select import dpsgd_pld_epsilon

    p, g = r.mechanism.parameters, r.guarantee
    name = {
        "poisson": "poisson",
        "full_batch": "poisson",
        "without_replacement": ("wor_substitution" if r.protected.relation == "substitution" else "wor"),
    }.get(p.get("sampling"))
    if name is None:
        raise ValueError(f"no PLD for sampling `{p.get('sampling')}`")
    rate = 1.0 if p.get("sampling") == "full_batch" else float(p["sample_rate"])
    K, n, sigma = int(p.get("group_size", 1)), p.get("dataset_size"), float(p["noise_multiplier"])
    if deltas is not None:
        return [dpsgd_pld_epsilon(sigma, rate, int(p["steps"]), float(d), name, K, n) for d in deltas]
    assert ts is not None  # (the steps, when no δ values are given)
    out = [dpsgd_pld_epsilon(sigma, rate, int(t), g.delta, name, K, n) for t in ts]
    return out


def _epsilons(r, ts: np.ndarray, rdp_target: bool) -> list[float]:
    """RDP composes additively over steps (Mironov 2017, Prop. 1): ε(α; t) = t · ε(α; 1)."""
    import dpspec.accounting as acc
    from dpspec.accounting.conversion import rdp_to_dp

    p, g = r.mechanism.parameters, r.guarantee
    sampling = {
        "poisson": "poisson",
        "without_replacement": ("wor_substitution" if r.protected.relation == "substitution" else "wor"),
    }.get(p.get("sampling"))
    if sampling is None:
        raise ValueError(f"no accountant for sampling `{p.get('sampling')}`")
    alphas = np.asarray(g.rdp_alphas, dtype=float) if g.rdp_alphas else None
    one = acc.dpsgd_rdp_curve(
        p["noise_multiplier"],
        p["sample_rate"],
        1,
        sampling=sampling,
        group_size=int(p.get("group_size", 1)),
        dataset_size=p.get("dataset_size") if sampling != "poisson" else None,
        alphas=alphas,
    )
    if rdp_target:
        at = int(np.argmin(np.abs(one.alphas - g.alpha)))
        return [float(t * one.rdp[at]) for t in ts]
    return [rdp_to_dp(one.alphas, t * one.rdp, g.delta)[0] for t in ts]
