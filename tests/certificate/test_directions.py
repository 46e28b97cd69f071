"""Direction-aware comparison: a recorded bound may be rounded up, never down; everything else is equal."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpspec
from dpspec.certificate.verify import EXACT, REL_TOL, UP, direction, up_problem
from tests.fuzz.certmut import _num_paths


def verdict(text):
    rep = dpspec.verify(text, raise_on_error=False)
    assert "internal error" not in " ".join(rep.problems)
    return rep


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@given(recomputed=finite, recorded=finite)
def test_up_accepts_exactly_the_rounded_up_interval(recomputed, recorded):
    ok = up_problem(recorded, recomputed) is None
    assert ok == (recomputed <= recorded <= recomputed + REL_TOL * abs(recomputed))


@given(x=st.floats(min_value=1e-300, max_value=1e300))
def test_one_ulp_below_is_refused_and_one_ulp_above_accepted(x):
    assert "BELOW" in up_problem(math.nextafter(x, 0), x)
    assert up_problem(math.nextafter(x, math.inf), x) is None


@pytest.mark.parametrize("path,expected", [
    (("guarantee", "epsilon"), UP), (("guarantee", "rdp_epsilons", 3), UP), (("guarantee", "dp", 2, "epsilon"), UP),
    (("guarantee", "dp", 2, "delta"), UP), (("numerics", "abs_error_bound"), UP),
    (("mechanism", "parameters", "sigma"), UP), (("mechanism", "parameters", "noise_multiplier"), UP),
    (("mechanism", "parameters", "epsilon_eq3"), UP), (("sensitivity", "deltas", 0), UP),
    (("mechanism", "parameters", "sample_rate"), EXACT), (("mechanism", "parameters", "steps"), EXACT),
    (("mechanism", "parameters", "clip_norm"), EXACT), (("guarantee", "rdp_alphas", 3), EXACT),
    (("guarantee", "alpha"), EXACT), (("guarantee", "target", "epsilon"), EXACT),
    (("sensitivity", "weights", 0), EXACT), (("formulas", 0, "variables", "sigma"), EXACT),
])
def test_direction_table(path, expected):
    assert direction(path) == expected


def test_formula_values_are_bounds_and_their_orders_exact():
    checks = {"rdp_gaussian": "upper_bound", "beta_eq18": "close"}
    names = ["rdp_gaussian", "beta_eq18"]
    assert direction(("formulas", 0, "checks", 1, 1), checks, names) == UP
    assert direction(("formulas", 0, "checks", 1, 0), checks, names) == EXACT
    assert direction(("formulas", 1, "value"), checks, names) == EXACT


def _edit(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


UP_EDITS = {
    "gaussian_release": [("results", 0, "guarantee", "epsilon"), ("results", 0, "guarantee", "rdp_epsilons", 0),
                         ("results", 0, "guarantee", "dp", 1, "epsilon"), ("results", 0, "mechanism", "parameters", "sigma"),
                         ("results", 0, "numerics", "abs_error_bound")],
    "composition": [("results", 3, "guarantee", "epsilon"), ("results", 2, "guarantee", "rdp_epsilons", 40),
                    ("results", 2, "mechanism", "parameters", "noise_multiplier")],
    "groups_swm": [("results", 0, "mechanism", "parameters", "sigma2"),
                   ("results", 1, "guarantee", "epsilon")],
    "digits_srpp": [("results", 0, "mechanism", "parameters", "h_total"), ("results", 1, "guarantee", "epsilon")],
}


@pytest.mark.parametrize("name,path", [(n, p) for n, ps in UP_EDITS.items() for p in ps],
                         ids=lambda x: x if isinstance(x, str) else ".".join(map(str, x[2:])))
def test_a_bound_may_be_rounded_up_but_never_down(doc, resealed, name, path):
    d = doc(name)
    node = d
    for k in path:
        node = node[k]
    value = node
    assert value > 0
    _edit(d, path, math.nextafter(value, 0))                        # one ulp below
    rep = verdict(resealed(d))
    assert not rep.ok and any("BELOW" in p for p in rep.problems), rep.problems
    _edit(d, path, value * (1 - 1e-12))                             # within the old two-sided tolerance
    assert not verdict(resealed(d)).ok
    _edit(d, path, value * (1 + 1e-12))                             # rounded up: a true, slightly weaker claim
    rep = verdict(resealed(d))
    assert rep.ok, rep.problems
    _edit(d, path, value * (1 + 1e-6))                              # beyond rounding: a misstatement
    rep = verdict(resealed(d))
    assert not rep.ok and any("more than rounding" in p for p in rep.problems)


def test_every_other_number_must_be_equal(doc, resealed):
    """One ulp up or down on any number that is not a bound (sampled across a certificate) fails."""
    base = doc("gen_two_releases")
    paths = [p for p in _num_paths(base) if p[0] == "results" and direction(p[2:]) == EXACT
             and isinstance(_get(base, p), float) and _get(base, p) != 0 and p[2] != "formulas"]
    assert len(paths) > 20
    for p in paths[::5]:
        d = json.loads(json.dumps(base))
        _edit(d, p, math.nextafter(_get(base, p), math.inf))
        rep = verdict(resealed(d))
        assert not rep.ok, p


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def test_a_stated_error_bound_may_not_shrink(doc, resealed):
    d = doc("composition")
    for r in d["results"]:
        r["numerics"]["abs_error_bound"] /= 2
    rep = verdict(resealed(d))
    assert not rep.ok and sum("abs_error_bound" in p for p in rep.problems) >= 3


def test_a_recorded_sensitivity_may_not_be_lowered_nor_raised_past_its_epsilon(doc, resealed):
    d = doc("groups_swm")
    deltas = d["results"][0]["sensitivity"]["deltas"]
    i = max(range(len(deltas)), key=deltas.__getitem__)
    value = deltas[i]
    deltas[i] = math.nextafter(value, 0)
    rep = verdict(resealed(d))
    assert not rep.ok and any("BELOW" in p for p in rep.problems)
    deltas[i] = value * 1.01  # a larger Δ no longer supports the recorded ε (independent mpmath check)
    assert not verdict(resealed(d)).ok
