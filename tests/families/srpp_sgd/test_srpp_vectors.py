"""Digest test vectors (shared/digests/srpp.md §1 F16–F23, §7, §11) for the HUC / sa-HUC accountant."""

import math

import numpy as np
import pytest

from dpspec.accounting.huc import (
    binomial_k2,
    gradient_noise_multiplier,
    hoeffding_tail_cap,
    huc,
    hypergeometric_k2,
    localized_caps,
    paper_noise_multiplier,
    sa_huc,
    srpp_sgd_epsilon,
    srpp_sgd_sigma2,
    srpp_spp_epsilon,
    total_cap,
)
from dpspec.srpp import LrSchedule, prevalence_worlds

T = 40 * math.ceil(50000 / 512)  # 3920 (digest §11 assumption)


def test_f16_huc():
    assert huc(20, 0.2, 4.0, 512) == pytest.approx(0.00390625, rel=1e-15)


@pytest.mark.parametrize("N,D,B,want", [(50000, 20, 512, 0.244569), (50000, 2, 512, 0.020689)])
def test_f20_hypergeometric(N, D, B, want):
    assert hypergeometric_k2(N, D, B) == pytest.approx(want, abs=1e-6)
    # equals Var + E² written as in App. W.3
    p = D / N
    var = B * p * (1 - p) * (N - B) / (N - 1)
    assert hypergeometric_k2(N, D, B) == pytest.approx(var + (B * p) ** 2, rel=1e-12)


def test_f21_binomial():
    assert binomial_k2(512, 0.0004) == pytest.approx(0.246661, abs=1e-6)


def test_f22_hoeffding_tail():
    assert hoeffding_tail_cap(512, 4e-4, 1e-6) == pytest.approx(59.6756, abs=1e-4)


def test_eq42_localized():
    assert localized_caps(512, 20) == (20.0, 400.0)
    assert localized_caps(8, 20) == (8.0, 64.0)


def test_section11_huc_row():
    h = np.full(T, huc(20, 0.2, 4.0, 512))
    assert total_cap(h) == pytest.approx(15.3125, rel=1e-12)
    s = math.sqrt(srpp_sgd_sigma2(h, 16, 8))
    assert s == pytest.approx(3.91312, abs=1e-5)
    assert paper_noise_multiplier(s, 512, 4.0) == pytest.approx(500.88, abs=0.01)
    g = np.full(T, huc(20, 1.0, 4.0, 512))  # gradient-space caps: η cancels
    sg = math.sqrt(srpp_sgd_sigma2(g, 16, 8))
    assert gradient_noise_multiplier(sg, 512, 4.0) == pytest.approx(2504.40, abs=0.01)
    assert gradient_noise_multiplier(sg, 512, 4.0) == pytest.approx(2 * 20 * math.sqrt(16 * T / 16), rel=1e-12)


def test_section11_sa_row():
    k2 = hypergeometric_k2(50000, 20, 512)
    h = np.full(T, sa_huc(k2, 0.2, 4.0, 512))
    assert total_cap(h) == pytest.approx(0.00936240, abs=1e-8)
    s = math.sqrt(srpp_sgd_sigma2(h, 16, 8, subsampling_aware=True))
    assert s == pytest.approx(0.0967595, abs=1e-7)
    assert paper_noise_multiplier(s, 512, 4.0) == pytest.approx(12.3852, abs=1e-4)
    g = np.full(T, sa_huc(k2, 1.0, 4.0, 512))
    sg = math.sqrt(srpp_sgd_sigma2(g, 16, 8))
    assert gradient_noise_multiplier(sg, 512, 4.0) == pytest.approx(61.9261, abs=1e-4)


@pytest.mark.parametrize("D,B,ratio", [(20, 512, 40.44), (20, 1024, 26.52), (2, 512, 13.91), (2, 1024, 9.78)])
def test_section11_sigma_ratios(D, B, ratio):
    wc = srpp_sgd_sigma2(np.full(10, huc(min(B, D), 0.2, 4.0, B)), 16, 8)
    sa = srpp_sgd_sigma2(np.full(10, sa_huc(hypergeometric_k2(50000, D, B), 0.2, 4.0, B)), 16, 8)
    assert math.sqrt(wc / sa) == pytest.approx(ratio, abs=0.01)


def test_section11_cosine_sum_eta2():
    eta = LrSchedule(0.2, T, "cosine", 0.0).array()
    assert float(np.sum(eta**2)) == pytest.approx(58.82, abs=0.01)
    assert float(np.sum(eta**2)) == pytest.approx(3 / 8 * T * 0.2**2, rel=1e-3)
    assert np.all(eta > 0)


def test_f23_conversion():
    assert srpp_spp_epsilon(8, 1e-5, alpha=16, linear=False)[0] == pytest.approx(8.76753, abs=1e-5)
    assert srpp_spp_epsilon(1, 1e-5, alpha=4, linear=False)[0] == pytest.approx(4.83764, abs=1e-5)


def test_section7_optimal_alpha():
    rho = 1.0 / (2 * 2.0)  # Δ̄² = 1, σ² = 2
    eps, a = srpp_spp_epsilon(rho, 1e-5)
    assert a == pytest.approx(7.786, abs=1e-3)
    assert eps == pytest.approx(3.64307, abs=1e-5)


def test_f11_joint_exact_on_finite_profile():
    caps = np.array([[1.0, 4.0]])  # one step, per-slice squared shifts Δ² = [1, 4]
    assert srpp_sgd_sigma2(caps, 4, 1, "ave") == pytest.approx(5.0)
    assert srpp_sgd_sigma2(caps, 4, 1, "joint") == pytest.approx(8.0)
    s2 = srpp_sgd_sigma2(caps, 4, 1, "joint_exact")
    assert s2 == pytest.approx(6.61251, abs=1e-5)
    assert srpp_sgd_epsilon(s2, caps, 4, "joint_exact") <= 1.0 + 1e-9


def test_cifar_prevalence_worlds_give_delta_2():
    """Digest §13.2: ⌊0.10004·50000⌋ − ⌊0.1·50000⌋ = 2, not 20."""
    y = np.random.default_rng(0).integers(0, 10, 50000)
    y0, y1, delta = prevalence_worlds(y, 3, 0.10000, 0.10004, seed=1)
    assert delta == 2
    assert int((y0 == 3).sum()) == 5000 and int((y1 == 3).sum()) == 5002
