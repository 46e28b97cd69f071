"""Every error a user sees carries a hint: what to write instead, or where to look.

Two nets: a scan of the source for every place an error diagnostic is made (a new one without a
hint fails here), and the rule catalogue's examples run end to end (a hint computed at run time
that comes out empty fails there).
"""

import ast
from pathlib import Path

import pytest

import dpspec
from dpspec.check import CATALOGUE

PKG = Path(dpspec.__file__).resolve().parent
# the positional index of `hint` in each way of making an error diagnostic
_HINT_POSITION = {"diag": 4, "_fail": 4, "fail": 4, "Diagnostic": 3, "error": 3}


def _error_sites_without_hint() -> list[str]:
    missing = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in ("diag", "_fail", "fail", "Diagnostic"):
                name = f.id
            elif isinstance(f, ast.Attribute) and f.attr == "error" and rel.startswith(("dpspec/lower/", "dpspec/check/")):
                name = "error"  # Reporter.error in the lowering stage
            else:
                continue
            kw = {k.arg: k.value for k in node.keywords}
            severity = kw.get("severity")
            if isinstance(severity, ast.Constant) and severity.value in ("warning", "note"):
                continue
            if "hint" in kw or len(node.args) > _HINT_POSITION[name]:
                hint = kw.get("hint", node.args[_HINT_POSITION[name]] if len(node.args) > _HINT_POSITION[name] else None)
                if not (isinstance(hint, ast.Constant) and hint.value in (None, "")):
                    continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue
            missing.append(f"{rel}:{node.lineno}: {ast.unparse(node)[:90]}")
    return missing


def test_every_error_diagnostic_in_the_source_passes_a_hint():
    missing = _error_sites_without_hint()
    assert not missing, "error diagnostics without a hint:\n" + "\n".join(missing)


def _diagnostics_of(text: str, compile_stage: bool):
    spec = dpspec.loads(text, name="example.dps")
    if not compile_stage or not spec.ok:
        return spec.diagnostics
    try:
        dpspec.compile(spec)
    except dpspec.SpecError as e:
        return e.diagnostics
    return []


@pytest.mark.parametrize("rule_id", sorted(CATALOGUE))
def test_every_rule_example_reports_errors_with_hints(rule_id):
    info = CATALOGUE[rule_id]
    if info.bad.startswith("(see tests"):
        pytest.skip("no example spec")
    diags = _diagnostics_of(info.bad, info.stage == "compile")
    assert diags, f"{rule_id}: its example raises nothing"
    for d in diags:
        if d.is_error:
            assert d.hint and d.hint.strip(), f"{d.rule} has no hint: {d.message}"


def test_a_run_time_hint_that_comes_out_empty_gets_the_rule_reference():
    from dpspec.check.framework import diag

    d = diag("DPS608", "a message", None, hint=None)
    assert d.hint and "dpspec rules DPS608" in d.hint
    assert diag("DPS131", "a warning", None).hint is None  # warnings may go without
