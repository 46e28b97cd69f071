"""The command line, as a user runs it: exit codes, outputs, no tracebacks."""

import json
import subprocess
import sys

import pytest

from tests.conftest import SPECS

GOOD = """privacy people { unit record  dataset_size 60000 }
release total { mechanism gaussian  query sum(x, bounds = [0, 1])  guarantee dp(epsilon = 1, delta = 1e-6) }
"""


def run(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "dpspec", *map(str, args)], capture_output=True, text=True,
                       timeout=120, cwd=cwd)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r


def test_check_ok(tmp_spec):
    r = run("check", tmp_spec(GOOD))
    assert r.returncode == 0 and r.stdout.strip() == "ok"


def test_check_reports_file_line_col_caret_and_hint(tmp_spec):
    p = tmp_spec(GOOD.replace("epsilon = 1", "epsilom = 1"), "my.dps")
    r = run("check", "my.dps", cwd=p.parent)
    assert r.returncode == 1
    assert "my.dps:2:" in r.stdout and "error[DPS112]" in r.stdout
    assert "^^^^^^^" in r.stdout and "did you mean `epsilon`?" in r.stdout


def test_check_json(tmp_spec):
    p = tmp_spec(GOOD.replace("delta = 1e-6", "delta = 2"))
    r = run("check", "--format", "json", p)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["diagnostics"][0]["rule"] == "DPS105"
    assert doc["diagnostics"][0]["span"]["line"] == 2


def test_usage_errors_exit_2():
    assert run().returncode == 2
    assert run("check").returncode == 2
    assert run("frobnicate").returncode == 2
    assert run("compile", "--bogus-flag", "x.dps").returncode == 2


def test_missing_file_is_invalid_not_a_crash(tmp_path):
    r = run("check", tmp_path / "nope.dps")
    assert r.returncode == 1 and "cannot read" in r.stdout


def test_compile_explain_verify(tmp_spec, tmp_path):
    spec = tmp_spec(GOOD)
    cert = tmp_path / "cert.json"
    r = run("compile", spec, "-o", cert)
    assert r.returncode == 0 and cert.exists() and "total" in r.stdout
    r = run("explain", cert)
    assert r.returncode == 0
    for word in ("Protects:", "Guarantee:", "Assumptions:", "Mechanism:", "sigma ="):
        assert word in r.stdout
    r = run("verify", cert)
    assert r.returncode == 0 and "verified" in r.stdout
    doc = json.loads(cert.read_text())
    doc["results"][0]["guarantee"]["epsilon"] = 0.5
    cert.write_text(json.dumps(doc))
    r = run("verify", cert)
    assert r.returncode == 1 and "FAILED" in r.stderr and "edited" in r.stderr


def test_compile_to_stdout_is_json(tmp_spec):
    r = run("compile", tmp_spec(GOOD))
    assert r.returncode == 0
    assert json.loads(r.stdout)["schema_version"] == "1.1"


def test_compile_unreachable_target_is_a_located_error(tmp_spec):
    p = tmp_spec("privacy p { unit record  dataset_size 1000 }\ntrain t { mechanism dpsgd  sampling full_batch  clipping flat(C = 1)\n"
                 "  steps 1000000  guarantee dp(epsilon = 1e-6, delta = 1e-12) }\n")
    r = run("compile", p, "-o", p.with_suffix(".json"))
    assert r.returncode == 1 and "DPS202" in r.stderr
    assert not p.with_suffix(".json").exists()


def test_fmt_and_fmt_check(tmp_spec):
    p = tmp_spec("privacy   p {unit record}  # comment\n")
    r = run("fmt", p)
    assert r.returncode == 0 and r.stdout == "privacy p {\n  unit record\n}  # comment\n"
    assert run("fmt", "--check", p).returncode == 1
    assert run("fmt", "-w", p).returncode == 0
    assert run("fmt", "--check", p).returncode == 0
    assert p.read_text() == r.stdout  # the comment survives -w


@pytest.mark.parametrize("path", sorted(SPECS.glob("*.dps")), ids=lambda p: p.name)
def test_example_specs_check_clean(path):
    r = run("check", path)
    assert r.returncode == 0, r.stdout


def test_rules_and_schema_commands():
    r = run("rules")
    assert r.returncode == 0 and "DPS105" in r.stdout
    r = run("rules", "dps105")
    assert r.returncode == 0 and "Raised by:" in r.stdout
    assert run("rules", "DPS999").returncode == 2
    r = run("schema")
    assert json.loads(r.stdout)["title"] == "Certificate"


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("dpspec ")
