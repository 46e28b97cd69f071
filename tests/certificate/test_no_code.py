"""Verifying executes nothing from a certificate: formula texts are compared, never parsed; code hooks
of the embedded spec do not run without trust_code; the embedded spec reads no other file."""

import json
import os
import threading

import pytest

import dpspec
from dpspec.compiler import formulas as F
from dpspec.compiler.hooks import CodeHookRefused, code_hooks, find_hooks, import_hook
from tests.fuzz.certmut import hook_spec
from tests.guards import cpu_budget


@pytest.fixture
def canary(tmp_path, monkeypatch):
    path = tmp_path / "canary"
    monkeypatch.setenv("DPSPEC_FUZZ_CANARY", str(path))
    return path


@pytest.mark.parametrize("payload", [
    "__import__('pathlib').Path({canary!r}).write_text('pwned')",
    "(lambda: __import__('os').system('touch {canary}'))()",
    "Symbol('x').__class__.__init__.__globals__",
])
def test_a_formula_text_from_a_certificate_is_never_evaluated(doc, resealed, canary, payload):
    d = doc()
    d["results"][0]["formulas"][0]["sympy"] = payload.format(canary=str(canary))
    rep = dpspec.verify(resealed(d), raise_on_error=False)
    assert not rep.ok and "not dpspec's own formula" in " ".join(rep.problems)
    assert not canary.exists()
    # even with a content hash that does not match
    d["content_hash"] = "sha256:0"
    assert not dpspec.verify(json.dumps(d), raise_on_error=False).ok
    assert not canary.exists()


def test_a_power_tower_in_a_formula_does_not_hang(doc, resealed):
    d = doc()
    d["results"][0]["formulas"][0]["sympy"] = "9**9**9**9"
    with cpu_budget(10, "verifying a power tower"):
        rep = dpspec.verify(resealed(d), raise_on_error=False)
    assert not rep.ok


@pytest.mark.parametrize("edit", [
    lambda f: f.update(name="rdp_group_removal_alpha7"),
    lambda f: f.update(name="something_else"),
    lambda f: f.update(latex="\\alpha"),
    lambda f: f.update(sympy=F.WANG_THM9),                   # another formula's genuine text
    lambda f: f["variables"].update(sigma="__import__('os')"),
])
def test_formula_names_texts_and_variables_must_be_the_compilers(doc, resealed, canary, edit):
    d = doc()
    edit(d["results"][0]["formulas"][0])
    assert not dpspec.verify(resealed(d), raise_on_error=False).ok
    assert not canary.exists()


def test_formulas_are_evaluated_by_name_within_bounds():
    assert float(F.evaluate("rdp_gaussian", {"alpha": 2, "Delta": 1.0, "sigma": 1.0})) == pytest.approx(1.0)
    with pytest.raises(F.FormulaError, match="not a number"):
        F.evaluate("rdp_gaussian", {"alpha": 2, "Delta": "__import__('os')", "sigma": 1.0})
    with pytest.raises(F.FormulaError, match="do not match"):
        F.evaluate("rdp_gaussian", {"alpha": 2, "Delta": 1.0, "sigma": 1.0, "x": 1})
    with pytest.raises(F.FormulaError, match="not finite"):
        F.evaluate("rdp_gaussian", {"alpha": 2, "Delta": float("inf"), "sigma": 1.0})
    with cpu_budget(5, "refusing oversized sums"), pytest.raises(F.FormulaError, match="terms"):
        F.evaluate("rdp_poisson_sgm_integer_alpha", {"alpha": 10**9, "q": 0.01, "sigma": 1.0, "steps": 10})
    with cpu_budget(5, "refusing oversized sums"), pytest.raises(F.FormulaError, match="terms"):
        F.evaluate("rdp_group_removal_alpha3", {"K": 10**4, "q": 0.01, "sigma": 1.0, "steps": 10})
    with pytest.raises(F.FormulaError, match="integers"):
        F.evaluate("rdp_poisson_sgm_integer_alpha", {"alpha": 2.5, "q": 0.01, "sigma": 1.0, "steps": 10})
    with pytest.raises(F.FormulaError, match="not a formula"):
        F.evaluate("__import__('os')", {})


def test_the_compiler_emits_only_registered_formula_texts():
    with pytest.raises(AssertionError):
        F.formula("rdp_gaussian", "alpha*Delta**2/sigma**2", {"Delta": 1, "sigma": 1})
    assert F.known_text("rdp_group_removal_alpha3") == F.group_removal(3)
    assert F.known_text("rdp_group_removal_alpha9") is None


# --- code hooks ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hook_certificate():
    """A genuine certificate whose spec names a sampler world and a callable query."""
    return dpspec.compile(dpspec.loads(hook_spec(), name="hooks.dps")).certificate.to_json()


def test_find_hooks_sees_both_constructs():
    hooks = find_hooks(dpspec.loads(hook_spec()).ir)
    assert [(h.construct, h.target) for h in hooks] == [("sampler", "tests.fuzz.hook_canary:draw"),
                                                        ("callable", "tests.fuzz.hook_canary:query")]


def test_a_certificate_naming_code_hooks_fails_unless_trusted(hook_certificate, canary):
    rep = dpspec.verify(hook_certificate, raise_on_error=False)
    assert not rep.ok
    assert "runs user code" in rep.problems[0] and "--trust-code" in rep.problems[0]
    assert not canary.exists()
    rep = dpspec.verify(hook_certificate, raise_on_error=False, trust_code=True)
    assert rep.ok, rep.problems
    assert canary.exists()  # trusted: the hooks ran


def test_a_hook_spec_injected_into_a_certificate_does_not_run(doc, resealed, canary):
    d = doc()
    d["spec"]["canonical_text"] = dpspec.loads(hook_spec()).canonical_text()
    rep = dpspec.verify(resealed(d), raise_on_error=False)
    assert not rep.ok and "runs user code" in rep.problems[0]
    assert not canary.exists()


def test_import_hook_refuses_while_hooks_are_off(canary):
    with code_hooks(False):
        with pytest.raises(CodeHookRefused):
            import_hook("tests.fuzz.hook_canary:draw")
        with code_hooks(True):
            assert callable(import_hook("dpspec.pufferfish.examples:draw_groups"))
        with pytest.raises(CodeHookRefused):
            import_hook("os:system")


def test_compiling_with_hooks_off_fails_without_importing(canary):
    from dpspec.compiler.compile import compile_spec

    spec = dpspec.loads(hook_spec())
    with code_hooks(False), pytest.raises(CodeHookRefused):
        compile_spec(spec)
    assert not canary.exists()


def test_the_embedded_spec_includes_no_file(doc, resealed, tmp_path):
    fifo = tmp_path / "shared.dps"
    os.mkfifo(fifo)  # reading it would block: the test proves it is not read
    d = doc()
    d["spec"]["canonical_text"] = f'use "{fifo}"\n' + d["spec"]["canonical_text"]
    text = resealed(d)
    result = {}
    t = threading.Thread(target=lambda: result.update(rep=dpspec.verify(text, raise_on_error=False)), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "verify read a file named by the certificate"
    assert not result["rep"].ok and "includes other files" in result["rep"].problems[0]
