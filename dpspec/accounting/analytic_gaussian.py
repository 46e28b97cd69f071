"""Accounting for a one-shot Gaussian release: the analytic Gaussian mechanism and its RDP curve.

With μ = Δ/σ (Δ the ℓ2 sensitivity, σ the noise standard deviation) the Gaussian mechanism's
privacy profile is exact (Balle & Wang 2018, Thm 8):

    δ(ε) = Φ(μ/2 − ε/μ) − e^ε · Φ(−μ/2 − ε/μ),

and its Rényi divergence is ε(α) = α μ² / 2 (Mironov 2017, Prop. 7). Composing Gaussian
mechanisms with μ_1..μ_k is again exactly Gaussian with μ = √(Σ μ_i²) (Dong, Roth & Su 2019,
Cor. 3.3), so compositions of Gaussian releases stay exact.

Numerics: δ(ε) is evaluated in log space (``log_ndtr``), relative error ~1e-15. ε and μ are
found by bisection to a relative width of 1e-12 and the conservative end of the bracket is
returned: the reported ε satisfies δ(ε) ≤ δ and a calibrated σ satisfies the target.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr

ABS_ERROR = 1e-10  # stated bound on |computed ε − exact ε| (bisection width + float error, rounded up)
#: a (ε, δ) target must be above this: below it the stated error bound is a sizeable part of ε
MIN_TARGET_EPSILON = 10 * ABS_ERROR
#: ulps added to a closed-form value computed in a few float operations (covers their rounding,
#: including underflow: a positive exact value is never recorded as 0)
ROUND_UP_ULPS = 5


def round_up(x, ulps: int = ROUND_UP_ULPS):
    """``x`` (a float or an array) moved up by ``ulps`` ulps: an upper bound of the exact value of a
    closed form computed in at most ``ulps`` − 1 correctly rounded operations."""
    y = np.asarray(x, dtype=float)
    for _ in range(ulps):
        y = np.nextafter(y, np.inf)
    return float(y) if np.ndim(x) == 0 else y


def delta_of_epsilon(eps: float, mu: float) -> float:
    """Balle & Wang 2018, Thm 8: the exact δ(ε) of the Gaussian mechanism with μ = Δ/σ."""
    if mu <= 0:
        return 0.0
    a = mu / 2 - eps / mu
    b = -mu / 2 - eps / mu
    la = float(log_ndtr(a))
    lb = eps + float(log_ndtr(b))
    if lb >= la:
        return 0.0
    return math.exp(la) * -math.expm1(lb - la)


def epsilon_of_delta(mu: float, delta: float) -> float:
    """Smallest ε ≥ 0 with δ(ε) ≤ δ, returned rounded up (never below the exact value). For μ > 0 the
    result is never 0: when δ(0) ≤ δ it is the stated error bound (0 is reported for μ = 0 only)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if mu <= 0:
        return 0.0
    if delta_of_epsilon(0.0, mu) <= delta:
        return ABS_ERROR
    lo, hi = 0.0, 1.0
    while delta_of_epsilon(hi, mu) > delta:
        lo, hi = hi, hi * 2
        if hi > 1e8:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if delta_of_epsilon(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return hi + ABS_ERROR


def mu_for_target(eps: float, delta: float) -> float:
    """Largest μ = Δ/σ with δ(ε; μ) ≤ δ (rounded down: the calibrated σ is never too small)."""
    if eps <= 0 or not 0 < delta < 1:
        raise ValueError("need epsilon > 0 and 0 < delta < 1")
    lo, hi = 0.0, 1.0
    while delta_of_epsilon(eps, hi) <= delta:
        lo, hi = hi, hi * 2
        if hi > 1e8:
            break
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if delta_of_epsilon(eps, mid) <= delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(lo, 1e-300):
            break
    return lo


def sigma_for_target(eps: float, delta: float, sensitivity: float) -> float:
    # Aim below the target by the reporting error, so the certified ε (which includes it) is ≤ target.
    if eps < MIN_TARGET_EPSILON:
        raise ValueError(f"a target ε below {MIN_TARGET_EPSILON:g} is within the stated numerical error")
    mu = mu_for_target(eps - 2 * ABS_ERROR, delta)
    # σ = Δ/μ rounded up by one part in 1e12 so float rounding cannot make σ too small.
    return sensitivity / mu * (1 + 1e-12)


def rdp_curve(alphas: ArrayLike, mu: float) -> np.ndarray:
    """Mironov 2017, Prop. 7: ε(α) = α μ² / 2, rounded up (an upper bound of α Δ²/(2σ²) for the
    recorded Δ and σ, whose quotient μ is itself rounded)."""
    if mu <= 0:
        return np.zeros(np.shape(alphas))
    with np.errstate(over="ignore"):  # an overflow gives inf, which the compiler refuses (DPS207)
        return round_up(np.asarray(alphas, dtype=float) * mu * mu / 2.0)


def sigma_for_rdp(alpha: float, eps: float, sensitivity: float) -> float:
    """Smallest σ with α Δ² / (2σ²) ≤ ε (closed form, rounded up)."""
    return math.sqrt(alpha * sensitivity**2 / (2 * eps)) * (1 + 1e-12)
