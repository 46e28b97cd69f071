"""`dpspec verify` of a relational certificate evaluates once at the recorded σ instead of repeating
the σ search (the expensive part); a recorded σ below what the target needs still fails."""

import json

import pytest

import dpspec
from dpspec.accounting import relational
from dpspec.certificate.model import Certificate, content_hash
from dpspec.families.relational_dpsgd.rules import spec as rel_spec


@pytest.fixture(scope="module")
def certificate():
    return dpspec.compile(rel_spec()).certificate  # calibrated: the search runs here, once


def test_verify_does_not_search_again(certificate, monkeypatch):
    r = certificate.results[0]
    assert r.mechanism.name == "relational_dpsgd" and r.mechanism.calibrated

    def no_search(*a, **k):
        raise AssertionError("verify repeated the σ search")

    monkeypatch.setattr(relational, "calibrate_relational_sigma", no_search)
    assert dpspec.verify(certificate).ok


def test_compile_still_searches(monkeypatch):
    calls = []
    real = relational.calibrate_relational_sigma
    monkeypatch.setattr(relational, "calibrate_relational_sigma", lambda *a, **k: calls.append(1) or real(*a, **k))
    dpspec.compile(rel_spec())
    assert calls  # the hint exists only inside verify


def test_a_smaller_recorded_sigma_fails(certificate):
    d = json.loads(certificate.to_json())
    p = d["results"][0]["mechanism"]["parameters"]
    p["noise_multiplier"] = p["noise_multiplier"] * 0.5
    d["content_hash"] = content_hash(Certificate.model_validate(d))
    rep = dpspec.verify(json.dumps(d), raise_on_error=False)
    assert not rep.ok and any("DPS201" in x or "BELOW" in x for x in rep.problems), rep.problems


@pytest.mark.parametrize("sigma", [1e-300, 1e300])
def test_a_recorded_sigma_outside_the_range_never_reaches_the_accountant(certificate, sigma):
    d = json.loads(certificate.to_json())
    d["results"][0]["mechanism"]["parameters"]["noise_multiplier"] = sigma
    d["content_hash"] = content_hash(Certificate.model_validate(d))
    rep = dpspec.verify(json.dumps(d), raise_on_error=False)
    assert not rep.ok and any("DPS205" in x for x in rep.problems), rep.problems
