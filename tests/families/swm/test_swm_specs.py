"""Pufferfish scenarios and SWM releases compiled from specs, checked against direct library calls."""

import numpy as np
import pytest

import dpspec
from dpspec import pufferfish as pf
from dpspec.accounting import swm as S
from dpspec.data.synthetic import generate
from tests.conftest import SPECS

SPEC = """scenario s {{
  data   synthetic(generator = secret_groups, size = 2000, seed = 4)
  secret group in {{A, B, C}}
  prior  {prior}
}}
release r {{
  mechanism swm
  query     mean(x1, x3, bounds = [0, 10])
  slices    {slices}
  guarantee {g}
}}
"""


def direct(prior="empirical", alpha=4.0, eps=1.0, flavour="ave", profile=None):
    t = generate("secret_groups", 2000, seed=4)
    X, lab = t.matrix(["x1", "x3"]), t.column("group")
    world = {"empirical": pf.EmpiricalWorld(X, lab, secret_values=["A", "B", "C"]),
             "groups": pf.DeterministicWorld.from_groups(X, lab, secret_values=["A", "B", "C"])}[prior]
    q = pf.Mean([0, 1], [0, 0], [10, 10])
    profile = profile or pf.axes_profile(2)
    return pf.calibrate(pf.Scenario([world]), q, profile, alpha=alpha, epsilon=eps, flavour=flavour,
                        aggregation="per_instance")


@pytest.mark.parametrize("prior", ["empirical", "groups"])
@pytest.mark.parametrize("g,flavour", [("ave_srpp(alpha = 4, epsilon = 1)", "ave"),
                                       ("joint_srpp(alpha = 4, epsilon = 1)", "joint_exact")])
def test_spec_matches_direct_calibration(prior, g, flavour):
    c = dpspec.compile(SPEC.format(prior=prior, slices="axes", g=g))
    r = c.certificate.results[0]
    ref = direct(prior, flavour=flavour)
    assert r.mechanism.parameters["sigma2"] == pytest.approx(ref.sigma2, rel=1e-12)
    assert r.guarantee.epsilon <= 1.0
    assert r.sensitivity.deltas == pytest.approx(list(ref.deltas), rel=1e-12)
    assert r.notion.name == ("ave_srpp" if flavour == "ave" else "joint_srpp")
    assert "not (ε, δ)-DP" in r.guarantee.pairs_notion
    assert dpspec.verify(c.certificate).ok


def test_explicit_directions_are_normalised_and_weighted():
    c = dpspec.compile(SPEC.format(prior="empirical", slices="directions(vectors = [[2, 0], [1, 1]], weights = [0.25, 0.75])",
                                   g="ave_srpp(alpha = 2, epsilon = 0.5)"))
    r = c.certificate.results[0]
    ref = direct(alpha=2, eps=0.5, profile=pf.explicit_profile(np.array([[1, 0], [1, 1]]) / np.array([[1], [2 ** 0.5]]),
                                                               [0.25, 0.75]))
    assert r.mechanism.parameters["sigma2"] == pytest.approx(ref.sigma2, rel=1e-9)


def test_given_noise_reports_epsilon():
    c = dpspec.compile(SPEC.format(prior="empirical", slices="axes", g="ave_srpp(alpha = 4)").replace(
        "  guarantee", "  noise     gaussian(sigma = 2.5)\n  guarantee"))
    r = c.certificate.results[0]
    ref = direct()
    expect = S.swm_epsilon(6.25, ref.calibration_deltas, ref.weights, 4.0, "ave")
    assert r.guarantee.epsilon == pytest.approx(expect, rel=1e-12)
    assert not r.mechanism.calibrated


def test_joint_is_never_below_ave_and_static_curve_is_monotone():
    a = dpspec.compile(SPEC.format(prior="empirical", slices="sphere(m = 32, seed = 1)", g="ave_srpp(alpha = 4, epsilon = 1)"))
    j = dpspec.compile(SPEC.format(prior="empirical", slices="sphere(m = 32, seed = 1)", g="joint_srpp(alpha = 4, epsilon = 1)"))
    sa = a.certificate.results[0].mechanism.parameters["sigma2"]
    sj = j.certificate.results[0].mechanism.parameters["sigma2"]
    assert sj >= sa
    for c in (a, j):
        e = c.certificate.results[0].guarantee.rdp_epsilons
        assert all(y >= x for x, y in zip(e, e[1:]))


def test_monte_carlo_reading_is_labelled_pac():
    c = dpspec.compile(SPEC.format(prior="groups", slices="sphere(m = 32, seed = 1, reading = monte_carlo)",
                                   g="joint_srpp(alpha = 4, epsilon = 1, gamma = 0.05)"))
    r = c.certificate.results[0]
    assert r.guarantee.reading.startswith("PAC") or "Δ0" in r.guarantee.reading or "exact for every" in r.guarantee.reading
    assert r.mechanism.parameters["gamma"] == 0.05


def test_sampler_world_with_bounds_compiles():
    text = ('scenario s { secret group in {A, B}  prior sampler("dpspec.pufferfish.examples:draw_groups", samples = 300) }\n'
            'release r { mechanism swm  query callable(target = "dpspec.pufferfish.examples:column_means", '
            'dimension = 2, bounds = [0, 10])  slices axes  guarantee ave_srpp(alpha = 4, epsilon = 1, gamma = 0.05) }')
    c = dpspec.compile(text)
    r = c.certificate.results[0]
    assert "PAC" in r.guarantee.reading and r.sensitivity.estimator == "dkw"


def test_runtime_release_uses_the_certified_sigma():
    c = dpspec.compile(SPEC.format(prior="groups", slices="axes", g="ave_srpp(alpha = 4, epsilon = 1)"))
    mech = c.mechanism
    t = generate("secret_groups", 2000, seed=4)
    outs = np.array([mech.simulate(t, rng=i) for i in range(4000)])
    true = mech.mechanism.query(t.matrix(["x1", "x3"]))
    sd = (outs - true).std(axis=0)
    assert sd == pytest.approx([mech.sigma] * 2, rel=0.05)


def test_bound_dataset_and_verify_with_data():
    t = generate("secret_groups", 1500, seed=9)
    text = SPEC.format(prior="empirical", slices="axes", g="ave_srpp(alpha = 4, epsilon = 1)").replace(
        "synthetic(generator = secret_groups, size = 2000, seed = 4)", "dataset(people)")
    c = dpspec.compile(text, data={"people": {k: t.column(k) for k in t.columns}})
    assert dpspec.verify(c.certificate, data={"people": {k: t.column(k) for k in t.columns}}).ok
    rep = dpspec.verify(c.certificate, raise_on_error=False)
    assert not rep.ok and "people" in " ".join(rep.problems)
    other = generate("secret_groups", 1500, seed=10)
    rep = dpspec.verify(c.certificate, data={"people": {k: other.column(k) for k in other.columns}},
                        raise_on_error=False)
    assert not rep.ok and any("data_sha256" in p for p in rep.problems)


@pytest.mark.parametrize("name", ["adult_race_swm.dps"])
def test_real_data_spec(name):
    from dpspec.data import DataNotFoundError, data_root

    try:
        data_root()
    except DataNotFoundError:
        pytest.skip("the shared data folder is not available")
    c = dpspec.compile(dpspec.load(SPECS / name))
    r = c.certificate.results[0]
    assert r.sensitivity.records == 30162  # adult.data after dropping rows with '?'
    assert set(r.sensitivity.secrets) == {"White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"}
    assert r.guarantee.epsilon <= 1.0
