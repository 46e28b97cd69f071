"""dpspec.accounting.swm: calibration properties, soundness, result object."""

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from dpspec.accounting import swm
from dpspec.accounting.swm import SoundnessError, calibrate_swm, swm_epsilon, swm_sigma2

pos = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)
delta_vec = st.lists(st.one_of(st.just(0.0), st.floats(min_value=1e-100, max_value=10.0)), min_size=1, max_size=12)
alphas = st.floats(min_value=1.01, max_value=64.0)
eps = st.floats(min_value=1e-3, max_value=100.0)
S = settings(max_examples=120, deadline=None)


def _w(n, rnd):
    w = np.array([rnd.random() + 1e-3 for _ in range(n)])
    return w / w.sum()


@S
@given(delta_vec, alphas, eps, eps, st.randoms(use_true_random=False))
def test_sigma2_decreasing_in_epsilon(d, a, e1, e2, rnd):
    assume(max(d) > 0)
    w = _w(len(d), rnd)
    lo, hi = sorted([e1, e2])
    for fl in swm.FLAVOURS:
        assert swm_sigma2(d, w, a, hi, fl) <= swm_sigma2(d, w, a, lo, fl) * (1 + 1e-9)


@S
@given(delta_vec, alphas, eps, st.randoms(use_true_random=False))
def test_joint_geq_joint_exact_geq_ave(d, a, e, rnd):
    assume(max(d) > 0)
    w = _w(len(d), rnd)
    ave, je, j = (swm_sigma2(d, w, a, e, fl) for fl in ("ave", "joint_exact", "joint"))
    assert ave <= je * (1 + 1e-9) and je <= j * (1 + 1e-9)


@S
@given(delta_vec, alphas, eps, st.randoms(use_true_random=False))
def test_calibrated_sigma2_certifies_epsilon(d, a, e, rnd):
    assume(max(d) > 0)
    w = _w(len(d), rnd)
    for fl in swm.FLAVOURS:
        s2 = swm_sigma2(d, w, a, e, fl)
        assert swm_epsilon(s2, d, w, a, fl) <= e * (1 + 1e-9)


@S
@given(st.lists(delta_vec.filter(lambda v: len(v) == 5), min_size=1, max_size=4), alphas, eps)
def test_per_instance_never_looser(rows, a, e):
    Z = np.array(rows)
    assume(Z.max() > 0)
    for fl in swm.FLAVOURS:
        assert swm_sigma2(Z, None, a, e, fl) <= swm_sigma2(Z.max(0), None, a, e, fl) * (1 + 1e-9)


@S
@given(delta_vec, st.floats(0.01, 0.5), st.integers(1, 3), alphas, eps)
def test_pac_is_more_conservative_than_finite(d, gamma, k, a, e):
    assume(max(d) > 0)
    d0 = max(d) * k
    for fl in swm.FLAVOURS:
        pac = swm_sigma2(d, None, a, e, fl, monte_carlo=(gamma, d0))
        assert pac >= swm_sigma2(d, None, a, e, "ave") * (1 - 1e-9)
        assert pac <= a * d0**2 / (2 * e) * (1 + 1e-9)
        assert swm_epsilon(pac, d, None, a, fl, monte_carlo=(gamma, d0)) <= e * (1 + 1e-9)


@S
@given(pos, pos, alphas)
def test_rdp_curve_is_alpha_rho(s2, dd, a):
    c = swm.swm_rdp_curve(s2, [dd], None, [a], "ave")[0]
    assert c == pytest.approx(a * dd**2 / (2 * s2))


def test_bad_inputs():
    with pytest.raises(ValueError, match="alpha"):
        swm_sigma2([1.0], None, 1.0, 1.0)
    with pytest.raises(ValueError, match="alpha"):
        swm_sigma2([1.0], None, float("nan"), 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        swm_sigma2([1.0], None, 4.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        swm_sigma2([1.0], None, 4.0, -1.0)
    with pytest.raises(ValueError, match="zero directions"):
        swm_sigma2([], None, 4.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        swm_sigma2([np.inf], None, 4.0, 1.0)
    with pytest.raises(ValueError, match="non-negative"):
        swm_sigma2([-1.0], None, 4.0, 1.0)
    with pytest.raises(ValueError, match="sum to 1"):
        swm_sigma2([1.0, 1.0], [0.5, 0.6], 4.0, 1.0)
    with pytest.raises(ValueError, match="weights has"):
        swm_sigma2([1.0, 1.0], [1.0], 4.0, 1.0)
    with pytest.raises(ValueError, match="flavour"):
        swm_sigma2([1.0], None, 4.0, 1.0, "max")
    with pytest.raises(ValueError, match="gamma"):
        swm_sigma2([1.0], None, 4.0, 1.0, monte_carlo=(1.5, 1.0))
    with pytest.raises(SoundnessError) as ei:
        swm_sigma2([1.0], None, 4.0, 1.0, monte_carlo=(0.05, float("inf")))
    assert ei.value.rule == "DPS403" and ei.value.hint
    with pytest.raises(ValueError, match="delta"):
        swm.spp_epsilon(1.0, 4.0, 0.0)


def test_zero_sensitivity_needs_no_noise():
    assert swm_sigma2([0.0, 0.0], None, 4, 1, "joint_exact") == 0.0
    c = calibrate_swm([0.0, 0.0], None, 4, 1, "ave")
    assert c.sigma2 == 0.0 and c.verify() and c.epsilon_at(8) == 0.0


def test_zero_weight_directions_are_outside_the_profile():
    # Δ★² is a sup over 𝒰 = supp ω
    assert swm_sigma2([1.0, 5.0], [1.0, 0.0], 4, 1, "joint") == pytest.approx(2.0)
    assert swm_sigma2([1.0, 5.0], [1.0, 0.0], 4, 1, "joint_exact") == pytest.approx(2.0)


def test_calibration_object_roundtrip():
    Z = np.array([[1.0, 0.5, 0.2], [0.3, 1.0, 0.1]])
    c = calibrate_swm(Z.max(0), None, 4, 1, "ave", instance_deltas=Z, instances=[("w", "a", "b"), ("w", "b", "c")],
                      aggregation="per_instance", profile={"kind": "explicit", "m": 3})
    assert c.sigma2 == pytest.approx(4 * max((Z**2).mean(1)) / 2)
    assert c.sigma2 < swm_sigma2(Z.max(0), None, 4, 1, "ave")
    assert c.verify()
    assert c.reading == "exact for the finite profile" and c.failure_probability == 0.0
    assert any("Thm 4.5" in t for t in c.theorems) and any("per-instance" in t for t in c.theorems)
    assert all(a.source for a in c.assumptions)
    doc = json.loads(json.dumps(c.to_dict()))
    c2 = swm.SWMCalibration.from_dict(doc)
    assert c2.verify() and c2.sigma2 == c.sigma2 and c2.aggregation == "per_instance"
    assert c2.epsilon_at(8) == pytest.approx(c.epsilon_at(8))
    assert doc["deltas_sha256"] == swm.deltas_sha256(Z.max(0))
    assert doc["notion"] == "Ave-SRPP"
    curve = c.rdp_curve([2, 4, 8])
    assert curve[1][1] == pytest.approx(1.0)
    assert curve[0][1] == pytest.approx(0.5) and curve[2][1] == pytest.approx(2.0)
    e5, a5 = c.spp_epsilon(1e-5)
    assert e5 <= swm.spp_epsilon(1.0, 4.0, 1e-5)
    # tampering is detected
    object.__setattr__(c, "sigma2", c.sigma2 * 0.9)
    assert not c.verify()
    with pytest.raises(ValueError, match="column-wise maximum"):
        calibrate_swm([1.0, 1.0, 1.0], None, 4, 1, instance_deltas=Z)


def test_pac_estimation_failure_budget():
    with pytest.raises(SoundnessError):
        calibrate_swm(np.ones(50), None, 4, 1, "ave", monte_carlo=(0.05, 2.0), estimation_failure=0.04)
    c = calibrate_swm(np.ones(50), None, 4, 1, "ave", monte_carlo=(0.05, 2.0), estimation_failure=0.025)
    assert c.binding == "pac" and c.failure_probability == 0.05 and "PAC" in c.reading
    assert any("Thm 4.7" in t for t in c.theorems)


def test_soundness_error_is_value_error_with_rule():
    e = SoundnessError("x", rule="DPS405", hint="h")
    assert isinstance(e, ValueError) and e.rule == "DPS405" and "DPS405" in str(e)
    with pytest.raises(ValueError):
        SoundnessError("x", rule="DPS999")


def test_static_releases_do_not_compose():
    c = calibrate_swm([1.0], None, 4, 1, "ave")
    assert swm.compose_static_releases([c]) is c
    with pytest.raises(SoundnessError) as ei:
        swm.compose_static_releases([c, c])
    assert ei.value.rule == "DPS405"
