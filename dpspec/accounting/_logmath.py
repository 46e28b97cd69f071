"""Private log-space helpers shared by the accountants.

Everything here works on numpy arrays and never returns NaN for valid input.
The central piece is :func:`log_g`, the log of

    g_a(v) = (1 + v)^a - 1 - a*v,        a > 1 or a < 0,  v > -1,

which is >= 0 (convexity of t -> t^a) and is the integrand of every
"Psi - 1" identity used in this package:

    Psi_alpha(P || Q) - 1 = E_phi[ Q * g_alpha(P/Q - 1) ]          (P, Q likelihood
                                                                   ratios w.r.t. phi)

Because E_phi[P - 1] = E_phi[Q - 1] = 0, the linear terms subtracted by g
integrate to zero; the remaining integrand is non-negative, so tiny RDP values
(Psi - 1 ~ 1e-12) are obtained from a sum of positive terms instead of from the
cancellation 1 + 1e-12 - 1.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

ULP = float(np.finfo(float).eps)  # 2.22e-16, unit round-off of float64 (x2)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

# Number of terms of the binomial series used by log_g in its series region.
# There the ratio of consecutive terms is <= 1/3 in modulus (see log_g), so the
# truncation error is <= 1.5 * 3**-(_SERIES_TERMS - 1) <= 1e-17 of the first term.
_SERIES_TERMS = 36


def logsumexp_rows(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log(sum(exp(x))) along ``axis``; -inf rows stay -inf (no NaN), a +inf entry gives +inf.

    The one log-sum-exp kernel of the accountants: the max is shifted out (only when finite), the
    exponentials are summed by numpy along ``axis`` (rows one after another on an outer axis, pairwise
    on a contiguous one), and the max added back. Not rounded in either direction: callers that need
    a bound widen the result themselves."""
    with np.errstate(under="ignore", divide="ignore"):
        return logsumexp_rows_bare(x, axis)


def logsumexp_rows_bare(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`logsumexp_rows` without setting ``np.errstate`` (the same float operations), for hot
    loops whose caller has set it once (underflow in ``exp`` and ``log(0)`` must not raise)."""
    m = np.max(x, axis=axis, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    s = np.sum(np.exp(x - m_safe), axis=axis, keepdims=True)
    out = np.log(s) + m_safe
    out = np.where(np.isneginf(m), -np.inf, out)
    return np.squeeze(out, axis=axis)


def scalar_map(fn, x: np.ndarray) -> np.ndarray:
    """``fn`` (a scalar function of the ``math`` module) applied elementwise.

    For vectorised replacements of scalar code: numpy's SIMD exp / log / expm1 / log1p may
    differ from the C library's in the last ulp, so code that must reproduce a scalar
    ``math`` computation bit for bit maps the ``math`` function instead.
    """
    x = np.asarray(x, dtype=float)
    return np.fromiter(map(fn, x.ravel().tolist()), dtype=float, count=x.size).reshape(x.shape)


def segment_logsumexp(x: np.ndarray, starts: np.ndarray, seg_of: np.ndarray) -> np.ndarray:
    """Log-sum-exp of consecutive segments of a flat array.

    ``starts`` are the segment start offsets (all segments non-empty) and
    ``seg_of[i]`` the segment index of element i.
    """
    m = np.maximum.reduceat(x, starts)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(under="ignore"):
        s = np.add.reduceat(np.exp(x - m_safe[seg_of]), starts)
    with np.errstate(divide="ignore"):
        out = np.log(s) + m_safe
    return np.where(np.isneginf(m), -np.inf, out)


def log_expm1(t: np.ndarray) -> np.ndarray:
    """log(exp(t) - 1) for t > 0, accurate for tiny and huge t."""
    t = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        small = np.log(np.expm1(np.minimum(t, 30.0)))
        big = t + np.log1p(-np.exp(-np.maximum(t, 30.0)))
    return np.where(t > 30.0, big, small)


def log1mexp(t: np.ndarray) -> np.ndarray:
    """log(1 - exp(-t)) for t > 0 (Maechler 2012 switch at log 2)."""
    t = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(t < math.log(2.0), np.log(-np.expm1(-t)), np.log1p(-np.exp(-t)))


def log_ndtr(x):
    """log Phi(x), accurate in both tails."""
    return special.log_ndtr(x)


def log_binom_pmf(k: np.ndarray, n: int, log_p: float, log_1mp: float) -> np.ndarray:
    """log Bin(k | n, p) from log p and log(1-p) (no cancellation for tiny p); the one log-binomial
    kernel of the accountants (the log weights of binomial mixtures: groups, PLD, relational Thm C.1)."""
    k = np.asarray(k, dtype=float)
    return (
        special.gammaln(n + 1.0)
        - special.gammaln(k + 1.0)
        - special.gammaln(n - k + 1.0)
        + k * log_p
        + (n - k) * log_1mp
    )


class _LogFactorialTable:
    """Cached table of log(n!) for integer n (grown on demand)."""

    def __init__(self) -> None:
        self._table = special.gammaln(np.arange(1025, dtype=float) + 1.0)

    def get(self, nmax: int) -> np.ndarray:
        if nmax >= self._table.size:
            size = max(nmax + 1, 2 * self._table.size)
            self._table = special.gammaln(np.arange(size, dtype=float) + 1.0)
        return self._table


LOG_FACTORIAL = _LogFactorialTable()


def _series_log_g(a: np.ndarray, v: np.ndarray, n_terms: int) -> np.ndarray:
    """log(C(a,2) v^2 S(v)), S = 1 + r_2 v (1 + r_3 v (1 + ...)), r_k = (a-k)/(k+1)."""
    s = np.ones_like(v)
    for k in range(n_terms + 1, 1, -1):
        s = 1.0 + v * ((a - k) / (k + 1.0)) * s
    return np.log(a * (a - 1.0) * 0.5) + 2.0 * np.log(np.abs(v)) + np.log(s)


def log_g(a: np.ndarray, v: np.ndarray, log1pv: np.ndarray) -> np.ndarray:
    """log g_a(v) with g_a(v) = (1+v)^a - 1 - a v, for a > 1 or a < 0.

    Arguments broadcast together.  ``v`` must be accurate where |v| is small
    (it may overflow to +inf where it is huge); ``log1pv`` = log(1+v) must be
    accurate where |v| is not small (callers compute it from log-densities).

    Regions (rho = 1 / (2 max(|a|, 2))):

    * |v| <= rho: binomial series g = C(a,2) v^2 * S(v) with
      S = 1 + r_2 v (1 + r_3 v (1 + ...)), r_k = (a-k)/(k+1).  For k >= 2,
      |r_k v| <= (|a|+k)/((k+1) 2 max(|a|,2)) <= 1/3, so S is in [1/2, 3/2]
      (no cancellation) and 36 terms leave a relative truncation error < 1e-17.
    * y = a log(1+v) > 30: g = e^y (1 - (1 + a v) e^{-y}), evaluated in logs
      (only reachable with 1 + a v > 0).
    * a < 0 and v > e^30: g = |a| v (1 + expm1(y) / (|a| v)), in logs.
    * otherwise: g = expm1(y) - a v directly.  Outside the series region the
      cancellation factor (|expm1 y| + |a v|)/g is at most ~20/min(|a|, |a-1|)
      (e.g. 1.7e3 at a = 1.01), which :func:`log_g_rel_error` accounts for.
    """
    a, v, log1pv = np.broadcast_arrays(np.asarray(a, float), np.asarray(v, float), np.asarray(log1pv, float))
    out = np.empty(a.shape, dtype=float)
    abs_a = np.abs(a)
    rho = 0.5 / np.maximum(abs_a, 2.0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        series = np.abs(v) <= rho
        if np.any(series):
            # |r_k v| <= x/3 with x = |v|/rho <= 1: fewer terms suffice for small x
            x = np.abs(v[series]) / rho[series]
            a_s, v_s = a[series], v[series]
            out_s = np.empty(x.shape)
            # truncation after n terms: relative error <= 1.5 (x/3)^n  (< 1e-17 in each band)
            bands = ((x <= 1e-4, 5), ((x > 1e-4) & (x <= 1e-2), 10), (x > 1e-2, _SERIES_TERMS))
            for sel, n_terms in bands:
                if np.any(sel):
                    out_s[sel] = _series_log_g(a_s[sel], v_s[sel], n_terms)
            out[series] = out_s
        rest = ~series
        if np.any(rest):
            aa, vv, lv = a[rest], v[rest], log1pv[rest]
            y = aa * lv
            res = np.empty_like(y)
            big_exp = y > 30.0
            big_lin = (~big_exp) & (aa < 0) & (lv > 30.0)
            direct = ~(big_exp | big_lin)
            if np.any(big_exp):
                ab, vb, lb, yb = aa[big_exp], vv[big_exp], lv[big_exp], y[big_exp]
                # log(1 + a v): for huge v (a > 1) use log v from log(1+v).
                log_v = lb + np.log1p(-np.exp(-np.maximum(lb, 1e-300)))
                huge = ~np.isfinite(ab * vb) | (lb > 30.0)
                log1pav = np.where(
                    huge & (ab > 0),
                    np.logaddexp(0.0, np.log(np.abs(ab)) + log_v),
                    np.log1p(np.where(huge, 0.0, ab * vb)),
                )
                res[big_exp] = yb + np.log1p(-np.exp(log1pav - yb))
            if np.any(big_lin):
                ab, lb, yb = aa[big_lin], lv[big_lin], y[big_lin]
                log_v = lb + np.log1p(-np.exp(-lb))
                log_lin = np.log(-ab) + log_v
                res[big_lin] = log_lin + np.log1p(np.expm1(yb) * np.exp(-log_lin))
            if np.any(direct):
                res[direct] = np.log(np.expm1(y[direct]) - aa[direct] * vv[direct])
            out[rest] = res
    return out


def log_g_rel_error(a: np.ndarray) -> np.ndarray:
    """A bound on the relative error of exp(log_g(a, ., .)) from float rounding.

    From the region analysis in :func:`log_g`: a few ulps per operation times the
    worst cancellation factor ~20/min(|a|, |a-1|) outside the series region.
    The |y|-dependent error of e^y is accounted for by the caller (it is part of
    the absolute error of the log-integrand).
    """
    a = np.asarray(a, float)
    dist = np.minimum(np.abs(a), np.abs(a - 1.0))  # g degenerates at a = 0 and a = 1
    return 16.0 * ULP * (1.0 + 20.0 / np.maximum(dist, 1e-300))
