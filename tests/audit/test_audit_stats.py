"""The statistics behind ε_lower: Clopper–Pearson bounds, the ε implied by (FPR, FNR) at δ, the
threshold selection, and the coverage of the whole procedure on a mechanism with a known ε."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from dpspec.audit import cp_lower, cp_upper, epsilon_from_rates, epsilon_lower_bound, max_certifiable_epsilon
from dpspec.audit.stats import error_counts, select_threshold


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (0, 5000), (17, 5000), (4999, 5000), (250, 1000)])
@pytest.mark.parametrize("gamma", [0.025, 0.05, 0.001])
def test_clopper_pearson_matches_exact_binomial_interval(k, n, gamma):
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - 2 * gamma, method="exact")
    assert cp_upper(k, n, gamma) == pytest.approx(ci.high, rel=1e-9, abs=1e-15)
    assert cp_lower(k, n, gamma) == pytest.approx(ci.low, rel=1e-9, abs=1e-15)


def test_clopper_pearson_one_sided_coverage():
    """P(p ≤ upper) ≥ 1 − γ: simulated over many binomial draws for several p."""
    rng = np.random.default_rng(0)
    for p in (1e-3, 0.02, 0.3, 0.9):
        ks = rng.binomial(400, p, size=20000)
        covered = np.mean(p <= cp_upper(ks, 400, 0.05))
        assert covered >= 0.95 - 0.005


def test_cp_upper_is_vectorised_and_monotone():
    ks = np.arange(0, 101)
    u = cp_upper(ks, 100, 0.025)
    assert u.shape == ks.shape and np.all(np.diff(u) > 0) and u[-1] == 1.0
    with pytest.raises(ValueError):
        cp_upper(1, 0, 0.05)
    with pytest.raises(ValueError):
        cp_upper(1, 10, 1.5)


def test_epsilon_from_rates_known_values():
    # randomized response with ε = log 3: α = 1/4, β = 1/4 at δ = 0
    assert epsilon_from_rates(0.25, 0.25, 0.0) == pytest.approx(math.log(3))
    # δ is subtracted from the power: (1 − δ − β)/α
    assert epsilon_from_rates(0.01, 0.5, 0.1) == pytest.approx(math.log(40))
    # a test no better than chance certifies nothing
    assert epsilon_from_rates(0.5, 0.5, 1e-5) == 0.0
    # one-sided: only inequality (I)
    assert epsilon_from_rates(0.5, 0.01, 0.0, symmetric=False) == pytest.approx(math.log(0.99 / 0.5))
    assert epsilon_from_rates(0.5, 0.01, 0.0, symmetric=True) == pytest.approx(math.log(50))


def test_epsilon_lower_bound_bonferroni_is_more_conservative():
    one = epsilon_lower_bound(5, 10000, 3000, 10000, 1e-5)
    many = epsilon_lower_bound(5, 10000, 3000, 10000, 1e-5, tests=8)
    point = epsilon_from_rates(5 / 10000, 3000 / 10000, 1e-5)
    assert 0 < many < one < point


def test_max_certifiable_epsilon_is_the_perfect_separation_bound():
    n = 1000
    assert max_certifiable_epsilon(n) == pytest.approx(epsilon_lower_bound(0, n, 0, n, 0.0))
    assert max_certifiable_epsilon(10 * n) > max_certifiable_epsilon(n)


def test_error_counts_orientation():
    s0, s1 = np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 4.0])
    assert error_counts(s0, s1, 2.0, +1) == (1, 1)   # S = {s ≥ 2}
    assert error_counts(s0, s1, 1.0, -1) == (2, 2)   # S = {s ≤ 1}


def test_select_threshold_prefers_the_informative_statistic():
    rng = np.random.default_rng(1)
    x0, x1 = rng.normal(0, 1, 4000), rng.normal(2, 1, 4000)
    sc0 = {"signal": x0, "noise": rng.normal(0, 1, 4000)}
    sc1 = {"signal": x1, "noise": rng.normal(0, 1, 4000)}
    t = select_threshold(sc0, sc1, delta=1e-5, n_eval0=16000, n_eval1=16000, confidence=0.95)
    assert t.statistic == "signal" and t.orientation == 1 and t.projected_epsilon > 1.0


def test_coverage_on_randomized_response_with_known_epsilon():
    """The whole procedure on a mechanism whose exact ε is known: randomized response with
    ε = log 4 at δ = 0 (the optimal test attains it exactly). Over 2000 independent audits the
    95 % lower bound exceeds the true ε in at most ~5 % of them (Bonferroni makes it ≤ 5 %)."""
    eps = math.log(4.0)
    p_yes0, p_yes1 = 1 / (1 + math.e ** eps), math.e ** eps / (1 + math.e ** eps)
    rng = np.random.default_rng(2)
    n = 2000
    fp = rng.binomial(n, p_yes0, size=2000)          # D₀ outputs "yes" (reject)
    fn = rng.binomial(n, 1 - p_yes1, size=2000)      # D₁ outputs "no" (accept)
    lows = epsilon_lower_bound(fp, n, fn, n, 0.0)
    assert np.mean(lows > eps) <= 0.05
    assert np.median(lows) > 0.85 * eps              # and the bound is not vacuous
