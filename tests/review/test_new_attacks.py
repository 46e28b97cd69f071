"""New hostile inputs tried in the review of issues 13 and 17 (those that found a gap, kept as
regression tests)."""

import copy
import json

import pytest
import torch

import dpspec
from dpspec.certificate.run import RunCertificate, verify_run

torch.set_num_threads(1)

DPSGD = """privacy people { unit record  dataset_size 20 }
train model { protect people  mechanism dpsgd  sampling poisson(rate = 0.25)  clipping flat(C = 1.0)  steps 8
  guarantee dp(epsilon = 2, delta = 1e-5) }
"""


@pytest.fixture(scope="module")
def run_doc():
    c = dpspec.compile(DPSGD)
    c.mechanism.train(torch.nn.Linear(3, 2), torch.zeros(20, 3), torch.zeros(20, dtype=torch.long), seed=0, steps=5)
    return json.loads(c.mechanism.run_certificate(embed=c.certificate).to_json())


def _sealed(d):
    return RunCertificate.model_validate(d).sealed().to_json()


def test_the_genuine_run_certificate_verifies(run_doc):
    assert verify_run(json.dumps(run_doc), raise_on_error=False).ok


@pytest.mark.parametrize("field, text", [("note", "\x1b[31mthis run spent nothing\x1b[0m"),
                                         ("accountant", "none: no privacy was spent"),
                                         ("note", "\u202eevil")])
def test_a_resealed_run_certificate_with_forged_text_fails(run_doc, field, text):
    """Found in review: `note` and `accountant` were not compared with the ledger's, so a resealed run
    certificate carrying any text verified."""
    d = copy.deepcopy(run_doc)
    d[field] = text
    rep = verify_run(_sealed(d), raise_on_error=False)
    assert not rep.ok and any(p.startswith(f"{field}:") for p in rep.problems)


@pytest.mark.parametrize("text", ["[" * 200000 + "]" * 200000, '{"a": ' * 100000 + "1" + "}" * 100000,
                                  '{"a": ' * 40 + "1" + "}" * 40])
def test_plot_refuses_deeply_nested_json_cleanly(tmp_path, text):
    """Found in review: `dpspec plot` on 200,000 nested brackets crashed with exit 3 (RecursionError);
    `verify` and `explain` refused it with one line."""
    import subprocess
    import sys

    p = tmp_path / "deep.json"
    p.write_text(text, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "dpspec", "plot", str(p), "-o", str(tmp_path / "x.png")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "nested more than" in r.stderr + r.stdout and "Traceback" not in r.stderr


def test_diagnostics_never_echo_control_or_bidi_characters_of_a_spec(tmp_path):
    """Found in review: DPS006 said "unexpected control character '\\x1b'" and then printed the source
    line with the raw ESC (and bidi overrides) to the terminal. Now they are shown escaped and the caret
    still points at the character."""
    import subprocess
    import sys

    p = tmp_path / "s.dps"
    p.write_text('privacy p { unit record  description "ok \u202e x \x1b[31mred" }\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "dpspec", "check", str(p)], capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "DPS006" in out
    assert "\x1b" not in out and "\u202e" not in out
    line = next(ln for ln in out.splitlines() if ln.startswith(" 1 | "))
    caret = next(ln for ln in out.splitlines() if "^" in ln)
    assert line[caret.index("^"):].startswith("\\x1b") and caret.count("^") == 4


@pytest.mark.parametrize("content, reason", [("[" * 200000 + "]" * 200000, "nested more than"),
                                             ('{"steps_taken": 1, "steps_taken": 5}', "appears twice")])
def test_run_cert_refuses_a_hostile_ledger_state_cleanly(tmp_path, content, reason):
    """Found in review: `dpspec run-cert --ledger` parsed the state with plain json.loads: 200,000 nested
    brackets crashed it (RecursionError, exit 3) and duplicate keys were silently collapsed."""
    import subprocess
    import sys

    cert = tmp_path / "c.json"
    cert.write_text(dpspec.compile(DPSGD).certificate.model_dump_json(), encoding="utf-8")
    state = tmp_path / "state.json"
    state.write_text(content, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "dpspec", "run-cert", str(cert), "--ledger", str(state)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and reason in r.stderr and "Traceback" not in r.stderr, r.stderr
