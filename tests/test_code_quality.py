"""Lint, format and type checks of the packages held to them (settings in pyproject.toml).

The accounting and the IR are checked strictly: they are the numbers and the types every stage
rests on. Each check is skipped when its tool is not installed (`pip install -e .[test]` installs both).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["dpspec/accounting", "dpspec/ir"]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which(tool) or shutil.which(tool, path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip(f"{tool} is not installed")
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check():
    r = _run("ruff", "check", *PACKAGES)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format():
    r = _run("ruff", "format", "--check", *PACKAGES)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy():
    r = _run("mypy", *PACKAGES)
    assert r.returncode == 0, r.stdout + r.stderr
