"""Each mechanism family ships its proofs: ``dpspec/families/<family>/PROOF.md``.

A PROOF.md holds the family's theorem map (certified number → paper result → dpspec function →
assumptions → refusing rules) and the derivations the code's docstrings cite. These tests keep it
attached to the code: it exists for every family, names the commit it was checked against (a
commit of this repository), cites only functions, files and rule ids that exist, and the package
cites no derivation that lives outside the repository.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dpspec.check import catalogue
from dpspec.families import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
PROOFS = {name: ROOT / Path(*(f.package or f"dpspec.families.{name}").split(".")) / "PROOF.md"
          for name, f in FAMILIES.items()}  # a folder may serve several entries (its `package`)
CHECKED = re.compile(r"^Checked against commit ([0-9a-f]{7,40})\b", re.MULTILINE)
#: ``dpspec.pkg.module:attribute`` (attribute may be dotted: ``Class.method``)
DOTTED = re.compile(r"`(dpspec(?:\.\w+)+):(\w+(?:\.\w+)*)`")
#: a repository path in backticks, e.g. ``dpspec/accounting/gcon.py`` or ``tests/families/gcon/test_calibration.py``
PATH = re.compile(r"`((?:dpspec|tests|docs|benchmarks)/[\w./-]+\.(?:py|md))`")
RULE = re.compile(r"\bDPS\d{3}\b")


def _text(name: str) -> str:
    path = PROOFS[name]
    assert path.is_file(), f"family {name!r} has no {path.relative_to(ROOT)}"
    return path.read_text(encoding="utf-8")


def _git(*args: str) -> subprocess.CompletedProcess | None:
    git = shutil.which("git")
    if git is None:
        return None
    return subprocess.run([git, "-C", str(ROOT), *args], capture_output=True, text=True, check=False)


def _in_git_checkout() -> bool:
    r = _git("rev-parse", "--is-inside-work-tree")
    return r is not None and r.returncode == 0 and r.stdout.strip() == "true"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_has_a_proof_with_a_theorem_map(name):
    text = _text(name)
    assert re.search(r"^#+ .*Theorem map", text, re.MULTILINE), "no theorem map section"
    assert "| certified number |" in text, "the theorem map table is missing"
    assert "What this does not cover" in text
    assert len(CHECKED.findall(text)) == 1, "exactly one 'Checked against commit <sha>' line"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_checked_commit_exists_in_the_history(name):
    if not _in_git_checkout():
        pytest.skip("not a git checkout")
    (sha,) = CHECKED.findall(_text(name))
    r = _git("cat-file", "-e", f"{sha}^{{commit}}")
    assert r is not None and r.returncode == 0, f"{name}: commit {sha} is not in this repository's history"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_cited_functions_exist(name):
    refs = DOTTED.findall(_text(name))
    assert refs, "the theorem map names no dpspec function"
    missing = []
    for module, attr in refs:
        try:
            obj = importlib.import_module(module)
        except ImportError:
            missing.append(f"{module}:{attr} (no module)")
            continue
        for part in attr.split("."):
            if not hasattr(obj, part):
                missing.append(f"{module}:{attr}")
                break
            obj = getattr(obj, part)
    assert not missing, f"{name}: PROOF.md cites what the code does not define: {missing}"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_cited_files_and_rules_exist(name):
    text = _text(name)
    files = [p for p in PATH.findall(text) if not (ROOT / p).exists()]
    assert not files, f"{name}: PROOF.md cites files that do not exist: {files}"
    rules = sorted(set(RULE.findall(text)) - set(catalogue()))
    assert not rules, f"{name}: PROOF.md cites rule ids absent from the catalogue: {rules}"


def test_no_module_cites_derivations_outside_the_repository():
    cites = []
    for p in (ROOT / "dpspec").rglob("*"):
        if p.is_file() and p.suffix in (".py", ".md", ".lark", ".txt", ".json"):
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if "shared/digests" in line:
                    cites.append(f"{p.relative_to(ROOT)}:{i}")
    assert not cites, f"cite the family's PROOF.md instead of shared/digests: {cites}"
