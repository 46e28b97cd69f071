"""The rule catalogue: every rule has an example that raises it and a fix that does not."""

from pathlib import Path

import pytest

import dpspec
from dpspec.check import CATALOGUE, catalogue
from dpspec.diagnostics import render

IDS = sorted(catalogue())


def rules_raised(text):
    spec = dpspec.loads(text, name="example.dps")
    return spec, {d.rule for d in spec.diagnostics}


def compile_rules(text):
    """Rules raised while compiling (data-dependent rules)."""
    spec = dpspec.loads(text, name="example.dps")
    assert spec.ok, [render(d, spec.sources) for d in spec.diagnostics]
    try:
        dpspec.compile(spec)
    except dpspec.SpecError as e:
        return {d.rule for d in e.diagnostics}, e
    return set(), None


@pytest.mark.parametrize("rule_id", IDS)
def test_bad_example_raises_the_rule(rule_id):
    info = CATALOGUE[rule_id]
    if info.bad.startswith("(see tests"):
        pytest.skip("covered by a dedicated test")
    if info.stage == "compile":
        raised, err = compile_rules(info.bad)
        if raised == {"DPS419"} and rule_id != "DPS419":
            pytest.skip("the example reads a real dataset and no data folder is on this machine (DPS419)")
        assert rule_id in raised, f"{rule_id} not raised while compiling its example; raised {raised}"
        d = [d for d in err.diagnostics if d.rule == rule_id][0]
        assert d.span is not None and "^" in render(d, err.sources)
        return
    spec, raised = rules_raised(info.bad)
    assert rule_id in raised, f"{rule_id} not raised by its example; raised {raised}"
    if info.severity == "error":
        assert not spec.ok


@pytest.mark.parametrize("rule_id", IDS)
def test_good_example_is_clean(rule_id):
    spec, raised = rules_raised(CATALOGUE[rule_id].good)
    assert rule_id not in raised
    assert spec.ok, [render(d, spec.sources) for d in spec.diagnostics]
    if CATALOGUE[rule_id].stage == "compile":
        assert rule_id not in compile_rules(CATALOGUE[rule_id].good)[0]


@pytest.mark.parametrize("rule_id", IDS)
def test_diagnostics_have_location_and_hint(rule_id):
    info = CATALOGUE[rule_id]
    if info.bad.startswith("(see tests") or info.stage == "compile":
        pytest.skip("covered by a dedicated test")
    spec, _ = rules_raised(info.bad)
    for d in spec.diagnostics:
        if d.rule == rule_id and d.rule != "DPS004":
            assert d.span is not None and d.span.line >= 1 and d.span.col >= 1
            text = render(d, spec.sources)
            assert f"error[{rule_id}]" in text or f"warning[{rule_id}]" in text
            assert "^" in text, text


def test_rule_ids_are_well_formed():
    for r in IDS:
        assert len(r) == 6 and r.startswith("DPS") and r[3:].isdigit()


def test_rules_doc_is_current():
    from dpspec.docs import rules_markdown

    doc = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
    assert doc.read_text(encoding="utf-8") == rules_markdown(), "run `python -m dpspec.docs` to regenerate docs/"


def test_did_you_mean_hints():
    spec = dpspec.loads("privacy p { unit record }\nrelease r { mechanism gaussian  sensitivity 1  "
                        "guarantee dp(epsilom = 1, delta = 1e-6) }")
    d = [d for d in spec.diagnostics if d.rule == "DPS112"][0]
    assert d.hint == "did you mean `epsilon`?"
    spec = dpspec.loads("privacy p { unit record }\nrelease r { mechanism gaussian  sensitivity 1  "
                        "guarantee rdp(alpha = 1, epsilon = 1) }")
    d = [d for d in spec.diagnostics if d.rule == "DPS105"][0]
    assert "alpha must be > 1" in d.message


def test_all_problems_reported_at_once():
    spec = dpspec.loads(
        "privacy p { unit recrd }\n"
        "release r { mechanism gaussian  sensitivity -1  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
        "release s { protect q  mechanism gaussian  sensitivity 1  guarantee dp(epsilon = 0, delta = 1e-6) }\n")
    raised = sorted((d.span.line, d.rule) for d in spec.diagnostics)
    assert (1, "DPS111") in raised and (2, "DPS105") in raised and (3, "DPS105") in raised
    assert (3, "DPS108") in raised


def test_language_doc_is_current():
    from dpspec.docs import language_markdown

    doc = Path(__file__).resolve().parents[2] / "docs" / "language.md"
    assert doc.read_text(encoding="utf-8") == language_markdown(), "run `python -m dpspec.docs` to regenerate docs/"


def test_rule_docs_hold_no_control_characters():
    # a NUL byte in DPS006's example once made docs/rules.md a binary file to git
    doc = (Path(__file__).resolve().parents[2] / "docs" / "rules.md").read_bytes()
    assert not [b for b in set(doc) if b < 0x20 and b not in (0x09, 0x0a)]
