"""Private: Psi - 1 of Gaussian-mixture pairs by trapezoid quadrature.

All Renyi moments here have the form (Delta normalised to 1, sigma = sigma/Delta)

    Psi_a(P || Q) - 1 = E_{Z ~ N(0, sigma^2)}[ Q(Z) * g_a(P(Z)/Q(Z) - 1) ]

with P, Q likelihood ratios of Gaussian mixtures against N(0, sigma^2) and
g_a(v) = (1+v)^a - 1 - a v >= 0 (see ``_logmath.log_g``).  The integrand is
non-negative, so the result has a small *relative* error even when Psi - 1 is
1e-15 or less.

Three pairs are supported (L(z) = sum_k w_k exp((k z - k^2/2)/sigma^2)):

* ``removal``   P = L, Q = 1        (Schuchardt et al. 2024 Thm 4.2, first term;
                                      K = 1 is the Poisson SGM of Mironov et al. 2019)
* ``insertion`` P = 1, Q = L        (Thm 4.2, second term)
* ``two_mixture`` P = (1-w) + w M_{+1}, Q = (1-w) + w M_{-1}  (Thm 3.6 relaxed, App. H)

Method (per order alpha): the trapezoid rule on a window [zL, zR] with steps h
and h/2, all orders sharing one node lattice (the mixture densities are computed
once per node).  The integrand is analytic in the strip |Im z| < d, where d is
the distance of the nearest zero of L (a polynomial in e^{z/sigma^2} with
positive coefficients, so d >= pi sigma^2 / K); for integer alpha the removal
integrand is entire.  The error of such sums decays like exp(-2 pi d / h), so
|T_h - T_{h/2}| (x SAFETY = 10) is a conservative stated error for T_{h/2}.  The
step is halved until |T_h - T_{h/2}| <= max(1e-11, float rounding level) * T_{h/2},
or a node budget is exhausted: then the row reports an infinite error and the
caller falls back to another valid bound.  Outside the window, closed-form tail
bounds are added (see the per-case comments), and the float rounding error is
bounded from the magnitudes of the log-terms (``_rel_round``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._logmath import LOG_SQRT_2PI, ULP, log1mexp, log_g, log_g_rel_error, log_ndtr, logsumexp_rows

SAFETY = 10.0  # factor on the step-halving error estimate
RTOL = 1e-11  # target relative discretisation error before refinement stops
TAIL_SIGMAS = 14.0  # window half-margin in standard deviations (Phi(-14) ~ 8e-45)
MAX_LEVELS = 6  # at most 2**6 refinements of the initial step
MAX_FINE_NODES_PER_ROW = 2**18


@dataclass(frozen=True)
class QuadResult:
    """log of the estimate of I = Psi - 1 and of an upper bound on |I - estimate|."""

    log_value: np.ndarray
    log_err: np.ndarray  # log of the absolute error bound on I
    nodes: np.ndarray  # number of fine nodes used per row
    converged: np.ndarray  # False: node budget exhausted (error is inf)


def _mixture_parts(z: np.ndarray, lw: np.ndarray, sigma: float, k_axis: int = 0):
    """log L(z) and L(z) - 1 (accurate near 0; may be +inf when huge).

    ``lw``: the log weights (K+1,) of every z, or one weight vector per z, (K+1, z.size) for
    ``k_axis`` 0 or (z.size, K+1) for ``k_axis`` 1.  numpy sums over k row after row on axis
    0 of an array with two or more columns, but pairwise over a contiguous axis, which is
    also how it sums a (K+1, 1) array: ``k_axis`` 1 gives each z the floats it gets alone."""
    K = (lw.size if lw.ndim == 1 else lw.shape[k_axis]) - 1
    k = np.expand_dims(np.arange(K + 1, dtype=float), 1 - k_axis)
    if lw.ndim == 1:
        lw = np.expand_dims(lw, 1 - k_axis)
    s = (k * np.expand_dims(z, k_axis) - 0.5 * k * k) / (sigma * sigma)
    logL = logsumexp_rows(lw + s, k_axis)
    # L - 1 = sum_{k>=1} w_k expm1(s_k): each term is exact to a few ulps, no 1 - 1.
    sk, lw1 = (s[1:], lw[1:]) if k_axis == 0 else (s[:, 1:], lw[:, 1:])
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        mag = lw1 + np.where(
            sk > 30.0, sk + np.log1p(-np.exp(-np.abs(sk))), np.log(np.abs(np.expm1(np.minimum(sk, 30.0))))
        )
        v = np.sum(np.sign(sk) * np.exp(mag), axis=k_axis)
    return logL, v


def _log_phi(z: np.ndarray, sigma: float) -> np.ndarray:
    return -0.5 * (z / sigma) ** 2 - LOG_SQRT_2PI - math.log(sigma)


def _two_mixture_parts(z: np.ndarray, w: float, sigma: float):
    """log P, log Q and v = P/Q - 1 for P = (1-w)+w M_{+1}, Q = (1-w)+w M_{-1}."""
    s2 = sigma * sigma
    lw, l1w = math.log(w), math.log1p(-w)
    logP = np.logaddexp(l1w, lw + (z - 0.5) / s2)
    logQ = np.logaddexp(l1w, lw + (-z - 0.5) / s2)
    t = np.abs(z) / s2
    # P - Q = 2 w e^{-1/(2 s2)} sinh(z/s2); log|sinh t| = t + log(1 - e^{-2t}) - log 2
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        log_abs = lw - 0.5 / s2 + t + log1mexp(2.0 * t) - logQ
        v = np.sign(z) * np.exp(log_abs)
    return logP, logQ, v


def _integrate(parts_fn, combine_fn, zL, zR, h0, rtol: np.ndarray, grp=None):
    """Trapezoid sums T_h, T_{h/2} of exp(log f) on each row's window, with refinement.

    The rows of one lattice group (``grp[row]``, default: all rows one group) share one node
    lattice z0 + i h/2 (z0: the group's leftmost window start, h: its step, initially
    ``h0[group]``), so the order-independent part of the integrand (``parts_fn(z, groups)``,
    the mixture densities at nodes z of those groups) is evaluated once per node of a group;
    ``combine_fn(parts, z, rows)`` returns log f for each (row, node) pair.  Every group is
    computed as it would be on its own (the groups of a call only share numpy calls).
    A row has converged when |T_h - T_{h/2}| <= rtol[row] * T_{h/2} (rtol is at least
    the float rounding level of that row, so refinement never chases rounding noise).
    Returns (log T_{h/2}, log |T_h - T_{h/2}|, fine node counts, converged, h per row).
    """
    rows = zL.size
    grp = np.zeros(rows, dtype=np.int64) if grp is None else np.asarray(grp, np.int64)
    h_grp = np.array(h0, dtype=float, ndmin=1)
    n_grp = h_grp.size
    log_T = np.full(rows, -np.inf)
    log_d = np.full(rows, np.inf)
    nodes = np.zeros(rows, dtype=np.int64)
    conv = np.zeros(rows, dtype=bool)
    h_row = h_grp[grp]
    todo = np.arange(rows)
    for _level in range(MAX_LEVELS + 1):
        if todo.size == 0:
            break
        g = grp[todo]
        z0_grp = np.full(n_grp, np.inf)
        np.minimum.at(z0_grp, g, zL[todo])
        z0, h = z0_grp[g], h_grp[g]
        i_lo = 2 * np.floor((zL[todo] - z0) / h).astype(np.int64)  # even: coarse nodes
        i_hi = 2 * np.ceil((zR[todo] - z0) / h).astype(np.int64)  # are the even ones
        i_hi = np.maximum(i_hi, i_lo + 8)
        n_fine = i_hi - i_lo + 1
        over = n_fine > MAX_FINE_NODES_PER_ROW
        if np.any(over):
            nodes[todo[over]] = n_fine[over]
            keep = ~over
            todo, g, i_lo, n_fine, h = todo[keep], g[keep], i_lo[keep], n_fine[keep], h[keep]
            i_hi = i_lo + n_fine - 1
        if todo.size == 0:
            break
        hf = 0.5 * h
        # each group's lattice nodes base..top, the groups one after another
        base = np.full(n_grp, np.iinfo(np.int64).max)
        top = np.full(n_grp, -1)
        np.minimum.at(base, g, i_lo)
        np.maximum.at(top, g, i_hi)
        used = np.nonzero(top >= 0)[0]
        size = np.zeros(n_grp, dtype=np.int64)
        size[used] = top[used] - base[used] + 1
        off = np.cumsum(size) - size
        col_grp = np.repeat(used, size[used])
        col_i = np.arange(col_grp.size) - off[col_grp] + base[col_grp]
        z_union = z0_grp[col_grp] + col_i * (0.5 * h_grp)[col_grp]
        parts = parts_fn(z_union, col_grp)
        starts = np.zeros(todo.size, dtype=np.int64)
        starts[1:] = np.cumsum(n_fine)[:-1]
        seg = np.repeat(np.arange(todo.size), n_fine)
        idx = np.arange(seg.size) - starts[seg]
        gidx = (off[g] + i_lo - base[g])[seg] + idx
        logf = combine_fn(tuple(p[gidx] for p in parts), z_union[gidx], todo[seg])
        mx = np.maximum.reduceat(logf, starts)
        mx_safe = np.where(np.isfinite(mx), mx, 0.0)
        with np.errstate(under="ignore"):
            e = np.exp(logf - mx_safe[seg])
        s_all = np.add.reduceat(e, starts)
        s_even = np.add.reduceat(np.where(idx % 2 == 0, e, 0.0), starts)
        with np.errstate(divide="ignore"):
            lT = mx_safe + np.log(hf * s_all)
            ld = mx_safe + np.log(np.abs(h * s_even - hf * s_all))
        lT = np.where(np.isneginf(mx), -np.inf, lT)
        ld = np.where(np.isneginf(mx), -np.inf, ld)
        log_T[todo], log_d[todo], nodes[todo], h_row[todo] = lT, ld, n_fine, h
        ok = (ld <= lT + np.log(rtol[todo])) | np.isneginf(lT)
        conv[todo[ok]] = True
        todo = todo[~ok]
        h_grp *= 0.5
    return log_T, log_d, nodes, conv, h_row


def _log_error(log_T, log_d, conv, log_tail, log_edge, rel_round) -> np.ndarray:
    """log of the error bound SAFETY*|T_h - T_{h/2}| + 2*tails + h*(edge values) + rounding.

    The tails bound both the integral outside the window and the trapezoid nodes
    omitted there (hence the factor 2, plus the edge values for the nearest nodes)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        parts = np.stack(
            [
                np.log(SAFETY) + log_d,
                math.log(2.0) + log_tail,
                log_edge,
                np.log(rel_round) + log_T,
            ]
        )
        parts = np.where(np.isnan(parts), np.inf, parts)
        m = np.max(parts, axis=0)
        m_safe = np.where(np.isfinite(m), m, 0.0)
        log_err = m_safe + np.log(np.sum(np.exp(parts - m_safe[None, :]), axis=0))
    log_err = np.where(np.isneginf(m), -np.inf, np.where(np.isposinf(m), np.inf, log_err))
    return np.where(conv, log_err, np.inf)


def _step(sigma: float, strip: float | None) -> float:
    """Initial trapezoid step.

    The error of the trapezoid sum is ~ exp(y^2/(2 sigma^2) - 2 pi y / h) for any
    0 < y < strip (shifting the contour to Im z = y costs the Gaussian factor
    e^{y^2/(2 sigma^2)}).  With y = 2 pi sigma^2/h this is exp(-2 pi^2 sigma^2/h^2),
    ~e^{-55} at h = 0.6 sigma; if the singularities are closer (y capped at
    d' = 0.9 strip) use h = 2 pi d'/(50 + d'^2/(2 sigma^2)) for ~e^{-50}.
    """
    h = 0.6 * sigma
    if strip is not None:
        d = 0.9 * strip
        if d < 2.0 * math.pi * sigma * sigma / h:
            h = min(h, 2.0 * math.pi * d / (50.0 + d * d / (2.0 * sigma * sigma)))
    return h


def _rel_round(a: np.ndarray, magnitude: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Relative rounding error of a positive sum of exp(log f): the kernel's error,
    the absolute error ~ulp * magnitude of each log-term, and the summation."""
    return log_g_rel_error(a) + 8.0 * ULP * (magnitude + 60.0 + np.log2(np.maximum(n, 2)))


def mixture_psi_m1(
    alphas: np.ndarray,
    lw: np.ndarray,
    sigma: float,
    direction: str,
    integer_alpha: np.ndarray,
    zstar: np.ndarray | None = None,
) -> QuadResult:
    """Psi - 1 of the removal or insertion pair for the mixture with log weights lw.

    alphas: orders > 1 (one row each).  lw: log w_k, k = 0..K (sum w_k = 1).
    zstar (insertion only): the modes ``insertion_modes(alphas, [lw], sigma)[0]`` if already
    computed.
    """
    return mixture_psi_m1_batch(
        alphas, [lw], sigma, direction, integer_alpha, None if zstar is None else np.asarray(zstar, float)[None, :]
    )[0]


class _Weights:
    """The log weight vectors of several mixtures, stacked per length K+1 (one column per
    mixture): mixture densities at nodes of different mixtures are computed one length at a
    time, with no padding (the same arrays, up to the column choice, as one mixture at a
    time)."""

    def __init__(self, lws):
        self.size = np.array([lw.size for lw in lws], dtype=np.int64)
        self.pos = np.empty(len(lws), dtype=np.int64)
        self.stacks = {}
        for n in np.unique(self.size).tolist():
            ids = np.nonzero(self.size == n)[0]
            self.pos[ids] = np.arange(ids.size)
            self.stacks[n] = np.stack([lws[i] for i in ids], axis=1)

    def parts(self, z: np.ndarray, mix: np.ndarray, sigma: float, k_axis: int = 0):
        """:func:`_mixture_parts` at z[i] of mixture mix[i], each z with the floats it gets in
        ``_mixture_parts(z_m, lws[m], sigma)`` with the other nodes z_m of its mixture m, if
        ``k_axis`` is 0 when they are two or more and 1 when z_m is a single node (see
        :func:`_mixture_parts`).  A single mixture is computed as it always was."""
        if self.size.size == 1:  # one mixture: as it always was
            return _mixture_parts(z, self.stacks[int(self.size[0])][:, 0], sigma)
        logL = np.empty(z.size)
        v = np.empty(z.size)
        sizes = self.size[mix]
        for n, stack in self.stacks.items():
            sel = np.nonzero(sizes == n)[0]
            if sel.size:
                w = stack[:, self.pos[mix[sel]]]
                if k_axis == 1:
                    w = np.ascontiguousarray(w.T)
                logL[sel], v[sel] = _mixture_parts(z[sel], w, sigma, k_axis)
        return logL, v


def mixture_psi_m1_batch(
    alphas: np.ndarray, lws, sigma: float, direction: str, integer_alpha: np.ndarray, zstar: np.ndarray | None = None
) -> list[QuadResult]:
    """:func:`mixture_psi_m1` of several mixtures (log weights ``lws``) at the same orders, in
    one pass: each mixture's rows get their own node lattices (``_integrate``'s groups), its
    own window, step and tails, so the results are bit for bit those of one mixture at a time.
    ``zstar`` (insertion only): the modes, shape (len(lws), alphas.size), if already computed.
    """
    alphas = np.asarray(alphas, float)
    if direction not in ("removal", "insertion"):
        raise ValueError(direction)
    na, nl = alphas.size, len(lws)
    if nl == 0:
        return []
    c = TAIL_SIGMAS
    s2 = sigma * sigma
    mix = np.repeat(np.arange(nl), na)  # row i * na + j: lws[i], alphas[j]
    al = np.tile(alphas, nl)
    K = np.array([lw.size - 1 for lw in lws], dtype=float)[mix]
    a = al if direction == "removal" else 1.0 - al
    strips = [_mixture_strip(lw, sigma) for lw in lws]
    weights = _Weights(lws)
    k_axis = 0 if na > 1 else 1

    if direction == "removal":
        zL = np.full(al.size, -c * sigma)
        zR = al * K + c * sigma
        # L^alpha is entire for integer alpha: only the Gaussian resolution matters.
        # Lattice groups 2i (integer orders of mixture i) and 2i + 1 (the others).
        grp = 2 * mix + (~np.tile(np.asarray(integer_alpha, bool), nl)).astype(np.int64)
        h0 = np.array([(_step(sigma, None), _step(sigma, st)) for st in strips]).ravel()
        grp_mix = np.arange(2 * nl) // 2
    else:
        if zstar is None:
            zstar = insertion_modes(alphas, lws, sigma)
        zs = np.asarray(zstar, float).reshape(al.size)
        zL = zs - c * sigma
        zR = K + c * sigma
        grp = mix
        h0 = np.array([_step(sigma, st) for st in strips])
        grp_mix = np.arange(nl)

    def parts(z, groups):
        return weights.parts(z, grp_mix[groups], sigma)

    def combine(p, z, rows):
        logL, v = p
        return log_g(a[rows], v, logL) + _log_phi(z, sigma)

    logL_L, v_L = weights.parts(zL, mix, sigma, k_axis)
    logL_R, v_R = weights.parts(zR, mix, sigma, k_axis)
    # magnitude of the log-terms anywhere in the window (|a log L| + z^2/(2 s2)):
    # each is computed with absolute error ~ulp * magnitude.
    mag = np.abs(a) * np.maximum(np.abs(logL_L), np.abs(logL_R)) + np.maximum(zL**2, zR**2) / (2 * s2)
    rtol = np.maximum(RTOL, 4.0 * _rel_round(a, mag, np.full(a.shape, 2**20)))
    log_T, log_d, nodes, conv, h = _integrate(parts, combine, zL, zR, h0, rtol, grp)

    # --- tails outside [zL, zR] (rigorous bounds; see module docstring) ---
    # g_a(w0 - 1): the largest value of g_a(L - 1) for z <= 0 (L in [w0, 1], g convex, g(0)=0)
    log_w0 = np.array([lw[0] for lw in lws])[mix]
    w0m1 = np.array([np.expm1(lw[0]) for lw in lws])[mix]
    log_g_w0 = log_g(a, w0m1, log_w0)
    if direction == "removal":
        # left: Phi(zL/sigma) * g_alpha(w0 - 1)
        left = log_ndtr(zL / sigma) + log_g_w0
        # right: g <= L^alpha and log L(z) <= log L(zR) + K (z - zR)/sigma^2 for z >= zR, so
        # int_{zR}^inf phi L^alpha <= exp(alpha log L(zR) - alpha K zR/s2 + (alpha K)^2/(2 s2))
        #                             * Phi(-(zR - alpha K)/sigma)
        right = al * logL_R - al * K * zR / s2 + (al * K) ** 2 / (2 * s2) + log_ndtr(-(zR - al * K) / sigma)
    else:
        # left (z < zL <= z* <= 0): g_a(L-1) <= L^a there, and phi L^a is log-concave with
        # curvature <= -1/sigma^2 and mode z*, so the tail is <= f(z*) sqrt(2 pi) sigma Phi(-c).
        logL_s, _ = weights.parts(zs, mix, sigma, k_axis)
        left = -0.5 * (zs / sigma) ** 2 + a * logL_s + log_ndtr(-c)
        left = np.minimum(left, log_ndtr(zL / sigma) + log_g_w0)
        # right (z > zR >= K): g_a(u) <= |a| u <= |a| L and int_{zR}^inf phi L <= Phi(-(zR-K)/sigma)
        right = np.log(np.abs(a)) + log_ndtr(-(zR - K) / sigma)
    log_tail = np.logaddexp(left, right)
    fL = log_g(a, v_L, logL_L) + _log_phi(zL, sigma)
    fR = log_g(a, v_R, logL_R) + _log_phi(zR, sigma)
    log_edge = np.log(h) + np.logaddexp(fL, fR)
    rel = _rel_round(a, mag + np.abs(log_T), nodes)
    log_err = _log_error(log_T, log_d, conv, log_tail, log_edge, rel)
    return [
        QuadResult(log_T[r], log_err[r], nodes[r], conv[r]) for r in (slice(i * na, (i + 1) * na) for i in range(nl))
    ]


def _mixture_strip(lw: np.ndarray, sigma: float) -> float:
    """Half-width of the zero-free strip of L(z) around the real axis.

    L is a polynomial in v = e^{z/sigma^2} with positive coefficients
    a_k = w_k e^{-k^2/(2 sigma^2)}, so its zeros have |arg v| >= pi/K (a zero-free
    sector of positive-coefficient polynomials) and lie at |Im z| = sigma^2 |arg v|.
    The actual zeros are usually much farther (near arg v = pi: as sigma grows L
    tends to ((1-r) + r v)^K), so they are computed (np.roots on balanced
    coefficients) and pi/K is kept as a floor.  An overestimate would only make
    the first step too coarse, which the step-halving check detects.
    """
    K = lw.size - 1
    floor = math.pi / K
    k = np.arange(K + 1, dtype=float)
    la = lw - 0.5 * k * k / (sigma * sigma)
    beta = (la[0] - la[K]) / K  # P(e^beta t): equal end coefficients
    c = la + k * beta
    c = c - np.max(c)
    angle = floor
    if K > 1 and np.min(c) > -600.0:
        roots = np.roots(np.exp(c)[::-1])
        if roots.size == K and np.all(np.isfinite(roots)):
            angle = max(floor, float(np.min(np.abs(np.angle(roots)))))
    elif K == 1:
        angle = math.pi
    return sigma * sigma * angle


def insertion_modes(alphas: np.ndarray, lws, sigma: float) -> np.ndarray:
    """Modes z* of phi(z) L(z)^{1-alpha} of several mixtures: row i is z* of ``lws[i]`` at
    ``alphas`` (shape (len(lws), alphas.size)).  z* is the root of z + (alpha-1) m(z) = 0,
    where m(z) = E_posterior[k] in [0, K] is increasing; z* in [-(alpha-1) K, 0]; found by
    80 bisection steps.

    The same steps for every (mixture, order) column, with the same float operations as one
    mixture at a time, so row i is bit for bit ``insertion_modes(alphas, [lws[i]], sigma)``.
    The only operations whose result could depend on the batching are the sums over k;
    numpy sums them

    * for several orders (a (K+1, orders) array, k on axis 0) row after row, one column at a
      time: the mixtures are columns of one (K+1, mixtures x orders) array, shorter weight
      vectors padded with log weight -inf at the top (exactly 0 after exp, added last:
      x + 0 = x);
    * for one order (a (K+1, 1) array: one contiguous axis) pairwise: the mixtures are rows of
      a (mixtures, K+1) array summed over its contiguous last axis, the same pairwise sum
      (no padding: one array per length K+1).

    The loop stops before the 80th step only once an iteration leaves every (lo, hi) bit
    pattern unchanged: the next one would repeat the same operations on the same bits, so
    all the remaining ones are no-ops.
    """
    alphas = np.asarray(alphas, float)
    na, nl = alphas.size, len(lws)
    out = np.empty((nl, na))
    if nl == 0 or na == 0:
        return out
    if na > 1:
        out[:] = _bisect_modes(alphas, lws, sigma, 0)
    else:
        sizes = np.array([lw.size for lw in lws])
        for size in np.unique(sizes):
            idx = np.nonzero(sizes == size)[0]
            out[idx] = _bisect_modes(alphas, [lws[i] for i in idx], sigma, 1)
    return out


def _bisect_modes(alphas: np.ndarray, lws, sigma: float, k_axis: int) -> np.ndarray:
    """The bisection of :func:`insertion_modes` with k on axis ``k_axis`` of the work arrays:
    0 (rows k, columns (mixture, order)) or 1 (rows mixtures of one length, one order)."""
    na, nl = alphas.size, len(lws)
    rows = max(lw.size for lw in lws)
    lw_cols = np.full((rows, nl), -np.inf)
    for i, lw in enumerate(lws):
        lw_cols[: lw.size, i] = lw
    lw_cols = np.repeat(lw_cols, na, axis=1)  # column i * na + j: lws[i], alphas[j]
    K = np.repeat(np.array([lw.size - 1 for lw in lws], dtype=float), na)
    a = np.tile(alphas, nl)
    k = np.arange(rows, dtype=float)[:, None]
    if k_axis == 1:
        lw_cols, k = np.ascontiguousarray(lw_cols.T), k.T
    half_k2 = 0.5 * k * k
    s2 = sigma * sigma
    am1 = a - 1.0
    lo = -am1 * K - 1.0
    hi = np.zeros_like(a)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        t = lw_cols + (k * np.expand_dims(mid, k_axis) - half_k2) / s2
        t = t - np.expand_dims(np.max(t, axis=k_axis), k_axis)
        p = np.exp(t)
        m = np.sum(k * p, axis=k_axis) / np.sum(p, axis=k_axis)
        pos = mid + am1 * m > 0
        hi_new = np.where(pos, mid, hi)
        lo_new = np.where(pos, lo, mid)
        if np.array_equal(hi_new.view(np.int64), hi.view(np.int64)) and np.array_equal(
            lo_new.view(np.int64), lo.view(np.int64)
        ):
            break
        lo, hi = lo_new, hi_new
    return (0.5 * (lo + hi)).reshape(nl, na)


def two_mixture_psi_m1(alphas: np.ndarray, w: float, sigma: float) -> QuadResult:
    """Psi_alpha((1-w)N(0)+wN(1) || (1-w)N(0)+wN(-1)) - 1, noise sigma (Delta = 1)."""
    alphas = np.asarray(alphas, float)
    c = TAIL_SIGMAS
    s2 = sigma * sigma
    zL = np.full(alphas.size, -c * sigma - 1.0)
    zR = alphas + c * sigma
    h0 = _step(sigma, math.pi * s2)

    def combine(p, z, rows):
        logP, logQ, v = p
        return logQ + log_g(alphas[rows], v, logP - logQ) + _log_phi(z, sigma)

    mag = np.maximum(zL**2, zR**2) / (2 * s2)
    ends = [_two_mixture_parts(zz, w, sigma) for zz in (zL, zR)]
    for logP, logQ, _ in ends:
        mag = mag + alphas * np.abs(logP - logQ) + np.abs(logQ)
    rtol = np.maximum(RTOL, 4.0 * _rel_round(alphas, mag, np.full(alphas.shape, 2**20)))
    log_T, log_d, nodes, conv, h = _integrate(lambda z, g: _two_mixture_parts(z, w, sigma), combine, zL, zR, h0, rtol)
    lw_, l1w = math.log(w), math.log1p(-w)
    # left (z < zL <= -1/2, so P <= 1 <= Q): integrand <= alpha(1-P) + (alpha-1)(Q-1)
    #   <= alpha w + (alpha-1) w M_{-1}; integral = alpha w Phi(zL/s) + (alpha-1) w Phi((zL+1)/s)
    left = np.logaddexp(
        np.log(alphas) + lw_ + log_ndtr(zL / sigma), np.log(alphas - 1.0) + lw_ + log_ndtr((zL + 1.0) / sigma)
    )
    # right (z > zR >= 1/2, so P >= 1 >= Q >= 1-w): integrand <= P^alpha (1-w)^{1-alpha}
    logP_R = ends[1][0]
    right = (
        (1.0 - alphas) * l1w
        + alphas * logP_R
        - alphas * zR / s2
        + alphas**2 / (2 * s2)
        + log_ndtr(-(zR - alphas) / sigma)
    )
    log_tail = np.logaddexp(left, right)
    fs = [logQ + log_g(alphas, v, logP - logQ) + _log_phi(zz, sigma) for zz, (logP, logQ, v) in zip((zL, zR), ends)]
    log_edge = np.log(h) + np.logaddexp(fs[0], fs[1])
    rel = _rel_round(alphas, mag + np.abs(log_T), nodes)
    return QuadResult(log_T, _log_error(log_T, log_d, conv, log_tail, log_edge, rel), nodes, conv)
