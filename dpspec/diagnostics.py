"""Diagnostics: what every stage reports to a person, with a location, a rule id and a hint.

Invariants:
- A diagnostic always names a rule id (``DPSnnn``) from the catalogue in ``dpspec.check.rules``
  (or the front-end ids in ``FRONT_END_RULES``), so that editors, CI and docs can refer to it.
- Spans are 1-based (line, column) pairs, end exclusive, as editors show them.
- Rendering never raises: a span that points outside the text renders without a caret.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, NamedTuple

from dpspec.errors import DpspecError

Severity = Literal["error", "warning", "note"]


class Span(NamedTuple):
    """A region of a source file: 1-based line and column, end exclusive.

    A named tuple rather than a dataclass: the parser makes one per token, and a tuple is several
    times cheaper to build, which keeps `dpspec check` fast on large specs.
    """

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    @staticmethod
    def point(file: str, line: int, col: int, width: int = 1) -> Span:
        return Span(file, line, col, line, col + max(width, 1))

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
        }


@dataclass(frozen=True)
class Diagnostic:
    rule: str
    message: str
    span: Span | None = None
    hint: str | None = None
    severity: Severity = "error"
    notes: tuple[str, ...] = field(default=())

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "span": self.span.to_dict() if self.span else None,
            "hint": self.hint,
            "notes": list(self.notes),
        }


class SpecError(DpspecError):
    """Raised by the Python API when a spec has errors; carries every diagnostic."""

    def __init__(self, diagnostics: Sequence[Diagnostic], sources: dict[str, str] | None = None):
        self.diagnostics = list(diagnostics)
        self.sources = dict(sources or {})
        super().__init__(render_all(self.diagnostics, self.sources) or "invalid spec")


def sort_key(d: Diagnostic):
    s = d.span
    return (s.file if s else "", s.line if s else 0, s.col if s else 0, d.rule)


def render(d: Diagnostic, sources: dict[str, str]) -> str:
    """Render like a compiler: ``file:line:col: error[DPS104]: message``, source line, caret, hint."""
    s = d.span
    where = f"{s.file}:{s.line}:{s.col}: " if s else ""
    out = [_escaped_text(f"{where}{d.severity}[{d.rule}]: {d.message}")]
    text = sources.get(s.file) if s else None
    if s and text is not None:
        lines = text.split("\n")
        if 1 <= s.line <= len(lines):
            src = lines[s.line - 1].replace("\t", " ")
            # Very long lines (minified or fuzzed input) are cut around the caret.
            start = 0
            if len(src) > 160:
                start = max(0, s.col - 60)
                src = ("…" if start else "") + src[start : start + 120] + "…"
            gutter = str(s.line)
            pad = " " * len(gutter)
            col0 = s.col - 1 - start + (1 if start else 0)
            width = (s.end_col - s.col) if s.end_line == s.line else max(1, len(src) - col0)
            width = max(1, min(width, max(1, len(src) - col0)))
            # control and bidi characters are shown escaped (a spec's bytes never reach the terminal as
            # escape sequences or reorder the line), the caret widened to match
            shown = [_escaped(ch) for ch in src]
            col0, width = (
                sum(map(len, shown[: max(col0, 0)])),
                max(1, sum(map(len, shown[max(col0, 0) : max(col0, 0) + width]))),
            )
            src = "".join(shown)
            out.append(f" {pad} |")
            out.append(f" {gutter} | {src}")
            out.append(f" {pad} | {' ' * max(col0, 0)}{'^' * width}")
    if d.hint:
        out.append(_escaped_text(f"  = hint: {d.hint}"))
    for n in d.notes:
        out.append(_escaped_text(f"  = note: {n}"))
    return "\n".join(out)


def _escaped(ch: str) -> str:
    return ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")


def _escaped_text(text: str) -> str:
    """``text`` with control and format (bidi) characters escaped, newlines kept."""
    return "".join(ch if ch == "\n" else _escaped(ch) for ch in text)


def render_all(diags: Iterable[Diagnostic], sources: dict[str, str]) -> str:
    return "\n\n".join(render(d, sources) for d in sorted(diags, key=sort_key))


def to_json(diags: Iterable[Diagnostic]) -> str:
    items = [d.to_dict() for d in sorted(diags, key=sort_key)]
    return json.dumps(
        {
            "ok": not any(d["severity"] == "error" for d in items),
            "errors": sum(d["severity"] == "error" for d in items),
            "warnings": sum(d["severity"] == "warning" for d in items),
            "diagnostics": items,
        },
        indent=2,
    )


# Fuzzy matching costs time per candidate; beyond a few hundred candidates (a generated or hostile
# spec) only an exact match up to case is offered, so that a hint stays cheap.
_MAX_FUZZY_CANDIDATES = 300


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to a misspelt name, or None."""
    return _suggest(name, _prepared(tuple(candidates)))


@lru_cache(maxsize=32)
def _prepared(cands: tuple[str, ...]) -> tuple[list[str] | None, dict[str, str], str, int]:
    """What hints need from a candidate list, computed once per list: a spec with thousands of
    misspelt references asks for hints against the same (possibly long) list again and again.
    Returns (sorted candidates if few enough for fuzzy matching, lower-case → candidate,
    the first twelve for display, number of distinct candidates)."""
    import heapq

    distinct = set(cands)
    fuzzy = sorted(distinct) if len(distinct) <= _MAX_FUZZY_CANDIDATES else None
    lower: dict[str, str] = {}
    for c in sorted(distinct) if fuzzy is None else fuzzy:
        lower.setdefault(c.lower(), c)
    first = heapq.nsmallest(12, distinct)
    shown = ", ".join(f"`{c}`" for c in first) + (", …" if len(distinct) > 12 else "")
    return fuzzy, lower, shown, len(distinct)


def _suggest(name: str, prepared) -> str | None:
    import difflib

    fuzzy, lower, _shown, _n = prepared
    if fuzzy is not None:
        best = difflib.get_close_matches(name, fuzzy, n=1, cutoff=0.6)
        if best:
            return best[0]
    return lower.get(name.lower())


def did_you_mean(name: str, candidates: Iterable[str], what: str = "") -> str:
    prepared = _prepared(tuple(candidates))
    if not prepared[3]:
        return ""
    s = _suggest(name, prepared)
    if s:
        return f"did you mean `{s}`?"
    shown = prepared[2]
    return f"valid {what}s: {shown}" if what else f"expected one of {shown}"
