"""Run certificates: a stopped run states the steps it took and the ε it spent, and `dpspec verify`
recomputes both from the original certificate; the runtime never imports the compiler."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import dpspec
from dpspec.certificate.run import RunCertificate, verify_run
from dpspec.cli.main import main as cli
from dpspec.mechanisms.ledger import DataMismatchError

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]

DPSGD = """
privacy people { unit record  dataset_size 20 }
train model {
  protect   people
  mechanism dpsgd
  sampling  poisson(rate = 0.25)
  clipping  flat(C = 1.0)
  steps     8
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""

SRPP = """scenario prevalence { secret share in {low, high} }
train model {
  protect       prevalence
  mechanism     srpp_sgd
  dataset_size  60
  discrepancy   label_flip(differing = 3)
  sampling      without_replacement(batch_size = 10)
  clipping      flat(C = 1.0)
  steps         6
  learning_rate 0.2
  guarantee     ave_srpp(alpha = 8, epsilon = 2)
}
"""


def trained(text, steps):
    c = dpspec.compile(text)
    X, y = torch.zeros(len_of(text), 3), torch.zeros(len_of(text), dtype=torch.long)
    c.mechanism.train(torch.nn.Linear(3, 2), X, y, seed=0, steps=steps)
    return c


def len_of(text):
    return 60 if "srpp" in text else 20


def test_a_stopped_run_certifies_what_it_spent():
    c = trained(DPSGD, 3)
    rc = c.mechanism.run_certificate(embed=c.certificate)
    assert rc.kind == "run" and rc.steps_taken == 3 and rc.budget_steps == 8
    assert rc.certificate.content_hash == c.certificate.content_hash
    assert [p.delta for p in rc.spent] == [p.delta for p in c.certificate.results[0].guarantee.dp]
    assert all(s.epsilon < k.epsilon for s, k in zip(rc.spent, rc.certified))
    rep = verify_run(rc.to_json())
    assert rep.ok, rep.problems
    assert dpspec.verify(json.loads(rc.to_json()), raise_on_error=False).ok  # verify() dispatches on "kind"
    c.mechanism.train(torch.nn.Linear(3, 2), torch.zeros(20, 3), torch.zeros(20, dtype=torch.long), seed=1)
    full = c.mechanism.run_certificate()
    assert [p.epsilon for p in full.spent] == [p.epsilon for p in full.certified]
    assert verify_run(full.to_json(), c.certificate.to_json()).ok


def _resealed(rc: RunCertificate, **update) -> str:
    return rc.model_copy(update=update).sealed().to_json()


def test_verify_catches_every_edit():
    c = trained(DPSGD, 3)
    rc = c.mechanism.run_certificate(embed=c.certificate)
    d = json.loads(rc.to_json())
    d["steps_taken"] = 2  # not resealed
    assert "edited" in " ".join(verify_run(d, raise_on_error=False).problems)
    low = [p.model_copy(update={"epsilon": p.epsilon * 0.9}) for p in rc.spent]
    rep = verify_run(_resealed(rc, spent=low), raise_on_error=False)
    assert not rep.ok and "BELOW" in " ".join(rep.problems)
    rep = verify_run(_resealed(rc, steps_taken=1), raise_on_error=False)  # fewer steps than the ε says
    assert not rep.ok and "recomputed" in " ".join(rep.problems)
    rep = verify_run(_resealed(rc, steps_taken=9), raise_on_error=False)
    assert not rep.ok and "outside the certified budget" in " ".join(rep.problems)
    rep = verify_run(_resealed(rc, original=None), raise_on_error=False)
    assert not rep.ok and "--certificate" in " ".join(rep.problems)
    other = dpspec.compile(DPSGD.replace("epsilon = 2", "epsilon = 3")).certificate
    rep = verify_run(_resealed(rc, original=None), other.to_json(), raise_on_error=False)
    assert not rep.ok and "not the certificate given" in " ".join(rep.problems)
    d = json.loads(rc.to_json())
    d["spent"][0]["epsilon"] = "__import__('os')"  # text is data, never code
    assert not verify_run(d, raise_on_error=False).ok


def test_srpp_run_certificate_is_at_the_certificates_alpha():
    c = dpspec.compile(SRPP)
    X, y = torch.randn(60, 3), torch.randint(0, 2, (60,))
    c.mechanism.train(torch.nn.Linear(3, 2), X, y, seed=0, steps=2)
    rc = c.mechanism.run_certificate()
    assert [(p.alpha, p.delta) for p in rc.spent] == [(8.0, None)]
    assert rc.spent[0].epsilon == pytest.approx(2.0 * 2 / 6, rel=1e-9)
    assert verify_run(rc.to_json(), c.certificate, raise_on_error=False).ok


def test_a_hand_built_object_has_no_run_certificate():
    from dpspec.families.dpsgd.runtime import DpSgd

    m = DpSgd(noise_multiplier=1.0, clip_norm=1.0, sampling="poisson", sample_rate=0.1, steps=3, dataset_size=10,
              delta=1e-5)
    assert m.privacy_spent().epsilon == 0.0
    with pytest.raises(DataMismatchError, match="not compiled from a certificate"):
        m.run_certificate()


def test_cli_run_cert_and_verify(tmp_path, capsys):
    spec = tmp_path / "s.dps"
    spec.write_text(DPSGD)
    cert, run, emb, state = (tmp_path / f for f in ("cert.json", "run.json", "emb.json", "state.json"))
    assert cli(["compile", str(spec), "-o", str(cert), "-q"]) == 0
    assert cli(["run-cert", str(cert), "--steps", "5", "-o", str(run)]) == 0
    assert "5 of 8 step(s)" in capsys.readouterr().out
    assert cli(["verify", str(run)]) == 1  # no original given, none embedded
    assert "--certificate" in capsys.readouterr().err
    assert cli(["verify", str(run), "--certificate", str(cert)]) == 0
    assert cli(["run-cert", str(cert), "--steps", "5", "--embed", "-o", str(emb)]) == 0
    assert cli(["verify", str(emb)]) == 0
    # a ledger state saved by a run
    c = dpspec.compile(dpspec.load(str(spec)))
    c.mechanism.train(torch.nn.Linear(3, 2), torch.zeros(20, 3), torch.zeros(20, dtype=torch.long), seed=0, steps=4)
    state.write_text(json.dumps(c.mechanism.ledger_state()))
    assert cli(["run-cert", str(cert), "--ledger", str(state), "-o", str(run)]) == 0
    assert json.loads(run.read_text())["steps_taken"] == 4
    capsys.readouterr()
    # refusals: beyond the budget, a state from another certificate; exit 1, no traceback
    assert cli(["run-cert", str(cert), "--steps", "9"]) == 1
    assert "DPS163" in capsys.readouterr().err
    other = dict(json.loads(state.read_text()), budget_steps=9)
    state.write_text(json.dumps(other))
    assert cli(["run-cert", str(cert), "--ledger", str(state)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error" in err
    d = json.loads(emb.read_text())
    d["steps_taken"] = 1
    emb.write_text(json.dumps(d))
    assert cli(["verify", str(emb)]) == 1
    assert cli(["run-cert", str(cert), "--steps", "2", "--target", "nope"]) == 1
    assert cli(["audit", str(run), "-q"]) == 1  # a run certificate is not audited itself
    assert "run certificate" in capsys.readouterr().err


def test_the_runtime_never_imports_the_compiler(tmp_path):
    """Every runtime object runs, keeps its ledger and writes a run certificate with dpspec.accounting only."""
    cert = dpspec.compile(DPSGD).certificate
    path = tmp_path / "cert.json"
    path.write_text(cert.to_json())
    code = textwrap.dedent(f"""
        import sys, json
        import numpy as np, torch
        from dpspec.certificate.model import Certificate
        from dpspec.families.dpsgd.runtime import DpSgd
        import dpspec.families.srpp_sgd.runtime, dpspec.families.relational_dpsgd.runtime, dpspec.families.gcon.runtime
        import dpspec.srpp.trainer, dpspec.relational.trainer, dpspec.families.gcon.trainer, dpspec.distributed.comm
        import dpspec.certificate.run
        cert = Certificate.model_validate_json(open({str(path)!r}).read())
        p = cert.results[0].mechanism.parameters
        g = cert.results[0].guarantee
        m = DpSgd(noise_multiplier=p["noise_multiplier"], clip_norm=p["clip_norm"], sampling=p["sampling"],
                  sample_rate=p["sample_rate"], steps=p["steps"], dataset_size=p["dataset_size"],
                  normalizer=p["normalizer"], rdp_alphas=tuple(g.rdp_alphas), delta=g.delta, name="model")
        m.bind_certificate(cert, "model")
        m.train(torch.nn.Linear(3, 2), torch.zeros(20, 3), torch.zeros(20, dtype=torch.long), seed=0)
        assert m.privacy_spent().epsilon == g.epsilon, (m.privacy_spent(), g.epsilon)
        rc = m.run_certificate()
        from dpspec.srpp import FixedPairWorlds, LrSchedule, OptimizerSpec, Sampling, SrppSgdPlan, calibrate
        from dpspec.families.srpp_sgd.runtime import SrppSgdMechanism
        plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=20, batch_size=5),
                           optimizer=OptimizerSpec(LrSchedule(0.1, 3)), clip=1.0)
        s = SrppSgdMechanism("s", plan, calibrate(plan, FixedPairWorlds(20, 1), alpha=4, epsilon=1), FixedPairWorlds(20, 1))
        s.train(torch.nn.Linear(3, 2), torch.randn(20, 3), torch.randint(0, 2, (20,)), seed=0)
        assert abs(s.privacy_spent().epsilon - 1.0) < 1e-9
        bad = [k for k in sys.modules if k.startswith("dpspec.compiler")]
        print("COMPILER", bad)
        sys.exit(1 if bad else 0)
        """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "COMPILER []" in out.stdout
