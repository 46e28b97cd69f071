"""`dpspec audit` for the Wasserstein mechanism: the certified noise passes the distinguishing test, a tenth
of it is caught (the test has power)."""

from __future__ import annotations

import dataclasses

import pytest

import dpspec
from dpspec.audit import audit

GROUPS = """
scenario s {
  data   synthetic(generator = secret_groups, size = 90, seed = 1)
  secret group in {A, B, C}
  prior  groups(prior = uniform)
}
release r {
  mechanism wasserstein
  output    aggregate
  query     mean(x1, x2, bounds = [0, 10])
  guarantee pufferfish(epsilon = 1)
}
"""

SHARE = """
scenario s {
  data   synthetic(generator = markov_chain, size = 60, seed = 2)
  secret share = fraction(where = state == 1) in {0.3, 0.5}
  prior  empirical
}
release r {
  protect   s
  mechanism wasserstein
  output    aggregate
  query     mean(state, bounds = [0, 1])
  guarantee pufferfish(epsilon = 1)
}
"""


@pytest.mark.parametrize("text", [GROUPS, SHARE], ids=["wasserstein", "proportion_secret"])
def test_certified_noise_passes_and_a_tenth_of_it_is_caught(text):
    c = dpspec.compile(dpspec.loads(text, name="t.dps"))
    ok = audit(c, trials=3000, seed=1, runtime=False)
    assert ok.ok and ok.results[0].status == "pass"
    mech = c.mechanisms["r"]
    weak = dataclasses.replace(mech, scales=tuple(s / 10 for s in mech.scales))
    bad = audit(c, mechanisms={"r": weak}, trials=3000, seed=1, runtime=False)
    assert not bad.ok and bad.results[0].status == "VIOLATION"
