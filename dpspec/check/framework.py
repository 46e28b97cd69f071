"""The checker: a catalogue of named rules, each a small function IR → diagnostics.

A rule is registered with ``@rule(id, title, bad=..., good=...)``. The ``bad`` example must raise
the rule and the ``good`` example must not: the test-suite runs every example, so the catalogue
(``docs/rules.md``) cannot drift from the code. Front-end rules (syntax, names, types) are
raised by the parser and the lowering stage; they are registered with ``register_front_end`` so
that they share the catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from dpspec.diagnostics import Diagnostic, Span
from dpspec.ir import models as ir


@dataclass(frozen=True)
class RuleInfo:
    id: str
    title: str
    stage: str  # "parse", "lower" or "check"
    bad: str  # a spec that raises this rule
    good: str  # a corrected spec that does not
    explanation: str = ""
    severity: str = "error"


@dataclass
class Context:
    """What a rule can see: the IR plus the names of blocks that failed to lower."""

    spec: ir.SpecIR
    failed: set[str] = field(default_factory=set)

    def resolve_protects(self, target) -> "ir.Scenario | ir.PrivacyUnitDecl | None":
        if target.protects:
            return self.spec.definition(target.protects)
        defs = [*self.spec.scenarios, *self.spec.units]
        return defs[0] if len(defs) == 1 else None


CATALOGUE: dict[str, RuleInfo] = {}
CHECKS: list[tuple[str, Callable[[Context], Iterator[Diagnostic]]]] = []


def rule(id: str, title: str, *, bad: str, good: str, explanation: str = "", severity: str = "error"):
    def deco(fn):
        CATALOGUE[id] = RuleInfo(id, title, "check", bad, good, explanation or (fn.__doc__ or "").strip(), severity)
        CHECKS.append((id, fn))
        return fn

    return deco


def register_front_end(id: str, title: str, stage: str, *, bad: str, good: str, explanation: str = ""):
    CATALOGUE[id] = RuleInfo(id, title, stage, bad, good, explanation)


def span_of(node, fieldname: str | None = None) -> Span | None:
    s = node.span_of(fieldname) if fieldname else node.span
    if s is None:
        return None
    return Span(s.file, s.line, s.col, s.end_line, s.end_col)


def diag(id: str, message: str, node=None, fieldname: str | None = None, hint: str | None = None,
         notes=(), severity: str | None = None) -> Diagnostic:
    info = CATALOGUE.get(id)
    sev = severity or (info.severity if info else "error")
    return Diagnostic(id, message, span_of(node, fieldname) if node is not None else None, hint, sev, tuple(notes))


def run_checks(spec: ir.SpecIR, failed: set[str] | None = None) -> list[Diagnostic]:
    ctx = Context(spec, failed or set())
    out: list[Diagnostic] = []
    for _id, fn in CHECKS:
        out.extend(fn(ctx))
    return out
