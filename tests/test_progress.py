"""Progress bars (dpspec.progress): stderr only, silent off a terminal, under -q and DPSPEC_PROGRESS=0;
they change no certified number. The machine-readable outputs of `dpspec compile` and `dpspec audit`."""

import io
import json
import subprocess
import sys

import pytest

import dpspec
from dpspec import progress as P
from tests.test_cli import GOOD, run

DPSGD = """privacy people { unit record  dataset_size 1000 }
train model { protect people  mechanism dpsgd  sampling poisson(rate = 0.05)  clipping flat(C = 1.0)  steps 40
  guarantee dp(epsilon = 2, delta = 1e-5) }
"""


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def tty(monkeypatch):
    """A terminal on stderr, installed when called (pytest's capture replaces sys.stderr after fixtures)."""
    monkeypatch.delenv("DPSPEC_PROGRESS", raising=False)
    P.set_quiet(False)

    def install():
        err = FakeTTY()
        monkeypatch.setattr(sys, "stderr", err)
        return err

    yield install
    P.set_quiet(False)


def test_a_bar_is_drawn_on_a_terminal_and_only_on_stderr(capsys, tty):
    pytest.importorskip("tqdm")
    tty = tty()
    assert P.enabled()
    assert list(P.progress(range(3), desc="work")) == [0, 1, 2]
    assert "work" in tty.getvalue()
    assert capsys.readouterr().out == ""


def test_silent_off_a_terminal_under_quiet_and_the_env_var(tty, monkeypatch):
    tty()
    monkeypatch.setenv("DPSPEC_PROGRESS", "0")
    assert not P.enabled() and isinstance(P.progress(range(2)), P._Silent)
    monkeypatch.delenv("DPSPEC_PROGRESS")
    P.set_quiet(True)
    assert not P.enabled()
    P.set_quiet(False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    bar = P.progress(total=5, desc="x")
    with bar:
        bar.update(5)
    assert list(P.progress([1, 2])) == [1, 2] and sys.stderr.getvalue() == ""


def test_training_with_a_bar_changes_no_number(tty):
    torch = pytest.importorskip("torch")
    pytest.importorskip("tqdm")
    tty = tty()

    def run_once():
        c = dpspec.compile(DPSGD)
        torch.manual_seed(0)
        m = torch.nn.Linear(3, 2)
        g = torch.Generator().manual_seed(0)
        X, y = torch.randn(1000, 3, generator=g), torch.randint(0, 2, (1000,), generator=g)
        c.mechanism.train(m, X, y, seed=0, steps=5)
        return c.certificate.results[0].guarantee.epsilon, m.weight.detach().clone()

    e1, w1 = run_once()
    assert "train model" in tty.getvalue()
    P.set_quiet(True)
    e2, w2 = run_once()
    assert e1 == e2 and torch.equal(w1, w2)


def test_compile_json_summary(tmp_spec, tmp_path):
    out = tmp_path / "cert.json"
    r = run("compile", tmp_spec(DPSGD), "-o", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    cert = json.loads(out.read_text())
    assert summary["ok"] and summary["output"] == str(out) and summary["content_hash"] == cert["content_hash"]
    (t,) = summary["targets"]
    assert t["name"] == "model" and t["mechanism"] == "dpsgd" and t["delta"] == 1e-5
    assert t["epsilon"] == cert["results"][0]["guarantee"]["epsilon"] and t["steps"] == 40


def test_quiet_and_env_keep_stderr_clean(tmp_spec, tmp_path):
    p = tmp_spec(DPSGD)
    r = run("compile", p, "-o", tmp_path / "c.json", "-q")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    r = subprocess.run([sys.executable, "-m", "dpspec", "verify", str(tmp_path / "c.json"), "-q", "--format", "json"],
                       capture_output=True, text=True, timeout=120, env={**__import__("os").environ,
                                                                            "DPSPEC_PROGRESS": "0"})
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] and r.stderr == ""


def test_audit_json(tmp_spec):
    r = run("audit", tmp_spec(GOOD), "--trials", "40", "--format", "json", "-q", "--no-runtime-checks")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] is True and rep["results"] and rep["results"][0]["name"] == "total"
