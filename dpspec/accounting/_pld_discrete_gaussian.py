"""Private: the pessimistic PMF of the discrete Gaussian dominating pair on the loss grid i*d.

The pair.  Y ~ N_Z(0, s^2): P(Y = k) = f(k)/Z on the integers, f(x) = exp(-x^2/(2 s^2)), Z = sum_k f(k)
(Canonne, Kamath & Steinke 2020, Def. 1).  For an integer-valued query whose answers on neighbours differ by
an integer t with |t| <= Delta, the release a + Y is dominated by (P, Q) = (N_Z(0, s^2), N_Z(Delta, s^2)):

* the loss at output k is L(k) = log P(k)/Q(k) = ((k - Delta)^2 - k^2)/(2 s^2) = Delta (Delta - 2k)/(2 s^2),
  decreasing in k, so likelihood-ratio tests are threshold tests on k;
* T(N_Z(0), N_Z(t)) is non-increasing in the integer t >= 0 **[D]**: the likelihood ratio
  P_t(k)/P_0(k) = exp((2tk - t^2)/(2 s^2)) increases in k, so by Neyman-Pearson the optimal test of level a
  rejects P_0 when k > c, and at k = c with probability g, where (c, g) depend on a and P_0 only; its
  type-II error is b_t = P_0(k < c - t) + (1 - g) P_0(k = c - t), and
  b_t - b_{t+1} = g P_0(k = c - t - 1) + (1 - g) P_0(k = c - t) >= 0.  A pointwise smaller trade-off
  curve has a larger hockey-stick divergence at every alpha >= 0 (in both orders: the curves of the two
  orders are each other's inverse), so H_alpha(N_Z(0) || N_Z(t)) <= H_alpha(N_Z(0) || N_Z(Delta)) for
  0 <= t <= Delta; t < 0 follows from k -> -k.  k -> Delta - k swaps P and Q, so the pair is symmetric (one
  PMF serves both directions), and it dominates the release (Zhu, Dong & Wang 2022 Def. 7).

The grid.  P(L > e) = P(Y <= m(e)) with m(e) the largest integer below x(e) = Delta/2 - e s^2/Delta.  The
PMF puts the mass of every cell (e_{j-1}, e_j] on e_j (losses rounded *up*: the rounded PMF is the PLD of a
pair dominating (P, Q), as for the Laplace pairs, ``_pld_laplace`` module doc), so its tail sums are
U_j = P(L > e_{j-1}); every U_j used is an *upper bound* on that (mass only moves up: still dominating).

Truncation (the +inf atom).  Outputs k < -K have losses above L(-K); their mass goes to the loss +inf, which
rounds them up, and only an upper bound B >= P(Y <= -K - 1) is needed.  Outputs k > K have the lowest
losses and are rounded up to the grid's first point (tail sum 1 there).  With these two facts
(``PROOF.md`` of the statistics family, §3.4, derives them):

  (N) Z >= sqrt(2 pi) s: by Poisson summation Z = sqrt(2 pi) s sum_{j in Z} exp(-2 pi^2 s^2 j^2), every
      term positive and the j = 0 term 1.  Also Z >= any partial sum of f.
  (T) for every integer m, sum_{k <= m} f(k) <= f(min(m, 0)) + int_{-inf}^m f: f increases on (-inf, 0]
      and decreases on [0, inf), so f(k) <= int_k^{k+1} f for k <= -1 and f(k) <= int_{k-1}^k f for k >= 1,
      and the largest term left over is f(min(m, 0)) <= 1.

  P(Y <= m) <= F_hi(m) = f(min(m, 0))/(sqrt(2 pi) s) + Phi(m/s) = f(min(m, 0))/(sqrt(2 pi) s) + erfc(-m/(s sqrt 2))/2,

so B = F_hi(-K - 1) (the discrete tail is at most the Gaussian tail plus one term); K is the least integer
with B <= ``tail``.  (CKS20 show the discrete Gaussian is s^2-subgaussian, P(Y >= t) <= exp(-t^2/(2 s^2));
F_hi is tighter by about t/s, and the tests check both against the exact tail.)

Evaluation.  When the kept support -K..K has at most ``N_DIRECT`` points, the masses f(k) are summed
directly (longdouble cumulative sums, relative error <= n eps_ld) and divided by a lower bound of Z (the
larger of (N) and the partial sum, rounded down): P(Y <= m) <= B + sum_{-K <= k <= m} f(k)/Z_lo.  Beyond
that (s above ~9e4) F_hi itself is used at every grid point: it overstates P(Y <= m) by at most one term
f/Z <= 1/(sqrt(2 pi) s), i.e. it moves each outcome by at most one integer, a loss of Delta/s^2 <= 1.1e-5
Delta/s: below the grid spacing.  Floating point: each value is rounded up by the relative margin ``_REL``
(exp, erfc and the products are accurate to a few ulps; exponents reach ~70, so arguments lose <= ~1e-13
relative), m(e) is rounded up by a margin above the float error of x(e) (a larger m only moves mass up),
and the tail sums then go through ``_pld_pmf._from_tail_sums`` (tail sums >= (1 - 2u) of those given).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ._pld_pmf import GRID_MAX, TAIL, StepPmf, U, _from_tail_sums

N_DIRECT = 1 << 21  # largest kept support summed term by term
_REL = 1e-12  # relative round-up of every float bound
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_EPS_LD = float(np.finfo(np.longdouble).eps)


def cdf_upper(m, sigma: float) -> np.ndarray:
    """F_hi(m) >= P(Y <= m), Y ~ N_Z(0, sigma^2), for integers m (module doc, (N) and (T)), rounded up."""
    m = np.asarray(m, dtype=float)
    s = float(sigma)
    top = np.minimum(m, 0.0)
    with np.errstate(under="ignore"):
        f = np.exp(-(top * top) / (2.0 * s * s))
        v = f / (_SQRT_2PI * s) + 0.5 * special.erfc(-m / (s * math.sqrt(2.0)))
    return np.minimum(v * (1.0 + _REL), 1.0)


def tail_upper(n, sigma: float) -> np.ndarray:
    """An upper bound on P(Y >= n) = P(Y <= -n) (the symmetry of N_Z(0, sigma^2))."""
    return cdf_upper(-np.asarray(n, dtype=float), sigma)


def truncation(sigma: float, tail: float) -> int:
    """The least K >= 1 with tail_upper(K + 1) <= tail: the kept support is -K..K."""
    s = float(sigma)
    k = max(1, int(math.ceil(s * math.sqrt(2.0 * max(math.log(1.0 / tail), 1.0)))))
    while float(tail_upper(k + 1, s)) > tail:
        k = int(k * 1.1) + 1
    lo, hi = 1, k  # tail_upper(hi + 1) <= tail; find the least such (tail_upper decreases in n)
    while lo < hi:
        mid = (lo + hi) // 2
        if float(tail_upper(mid + 1, s)) <= tail:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _loss(k: float, sigma: float, shift: int) -> float:
    return shift * (shift - 2.0 * k) / (2.0 * sigma * sigma)


def discrete_gaussian_pmf(sigma: float, sensitivity: int, d: float, tail: float = TAIL, n_direct: int = N_DIRECT):
    """The rounded-up PMF of the pair (N_Z(0, sigma^2), N_Z(Delta, sigma^2)) on the grid i*d, with the mass
    of outputs beyond -K (P <= ``tail``) on the loss +inf (module doc). ``n_direct``: the largest support
    summed term by term (the analytic F_hi beyond it)."""
    from ._pld_fft import WindowTooLarge

    s = float(sigma)
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"sigma must be positive and finite, got {sigma!r}")
    dl = int(sensitivity)
    if dl != sensitivity or dl < 1:
        raise ValueError(f"the discrete Gaussian shift must be a positive integer, got {sensitivity!r}")
    K = truncation(s, tail)
    B = float(tail_upper(K + 1, s))  # >= P(Y <= -K - 1): the +inf atom
    # grid: e_{j_lo} <= L(K) - d (the first point takes every lower loss), e_{j_hi} >= L(-K) (above: +inf)
    j_lo = int(math.floor(_loss(K, s, dl) / d)) - 1
    j_hi = int(math.ceil(_loss(-K, s, dl) / d * (1 + 1e-12))) + 1
    if j_hi - j_lo + 2 > GRID_MAX:
        raise WindowTooLarge(j_hi - j_lo + 2)
    e_prev = np.arange(j_lo, j_hi, dtype=float) * d  # e_{j-1} for j = j_lo + 1 .. j_hi
    s2 = s * s
    x = dl / 2.0 - e_prev * s2 / dl
    margin = 8.0 * U * (dl / 2.0 + np.abs(e_prev) * s2 / dl) + 1e-300
    m = np.ceil(x + margin) - 1.0  # >= the largest integer below x(e): P(L > e) = P(Y <= m)
    if 2 * K + 1 <= n_direct:
        ks = np.arange(-K, K + 1, dtype=float)
        with np.errstate(under="ignore"):
            w = np.exp(-(ks * ks) / (2.0 * s2))
        cum = np.cumsum(w.astype(np.longdouble))
        rho = _REL + 4.0 * ks.size * _EPS_LD
        z_lo = max(_SQRT_2PI * s, float(cum[-1])) * (1.0 - rho)
        cum_hi = np.asarray(cum, dtype=float) * (1.0 + rho) / z_lo
        idx = np.clip(m + K, 0, 2 * K).astype(np.int64)
        tails = np.where(m < -K, B, np.where(m >= K, 1.0, B + cum_hi[idx]))
        lower = float(tail_upper(K + 1, s))
    else:
        tails = np.maximum(cdf_upper(m, s), B)
        lower = float(tail_upper(K + 1, s))
    Uj = np.concatenate([[1.0], np.minimum(tails * (1.0 + _REL), 1.0)])  # U_{j_lo} = 1: every loss is >= it
    probs = _from_tail_sums(Uj, B)
    return StepPmf(
        d=d,
        offset=j_lo,
        probs=probs,
        inf_mass=B,
        rel_err=2 * U,
        build_error=float(_REL),
        lower_mass=lower,
        upper_mass=B,
        symmetric=True,
    )


def loss_variance(sigma: float, sensitivity: float) -> float:
    """An upper bound on Var_P[L] = (Delta/s^2)^2 Var(Y) <= (Delta/s)^2 (Var(Y) <= s^2, CKS20 Cor. 9); used
    only to size the grid."""
    return (float(sensitivity) / float(sigma)) ** 2
