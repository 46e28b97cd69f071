"""Editor support generated from the language's own definitions, so highlighting cannot drift.

    python -m dpspec.editors   # rewrites editors/vscode/syntaxes/dps.tmLanguage.json and
                               # editors/vscode/language-configuration.json

The TextMate grammar takes its token regexes (names, numbers, strings, comments) from the lark
terminals of ``dpspec/dpspec.lark`` and its word lists (block kinds, setting keys, value forms,
mechanisms) from the compiler's tables. The test-suite fails when the committed files differ from
what this writes, and checks that every terminal of the lark grammar is covered.

Regexes are written in the common subset of Oniguruma (what TextMate engines run) and Python's
``re``: groups, classes, ``\\b``, fixed-width look-behind, no possessive quantifiers or ``\\h``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

SCOPE = "source.dps"
ROOT = Path(__file__).resolve().parent.parent / "editors" / "vscode"


def _terminals() -> dict[str, str]:
    """name → regex source of every lark terminal (string literals escaped)."""
    from dpspec.parse.parser import _lark

    return {
        t.name: (t.pattern.value if type(t.pattern).__name__ == "PatternRE" else re.escape(t.pattern.value))
        for t in _lark().terminals
    }


def _words() -> dict[str, list[str]]:
    """The names the compiler gives meaning to, by role."""
    from dpspec.lower import lowering as L

    forms: set[str] = set()
    for table in (
        L.GUARANTEES,
        L.SAMPLINGS,
        L.NEGATIVES,
        L.CLIPPINGS,
        L.SLICES,
        L.NOISES,
        L.QUERIES,
        L.UNITS,
        L.DATA,
        L.PROPAGATIONS,
        L.LOSSES,
        L.ENCODERS,
        L.SPLITS,
        L.EXECUTIONS,
        L.DISCREPANCIES,
        L.LR_SCHEDULES,
        L.WORLDS,
    ):
        forms.update(table)
    keys = {s.key for ss in L.BLOCK_SETTINGS.values() for s in ss}
    keys |= {a for ss in L.BLOCK_SETTINGS.values() for s in ss for a in s.aliases}
    keys |= {"positive", "negative"}  # the settings of a `coupled { … }` sampling block
    return {
        "blocks": sorted(L.BLOCK_SETTINGS),
        "settings": sorted(keys),
        "forms": sorted(forms | {"coupled"}),
        "mechanisms": sorted(L.MECHANISM_NAMES),
    }


def _alternation(words) -> str:
    # longest first, so `sa_ave_srpp` is not read as `sa`… and dashes are not word boundaries
    return "(?:" + "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w))) + ")"


# a name is not part of a longer name (names may contain `-`, which `\b` treats as a boundary)
_NOT_NAME_BEFORE = r"(?<![A-Za-z0-9_\-])"
_NOT_NAME_AFTER = r"(?![A-Za-z0-9_\-])"


def textmate_grammar() -> dict:
    t, w = _terminals(), _words()
    ident = t["IDENT"]
    word = lambda alts: _NOT_NAME_BEFORE + alts + _NOT_NAME_AFTER  # noqa: E731
    number = _NOT_NAME_BEFORE.replace("\\-", "\\-.") + t["NUMBER"] + _NOT_NAME_AFTER
    repository = {
        "comment": {
            "name": "comment.line.number-sign.dps",
            "match": t["COMMENT"].replace("#", "(#)", 1),
            "captures": {"1": {"name": "punctuation.definition.comment.dps"}},
        },
        "string": {
            "name": "string.quoted.double.dps",
            "begin": t["STRING"][0],
            "end": '(")|$',
            "beginCaptures": {"0": {"name": "punctuation.definition.string.begin.dps"}},
            "endCaptures": {"1": {"name": "punctuation.definition.string.end.dps"}},
            "patterns": [{"name": "constant.character.escape.dps", "match": r"\\."}],
        },
        "number": {"name": "constant.numeric.dps", "match": number},
        "use": {"match": word(t["USE"]) + r'(?=\s*")', "name": "keyword.control.import.dps"},
        "in": {"match": word(t["IN"]), "name": "keyword.operator.in.dps"},
        "block": {
            "begin": rf"{_NOT_NAME_BEFORE}({ident})\s+({ident})\s*(\{{)",
            "beginCaptures": {
                "1": {"name": "storage.type.block.dps"},
                "2": {"name": "entity.name.type.dps"},
                "3": {"name": "punctuation.section.block.begin.dps"},
            },
            "end": r"\}",
            "endCaptures": {"0": {"name": "punctuation.section.block.end.dps"}},
            "patterns": [{"include": "#body"}],
        },
        # inside a block: a named sub-block's `{ … }` nests, so its `}` does not end the block
        "body": {
            "patterns": [
                {"include": "#comment"},
                {"include": "#string"},
                {"include": "#braces"},
                {"include": "#setting"},
                {"include": "#value"},
            ]
        },
        "braces": {
            "begin": t["LBRACE"],
            "end": t["RBRACE"],
            "beginCaptures": {"0": {"name": "punctuation.section.braces.dps"}},
            "endCaptures": {"0": {"name": "punctuation.section.braces.dps"}},
            "patterns": [{"include": "#body"}],
        },
        "setting": {"match": word(_alternation(w["settings"])) + r"(?=\s)", "name": "variable.other.property.dps"},
        "kwarg": {
            "match": rf"{_NOT_NAME_BEFORE}({ident})\s*({t['EQUAL']})(?!=)",
            "captures": {"1": {"name": "variable.parameter.dps"}, "2": {"name": "keyword.operator.assignment.dps"}},
        },
        "call": {
            "match": rf"{_NOT_NAME_BEFORE}({ident})(?=\s*{t['LPAR']})",
            "captures": {"1": {"name": "entity.name.function.dps"}},
        },
        "form": {"match": word(_alternation(w["forms"])), "name": "support.function.dps"},
        "mechanism": {"match": word(_alternation(w["mechanisms"])), "name": "support.constant.mechanism.dps"},
        "name": {"match": ident, "name": "variable.other.dps"},
        "brackets": {
            "patterns": [
                {"match": f"{t['LBRACE']}|{t['RBRACE']}", "name": "punctuation.section.braces.dps"},
                {"match": f"{t['LSQB']}|{t['RSQB']}", "name": "punctuation.section.brackets.dps"},
                {"match": f"{t['LPAR']}|{t['RPAR']}", "name": "punctuation.section.parens.dps"},
                {"match": t["COMMA"], "name": "punctuation.separator.comma.dps"},
                {"match": t["COMPARE"], "name": "keyword.operator.comparison.dps"},
                {"match": t["EQUAL"], "name": "keyword.operator.assignment.dps"},
            ]
        },
        "value": {
            "patterns": [
                {"include": f"#{k}"}
                for k in ("comment", "string", "number", "in", "kwarg", "call", "mechanism", "form", "name", "brackets")
            ]
        },
    }
    return {
        "$schema": "https://raw.githubusercontent.com/martinring/tmlanguage/master/tmlanguage.json",
        "name": "dpspec",
        "scopeName": SCOPE,
        "fileTypes": ["dps"],
        "comment": "Generated by `python -m dpspec.editors` from dpspec/dpspec.lark and the compiler's tables; "
        "do not edit by hand.",
        "patterns": [
            {"include": "#comment"},
            {"include": "#use"},
            {"include": "#string"},
            {"include": "#block"},
            {"include": "#value"},
        ],
        "repository": repository,
    }


def language_configuration() -> dict:
    t = _terminals()
    return {
        "comments": {"lineComment": "#"},
        "brackets": [["{", "}"], ["[", "]"], ["(", ")"]],
        "autoClosingPairs": [
            {"open": "{", "close": "}"},
            {"open": "[", "close": "]"},
            {"open": "(", "close": ")"},
            {"open": '"', "close": '"', "notIn": ["string", "comment"]},
        ],
        "surroundingPairs": [["{", "}"], ["[", "]"], ["(", ")"], ['"', '"']],
        # a name keeps its dashes (`Asian-Pac-Islander` is one word); numbers keep exponent and `%`
        "wordPattern": f"{t['NUMBER']}|{t['IDENT']}",
        "indentationRules": {
            "increaseIndentPattern": r"^[^#]*[\{\[\(]\s*(#.*)?$",
            "decreaseIndentPattern": r"^\s*[\}\]\)]",
        },
    }


def _dump(obj: dict) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def files() -> dict[str, str]:
    """Path relative to editors/vscode → content."""
    return {
        "syntaxes/dps.tmLanguage.json": _dump(textmate_grammar()),
        "language-configuration.json": _dump(language_configuration()),
    }


def write(root: Path = ROOT) -> None:
    for rel, text in files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write()
    print("wrote " + ", ".join(f"editors/vscode/{rel}" for rel in files()))
