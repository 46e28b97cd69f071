"""Converting syntax-tree values into Python values, with located diagnostics on mismatch.

A converter takes a value node and returns the converted value, or ``_FAIL`` after recording a
diagnostic. Calls are checked against a signature: unknown keyword arguments get a "did you
mean" hint, missing required ones are named, positional arguments fill parameters in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dpspec import limits
from dpspec.diagnostics import Diagnostic, Span, did_you_mean
from dpspec.parse import ast


class _Fail:
    def __repr__(self):
        return "FAIL"


FAIL: Any = _Fail()


def sp(x) -> Span | None:
    return getattr(x, "span", None)


def rule_hint(rule: str) -> str:
    """The hint of last resort, for an error whose specific hint came out empty."""
    return f"`dpspec rules {rule}` shows this rule with an example and its fix"


class Reporter:
    """Collects diagnostics, at most ``limits.limit("diagnostics")`` of them; the rest are counted.

    A hint may be given as a function, computed only for a diagnostic that is kept: a hostile spec
    can hold a hundred thousand misspelt names, and "did you mean" is not free.
    """

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.max_diagnostics = limits.limit("diagnostics")
        self.errors = self.warnings = 0
        self.suppressed = 0

    def error(self, rule: str, message: str, span, hint: str | Callable[[], str] | None = None, notes=()) -> Any:
        # past the cap the spec is invalid anyway (it has that many errors): count, do not compute
        self.errors += 1
        if self.errors > self.max_diagnostics:
            self.suppressed += 1
            return FAIL
        hint = hint() if callable(hint) else hint
        self.diagnostics.append(Diagnostic(rule, message, span, hint or rule_hint(rule), "error", tuple(notes)))
        return FAIL

    def warning(self, rule: str, message: str, span, hint: str | Callable[[], str] | None = None) -> None:
        self.warnings += 1
        if self.warnings > self.max_diagnostics:
            self.suppressed += 1
            return
        self.diagnostics.append(Diagnostic(rule, message, span, hint() if callable(hint) else hint, "warning"))


# --- scalar converters ---------------------------------------------------------------------------


def _kind_error(r: Reporter, v, expected: str, example: str | None = None):
    got = ast.describe(v)
    if isinstance(v, ast.Ident) and v.name.lower() in ("nan", "inf", "infinity", "-inf"):
        return r.error("DPS106", f"`{v.name}` is not a finite number", sp(v), hint="use a finite number")
    hint = f"write {example}" if example else f"write {expected}"
    return r.error("DPS104", f"expected {expected}, found {got}", sp(v), hint=hint)


def number(r: Reporter, v, example: str = "a number such as 1.0 or 1e-6") -> Any:
    if isinstance(v, ast.Number):
        if not math.isfinite(v.value):
            return r.error("DPS106", f"`{v.text}` is not finite", sp(v), hint="use a finite number")
        return float(v.value)
    return _kind_error(r, v, "a number", example)


def integer(r: Reporter, v, example: str = "a whole number such as 1000") -> Any:
    if isinstance(v, ast.Number):
        # above 2^53 a float no longer holds every whole number: refuse rather than round
        if v.value != math.floor(v.value) or v.text.endswith("%") or abs(v.value) > 2**53:
            return r.error("DPS104", f"expected a whole number, found `{v.text}`", sp(v), hint=f"write {example}")
        return int(v.value)
    return _kind_error(r, v, "a whole number", example)


def name(r: Reporter, v, choices: tuple[str, ...] | None = None, what: str = "name") -> Any:
    if isinstance(v, ast.Ident):
        if choices is not None and v.name not in choices:
            return r.error("DPS104", f"unknown {what} `{v.name}`", sp(v), hint=lambda: did_you_mean(v.name, choices))
        return v.name
    if choices:
        return r.error(
            "DPS104", f"expected a {what}, found {ast.describe(v)}", sp(v), hint=lambda: did_you_mean("", choices, what)
        )
    return _kind_error(r, v, f"a {what}", "a name such as `x`" if what == "name" else None)


def string(r: Reporter, v) -> Any:
    if isinstance(v, ast.String):
        return v.value
    return _kind_error(r, v, "a string", 'a quoted string such as "data.csv"')


def label(r: Reporter, v) -> Any:
    """A name or a string or a number, as text (secret values, column names)."""
    if isinstance(v, ast.Ident):
        return v.name
    if isinstance(v, ast.String):
        return v.value
    if isinstance(v, ast.Number):
        return v.text
    return _kind_error(r, v, "a name or a string", '`race` or "race"')


def boolean(r: Reporter, v) -> Any:
    if isinstance(v, ast.Ident) and v.name in ("true", "false", "yes", "no", "on", "off"):
        return v.name in ("true", "yes", "on")
    return _kind_error(r, v, "`true` or `false`", "`true` or `false`")


def items_of(v) -> tuple | None:
    if isinstance(v, (ast.ListLit, ast.SetLit, ast.TupleLit)):
        return v.items
    return None


def sequence(r: Reporter, v, each: Callable, single_ok: bool = True) -> Any:
    items = items_of(v)
    if items is None:
        if single_ok:
            x = each(r, v)
            return FAIL if x is FAIL else (x,)
        return _kind_error(r, v, "a list", "a list such as [1, 2]")
    out = [each(r, x) for x in items]
    return FAIL if any(x is FAIL for x in out) else tuple(out)


def numbers(r: Reporter, v) -> Any:
    return sequence(r, v, number)


def labels(r: Reporter, v) -> Any:
    return sequence(r, v, label)


def pair_of_numbers(r: Reporter, v) -> Any:
    items = items_of(v)
    if items is None or len(items) != 2:
        return r.error("DPS104", f"expected a pair [lo, hi], found {ast.describe(v)}", sp(v), hint="write [0, 1]")
    lo, hi = number(r, items[0]), number(r, items[1])
    return FAIL if FAIL in (lo, hi) else (lo, hi)


def bounds(r: Reporter, v) -> Any:
    """``[lo, hi]`` for all columns, or ``[[lo, hi], [lo, hi], ...]`` per column."""
    items = items_of(v)
    if items and all(items_of(x) is not None for x in items):
        out = [pair_of_numbers(r, x) for x in items]
        return FAIL if FAIL in out else tuple(out)
    p = pair_of_numbers(r, v)
    return FAIL if p is FAIL else (p,)


def vectors(r: Reporter, v) -> Any:
    items = items_of(v)
    if items is None or not items:
        got = "an empty list" if items is not None else ast.describe(v)
        return r.error("DPS104", f"expected a list of vectors, found {got}", sp(v), hint="write [[1, 0], [0, 1]]")
    out = [
        numbers(r, x) if items_of(x) is not None else _kind_error(r, x, "a vector", "a vector such as [1, 0]")
        for x in items
    ]
    return FAIL if FAIL in out else tuple(out)


def label_pairs(r: Reporter, v) -> Any:
    items = items_of(v)
    if items is None:
        return _kind_error(r, v, "a list of pairs", "a list of pairs such as [(White, Black)]")
    out = []
    for x in items:
        xs = items_of(x)
        if xs is None or len(xs) != 2:
            out.append(
                r.error(
                    "DPS104", f"expected a pair (a, b), found {ast.describe(x)}", sp(x), hint="write (White, Black)"
                )
            )
            continue
        a, b = label(r, xs[0]), label(r, xs[1])
        out.append(FAIL if FAIL in (a, b) else (a, b))
    return FAIL if FAIL in out else tuple(out)


# --- calls ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    name: str
    convert: Callable
    required: bool = False
    aliases: tuple[str, ...] = ()
    positional: bool = True
    #: the converter of a range ``name in [lo, hi]`` (None: the parameter takes one value only)
    ranges: Callable | None = None


@dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...] = ()
    variadic: Callable | None = None  # converter for extra positional args (e.g. column names)
    variadic_name: str = "args"
    doc: str = ""
    example: str = ""
    one_of: tuple[tuple[str, ...], ...] = field(default=())  # exactly one of these must be given

    def names(self) -> list[str]:
        out = []
        for p in self.params:
            out.append(p.name)
            out.extend(p.aliases)
        return out


@dataclass
class Args:
    values: dict[str, Any]
    spans: dict[str, Span]
    variadic: tuple = ()
    variadic_spans: tuple = ()

    def get(self, k, default=None):
        return self.values.get(k, default)


def call_args(r: Reporter, v: ast.Call | ast.Ident, sig: Signature, what: str) -> Any:
    """Bind a call's arguments to ``sig``; a bare name counts as a call with no arguments."""
    args = v.args if isinstance(v, ast.Call) else ()
    kwargs = v.kwargs if isinstance(v, ast.Call) else ()
    fname = v.name
    values: dict[str, Any] = {}
    spans: dict[str, Span] = {}
    ok = True
    positional = [p for p in sig.params if p.positional]
    extra = []
    for i, a in enumerate(args):
        if i < len(positional) and sig.variadic is None:
            p = positional[i]
            x = p.convert(r, a)
            ok &= x is not FAIL
            values[p.name] = x
            if (s := sp(a)) is not None:
                spans[p.name] = s
        elif sig.variadic is not None:
            extra.append(a)
        else:
            ok = False
            r.error(
                "DPS114",
                f"`{fname}` takes at most {len(positional)} positional argument(s)",
                sp(a),
                hint=f"use keyword arguments: {sig.example or fname + '(...)'}",
            )
    by_name: dict[str, Param] = {}
    for p in sig.params:
        by_name[p.name] = p
        for al in p.aliases:
            by_name[al] = p
    for kw in kwargs:
        found = by_name.get(kw.name)
        if found is None:
            ok = False
            hint = (
                (lambda kw=kw: did_you_mean(kw.name, sig.names(), "argument"))
                if sig.names()
                else f"`{fname}` takes no keyword arguments"
            )
            r.error("DPS112", f"unknown argument `{kw.name}` for `{fname}`", kw.name_span or kw.span, hint=hint)
            continue
        p = found
        if p.name in values:
            ok = False
            r.error("DPS103", f"argument `{kw.name}` given twice", kw.name_span or kw.span, hint="keep one of them")
            continue
        convert = p.ranges if kw.op == "in" else p.convert
        if convert is None:
            ok = False
            r.error(
                "DPS104",
                f"`{kw.name} in ...` gives a range, but `{kw.name}` takes one value",
                kw.span,
                hint=f"write `{kw.name} = ...`" + (f"; for example: {sig.example}" if sig.example else ""),
            )
            continue
        x = convert(r, kw.value)
        ok &= x is not FAIL
        values[p.name] = x
        if (s := sp(kw.value)) is not None:
            spans[p.name] = s
    var_values = []
    for a in extra:
        assert sig.variadic is not None  # `extra` is filled only for a variadic signature
        x = sig.variadic(r, a)
        ok &= x is not FAIL
        var_values.append(x)
    for p in sig.params:
        if p.required and p.name not in values:
            ok = False
            r.error(
                "DPS113",
                f"`{fname}` needs the argument `{p.name}`",
                sp(v),
                hint=f"for example: {sig.example}" if sig.example else None,
            )
    for group in sig.one_of:
        given = [g for g in group if g in values]
        if len(given) != 1:
            ok = False
            names = " or ".join(f"`{g}`" for g in group)
            msg = (
                f"`{fname}` needs exactly one of {names}"
                if not given
                else f"`{fname}` takes only one of {names}, not both"
            )
            r.error("DPS113", msg, sp(v), hint=f"for example: {sig.example}" if sig.example else None)
    if not ok:
        return FAIL
    return Args(values, spans, tuple(var_values), tuple(sp(a) for a in extra))


def dispatch(r: Reporter, v, table: dict[str, Signature], what: str) -> Any:
    """A value that must be one of the calls in ``table`` (a bare name is a call with no args)."""
    if isinstance(v, (ast.Call, ast.Ident)):
        sig = table.get(v.name)
        if sig is None:
            span = v.name_span if isinstance(v, ast.Call) and v.name_span else sp(v)
            return r.error("DPS111", f"unknown {what} `{v.name}`", span, hint=lambda: did_you_mean(v.name, table, what))
        a = call_args(r, v, sig, what)
        return FAIL if a is FAIL else (v.name, a)
    examples = "; ".join(s.example for s in list(table.values())[:3] if s.example)
    return r.error(
        "DPS104",
        f"expected a {what}, found {ast.describe(v)}",
        sp(v),
        hint=f"for example: {examples}" if examples else lambda: did_you_mean("", table, what),
    )
