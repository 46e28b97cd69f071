"""Hostile specs and data: every case ends in a certificate or in diagnostics (each error with a
rule id and a hint) — never a traceback, a hang, or the compiler's last-resort DPS011.

The generators (``spec_strategies.py``) cover the grammar, the language's own tables, byte, token
and value mutations of the example specs, mutated data files and mutated bound data; the engine
(``specfuzz.py``) runs each case against a small generated data root with lowered limits. This
file runs a bounded budget (about half a minute); ``benchmarks/fuzz_specs.py --minutes N`` runs
the same generators for as long as asked, with a memory limit. Every finding ever made is kept
in ``corpus/specs/`` and replayed here.
"""

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.diagnostics import SpecError, render_all
from tests.fuzz import spec_strategies as S
from tests.fuzz.specfuzz import CORPUS, Case, base_files, corpus_cases, run_case
from tests.guards import cpu_budget

BUDGET = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
# relational DP-SGD's accountant takes about a minute per compile: checked here, compiled in the long run
SLOW_MECHANISMS = ("relational_dpsgd",)


def assert_no_finding(case: Case, compile: bool = True, time_limit: float = 30.0):
    compile = compile and not any(m in case.spec for m in SLOW_MECHANISMS)
    outcome = run_case(case, compile=compile, time_limit=time_limit)
    assert not outcome.is_finding, f"{outcome.kind}: {outcome.detail}\n--- spec ---\n{case.spec[:3000]}"
    return outcome


# --- the front end alone ------------------------------------------------------------------------------


def assert_well_behaved(text: str):
    with cpu_budget(5, "checking a fuzzed spec"):
        spec = dpspec.loads(text, name="fuzz.dps")
    rendered = render_all(spec.diagnostics, spec.sources)  # rendering never raises
    if not spec.ok:
        assert spec.errors, "an invalid spec must carry at least one error"
        for d in spec.errors:
            assert d.rule.startswith("DPS") and d.hint
        assert "Traceback" not in rendered
    return spec


@given(st.text(max_size=300))
def test_random_text(text):
    assert_well_behaved(text)


@given(st.text(alphabet=st.sampled_from(list("{}[](),=#\"\\% \n\tabcxyz019.-eEin")), max_size=200))
def test_random_text_from_the_language_alphabet(text):
    assert_well_behaved(text)


@given(S.grammar_texts())
@settings(max_examples=60, **BUDGET)
def test_grammar_texts(text):
    assert_well_behaved(text)


@pytest.mark.parametrize("text,rule", [
    ("", "DPS008"),
    ("   \n# only a comment\n", "DPS008"),
    ("release r { guarantee dp(epsilon = nan, delta = 1e-6) }", "DPS106"),
    ("release r { guarantee dp(epsilon = 1e400, delta = 1e-6) }", "DPS106"),
    ("release r { x " + "[" * 100 + "]" * 100 + " }", "DPS007"),
    ("release r { x " + "9" * 100 + " }", "DPS106"),
    ("release r { x 9007199254740993 }", "DPS106"),  # above 2^53: refused, never rounded
    ("release r { x " + "e" * 70 + " y " + "9" * 5000 + " }", "DPS106"),  # a long run without digits first
    ("réléase r { mechanism gaussian }", "DPS001"),
    ("privacy p { unit record }\x00", "DPS006"),
    ('use "missing.dps"\nprivacy p { unit record }', "DPS004"),
    ("release r {", "DPS003"),
    ("release r { mechanism gaussian } }", "DPS001"),
    ('release r { description "unterminated }', "DPS002"),
    # an escaped backslash before the closing quote once hid the brackets after it from the nesting
    # limit, and the parser recursed until Python's stack gave out
    ('release r { s "a\\\\" x ' + "[" * 5000 + "]" * 5000 + " }", "DPS007"),
    ('release r { s "\\\\\\\\" x ' + "(" * 3000 + " }", "DPS007"),
])
def test_named_hostile_inputs(text, rule):
    spec = assert_well_behaved(text)
    assert not spec.ok
    assert rule in {d.rule for d in spec.diagnostics}


def test_megabyte_input_is_bounded():
    text = "privacy p { unit record }\n" + ("# filler line\n" * 70000)
    with cpu_budget(5, "checking a megabyte of comments"):
        assert_well_behaved(text)
    huge = "x" * 1_100_000
    spec = assert_well_behaved(huge)
    assert [d.rule for d in spec.errors] == ["DPS007"]


def test_binary_file_is_a_diagnostic(tmp_path):
    p = tmp_path / "bin.dps"
    p.write_bytes(bytes(range(256)) * 4)
    spec = dpspec.load(p)
    assert not spec.ok and spec.errors[0].rule == "DPS004" and "UTF-8" in spec.errors[0].message


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage", b"release r { mechanism gaussian",
                                     b"privacy p { unit record }\nrelease r { mechanism gaussian sensitivity 1 "
                                     b"guarantee dp(epsilon = -1, delta = 1e-6) }"])
def test_cli_never_shows_a_traceback(tmp_path, content):
    p = tmp_path / "bad.dps"
    p.write_bytes(content)
    cmds = [["check", str(p)], ["compile", str(p), "-o", str(tmp_path / "c.json")]]
    if content and b"epsilon = -1" not in content:
        cmds.append(["fmt", str(p)])  # fmt formats any syntactically valid file, even a meaningless one
    for cmd in cmds:
        r = subprocess.run([sys.executable, "-m", "dpspec", *cmd], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert "Traceback" not in r.stdout + r.stderr
    assert not (tmp_path / "c.json").exists()


# --- through the compiler ---------------------------------------------------------------------------------


@given(S.mutated_examples())
@settings(max_examples=40, **BUDGET)
def test_mutated_example_specs(text):
    outcome = assert_no_finding(Case(text))
    if outcome.kind == "invalid":
        spec = dpspec.loads(text, name="fuzz.dps")
        if not spec.ok:
            with pytest.raises(SpecError):  # bad input never produces a certificate
                dpspec.compile(spec)


@given(S.language_specs())
@settings(max_examples=40, **BUDGET)
def test_specs_from_the_language_tables(text):
    assert_no_finding(Case(text))


@given(S.examples().flatmap(S.value_mutations))
@settings(max_examples=20, **BUDGET)
def test_example_specs_with_extreme_values(text):
    assert_no_finding(Case(text))


_BASE_FILES = base_files()


@given(S.data_cases(_BASE_FILES))
@settings(max_examples=15, **BUDGET)
def test_mutated_data_files(case):
    assert_no_finding(case)


@given(S.bound_cases())
@settings(max_examples=20, **BUDGET)
def test_mutated_bound_data(case):
    assert_no_finding(case, compile=True)


# --- every finding so far, replayed ----------------------------------------------------------------------

_CORPUS = corpus_cases()


@pytest.mark.parametrize("name,case", _CORPUS, ids=[n for n, _ in _CORPUS])
def test_corpus_case_is_handled(name, case):
    # (relational cases compile too: the corpus holds few, and each was a real finding)
    outcome = run_case(case, time_limit=300)
    assert not outcome.is_finding, f"{name}: {outcome.kind}: {outcome.detail}"


def test_the_corpus_is_not_empty():
    assert CORPUS.is_dir() and _CORPUS, "the corpus keeps every finding as a regression test"


@pytest.mark.slow
def test_the_long_run_harness_runs_and_finds_nothing(tmp_path):
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_specs.py"
    r = subprocess.run([sys.executable, str(script), "--seconds", "12", "--memory-mb", "3000", "--seed", "7"],
                       capture_output=True, text=True, timeout=240)
    assert "cases run:" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
