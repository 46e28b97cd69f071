"""The checker: a catalogue of named rules, each a small function IR → diagnostics.

A rule is registered with ``@rule(id, title, bad=..., good=...)``. The ``bad`` example must raise
the rule and the ``good`` example must not: the test-suite runs every example, so the catalogue
(``docs/rules.md``) cannot drift from the code. Front-end rules (syntax, names, types) are
raised by the parser and the lowering stage; they are registered with ``register_front_end`` so
that they share the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from dpspec.diagnostics import Diagnostic, Severity, Span
from dpspec.ir import models as ir

_S = TypeVar("_S", bound=ir.TrainingSettings)


@dataclass(frozen=True)
class RuleInfo:
    id: str
    title: str
    stage: str  # "parse", "lower" or "check"
    bad: str  # a spec that raises this rule
    good: str  # a corrected spec that does not
    explanation: str = ""
    severity: Severity = "error"


@dataclass
class Context:
    """What a rule can see: the IR plus the names of blocks that failed to lower."""

    spec: ir.SpecIR
    failed: set[str] = field(default_factory=set)
    _definitions: dict[str, ir.Scenario | ir.PrivacyUnitDecl] | None = field(default=None, repr=False)
    _sensitivities: dict = field(default_factory=dict, repr=False)

    def release_sensitivity(self, release, unit, n):
        """``dpspec.compiler.sensitivity.release_sensitivity``, computed once per release: several rules
        (DPS129, DPS140) need it, and the exact derivation was 40 % of `check` on a large spec."""
        key = (id(release), id(unit), n)  # the IR outlives the context, so ids are stable here
        if key not in self._sensitivities:
            from dpspec.compiler.sensitivity import release_sensitivity

            self._sensitivities[key] = release_sensitivity(release, unit, n)
        return self._sensitivities[key]

    def definition(self, name: str) -> ir.Scenario | ir.PrivacyUnitDecl | None:
        """The scenario or privacy block called ``name`` (the first one), by an index built once:
        rules look definitions up for every target, and a scan per lookup made `check` quadratic."""
        if self._definitions is None:
            index: dict[str, ir.Scenario | ir.PrivacyUnitDecl] = {}
            for d in self.declarations():
                index.setdefault(d.name, d)
            self._definitions = index
        return self._definitions.get(name)

    def resolve_protects(self, target) -> ir.Scenario | ir.PrivacyUnitDecl | None:
        if target.protects:
            return self.definition(target.protects)
        defs = self.declarations()
        return defs[0] if len(defs) == 1 else None

    def declarations(self) -> list[ir.Scenario | ir.PrivacyUnitDecl]:
        """The scenario and privacy blocks, scenarios first."""
        return [*self.spec.scenarios, *self.spec.units]

    def releases_and_trainings(self) -> tuple[ir.Release | ir.Training, ...]:
        """The releases, then the trainings."""
        return (*self.spec.releases, *self.spec.trainings)


CATALOGUE: dict[str, RuleInfo] = {}
CHECKS: list[tuple[str, Callable[[Context], Iterator[Diagnostic]]]] = []


def rule(id: str, title: str, *, bad: str, good: str, explanation: str = "", severity: Severity = "error"):
    def deco(fn):
        CATALOGUE[id] = RuleInfo(id, title, "check", bad, good, explanation or (fn.__doc__ or "").strip(), severity)
        CHECKS.append((id, fn))
        return fn

    return deco


def also(id: str):
    """Another check raising rule ``id`` (catalogued by its ``@rule`` elsewhere): a family's rule module
    adding the cases of a shared rule that only its mechanism has."""

    def deco(fn):
        CHECKS.append((id, fn))
        return fn

    return deco


def trainings_of(ctx: Context, module: str):
    """The trainings whose family lists rule module ``module`` in its ``rules`` (``dpspec.families``):
    a rule module shared by some families checks theirs without naming them."""
    from dpspec.families import FAMILIES

    for t in ctx.spec.trainings:
        f = FAMILIES.get(t.mechanism)
        if f is not None and module in f.rules:
            yield t


def trainings_with(ctx: Context, cls: type[_S]):
    """``(training, its settings)`` for the trainings whose settings are of model ``cls``: a family's rule
    module picks its trainings by their settings model, and reads them typed."""
    for t in ctx.spec.trainings:
        s = t.settings
        if isinstance(s, cls):
            yield t, s


def releases_of(ctx: Context, module: str):
    """The releases whose family lists rule module ``module`` in its ``rules``."""
    from dpspec.families import FAMILIES

    for r in ctx.spec.releases:
        f = FAMILIES.get(r.mechanism)
        if f is not None and module in f.rules:
            yield r


def setting(t, name: str):
    """Setting ``name`` of a training (from its family's settings model) or a release, or None when the
    target's family has no such setting: for the rules that apply to every family that has it."""
    node = t.settings if isinstance(t, ir.Training) else t
    # (a miss through pydantic's getattr is slow, and rules ask this of every target)
    return getattr(node, name) if name in type(node).model_fields else None


def register_front_end(id: str, title: str, stage: str, *, bad: str, good: str, explanation: str = ""):
    CATALOGUE[id] = RuleInfo(id, title, stage, bad, good, explanation)


def span_of(node, fieldname: str | None = None) -> Span | None:
    s = node.span_of(fieldname) if fieldname else node.span
    if s is None:
        return None
    return Span(s.file, s.line, s.col, s.end_line, s.end_col)


def diag(
    id: str,
    message: str,
    node=None,
    fieldname: str | None = None,
    hint: str | None = None,
    notes=(),
    severity: Severity | None = None,
) -> Diagnostic:
    info = CATALOGUE.get(id)
    sev = severity or (info.severity if info else "error")
    if not hint and sev == "error":  # a hint computed at run time (an exception's, a suggestion) came out empty
        hint = f"`dpspec rules {id}` shows this rule with an example and its fix"
    return Diagnostic(id, message, span_of(node, fieldname) if node is not None else None, hint, sev, tuple(notes))


def run_checks(spec: ir.SpecIR, failed: set[str] | None = None) -> list[Diagnostic]:
    """Every rule's diagnostics, at most ``limits.limit("diagnostics")`` errors (and as many
    warnings): once that many errors are found the spec is invalid whatever else is wrong, so no
    rule is asked for more, and a spec with thousands of broken blocks stays fast. Warnings never
    stop the search for errors."""
    from dpspec import limits

    ctx = Context(spec, failed or set())
    cap = limits.limit("diagnostics")
    out: list[Diagnostic] = []
    errors = warnings = 0
    for _id, fn in CHECKS:
        if errors >= cap:
            break
        try:
            for d in fn(ctx):
                if d.is_error:
                    errors += 1
                    out.append(d)
                    if errors >= cap:
                        break
                elif warnings < cap:
                    warnings += 1
                    out.append(d)
        except (ArithmeticError, ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as e:
            # a rule that cannot cope with some input is a gap in that rule; the spec is refused
            # with a diagnostic (never a traceback), and the other rules still run
            errors += 1
            out.append(
                Diagnostic(
                    "DPS011",
                    f"check {_id} could not be completed on this spec: {type(e).__name__}: {str(e)[:200]}",
                    Span.point(spec.file, 1, 1),
                    hint="check the values this rule is about (`dpspec rules " + _id + "`); if they "
                    "look right, this is a gap in dpspec's checks (please report it)",
                )
            )
    return out
