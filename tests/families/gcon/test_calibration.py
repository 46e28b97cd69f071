"""GCON calibration chain (Wei et al. 2024 Thm 1, eqs. (17)-(24)): digest §5.5 test vectors,
§2.4 Psi table, identities P1-P4, named errors, hypothesis properties, AMP step."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from dpspec.accounting.gcon import (
    GconError,
    amp_calibration,
    analytic_gaussian_sigma,
    gcon_calibration,
    gcon_release_calibration,
    loss_constants,
    propagation_sensitivity,
    tail_constant,
)

REL = 1e-9

# digest §5.5 (derived with SciPy 1.17.1; omega = 0.9, xi = 1e-3)
VECTORS = {
    "T1": (dict(epsilon=1, delta=1 / 16316, regularization=0.2, num_classes=7, dim=16, num_train=140,
                restart=0.8, steps=[2]),
           dict(sensitivity=0.48, c_sf=39.25769121, regularization=0.2, c_theta=1.798211392,
                epsilon_lambda=0.01153711385, extra_regularization=0.0, beta=1.420643395,
                expected_noise_norm=11.26250265)),
    "T2": (dict(epsilon=4, delta=1 / 16316, regularization=1.0, num_classes=7, dim=64, num_train=2995,
                restart=0.6, steps=[10]),
           dict(sensitivity=1.333193523, c_sf=104.3201946, regularization=1.0, c_theta=0.1562602348,
                epsilon_lambda=0.0002292629987, extra_regularization=0.0, beta=2.887348213,
                expected_noise_norm=22.16566734)),
    "T3": (dict(epsilon=0.5, delta=1 / 9104, regularization=0.01, num_classes=6, dim=16, num_train=120,
                restart=0.4, steps=["inf"]),
           dict(sensitivity=3.0, c_sf=38.08063083, regularization=0.5298976505, c_theta=2282.257268,
                epsilon_lambda=9.860383561, extra_regularization=109.5252564, beta=0.0002624376566,
                expected_noise_norm=60966.86049)),
    "T4": (dict(epsilon=2, delta=1 / 88648, regularization=2, num_classes=3, dim=8, num_train=60,
                restart=0.2, steps=[5], loss="pseudo_huber", huber_delta=0.2),
           dict(sensitivity=5.37856, c_sf=27.42620201, regularization=2.0, c_theta=0.5359111675,
                epsilon_lambda=0.1919975978, extra_regularization=0.0, beta=0.4567805383,
                expected_noise_norm=17.51388102)),
    "T5": (dict(epsilon=1, delta=1 / 30019, regularization=0.2, num_classes=5, dim=48, num_train=4560,
                restart=0.6, steps=[0, 1, 2]),
           dict(sensitivity=0.64, c_sf=84.33868486, regularization=0.2, c_theta=1.083575452,
                epsilon_lambda=0.0004240467106, extra_regularization=0.0, beta=1.228928294,
                expected_noise_norm=39.05842207)),
    "T6": (dict(epsilon=0.5, delta=1 / 16316, regularization=0.2, num_classes=7, dim=64, num_train=140,
                restart=0.8, steps=[2]),
           dict(sensitivity=0.48, c_sf=104.3201946, regularization=0.2, c_theta=724.1496024,
                epsilon_lambda=1.201495886, extra_regularization=4.612433919, beta=0.005150040579,
                expected_noise_norm=12427.08655)),
}


def _close(got: float, want: float, digits_rel: float) -> bool:
    if want == 0.0:
        return abs(got) <= 1e-15
    return abs(got - want) <= digits_rel * abs(want)


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_digest_vectors(name):
    inputs, want = VECTORS[name]
    r = gcon_calibration(**inputs)
    for key, value in want.items():
        # the digest prints 10 significant digits: 1e-9 relative covers the printing
        assert _close(r[key], value, REL), (name, key, r[key], value)
    # the result is JSON-serialisable (the certificate embeds it)
    json.dumps(r)


def test_regularization_floors_and_constants():
    r1 = gcon_calibration(**VECTORS["T1"][0])
    r2 = gcon_calibration(**VECTORS["T2"][0])
    r4 = gcon_calibration(**VECTORS["T4"][0])
    r6 = gcon_calibration(**VECTORS["T6"][0])
    assert _close(r1["regularization_floor"], 0.03738827734, 1e-9)
    assert _close(r2["regularization_floor"], 0.003224796138, 1e-9)
    assert _close(r4["regularization_floor"], 1.365865491, 1e-9)
    assert _close(r6["regularization_floor"], 0.1987051327, 1e-9)
    c1, c2, c3 = loss_constants("msml", 7)
    assert (_close(c1, 0.1428571429, 1e-9) and _close(c2, 0.03571428571, 1e-9)
            and _close(c3, 0.01374643498, 1e-9))
    c1, c2, c3 = loss_constants("pseudo_huber", 3, 0.2)
    assert _close(c1, 0.0666666667, 1e-9) and _close(c2, 1 / 3, 1e-12) and _close(c3, 1.431083506, 1e-9)
    # digest: "d=8 -> 26.3008 at delta/c = 8.7556e-6" (= 1/(16316*7), not T4's delta/c)
    assert _close(tail_constant(1 / 16316, 7, 8), 26.3008, 1e-5)
    assert _close(tail_constant(1 / 16316, 7, 16), 39.2577, 1e-5)


def test_loss_constants_are_suprema():
    """c1, c2, c3 of App. F against a fine grid of the analytic derivatives."""
    x = np.linspace(-30, 30, 600001)
    s = 1 / (1 + np.exp(-x))
    for y in (0.0, 1.0):
        c = 4
        c1, c2, c3 = loss_constants("msml", c)
        assert np.max(np.abs(s - y)) / c <= c1 + 1e-15
        assert abs(np.max(s * (1 - s)) / c - c2) < 1e-9
        assert abs(np.max(np.abs(s * (1 - s) * (1 - 2 * s))) / c - c3) < 1e-9
    dl = 0.3
    c1, c2, c3 = loss_constants("pseudo_huber", 4, dl)
    t = x
    assert np.max(np.abs(t / (4 * np.sqrt(1 + t * t / dl**2)))) <= c1 + 1e-15
    assert abs(np.max(1 / (4 * (1 + t * t / dl**2) ** 1.5)) - c2) < 1e-12
    d3 = np.abs(-3 * t / (4 * dl**2 * (1 + t * t / dl**2) ** 2.5))
    assert abs(np.max(d3) - c3) < 1e-6 * c3


PSI_TABLE = {  # digest §2.4, rows alpha, columns m = 0, 1, 2, 5, 10, inf
    0.1: [0, 1.8, 3.42, 7.37118, 11.7237880782, 18],
    0.2: [0, 1.6, 2.88, 5.37856, 7.1410065408, 8],
    0.4: [0, 1.2, 1.92, 2.76672, 2.9818601472, 3],
    0.5: [0, 1.0, 1.5, 1.9375, 1.998046875, 2],
    0.6: [0, 0.8, 1.12, 1.31968, 1.3331935232, 1.3333333333],
    0.8: [0, 0.4, 0.48, 0.49984, 0.4999999488, 0.5],
    1.0: [0, 0, 0, 0, 0, 0],
}


@pytest.mark.parametrize("alpha", sorted(PSI_TABLE))
def test_psi_table(alpha):
    for m, want in zip([0, 1, 2, 5, 10, "inf"], PSI_TABLE[alpha]):
        got = propagation_sensitivity(alpha, [m])
        assert abs(got - want) <= 1e-9 * max(1.0, want), (alpha, m, got, want)
    assert abs(propagation_sensitivity(0.5, [0, 1, 2]) - 0.8333333333) < 1e-9
    assert propagation_sensitivity(0.3, ["inf", 3]) == pytest.approx(
        (2 * 0.7 / 0.3 + 2 * 0.7 / 0.3 * (1 - 0.7**3)) / 2, rel=1e-14)


def _identities(r):
    c, d, n1 = r["num_classes"], r["dim"], r["num_train"]
    c1, c2, c3 = r["c1"], r["c2"], r["c3"]
    eps, omega = r["epsilon"], r["budget_split"]
    lam, lp, ct, psi, beta = (r["regularization"], r["extra_regularization"], r["c_theta"],
                              r["sensitivity"], r["beta"])
    # Lambda c_theta - c1 in the cancellation-free form c c1 Psi c_sf (Lambda + c2) / denom (eq. (23))
    denom = n1 * omega * eps * lam - c * c2 * psi * r["c_sf"]
    p1_lhs = beta * n1 * c * c1 * psi * r["c_sf"] * (lam + c2) / denom
    if psi > 1e-6:
        assert p1_lhs == pytest.approx(beta * n1 * (lam * ct - c1), rel=1e-8)
    p1_rhs = max(eps - r["epsilon_lambda"], omega * eps) * r["c_sf"] / (omega * eps)
    p2 = c * d * math.log1p((2 * c2 + c3 * ct) * psi / (d * n1 * (lam + lp))) + beta * c * (c1 + c2 * ct) * psi
    p3 = stats.gamma.sf(r["c_sf"], a=d)
    return p1_lhs, p1_rhs, p2, p3


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_identities_p1_to_p4(name):
    r = gcon_calibration(**VECTORS[name][0])
    p1_lhs, p1_rhs, p2, p3 = _identities(r)
    assert p1_lhs == pytest.approx(p1_rhs, rel=1e-11)          # P1 (Lemma 9 exact identity)
    assert p1_lhs >= r["c_sf"] * (1 - 1e-13)                  # tail condition
    assert p2 <= r["epsilon"]                                  # P2 (eq. (45))
    if r["extra_regularization"] == 0.0:
        assert p2 == pytest.approx(r["epsilon"], rel=1e-12)
    assert p3 <= r["delta"] / r["num_classes"]                 # P3 (rounded up c_sf)
    assert p3 == pytest.approx(r["delta"] / r["num_classes"], rel=1e-9)
    assert (r["extra_regularization"] > 0) == (r["epsilon_lambda"] > (1 - r["budget_split"]) * r["epsilon"])  # P4
    assert r["checks"]["epsilon_spent"] <= r["epsilon"]
    assert r["checks"]["tail_probability"] <= r["delta"]


def test_warnings_raised_and_near_floor():
    r3 = gcon_calibration(**VECTORS["T3"][0])
    rules = {w["rule"] for w in r3["warnings"]}
    assert {"DPS712", "DPS713"} <= rules and r3["regularization_raised"]
    assert r3["regularization"] == pytest.approx(r3["regularization_floor"] + 1e-3, rel=1e-12)
    r6 = gcon_calibration(**VECTORS["T6"][0])
    assert {w["rule"] for w in r6["warnings"]} == {"DPS713"}
    assert not r6["regularization_raised"]
    r1 = gcon_calibration(**VECTORS["T1"][0])
    assert r1["warnings"] == []


def test_psi_zero_means_no_noise():
    r = gcon_calibration(1.0, 1e-5, 4, 8, 100, 1.0, [3], 0.5)
    assert r["beta"] == math.inf and r["sensitivity"] == 0.0 and r["extra_regularization"] == 0.0
    assert any(w["rule"] == "DPS714" for w in r["warnings"])
    r = gcon_calibration(1.0, 1e-5, 4, 8, 100, 0.5, [0, 0], 0.5)
    assert r["graph_unused"]


BASE = dict(epsilon=1.0, delta=1e-5, num_classes=7, dim=16, num_train=140, restart=0.5, steps=[2],
            regularization=0.2)


@pytest.mark.parametrize("change,rule", [
    (dict(delta=0.0), "DPS702"), (dict(delta=-1e-5), "DPS702"), (dict(delta=1.0), "DPS702"),
    (dict(delta=float("nan")), "DPS702"),
    (dict(epsilon=0.0), "DPS701"), (dict(epsilon=-1.0), "DPS701"), (dict(epsilon=float("inf")), "DPS701"),
    (dict(loss="cross_entropy"), "DPS725"), (dict(loss="hinge"), "DPS703"), (dict(loss="mse"), "DPS703"),
    (dict(loss="pseudo_huber"), "DPS704"), (dict(loss="pseudo_huber", huber_delta=0.0), "DPS704"),
    (dict(huber_delta=0.2), "DPS704"),
    (dict(restart=0.0), "DPS705"), (dict(restart=1.5), "DPS705"), (dict(restart=-0.1), "DPS705"),
    (dict(restart=float("nan")), "DPS705"),
    (dict(steps=[]), "DPS706"), (dict(steps=[-1]), "DPS706"), (dict(steps=[1.5]), "DPS706"),
    (dict(steps="two"), "DPS706"),
    (dict(regularization=0.0), "DPS707"), (dict(regularization=-0.2), "DPS707"),
    (dict(budget_split=1.0), "DPS708"), (dict(budget_split=0.0), "DPS708"),
    (dict(xi=0.0), "DPS709"),
    (dict(num_classes=1), "DPS710"), (dict(dim=0), "DPS710"), (dict(num_train=2.5), "DPS710"),
    (dict(dim=141), "DPS711"),
])
def test_named_errors(change, rule):
    with pytest.raises(GconError) as info:
        gcon_calibration(**{**BASE, **change})
    assert info.value.rule == rule
    assert info.value.hint
    assert info.value.to_diagnostic()["rule"] == rule


def test_steps_forms():
    a = gcon_calibration(**{**BASE, "steps": 2})
    b = gcon_calibration(**{**BASE, "steps": [2]})
    assert a["beta"] == b["beta"]
    c = gcon_calibration(**{**BASE, "steps": [math.inf]})
    d = gcon_calibration(**{**BASE, "steps": "inf"})
    assert c["sensitivity"] == d["sensitivity"] == pytest.approx(2.0)
    assert d["steps"] == ["inf"]


# ------------------------------------------------------------------ hypothesis properties

valid = st.fixed_dictionaries(dict(
    epsilon=st.floats(0.05, 10.0), delta=st.floats(1e-9, 1e-2), num_classes=st.integers(2, 12),
    dim=st.integers(1, 128), num_train=st.integers(128, 20000), restart=st.floats(0.05, 1.0),
    steps=st.lists(st.one_of(st.integers(0, 20), st.just("inf")), min_size=1, max_size=3),
    regularization=st.floats(1e-3, 10.0), loss=st.sampled_from(["msml", "pseudo_huber"]),
    budget_split=st.floats(0.5, 0.99)))


def _kw(p):
    p = dict(p)
    if p["loss"] == "pseudo_huber":
        p["huber_delta"] = 0.2
    return p


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid, st.floats(1.01, 4.0))
def test_noise_scale_decreases_with_epsilon(p, factor):
    p = _kw(p)
    r1 = gcon_calibration(**p)
    r2 = gcon_calibration(**{**p, "epsilon": p["epsilon"] * factor})
    assert r2["expected_noise_norm"] <= r1["expected_noise_norm"] * (1 + 1e-12)
    assert r2["c_theta"] <= r1["c_theta"] * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.01, 1.0), st.lists(st.integers(0, 50), min_size=1, max_size=4),
       st.integers(0, 3), st.floats(0.0, 0.5))
def test_psi_monotone(alpha, steps, which, dalpha):
    base = propagation_sensitivity(alpha, steps)
    more = list(steps)
    more[which % len(more)] += 1
    assert propagation_sensitivity(alpha, more) >= base - 1e-15
    inf = list(steps)
    inf[which % len(inf)] = "inf"
    assert propagation_sensitivity(alpha, inf) >= base - 1e-15
    a2 = min(1.0, alpha + dalpha)
    assert propagation_sensitivity(a2, steps) <= base * (1 + 1e-14) + 1e-15  # monotone up to rounding
    assert base <= 2 * max(steps)  # the alpha -> 0 limit (plain SGC): Psi(Z_m) -> 2m
    assert propagation_sensitivity(alpha, ["inf"]) == pytest.approx(2 * (1 - alpha) / alpha, rel=1e-14)


@settings(max_examples=150, deadline=None)
@given(valid)
def test_budget_identities_hold(p):
    r = gcon_calibration(**_kw(p))
    if r["beta"] == math.inf:
        return
    p1_lhs, p1_rhs, p2, _ = _identities(r)
    assert p2 <= r["epsilon"]
    assert p1_lhs >= r["c_sf"] * (1 - 1e-13)
    assert r["regularization"] >= r["regularization_nominal"]
    assert r["num_classes"] * r["c2"] * r["sensitivity"] * r["c_sf"] < (
        r["num_train"] * r["budget_split"] * r["epsilon"] * r["regularization"])
    assert r["checks"]["tail_probability"] <= r["delta"]


@settings(max_examples=100, deadline=None)
@given(valid, st.one_of(st.floats(-1.0, 0.0), st.floats(1.0, 5.0), st.just(float("nan"))))
def test_rejects_invalid_delta(p, bad):
    with pytest.raises(GconError) as info:
        gcon_calibration(**{**_kw(p), "delta": bad})
    assert info.value.rule == "DPS702"


@settings(max_examples=100, deadline=None)
@given(valid, st.one_of(st.floats(-5.0, 0.0), st.floats(1.0, 5.0, exclude_min=True)))
def test_rejects_invalid_restart(p, bad):
    with pytest.raises(GconError) as info:
        gcon_calibration(**{**_kw(p), "restart": bad})
    assert info.value.rule == "DPS705"


@settings(max_examples=60, deadline=None)
@given(valid, st.floats(-10.0, 0.0))
def test_rejects_nonpositive_lambda(p, bad):
    with pytest.raises(GconError) as info:
        gcon_calibration(**{**_kw(p), "regularization": bad})
    assert info.value.rule == "DPS707"


# ------------------------------------------------------------------ AMP (approximate minimiser)

@pytest.mark.parametrize("eps,delta", [(0.01, 1e-7), (0.1, 1e-6), (0.5, 1e-5), (0.9, 1e-3)])
def test_analytic_gaussian_beats_classical_and_meets_delta(eps, delta):
    sens = 3e-9
    sigma = analytic_gaussian_sigma(eps, delta, sens)
    classical = sens * math.sqrt(2 * math.log(1.25 / delta)) / eps  # Dwork & Roth Thm A.1 (eps < 1)
    assert sigma <= classical
    # Balle & Wang Thm 8 at sigma: delta(eps) <= delta, and just below sigma it is violated
    a = sens / (2 * sigma) - eps * sigma / sens
    b = -sens / (2 * sigma) - eps * sigma / sens
    assert stats.norm.cdf(a) - math.exp(eps) * stats.norm.cdf(b) <= delta
    s2 = sigma * (1 - 1e-6)
    a2, b2 = sens / (2 * s2) - eps * s2 / sens, -sens / (2 * s2) - eps * s2 / sens
    assert stats.norm.cdf(a2) - math.exp(eps) * stats.norm.cdf(b2) > delta


def test_release_calibration_composes():
    r = gcon_release_calibration(1.0, 1e-5, 7, 7, 2708, 0.4, [1], 0.2, amp_fraction=0.01, grad_tol=1e-9)
    op, amp = r["objective_perturbation"], r["amp"]
    assert op["epsilon"] + amp["epsilon"] == pytest.approx(1.0, rel=1e-15)
    assert op["delta"] + amp["delta"] == pytest.approx(1e-5, rel=1e-15)
    assert amp["sensitivity"] == pytest.approx(2e-9 / op["strong_convexity"], rel=1e-15)
    assert amp["sigma"] < 1e-5  # negligible next to Theta ~ O(1)
    with pytest.raises(GconError) as info:
        gcon_release_calibration(1.0, 1e-5, 7, 7, 2708, 0.4, [1], 0.2, amp_fraction=0.0)
    assert info.value.rule == "DPS720"
    with pytest.raises(GconError) as info:
        gcon_release_calibration(1.0, 1e-5, 7, 7, 2708, 0.4, [1], 0.2, grad_tol=1e-18)
    assert info.value.rule == "DPS720"
    a = amp_calibration(0.01, 1e-7, 1e-9, 0.5)
    assert a["distance_bound"] == pytest.approx(2e-9)


def test_calibration_is_cheap():
    from tests.guards import cpu_budget

    with cpu_budget(10, "200 calibrations"):  # typically well under 1 s; the speed is benchmarks/bench_gcon.py
        for _ in range(200):
            gcon_calibration(**VECTORS["T2"][0])
