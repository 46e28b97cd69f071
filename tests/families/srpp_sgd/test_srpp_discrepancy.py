"""Discrepancy models (App. D) and the Monte Carlo simulator with its finite-sample bounds."""

import math

import numpy as np
import pytest

from dpspec.accounting.huc import SrppSoundnessError, binomial_k2, hypergeometric_k2
from dpspec.srpp import (
    FixedPairWorlds,
    IIDRecords,
    LocalizedInfluence,
    MonteCarloDiscrepancy,
    Sampling,
    mc_radius,
    mc_sa_cap,
    mc_tail_cap,
    prevalence_worlds,
)


def test_fixed_pair_from_labels_and_group_size():
    y0 = np.array([0, 1, 2, 3, 3, 1])
    y1 = np.array([0, 1, 3, 3, 3, 2])
    w = FixedPairWorlds.from_labels(y0, y1)
    assert (w.dataset_size, w.d_max, w.group_size()) == (6, 2, 2)
    s = Sampling("wor", dataset_size=6, batch_size=4)
    assert w.huc_kappa(s).value == pytest.approx(2 / 4)
    assert w.sa_kappa2(s).value == pytest.approx(hypergeometric_k2(6, 2, 4) / 16)
    eq42 = FixedPairWorlds(6, 2, sa_bound="eq42").sa_kappa2(s).value
    assert eq42 == pytest.approx(4 / 16) and eq42 >= w.sa_kappa2(s).value


def test_prevalence_worlds_minimal_edits():
    y = np.random.default_rng(0).integers(0, 10, 1000)
    y0, y1, d = prevalence_worlds(y, 3, 0.10, 0.105, seed=0)
    assert d == abs(math.floor(0.105 * 1000) - math.floor(0.10 * 1000)) == 5
    assert int((y0 != y1).sum()) == 5


def test_localized_wr_and_poisson():
    m = LocalizedInfluence(3)
    wr = Sampling("wr", dataset_size=100, batch_size=10)
    assert m.sa_kappa2(wr).value == pytest.approx(binomial_k2(10, 3 / 100) / 100)
    pe = Sampling("poisson", dataset_size=100, rate=0.1, normalization="expected")
    assert m.huc_kappa(pe).value == pytest.approx(3 / 10)
    assert m.sa_kappa2(pe).value == pytest.approx(binomial_k2(3, 0.1) / 100)
    pr = Sampling("poisson", dataset_size=100, rate=0.1, normalization="realized", empty_batch="skip")
    cap = m.huc_kappa(pr)
    assert cap.value == 1.0 and cap.warnings


def test_iid_records_readings():
    s = Sampling("wor", dataset_size=2000, batch_size=100)
    avg = IIDRecords(0.01, sa_reading="coupling_average").sa_kappa2(s)
    assert avg.value == pytest.approx(binomial_k2(100, 0.01) / 100**2)
    assert any("DPS507" in w for w in avg.warnings)
    hp = IIDRecords(0.01, world_delta=1e-6).sa_kappa2(s)
    assert hp.once_failure == 1e-6 and not hp.warnings
    assert hp.value >= avg.value  # the high-probability world bound is the (sound) larger one
    # almost-sure HUC of i.i.d. records is the whole batch; a tail cap is smaller and carries δ_t
    assert IIDRecords(0.01).huc_kappa(s).value == 1.0
    tail = IIDRecords(0.01, tail_delta=1e-6).huc_kappa(s)
    hoeff = IIDRecords(0.01, tail_delta=1e-6, tail_method="hoeffding").huc_kappa(s)
    assert tail.per_step_failure == 1e-6 and tail.value <= hoeff.value < 1.0
    assert hoeff.value * 100 == pytest.approx(100 * 0.01 + math.sqrt(50 * math.log(1e6)))


def test_mc_radius_and_bounds():
    assert mc_radius(1000, 0.05) == pytest.approx(math.sqrt(math.log(40) / 2000))
    assert mc_radius(1000, 0.05, 4) == pytest.approx(math.sqrt(math.log(160) / 2000))
    b, mean, slack = mc_sa_cap([0.0, 1.0, 4.0], 16.0, 0.1)
    assert mean == pytest.approx(5 / 3) and b == pytest.approx(mean + 16 * mc_radius(3, 0.1))
    x = np.arange(1000)
    assert mc_tail_cap(x, 0.2, 0.05) == float(np.sort(x)[math.ceil((1 - (0.2 - mc_radius(1000, 0.05))) * 1000) - 1])
    assert mc_tail_cap(x, 0.01, 0.05, upper=7) == 7  # δ ≤ ε_MC: fall back to the a.s. cap


def _fixed_pair_coupler(N, D, seed=0):
    mask = np.zeros(N, bool)
    mask[np.random.default_rng(seed).choice(N, D, replace=False)] = True
    return lambda rng: mask


def test_monte_carlo_sa_cap_is_an_upper_bound_and_warns_when_slack_dominates():
    N, D, B = 300, 6, 30
    s = Sampling("wor", dataset_size=N, batch_size=B)
    mc = MonteCarloDiscrepancy(_fixed_pair_coupler(N, D), M=4000, gamma=0.05, seed=1)
    cap = mc.sa_kappa2(s)
    truth = hypergeometric_k2(N, D, B) / B**2
    assert cap.value >= truth
    assert cap.once_failure == 0.05
    assert any("DPS506" in w for w in cap.warnings)  # the B² Hoeffding range swamps E[K²] ≈ 0.7
    assert not any("DPS507" in w for w in cap.warnings)  # deterministic worlds detected
    # declaring the a.s. range min(B, D) tightens the slack by (D/B)²
    tight = MonteCarloDiscrepancy(_fixed_pair_coupler(N, D), M=4000, gamma=0.05, range_max=D, seed=1).sa_kappa2(s)
    assert truth <= tight.value < cap.value


def test_monte_carlo_tail_cap_and_random_coupling_warning():
    N, B = 400, 40

    def coupler(rng):  # i.i.d. mismatches with τ = 0.02 (random positions)
        return rng.random(N) < 0.02

    s = Sampling("wor", dataset_size=N, batch_size=B)
    mc = MonteCarloDiscrepancy(coupler, M=3000, gamma=0.05, tail_delta=0.1, seed=2)
    cap = mc.huc_kappa(s)
    from scipy.stats import binom
    assert cap.value * B >= binom.ppf(0.9, B, 0.02) - 1  # near the true 0.9-quantile of Bin(B, τ)
    assert cap.per_step_failure == 0.1 and cap.once_failure == 0.05
    assert any("DPS507" in w for w in mc.sa_kappa2(s).warnings)
    low = MonteCarloDiscrepancy(coupler, M=100, gamma=0.05, tail_delta=0.01, seed=2).huc_kappa(s)
    assert low.value == 1.0 and any("DPS506" in w for w in low.warnings)


def test_monte_carlo_wr_counts_repeats_and_refuses_huc():
    N, B = 5, 50
    mask = np.zeros(N, bool)
    mask[0] = True
    mc = MonteCarloDiscrepancy(lambda rng: mask, M=2000, gamma=0.05, seed=0)
    s = Sampling("wr", dataset_size=N, batch_size=B)
    est = mc.simulate(s)
    assert est.kappas.mean() * B == pytest.approx(B / N, rel=0.05)  # Bin(B, 1/N), repeats counted
    with pytest.raises(SrppSoundnessError) as e:
        mc.huc_kappa(s)
    assert e.value.rule == "DPS501"
    # pair-of-datasets draws are accepted too
    X0 = np.zeros((N, 3))
    X1 = X0.copy()
    X1[2, 1] = 1
    mc2 = MonteCarloDiscrepancy(lambda rng: (X0, X1), M=10, gamma=0.5)
    assert mc2.simulate(Sampling("wor", dataset_size=N, batch_size=5)).kappas.max() == pytest.approx(1 / 5)
