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
in total for all orders at once (:class:`DChain`: for several weight vectors at
once, continued in j on demand).

Real alpha, larger integer alpha, and the insertion term: trapezoid quadrature
(``_quadrature``).  Every value is capped by the no-amplification bound
alpha K^2/(2 s^2).

Baseline (digest F10, §3.9): amplify, then the group property by Mironov 2017
Prop 11 with Hoelder exponent 2, plus the monotone envelope.
"""

from __future__ import annotations

import math

import numpy as np

from ._exact import binomial_mixture_log_psi_m1, log_bounds_from_abs, log_bounds_from_rel, rdp_from_log_psi_m1
from ._logmath import ULP, log_binom_pmf, log_expm1, logsumexp_rows, logsumexp_rows_bare, scalar_map
from ._quadrature import mixture_psi_m1
from ._sgm import Evaluated, cap, is_integer_order, no_amplification, sgm_curve

THEOREM_GROUP = "Schuchardt et al. 2024 Thm 4.2 (tight group amplification)"
METHOD_GROUP = (
    "removal, integer alpha <= max_poly_order(K): exact positive-term "
    "polynomial power (log-space convolution); other orders and the insertion "
    "term: trapezoid quadrature of E[g(L-1)] with step-halving error estimate x10 "
    "and closed-form tail bounds; capped by alpha K^2/(2 sigma^2)"
)
THEOREM_BASELINE = (
    "Mironov-Talwar-Zhang 2019 §3.3 + Mironov 2017 Prop 11 (Hoelder p=2 group recursion) with monotone envelope"
)


def max_poly_order(k: int) -> int:
    """Largest integer order evaluated with the exact polynomial (cost ~ alpha^2 K^2)."""
    return int(max(16, min(256, 2048 // k)))


def group_log_weights(rate: float, k: int) -> np.ndarray:
    kk = np.arange(k + 1)
    return log_binom_pmf(kk, k, math.log(rate), math.log1p(-rate))


def _safe_exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


class DChain:
    """log D_j (module docstring) for a batch of weight vectors of one length, extendable in j.

    One row per weight vector ``lws[i]`` (log w_k, k = 0..K, w_0 < 1).  The polynomial powers
    c_{j,.} are computed for all rows at once by the log-space convolution of the module
    docstring, one j at a time; :meth:`extend` continues from the last j, so the values for
    j <= J do not depend on how far, in how many steps or in which batch a row was extended.
    Every float operation is that of the per-row scalar recursion (same reductions over the same
    contiguous axes, libm for the scalar functions), so the results are bit for bit those of
    evaluating each row on its own.

    Attributes: ``j`` (last order computed), ``log_d`` / ``rel_d`` of shape (rows, j + 1).
    """

    def __init__(self, lws: np.ndarray, sigma: float):
        lws = np.atleast_2d(np.asarray(lws, dtype=float))
        n, kp1 = lws.shape
        k = kp1 - 1
        self.sigma = float(sigma)
        x = 1.0 / (sigma * sigma)
        kk = np.arange(1, k + 1, dtype=float)
        la = np.empty((n, k))
        las = np.empty(n)
        serr = np.empty(n)
        for i in range(n):  # per row exactly as the scalar recursion (cheap: once per row)
            lw = lws[i]
            log_r = math.log(-math.expm1(lw[0]))
            lw1 = lw[1:] - log_r  # log(w_k / r_K), k >= 1
            la[i] = lw1 - 0.5 * kk * kk * x  # log a_k
            # log A with A = sum_k a_k: near A = 1 (large sigma) as log1p of a sum of negative
            # terms (absolute accuracy matters for Y_j = 1 - A^j); otherwise directly in logs.
            a_m1 = float(np.sum(np.exp(lw1) * np.expm1(-0.5 * kk * kk * x)))
            las[i] = math.log1p(a_m1) if a_m1 > -0.5 else float(logsumexp_rows(la[i], axis=0))
            serr[i] = float(np.max(np.abs(la[i]))) + math.log2(k + 1) + 2.0
        self.la, self.las, self.serr = la, las, serr
        self.p = la.copy()  # log c_{1,s}, s = 1..k
        self.j = 1
        self.log_d = np.full((n, 2), -np.inf)
        self.rel_d = np.zeros((n, 2))

    @property
    def rows(self) -> int:
        return self.la.shape[0]

    def take(self, idx) -> DChain:
        """The chains of rows ``idx`` (a new object sharing nothing mutable)."""
        out = object.__new__(DChain)
        out.sigma, out.j = self.sigma, self.j
        for name in ("la", "las", "serr", "p", "log_d", "rel_d"):
            setattr(out, name, getattr(self, name)[idx].copy())
        return out

    @staticmethod
    def stack(chains: list) -> DChain:
        """One batch of chains with the same j, sigma and weight length."""
        out = object.__new__(DChain)
        out.sigma, out.j = chains[0].sigma, chains[0].j
        assert all(c.j == out.j and c.sigma == out.sigma for c in chains)
        for name in ("la", "las", "serr", "p", "log_d", "rel_d"):
            setattr(out, name, np.concatenate([getattr(c, name) for c in chains]))
        return out

    def extend(self, jmax: int) -> DChain:
        """Compute log D_j, rel_d for j = self.j + 1 .. jmax (in place; returns self)."""
        j0 = self.j
        if jmax <= j0:
            return self
        n, k = self.la.shape
        x = 1.0 / (self.sigma * self.sigma)
        # log expm1(s^2 x / 2) for s = 1..jmax k: one table (elementwise, as per j before)
        s_all = np.arange(1, jmax * k + 1, dtype=float)
        t_all = 0.5 * s_all * s_all * x
        le_all = log_expm1(t_all)
        la_rev = self.la[:, ::-1]
        p = self.p
        lx = np.empty((n, jmax - j0))
        mx = np.empty((n, jmax - j0))
        # p padded by k - 1 values -inf on both sides; p only grows, so the right padding stays
        buf = np.full((n, jmax * (k - 1) + 1 + 2 * (k - 1)), -np.inf)
        with np.errstate(under="ignore", divide="ignore"):
            for j in range(j0 + 1, jmax + 1):
                ln = p.shape[1]
                buf[:, k - 1 : k - 1 + ln] = p
                # window row s, column i: buf[s + i] + la_rev[i] (log c_{j-1} * a, reversed)
                p = _lse_windows(buf[:, : ln + 2 * (k - 1)], la_rev)  # log c_{j,s}, s = j..jk
                terms = p + le_all[j - 1 : j * k]
                lx[:, j - j0 - 1] = logsumexp_rows_bare(terms, -1)
                mx[:, j - j0 - 1] = np.max(np.where(np.isfinite(terms), np.abs(terms), -np.inf), axis=-1)
        self.p = p
        J = np.arange(j0 + 1, jmax + 1)
        t_last = t_all[J * k - 1]
        las = self.las[:, None]
        ja = J * las  # log A^j  (< 0)
        y = -scalar_map(math.expm1, ja)
        pos = y > 0
        log_y = np.where(pos, scalar_map(math.log, np.where(pos, y, 1.0)), -np.inf)
        fin = log_y > -np.inf
        ratio = np.where(fin, scalar_map(_safe_exp, np.where(fin, log_y - lx, 0.0)), 0.0)
        # relative errors of X_j (log-space convolution: ~ulp per step and per magnitude)
        eta_x = 4.0 * ULP * (J * self.serr[:, None] + mx + t_last + 2.0)
        eta_y = 4.0 * ULP * (1.0 + J * np.abs(las) * scalar_map(math.exp, ja) / np.maximum(y, 1e-300))
        ok = ratio < 1.0
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            log_d = np.where(ok, lx + scalar_map(math.log1p, np.where(ok, -ratio, 0.0)), lx)
            # not ok: D_j unresolved in float (not observed): no finite error bound to state
            rel_d = np.where(ok, (eta_x + eta_y * ratio) / np.where(ok, 1.0 - ratio, 1.0), np.inf)
        self.log_d = np.concatenate([self.log_d, log_d], axis=1)
        self.rel_d = np.concatenate([self.rel_d, rel_d], axis=1)
        self.j = jmax
        return self


def _pairwise_sum(xs: list) -> np.ndarray:
    """sum of the arrays ``xs`` in the order of numpy's pairwise summation (``np.sum`` over a
    contiguous axis of length len(xs)), elementwise: the same float result as that reduction,
    without its per-row cost on a short axis."""
    n = len(xs)
    if n < 8:
        res = xs[0].copy()
        for v in xs[1:]:
            res += v
        return res
    if n <= 128:
        r = [v.copy() for v in xs[:8]]
        i = 8
        while i < n - (n % 8):
            for q in range(8):
                r[q] += xs[i + q]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for v in xs[i:]:
            res += v
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(xs[:n2]) + _pairwise_sum(xs[n2:])


def _lse_windows(buf: np.ndarray, la_rev: np.ndarray) -> np.ndarray:
    """``logsumexp_rows(win + la_rev, axis=-1)`` for the sliding windows ``win`` of length k of
    each row of ``buf`` (same float operations; the caller sets np.errstate)."""
    k = la_rev.shape[1]
    n, rows = buf.shape[0], buf.shape[1] - k + 1
    x = np.empty((k, n, rows))
    for i in range(k):  # x[i] = win[..., i] + la_rev[i]
        np.add(buf[:, i : i + rows], la_rev[:, i : i + 1], out=x[i])
    m = np.max(x, axis=0)  # exact in any order
    m_safe = np.where(np.isfinite(m), m, 0.0)
    np.subtract(x, m_safe, out=x)
    np.exp(x, out=x)
    s = _pairwise_sum([x[i] for i in range(k)])
    out = np.log(s) + m_safe
    return np.where(np.isneginf(m), -np.inf, out)


def _group_d(jmax: int, lw: np.ndarray, sigma: float):
    """log D_j and relative error bounds for j = 0..jmax (see module docstring)."""
    ch = DChain(lw[None, :], sigma).extend(jmax)
    return ch.log_d[0], ch.rel_d[0]


def _removal_poly(alphas_int: np.ndarray, lw: np.ndarray, sigma: float, d=None):
    """log-bounds of Psi - 1 (removal, integer orders) from the exact polynomial.

    ``d`` = (log_d, rel_d) for j = 0..J >= max alpha (e.g. a :class:`DChain` row computed with
    other rows); only entries j <= alpha enter the value at alpha, so the result does not
    depend on J."""
    if d is None:
        d = _group_d(int(alphas_int.max()), lw, sigma)
    log_d, rel_d = d
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
    up, err = rdp_from_log_psi_m1(alphas, np.maximum(rem_lo, ins_lo), np.maximum(rem_hi, ins_hi))
    sources = ["removal" if r >= i else "insertion" for r, i in zip(rem_hi, ins_hi)]
    return cap(Evaluated(up, err, sources), no_amplification(alphas, sigma, k))


def baseline_curve(alphas: np.ndarray, sigma: float, rate: float, k: int, envelope: bool = True) -> Evaluated:
    """F10 recursion on the K = 1 SGM bound, optionally with the monotone envelope
    over the given (sorted) grid."""
    alphas = np.asarray(alphas, float)
    levels = int(math.ceil(math.log2(k))) if k > 1 else 0
    m = 2**levels
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
