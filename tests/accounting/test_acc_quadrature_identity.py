"""The Thm C.1 insertion and removal quadratures computed for many l-nodes at once
(``_quadrature.insertion_modes``, ``mixture_psi_m1_batch`` and ``_integrate``'s lattice
groups) are bit for bit those of the one-mixture code they replaced, and so are the Thm C.1
node values that use them.

The ``ref_*`` functions below are that code, verbatim (one weight vector at a time; the
bisection always takes 80 halvings); the helpers they share with the current module
(``_mixture_strip``, ``_step``, ``_rel_round``, ``_log_error``, ``log_g``) are unchanged.
Every comparison is of bit patterns.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpspec.accounting import _quadrature as Q
from dpspec.accounting import relational as R
from dpspec.accounting.curve import DEFAULT_ALPHAS
from dpspec.accounting.group import _removal_poly, group_log_weights
from dpspec.accounting.poisson import is_integer_order

# ----------------------------------------------------------------------------- references


def ref_insertion_mode(alphas: np.ndarray, lw: np.ndarray, sigma: float) -> np.ndarray:
    """Mode z* of phi(z) L(z)^{1-alpha}: root of z + (alpha-1) m(z) = 0, where
    m(z) = E_posterior[k] in [0, K] is increasing; z* in [-(alpha-1) K, 0]."""
    K = lw.size - 1
    k = np.arange(K + 1, dtype=float)[:, None]
    lo = -(alphas - 1.0) * K - 1.0
    hi = np.zeros_like(alphas)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        t = lw[:, None] + (k * mid[None, :] - 0.5 * k * k) / (sigma * sigma)
        t = t - np.max(t, axis=0)
        p = np.exp(t)
        m = np.sum(k * p, axis=0) / np.sum(p, axis=0)
        pos = mid + (alphas - 1.0) * m > 0
        hi = np.where(pos, mid, hi)
        lo = np.where(pos, lo, mid)
    return 0.5 * (lo + hi)


def ref_mixture_parts(z: np.ndarray, lw: np.ndarray, sigma: float):
    """log L(z) and L(z) - 1 (accurate near 0; may be +inf when huge)."""
    K = lw.size - 1
    k = np.arange(K + 1, dtype=float)[:, None]
    s = (k * z[None, :] - 0.5 * k * k) / (sigma * sigma)
    logL = ref_lse0(lw[:, None] + s)
    # L - 1 = sum_{k>=1} w_k expm1(s_k): each term is exact to a few ulps, no 1 - 1.
    sk = s[1:]
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        mag = lw[1:, None] + np.where(sk > 30.0, sk + np.log1p(-np.exp(-np.abs(sk))),
                                      np.log(np.abs(np.expm1(np.minimum(sk, 30.0)))))
        v = np.sum(np.sign(sk) * np.exp(mag), axis=0)
    return logL, v


def ref_lse0(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=0)
    with np.errstate(under="ignore"):
        return m + np.log(np.sum(np.exp(x - m), axis=0))


def ref_integrate(parts_fn, combine_fn, zL, zR, h0: float, rtol: np.ndarray):
    """Trapezoid sums T_h, T_{h/2} of exp(log f) on each row's window, with refinement.

    All rows share one node lattice z0 + i h/2, so the order-independent part of the
    integrand (``parts_fn(z)``, the mixture densities) is evaluated once per node;
    ``combine_fn(parts, z, rows)`` returns log f for each (row, node) pair.
    A row has converged when |T_h - T_{h/2}| <= rtol[row] * T_{h/2} (rtol is at least
    the float rounding level of that row, so refinement never chases rounding noise).
    Returns (log T_{h/2}, log |T_h - T_{h/2}|, fine node counts, converged, h per row).
    """
    rows = zL.size
    log_T = np.full(rows, -np.inf)
    log_d = np.full(rows, np.inf)
    nodes = np.zeros(rows, dtype=np.int64)
    conv = np.zeros(rows, dtype=bool)
    h_row = np.full(rows, float(h0))
    h = float(h0)
    todo = np.arange(rows)
    for _level in range(Q.MAX_LEVELS + 1):
        hf = 0.5 * h
        z0 = float(np.min(zL[todo]))
        i_lo = 2 * np.floor((zL[todo] - z0) / h).astype(np.int64)   # even: coarse nodes
        i_hi = 2 * np.ceil((zR[todo] - z0) / h).astype(np.int64)    # are the even ones
        i_hi = np.maximum(i_hi, i_lo + 8)
        n_fine = i_hi - i_lo + 1
        over = n_fine > Q.MAX_FINE_NODES_PER_ROW
        if np.any(over):
            nodes[todo[over]] = n_fine[over]
            todo, i_lo, n_fine = todo[~over], i_lo[~over], n_fine[~over]
            i_hi = i_lo + n_fine - 1
        if todo.size == 0:
            break
        base = int(i_lo.min())
        z_union = z0 + np.arange(base, int(i_hi.max()) + 1) * hf
        parts = parts_fn(z_union)
        starts = np.zeros(todo.size, dtype=np.int64)
        starts[1:] = np.cumsum(n_fine)[:-1]
        seg = np.repeat(np.arange(todo.size), n_fine)
        idx = np.arange(seg.size) - starts[seg]
        gidx = i_lo[seg] - base + idx
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
        if todo.size == 0:
            break
        h *= 0.5
    return log_T, log_d, nodes, conv, h_row


def ref_mixture_psi_m1(alphas: np.ndarray, lw: np.ndarray, sigma: float, direction: str,
                       integer_alpha: np.ndarray) -> Q.QuadResult:
    """Psi - 1 of the removal or insertion pair for the mixture with log weights lw.

    alphas: orders > 1 (one row each).  lw: log w_k, k = 0..K (sum w_k = 1).
    """
    alphas = np.asarray(alphas, float)
    K = lw.size - 1
    c = Q.TAIL_SIGMAS
    s2 = sigma * sigma
    log_w0 = lw[0]
    a = alphas if direction == "removal" else 1.0 - alphas
    strip = Q._mixture_strip(lw, sigma)

    if direction == "removal":
        zL = np.full(alphas.size, -c * sigma)
        zR = alphas * K + c * sigma
        # L^alpha is entire for integer alpha: only the Gaussian resolution matters.
        groups = [(integer_alpha, Q._step(sigma, None)),
                  (~integer_alpha, Q._step(sigma, strip))]
    elif direction == "insertion":
        zstar = ref_insertion_mode(alphas, lw, sigma)
        zL = zstar - c * sigma
        zR = np.full(alphas.size, K + c * sigma)
        groups = [(np.ones(alphas.size, bool), Q._step(sigma, strip))]
    else:
        raise ValueError(direction)

    def parts(z):
        return ref_mixture_parts(z, lw, sigma)

    def combine(p, z, rows):
        logL, v = p
        return Q.log_g(a[rows], v, logL) + Q._log_phi(z, sigma)

    logL_L, v_L = ref_mixture_parts(zL, lw, sigma)
    logL_R, v_R = ref_mixture_parts(zR, lw, sigma)
    # magnitude of the log-terms anywhere in the window (|a log L| + z^2/(2 s2)):
    # each is computed with absolute error ~ulp * magnitude.
    mag = (np.abs(a) * np.maximum(np.abs(logL_L), np.abs(logL_R))
           + np.maximum(zL ** 2, zR ** 2) / (2 * s2))
    rtol = np.maximum(Q.RTOL, 4.0 * Q._rel_round(a, mag, np.full(a.shape, 2 ** 20)))
    log_T = np.full(alphas.size, -np.inf)
    log_d = np.full(alphas.size, np.inf)
    nodes = np.zeros(alphas.size, dtype=np.int64)
    conv = np.zeros(alphas.size, dtype=bool)
    h = np.zeros(alphas.size)
    for sel, h0 in groups:
        if np.any(sel):
            ix = np.nonzero(sel)[0]
            out = ref_integrate(parts, lambda p, z, r, ix=ix: combine(p, z, ix[r]),
                             zL[ix], zR[ix], h0, rtol[ix])
            log_T[ix], log_d[ix], nodes[ix], conv[ix], h[ix] = out

    # --- tails outside [zL, zR] (rigorous bounds; see module docstring) ---
    # g_a(w0 - 1): the largest value of g_a(L - 1) for z <= 0 (L in [w0, 1], g convex, g(0)=0)
    w0m1 = np.expm1(log_w0)
    log_g_w0 = Q.log_g(a, np.full(a.shape, w0m1), np.full(a.shape, log_w0))
    if direction == "removal":
        # left: Phi(zL/sigma) * g_alpha(w0 - 1)
        left = Q.log_ndtr(zL / sigma) + log_g_w0
        # right: g <= L^alpha and log L(z) <= log L(zR) + K (z - zR)/sigma^2 for z >= zR, so
        # int_{zR}^inf phi L^alpha <= exp(alpha log L(zR) - alpha K zR/s2 + (alpha K)^2/(2 s2))
        #                             * Phi(-(zR - alpha K)/sigma)
        right = (alphas * logL_R - alphas * K * zR / s2 + (alphas * K) ** 2 / (2 * s2)
                 + Q.log_ndtr(-(zR - alphas * K) / sigma))
    else:
        # left (z < zL <= z* <= 0): g_a(L-1) <= L^a there, and phi L^a is log-concave with
        # curvature <= -1/sigma^2 and mode z*, so the tail is <= f(z*) sqrt(2 pi) sigma Phi(-c).
        logL_s, _ = ref_mixture_parts(zstar, lw, sigma)
        left = -0.5 * (zstar / sigma) ** 2 + a * logL_s + Q.log_ndtr(-c)
        left = np.minimum(left, Q.log_ndtr(zL / sigma) + log_g_w0)
        # right (z > zR >= K): g_a(u) <= |a| u <= |a| L and int_{zR}^inf phi L <= Phi(-(zR-K)/sigma)
        right = np.log(np.abs(a)) + Q.log_ndtr(-(zR - K) / sigma)
    log_tail = np.logaddexp(left, right)
    fL = Q.log_g(a, v_L, logL_L) + Q._log_phi(zL, sigma)
    fR = Q.log_g(a, v_R, logL_R) + Q._log_phi(zR, sigma)
    log_edge = np.log(h) + np.logaddexp(fL, fR)
    rel = Q._rel_round(a, mag + np.abs(log_T), nodes)
    return Q.QuadResult(log_T, Q._log_error(log_T, log_d, conv, log_tail, log_edge, rel),
                        nodes, conv)


def ref_node_bounds(alphas, lw, s):
    """Thm C.1 node (removal, insertion) log-bounds of one l-node, as before."""
    ints = is_integer_order(alphas)
    poly = R._poly_mask(alphas, lw)
    n = alphas.size
    rem_lo, rem_hi = np.empty(n), np.empty(n)
    if np.any(poly):
        rem_lo[poly], rem_hi[poly] = _removal_poly(alphas[poly].astype(np.int64), lw, s)
    if np.any(~poly):
        q = ref_mixture_psi_m1(alphas[~poly], lw, s, "removal", ints[~poly])
        rem_lo[~poly], rem_hi[~poly] = R.log_bounds_from_abs(q.log_value, q.log_err)
    q = ref_mixture_psi_m1(alphas, lw, s, "insertion", ints)
    ins_lo, ins_hi = R.log_bounds_from_abs(q.log_value, q.log_err)
    return rem_lo, rem_hi, ins_lo, ins_hi


# ----------------------------------------------------------------------------- helpers


def _bits(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=float).view(np.int64)


def _same_quad(a: Q.QuadResult, b: Q.QuadResult):
    assert np.array_equal(_bits(a.log_value), _bits(b.log_value)), (a.log_value, b.log_value)
    assert np.array_equal(_bits(a.log_err), _bits(b.log_err)), (a.log_err, b.log_err)
    assert np.array_equal(a.nodes, b.nodes) and a.nodes.dtype == b.nodes.dtype
    assert np.array_equal(a.converged, b.converged)


def _assert_modes_equal(alphas, lws, sigma):
    alphas = np.asarray(alphas, float)
    with np.errstate(invalid="ignore"):
        got = Q.insertion_modes(alphas, lws, sigma)
        ref = [ref_insertion_mode(alphas, lw, sigma) for lw in lws]
    assert got.shape == (len(lws), alphas.size)
    for i, lw in enumerate(lws):
        assert np.array_equal(_bits(got[i]), _bits(ref[i])), (i, lw.size, got[i] - ref[i])


def _assert_quads_equal(alphas, lws, sigma, directions=("insertion", "removal")):
    alphas = np.asarray(alphas, float)
    ints = is_integer_order(alphas)
    for d in directions:
        with np.errstate(invalid="ignore"):
            batch = Q.mixture_psi_m1_batch(alphas, lws, sigma, d, ints)
            ref = [ref_mixture_psi_m1(alphas, lw, sigma, d, ints) for lw in lws]
            one = [Q.mixture_psi_m1(alphas, lw, sigma, d, ints) for lw in lws]
        assert len(batch) == len(lws)
        for b, r, o in zip(batch, ref, one):
            _same_quad(b, r)
            _same_quad(o, r)


def _cora_nodes(ls, rate=64 / 2378, K=5, k=4, n=2166):
    lws = [R._c1_node_weights(int(l), rate, K, k, n) for l in ls]
    return [lw for lw in lws if lw.size > 1]


# weight vectors of different lengths in one batch: l = 0 has no negative (K + 1 means),
# larger l have K + 3; at l >= n / k the weight at mean 0 is zero (log weight -inf)
CORA_LS = [0, 1, 2, 5, 17, 40, 64, 100, 300, 541, 542, 900, 2378]
ORDERS = [R.SEARCH_ALPHAS, DEFAULT_ALPHAS[DEFAULT_ALPHAS <= 256],
          DEFAULT_ALPHAS[~is_integer_order(DEFAULT_ALPHAS) & (DEFAULT_ALPHAS <= 256)],
          np.array([1.5, 2.0]), np.array([8.0]), np.array([1.5]), np.array([1.0001, 1e3])]

# ----------------------------------------------------------------------------- insertion modes


@pytest.mark.parametrize("sigma", [0.6, 1.2274607387764758, 3.0, 25.0])
@pytest.mark.parametrize("alphas", ORDERS, ids=str)
def test_batched_modes_equal_the_scalar_reference(alphas, sigma):
    lws = _cora_nodes(CORA_LS)
    assert len({lw.size for lw in lws}) == 2 and not np.isfinite(lws[-1][0])
    _assert_modes_equal(alphas, lws, sigma)
    _assert_modes_equal(alphas, lws[::-1], sigma)            # column order does not matter
    _assert_modes_equal(alphas, lws[3:4], sigma)


def test_single_order_with_many_mixtures():
    """With one order numpy sums a (K+1, 1) array pairwise, not row by row: summing many
    mixtures as the columns of one (K+1, nodes) array would change some modes in the last bits
    (about a quarter of random cases with K + 1 >= 8), so there the mixtures are the rows of a
    (nodes, K+1) array summed over its contiguous axis."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        sigma = float(10 ** rng.uniform(-0.4, 1.0))
        rate = float(10 ** rng.uniform(-3, -0.5))
        lws = _cora_nodes(rng.integers(0, 2378, 8), rate=rate, K=int(rng.integers(2, 9)))
        _assert_modes_equal(np.array([1.0 + 10 ** rng.uniform(-2, 2.5)]), lws, sigma)


def test_group_weights_and_empty_input():
    lws = [group_log_weights(r, K) for r, K in [(0.01, 2), (0.3, 7), (1e-5, 16), (0.05, 1)]]
    _assert_modes_equal(DEFAULT_ALPHAS[:40], lws, 1.7)
    assert Q.insertion_modes(np.array([2.0, 3.0]), [], 1.0).shape == (0, 2)
    assert Q.mixture_psi_m1_batch(np.array([2.0, 3.0]), [], 1.0, "insertion",
                                  np.ones(2, bool)) == []


@settings(max_examples=80, deadline=None)
@given(K=st.integers(1, 12), k=st.integers(0, 4), n=st.integers(20, 5000),
       log_rate=st.floats(math.log(1e-5), math.log(0.6)),
       log_sigma=st.floats(math.log(0.2), math.log(100.0)),
       ls=st.lists(st.integers(0, 5000), min_size=1, max_size=12),
       log_am1=st.lists(st.floats(math.log(1e-3), math.log(2000.0)), min_size=1, max_size=20))
def test_batched_modes_property(K, k, n, log_rate, log_sigma, ls, log_am1):
    lws = [lw for lw in (R._c1_node_weights(l, math.exp(log_rate), K, k, n) for l in ls)
           if lw.size > 1]
    alphas = 1.0 + np.exp(np.array(log_am1))
    _assert_modes_equal(alphas, lws, math.exp(log_sigma))


# ----------------------------------------------------------------------------- quadrature


@pytest.mark.parametrize("sigma", [0.6, 1.2274607387764758, 4.0])
@pytest.mark.parametrize("alphas", ORDERS[:1] + ORDERS[2:], ids=str)
def test_batched_quadrature_equals_the_one_mixture_reference(alphas, sigma):
    lws = _cora_nodes([0, 3, 40, 541, 542, 1500])
    _assert_quads_equal(alphas, lws, sigma)
    _assert_quads_equal(alphas, lws[2:3], sigma)


def test_batched_quadrature_group_weights():
    """Poisson group-K weights of several lengths (one of them length 2: the SGM)."""
    lws = [group_log_weights(r, K) for r, K in [(0.01, 2), (0.3, 7), (1e-4, 12), (0.05, 1),
                                                (0.02, 7)]]
    _assert_quads_equal(np.array([1.25, 2.0, 3.5, 8.0, 20.0, 64.0]), lws, 1.7)
    _assert_quads_equal(np.array([2.5]), lws, 0.9)


def test_node_budget_exhausted_rows_are_the_same():
    """Rows whose window needs more than MAX_FINE_NODES_PER_ROW nodes (error +inf) next to
    rows that converge, in one call (small sigma, huge orders)."""
    lws = _cora_nodes([10, 700])
    alphas = np.array([1.5, 2.0, 3e4, 1e6])
    with np.errstate(invalid="ignore"):
        q = Q.mixture_psi_m1_batch(alphas, lws, 0.05, "removal", is_integer_order(alphas))
    assert not q[0].converged.all() and q[0].converged.any()
    _assert_quads_equal(alphas, lws, 0.05, ("removal",))


def test_mixture_densities_of_several_mixtures():
    """``_Weights.parts``: each node gets the floats of ``_mixture_parts`` with the other nodes
    of its mixture (k_axis 0 for two or more nodes per mixture, 1 for one: with K + 1 >= 8 a
    single node's sums over k are pairwise, and about a third of them differ from the row
    by row sums in the last bits)."""
    rng = np.random.default_rng(7)
    differ = 0
    for _ in range(30):
        lws = [group_log_weights(float(10 ** rng.uniform(-3, -0.3)), int(K))
               for K in rng.integers(1, 16, 6)]
        weights = Q._Weights(lws)
        sigma = float(10 ** rng.uniform(-0.3, 1.0))
        for per, k_axis in ((1, 1), (5, 0)):
            mix = np.repeat(np.arange(len(lws)), per)
            z = rng.normal(0.0, 5.0, mix.size)
            logL, v = weights.parts(z, mix, sigma, k_axis)
            rows_l, rows_v = weights.parts(z, mix, sigma, 0)
            for m, lw in enumerate(lws):
                sel = mix == m
                r_l, r_v = ref_mixture_parts(z[sel], lw, sigma)
                assert np.array_equal(_bits(logL[sel]), _bits(r_l))
                assert np.array_equal(_bits(v[sel]), _bits(r_v))
                differ += per == 1 and not (np.array_equal(rows_l[sel], r_l)
                                            and np.array_equal(rows_v[sel], r_v))
    assert differ > 0       # the case k_axis 1 is there for


@pytest.mark.slow  # tens of seconds on two cores
@settings(max_examples=40, deadline=None)
@given(K=st.integers(1, 9), k=st.integers(0, 4), n=st.integers(20, 3000),
       log_rate=st.floats(math.log(1e-4), math.log(0.5)),
       log_sigma=st.floats(math.log(0.3), math.log(20.0)),
       ls=st.lists(st.integers(0, 3000), min_size=1, max_size=6),
       orders=st.lists(st.one_of(st.integers(2, 120).map(float),
                                 st.floats(1.01, 150.0)), min_size=1, max_size=6))
def test_batched_quadrature_property(K, k, n, log_rate, log_sigma, ls, orders):
    lws = [lw for lw in (R._c1_node_weights(l, math.exp(log_rate), K, k, n) for l in ls)
           if lw.size > 1]
    _assert_quads_equal(np.array(sorted(orders)), lws, math.exp(log_sigma))


def test_integrate_lattice_groups_equal_separate_calls():
    """``_integrate`` with several lattice groups gives each group what it gets alone (the
    two-mixture integrand, groups with different windows and steps)."""
    w, sigma = 0.03, 0.8
    rng = np.random.default_rng(5)
    alphas = np.sort(1.0 + 10 ** rng.uniform(-1, 2, 12))
    zL = -14 * sigma - 1.0 - rng.uniform(0, 3, alphas.size)
    zR = alphas + 14 * sigma + rng.uniform(0, 3, alphas.size)
    grp = rng.integers(0, 3, alphas.size)
    h0 = np.array([0.3, 0.05, 0.41])
    rtol = np.full(alphas.size, 1e-11)

    def combine(p, z, rows):
        logP, logQ, v = p
        return logQ + Q.log_g(alphas[rows], v, logP - logQ) + Q._log_phi(z, sigma)

    got = Q._integrate(lambda z, g: Q._two_mixture_parts(z, w, sigma), combine, zL, zR, h0,
                       rtol, grp)
    for g in range(3):
        ix = np.nonzero(grp == g)[0]
        ref = ref_integrate(lambda z: Q._two_mixture_parts(z, w, sigma),
                            lambda p, z, r, ix=ix: combine(p, z, ix[r]), zL[ix], zR[ix],
                            h0[g], rtol[ix])
        for x, y in zip(got, ref):
            assert np.array_equal(x[ix], y)


# ----------------------------------------------------------------------------- Thm C.1 nodes


@pytest.mark.parametrize("rate, K, k, n", [(64 / 2378, 5, 4, 2166), (0.05, 3, 2, 40),
                                           (0.3, 2, 0, 100), (0.01, 9, 3, 500)])
def test_c1_node_values_equal_the_one_node_reference(rate, K, k, n):
    """Thm C.1 node values (quadratures of all l-nodes at once) against one node at a time
    with the reference quadrature."""
    s = 1.2274607387764758
    ls = np.array([0, 1, 3, 7, 15, 60, 400, 2000], dtype=np.int64)
    shift = K + 2 if k > 0 else K
    for alphas in (R.SEARCH_ALPHAS[:9], R.SEARCH_ALPHAS, np.array([1.5, 2.5, 7.5]),
                   np.array([6.0]), np.array([1.5])):
        lo, hi = R._c1_eval(ls, alphas, s, rate, K, k, n, {})
        log_fmax = R.log_expm1(alphas * (alphas - 1.0) * shift * shift / (2.0 * s * s)) + 1e-12
        for i, l in enumerate(ls):
            lw = R._c1_node_weights(int(l), rate, K, k, n)
            assert lw.size > 1
            with np.errstate(invalid="ignore"):
                r_lo, r_hi, i_lo, i_hi = ref_node_bounds(alphas, lw, s)
            assert np.array_equal(lo[i], np.concatenate([r_lo, i_lo]))
            assert np.array_equal(hi[i], np.minimum(np.concatenate([r_hi, i_hi]),
                                                    np.concatenate([log_fmax] * 2)))
            one = R._mixture_log_bounds(alphas, lw, s)          # one node, no batch
            for x, y in zip(one, (r_lo, r_hi, i_lo, i_hi)):
                assert np.array_equal(x, y)
