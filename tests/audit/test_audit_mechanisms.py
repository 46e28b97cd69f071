"""Every built-in auditor on the real mechanism (ε_lower ≤ certified ε) and on mutated mechanisms
(the power check: ε_lower > certified ε). Seeds are fixed, so each test is deterministic; the trial
counts leave a wide margin on both sides (see the comments), so a failure is a real change in the
mechanism, the accounting or the audit — not noise."""

import dataclasses

import pytest

from dpspec.audit import audit
from dpspec.audit.mutations import mutants, mutate


def _one(report):
    assert len(report.results) == 1
    return report.results[0]


# --- Gaussian release --------------------------------------------------------------------------------


def test_gaussian_release_passes_and_has_power(compiled_specs):
    c = compiled_specs("gaussian_release.dps")
    r = _one(audit(c, runtime=False, seed=0, trials=200_000))
    assert r.status == "pass" and r.epsilon_certified == pytest.approx(1.0, abs=1e-6)
    assert 0.1 < r.epsilon_lower <= r.epsilon_certified  # observed ≈ 0.23; the exact ε is 1.0


def test_gaussian_release_noise_scaled_down_is_flagged(compiled_specs):
    c = compiled_specs("gaussian_release.dps")
    bad = mutate(c.mechanism, "noise_scaled", 0.25)
    r = _one(audit(c, runtime=False, mechanisms={"total_hours": bad}, seed=1, trials=200_000))
    assert r.violation and r.epsilon_lower > 2.0  # observed ≈ 3; true ε of the mutant ≈ 4


def test_gaussian_audit_at_another_delta_uses_that_point(compiled_specs):
    c = compiled_specs("gaussian_release.dps")
    r = _one(audit(c, runtime=False, seed=0, trials=20_000, delta=1e-5))
    assert r.delta == 1e-5 and r.epsilon_certified == pytest.approx(0.8725, abs=1e-3)
    assert r.status == "pass"


def test_gaussian_secure_mode_is_audited_through_its_own_sampler(compiled_specs, monkeypatch):
    import random
    import secrets

    # secure mode draws from secrets.randbelow; a seeded stand-in makes this test deterministic while
    # still going through GaussianRelease.release and the exact sampler
    monkeypatch.setattr(secrets, "randbelow", random.Random(0).randrange)
    c = compiled_specs("gaussian_release.dps")
    secure = dataclasses.replace(c.mechanism, secure=True)
    r = _one(audit(c, runtime=False, mechanisms={"total_hours": secure}, seed=0, trials=8_000))
    assert r.status == "pass"
    weak = dataclasses.replace(secure, sigma=secure.sigma / 8)
    r = _one(audit(c, runtime=False, mechanisms={"total_hours": weak}, seed=0, trials=8_000))
    assert r.violation


# --- DP-SGD ------------------------------------------------------------------------------------------

# Observed ε_lower at 2000 trials (certified ε = 2): real 0.0; noise×0.25 ≈ 4.2; no clipping ≈ 4.5;
# rate ×10 (0.1 → 1) ≈ 3.2. The ceiling at 1600 evaluation outputs per side is ≈ 6.2.


def test_dpsgd_poisson_passes(compiled_specs):
    c = compiled_specs("DPSGD_POISSON")
    r = _one(audit(c, runtime=False, seed=0, trials=2000))
    # calibrated by PLD to relative 1e-3 in σ: the certified ε is at most the target and close to it
    assert r.status == "pass" and 1.99 <= r.epsilon_certified <= 2.0
    assert r.epsilon_headline == r.epsilon_certified  # all 4 steps observed


@pytest.mark.parametrize("kind", ["noise_scaled", "no_clipping", "rate_misreported"])
def test_dpsgd_poisson_mutants_are_flagged(compiled_specs, kind):
    c = compiled_specs("DPSGD_POISSON")
    bad = mutants(c, "model")[kind]
    r = _one(audit(c, runtime=False, mechanisms={"model": bad}, seed=1, trials=2000))
    assert r.violation, (kind, r.epsilon_lower, r.epsilon_certified)
    assert r.epsilon_lower > 2.5


def test_dpsgd_full_batch_lower_bound_is_informative(compiled_specs):
    """Without subsampling the canary is seen at every step: the audit gets close to the certificate."""
    c = compiled_specs("DPSGD_FULL_BATCH")
    r = _one(audit(c, runtime=False, seed=0, trials=3000))
    assert r.status == "pass"
    assert r.epsilon_lower > 0.25 * r.epsilon_certified  # the exact (PLD/μ-GDP) calibration certifies ε = 2
    bad = mutate(c.mechanism, "noise_scaled", 0.25)
    assert _one(audit(c, runtime=False, mechanisms={"model": bad}, seed=1, trials=3000)).violation
    with pytest.raises(ValueError):
        mutate(c.mechanism, "rate_misreported")  # nothing to misreport in full-batch training


def test_dpsgd_substitution_per_layer(compiled_specs):
    c = compiled_specs("DPSGD_SUBSTITUTION")
    r = _one(audit(c, runtime=False, seed=0, trials=2000))
    assert r.status == "pass" and "anti-canary" in r.neighbours
    for kind in ("noise_scaled", "no_clipping"):
        bad = mutants(c, "model")[kind]
        assert _one(audit(c, runtime=False, mechanisms={"model": bad}, seed=1, trials=2000)).violation, kind


def test_dpsgd_group_unit(compiled_specs):
    c = compiled_specs("DPSGD_GROUP")
    r = _one(audit(c, runtime=False, seed=0, trials=2000))
    assert r.status == "pass" and "group of 2" in r.neighbours
    bad = mutants(c, "model")["no_clipping"]
    assert _one(audit(c, runtime=False, mechanisms={"model": bad}, seed=1, trials=2000)).violation


def test_dpsgd_prefix_is_compared_with_the_prefix_certificate(compiled_specs):
    c = compiled_specs("DPSGD_POISSON")
    r = _one(audit(c, runtime=False, seed=0, trials=400, options={"dpsgd": {"steps": 2}}))
    assert r.epsilon_certified < r.epsilon_headline  # ε of 2 steps < ε of all 4
    assert "first 2 of 4 steps" in r.note and r.status == "pass"


# --- SWM (Pufferfish) --------------------------------------------------------------------------------


def test_swm_joint_groups_passes_and_underestimated_delta_is_flagged(compiled_specs):
    c = compiled_specs("groups_swm.dps")
    r = _one(audit(c, runtime=False, seed=0, trials=15_000, targets=["group_means"]))
    assert r.status == "pass" and "Joint-SPP" in r.notion and "V uniform on the sphere" in r.neighbours
    bad = mutants(c, "group_means")["delta_underestimated"]
    r = _one(audit(c, runtime=False, mechanisms={"group_means": bad}, seed=1, trials=15_000, targets=["group_means"]))
    assert r.violation and r.epsilon_lower > 1.2 * r.epsilon_certified  # observed ≈ 4.8 vs 2.6


def test_swm_ave_per_record_audits_each_slice(compiled_specs):
    c = compiled_specs("groups_swm.dps")
    r = _one(audit(c, runtime=False, seed=0, trials=6_000, targets=["record_values"]))
    assert r.status == "pass" and len(r.components) == 3
    assert r.epsilon_lower == pytest.approx(sum(x.epsilon_lower for x in r.components) / 3)


def test_swm_ave_separated_records_mutant_is_flagged(compiled_specs):
    c, data = compiled_specs("swm_separated")
    r = _one(audit(c, runtime=False, seed=0, trials=8_000, data=data))
    assert r.status == "pass"
    bad = mutants(c, "value")["delta_underestimated"]
    r = _one(audit(c, runtime=False, mechanisms={"value": bad}, seed=1, trials=8_000, data=data))
    assert r.violation, (r.epsilon_lower, r.epsilon_certified)


# --- GCON ----------------------------------------------------------------------------------------------


def test_gcon_passes_and_noise_scaled_down_is_flagged(compiled_specs):
    c = compiled_specs("GCON_SMALL")
    r = _one(audit(c, runtime=False, seed=0, trials=200))
    assert r.status == "pass" and "edge" in r.neighbours
    bad = mutants(c, "clf")["noise_scaled"]
    r = _one(audit(c, runtime=False, mechanisms={"clf": bad}, seed=1, trials=200))
    assert r.violation, (r.epsilon_lower, r.epsilon_certified)
