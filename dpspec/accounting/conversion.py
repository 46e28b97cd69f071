"""RDP -> (epsilon, delta)-DP conversion.

* ``"balle2020"`` (default): Balle et al. 2020 Thm 21 (= Canonne-Kamath-Steinke 2020
  Prop 12, Asoodeh et al. 2020 eq. 20):
      eps = min_alpha  rdp(alpha) + log((alpha - 1)/alpha) - (log delta + log alpha)/(alpha - 1)
* ``"classic"``: Mironov 2017 Prop 3:  eps = min_alpha  rdp(alpha) + log(1/delta)/(alpha - 1)

Both are valid for every order, so the minimum over any grid is valid.  In
addition epsilon = 0 is reported when delta^2 >= 1 - exp(-rdp(alpha)) for some
order: KL <= rdp(alpha) and TV <= sqrt(1 - exp(-KL)) (Bretagnolle-Huber), and
(0, delta)-DP is TV <= delta (the same shortcut as dp_accounting).  The result
is clamped at 0 (a negative value only means the bound is vacuous-good) and
rounded up by a few ulps of the magnitudes involved.  The order attaining the
minimum is reported, and a flag says whether it lies at the edge of the grid.
"""

from __future__ import annotations

import math

import numpy as np

from . import _validate as V
from ._logmath import ULP
from .curve import DpResult, RdpCurve

CONVERSIONS = {
    "balle2020": "Balle et al. 2020 Thm 21",
    "classic": "Mironov 2017 Prop 3 (classic RDP conversion)",
}


def _check_delta(delta) -> float:
    return V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)


def convert(
    alphas: np.ndarray, rdp: np.ndarray, delta: float, conversion: str = "balle2020"
) -> tuple[float, float, int]:
    """Validated-input core: (epsilon, best alpha, index of best alpha)."""
    log_d = math.log(delta)
    with np.errstate(invalid="ignore", over="ignore"):
        if conversion == "balle2020":
            t2 = np.log1p(-1.0 / alphas)
            t3 = -(log_d + np.log(alphas)) / (alphas - 1.0)
        else:
            t2 = np.zeros_like(alphas)
            t3 = -log_d / (alphas - 1.0)
        eps = rdp + t2 + t3
        eps = eps + 8.0 * ULP * (np.abs(rdp) + np.abs(t2) + np.abs(t3))
    eps = np.where(np.isfinite(rdp), eps, np.inf)
    with np.errstate(invalid="ignore"):
        tv_ok = delta * delta + np.expm1(-rdp) > 4.0 * ULP  # margin for the float test
    if np.any(tv_ok):
        idx = int(np.argmax(tv_ok))
        return 0.0, float(alphas[idx]), idx
    if not np.any(np.isfinite(eps)):
        return math.inf, float(alphas[0]), 0
    idx = int(np.argmin(eps))
    return max(0.0, float(eps[idx])), float(alphas[idx]), idx


def rdp_to_dp(alphas, rdp, delta, conversion="balle2020"):
    """Convert per-order RDP values to (epsilon, delta)-DP.

    Returns ``(epsilon, best_alpha)``; epsilon >= 0, inf only if every rdp is inf.
    ``conversion`` is ``"balle2020"`` (Balle et al. 2020 Thm 21) or ``"classic"``
    (Mironov 2017 Prop 3).  Raises ValueError for orders <= 1, negative or NaN rdp
    values, mismatched lengths, delta outside (0, 1) or an unknown conversion.
    """
    a = V.alphas("alphas", alphas)
    r = np.atleast_1d(np.asarray(rdp, dtype=float))
    if r.shape != a.shape:
        raise ValueError(f"alphas and rdp must have the same length, got {a.size} and {r.size}")
    if np.any(np.isnan(r)) or np.any(r < 0):
        raise ValueError("rdp values must be >= 0 (inf allowed), got a negative or NaN value")
    d = _check_delta(delta)
    V.choice("conversion", conversion, tuple(CONVERSIONS))
    eps, best, _ = convert(a, r, d, conversion)
    return eps, best


def dp_from_curve(curve: RdpCurve, delta, conversion="balle2020") -> DpResult:
    """(epsilon, delta) guarantee of a certified RDP curve, with the optimal order
    and a flag for an optimum at the grid edge."""
    if not isinstance(curve, RdpCurve):
        raise ValueError(f"curve must be an RdpCurve, got {type(curve).__name__}")
    d = _check_delta(delta)
    V.choice("conversion", conversion, tuple(CONVERSIONS))
    eps, best, idx = convert(curve.alphas, curve.rdp, d, conversion)
    edge = eps > 0.0 and curve.alphas.size > 1 and idx in (0, curve.alphas.size - 1)
    return DpResult(
        epsilon=eps, delta=d, best_alpha=best, curve=curve, conversion=CONVERSIONS[conversion], at_grid_edge=bool(edge)
    )
