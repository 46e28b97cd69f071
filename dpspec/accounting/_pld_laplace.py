"""Private: pessimistic PMFs of the Laplace and discrete-Laplace dominating pairs on the loss grid i*d.

Laplace, scale b, shift Delta (epsilon = Delta/b): the pair (P, Q) = (Lap(0, b), Lap(Delta, b)) has the
privacy loss L(x) = (|x - Delta| - |x|)/b, equal to +eps for x <= 0, -eps for x >= Delta and (Delta -
2x)/b in between, so under P

    P(L > l) = 1 - exp(-(eps - l)/2)/2     for -eps <= l < eps,   1 below -eps,   0 from eps on

(Koskela, Jaelkoe & Honkela 2020, §6; the same tail as dp_accounting's ``LaplacePrivacyLoss``). The pair
is symmetric (x -> Delta - x swaps P and Q), so one PMF serves both directions, and it dominates the
Laplace mechanism of sensitivity Delta (Dwork & Roth 2014 Thm 3.6; dominating pairs: Zhu, Dong & Wang
2022 Def. 7).

Discrete Laplace, P(x) ∝ exp(-|x|/t) on the integers (r = e^{-1/t}), integer shift Delta: the same
loss on the integers, so with x_l = (Delta - l t)/2 and k(l) the largest integer < x_l,

    P(L > l) = P(X <= k(l)) = 1 - r^{k+1}/(1 + r)   (k >= 0),     r^{-k}/(1 + r)   (k < 0).

With Delta = 1 this is randomized response with eps = 1/t, which dominates *every* eps-DP mechanism
(Kairouz, Oh & Viswanath 2015 Thm 2.4; Dong, Roth & Su 2022 Prop. 2.5, f_{eps,0}): :func:`pure_pmf`.

Discretisation: every loss is rounded *up* to the grid (the mass of the cell (e_{j-1}, e_j] goes to
e_j; Meiser & Mohammadi 2018; dp_accounting's pessimistic estimate). The rounded PMF p' is the PLD of a
pair (P', Q') with P' = p' and Q' = e^{-l} p' completed by Q-only mass (Σ e^{-l} p' <= Σ e^{-l} p = 1 as
every loss only grew), and H_a(P'||Q') = Σ p'(l) (1 - a e^{-l})_+ >= H_a(P||Q) for every a >= 0 since
the summand is non-decreasing in l: (P', Q') dominates (P, Q) and composes with other dominating pairs
(Zhu, Dong & Wang 2022 Thm 10). Floating point: each tail sum (all lie in [1/(1+r), 1] or are 0 or 1) is
computed with a relative error below 1e-15 and rounded up by the relative margin ``_UP`` (1e-12), then
made non-increasing (``_pld_pmf._from_tail_sums``: tail sums >= (1 - 2u) of the exact ones); k(l) is
rounded up (a larger k only moves mass up).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ._pld_pmf import StepPmf, U, _from_tail_sums

_UP = 1e-12  # relative round-up of every tail sum


def _grid(ratio: float, d: float) -> tuple[int, float, np.ndarray]:
    """(j_lo, eps_hi, e_{j-1} for j = j_lo..j_hi) for a pair whose losses lie in [-eps, eps], eps the real
    number ``ratio`` (Delta/b) approximates: eps_lo <= eps <= eps_hi (one float step either side), j_lo the
    smallest j with j d >= -eps_lo and j_hi the smallest with j d >= eps_hi, both decided in exact rational
    arithmetic on the float d the composition uses. Then e_{j_lo - 1} < -eps (tail 1, all mass above it),
    e_{j_hi} >= eps (the atom at eps is never rounded down), and every other e_{j-1} lies in [-eps, eps_hi),
    where the tail formulas hold or (in [eps, eps_hi)) overstate the tail."""
    eps_lo, eps_hi = math.nextafter(ratio, 0.0), math.nextafter(ratio, math.inf)
    fd = Fraction(d)
    j_lo = math.ceil(Fraction(-eps_lo) / fd)
    j_hi = math.ceil(Fraction(eps_hi) / fd)
    if (j_hi - j_lo + 2) > (1 << 22):
        raise ValueError("the loss grid is too fine for this epsilon")
    j = np.arange(j_lo, j_hi + 1, dtype=float)
    return j_lo, eps_hi, (j - 1) * d


def _pmf(j_lo: int, tails: np.ndarray, d: float) -> StepPmf:
    up = np.minimum(tails * (1 + _UP), 1.0)
    up[0] = 1.0  # every loss is >= -eps > e_{j_lo - 1} (exactly: ``_grid``)
    probs = _from_tail_sums(up, 0.0)
    return StepPmf(
        d=d,
        offset=j_lo,
        probs=probs,
        inf_mass=0.0,
        rel_err=2 * U,
        build_error=float(_UP),
        lower_mass=0.0,
        upper_mass=0.0,
        symmetric=True,
    )


def laplace_pmf(eps: float, d: float) -> StepPmf:
    """The rounded-up PMF of the Laplace pair with Delta/b = ``eps`` on the grid i*d (module doc); the tail
    1 - exp(-(eps - l)/2)/2 is evaluated with eps_hi >= eps (it grows with eps)."""
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"epsilon must be positive and finite, got {eps!r}")
    j_lo, eps_hi, lprev = _grid(eps, d)
    tails = -0.5 * np.expm1(-(eps_hi - lprev) / 2) + 0.5
    return _pmf(j_lo, np.minimum(tails, 1.0), d)


def discrete_laplace_pmf(t: float, sensitivity: int, d: float) -> StepPmf:
    """The rounded-up PMF of the discrete Laplace pair (scale t, integer shift Delta) on the grid i*d."""
    if not (t > 0 and math.isfinite(t)):
        raise ValueError(f"scale must be positive and finite, got {t!r}")
    dl = int(sensitivity)
    if dl != sensitivity or dl < 1:
        raise ValueError(f"the discrete Laplace shift must be a positive integer, got {sensitivity!r}")
    j_lo, _, lprev = _grid(dl / t, d)
    x = (dl - lprev * t) / 2
    k = np.floor(x + 1e-9 * max(1.0, dl))  # >= the largest integer < x (rounded up: mass only moves up)
    r = math.exp(-1 / t)
    with np.errstate(over="ignore", under="ignore"):
        below = np.exp(k / t) / (1 + r)  # k < 0 (only reached through rounding): P(X <= k) = r^{|k|}/(1+r)
        above = 1 - np.exp(-(k + 1) / t) / (1 + r)
    cdf = np.where(k >= 0, above, below)
    return _pmf(j_lo, np.minimum(np.maximum(cdf, 0.0), 1.0), d)


def pure_pmf(eps: float, d: float) -> StepPmf:
    """The rounded-up PMF of randomized response with ``eps``: dominates every eps-DP mechanism."""
    return discrete_laplace_pmf(1.0 / math.nextafter(eps, math.inf) * (1 - 1e-15), 1, d)


def approx_dp_pmf(eps: float, delta: float, d: float) -> StepPmf:
    """The rounded-up PMF of the tightest dominating pair of an (eps, delta)-DP mechanism: the privacy loss
    is +inf w.p. delta, +eps w.p. (1 - delta) e^eps/(1 + e^eps), -eps w.p. (1 - delta)/(1 + e^eps): the
    four-output mechanism of Kairouz, Oh & Viswanath 2015 Thm 2.4 (every (eps, delta)-DP mechanism is a
    post-processing of it), whose trade-off curve is f_{eps,delta} (Dong, Roth & Su 2022 Prop. 2.5: a
    mechanism is (eps, delta)-DP iff its trade-off curves are >= f_{eps,delta}, so H_alpha of every
    neighbouring pair is <= that of this pair for every alpha >= 0; dp_accounting's
    ``from_privacy_parameters``). A larger eps or delta only weakens f_{eps,delta}, so the
    float parameters (upper bounds of the real ones) give a dominating pair. The pair is symmetric. The
    two atoms are rounded up to the grid in exact rational arithmetic; the tail sum above -eps,
    1 - (1 - delta)/(1 + e^eps), and the +inf mass delta are rounded up by the relative margin ``_UP``."""
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"epsilon must be positive and finite, got {eps!r}")
    if not (0 <= delta < 1):
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    fd = Fraction(d)
    j_lo = math.ceil(Fraction(-eps) / fd)  # the atom at -eps, rounded up
    j_hi = math.ceil(Fraction(eps) / fd)  # the atom at +eps, rounded up
    if j_hi - j_lo + 2 > (1 << 22):
        raise ValueError("the loss grid is too fine for this epsilon")
    inf_up = min(float(delta) * (1 + _UP), 1.0)
    low = (1 - float(delta)) / (1 + math.exp(eps)) * (1 - _UP)  # <= the mass at -eps
    tails = np.full(j_hi - j_lo + 1, min(1.0, 1.0 - low + 4 * U))
    tails[0] = 1.0  # every finite loss is >= the atom at -eps (rounded up to e_{j_lo})
    probs = _from_tail_sums(tails, inf_up)
    return StepPmf(
        d=d,
        offset=j_lo,
        probs=probs,
        inf_mass=inf_up,
        rel_err=2 * U,
        build_error=float(_UP),
        lower_mass=0.0,
        upper_mass=0.0,
        symmetric=True,
    )


def laplace_loss_variance(eps: float) -> float:
    """Var_P[L] of the Laplace pair, from its closed-form moments (used only to size the grid)."""
    # L = eps w.p. 1/2, -eps w.p. e^{-eps}/2, and (eps - 2u) for u = x/b in (0, eps) with density e^{-u}/2
    m1 = eps / 2 - eps * math.exp(-eps) / 2
    m2 = eps * eps / 2 + eps * eps * math.exp(-eps) / 2
    us = np.linspace(0, eps, 401)
    w = np.exp(-us) / 2
    f1, f2 = (eps - 2 * us) * w, (eps - 2 * us) ** 2 * w
    m1 += float(np.trapezoid(f1, us))
    m2 += float(np.trapezoid(f2, us))
    return max(m2 - m1 * m1, 0.0)
