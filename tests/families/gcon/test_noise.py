"""Algorithm 2 sampler (Wei et al. 2024 eq. (14), Lemma 6): Erlang radius, uniform direction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpspec.families.gcon.noise import (
    gaussian_output_noise,
    sample_direction,
    sample_objective_noise,
    sample_radius,
)


@pytest.mark.parametrize("d,beta", [(1, 2.0), (3, 0.5), (16, 1.4206), (64, 0.00515)])
def test_radius_is_erlang(d, beta):
    rng = np.random.default_rng(1234 + d)
    B = np.hstack([sample_objective_noise(d, 50, beta, rng) for _ in range(60)])  # 3000 columns
    r = np.linalg.norm(B, axis=0)
    ks = stats.kstest(r, stats.gamma(a=d, scale=1.0 / beta).cdf)
    assert ks.pvalue > 1e-3, ks
    assert np.mean(r) == pytest.approx(d / beta, rel=0.05)  # E||b|| = d / beta (digest F12)


def test_radius_helper_matches_gamma():
    rng = np.random.default_rng(7)
    r = sample_radius(5, 3.0, 4000, rng)
    assert stats.kstest(r, stats.gamma(a=5, scale=1 / 3.0).cdf).pvalue > 1e-3


@pytest.mark.parametrize("d", [2, 3, 10, 64])
def test_direction_uniform_on_sphere(d):
    rng = np.random.default_rng(99 + d)
    U = sample_direction(d, 6000, rng)
    assert np.allclose(np.linalg.norm(U, axis=0), 1.0, atol=1e-12)
    # the squared coordinate of a uniform point on S^{d-1} is Beta(1/2, (d-1)/2)
    beta = stats.beta(0.5, (d - 1) / 2)
    for axis in (0, d - 1):
        assert stats.kstest(U[axis] ** 2, beta.cdf).pvalue > 1e-3
    # ... also along a random fixed direction (rotation invariance, Lemma 6)
    v = rng.standard_normal(d)
    v /= np.linalg.norm(v)
    assert stats.kstest((v @ U) ** 2, beta.cdf).pvalue > 1e-3
    # signs are symmetric and the mean vanishes
    assert np.linalg.norm(U.mean(axis=1)) < 5 / math.sqrt(6000)
    # second moment E[u u^T] = I / d
    assert np.allclose(U @ U.T / U.shape[1], np.eye(d) / d, atol=6 / math.sqrt(6000) / d + 0.01 / d)


def test_density_shape_exp_minus_beta_norm():
    """Density prop. to exp(-beta ||b||): for d = 2, P(||b|| <= t) = 1 - e^{-bt}(1 + bt)."""
    rng = np.random.default_rng(5)
    B = sample_objective_noise(2, 5000, 0.7, rng)
    t = np.linalg.norm(B, axis=0)
    cdf = lambda x: 1 - np.exp(-0.7 * x) * (1 + 0.7 * x)
    assert stats.kstest(t, cdf).pvalue > 1e-3
    angles = np.arctan2(B[1], B[0])
    assert stats.kstest(angles, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-3


def test_infinite_beta_and_errors():
    assert not sample_objective_noise(4, 3, math.inf, 0).any()
    with pytest.raises(ValueError):
        sample_objective_noise(4, 3, 0.0, 0)
    with pytest.raises(ValueError):
        sample_objective_noise(4, 3, float("nan"), 0)
    assert sample_objective_noise(4, 3, 1.0, 0).shape == (4, 3)
    g = gaussian_output_noise((3, 2), 2.0, 0)
    assert g.shape == (3, 2)
    assert not gaussian_output_noise((3, 2), 0.0, 0).any()


def test_columns_independent_and_seeded():
    a = sample_objective_noise(8, 4, 1.0, 11)
    b = sample_objective_noise(8, 4, 1.0, 11)
    assert np.array_equal(a, b)
    c = sample_objective_noise(8, 4, 1.0, 12)
    assert not np.array_equal(a, c)
