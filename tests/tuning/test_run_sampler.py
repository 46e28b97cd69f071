"""The run-count sampler draws K from exactly the certified law (Papernot & Steinke 2022 §2), and DPS955 bounds
E[K] before any numerics that could overflow."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

import dpspec
from dpspec.accounting.selection import RunCount, _binomial, _poisson, tnb_log_mean, tnb_pmf, tnb_sample
from dpspec.diagnostics import SpecError
from dpspec.tuning.rules import MAX_MEAN_RUNS, _tune

N = 40_000

# every branch of the sampler: η > 0 (geometric, larger, fractional, tiny), η = 0, -1 < η < 0
CASES = [(1.0, 0.1), (2.0, 0.3), (0.5, 0.05), (1e-9, 0.5), (0.0, 0.05), (0.0, 0.6), (-0.5, 0.2), (-0.9, 0.02)]


def _mp_pmf(k: int, eta: float, gamma: float) -> mpmath.mpf:
    """P[K = k] in 50 digits from the product form Π_{l<k} (l+η)/(l+1) (η ≠ 0) or 1/k (η = 0): independent of
    tnb_pmf's lgamma form."""
    with mpmath.workdps(50):
        g, e = mpmath.mpf(gamma), mpmath.mpf(eta)
        if eta == 0.0:
            return (1 - g) ** k / (k * mpmath.log(1 / g))
        prod = mpmath.fprod([(l + e) / (l + 1) for l in range(k)])
        return (1 - g) ** k * prod / (g ** (-e) - 1)


def _chi2_pvalue(draws: np.ndarray, pmf) -> float:
    """Pearson's chi-square of the draws against ``pmf`` on cells 1..m and the tail, m the last k with an expected
    count of at least 5 (Cochran)."""
    n = len(draws)
    probs, k = [], 1
    while True:
        p = float(pmf(k))
        if n * p < 5 or n * (1 - sum(probs) - p) < 5:
            break
        probs.append(p)
        k += 1
    m = len(probs)
    obs = np.array([np.sum(draws == j) for j in range(1, m + 1)] + [np.sum(draws > m)], float)
    exp = np.array(probs + [1.0 - sum(probs)]) * n
    assert m >= 1
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("eta,gamma", CASES)
def test_tnb_sampler_matches_pmf(eta, gamma):
    rng = np.random.default_rng(20220527)
    draws = np.array([tnb_sample(rng, eta, gamma) for _ in range(N)])
    assert draws.min() >= 1
    # the reference pmf, checked against the independent product form first
    for k in (1, 2, 7, 30):
        assert tnb_pmf(k, eta, gamma) == pytest.approx(float(_mp_pmf(k, eta, gamma)), rel=1e-10)
    assert _chi2_pvalue(draws, lambda k: _mp_pmf(k, eta, gamma)) > 1e-4
    if eta >= 0.0:  # a finite variance: the sample mean is within 5 standard errors of E[K]
        mean = math.exp(tnb_log_mean(eta, gamma))
        with mpmath.workdps(30):
            m2 = float(mpmath.nsum(lambda k: k * k * _mp_pmf(int(k), eta, gamma), [1, mpmath.inf]))
        sd = math.sqrt(m2 - mean * mean)
        assert abs(draws.mean() - mean) < 5 * sd / math.sqrt(N)


def test_old_inversion_would_fail():
    """The chi-square test can fail: draws of a neighbouring law (γ 10 % larger) are refused."""
    rng = np.random.default_rng(3)
    draws = np.array([tnb_sample(rng, 1.0, 0.11) for _ in range(N)])
    assert _chi2_pvalue(draws, lambda k: tnb_pmf(k, 1.0, 0.1)) < 1e-6


def test_run_count_sample_uses_exact_sampler():
    runs = RunCount.tnb(0.5, 0.05)
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [runs.sample(a) for _ in range(50)] == [tnb_sample(b, 0.5, 0.05) for _ in range(50)]
    p = RunCount.poisson(7.0)
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [p.sample(a) for _ in range(50)] == [int(b.poisson(7.0)) for _ in range(50)]


@pytest.mark.parametrize("eta,gamma", [(1.0, 1e-6), (0.0, 1e-7), (-0.999, 5e-324), (-0.99, 1e-8)])
def test_no_cap_at_the_largest_accepted_means(eta, gamma):
    """Heavy or long tails the compiler accepts (E[K] <= 1e6) are drawn without a cap: values beyond the old
    10,000,000 stop occur where the law puts mass there, and every draw is a positive int."""
    assert tnb_log_mean(eta, gamma) <= math.log(MAX_MEAN_RUNS)
    rng = np.random.default_rng(11)
    draws = [tnb_sample(rng, eta, gamma) for _ in range(3000)]
    assert all(isinstance(k, int) and k >= 1 for k in draws)
    # P[K > 1e7] from the law; the count above it must agree with it (binomial, 5 sd)
    if eta == 1.0:
        tail = (1 - gamma) ** 10_000_000
        above = sum(k > 10_000_000 for k in draws)
        assert abs(above - 3000 * tail) < 5 * math.sqrt(3000 * tail * (1 - tail)) + 1
    else:
        assert max(draws) >= 1


def test_geometric_tail_beyond_old_cap():
    """With γ = 1e-7 (E[K] = 1e7 would be refused; here P[K > 1e7] = e^{-1}), the old sampler never returned more
    than 10,000,001; the exact one does, at the law's frequency."""
    rng = np.random.default_rng(13)
    draws = np.array([tnb_sample(rng, 1.0, 1e-7) for _ in range(4000)])
    frac = float(np.mean(draws > 10_000_001))
    assert abs(frac - math.exp(-1.0)) < 5 * math.sqrt(math.exp(-1) * (1 - math.exp(-1)) / 4000)


def test_poisson_reduction_is_exact():
    """The Ahrens–Dieter reduction for huge means, exercised at a small threshold against the Poisson pmf, and the
    binomial order-statistic reduction against the binomial pmf (threshold forced by a huge n)."""
    rng = np.random.default_rng(17)
    draws = np.array([_poisson(rng, 60.0, direct_max=8.0) for _ in range(N)])
    lo, hi = 40, 82
    obs = np.array([np.sum(draws < lo)] + [np.sum(draws == j) for j in range(lo, hi)] + [np.sum(draws >= hi)], float)
    pm = stats.poisson(60.0)
    exp = np.array([pm.cdf(lo - 1)] + [pm.pmf(j) for j in range(lo, hi)] + [pm.sf(hi - 1)]) * N
    assert stats.chisquare(obs, exp).pvalue > 1e-4
    assert _poisson(rng, 1e300) > 0
    n = 2**63
    b = [_binomial(rng, n, 0.25) for _ in range(200)]
    sd = math.sqrt(n * 0.25 * 0.75)
    assert abs(sum(b) / 200 - n * 0.25) < 5 * sd / math.sqrt(200)


@pytest.mark.parametrize("gamma", [1e-310, 5e-324, 1e-200])
def test_describe_never_raises(gamma):
    runs = RunCount.tnb(1.0, gamma)
    text = runs.describe()
    assert "e+" in text and "mean" in text
    assert runs.mean() == math.inf or runs.mean() > 1e199
    assert RunCount.tnb(-0.999, gamma).describe()  # η near -1: γ^η - 1 beyond a double, E[K] small


def test_describe_large_mean_text():
    assert RunCount.tnb(1.0, 1e-310).describe().endswith("mean 1e+310")


def test_log_mean_matches_mpmath_near_minus_one():
    """tnb_log_mean where γ^η overflows a double (η = -0.999, γ = 5e-324)."""
    eta, gamma = -0.999, 5e-324
    with mpmath.workdps(60):
        g, e = mpmath.mpf(gamma), mpmath.mpf(eta)
        ref = float(mpmath.log(e * (1 - g) / (g * (1 - g**e))))
    assert tnb_log_mean(eta, gamma) == pytest.approx(ref, rel=1e-12)


def _compile(runs: str):
    src = _tune(
        "candidates { learning_rate [0.1, 0.5] }  runs "
        + runs
        + "  select best(score = accuracy)  guarantee dp(epsilon = 8, delta = 1e-6)"
    )
    return dpspec.compile(dpspec.loads(src))


@pytest.mark.parametrize(
    "runs",
    [
        "truncated_negative_binomial(eta = 1, gamma = 1e-310)",
        "truncated_negative_binomial(eta = 0, gamma = 1e-9)",
        "truncated_negative_binomial(eta = 1, gamma = 9e-7)",
        "truncated_negative_binomial(eta = -0.5, gamma = 1e-14)",
        "poisson(mean = 2e6)",
        "fixed(count = 1000001)",
    ],
)
def test_dps955_refuses_large_mean(runs):
    with pytest.raises(SpecError) as e:
        _compile(runs)
    assert [d.rule for d in e.value.diagnostics] == ["DPS955"]
    assert "expected number of runs" in e.value.diagnostics[0].message
