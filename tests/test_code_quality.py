"""Lint, format and type checks (settings in pyproject.toml).

``ruff check`` and ``ruff format --check`` hold for the whole package. mypy holds for the packages
listed in ``TYPED`` (the numbers and types every stage rests on, the registry, the extension API, the clipping rules, tuning); the
rest of the package is being brought under it. Each check is skipped when its tool is not installed
(`pip install -e .[test]` installs both).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["dpspec"]
TYPED = [
    "dpspec/accounting",
    "dpspec/ir",
    "dpspec/errors.py",
    "dpspec/families/__init__.py",
    "dpspec/families/template",
    "dpspec/compiler/api.py",
    "dpspec/torch/clipping",
    "dpspec/tuning",
]


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
    r = _run("mypy", *TYPED)
    assert r.returncode == 0, r.stdout + r.stderr
