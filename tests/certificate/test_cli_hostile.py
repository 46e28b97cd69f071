"""`dpspec verify` and `dpspec explain` on hostile inputs: exit 1 with one clear line, never exit 3, never a
traceback."""

import json
import os
import subprocess
import sys

import pytest

from dpspec.certificate.verify import MAX_CERTIFICATE_BYTES
from dpspec.cli.main import main
from tests.fuzz.certmut import reseal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def hostile(tmp_path, certs):
    """name → path of a hostile input."""
    out = {}
    (tmp_path / "notjson.json").write_text("privacy p { unit record }\n", encoding="utf-8")
    out["not JSON"] = tmp_path / "notjson.json"
    out["a directory"] = tmp_path
    out["/dev/zero"] = "/dev/zero"
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_CERTIFICATE_BYTES + 1)
    out["a huge file"] = big
    (tmp_path / "hooks.json").write_text(certs["gen_hooks"], encoding="utf-8")
    out["a hook certificate"] = tmp_path / "hooks.json"
    d = json.loads(certs["gaussian_release"])
    forged = json.loads(json.dumps(d["results"][0]))
    forged["guarantee"]["epsilon"] = 0.01
    d["results"].insert(0, forged)
    (tmp_path / "forged.json").write_text(json.dumps(reseal(d)), encoding="utf-8")
    out["a forged certificate"] = tmp_path / "forged.json"
    good = tmp_path / "good.json"
    good.write_text(certs["gaussian_release"], encoding="utf-8")
    (tmp_path / "pathonly.json").write_text(str(good), encoding="utf-8")
    out["a file holding a path"] = tmp_path / "pathonly.json"
    out["a missing file"] = tmp_path / "missing.json"
    return out


CASES = ["not JSON", "a directory", "/dev/zero", "a huge file", "a hook certificate", "a forged certificate",
         "a file holding a path", "a missing file"]


@pytest.mark.parametrize("command", ["verify", "explain"])
@pytest.mark.parametrize("case", CASES)
def test_hostile_input_exits_1_with_one_line(hostile, capsys, command, case):
    code = main([command, str(hostile[case])])
    out, err = capsys.readouterr()
    assert code == 1, (case, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "FAILED" in lines[0] and str(hostile[case]) in lines[0]
    assert "Traceback" not in err and "internal error" not in err
    assert out == ""


def test_trust_code_lets_a_hook_certificate_verify(hostile, capsys):
    assert main(["verify", str(hostile["a hook certificate"]), "--trust-code"]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["explain", str(hostile["a hook certificate"]), "--trust-code"]) == 0


def test_explain_verifies_first_or_says_it_did_not(tmp_path, certs, capsys):
    p = tmp_path / "good.json"
    p.write_text(certs["gaussian_release"], encoding="utf-8")
    assert main(["explain", str(p)]) == 0
    out = capsys.readouterr().out
    assert "Guarantee:" in out and "NOT VERIFIED" not in out
    assert main(["explain", str(p), "--no-verify"]) == 0
    assert capsys.readouterr().out.startswith("NOT VERIFIED")
    d = json.loads(certs["gaussian_release"])
    d["results"][0]["guarantee"]["epsilon"] = 0.5      # edited, not resealed: even --no-verify refuses
    p.write_text(json.dumps(d), encoding="utf-8")
    assert main(["explain", str(p), "--no-verify"]) == 1
    assert "content_hash" in capsys.readouterr().err


def test_verify_json_output(hostile, capsys):
    assert main(["verify", str(hostile["a forged certificate"]), "--format", "json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] is False and "more than once" in rep["problems"][0]


def test_the_process_prints_no_traceback_on_dev_zero():
    r = subprocess.run([sys.executable, "-m", "dpspec", "verify", "/dev/zero"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_no_terminal_escape_from_a_certificate_reaches_the_terminal(tmp_path, certs, capsys):
    d = json.loads(certs["gaussian_release"])
    d["spec"]["source_name"] = "\x1b[2J\x1b[31mtrusted.dps"   # a free label: verifies, but is printed escaped
    p = tmp_path / "c.json"
    p.write_text(json.dumps(reseal(d)), encoding="utf-8")
    assert main(["explain", str(p)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J" in out


def test_huge_integers_in_parameters_fail_cleanly_and_explain_without_verifying(tmp_path, certs, capsys):
    d = json.loads(certs["gaussian_release"])
    d["results"][0]["mechanism"]["parameters"]["sigma"] = 10 ** 400   # a Scalar: an integer beyond a double
    p = tmp_path / "c.json"
    p.write_text(json.dumps(reseal(d)), encoding="utf-8")
    assert main(["verify", str(p)]) == 1
    err = capsys.readouterr().err
    assert "must be equal" in err and "internal error" not in err
    assert main(["explain", str(p), "--no-verify"]) == 0
    assert "an integer of" in capsys.readouterr().out
