"""Review of issue 13 ("what runs is what was certified"): one independent reproduction per bullet,
through the public API and the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import dpspec
from dpspec.families.relational_dpsgd.rules import spec as rel_spec
from dpspec.mechanisms.ledger import BudgetExceededError, CapExceededError, DataMismatchError

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]


def rules(text):
    try:
        dpspec.compile(text)
    except dpspec.SpecError as e:
        return {d.rule for d in e.diagnostics}, e
    return set(), None


RELEASE = """privacy people {{ unit record  data synthetic(generator = two_blobs, size = 50, seed = 1) }}
release r {{
  mechanism gaussian
  query     sum({col}, bounds = [0, 99])
  {extra}
  guarantee dp(epsilon = 1, delta = 1e-6)
}}
"""


def test_b1_declared_sensitivity_below_derived_is_dps140():
    got, e = rules(RELEASE.format(col="x1", extra="sensitivity 1.0"))
    assert got == {"DPS140"} and e.diagnostics[0].span is not None


def test_b2_release_evaluates_on_bound_data_and_clamps():
    got, _ = rules(RELEASE.format(col="x_1", extra=""))
    assert got == {"DPS416"}
    got, _ = rules(RELEASE.format(col="x1", extra="").replace(
        "synthetic(generator = two_blobs, size = 50, seed = 1)", 'csv("no/such.csv")'))
    assert got == {"DPS419"}
    m = dpspec.compile(RELEASE.format(col="x1", extra="")).mechanism
    out = m.release({"x1": np.array([1000.0, -5.0, 3.0])})
    r = out.report
    assert r.rows == 3 and r.clamped == 2 and r.data_fingerprint.startswith("sha256:")


DPSGD = """privacy people {{ unit record{size} }}
train model {{
  protect people
  mechanism dpsgd
  sampling {sampling}
  clipping flat(C = 1.0)
  steps {steps}
  guarantee dp(epsilon = 2, delta = 1e-5)
}}
"""


@pytest.mark.parametrize("sampling", ["poisson(rate = 0.01)", "full_batch"])
def test_b3_data_dependent_normaliser_is_dps160(sampling):
    got, _ = rules(DPSGD.format(size="", sampling=sampling, steps=10))
    assert "DPS160" in got


def test_b4_nonfinite_example_zeroed_dpsgd():
    m = dpspec.compile(DPSGD.format(size=" dataset_size 20", sampling="full_batch", steps=3)).mechanism
    X = torch.randn(20, 3, generator=torch.Generator().manual_seed(0))
    X[4] = float("inf")
    y = torch.zeros(20, dtype=torch.long)
    lin = torch.nn.Linear(3, 2)
    rep = m.train(lin, X, y, seed=0)
    assert torch.isfinite(lin.weight).all() and len(rep.batch_sizes) == 3


def test_b5_caps_and_step_counts():
    m = dpspec.compile(DPSGD.format(size=" dataset_size 1000", sampling="poisson(rate = 0.01)",
                                    steps=337)).mechanism
    with pytest.raises(BudgetExceededError):
        m.batches(1000, np.random.default_rng(0), steps=1000)
    rel = dpspec.compile(rel_spec().replace("steps      20", "steps      10")).mechanism
    with pytest.raises(BudgetExceededError):
        rel.trainer(seed=0).train(50)
    srpp = dpspec.compile(dpspec.load(str(ROOT / "specs" / "digits_srpp.dps"))).mechanism["classifier"]
    opt = srpp.optimizer(torch.nn.Linear(64, 10), seed=0)
    X, y = torch.randn(1400, 64), torch.randint(0, 10, (1400,))
    copies = np.zeros(200, dtype=np.int64)
    with pytest.raises(CapExceededError):
        opt.step(X[copies], y[copies], copies)


def test_b6_relational_wording_and_srpp_discrepancy_composition():
    c = dpspec.compile(rel_spec())
    rec = c.certificate.results[0]
    assert "after degree capping" in rec.protected.description
    assert any(a.id == "scope_original_graph" and "capped training graph" in a.statement for a in rec.assumptions)
    two = ("scenario s { secret share in {low, high} }\n" + "".join(
        f"train {n} {{ protect s  mechanism srpp_sgd  dataset_size 60  discrepancy label_flip(differing = {k})\n"
        "  sampling without_replacement(batch_size = 10)  clipping flat(C = 1.0)  steps 4  learning_rate 0.2\n"
        "  guarantee ave_srpp(alpha = 8, epsilon = 2) }\n" for n, k in (("a", 3), ("b", 5)))
        + "compose both { parts [a, b]  guarantee ave_srpp(alpha = 8) }\n")
    got, _ = rules(two)
    assert "DPS143" in got


def test_b7_privacy_spent_run_cert_and_resume(tmp_path):
    c = dpspec.compile(DPSGD.format(size=" dataset_size 20", sampling="poisson(rate = 0.25)", steps=8))
    m = c.mechanism
    X, y = torch.zeros(20, 3), torch.zeros(20, dtype=torch.long)
    m.train(torch.nn.Linear(3, 2), X, y, seed=0, steps=3)
    assert 0 < m.privacy_spent().epsilon < c.certificate.results[0].guarantee.dp[0].epsilon
    cert = tmp_path / "c.json"
    cert.write_text(c.certificate.model_dump_json(), encoding="utf-8")
    state = tmp_path / "l.json"
    state.write_text(json.dumps(m.ledger_state()), encoding="utf-8")
    run = tmp_path / "run.json"
    cli = [sys.executable, "-m", "dpspec"]
    r = subprocess.run(cli + ["run-cert", str(cert), "--ledger", str(state), "--embed", "-o", str(run)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cli + ["verify", str(run)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    m2 = dpspec.compile(DPSGD.format(size=" dataset_size 20", sampling="poisson(rate = 0.25)", steps=8)).mechanism
    m2.load_ledger_state(json.loads(state.read_text()))
    assert m2.ledger.steps_taken == 3
    with pytest.raises(BudgetExceededError):
        m2.train(torch.nn.Linear(3, 2), X, y, seed=0, steps=6)
