"""Distribution-free concentration radii of the sampled estimators (pure numerics).

``dkw_radius`` is the Dvoretzky–Kiefer–Wolfowitz band with Massart's constant: the empirical CDF of n
i.i.d. draws is within e of the true one, uniformly, with probability at least 1 − ρ̃. The sliced
sensitivity estimators of sampled worlds (``dpspec.pufferfish.sensitivity`` and its data-parallel
form ``dpspec.distributed.sensitivity``) widen their quantiles by it (Zhang & Vorobeychik §4.3.2,
F14; dpspec/families/swm/PROOF.md §3.2).
"""

from __future__ import annotations

import math

__all__ = ["dkw_radius"]


def dkw_radius(n: int, rho: float) -> float:
    """e_n(ρ̃) = √(log(2/ρ̃)/(2n)): DKW–Massart band, sup|F̂−F| ≤ e w.p. ≥ 1−ρ̃. ZV25 §4.3.2; F14."""
    if int(n) < 1:
        raise ValueError(f"n (sample size) must be ≥ 1, got {n!r}")
    if not (0.0 < float(rho) < 1.0):
        raise ValueError(f"rho must lie in (0, 1), got {rho!r}")
    return math.sqrt(math.log(2.0 / float(rho)) / (2.0 * int(n)))
