"""Relational DP-SGD audit: removing the highest-degree node never beats the certificate; less noise
than certified and unclipped tuples are flagged."""

import pytest

import dpspec
from dpspec.audit import audit
from dpspec.audit.mutations import mutants
from dpspec.families.relational_dpsgd.rules import spec

TEXT = (spec(negative="without_replacement(per_positive = 1)", positive="poisson(expected_batch = 200)")
        .replace("  guarantee  dp(epsilon = 4, delta = 1e-5)", "  noise_multiplier 3.0\n  guarantee  dp(delta = 1e-5)")
        .replace("steps      20", "steps      4"))


@pytest.fixture(scope="module")
def compiled():
    return dpspec.compile(TEXT)


def test_real_mechanism_passes(compiled):
    r = audit(compiled, runtime=False, seed=0, trials=2000).results[0]
    assert r.status == "pass" and r.epsilon_lower <= r.epsilon_certified
    assert "without node" in r.neighbours


@pytest.mark.parametrize("kind", ["noise_scaled", "no_clipping"])
def test_mutants_are_flagged(compiled, kind):
    bad = mutants(compiled, "links")[kind]
    r = audit(compiled, runtime=False, mechanisms={"links": bad}, seed=1, trials=2000).results[0]
    assert r.violation, (kind, r.epsilon_lower, r.epsilon_certified)


def test_prefix_claim_uses_the_prefix_accountant(compiled):
    r = audit(compiled, runtime=False, seed=0, trials=200, options={"relational_dpsgd": {"steps": 2}}).results[0]
    assert r.epsilon_certified < r.epsilon_headline and "first 2 of 4" in r.note
