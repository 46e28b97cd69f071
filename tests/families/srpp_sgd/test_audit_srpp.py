"""SRPP-SGD audit: the real optimizer on the two label-flip worlds never beats the certificate, a
run with less noise than certified is flagged, and sa-SRPP (an on-average notion) is skipped."""

import pytest

import dpspec
from dpspec.audit import audit
from dpspec.audit.mutations import mutants

pytest.importorskip("torch")

SPEC = """scenario prevalence {{ secret share in {{low, high}} }}
train model {{
  protect       prevalence
  mechanism     srpp_sgd
  dataset_size  20
  discrepancy   label_flip(differing = 1)
  sampling      {sampling}
  clipping      flat(C = 1.0)
  steps         4
  learning_rate 0.5
  momentum      0.5
  noise_units   {units}
  guarantee     {g}
}}
"""


def _compiled(sampling="full_batch", units="gradient", g="ave_srpp(alpha = 8, epsilon = 0.5)"):
    return dpspec.compile(SPEC.format(sampling=sampling, units=units, g=g))


@pytest.mark.slow  # tens of seconds on two cores
@pytest.mark.parametrize("units", ["gradient", "parameter"])
def test_real_mechanism_passes_and_noise_scaled_mutant_is_flagged(units):
    c = _compiled(units=units)
    r = audit(c, runtime=False, seed=0, trials=500).results[0]
    assert r.status == "pass" and r.epsilon_lower <= r.epsilon_certified
    bad = mutants(c, "model")["noise_scaled"]
    m = audit(c, runtime=False, mechanisms={"model": bad}, seed=1, trials=500).results[0]
    assert m.violation, (m.epsilon_lower, m.epsilon_certified)
    assert m.epsilon_certified == r.epsilon_certified  # the claim comes from the certificate, not the object


def test_sa_certificates_are_skipped_with_the_reason():
    c = _compiled(sampling="without_replacement(batch_size = 5)", g="sa_ave_srpp(alpha = 8, epsilon = 0.5)")
    r = audit(c, runtime=False, seed=0, trials=100).results[0]
    assert r.status == "skipped" and "on-average" in r.note
