"""GCON on one's own graph: ``dpspec.compile(spec, data={"g": {"edges": E, "features": X, "labels": y}})``."""

from __future__ import annotations

import numpy as np
import pytest

import dpspec
from tests.families.gcon.gcon_testlib import sbm

SPEC = """privacy links { unit edge  data dataset(g) }
train clf {
  mechanism      gcon
  propagation    appr(restart = 0.6, steps = [2])
  regularization 0.2
  encoder        none
  split          planetoid(per_class = 10, seed = 0)
  guarantee      dp(epsilon = 2, delta = 1e-4)
}
"""


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(0)
    n = 1200  # the Planetoid split keeps 500 validation and up to 1000 test nodes
    labels, edges = sbm(n, 3, 0.01, 0.001, rng)
    features = rng.normal(size=(n, 8)) + 2 * np.eye(3)[labels] @ rng.normal(size=(3, 8))
    return {"edges": edges, "features": features, "labels": labels}


def test_dict_form_compiles_trains_on_the_bound_graph_and_verifies(graph):
    compiled = dpspec.compile(SPEC, data={"g": graph})
    params = compiled.certificate.results[0].mechanism.parameters
    assert params["nodes"] == 1200 and params["classes"] == 3
    run = compiled.mechanism.train(rng=0)  # no dataset passed: the graph bound at compile time
    assert run.result.calibration["beta"] == params["beta"]
    assert run.graph.num_edges == len(graph["edges"])
    assert run.test_accuracy() > 0.5  # three balanced classes: chance is 1/3
    assert dpspec.verify(compiled.certificate, data={"g": graph}, raise_on_error=False).ok


def _compile_error(graph) -> str:
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(SPEC, data={"g": graph})
    d = e.value.diagnostics[0]
    assert d.rule == "DPS418" and d.span is not None
    return d.message


@pytest.mark.parametrize("edit, message", [
    (lambda g: g.pop("labels"), "needs `labels`"),
    (lambda g: g.pop("features"), "needs `features`"),
    (lambda g: g.update(edges=np.vstack([g["edges"], [[3, 3]]])), "1 self-loops"),
    (lambda g: g.update(edges=np.vstack([g["edges"], g["edges"][:2, ::-1]])), "2 reversed repeats"),
    (lambda g: g.update(edges=np.vstack([g["edges"], [[0, 5000]]])), "outside 0..n-1"),
    (lambda g: g.update(edges=g["edges"].astype(float)), "integer array"),
    (lambda g: g.update(features=g["features"][:10]), "10 rows of features"),
])
def test_bad_graphs_are_located_errors_never_silently_repaired(graph, edit, message):
    g = dict(graph)
    edit(g)
    assert message in _compile_error(g)
