"""The insertion quadrature's modes, bisected for many mixtures at once
(``_quadrature.insertion_modes``), are bit for bit those of the one-mixture bisection they
replaced, and so are the quadrature values and the Thm C.1 node values that use them.

``ref_insertion_mode`` below is the scalar reference: the previous ``_insertion_mode``, one
weight vector at a time, always 80 halvings.  Every comparison is of bit patterns.
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
from dpspec.accounting.group import group_log_weights
from dpspec.accounting.poisson import is_integer_order


def ref_insertion_mode(alphas: np.ndarray, lw: np.ndarray, sigma: float) -> np.ndarray:
    """Mode z* of phi(z) L(z)^{1-alpha} (the previous code, verbatim)."""
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


def _bits(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=float).view(np.int64)


def _assert_modes_equal(alphas, lws, sigma):
    alphas = np.asarray(alphas, float)
    with np.errstate(invalid="ignore"):
        got = Q.insertion_modes(alphas, lws, sigma)
        ref = [ref_insertion_mode(alphas, lw, sigma) for lw in lws]
    assert got.shape == (len(lws), alphas.size)
    for i, lw in enumerate(lws):
        assert np.array_equal(_bits(got[i]), _bits(ref[i])), (i, lw.size, got[i] - ref[i])
        with np.errstate(invalid="ignore"):
            one = Q._insertion_mode(alphas, lw, sigma)
        assert np.array_equal(_bits(one), _bits(ref[i]))


def _cora_nodes(ls, rate=64 / 2378, K=5, k=4, n=2166):
    lws = [R._c1_node_weights(int(l), rate, K, k, n) for l in ls]
    return [lw for lw in lws if lw.size > 1]


# weight vectors of different lengths in one batch: l = 0 has no negative (K + 1 means),
# larger l have K + 3; at l >= n / k the weight at mean 0 is zero (log weight -inf)
CORA_LS = [0, 1, 2, 5, 17, 40, 64, 100, 300, 541, 542, 900, 2378]


@pytest.mark.parametrize("sigma", [0.6, 1.2274607387764758, 3.0, 25.0])
@pytest.mark.parametrize("alphas", [
    R.SEARCH_ALPHAS, DEFAULT_ALPHAS[DEFAULT_ALPHAS <= 256],
    DEFAULT_ALPHAS[~is_integer_order(DEFAULT_ALPHAS) & (DEFAULT_ALPHAS <= 256)],
    np.array([1.5, 2.0]), np.array([8.0]), np.array([1.0001, 1e3])], ids=str)
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


def _same_quad(a: Q.QuadResult, b: Q.QuadResult):
    for x, y in [(a.log_value, b.log_value), (a.log_err, b.log_err), (a.nodes, b.nodes),
                 (a.converged, b.converged)]:
        assert np.array_equal(x, y)


@pytest.mark.parametrize("sigma", [0.8, 2.5])
def test_insertion_quadrature_with_given_modes(sigma, monkeypatch):
    a = R.SEARCH_ALPHAS
    ints = is_integer_order(a)
    lws = _cora_nodes([0, 30, 541, 1000])
    with np.errstate(invalid="ignore"):
        modes = Q.insertion_modes(a, lws, sigma)
        given_ = [Q.mixture_psi_m1(a, lw, sigma, "insertion", ints, modes[i])
                  for i, lw in enumerate(lws)]
        monkeypatch.setattr(Q, "_insertion_mode", ref_insertion_mode)
        ref = [Q.mixture_psi_m1(a, lw, sigma, "insertion", ints) for lw in lws]
    for g, r in zip(given_, ref):
        _same_quad(g, r)


@pytest.mark.parametrize("rate, K, k, n", [(64 / 2378, 5, 4, 2166), (0.05, 3, 2, 40),
                                           (0.3, 2, 0, 100)])
def test_c1_node_values_equal_the_scalar_reference(rate, K, k, n, monkeypatch):
    """Thm C.1 node values (modes bisected for all l-nodes at once) against one node at a
    time with the reference bisection."""
    s = 1.2274607387764758
    ls = np.array([0, 1, 3, 7, 15, 60, 400, 2000], dtype=np.int64)
    for alphas in (R.SEARCH_ALPHAS[:9], R.SEARCH_ALPHAS, np.array([1.5, 2.5, 7.5]),
                   np.array([6.0])):
        lo, hi = R._c1_eval(ls, alphas, s, rate, K, k, n, {})
        with monkeypatch.context() as mp:
            mp.setattr(Q, "_insertion_mode", ref_insertion_mode)
            mp.setattr(Q, "insertion_modes", None)          # not used by the reference path
            for i, l in enumerate(ls):
                lw = R._c1_node_weights(int(l), rate, K, k, n)
                if lw.size == 1:
                    assert np.all(np.isneginf(lo[i])) and np.all(np.isneginf(hi[i]))
                    continue
                r_lo, r_hi, i_lo, i_hi = R._mixture_log_bounds(alphas, lw, s)
                assert np.array_equal(lo[i], np.concatenate([r_lo, i_lo]))
                shift = K + 2 if k > 0 else K
                log_fmax = R.log_expm1(alphas * (alphas - 1.0) * shift * shift
                                       / (2.0 * s * s)) + 1e-12
                assert np.array_equal(hi[i], np.minimum(np.concatenate([r_hi, i_hi]),
                                                        np.concatenate([log_fmax] * 2)))
