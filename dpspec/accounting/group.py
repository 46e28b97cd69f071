"""Group privacy amplification for the Poisson-subsampled Gaussian.

Tight bound (Schuchardt et al. 2024 Thm 4.2; digest F5).  For a group of K
elements inserted or removed, rate r and noise s = sigma/Delta, with
L(z) = sum_{k=0}^K w_k exp((k z - k^2/2)/s^2), w_k = Bin(k | K, r):

    eps(alpha) = max(log Psi_rem, log Psi_ins) / (alpha - 1),
    Psi_rem = E_{N(0,s^2)}[L^alpha],   Psi_ins = E_{N(0,s^2)}[L^{1-alpha}].

Removal term, integer alpha <= ``max_poly_order(K)`` (exact, all terms positive):
write L = w0 + r_K L' with r_K = 1 - (1-r)^K and L' = sum_{k>=1} (w_k/r_K) M_k.
Then (``_exact``) Psi_rem - 1 = sum_{j>=2} C(alpha,j) w0^{alpha-j} r_K^j D_j with

    D_j = E[L'^j] - 1 = X_j - Y_j,
    X_j = sum_s c_{j,s} expm1(s^2/(2 s^2)),  c_{j,.} = coefficients of (sum_{k>=1} a_k u^k)^j,
    Y_j = 1 - A^j,  a_k = (w_k/r_K) e^{-k^2/(2 s^2)},  A = sum_k a_k,

(E[u^s] = e^{s^2/(2 s^2)} for u = e^{Z/s^2}; digest §4 step 3a / F6).  X_j and Y_j are
positive and X_j/D_j <= ~K+1, so D_j keeps its relative accuracy even for huge
s.  The polynomial powers are computed by log-space convolution, O(alpha^2 K^2)
in total for all orders at once.

Real alpha, larger integer alpha, and the insertion term: trapezoid quadrature
(``_quadrature``).  Every value is capped by the no-amplification bound
alpha K^2/(2 s^2).

Baseline (digest F10, §3.9): amplify, then the group property by Mironov 2017
Prop 11 with Hoelder exponent 2, plus the monotone envelope.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._exact import (binomial_mixture_log_psi_m1, log_bounds_from_abs, log_bounds_from_rel,
                     rdp_from_log_psi_m1)
from ._logmath import ULP, log_binom_pmf, log_expm1, logsumexp_rows
from ._quadrature import mixture_psi_m1
from ._sgm import Evaluated, cap, is_integer_order, no_amplification, sgm_curve

THEOREM_GROUP = "Schuchardt et al. 2024 Thm 4.2 (tight group amplification)"
METHOD_GROUP = ("removal, integer alpha <= max_poly_order(K): exact positive-term "
                "polynomial power (log-space convolution); other orders and the insertion "
                "term: trapezoid quadrature of E[g(L-1)] with step-halving error estimate x10 "
                "and closed-form tail bounds; capped by alpha K^2/(2 sigma^2)")
THEOREM_BASELINE = ("Mironov-Talwar-Zhang 2019 §3.3 + Mironov 2017 Prop 11 (Hoelder p=2 "
                    "group recursion) with monotone envelope")


def max_poly_order(k: int) -> int:
    """Largest integer order evaluated with the exact polynomial (cost ~ alpha^2 K^2)."""
    return int(max(16, min(256, 2048 // k)))


def group_log_weights(rate: float, k: int) -> np.ndarray:
    kk = np.arange(k + 1)
    return log_binom_pmf(kk, k, math.log(rate), math.log1p(-rate))


def _group_d(jmax: int, lw: np.ndarray, sigma: float):
    """log D_j and relative error bounds for j = 0..jmax (see module docstring)."""
    k = lw.size - 1
    x = 1.0 / (sigma * sigma)
    log_r = math.log(-math.expm1(lw[0]))
    lw1 = lw[1:] - log_r                                    # log(w_k / r_K), k >= 1
    kk = np.arange(1, k + 1, dtype=float)
    la = lw1 - 0.5 * kk * kk * x                            # log a_k
    # log A with A = sum_k a_k: near A = 1 (large sigma) as log1p of a sum of negative
    # terms (absolute accuracy matters for Y_j = 1 - A^j); otherwise directly in logs.
    a_m1 = float(np.sum(np.exp(lw1) * np.expm1(-0.5 * kk * kk * x)))
    log_a_sum = math.log1p(a_m1) if a_m1 > -0.5 else float(logsumexp_rows(la, axis=0))
    log_d = np.full(jmax + 1, -np.inf)
    rel_d = np.zeros(jmax + 1)
    la_rev = la[::-1]
    step_err = float(np.max(np.abs(la))) + math.log2(k + 1) + 2.0
    p = la.copy()                                           # log c_{1,s}, s = 1..k
    for j in range(2, jmax + 1):
        pad = np.full(k - 1, -np.inf)
        win = sliding_window_view(np.concatenate([pad, p, pad]), k)   # (len+k-1, k)
        p = logsumexp_rows(win + la_rev, axis=1)            # log c_{j,s}, s = j..jk
        s = np.arange(j, j * k + 1, dtype=float)
        t = 0.5 * s * s * x
        terms = p + log_expm1(t)
        log_x = float(logsumexp_rows(terms, axis=0))
        ja = j * log_a_sum                                   # log A^j  (< 0)
        y = -math.expm1(ja)
        log_y = math.log(y) if y > 0 else -np.inf
        ratio = math.exp(log_y - log_x) if log_y > -np.inf else 0.0
        # relative errors of X_j (log-space convolution: ~ulp per step and per magnitude)
        eta_x = 4.0 * ULP * (j * step_err + float(np.max(np.abs(terms[np.isfinite(terms)])))
                             + float(t[-1]) + 2.0)
        eta_y = 4.0 * ULP * (1.0 + j * abs(log_a_sum) * math.exp(ja) / max(y, 1e-300))
        if ratio < 1.0:
            log_d[j] = log_x + math.log1p(-ratio)
            rel_d[j] = (eta_x + eta_y * ratio) / (1.0 - ratio)
        else:  # D_j unresolved in float (not observed): no finite error bound to state
            log_d[j] = log_x
            rel_d[j] = np.inf
    return log_d, rel_d


def _removal_poly(alphas_int: np.ndarray, lw: np.ndarray, sigma: float):
    jmax = int(alphas_int.max())
    log_d, rel_d = _group_d(jmax, lw, sigma)
    log_r = math.log(-math.expm1(lw[0]))
    log_i, rel = binomial_mixture_log_psi_m1(alphas_int, float(lw[0]), log_r, log_d, rel_d)
    return log_bounds_from_rel(log_i, rel)


def group_curve(alphas: np.ndarray, sigma: float, rate: float, k: int) -> Evaluated:
    """Thm 4.2 for group size k >= 2 (Delta = 1, noise sigma)."""
    alphas = np.asarray(alphas, float)
    n = alphas.size
    if rate == 0.0:
        return Evaluated(np.zeros(n), np.zeros(n), ["rate=0"] * n)
    if rate == 1.0:
        return no_amplification(alphas, sigma, k)
    lw = group_log_weights(rate, k)
    ints = is_integer_order(alphas)
    poly = ints & (alphas <= max_poly_order(k))
    rem_lo, rem_hi = np.empty(n), np.empty(n)
    if np.any(poly):
        rem_lo[poly], rem_hi[poly] = _removal_poly(alphas[poly].astype(np.int64), lw, sigma)
    if np.any(~poly):
        q = mixture_psi_m1(alphas[~poly], lw, sigma, "removal", ints[~poly])
        rem_lo[~poly], rem_hi[~poly] = log_bounds_from_abs(q.log_value, q.log_err)
    q = mixture_psi_m1(alphas, lw, sigma, "insertion", ints)
    ins_lo, ins_hi = log_bounds_from_abs(q.log_value, q.log_err)
    # eps = max of the two terms: bounds on the max are the max of the bounds
    up, err = rdp_from_log_psi_m1(alphas, np.maximum(rem_lo, ins_lo),
                                  np.maximum(rem_hi, ins_hi))
    sources = ["removal" if r >= i else "insertion" for r, i in zip(rem_hi, ins_hi)]
    return cap(Evaluated(up, err, sources), no_amplification(alphas, sigma, k))


def baseline_curve(alphas: np.ndarray, sigma: float, rate: float, k: int,
                   envelope: bool = True) -> Evaluated:
    """F10 recursion on the K = 1 SGM bound, optionally with the monotone envelope
    over the given (sorted) grid."""
    alphas = np.asarray(alphas, float)
    levels = int(math.ceil(math.log2(k))) if k > 1 else 0
    m = 2 ** levels
    # leaves: eps_1 at orders m*alpha - i, i = 0..m-1 (exact in float for these sizes)
    leaves = np.unique(np.concatenate([m * alphas - i for i in range(m)]))
    base = sgm_curve(leaves, sigma, rate)
    table = dict(zip(leaves.tolist(), zip(base.rdp.tolist(), base.err.tolist())))

    def rec(a: float, lev: int):
        if lev == 0:
            return table[a]
        v1, e1 = rec(2 * a, lev - 1)
        v2, e2 = rec(2 * a - 1, lev - 1)
        c = (a - 0.5) / (a - 1.0)
        return c * v1 + v2, c * e1 + e2

    vals = np.array([rec(a, levels) for a in alphas.tolist()])
    rdp, err = vals[:, 0] * (1 + 8 * levels * ULP), vals[:, 1] + vals[:, 0] * 8 * levels * ULP
    if envelope:
        order = np.argsort(alphas)
        r_sorted = rdp[order]
        e_sorted = err[order]
        # suffix minimum (R_alpha is non-decreasing in alpha)
        best = np.minimum.accumulate(r_sorted[::-1])[::-1]
        idx = np.array([i + int(np.argmin(r_sorted[i:])) for i in range(len(r_sorted))])
        rdp[order], err[order] = best, e_sorted[idx]
    return Evaluated(rdp, err, ["baseline"] * alphas.size)
