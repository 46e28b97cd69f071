"""GCON is one-shot: its ledger covers one release, says so, and refuses a second one or another graph."""

import dataclasses

import pytest

import dpspec
from dpspec.mechanisms.ledger import BudgetExceededError, DataMismatchError

SPEC = """
privacy links { unit edge  data synthetic(generator = sbm_graph, size = 300, seed = 1) }
train clf {
  mechanism      gcon
  propagation    appr(restart = 0.6, steps = [2])
  regularization 0.2
  encoder        mlp(hidden = 16, epochs = 30, seed = 0)
  split          planetoid(per_class = 5, seed = 0)
  guarantee      dp(epsilon = 1, delta = 1e-4)
}
"""


def test_one_release_then_refusal():
    c = dpspec.compile(SPEC)
    mech, rec = c.mechanism, c.certificate.results[0]
    before = mech.privacy_spent()
    assert before.epsilon == 0.0 and before.steps == 0 and not before.exact_for_run
    mech.train(rng=0)
    after = mech.privacy_spent()
    assert after.epsilon == rec.guarantee.epsilon and after.delta == rec.guarantee.delta
    assert after.budget_steps == 1 and not after.exact_for_run and "one-shot" in after.note
    with pytest.raises(BudgetExceededError, match="covers 1 release"):
        mech.train(rng=1)
    with pytest.raises(ValueError, match="δ ≥"):
        mech.privacy_spent(1e-6)


def test_another_graph_is_refused_before_any_noise():
    from dpspec.data.synthetic import generate_graph

    mech = dpspec.compile(SPEC).mechanism
    ds = generate_graph("sbm_graph", 300, 1)
    labels = ds.labels.copy()
    labels[:40] = len(ds.label_names)  # one class more: another calibration (β depends on the classes)
    other = dataclasses.replace(ds, labels=labels, label_names=list(ds.label_names) + ["extra"])
    with pytest.raises(DataMismatchError, match="not the graph the certificate was compiled for"):
        mech.train(other, rng=0)
    assert mech.ledger.steps_taken == 0
