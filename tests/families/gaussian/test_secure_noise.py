"""Secure mode: the exact discrete Gaussian sampler, its grid, and its accounting consequence."""

import dataclasses
import math
import random
import secrets
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest, chisquare

from dpspec.accounting.analytic_gaussian import delta_of_epsilon, epsilon_of_delta
from dpspec.mechanisms import secure_noise as S
from dpspec.families.gaussian.runtime import GaussianRelease


def _rb(seed):
    return random.Random(seed).randrange


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_frequency(gamma):
    rb = _rb(1)
    n = 20000
    k = sum(S.bernoulli_exp(gamma, rb) for _ in range(n))
    ci = binomtest(k, n).proportion_ci(confidence_level=0.999)
    assert ci.low <= math.exp(-gamma) <= ci.high


def test_bernoulli_rejects_bad_input():
    with pytest.raises(ValueError):
        S.bernoulli(Fraction(3, 2))
    with pytest.raises(ValueError):
        S.bernoulli_exp(Fraction(-1))
    with pytest.raises(ValueError):
        S.discrete_laplace(0)
    with pytest.raises(ValueError):
        S.discrete_gaussian(Fraction(0))


def test_discrete_laplace_distribution():
    rb = _rb(2)
    t, n = 2, 20000
    xs = np.array([S.discrete_laplace(t, rb) for _ in range(n)])
    support = np.arange(-8, 9)
    p = np.exp(-np.abs(support) / t)
    p /= np.exp(-np.abs(np.arange(-200, 201)) / t).sum()
    obs = np.array([np.sum(xs == v) for v in support] + [np.sum(np.abs(xs) > 8)])
    exp = np.append(p, 1 - p.sum()) * n
    assert chisquare(obs, exp).pvalue > 1e-3


@pytest.mark.parametrize("sigma2", [Fraction(2), Fraction(9, 4), Fraction(1, 3)])
def test_discrete_gaussian_matches_its_pmf(sigma2):
    rb = _rb(3)
    n = 20000
    xs = np.array([S.discrete_gaussian(sigma2, rb) for _ in range(n)])
    support = np.arange(-6, 7)
    p = np.array([S.discrete_gaussian_pmf(int(v), float(sigma2)) for v in support])
    obs = np.array([np.sum(xs == v) for v in support] + [np.sum(np.abs(xs) > 6)])
    exp = np.append(p, max(1 - p.sum(), 1e-12)) * n
    keep = exp > 5
    obs, exp = obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()
    assert chisquare(obs, exp).pvalue > 1e-3


def test_discrete_gaussian_moments_large_sigma():
    rb = _rb(4)
    xs = np.array([S.discrete_gaussian(Fraction(10_000), rb) for _ in range(6000)], dtype=float)
    assert abs(xs.mean()) < 4 * 100 / math.sqrt(6000)
    assert xs.var() == pytest.approx(10_000, rel=0.06)


def test_tail_enclosure_contains_the_exact_sum():
    for s in (0.7, 3.0, 10.5):
        ks = np.arange(-int(60 * s) - 60, int(60 * s) + 61)
        w = np.exp(-ks.astype(float) ** 2 / (2 * s * s))
        w /= w.sum()
        for m in (-5, 0, 1, 2, int(s) + 1, int(3 * s) + 2, int(8 * s)):
            exact = float(w[ks >= m].sum())
            lo, hi = S.discrete_gaussian_tail(m, s)
            flo, fhi = S._tail_float(m, s)
            assert float(lo) <= exact * (1 + 1e-12) + 1e-300 and exact <= float(hi) * (1 + 1e-12) + 1e-300
            assert flo <= exact * (1 + 1e-12) + 1e-300 and exact <= fhi * (1 + 1e-12) + 1e-300


def test_thm7_delta_matches_brute_force_for_small_sigma():
    s, d = 4.0, 3
    ks = np.arange(-400, 401)
    p = np.exp(-ks.astype(float) ** 2 / (2 * s * s))
    p /= p.sum()
    q = np.roll(p, d)  # law of d + Y
    for eps in (0.0, 0.3, 1.0, 2.5):
        brute = float(np.sum(np.maximum(p - math.exp(eps) * q, 0.0)))
        bound = S.discrete_gaussian_delta(eps, s, d)
        # the Euler–Maclaurin enclosure is ~0.08/s² wide near the centre (negligible at s ≥ 2^20)
        assert brute <= bound <= brute + 0.1 / s ** 2
        assert S.discrete_gaussian_delta(eps, s, d, exact=True) == pytest.approx(bound, rel=1e-9, abs=1e-18)


def test_plan_preserves_the_certified_guarantee():
    sigma, sens = 418.24321012140695, 99.0  # specs/gaussian_release.dps
    plan = S.secure_gaussian(sigma, sens)
    assert plan.granularity <= sigma / S.MIN_GRID_SIGMA
    assert plan.mu <= sens / sigma  # same or better RDP curve (CKS20 Thm 4)
    assert plan.verified_points > 100
    for delta in (1e-5, 1e-6, 1e-10):
        assert plan.epsilon(delta) <= epsilon_of_delta(sens / sigma, delta)
    for eps in (0.0, 0.5, 1.0, 2.0):
        assert plan.delta(eps) <= delta_of_epsilon(eps, sens / sigma)


def test_plan_multivariate_uses_the_rdp_curve():
    plan = S.secure_gaussian(2.0, 1.0, 16)
    assert plan.mu <= 0.5 and plan.verified_points == 0
    a = 8.0
    assert plan.rdp(a) <= a * 0.5 ** 2 / 2
    e = plan.epsilon(1e-6)
    assert e > epsilon_of_delta(0.5, 1e-6)  # the RDP conversion is looser than the analytic profile
    assert plan.delta(e) <= 1e-6 * (1 + 1e-9)


@pytest.mark.parametrize("answer", [0.0, 1234.5678, -7.25e-3, 3.0e9, [1.0, -2.0, 0.1]])
def test_release_is_always_on_the_grid(answer):
    plan = S.secure_gaussian(5.0, 1.0, int(np.size(answer)))
    g = Fraction(plan.granularity)
    out = np.atleast_1d(plan.release(answer, _rb(5)))
    for y in out:
        assert (Fraction(float(y)) / g).denominator == 1, y
    assert np.all(np.abs(out - np.asarray(answer)) < 60 * 5.0)


def test_support_does_not_depend_on_the_answer():
    """Mironov's attack reads input-dependent low-order bits; on the grid every output of every input is
    an integer multiple of g, so the residue y/g mod 1 is identically 0 for both neighbours."""
    plan = S.secure_gaussian(1.0, 1.0)
    g = Fraction(plan.granularity)
    for a in (0.0, 1.0, 0.1, 1 / 3):
        ys = [plan.release(a, _rb(int(a * 1000) + i)) for i in range(50)]
        assert all((Fraction(y) / g).denominator == 1 for y in ys)


def test_release_refuses_nan_and_huge_answers():
    plan = S.secure_gaussian(1.0, 1.0)
    with pytest.raises(ValueError):
        plan.release(math.nan)
    with pytest.raises(ValueError):
        plan.release(1e300)


def test_gaussian_release_secure_switch(monkeypatch):
    base = GaussianRelease(sigma=3.0, sensitivity=1.0)
    # default behaviour unchanged: exactly numpy's N(0, σ²) draw for a seed
    assert base.release_answer(10.0, 7).value == 10.0 + np.random.default_rng(7).normal(0.0, 3.0)
    secure = dataclasses.replace(base, secure=True)
    with pytest.raises(ValueError, match="secure mode"):
        secure.release_answer(10.0, 7)
    calls = []
    real = secrets.randbelow
    monkeypatch.setattr(secrets, "randbelow", lambda n: calls.append(n) or real(n))
    y, _ = secure.release_answer(10.0)  # the refused seeded call above charged nothing
    assert calls, "secure mode must draw from secrets.randbelow"
    plan = S.secure_gaussian(3.0, 1.0)
    assert (Fraction(y) / Fraction(plan.granularity)).denominator == 1
    v, _ = dataclasses.replace(base, secure=True).release_answer(np.array([1.0, 2.0, 3.0]))
    assert v.shape == (3,)
