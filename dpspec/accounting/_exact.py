"""Private: exact positive-term sums for integer orders, and log(Psi-1) -> RDP.

Binomial mixture identity (integer alpha, K = 1 is Mironov-Talwar-Zhang 2019 §3.3):
if L = w0 + r L' with w0 + r = 1 and L' a likelihood ratio (E[L'] = 1), then

    Psi_alpha - 1 = E[L^alpha] - 1 = sum_{j=2}^{alpha} C(alpha, j) w0^{alpha-j} r^j D_j,
    D_j = E[L'^j] - 1 >= 0                                   (Jensen),

because sum_j C(alpha,j) w0^{alpha-j} r^j = 1 and D_1 = 0.  Every term is >= 0, so no
"1 + tiny - 1" cancellation happens for tiny RDP values.  For the Poisson SGM
L' = N(1, s^2)/N(0, s^2) and D_j = expm1(j(j-1)/(2 s^2)).
"""

from __future__ import annotations

import numpy as np

from ._logmath import LOG_FACTORIAL, ULP, segment_logsumexp


def binomial_mixture_log_psi_m1(alphas: np.ndarray, log_w0: float, log_r: float, log_d: np.ndarray, rel_d: np.ndarray):
    """log(Psi_alpha - 1) for integer alphas >= 2 and its relative error bound.

    log_d[j], rel_d[j] (j = 0..max alpha): log D_j and a bound on its relative error.
    """
    al = np.asarray(alphas, dtype=np.int64)
    lf = LOG_FACTORIAL.get(int(al.max()))
    counts = al - 1
    starts = np.zeros(al.size, dtype=np.int64)
    starts[1:] = np.cumsum(counts)[:-1]
    seg = np.repeat(np.arange(al.size), counts)
    j = np.arange(seg.size) - starts[seg] + 2
    a_of = al[seg]
    logt = (lf[a_of] - lf[j] - lf[a_of - j]) + (a_of - j) * log_w0 + j * log_r + log_d[j]
    log_i = segment_logsumexp(logt, starts, seg)
    # Relative error: every log-term carries an absolute error of a few ulps times the
    # magnitudes added (log-factorials ~ lf[alpha], alpha |log w0|, alpha |log r|, |log D_j|);
    # D_j carries rel_d[j]; the log-sum-exp adds ~ulp log2(n).
    mag_d = np.maximum.accumulate(np.abs(np.where(np.isfinite(log_d), log_d, 0.0)))
    rel_d_max = np.maximum.accumulate(rel_d)
    rel = 8.0 * ULP * (3.0 * lf[al] + al * (abs(log_w0) + abs(log_r)) + mag_d[al] + np.log2(al) + 2.0) + rel_d_max[al]
    return log_i, rel


def rdp_from_log_psi_m1(alphas: np.ndarray, log_lo: np.ndarray, log_hi: np.ndarray):
    """(upper RDP, abs error) from log-bounds on I = Psi - 1: RDP = log1p(I)/(alpha - 1).

    Returns rdp_up with exact <= rdp_up <= exact + err.
    """
    alphas = np.asarray(alphas, float)
    with np.errstate(over="ignore"):
        up = np.logaddexp(0.0, log_hi) / (alphas - 1.0) * (1.0 + 8.0 * ULP)
        lo = np.logaddexp(0.0, log_lo) / (alphas - 1.0) * (1.0 - 8.0 * ULP)
    lo = np.maximum(lo, 0.0)
    err = np.where(np.isfinite(up), up - lo, np.inf)
    return up, err


def log_bounds_from_rel(log_i: np.ndarray, rel: np.ndarray):
    """log I_lo, log I_hi from log I and a relative error bound."""
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = log_i + np.log1p(rel)
        lo = np.where(rel < 1.0, log_i + np.log1p(-np.minimum(rel, 1.0)), -np.inf)
    return lo, hi


def log_bounds_from_abs(log_i: np.ndarray, log_err: np.ndarray):
    """log I_lo, log I_hi from log I and log of an absolute error bound."""
    hi = np.logaddexp(log_i, log_err)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.exp(log_err - log_i)
        lo = np.where(ratio < 1.0, log_i + np.log1p(-np.minimum(ratio, 1.0)), -np.inf)
    lo = np.where(np.isfinite(hi), lo, -np.inf)
    return lo, hi
