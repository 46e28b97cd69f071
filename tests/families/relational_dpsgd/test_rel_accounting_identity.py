"""The batched, memoised and lazily searched relational accounting (and the batched group
polynomial of the Poisson group-K path) give the same floats as straightforward references.

The reference functions below are the per-node code that the batched evaluation replaced: one
log-space convolution per order j and per l-node, one weight vector at a time.  Swapping them in
(``reference_mode``) gives the evaluation as it was before; every comparison is bit for bit
(``np.array_equal`` / ``==``), not approximate.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from dpspec.accounting import group as G
from dpspec.accounting import relational as R
from dpspec.accounting._exact import (binomial_mixture_log_psi_m1, log_bounds_from_abs,
                                      log_bounds_from_rel)
from dpspec.accounting._logmath import ULP, log_expm1, logsumexp_rows
from dpspec.accounting._quadrature import mixture_psi_m1
from dpspec.accounting.curve import DEFAULT_ALPHAS
from dpspec.accounting.relational import RelationalConfig

# ----------------------------------------------------------------------------- references


def ref_group_d(jmax: int, lw: np.ndarray, sigma: float):
    """log D_j, rel_d for j = 0..jmax: one log-space convolution per j (group module docstring)."""
    k = lw.size - 1
    x = 1.0 / (sigma * sigma)
    log_r = math.log(-math.expm1(lw[0]))
    lw1 = lw[1:] - log_r
    kk = np.arange(1, k + 1, dtype=float)
    la = lw1 - 0.5 * kk * kk * x
    a_m1 = float(np.sum(np.exp(lw1) * np.expm1(-0.5 * kk * kk * x)))
    log_a_sum = math.log1p(a_m1) if a_m1 > -0.5 else float(logsumexp_rows(la, axis=0))
    log_d = np.full(jmax + 1, -np.inf)
    rel_d = np.zeros(jmax + 1)
    la_rev = la[::-1]
    step_err = float(np.max(np.abs(la))) + math.log2(k + 1) + 2.0
    p = la.copy()
    for j in range(2, jmax + 1):
        pad = np.full(k - 1, -np.inf)
        win = sliding_window_view(np.concatenate([pad, p, pad]), k)
        p = logsumexp_rows(win + la_rev, axis=1)
        s = np.arange(j, j * k + 1, dtype=float)
        t = 0.5 * s * s * x
        terms = p + log_expm1(t)
        log_x = float(logsumexp_rows(terms, axis=0))
        ja = j * log_a_sum
        y = -math.expm1(ja)
        log_y = math.log(y) if y > 0 else -np.inf
        ratio = math.exp(log_y - log_x) if log_y > -np.inf else 0.0
        eta_x = 4.0 * ULP * (j * step_err + float(np.max(np.abs(terms[np.isfinite(terms)])))
                             + float(t[-1]) + 2.0)
        eta_y = 4.0 * ULP * (1.0 + j * abs(log_a_sum) * math.exp(ja) / max(y, 1e-300))
        if ratio < 1.0:
            log_d[j] = log_x + math.log1p(-ratio)
            rel_d[j] = (eta_x + eta_y * ratio) / (1.0 - ratio)
        else:
            log_d[j] = log_x
            rel_d[j] = np.inf
    return log_d, rel_d


def ref_removal_poly(alphas_int, lw, sigma, d=None):
    log_d, rel_d = ref_group_d(int(alphas_int.max()), lw, sigma)
    log_r = math.log(-math.expm1(lw[0]))
    log_i, rel = binomial_mixture_log_psi_m1(alphas_int, float(lw[0]), log_r, log_d, rel_d)
    return log_bounds_from_rel(log_i, rel)


def ref_mixture_log_bounds(alphas, lw, s):
    ints = G.is_integer_order(alphas)
    poly = ints & (alphas <= G.max_poly_order(lw.size - 1)) & bool(np.isfinite(lw[0]))
    n = alphas.size
    rem_lo, rem_hi = np.empty(n), np.empty(n)
    if np.any(poly):
        rem_lo[poly], rem_hi[poly] = ref_removal_poly(alphas[poly].astype(np.int64), lw, s)
    if np.any(~poly):
        q = mixture_psi_m1(alphas[~poly], lw, s, "removal", ints[~poly])
        rem_lo[~poly], rem_hi[~poly] = log_bounds_from_abs(q.log_value, q.log_err)
    q = mixture_psi_m1(alphas, lw, s, "insertion", ints)
    ins_lo, ins_hi = log_bounds_from_abs(q.log_value, q.log_err)
    return rem_lo, rem_hi, ins_lo, ins_hi


def ref_c1_eval(ls, alphas, s, rate, K, k, n, chains=None):
    """Thm C.1 node values one l at a time (``chains`` ignored)."""
    shift = K + 2 if k > 0 else K
    log_fmax1 = log_expm1(alphas * (alphas - 1.0) * shift * shift / (2.0 * s * s)) + 1e-12
    log_fmax = np.concatenate([log_fmax1, log_fmax1])
    lo = np.empty((ls.size, 2 * alphas.size))
    hi = np.empty((ls.size, 2 * alphas.size))
    for i, l in enumerate(ls):
        p = min(1.0, float(l) * k / n) if k > 0 else 0.0
        lw = R._c1_log_weights(rate, K, p)
        if k == 0:
            lw = lw[:K + 1]
        lw = lw[:int(np.nonzero(np.isfinite(lw))[0].max()) + 1]
        if lw.size == 1:
            lo[i], hi[i] = -np.inf, -np.inf
            continue
        with np.errstate(invalid="ignore"):
            r_lo, r_hi, i_lo, i_hi = ref_mixture_log_bounds(alphas, lw, s)
        lo[i] = np.concatenate([r_lo, i_lo])
        hi[i] = np.minimum(np.concatenate([r_hi, i_hi]), log_fmax)
    return lo, hi


def ref_search_epsilon(config, sigma, steps, delta, alphas=None, rtol_eq3=1e-10, rtol_c1=1e-8,
                       include=None):
    """Every order evaluated (what the calibration search used to call)."""
    return R.relational_accountants(config, sigma, steps, delta, alphas, rtol_eq3, rtol_c1,
                                    include).epsilon


@contextmanager
def reference_mode():
    """Per-node evaluation, per-node polynomial, full search evaluations, no memo reuse."""
    saved = R._c1_eval, R._search_epsilon, G._removal_poly
    R._c1_eval, R._search_epsilon, G._removal_poly = ref_c1_eval, ref_search_epsilon, \
        ref_removal_poly
    R.clear_memo()
    try:
        yield
    finally:
        R._c1_eval, R._search_epsilon, G._removal_poly = saved
        R.clear_memo()


def _same_curve(a, b):
    assert np.array_equal(a.alphas, b.alphas)
    assert np.array_equal(a.rdp, b.rdp), np.nonzero(a.rdp != b.rdp)
    assert np.array_equal(a.abs_errors, b.abs_errors)
    assert a.sources == b.sources and a.theorem == b.theorem and a.method == b.method


def _same_accounting(a, b):
    assert a.epsilon == b.epsilon and a.dp.best_alpha == b.dp.best_alpha and a.best == b.best
    assert set(a.accountants) == set(b.accountants) and a.rejected == b.rejected
    for nm in a.accountants:
        _same_curve(a.accountants[nm].curve, b.accountants[nm].curve)
        assert a.accountants[nm].epsilon == b.accountants[nm].epsilon
    _same_curve(a.curve, b.curve)
    assert a.statement == b.statement


#: a real order, integer orders <= 64 and > 64: one of each order group
GRID = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0, 128.0])

# ----------------------------------------------------------------------------- D_j recursion


def test_pairwise_sum_reproduces_numpy_sum_over_a_contiguous_axis():
    """The windowed log-sum-exp relies on numpy's pairwise summation order (if a numpy release
    changed it, the batched D_j would differ from np.sum in the last bits: this test says so)."""
    rng = np.random.default_rng(3)
    for n in list(range(1, 41)) + [63, 64, 65, 127, 128, 129, 200, 257]:
        x = np.exp(rng.normal(0.0, 4.0, (50, 3, n)))
        assert np.array_equal(x.sum(axis=-1), G._pairwise_sum([x[..., i] for i in range(n)])), n


@pytest.mark.parametrize("k, rate, sigma, jmax", [(2, 0.3, 0.7, 40), (4, 0.01, 3.0, 64),
                                                  (7, 0.03, 8.6, 128), (8, 0.005, 2.0, 100),
                                                  (12, 1e-4, 30.0, 50), (33, 0.2, 5.0, 20)])
def test_batched_d_chain_equals_the_per_vector_recursion(k, rate, sigma, jmax):
    lws = [G.group_log_weights(rate * f, k) for f in (1.0, 0.5, 1.7)]
    ch = G.DChain(np.stack(lws), sigma)
    ch.extend(jmax // 3).extend(jmax)                   # continued in j: the same values
    for i, lw in enumerate(lws):
        ref = ref_group_d(jmax, lw, sigma)
        assert np.array_equal(ch.log_d[i], ref[0]) and np.array_equal(ch.rel_d[i], ref[1])
        one = G._group_d(jmax, lw, sigma)
        assert np.array_equal(one[0], ref[0]) and np.array_equal(one[1], ref[1])
    part = G.DChain.stack([ch.take([2]), ch.take([0])])
    assert np.array_equal(part.log_d, ch.log_d[[2, 0]])


@settings(max_examples=40, deadline=None)
@given(k=st.integers(2, 20), log_rate=st.floats(math.log(1e-6), math.log(0.6)),
       log_sigma=st.floats(math.log(0.3), math.log(500.0)), jmax=st.integers(2, 70),
       cut=st.floats(0.0, 1.0))
def test_d_chain_property(k, log_rate, log_sigma, jmax, cut):
    lw = G.group_log_weights(math.exp(log_rate), k)
    sigma = math.exp(log_sigma)
    ch = G.DChain(np.stack([lw, lw]), sigma).extend(max(1, int(cut * jmax))).extend(jmax)
    ref = ref_group_d(jmax, lw, sigma)
    for i in range(2):
        assert np.array_equal(ch.log_d[i], ref[0]) and np.array_equal(ch.rel_d[i], ref[1])


# ----------------------------------------------------------------------------- Poisson group-K


@pytest.mark.parametrize("sigma, rate, K", [(2.0, 0.005, 8), (1.0, 0.01, 4), (0.8, 0.1, 2),
                                            (5.0, 0.001, 16)])
def test_group_curve_equals_reference(sigma, rate, K):
    a = DEFAULT_ALPHAS[DEFAULT_ALPHAS <= 300]
    new = G.group_curve(a, sigma, rate, K)
    with reference_mode():
        ref = G.group_curve(a, sigma, rate, K)
    assert np.array_equal(new.rdp, ref.rdp) and np.array_equal(new.err, ref.err)
    assert new.sources == ref.sources


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_sigma=st.floats(math.log(0.5), math.log(50.0)),
       log_rate=st.floats(math.log(1e-5), math.log(0.3)), K=st.integers(2, 12))
def test_group_curve_property(log_sigma, log_rate, K):
    a = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    sigma, rate = math.exp(log_sigma), math.exp(log_rate)
    new = G.group_curve(a, sigma, rate, K)
    with reference_mode():
        ref = G.group_curve(a, sigma, rate, K)
    assert np.array_equal(new.rdp, ref.rdp) and np.array_equal(new.err, ref.err)


# ----------------------------------------------------------------------------- Thm C.1 nodes


@pytest.mark.parametrize("rate, K, k, n", [(0.05, 3, 2, 40), (0.02, 5, 4, 200), (0.3, 2, 0, 100)])
def test_c1_node_values_equal_reference(rate, K, k, n):
    s = 6.0
    # l = 0 (no negatives), l with p_l = 1 (kink: no weight at mean 0, quadrature only)
    ls = np.array([0, 3, 7, 15, 60], dtype=np.int64)
    ints = GRID[G.is_integer_order(GRID)]
    chains: dict = {}
    for al in (ints[ints <= 64], ints, GRID):           # continued chains, then cached ones
        for part in (ls[::2], ls[1::2], ls):            # nodes in different batches
            lo, hi = R._c1_eval(part, al, s, rate, K, k, n, chains)
            rlo, rhi = ref_c1_eval(part, al, s, rate, K, k, n)
            assert np.array_equal(lo, rlo) and np.array_equal(hi, rhi)
    assert chains[7].j == 128                               # continued from j = 64
    if k and 60 * k >= n:                                   # p_l = 1: quadrature, no polynomial
        assert 60 not in chains and not np.isfinite(R._c1_node_weights(60, rate, K, k, n)[0])


# ----------------------------------------------------------------------------- accountants

CONFIGS = [
    RelationalConfig(300, 200, 0.05, 3, 2, "static", "wor"),
    RelationalConfig(300, 200, 0.05, 3, 2, "standard", "wor"),
    RelationalConfig(300, 200, 0.05, 3, 0, "standard", "none"),
    RelationalConfig(300, 200, 0.05, 3, 2, "freq", "wor"),
]


@pytest.mark.slow
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.clipping}-{c.negatives}")
def test_accountants_equal_reference(cfg):
    with reference_mode():
        ref = R.relational_accountants(cfg, 1.3, 200, 1e-5, GRID)
    R.clear_memo()
    cold = R.relational_accountants(cfg, 1.3, 200, 1e-5, GRID)
    warm = R.relational_accountants(cfg, 1.3, 200, 1e-5, GRID)      # from the memo
    _same_accounting(cold, ref)
    _same_accounting(warm, ref)


@pytest.mark.slow
@pytest.mark.parametrize("sigma, steps, delta, include", [
    (1.3, 200, 1e-5, None), (0.7, 2000, 1e-6, None), (4.0, 50, 1e-5, None),
    (1.3, 200, 1e-5, ("eq3", "naive")), (0.6, 1, 1e-3, None), (60.0, 1, 0.3, None)])
def test_lazy_search_epsilon_is_the_full_epsilon(sigma, steps, delta, include):
    cfg = CONFIGS[0]
    R.clear_memo()
    lazy = R._search_epsilon(cfg, sigma, steps, delta, GRID, rtol_eq3=1e-8, include=include)
    R.clear_memo()
    full = R.relational_accountants(cfg, sigma, steps, delta, GRID, rtol_eq3=1e-8,
                                    include=include).epsilon
    assert lazy == full


def test_lazy_search_skips_order_groups_that_cannot_attain_epsilon(monkeypatch):
    """At a moderate target only the integer orders <= 64 of Thm C.1 are evaluated (the bound at
    1.5 from the l = 0 term and at 128 from monotonicity exclude the others)."""
    cfg = CONFIGS[0]
    calls = []
    orig = R._c1_evaluated

    def spy(*a, **kw):
        calls.append(a[9] if len(a) > 9 else kw.get("groups"))
        return orig(*a, **kw)

    monkeypatch.setattr(R, "_c1_evaluated", spy)
    R.clear_memo()
    eps = R._search_epsilon(cfg, 1.3, 200, 1e-5, GRID, rtol_eq3=1e-8)
    assert calls == [{1}]
    monkeypatch.setattr(R, "_c1_evaluated", orig)
    R.clear_memo()
    assert eps == R.relational_accountants(cfg, 1.3, 200, 1e-5, GRID, rtol_eq3=1e-8).epsilon


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate=st.floats(0.005, 0.2), log_sigma=st.floats(math.log(0.5), math.log(20.0)),
       steps=st.sampled_from([1, 10, 300, 3000]), K=st.integers(1, 5), k=st.integers(0, 3),
       log_delta=st.floats(math.log(1e-8), math.log(1e-2)),
       clipping=st.sampled_from(["static", "standard"]))
def test_lazy_search_epsilon_property(rate, log_sigma, steps, K, k, log_delta, clipping):
    cfg = RelationalConfig(400, 250, rate, K, k, clipping, "wor" if k else "none")
    a = np.array([1.5, 2.0, 4.0, 8.0, 16.0, 64.0, 96.0])
    sigma, delta = math.exp(log_sigma), math.exp(log_delta)
    R.clear_memo()
    lazy = R._search_epsilon(cfg, sigma, steps, delta, a, rtol_eq3=1e-8)
    R.clear_memo()
    assert lazy == R.relational_accountants(cfg, sigma, steps, delta, a, rtol_eq3=1e-8).epsilon


@pytest.mark.slow
def test_calibration_and_certificate_equal_reference():
    """The whole compile-time computation: sigma search and the certificate's evaluation."""
    cfg = CONFIGS[0]
    grid = np.array([1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 128.0])
    with reference_mode():
        s_ref = R.calibrate_relational_sigma(6.0, 1e-5, cfg, 300, alphas=grid)
        acc_ref = R.relational_accountants(cfg, s_ref, 300, 1e-5, R.SEARCH_ALPHAS)
    R.clear_memo()
    s_new = R.calibrate_relational_sigma(6.0, 1e-5, cfg, 300, alphas=grid)
    assert s_new == s_ref
    _same_accounting(R.certify_relational(cfg, s_new, 300, 1e-5), acc_ref)
    R.clear_memo()
    _same_accounting(R.certify_relational(cfg, s_new, 300, 1e-5), acc_ref)    # cold, no search


def test_memo_is_bounded():
    memo = R._Memo(3)
    for i in range(5):
        memo.context(("x", i))["v"] = i
    assert len(memo._d) == 3 and memo.context(("x", 4)) == {"v": 4}
    assert memo.context(("x", 0)) == {}                  # evicted: recomputed, never stale
    memo.clear()
    assert not memo._d
