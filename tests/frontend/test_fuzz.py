"""Hostile input: the front end always answers with diagnostics, never a traceback or a hang."""

import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.diagnostics import SpecError, render_all
from tests.conftest import SPECS

EXAMPLES = [p.read_text() for p in sorted(SPECS.glob("*.dps"))]


def assert_well_behaved(text: str):
    t0 = time.perf_counter()
    spec = dpspec.loads(text, name="fuzz.dps")
    assert time.perf_counter() - t0 < 5.0
    rendered = render_all(spec.diagnostics, spec.sources)  # rendering never raises
    if not spec.ok:
        assert spec.errors, "an invalid spec must carry at least one error"
        for d in spec.errors:
            assert d.rule.startswith("DPS")
        assert "Traceback" not in rendered
    return spec


@given(st.text(max_size=300))
def test_random_text(text):
    assert_well_behaved(text)


@given(st.text(alphabet=st.sampled_from(list("{}[](),=#\"% \n\tabcxyz019.-eEin")), max_size=200))
def test_random_text_from_the_language_alphabet(text):
    assert_well_behaved(text)


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(EXAMPLES))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "truncate", "duplicate", "swap"]))
        i = draw(st.integers(0, max(0, len(text) - 1)))
        j = draw(st.integers(i, min(len(text), i + 20)))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.text(max_size=8)) + text[i:]
        elif op == "truncate":
            text = text[:i]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + text[j:] + text[i:j]
    return text


@given(mutated())
@settings(max_examples=150)
def test_mutated_example_specs(text):
    spec = assert_well_behaved(text)
    if not spec.ok:
        with pytest.raises(SpecError):  # bad input never produces a certificate
            dpspec.compile(spec)


@pytest.mark.parametrize("text,rule", [
    ("", "DPS008"),
    ("   \n# only a comment\n", "DPS008"),
    ("release r { guarantee dp(epsilon = nan, delta = 1e-6) }", "DPS106"),
    ("release r { guarantee dp(epsilon = 1e400, delta = 1e-6) }", "DPS106"),
    ("release r { x " + "[" * 100 + "]" * 100 + " }", "DPS007"),
    ("release r { x " + "9" * 100 + " }", "DPS106"),
    ("réléase r { mechanism gaussian }", "DPS001"),
    ("privacy p { unit record }\x00", "DPS006"),
    ('use "missing.dps"\nprivacy p { unit record }', "DPS004"),
    ("release r {", "DPS003"),
    ("release r { mechanism gaussian } }", "DPS001"),
    ('release r { description "unterminated }', "DPS002"),
])
def test_named_hostile_inputs(text, rule):
    spec = assert_well_behaved(text)
    assert not spec.ok
    assert rule in {d.rule for d in spec.diagnostics}


def test_megabyte_input_is_bounded():
    text = "privacy p { unit record }\n" + ("# filler line\n" * 70000)
    t0 = time.perf_counter()
    assert_well_behaved(text)
    assert time.perf_counter() - t0 < 5
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
