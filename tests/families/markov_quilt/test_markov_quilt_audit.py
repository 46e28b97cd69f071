"""`dpspec audit` for the Markov Quilt Mechanism: the certified noise passes the distinguishing test, a tenth
of it is caught (the test has power)."""

from __future__ import annotations

import dataclasses

import dpspec
from dpspec.audit import audit

CHAIN = """
scenario a {
  data   synthetic(generator = markov_chain, size = 60, seed = 3)
  secret state in {0, 1}
  prior  markov(states = [0, 1], transitions in [[[0.8, 0.2], [0.3, 0.7]]])
}
release r {
  protect   a
  mechanism markov_quilt
  output    aggregate
  query     mean(state, bounds = [0, 1])
  guarantee pufferfish(epsilon = 1)
}
"""


def test_certified_noise_passes_and_a_tenth_of_it_is_caught():
    c = dpspec.compile(dpspec.loads(CHAIN, name="t.dps"))
    ok = audit(c, trials=3000, seed=1, runtime=False)
    assert ok.ok and ok.results[0].status == "pass"
    mech = c.mechanisms["r"]
    weak = dataclasses.replace(mech, scales=tuple(s / 10 for s in mech.scales))
    bad = audit(c, mechanisms={"r": weak}, trials=3000, seed=1, runtime=False)
    assert not bad.ok and bad.results[0].status == "VIOLATION"
