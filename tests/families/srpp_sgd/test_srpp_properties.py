"""Hypothesis properties of the HUC / sa-HUC accountant and the discrepancy moments."""

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.stats import binom, hypergeom

from dpspec.accounting.huc import (
    binomial_k2,
    huc,
    hypergeometric_k2,
    poisson_realized_kappa2,
    sa_huc,
    srpp_sgd_epsilon,
    srpp_sgd_sigma2,
)
from dpspec.srpp import FixedPairWorlds, LocalizedInfluence, Sampling

alphas = st.floats(1.01, 64.0)
epsilons = st.floats(1e-3, 1e3)
caps_arrays = st.integers(1, 6).flatmap(
    lambda m: st.lists(st.lists(st.floats(0.0, 10.0), min_size=m, max_size=m), min_size=1, max_size=8))
flavours = st.sampled_from(["ave", "joint", "joint_exact"])


@given(caps_arrays, alphas, epsilons, st.floats(1.01, 10.0), flavours)
def test_sigma2_decreasing_in_epsilon(caps, a, e, f, flavour):
    h = np.array(caps)
    assume(h.max() > 1e-6)
    assert srpp_sgd_sigma2(h, a, e * f, flavour) < srpp_sgd_sigma2(h, a, e, flavour)


@given(caps_arrays, alphas, epsilons, flavours, st.floats(1e-3, 5.0))
def test_sigma2_increasing_in_steps_and_caps(caps, a, e, flavour, bump):
    h = np.array(caps)
    more_steps = np.vstack([h, h[:1] + bump])
    assert srpp_sgd_sigma2(more_steps, a, e, flavour) > srpp_sgd_sigma2(h, a, e, flavour)
    bigger = h.copy()
    bigger[0] += bump
    assert srpp_sgd_sigma2(bigger, a, e, flavour) > srpp_sgd_sigma2(h, a, e, flavour)


@given(caps_arrays, alphas, epsilons)
def test_joint_at_least_ave_and_exact_in_between(caps, a, e):
    h = np.array(caps)
    ave = srpp_sgd_sigma2(h, a, e, "ave")
    joint = srpp_sgd_sigma2(h, a, e, "joint")
    exact = srpp_sgd_sigma2(h, a, e, "joint_exact")
    assert ave <= joint * (1 + 1e-12)
    # Joint-SRD ≥ Ave-SRD (Jensen), so the exact Joint calibration is between the two
    assert ave * (1 - 1e-9) <= exact <= joint * (1 + 1e-9)


@given(caps_arrays, alphas, epsilons, flavours)
def test_inverse_round_trip(caps, a, e, flavour):
    h = np.array(caps)
    assume(h.max() > 1e-6)
    s2 = srpp_sgd_sigma2(h, a, e, flavour)
    got = srpp_sgd_epsilon(s2, h, a, flavour)
    assert got <= e * (1 + 1e-9)
    assert got >= e * (1 - 1e-6)


@given(st.integers(1, 400), st.data())
def test_hypergeometric_matches_pmf_sum(N, data):
    D = data.draw(st.integers(0, N))
    B = data.draw(st.integers(1, N))
    k = np.arange(0, min(B, D) + 1)
    exact = float(np.sum(hypergeom.pmf(k, N, D, B) * k**2))
    assert hypergeometric_k2(N, D, B) == pytest.approx(exact, rel=1e-9, abs=1e-12)
    assert hypergeometric_k2(N, D, B) <= min(B, D) ** 2 + 1e-9  # sa-HUC ≤ HUC


def test_hypergeometric_matches_monte_carlo():
    rng = np.random.default_rng(3)
    N, D, B = 600, 15, 64
    mask = np.zeros(N, bool)
    mask[rng.choice(N, D, replace=False)] = True
    ks = np.array([mask[rng.choice(N, B, replace=False)].sum() for _ in range(20000)])
    mc = float(np.mean(ks**2.0))
    se = float(np.std(ks**2.0)) / math.sqrt(ks.size)
    assert abs(mc - hypergeometric_k2(N, D, B)) < 5 * se


@given(st.integers(0, 5000), st.one_of(st.just(0.0), st.floats(1e-12, 1.0)))
def test_binomial_closed_form(B, tau):
    k = np.arange(B + 1)
    exact = float(np.sum(binom.pmf(k, B, tau) * k.astype(float) ** 2)) if B <= 2000 else None
    val = binomial_k2(B, tau)
    assert val == pytest.approx(B * tau * (1 - tau) + (B * tau) ** 2, rel=1e-12, abs=1e-300)
    if exact is not None:
        assert val == pytest.approx(exact, rel=1e-8, abs=1e-10)
    assert val <= B**2 * (1 + 1e-12) + 1e-9


@given(st.integers(2, 300), st.data())
def test_sa_not_above_huc_for_every_scheme(N, data):
    D = data.draw(st.integers(0, N))
    B = data.draw(st.integers(1, N))
    m = LocalizedInfluence(D)
    wor = Sampling("wor", dataset_size=N, batch_size=B)
    assert m.sa_kappa2(wor).value <= m.huc_kappa(wor).value ** 2 * (1 + 1e-9) + 1e-15
    q = data.draw(st.floats(0.01, 1.0))
    pe = Sampling("poisson", dataset_size=N, rate=q, normalization="expected")
    assert m.sa_kappa2(pe).value <= m.huc_kappa(pe).value ** 2 * (1 + 1e-9) + 1e-15
    if N <= 120:
        pr = Sampling("poisson", dataset_size=N, rate=q, normalization="realized", empty_batch="skip")
        assert m.sa_kappa2(pr).value <= m.huc_kappa(pr).value ** 2 + 1e-12


@given(st.integers(1, 200), st.data())
def test_sa_moment_increasing_in_differing(N, data):
    """[D] monotonicity used for sound localized sa caps."""
    B = data.draw(st.integers(1, N))
    vals = [hypergeometric_k2(N, d, B) for d in range(N + 1)]
    assert all(b >= a for a, b in zip(vals, vals[1:]))


def test_poisson_realized_matches_monte_carlo():
    rng = np.random.default_rng(0)
    N, D, q = 120, 6, 0.05
    k = rng.binomial(D, q, 200000)
    m = rng.binomial(N - D, q, 200000)
    b = k + m
    kap2 = np.where(b > 0, (k / np.maximum(b, 1)) ** 2, 0.0)
    se = kap2.std() / math.sqrt(kap2.size)
    assert abs(kap2.mean() - poisson_realized_kappa2(N, D, q, "skip")) < 5 * se
    cond = kap2[b > 0].mean()
    assert poisson_realized_kappa2(N, D, q, "resample") == pytest.approx(cond, abs=5 * se * 1.2)


def test_fixed_pair_is_the_huc_of_the_paper():
    s = Sampling("wor", dataset_size=50000, batch_size=512)
    w = FixedPairWorlds(50000, 20)
    assert w.huc_kappa(s).value == pytest.approx(20 / 512)
    assert 4 * w.huc_kappa(s).value ** 2 * (0.2 * 4.0) ** 2 == pytest.approx(huc(20, 0.2, 4.0, 512))
    assert 4 * w.sa_kappa2(s).value * (0.2 * 4.0) ** 2 == pytest.approx(sa_huc(hypergeometric_k2(50000, 20, 512), 0.2, 4.0, 512))


# --- the App. J mixture ("amplified") accountant ---------------------------------------------------

from dpspec.accounting.huc import amplified_epsilon, amplified_sigma2, mixture_step_epsilon  # noqa: E402


@given(st.integers(20, 400), st.data(), alphas, epsilons)
def test_amplified_between_sa_and_huc(N, data, a, e):
    from scipy.stats import hypergeom

    D = data.draw(st.integers(1, min(N, 30)))
    B = data.draw(st.integers(1, N))
    T = data.draw(st.integers(1, 5))
    k = np.arange(0, min(B, D) + 1)
    lp = hypergeom.logpmf(k, N, D, B)
    keep = lp > -700
    k, lp = k[keep] / B, lp[keep] - np.log(np.exp(lp[keep]).sum())
    A = np.full(T, 4.0)
    amp = amplified_sigma2(A, k, lp, a, e)
    wc = srpp_sgd_sigma2(A * k.max() ** 2, a, e)
    sa = srpp_sgd_sigma2(A * float(np.sum(np.exp(lp) * k**2)), a, e)
    assert amp <= wc * (1 + 1e-9)  # Lemma J.2
    assert amp >= sa * (1 - 1e-6)  # Jensen: log E e^{cK²} ≥ c E[K²]
    assert amplified_epsilon(amp, A, k, lp, a) <= e * (1 + 1e-9)


def test_amplified_point_mass_equals_huc():
    A = np.array([0.5, 1.0, 2.0])
    s2 = amplified_sigma2(A, [0.25], [0.0], 8, 2)
    assert s2 == pytest.approx(srpp_sgd_sigma2(A * 0.25**2, 8, 2), rel=1e-9)


def test_lemma_j1_bounds_a_numerical_mixture_divergence():
    """D_α of two shared mixtures of 1-D Gaussians, by quadrature, is below the Lemma J.1 envelope."""
    from scipy.integrate import quad
    from scipy.stats import norm

    p = np.array([0.7, 0.2, 0.1])
    mu_p, mu_q = np.array([0.0, 0.4, 1.1]), np.array([0.0, -0.3, -0.2])  # |μ_p − μ_q| ≤ √a κ with a = 1
    kap = np.abs(mu_p - mu_q)
    s, alpha = 0.6, 5.0

    from scipy.special import logsumexp

    def logdens(mus, x):
        return float(logsumexp(np.log(p) + norm.logpdf(x, mus, s)))

    val = quad(lambda x: math.exp(alpha * logdens(mu_p, x) + (1 - alpha) * logdens(mu_q, x)), -8, 8, limit=200)[0]
    d = math.log(val) / (alpha - 1)
    bound = float(mixture_step_epsilon(s**2, [1.0], kap, np.log(p), alpha)[0])
    assert d <= bound
