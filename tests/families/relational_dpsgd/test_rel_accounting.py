"""Accountants of dpspec.accounting.relational against the digest's test vectors, mpmath, the
reference scripts' conventions and structural properties."""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpspec.accounting import dp_from_curve, poisson_gaussian_rdp
from dpspec.accounting.relational import (
    RelationalConfig, RelationalSoundnessError, _log_pmf, calibrate_relational_sigma,
    coupled_sampling_rdp, coupled_sampling_rdp_curve, coupled_sampling_rdp_standard_clipping,
    coupled_sampling_standard_clipping_rdp_curve, freq_clip_sensitivity, naive_rdp_curve,
    node_sensitivity, overflow_probability, relational_accountants)

PAPER = dict(num_edges=5 * 10**6, num_nodes=10**6, rate=1e-5, degree_cap=5,
             negatives_per_positive=4)
#: the authors' order grid (PosNegRDPAccountant.DEFAULT_ALPHAS)
AUTHORS = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), float)


# ---------------------------------------------------------------- digest test vectors (§6)

def test_tv0_reduction_to_poisson_sgm():
    al = [2.0, 8.0, 32.0]
    v = coupled_sampling_rdp(al, 0.5, 5 * 10**6, 10**6, 1e-5, 1, 0)
    np.testing.assert_allclose(v, [5.359815e-09, 2.842371, 52.11569], rtol=1e-6)
    np.testing.assert_allclose(v, poisson_gaussian_rdp(al, 0.5, 1e-5), rtol=1e-12)


TV1 = [(1.5, 2.404879e-06), (2, 3.392458e-06), (3, 6.407775e-06), (4, 4.747696e-05),
       (5, 5.795583e-02), (6, 2.084183), (8, 6.569806), (10, 10.84450), (16, 23.24566),
       (32, 55.60810)]


def test_tv1_per_step_eq3():
    al = [a for a, _ in TV1]
    v = coupled_sampling_rdp(al, 0.5, **PAPER)
    np.testing.assert_allclose(v, [x for _, x in TV1], rtol=1e-6)


def test_tv2_tv3_epsilon_dp():
    c = coupled_sampling_rdp_curve(0.5, **PAPER, alphas=AUTHORS)
    want = {1: (3.27682, 5.1), 10: (3.51667, 4.8), 100: (3.81877, 4.6), 1000: (4.20982, 4.3),
            10000: (4.86664, 4.0), 100000: (6.44397, 3.5)}
    for T, (eps, a) in want.items():
        r = dp_from_curve(c.scaled(T), 2e-7)
        assert r.epsilon == pytest.approx(eps, rel=2e-6)
        assert r.best_alpha == pytest.approx(a)
    c1 = coupled_sampling_rdp_curve(1.0, **PAPER, alphas=AUTHORS)
    np.testing.assert_allclose(c1.rdp[np.isin(AUTHORS, [2.0, 4.0, 8.0])],
                               [1.087576e-07, 2.178171e-07, 4.368526e-07], rtol=1e-6)
    for T, eps in {1: 0.72836, 100: 0.77912, 1000: 0.78066, 10000: 0.79600,
                   100000: 0.92175}.items():
        assert dp_from_curve(c1.scaled(T), 2e-7).epsilon == pytest.approx(eps, rel=2e-5)


def test_tv4_authors_example_script():
    rate = 64 / 5e6
    c = coupled_sampling_rdp_curve(0.42, 5 * 10**6, 10**6, rate, 5, 4,
                                   steps=int(1 / rate / 10), alphas=AUTHORS)
    r = dp_from_curve(c, 1 / 5e6)
    assert r.epsilon == pytest.approx(8.97723, rel=2e-6)
    assert r.best_alpha == pytest.approx(2.8)


def test_tv5_standard_clipping_per_step():
    v = coupled_sampling_rdp_standard_clipping([2, 3, 4, 8], 0.5, **PAPER)
    np.testing.assert_allclose(v, [63.8562, 194.907, 303.930, 708.552], rtol=2e-5)
    al = np.concatenate([np.round(np.arange(1.1, 11.0, 0.1), 1), np.arange(12, 21)])
    c = coupled_sampling_standard_clipping_rdp_curve(1.0, **PAPER, alphas=al)
    assert dp_from_curve(c, 2e-7).epsilon == pytest.approx(5.1147, rel=2e-5)


# ---------------------------------------------------------------- mpmath references

def _mp_pmf(l, m, g):
    return mp.binomial(m, l) * mp.mpf(g) ** l * (1 - mp.mpf(g)) ** (m - l)


def _mp_psi_mixture(alpha, means, weights, sigma, direction):
    s = mp.mpf(sigma)

    def P(z):
        return sum(w * mp.npdf(z, mu, s) for mu, w in zip(means, weights))

    def f(z):
        q = mp.npdf(z, 0, s)
        if direction == "rem":
            return (P(z) / q) ** alpha * q
        return (q / P(z)) ** alpha * P(z)
    hi = max(means) * alpha + 12 * sigma
    lo = -12 * sigma - alpha * max(means)
    pts = sorted(set([lo, -3 * sigma, 0, max(means) / 2, max(means), hi]))
    return mp.quad(f, pts) - 1


@pytest.mark.slow  # tens of seconds on two cores
@pytest.mark.parametrize("alpha", [2.0, 3.5])
def test_eq3_against_mpmath(alpha):
    mp.mp.dps = 30
    m, n, g, K, k, sigma = 60, 40, 0.05, 3, 2, 1.0
    c = (1 - mp.mpf(g)) ** K
    tot = mp.mpf(0)
    for l in range(m + 1):
        G = min(mp.mpf(1), 1 - c * (1 - mp.mpf(l * k) / n))
        tot += _mp_pmf(l, m, g) * _mp_psi_mixture(alpha, [0, 1], [1 - G, G], sigma, "rem")
    exact = float(mp.log1p(tot) / (alpha - 1))
    got = coupled_sampling_rdp(alpha, sigma, m, n, g, K, k)
    assert exact <= got <= exact * (1 + 1e-8)


@pytest.mark.slow  # tens of seconds on two cores
@pytest.mark.parametrize("alpha", [2.0, 2.5])
def test_eq47_against_mpmath(alpha):
    mp.mp.dps = 30
    m, n, g, K, k, sigma = 20, 16, 0.15, 2, 2, 1.5
    out = []
    for d in ("rem", "ins"):
        tot = mp.mpf(0)
        for l in range(m + 1):
            p = min(mp.mpf(1), mp.mpf(l * k) / n)
            w = {}
            for i in range(K + 1):
                bi = mp.binomial(K, i) * mp.mpf(g) ** i * (1 - mp.mpf(g)) ** (K - i)
                for j, pj in ((0, 1 - p), (1, p)):
                    w[i + 2 * j] = w.get(i + 2 * j, 0) + bi * pj
            means = [mu for mu in w if w[mu] > 0]
            tot += _mp_pmf(l, m, g) * _mp_psi_mixture(alpha, means, [w[mu] for mu in means],
                                                       sigma, d)
        out.append(mp.log1p(tot) / (alpha - 1))
    exact = float(max(out))
    got = coupled_sampling_rdp_standard_clipping(alpha, sigma, m, n, g, K, k)
    assert exact <= got <= exact * (1 + 1e-7)


def test_log_pmf_against_mpmath():
    mp.mp.dps = 40
    for m, g, ls in [(5 * 10**6, 1e-5, [0, 1, 50, 400, 3000]), (1000, 0.3, [0, 299, 1000])]:
        v = _log_pmf(np.array(ls), m, g)
        for l, x in zip(ls, v):
            ex = mp.log(_mp_pmf(l, m, g))
            assert abs(x - float(ex)) <= 1e-13 * max(1.0, abs(float(ex)))


# ---------------------------------------------------------------- structure and properties

def test_curve_invariants_and_cap():
    c = coupled_sampling_rdp_curve(0.8, 20000, 5000, 0.003, 4, 3, steps=7)
    assert np.all(c.abs_errors >= 0) and np.all(np.isfinite(c.rdp))
    assert np.all(c.rdp <= 7 * c.alphas / (2 * 0.8**2) * (1 + 1e-12))
    live = c.rdp < 0.99 * 7 * c.alphas / (2 * 0.8**2)     # orders not at the no-amp cap
    assert np.max((c.abs_errors / c.rdp)[live]) < 1e-6
    assert "Eq. (3)" in c.theorem and "7 x" in c.theorem


def test_group_reduction_and_c1_k0():
    # without private negatives Thm C.1's mixture is Schuchardt's group mixture
    al = [2.0, 3.5, 9.0]
    a = coupled_sampling_rdp_standard_clipping(al, 1.3, 1000, 800, 0.01, 4, 0)
    b = poisson_gaussian_rdp(al, 1.3, 0.01, group_size=4)
    np.testing.assert_allclose(a, b, rtol=1e-9)


def test_sensitivity_scaling_equivalences():
    # Eq. (3) with sensitivity D at sigma equals Eq. (3) at sigma / D
    al = [2.0, 5.0]
    c = coupled_sampling_rdp_curve(2.0, 3000, 1000, 0.01, 3, 2, alphas=al, sensitivity=4.0)
    np.testing.assert_allclose(c.rdp, coupled_sampling_rdp(al, 0.5, 3000, 1000, 0.01, 3, 2),
                               rtol=1e-12)


SMALL = dict(num_edges=4000, num_nodes=3000)
AL = [1.5, 2.0, 4.0, 8.0]


@settings(max_examples=12, deadline=None)
@given(r1=st.floats(1e-4, 0.02), f=st.floats(1.05, 3.0), sigma=st.floats(0.6, 3.0),
       K=st.integers(1, 6), k=st.integers(0, 4))
def test_monotone_in_rate(r1, f, sigma, K, k):
    a = coupled_sampling_rdp(AL, sigma, rate=r1, degree_cap=K, negatives_per_positive=k, **SMALL)
    b = coupled_sampling_rdp(AL, sigma, rate=min(r1 * f, 0.05), degree_cap=K,
                             negatives_per_positive=k, **SMALL)
    assert np.all(a <= b * (1 + 1e-9))


@settings(max_examples=12, deadline=None)
@given(rate=st.floats(1e-4, 0.02), s1=st.floats(0.5, 3.0), f=st.floats(1.05, 2.0),
       K=st.integers(1, 6), k=st.integers(0, 4))
def test_decreasing_in_sigma(rate, s1, f, K, k):
    a = coupled_sampling_rdp(AL, s1, rate=rate, degree_cap=K, negatives_per_positive=k, **SMALL)
    b = coupled_sampling_rdp(AL, s1 * f, rate=rate, degree_cap=K, negatives_per_positive=k,
                             **SMALL)
    assert np.all(b <= a * (1 + 1e-9))


@settings(max_examples=10, deadline=None)
@given(rate=st.floats(1e-4, 0.02), sigma=st.floats(0.6, 3.0), K=st.integers(1, 5),
       k=st.integers(0, 3))
def test_monotone_in_cap_and_negatives(rate, sigma, K, k):
    base = coupled_sampling_rdp(AL, sigma, rate=rate, degree_cap=K, negatives_per_positive=k,
                                **SMALL)
    moreK = coupled_sampling_rdp(AL, sigma, rate=rate, degree_cap=K + 1, negatives_per_positive=k,
                                 **SMALL)
    morek = coupled_sampling_rdp(AL, sigma, rate=rate, degree_cap=K, negatives_per_positive=k + 1,
                                 **SMALL)
    assert np.all(base <= moreK * (1 + 1e-9)) and np.all(base <= morek * (1 + 1e-9))


@settings(max_examples=8, deadline=None)
@given(rate=st.floats(1e-3, 0.02), sigma=st.floats(0.8, 2.5), T1=st.integers(1, 50),
       T2=st.integers(1, 50))
def test_monotone_in_steps(rate, sigma, T1, T2):
    c = coupled_sampling_rdp_curve(sigma, 4000, 3000, rate, 3, 2, alphas=AL)
    e1 = dp_from_curve(c.scaled(min(T1, T2)), 1e-5).epsilon
    e2 = dp_from_curve(c.scaled(max(T1, T2)), 1e-5).epsilon
    assert e1 <= e2 + 1e-12


@settings(max_examples=6, deadline=None)
@given(rate=st.floats(1e-3, 0.03), sigma=st.floats(0.8, 2.5), K=st.integers(1, 4),
       k=st.integers(1, 3))
def test_c1_monotone_in_rate_and_sigma(rate, sigma, K, k):
    al = [2.0, 4.0]
    a = coupled_sampling_rdp_standard_clipping(al, sigma, 3000, 2000, rate, K, k)
    b = coupled_sampling_rdp_standard_clipping(al, sigma, 3000, 2000, min(2 * rate, 0.05), K, k)
    c = coupled_sampling_rdp_standard_clipping(al, 1.5 * sigma, 3000, 2000, rate, K, k)
    assert np.all(a <= b * (1 + 1e-8)) and np.all(c <= a * (1 + 1e-8))


def test_input_validation():
    with pytest.raises(ValueError, match="alpha"):
        coupled_sampling_rdp(1.0, 1.0, 100, 100, 0.1, 2, 1)
    with pytest.raises(ValueError, match="sigma"):
        coupled_sampling_rdp(2.0, 0.0, 100, 100, 0.1, 2, 1)
    with pytest.raises(RelationalSoundnessError) as e:
        coupled_sampling_rdp(2.0, 1.0, 100, 100, 0.1, 0, 1)
    assert e.value.rule == "DPS607"
    with pytest.raises(RelationalSoundnessError) as e:
        coupled_sampling_rdp(2.0, 1.0, 100, 10, 0.1, 2, 11)
    assert e.value.rule == "DPS606"
    assert coupled_sampling_rdp(2.0, 1.0, 100, 100, 0.0, 2, 1) == 0.0
    assert coupled_sampling_rdp(3.0, 2.0, 100, 100, 1.0, 2, 1) == pytest.approx(3 / 8)


# ---------------------------------------------------------------- every valid accountant

CFG = dict(num_edges=20000, num_nodes=8000, rate=0.003, degree_cap=5, negatives_per_positive=4)
SMALL_GRID = [1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0]


def test_accountants_static():
    res = relational_accountants(RelationalConfig(**CFG, clipping="static"), 1.0, 200, 1e-5,
                                 alphas=SMALL_GRID)
    assert set(res.accountants) == {"eq3", "thm_c1", "naive"}
    assert "group" in res.rejected
    assert res.epsilon <= min(a.epsilon for a in res.accountants.values()) + 1e-12
    assert res.best in res.accountants and res.best in res.statement
    # static clipping is standard clipping at C/(K+2): Thm C.1 at sigma (K+2)
    c1 = coupled_sampling_standard_clipping_rdp_curve(7.0, **CFG, steps=200, alphas=SMALL_GRID)
    np.testing.assert_allclose(res.accountants["thm_c1"].curve.rdp, c1.rdp, rtol=1e-12)
    assert np.all(res.curve.rdp <= res.accountants["naive"].curve.rdp)


def test_accountants_standard_and_none():
    res = relational_accountants(RelationalConfig(**CFG, clipping="standard"), 3.0, 100, 1e-5,
                                 alphas=SMALL_GRID)
    assert res.sensitivity == 7.0
    np.testing.assert_allclose(res.accountants["naive"].curve.rdp,
                               100 * np.array(SMALL_GRID) * 49 / 18, rtol=1e-12)
    cfg = dict(CFG, negatives_per_positive=0)
    res = relational_accountants(RelationalConfig(**cfg, clipping="standard", negatives="none"),
                                 3.0, 100, 1e-5, alphas=SMALL_GRID)
    assert "group" in res.accountants and "thm_c1" in res.rejected
    g = poisson_gaussian_rdp(SMALL_GRID, 3.0, CFG["rate"], group_size=5) * 100
    np.testing.assert_allclose(res.accountants["group"].curve.rdp, g, rtol=1e-9)
    assert res.best == "group"


def test_accountants_freq_and_rules():
    res = relational_accountants(RelationalConfig(**CFG, clipping="freq"), 5.0, 50, 1e-5,
                                 alphas=SMALL_GRID)
    assert res.sensitivity == pytest.approx(freq_clip_sensitivity(5, 4)) == 7.25
    assert set(res.accountants) == {"eq3", "naive"}
    for clipping, neg, pos, rule in [("freq_paper", "wor", "poisson", "DPS601"),
                                     ("static", "with_replacement", "poisson", "DPS602"),
                                     ("static", "in_batch", "poisson", "DPS603"),
                                     ("static", "content_dependent", "poisson", "DPS604"),
                                     ("static", "wor", "shuffle", "DPS605"),
                                     ("static", "wor", "fixed_size", "DPS605")]:
        with pytest.raises(RelationalSoundnessError) as e:
            relational_accountants(RelationalConfig(**CFG, clipping=clipping, negatives=neg,
                                                    positives=pos), 1.0, 10, 1e-5,
                                   alphas=SMALL_GRID)
        assert e.value.rule == rule and e.value.hint
    with pytest.raises(RelationalSoundnessError) as e:
        relational_accountants(RelationalConfig(**dict(CFG, rate=0.2), clipping="static"), 1.0,
                               10, 1e-5, alphas=SMALL_GRID)
    assert e.value.rule == "DPS606"
    with pytest.raises(RelationalSoundnessError) as e:
        node_sensitivity("freq_paper", 5, 4)
    assert e.value.rule == "DPS601" and "static" in e.value.hint


def test_calibration_and_overflow():
    cfg = RelationalConfig(**CFG, clipping="static")
    grid = [2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0]
    s = calibrate_relational_sigma(4.0, 1e-5, cfg, 300, accountants=("eq3", "naive"), alphas=grid)
    eps = relational_accountants(cfg, s, 300, 1e-5, alphas=grid, include=("eq3", "naive")).epsilon
    assert eps <= 4.0
    eps2 = relational_accountants(cfg, s / 1.01, 300, 1e-5, alphas=grid,
                                  include=("eq3", "naive")).epsilon
    assert eps2 > 4.0
    assert overflow_probability(cfg, 10**6) < 1e-100


def test_naive_curve():
    c = naive_rdp_curve(0.5, 1.0, 3, [2.0, 4.0])
    np.testing.assert_allclose(c.rdp, [12.0, 24.0], rtol=1e-12)


def test_paper_defaults_are_inconsistent_but_computable():
    res = relational_accountants(RelationalConfig(**PAPER, clipping="static"), 1.0, 10, 2e-7,
                                 alphas=[2.0, 8.0, 16.0], include=("eq3", "naive"))
    assert "no graph with max degree" in res.statement
    assert math.isfinite(res.epsilon)


def test_the_bracket_is_tight_at_large_orders_beyond_the_kink():
    """specs/cora_relational.dps (m = 2378, n = 2166, K = 5, k_neg = 4, T = 1500): the certificate's
    abs_error_bound was 6.1e3, all of it at alpha = 128, where the Chernoff tail beyond the support end
    l = 990 was multiplied by the no-amplification f_max (~e^5395) although f is constant from the kink
    n / k_neg = 541.5 on (~e^3081): an upper bound 40033 for an RDP of 33936. Now every order is bracketed
    to the stated relative tolerance, and alpha = 128 matches a sum over every l."""
    from scipy.special import logsumexp

    from dpspec.accounting.relational import RelationalConfig, _c1_eval, _log_pmf, _log_upper_tail
    from dpspec.accounting.relational import certify_relational

    m, n, K, k, T, sigma = 2378, 2166, 5, 4, 1500, 1.2274607387764758
    res = certify_relational(RelationalConfig(m, n, 64 / m, K, k), sigma, T, 1e-4)
    errs, rdp = np.asarray(res.curve.abs_errors), np.asarray(res.curve.rdp)
    assert float(np.max(errs)) <= 1e-6 * res.epsilon  # the certificate's abs_error_bound
    assert np.all(errs <= 1e-8 * rdp)
    # alpha = 128 by brute force: E_l f(l) over l = 0..ceil(kink), the tail beyond at f(ceil(kink))
    ls = np.arange(0, 543)
    lo, hi = _c1_eval(ls, np.array([128.0]), sigma * (K + 2), 64 / m, K, k, n, {})
    logp = _log_pmf(ls, m, 64 / m)
    tail = _log_upper_tail(542, m, 64 / m)
    log_s = max(logsumexp(np.r_[logp + hi[:, d], tail + hi[-1, d]]) for d in (0, 1))
    exact = T * np.logaddexp(0.0, log_s) / 127.0
    assert res.curve.alphas[-1] == 128.0
    assert exact * (1 - 1e-12) <= rdp[-1] <= exact * (1 + 1e-9)
