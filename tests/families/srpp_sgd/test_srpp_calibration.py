"""The calibration result (certificate payload), composition (Thm 5.8), notion labels, bad input."""

import json

import numpy as np
import pytest

from dpspec.accounting.huc import (
    SRPPSGDCalibration,
    SrppSoundnessError,
    calibrate_srpp_sgd,
    compose_srpp_sgd,
    huc,
    hypergeometric_k2,
    layer_huc,
    srpp_sgd_sigma2,
)
from dpspec.accounting.swm import SoundnessError, calibrate_swm
from dpspec.srpp import (
    BlockProfile,
    FixedPairWorlds,
    IIDRecords,
    LrSchedule,
    OptimizerSpec,
    Sampling,
    SrppSgdPlan,
    calibrate,
    calibrate_group_dpsgd,
    plan_caps,
)


def _plan(T=50, N=1000, B=50, units="gradient", **kw):
    return SrppSgdPlan(sampling=Sampling("wor", dataset_size=N, batch_size=B),
                       optimizer=OptimizerSpec(LrSchedule(0.2, T, "cosine", 0.1), momentum=0.9), clip=1.0,
                       noise_units=units, **kw)


def test_result_fields_roundtrip_and_verify():
    cal = calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=16, epsilon=8, accountant="sa_huc")
    assert isinstance(cal, SRPPSGDCalibration)
    assert cal.subsampling_aware and cal.notion_id == "sa_ave_srpp"
    assert cal.notion.startswith("sa-Ave-SRPP") and "on average" in cal.notion
    assert cal.slice_policy == "slice_independent" and cal.profile["kind"] == "any"
    assert any("Thm 5.7(i)" in t for t in cal.theorems)
    assert all(a.source for a in cal.assumptions)
    doc = json.loads(json.dumps(cal.to_dict()))
    back = SRPPSGDCalibration.from_dict(doc)
    assert back.verify() and back.sigma2 == cal.sigma2
    assert doc["injected"]["std_first"] == pytest.approx(cal.sigma)  # gradient units: σ is injected as is
    tampered = dict(doc, sigma2=cal.sigma2 * 0.9)
    assert not SRPPSGDCalibration.from_dict(tampered).verify()


def test_huc_notion_and_whole_curve_and_spp():
    cal = calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=16, epsilon=8, accountant="huc")
    assert cal.notion == "Ave-SRPP" and cal.notion_id == "ave_srpp"
    curve = dict(cal.rdp_curve([2, 16, 32]))
    assert curve[16] == pytest.approx(8.0, rel=1e-9)
    assert curve[32] == pytest.approx(16.0, rel=1e-9)  # ε_α = α·H/(2σ²)
    eps, a = cal.spp_epsilon(1e-5)
    assert a > 1 and eps <= cal.spp_epsilon(1e-5, alpha=16)[0]


def test_sa_is_never_plain_srpp():
    cal = calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=16, epsilon=8, flavour="joint", accountant="sa_huc")
    assert cal.notion != "Joint-SRPP" and cal.notion_id == "sa_joint_srpp"
    with pytest.raises(SrppSoundnessError) as e:
        cal.spp_epsilon(1e-5)
    assert e.value.rule == "DPS505" and e.value.hint
    with pytest.raises(SrppSoundnessError) as e:
        srpp_sgd_sigma2(np.ones((3, 2)), 4, 1, "joint_exact", subsampling_aware=True)
    assert e.value.rule == "DPS505"
    assert isinstance(e.value, SoundnessError) and isinstance(e.value, ValueError)


def test_compose_thm58():
    a = calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=16, epsilon=2, accountant="huc")
    b = calibrate(_plan(T=20), FixedPairWorlds(1000, 4), alpha=16, epsilon=3, accountant="huc")
    c = compose_srpp_sgd([a, b])
    assert c.epsilon == pytest.approx(5.0) and c.notion == "Ave-SRPP" and "Thm 5.8" in c.theorems[0]
    for bad, what in [
        (calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=8, epsilon=2, accountant="huc"), "α"),
        (calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=16, epsilon=2, flavour="joint", accountant="huc"), "flavour"),
        (calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=16, epsilon=2, accountant="sa_huc"), "sa"),
    ]:
        with pytest.raises(SrppSoundnessError) as e:
            compose_srpp_sgd([a, bad])
        assert e.value.rule == "DPS504", what
    # joint and joint_exact are both Joint-SRPP
    j1 = calibrate_srpp_sgd(np.ones(4), 4, 1, "joint")
    j2 = calibrate_srpp_sgd(np.ones(4), 4, 1, "joint_exact")
    assert compose_srpp_sgd([j1, j2]).epsilon == pytest.approx(2.0)
    # different finite profiles: refused; "any" composes with a finite one
    p1 = calibrate_srpp_sgd(np.array([[1.0, 2.0]]), 4, 1, slice_policy="caveat", profile={"seed": 1})
    p2 = calibrate_srpp_sgd(np.array([[1.0, 2.0]]), 4, 1, slice_policy="caveat", profile={"seed": 2})
    with pytest.raises(SrppSoundnessError) as e:
        compose_srpp_sgd([p1, p2])
    assert e.value.rule == "DPS504"
    assert compose_srpp_sgd([p1, calibrate_srpp_sgd(np.ones(2), 4, 1)]).profile["seed"] == 1
    with pytest.raises(SrppSoundnessError):
        compose_srpp_sgd([calibrate_swm([1.0], alpha=4, epsilon=1)])


def test_slice_dependent_caps_need_a_policy():
    caps = np.array([[1.0, 3.0], [2.0, 1.0]])
    with pytest.raises(SrppSoundnessError) as e:
        calibrate_srpp_sgd(caps, 4, 1)
    assert e.value.rule == "DPS503" and "global" in e.value.hint
    cav = calibrate_srpp_sgd(caps, 4, 1, slice_policy="caveat")
    assert cav.slice_policy == "caveat" and any("App. T" in w for w in cav.warnings)
    with pytest.raises(ValueError):
        calibrate_srpp_sgd(caps, 4, 1, slice_policy="global", global_caps=[1.0, 1.0])  # below the slice caps
    glob = calibrate_srpp_sgd(caps, 4, 1, slice_policy="global", global_caps=[3.0, 2.0])
    assert glob.profile["kind"] == "any" and glob.sigma2 == pytest.approx(4 * 5 / 2)


def test_per_layer_plan_global_vs_caveat():
    sizes = (30, 10, 20)
    clips = (0.5, 0.2, 0.4)
    prof = BlockProfile.sphere(sizes, 64, seed=3)
    base = dict(sampling=Sampling("wor", dataset_size=500, batch_size=25),
                optimizer=OptimizerSpec(LrSchedule(0.1, 10), momentum=0.0), per_layer_clips=clips,
                noise_units="parameter", profile=prof)
    g = SrppSgdPlan(slice_policy="global", **base)
    c = SrppSgdPlan(slice_policy="caveat", **base)
    m = FixedPairWorlds(500, 3)
    hg, _, glob, _ = plan_caps(g, m, "huc")
    hc, w, _, _ = plan_caps(c, m, "huc")
    assert hg.shape == (10, 1) and hc.shape == (10, 64)
    assert np.all(hc <= hg + 1e-15)  # Cauchy–Schwarz supremum dominates every slice
    assert hg[0, 0] == pytest.approx(huc(3, 0.1, 1.0, 25) * sum(x * x for x in clips))
    ph = layer_huc(3, clips, 0.1, prof.block_norms, 25)
    assert np.allclose(hc[0], ph)
    cg = calibrate(g, m, alpha=4, epsilon=1, accountant="huc")
    cc = calibrate(c, m, alpha=4, epsilon=1, accountant="huc")
    assert cc.sigma2 < cg.sigma2 and cc.slice_policy == "caveat" and cg.slice_policy == "slice_independent"
    assert np.allclose(np.sum(prof.block_norms**2, axis=1), 1.0)


def test_failure_probability_is_reported():
    plan = _plan(T=40)
    cal = calibrate(plan, IIDRecords(0.002, tail_delta=1e-7), alpha=16, epsilon=8, accountant="huc")
    assert cal.failure_probability == pytest.approx(40 * 1e-7)
    sa = calibrate(plan, IIDRecords(0.002, world_delta=1e-5), alpha=16, epsilon=8, accountant="sa_huc")
    assert sa.failure_probability == pytest.approx(1e-5)


def test_large_runs_keep_a_summary_not_the_caps():
    T = 30000
    cal = calibrate_srpp_sgd(np.linspace(1, 2, T), 16, 8)
    assert cal.caps is None and cal.caps_summary["shape"] == [T, 1]
    assert cal.verify(np.linspace(1, 2, T))


def test_group_dp_baseline_is_tight():
    from dpspec.accounting import poisson_gaussian_rdp

    b = calibrate_group_dpsgd(16, 8, rate=0.05, steps=200, group_size=4, delta=1e-5)
    assert b.rdp_epsilon <= 8
    assert 200 * poisson_gaussian_rdp(16, b.noise_multiplier / 1.001, 0.05, group_size=4) > 8
    assert b.dp_epsilon is not None and b.group_size == 4


@pytest.mark.parametrize("call,word", [
    (lambda: huc(1, 0.1, 0.0, 10), "clip"),
    (lambda: huc(1, 0.1, -1.0, 10), "clip"),
    (lambda: hypergeometric_k2(100, 5, 101), "batch_size"),
    (lambda: hypergeometric_k2(100, 101, 10), "differing"),
    (lambda: FixedPairWorlds(10, 11), "differing"),
    (lambda: Sampling("wor", dataset_size=10, batch_size=11), "batch_size"),
    (lambda: _plan().__class__(sampling=Sampling("wor", dataset_size=10, batch_size=5),
                               optimizer=OptimizerSpec(LrSchedule(0.1, 3)), clip=0.0), "clip"),
    (lambda: _plan().__class__(sampling=Sampling("wor", dataset_size=10, batch_size=5),
                               optimizer=OptimizerSpec(LrSchedule(0.1, 3)), per_layer_clips=(1.0, -1.0)), "clip"),
    (lambda: LrSchedule(0.0, 3), "learning rate"),
    (lambda: calibrate_srpp_sgd(np.ones(3), 0.5, 1), "alpha"),
    (lambda: calibrate_srpp_sgd(np.ones(3), 4, 0), "epsilon"),
    (lambda: calibrate_srpp_sgd(-np.ones(3), 4, 1), "caps"),
])
def test_bad_input_names_the_parameter(call, word):
    with pytest.raises(ValueError) as e:
        call()
    assert word in str(e.value)


def test_localized_d_max_larger_than_dataset():
    from dpspec.srpp import LocalizedInfluence
    with pytest.raises(ValueError, match="d_max"):
        LocalizedInfluence(20).huc_kappa(Sampling("wor", dataset_size=10, batch_size=5))


def test_soundness_rules_wr_poisson_optimizer():
    from dpspec.srpp import LocalizedInfluence
    with pytest.raises(SrppSoundnessError) as e:
        LocalizedInfluence(2).huc_kappa(Sampling("wr", dataset_size=100, batch_size=10))
    assert e.value.rule == "DPS501"
    # sa-HUC under WR is fine
    assert LocalizedInfluence(2).sa_kappa2(Sampling("wr", dataset_size=100, batch_size=10)).value > 0
    with pytest.raises(SrppSoundnessError) as e:
        Sampling("poisson", dataset_size=100, rate=0.1)
    assert e.value.rule == "DPS502"
    with pytest.raises(SrppSoundnessError) as e:
        Sampling("poisson", dataset_size=100, rate=0.1, normalization="realized")
    assert e.value.rule == "DPS502"
    with pytest.raises(SrppSoundnessError) as e:
        OptimizerSpec(LrSchedule(0.1, 3), kind="adam")
    assert e.value.rule == "DPS509"
    with pytest.raises(SrppSoundnessError) as e:
        calibrate(_plan(), FixedPairWorlds(1000, 4), alpha=4, epsilon=1, accountant="huc").__class__  # ok
        p = _plan(units="parameter")
        cal = calibrate(_plan(units="gradient"), FixedPairWorlds(1000, 4), alpha=4, epsilon=1)
        p.gradient_noise_std(cal)
    assert e.value.rule == "DPS508"


def test_amplified_calibration_is_plain_srpp_and_verifiable():
    plan = _plan()
    amp = calibrate(plan, FixedPairWorlds(1000, 4), alpha=16, epsilon=8, accountant="amplified")
    huc_ = calibrate(plan, FixedPairWorlds(1000, 4), alpha=16, epsilon=8, accountant="huc")
    sa = calibrate(plan, FixedPairWorlds(1000, 4), alpha=16, epsilon=8, accountant="sa_huc")
    assert amp.accountant == "amplified" and amp.notion == "Ave-SRPP" and not amp.subsampling_aware
    assert sa.sigma2 <= amp.sigma2 <= huc_.sigma2
    assert any("Lemma J.1" in t for t in amp.theorems)
    assert amp.epsilon_at(16) <= 8 * (1 + 1e-9) and amp.epsilon_at(4) < 8
    back = SRPPSGDCalibration.from_dict(json.loads(json.dumps(amp.to_dict())))
    assert back.verify() and back.accountant == "amplified"
    eps, a = amp.spp_epsilon(1e-5)
    assert eps < huc_.spp_epsilon(1e-5)[0]
    assert compose_srpp_sgd([amp, huc_]).epsilon == pytest.approx(16.0)  # both worst-case Ave-SRPP
    with pytest.raises(ValueError):
        from dpspec.srpp import MonteCarloDiscrepancy
        calibrate(plan, MonteCarloDiscrepancy(lambda r: np.zeros(1000, bool), M=5), alpha=4, epsilon=1,
                  accountant="amplified")
