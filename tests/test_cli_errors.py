"""Bad environments and bad paths are clear messages with exit 1 or 2, never an internal error (exit 3)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SPECS

SPEC = "privacy p { unit record  dataset_size 1000 }\n" \
       "release r { mechanism gaussian  sensitivity 1  guarantee dp(epsilon = 1, delta = 1e-6) }\n"

# Makes `import torch` fail as on a machine without it. (`sys.modules["torch"] = None` would also
# block the import, but scipy's array-API helpers then read attributes of that None.)
NO_TORCH = '''import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTorch())
'''


def run(*args, env=None, input=None, cwd=None):
    r = subprocess.run([sys.executable, "-m", "dpspec", *map(str, args)], capture_output=True, text=True,
                       timeout=120, env=env, input=input, cwd=cwd)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    assert "internal error" not in r.stderr, r.stderr
    return r


def test_compile_into_a_missing_directory_says_so_before_compiling(tmp_spec, tmp_path):
    out = tmp_path / "missing_dir" / "cert.json"
    r = run("compile", tmp_spec(SPEC), "-o", out)
    assert r.returncode == 1
    assert f"cannot write {out}" in r.stderr and "does not exist" in r.stderr and "hint" in r.stderr
    assert not out.parent.exists()


def test_compile_onto_a_directory_is_a_write_error(tmp_spec, tmp_path):
    r = run("compile", tmp_spec(SPEC), "-o", tmp_path)
    assert r.returncode == 1 and f"cannot write {tmp_path}" in r.stderr


@pytest.fixture
def without_torch(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_TORCH)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=env)
    assert "No module named 'torch'" in probe.stderr  # the shim works
    return env


@pytest.mark.slow
def test_audit_without_torch_names_the_missing_package_and_how_to_install_it(tmp_path, without_torch):
    cert = tmp_path / "dpsgd.json"
    assert run("compile", SPECS / "dpsgd_records.dps", "-q", "-o", cert).returncode == 0
    r = run("audit", cert, "-q", "--trials", "40", env=without_torch)
    assert r.returncode == 1
    assert "`dpspec audit` needs `torch`, which is not installed" in r.stderr
    assert "requirements/torch.txt" in r.stderr


def test_check_and_fmt_never_need_torch(tmp_spec, without_torch):
    p = tmp_spec(SPEC)
    assert run("check", p, env=without_torch).returncode == 0
    assert run("fmt", "--check", p, env=without_torch).returncode == 1


# --- fmt on files, standard input and several files -----------------------------------------------


def test_fmt_write_keeps_comments_and_leaves_formatted_files_alone(tmp_spec):
    p = tmp_spec("# about p\nprivacy   p {unit record # the unit\n\n dataset_size 5}\n")
    assert run("fmt", "-w", p).returncode == 0
    text = p.read_text()
    assert text == "# about p\nprivacy p {\n  unit         record  # the unit\n\n  dataset_size 5\n}\n"
    before = p.stat().st_mtime_ns
    assert run("fmt", "-w", p).returncode == 0 and p.stat().st_mtime_ns == before
    assert [x.name for x in p.parent.iterdir()] == [p.name]  # no temporary file left behind


def test_fmt_reads_standard_input():
    r = run("fmt", "-", input="x y {a 1} # c\n")
    assert r.returncode == 0 and r.stdout == "x y {\n  a 1\n}  # c\n"
    assert run("fmt", "-w", "-", input="x y {}").returncode == 2
    r = subprocess.run([sys.executable, "-m", "dpspec", "fmt", "-"], input=b"x y { s \"\xff\" }", capture_output=True)
    assert r.returncode == 1 and b"not UTF-8" in r.stderr and not r.stdout
    assert run("fmt", "--check", "-w", "x.dps").returncode == 2


def test_fmt_check_several_files_reports_each(tmp_spec):
    good = tmp_spec("x y {}\n", "good.dps")
    bad = tmp_spec("x   y {}\n", "bad.dps")
    r = run("fmt", "--check", good, bad)
    assert r.returncode == 1 and str(bad) in r.stdout and str(good) not in r.stdout


def test_fmt_bad_inputs_are_located_errors(tmp_spec, tmp_path):
    r = run("fmt", tmp_spec("x y {\n", "broken.dps"))
    assert r.returncode == 1 and "broken.dps:" in r.stderr and "DPS003" in r.stderr
    r = run("fmt", tmp_path / "nope.dps")
    assert r.returncode == 1 and "cannot read" in r.stderr
    p = tmp_path / "bin.dps"
    p.write_bytes(b"\xff\xfe")
    r = run("fmt", "-w", p)
    assert r.returncode == 1 and "UTF-8" in r.stderr and p.read_bytes() == b"\xff\xfe"
