"""Editor support: the TextMate grammar covers every terminal of the lark grammar, its regexes compile,
the VS Code extension folder is consistent, and the documented problem matcher reads `dpspec check`."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpspec import editors
from dpspec.parse.parser import _lark
from tests.conftest import ROOT

VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((VSCODE / "syntaxes" / "dps.tmLanguage.json").read_text(encoding="utf-8"))
RULES = GRAMMAR["repository"]
TERMINALS = {t.name: t for t in _lark().terminals}

# which TextMate rule highlights each lark terminal (WS is ignored by the parser and left plain)
COVERED_BY = {"IDENT": "name", "NUMBER": "number", "STRING": "string", "COMMENT": "comment", "USE": "use",
              "IN": "in", "LBRACE": "brackets", "RBRACE": "brackets", "LPAR": "brackets", "RPAR": "brackets",
              "LSQB": "brackets", "RSQB": "brackets", "COMMA": "brackets", "EQUAL": "brackets",
              "COMPARE": "brackets"}


def test_committed_files_are_what_the_generator_writes():
    for rel, text in editors.files().items():
        assert (VSCODE / rel).read_text(encoding="utf-8") == text, "run `python -m dpspec.editors`"


def test_every_terminal_of_the_lark_grammar_is_covered():
    assert set(TERMINALS) - {"WS"} == set(COVERED_BY), "a terminal was added to or removed from the lark grammar"


def _regexes(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("match", "begin", "end", "regexp", "wordPattern", "increaseIndentPattern",
                     "decreaseIndentPattern") and isinstance(v, str):
                yield v
            else:
                yield from _regexes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _regexes(v)


def test_every_regex_compiles_with_python_re():
    found = list(_regexes(GRAMMAR)) + list(_regexes(json.loads((VSCODE / "language-configuration.json").read_text())))
    found += list(_regexes(json.loads((VSCODE / "package.json").read_text())))
    assert len(found) > 20
    for rx in found:
        re.compile(rx)


def _match_rule(rule: dict, text: str, at: int):
    """A `match` rule, or any of a `patterns` group, matching ``text`` at ``at``."""
    rules = rule["patterns"] if "patterns" in rule and "match" not in rule and "begin" not in rule else [rule]
    for r in rules:
        m = re.compile(r["match"]).match(text, at)
        if m:
            return m
    return None


def _string_extent(text: str) -> int:
    """Where the TextMate `string` rule ends a string that starts at 0: the earliest of the end pattern
    and the escape pattern wins at each position, the end pattern on a tie (the engine's rule)."""
    rule = RULES["string"]
    assert re.compile(rule["begin"]).match(text, 0)
    pos, end, esc = 1, re.compile(rule["end"]), re.compile(rule["patterns"][0]["match"])
    while pos <= len(text):
        e, x = end.search(text, pos), esc.search(text, pos)
        if x and (not e or x.start() < e.start()):
            pos = x.end()
            continue
        return e.end() if e else len(text)
    return len(text)


def _lark_regex(name: str) -> str:
    return TERMINALS[name].pattern.value


@given(st.from_regex(_lark_regex("IDENT"), fullmatch=True))
def test_names_are_highlighted_whole(tok):
    m = _match_rule(RULES["name"], " " + tok + " ", 1)
    assert m and m.group() == tok


@given(st.from_regex(_lark_regex("NUMBER"), fullmatch=True))
def test_numbers_are_highlighted_whole(tok):
    for context in (" {} ", "[{},", "= {})"):
        text = context.format(tok)
        m = _match_rule(RULES["number"], text, text.index(tok))
        assert m and m.group() == tok, text


def test_a_digit_inside_a_name_is_not_a_number():
    assert not _match_rule(RULES["number"], "x a-1 ", 4)
    assert not _match_rule(RULES["number"], "e1-5", 2)


@given(st.from_regex(_lark_regex("STRING"), fullmatch=True))
def test_strings_end_where_the_parser_ends_them(tok):
    assert _string_extent(tok + " rest") == len(tok)


@given(st.from_regex(_lark_regex("COMMENT"), fullmatch=True))
def test_comments_run_to_the_end_of_the_line(tok):
    m = _match_rule(RULES["comment"], tok, 0)
    assert m and m.group() == tok


@pytest.mark.parametrize("name, text, token", [
    ("USE", 'use "shared/people.dps"', "use"),
    ("IN", "secret race in {a, b}", "in"),
    *[(n, f"a {TERMINALS[n].pattern.value} b", TERMINALS[n].pattern.value)
      for n in ("LBRACE", "RBRACE", "LPAR", "RPAR", "LSQB", "RSQB", "COMMA", "EQUAL")],
])
def test_keywords_and_punctuation_are_highlighted(name, text, token):
    m = _match_rule(RULES[COVERED_BY[name]], text, text.index(token))
    assert m and m.group() == token
    assert not _match_rule(RULES["in"], "inside", 0) and not _match_rule(RULES["use"], "user", 0)


def test_language_words_come_from_the_compiler():
    from dpspec.lower.lowering import BLOCK_SETTINGS, MECHANISM_NAMES

    block = re.compile(RULES["block"]["begin"])
    for kind in BLOCK_SETTINGS:
        assert block.match(f"{kind} name {{").group(1) == kind
        for s in BLOCK_SETTINGS[kind]:
            assert _match_rule(RULES["setting"], f"{s.key} 1", 0).group() == s.key
    for mech in MECHANISM_NAMES:
        assert _match_rule(RULES["mechanism"], mech, 0).group() == mech
    assert _match_rule(RULES["form"], "sa_ave_srpp", 0).group() == "sa_ave_srpp"  # longest alternative first


def test_vscode_extension_manifest_is_consistent():
    pkg = json.loads((VSCODE / "package.json").read_text())
    (lang,) = pkg["contributes"]["languages"]
    (gram,) = pkg["contributes"]["grammars"]
    assert lang["extensions"] == [".dps"] and gram["language"] == lang["id"]
    assert gram["scopeName"] == GRAMMAR["scopeName"] == "source.dps"
    assert (VSCODE / gram["path"]).is_file() and (VSCODE / lang["configuration"]).is_file()
    config = json.loads((VSCODE / "language-configuration.json").read_text())
    assert config["comments"]["lineComment"] == "#"
    word = re.compile(config["wordPattern"])
    assert word.match("Asian-Pac-Islander").group() == "Asian-Pac-Islander" and word.match("1e-6").group() == "1e-6"


def test_the_problem_matcher_reads_what_dpspec_check_prints(tmp_path):
    spec = tmp_path / "bad.dps"
    spec.write_text("privacy p { unit record }\n"
                    "release r { mechanism gaussian  sensitivity 1  guarantee dp(epsilom = 1, delta = 1e-6) }\n"
                    "release s { mechanism gausian  sensitivity 1  guarantee dp(epsilon = 1, delta = 1e-6) }\n")

    def check(*fmt):
        return subprocess.run([sys.executable, "-m", "dpspec", "check", *fmt, str(spec)], capture_output=True,
                              text=True, timeout=60).stdout

    (matcher,) = json.loads((VSCODE / "package.json").read_text())["contributes"]["problemMatchers"]
    pat = matcher["pattern"]
    found = [m for m in map(re.compile(pat["regexp"]).match, check().split("\n")) if m]
    doc = json.loads(check("--format", "json"))["diagnostics"]
    assert len(found) == len(doc) >= 2
    for m, d in zip(found, doc):
        assert m.group(pat["file"]) == d["span"]["file"] and int(m.group(pat["line"])) == d["span"]["line"]
        assert int(m.group(pat["column"])) == d["span"]["col"] and m.group(pat["severity"]) == d["severity"]
        assert m.group(pat["code"]) == d["rule"] and m.group(pat["message"]) == d["message"]
