"""GCON specs: compiled calibration equals the library's, verify passes, the runtime honours it."""

import pytest

import dpspec
from dpspec.accounting.gcon import gcon_release_calibration
from tests.conftest import SPECS

SPEC = """privacy links {{ unit edge  data synthetic(generator = sbm_graph, size = 800, seed = 2) }}
train model {{
  mechanism      gcon
  propagation    appr(restart = {restart}, steps = {steps})
  loss           {loss}
  regularization {lam}
  encoder        mlp(hidden = 16, epochs = 60)
  pseudo_labels  {pl}
  guarantee      dp(epsilon = {eps}, delta = 1e-4)
}}
"""


@pytest.mark.parametrize("restart,steps,loss,lam,pl,eps", [
    (0.6, "[2, inf]", "msml", 0.2, "true", 1.0),
    (0.3, "[1]", "pseudo_huber(delta = 0.5)", 0.5, "false", 4.0),
    (0.9, "[inf]", "msml", 0.05, "true", 0.5),
])
def test_compiled_calibration_matches_library(restart, steps, loss, lam, pl, eps):
    c = dpspec.compile(SPEC.format(restart=restart, steps=steps, loss=loss, lam=lam, pl=pl, eps=eps))
    r = c.certificate.results[0]
    p = r.mechanism.parameters
    ref = gcon_release_calibration(eps, 1e-4, p["classes"], p["dimension"], p["loss_nodes"], restart,
                                   [s.strip() if s.strip() == "inf" else int(s) for s in p["steps"].split(",")],
                                   lam, loss=p["loss"], huber_delta=0.5 if "huber" in loss else None,
                                   amp_fraction=0.01, grad_tol=1e-9)
    assert p["beta"] == ref["objective_perturbation"]["beta"]
    assert p["amp_sigma"] == ref["amp"]["sigma"]
    assert r.guarantee.epsilon == pytest.approx(eps) and r.guarantee.epsilon <= eps * (1 + 1e-12)
    assert p["loss_nodes"] == (800 if pl == "true" else 80)  # planetoid split: 20 per class, 4 classes
    rep = dpspec.verify(c.certificate)
    assert rep.ok and any("beta_eq18" in x for x in rep.checks)


def test_runtime_training_learns_and_matches_the_certificate():
    c = dpspec.compile(SPEC.format(restart=0.6, steps="[2, inf]", loss="msml", lam=0.2, pl="true", eps=2.0))
    run = c.mechanism.train(rng=1)
    assert run.result.calibration["beta"] == c.certificate.results[0].mechanism.parameters["beta"]
    assert run.test_accuracy() > 0.4  # 4 balanced classes: chance is 0.25


def test_edge_unit_required_and_dp_only():
    spec = dpspec.loads("privacy p { unit record }\ntrain t { mechanism gcon  propagation appr(restart = 0.5, steps = [2])"
                        "  regularization 1  guarantee rdp(alpha = 2, epsilon = 1) }")
    rules = {d.rule for d in spec.diagnostics}
    assert {"DPS120", "DPS121"} <= rules


def test_restart_out_of_range_is_located():
    spec = dpspec.loads(SPEC.format(restart=1.5, steps="[2]", loss="msml", lam=0.2, pl="true", eps=1.0))
    d = [d for d in spec.diagnostics if d.rule == "DPS105"][0]
    assert "restart" in d.message and d.span.line == 4


def test_cora_spec_with_real_data():
    from dpspec.data import DataNotFoundError, data_root

    try:
        data_root()
    except DataNotFoundError:
        pytest.skip("the shared data folder is not available")
    c = dpspec.compile(dpspec.load(SPECS / "cora_gcon.dps"))
    p = c.certificate.results[0].mechanism.parameters
    assert p["nodes"] == 2708 and p["classes"] == 7 and p["loss_nodes"] == 2708
