"""A mechanism family is one folder plus one entry: the template family in
``dpspec/families/template/`` (settings model, accountant, compile function, runtime class, proof)
registered by one line goes through every stage — lowering, checking, compiling, the certificate,
``verify`` and the runtime's step budget — without an edit to shared code, and its hooks come from
its files. The family: full-batch noisy gradient descent ("noisy_gd"), T steps of the Gaussian
mechanism on a clipped gradient sum (sensitivity 1 in units of the clip): ε(α) = T α / (2 σ²)
(Mironov 2017, Prop. 7, composed over T steps, Prop. 1)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

import dpspec
import dpspec.lower.lowering  # noqa: F401 - loaded before any test registers the template (its name lists)
from dpspec.families import FAMILIES, FOLDER_HOOKS, Family, allowed_settings
from dpspec.families.template import ENTRY
from dpspec.families.template.runtime import Runtime as NoisyGd

UNIT = "privacy people { unit record  relation add_remove  dataset_size 1000 }\n"
SPEC = UNIT + ("train gd { protect people  mechanism noisy_gd  steps 50  noise_multiplier 4.0  "
               "guarantee dp(delta = 1e-6) }\n")
TEMPLATE = Path(dpspec.__file__).resolve().parent / "families" / "template"


@pytest.fixture
def noisy_gd(monkeypatch):
    monkeypatch.setitem(FAMILIES, "noisy_gd", ENTRY)  # the one registry line
    yield


# ---------------------------------------------------------------------------------- the proof


def test_the_family_compiles_certifies_and_verifies_from_one_entry(noisy_gd):
    spec = dpspec.load(SPEC)
    assert spec.ok, spec.diagnostics
    assert allowed_settings(ENTRY) == ("protect", "mechanism", "noise", "steps", "guarantee", "description")
    compiled = dpspec.compile(spec)
    (target,) = compiled.targets.values()
    cert = target.certificate
    assert cert.mechanism.name == "noisy_gd" and cert.guarantee.theorems == ["Mironov 2017, Prop. 7 and Prop. 1"]
    eps = cert.guarantee.epsilon
    # an independent reading of the same bound: min over orders of T α/(2σ²) + log(1/δ)/(α-1) is
    # a standard (looser-or-equal) conversion, the certificate's must not be above it
    a = np.linspace(1.01, 200, 200_000)
    assert 0 < eps <= float(np.min(50 * a / 32 + np.log(1e-6 ** -1) / (a - 1))) + 1e-9
    report = dpspec.verify(compiled.certificate.to_json())
    assert report.ok and report.checks, report.problems


def test_a_forged_epsilon_fails_verify(noisy_gd):
    compiled = dpspec.compile(dpspec.load(SPEC))
    doc = json.loads(compiled.certificate.to_json())
    doc["results"][0]["guarantee"]["epsilon"] *= 0.5
    report = dpspec.verify(json.dumps(doc), raise_on_error=False)
    assert not report.ok
    assert any("epsilon" in p or "ε" in p for p in report.problems), report.problems


def test_the_runtime_stops_at_the_certified_steps(noisy_gd):
    compiled = dpspec.compile(dpspec.load(SPEC))
    mech = compiled.mechanism
    assert isinstance(mech, NoisyGd) and mech.steps == 50 and mech.sigma == 4.0
    rng = np.random.default_rng(0)
    for _ in range(50):
        mech.step(np.zeros(3), rng)
    with pytest.raises(RuntimeError, match="budget"):
        mech.step(np.zeros(3), rng)


def test_without_the_entry_the_mechanism_is_unknown():
    assert "noisy_gd" not in FAMILIES
    spec = dpspec.load(SPEC)
    assert not spec.ok and any("noisy_gd" in d.message for d in spec.diagnostics)


def test_a_setting_only_the_new_family_holds_is_refused_elsewhere(noisy_gd):
    """DPS130 covers settings by name: a GCON training given the plug-in's `noise_multiplier` is refused."""
    text = UNIT.replace("unit record  relation add_remove  dataset_size 1000", "unit edge  graph cora") + \
        "train g { mechanism gcon  noise_multiplier 1.0  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
    diags = [d for d in dpspec.load(text).diagnostics if d.rule == "DPS130"]
    assert [d.message for d in diags] == ["`noise` has no effect for mechanism `gcon`"]


def test_the_hooks_come_from_the_folder_files():
    assert ENTRY.package == "dpspec.families.template"
    assert ENTRY.settings_model == "dpspec.families.template.settings:Settings"
    assert ENTRY.compile == "dpspec.families.template.compile:compile_target"
    assert ENTRY.runtime == "dpspec.families.template.runtime:Runtime"
    assert ENTRY.accountants == ("dpspec.families.template.accountant",)
    assert not ENTRY.auditor and not ENTRY.demo  # no file, no hook
    # a path written in the entry wins over the file
    assert Family(**{**_facts(ENTRY), "runtime": "x.y:Z"}).runtime == "x.y:Z"


def _facts(f: Family) -> dict:
    return {k: getattr(f, k) for k in ("name", "block", "units", "relations", "notions", "summary", "source",
                                       "package")}


def test_a_hook_needs_its_name_defined_in_its_file(tmp_path, monkeypatch):
    """A file that does not define the hook's name gives no hook (read as text, nothing imported)."""
    pkg = tmp_path / "myfam"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "compile.py").write_text("def something_else(): pass\n")
    (pkg / "runtime.py").write_text("class Runtime:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    f = Family(name="myfam", block="train", units=("record",), relations=("add_remove",), notions=("dp",),
               summary="s", source="s", package="myfam")
    assert f.compile == "" and f.runtime == "myfam.runtime:Runtime"


def test_the_template_uses_only_public_names_of_dpspec():
    """The extension API is public: the template imports no underscore name from dpspec."""
    for p in sorted(TEMPLATE.glob("*.py")):
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("dpspec"):
                private = [a.name for a in n.names if a.name.startswith("_")]
                assert not private, f"{p.name} imports {private} from {n.module}"
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "api":
                assert not n.attr.startswith("_"), f"{p.name} uses api.{n.attr}"


def test_every_folder_hook_file_of_the_template_is_documented():
    doc = (TEMPLATE.parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
    for stem, _attr in FOLDER_HOOKS.values():
        assert f"`{stem}.py`" in doc, f"docs/extending.md does not describe {stem}.py"
    assert (TEMPLATE / "PROOF.md").is_file()
