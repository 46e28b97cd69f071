"""The syntax tree of a .dps file: generic blocks of ``key value`` settings, with source spans.

The tree says nothing about privacy; the lowering stage gives it meaning. Equality ignores
spans, so that ``parse(fmt(s)) == parse(s)`` compares structure, not layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpspec.diagnostics import Span


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Ident:
    name: str
    span: Span | None = _span()


@dataclass(frozen=True)
class Number:
    """A numeric literal. ``text`` is what was written; ``value`` is its float value (5% → 0.05)."""

    value: float
    text: str
    is_int: bool = False
    span: Span | None = _span()

    def __eq__(self, other):  # compare by value: `1e3` and `1000` are the same number
        return isinstance(other, Number) and self.value == other.value and self.is_int == other.is_int

    def __hash__(self):
        return hash((self.value, self.is_int))


@dataclass(frozen=True)
class String:
    value: str
    span: Span | None = _span()


@dataclass(frozen=True)
class Kwarg:
    """``name = value``, or with ``op = "in"`` a range ``p in [0.2, 0.5]``."""

    name: str
    value: Value
    span: Span | None = _span()
    name_span: Span | None = _span()
    op: str = "="


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Value, ...]
    kwargs: tuple[Kwarg, ...]
    span: Span | None = _span()
    name_span: Span | None = _span()


@dataclass(frozen=True)
class SetLit:
    items: tuple[Value, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class ListLit:
    items: tuple[Value, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class TupleLit:
    items: tuple[Value, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class Membership:
    """``race in {White, Black}``."""

    element: Value
    collection: Value
    span: Span | None = _span()


@dataclass(frozen=True)
class Comparison:
    """``num > 0``: a predicate on a record, or a keyword argument's value (``where = sex == "Female"``);
    ``op`` one of <, <=, >, >=, ==, !=."""

    left: Value
    op: str
    right: Value
    span: Span | None = _span()


@dataclass(frozen=True)
class Definition:
    """``disease = num > 0``: a named derived value (a comparison or an ``in`` test)."""

    name: str
    value: Value
    span: Span | None = _span()
    name_span: Span | None = _span()


@dataclass(frozen=True)
class NamedBlock:
    """``coupled { positive poisson(...) negative ... }``."""

    name: str
    entries: tuple[Entry, ...]
    span: Span | None = _span()
    name_span: Span | None = _span()


Value = Ident | Number | String | Call | SetLit | ListLit | TupleLit | Membership | NamedBlock | Comparison | Definition


@dataclass(frozen=True)
class Entry:
    key: str
    value: Value
    span: Span | None = _span()
    key_span: Span | None = _span()


@dataclass(frozen=True)
class Block:
    kind: str
    name: str
    entries: tuple[Entry, ...]
    span: Span | None = _span()
    kind_span: Span | None = _span()
    name_span: Span | None = _span()
    file: str = field(default="", compare=False)


@dataclass(frozen=True)
class Use:
    path: str
    span: Span | None = _span()


@dataclass(frozen=True)
class SpecFile:
    items: tuple[Use | Block, ...]
    file: str = field(default="<string>", compare=False)

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(i for i in self.items if isinstance(i, Block))

    @property
    def uses(self) -> tuple[Use, ...]:
        return tuple(i for i in self.items if isinstance(i, Use))


def describe(v: Value) -> str:
    """A short noun phrase for a value's syntactic form, used in messages."""
    return {
        Ident: "a name",
        Number: "a number",
        String: "a string",
        Call: "a call",
        SetLit: "a set",
        ListLit: "a list",
        TupleLit: "a tuple",
        Membership: "an `in` expression",
        NamedBlock: "a block",
        Comparison: "a comparison",
        Definition: "a definition (`name = ...`)",
    }.get(type(v), "a value")
