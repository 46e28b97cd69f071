"""Printing specs: the canonical text of a syntax tree, and the lossless formatter behind ``dpspec fmt``.

One layout engine serves both:

- ``fmt(tree)`` prints a syntax tree alone: one setting per line, two-space indent, keys aligned,
  normalised literals, a blank line between blocks. It knows nothing of comments. Certificates
  embed and hash this text, so two specs that differ only in layout or comments get the same
  certificate. ``parse(fmt(t)) == t`` (tests check it with hypothesis).
- ``format_source(text)`` lays the same tree out and puts back what the tree does not hold: every
  comment (full-line and trailing, in order) and the user's blank-line grouping (runs of blank
  lines become one). Items keep their order. A value with a comment inside its brackets is laid
  out one item per line so the comment can stay where it was; a comment in a spot no layout can
  break (``C # here`` ``= 1``) moves to its own line just above. The result is idempotent and
  parses to the same tree; ``format_source`` re-parses its own output and refuses (raises
  ``FormatError``) rather than return text that lost a comment or changed the spec.

Placing comments uses source offsets only: each output line knows the source range of the tokens
it prints, and a comment goes after the line whose tokens precede it (trailing, when it sat on the
same source line) or before the next one.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from dpspec.errors import DpspecError
from dpspec.parse import ast

_INDENT = "  "


class FormatError(DpspecError, ValueError):
    """The formatter cannot produce text that keeps the spec and every comment (nothing is written)."""


# --- public entry points ------------------------------------------------------------------------


def fmt(spec: ast.SpecFile) -> str:
    """The canonical text of a syntax tree (no comments: the tree holds none)."""
    return _render(_Layout(None).file(spec), None)


def fmt_block(b: ast.Block) -> str:
    return _render(_Layout(None).file(ast.SpecFile((b,))), None)


def format_source(text: str, file: str = "<string>") -> str:
    """``dpspec fmt``: the canonical layout of ``text`` with its comments and blank-line groups kept.

    Raises ``SpecError`` when ``text`` does not parse, ``FormatError`` when the formatted text would
    not parse back to the same spec with the same comments (a limit, or a bug; nothing is lost).
    """
    from dpspec import limits
    from dpspec.diagnostics import SpecError
    from dpspec.parse.parser import parse_text

    tree, diags = parse_text(text, file)
    if tree is None:
        raise SpecError(diags, {file: text})
    src = _Source(text)
    out = _render(_Layout(src).file(tree), src)
    max_bytes = limits.limit("source_bytes")
    if len(out) > max_bytes:
        raise FormatError(
            f"the formatted text would have {len(out)} characters, over the limit of "
            f"{max_bytes} for a spec ({limits.LIMITS['source_bytes'].env}); the file is left "
            "as it is"
        )
    again, diags = parse_text(out, file)
    if again is None or again != tree:
        raise FormatError(
            "formatting would change the spec (a bug in dpspec fmt; please report it with "
            "the file); the file is left as it is"
        )
    if comments(out) != comments(text):
        raise FormatError(
            "formatting would lose or reorder a comment (a bug in dpspec fmt; please report it "
            "with the file); the file is left as it is"
        )
    return out


def comments(text: str) -> list[str]:
    """The comments of a spec that parses, in order, without trailing whitespace."""
    return [c.text for c in _scan_comments(text)]


# --- literals -----------------------------------------------------------------------------------


def value(v: ast.Value, *, as_written: bool = False) -> str:
    """A value on one line. ``as_written`` keeps what the user chose where the tree remembers it:
    numbers as spelled (``1e-4``, ``5%``) and a call's arguments in the order they were written (the
    tree keeps positional and keyword arguments apart); the canonical text normalises both."""
    if isinstance(v, ast.Ident):
        return v.name
    if isinstance(v, ast.Number):
        return v.text if as_written and v.text else number(v)
    if isinstance(v, ast.String):
        return _string(v.value)
    if isinstance(v, ast.Call):
        args = [
            f"{a.name} {a.op} {value(a.value, as_written=as_written)}"
            if isinstance(a, ast.Kwarg)
            else value(a, as_written=as_written)
            for a in _call_args(v, as_written)
        ]
        return f"{v.name}({', '.join(args)})"
    if isinstance(v, ast.SetLit):
        return "{" + ", ".join(value(x, as_written=as_written) for x in v.items) + "}"
    if isinstance(v, ast.ListLit):
        return "[" + ", ".join(value(x, as_written=as_written) for x in v.items) + "]"
    if isinstance(v, ast.TupleLit):
        inner = ", ".join(value(x, as_written=as_written) for x in v.items)
        return f"({inner},)" if len(v.items) == 1 else f"({inner})"
    if isinstance(v, ast.Membership):
        return f"{value(v.element, as_written=as_written)} in {value(v.collection, as_written=as_written)}"
    if isinstance(v, ast.Comparison):
        return f"{value(v.left, as_written=as_written)} {v.op} {value(v.right, as_written=as_written)}"
    if isinstance(v, ast.Definition):
        return f"{v.name} = {value(v.value, as_written=as_written)}"
    if isinstance(v, ast.NamedBlock):
        inner = " ".join(f"{x.key} {value(x.value, as_written=as_written)}" for x in v.entries)
        if not v.name:  # a setting's block of settings: `candidates { learning_rate [0.1] }`
            return f"{{ {inner} }}" if inner else "{}"
        return f"{v.name} {{ {inner} }}" if inner else f"{v.name} {{}}"
    raise TypeError(type(v))


def number(n: ast.Number) -> str:
    """Shortest text that reads back as the same number.

    Integers are printed from their digits, not from the float: ``2**53 + 1`` stays exact and a
    64-digit integer does not grow a 65th digit (which the parser's length limit would refuse).
    """
    if n.is_int:
        try:
            return str(int(n.text))
        except ValueError:  # a tree built in code, with no source text
            return str(int(n.value))
    t = _float_text(n.value)
    if re.fullmatch(r"[+-]?\d+", t):  # a float that happens to be whole keeps a decimal point
        t += ".0"
    return t


def _float_text(x: float) -> str:
    r = repr(float(x))
    if "e" in r:
        mant, exp = r.split("e")
        if mant.endswith(".0"):
            mant = mant[:-2]
        return f"{mant}e{int(exp)}"
    return r


def _string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _call_args(v: ast.Call, as_written: bool) -> list:
    args = list(v.args) + list(v.kwargs)
    if as_written and all(a.span is not None for a in args):
        args.sort(key=_source_position)
    return args


def _source_position(a: ast.Value | ast.Kwarg) -> tuple[int, int]:
    assert a.span is not None  # (arguments are sorted only when each has a span)
    return a.span.line, a.span.col


# --- the source: comments and offsets -------------------------------------------------------------


@dataclass(frozen=True)
class _Comment:
    start: int
    end: int
    text: str


# A string or a comment, whichever starts first: `#` inside a string is not a comment, and `"` can
# appear outside both only in text that does not parse.
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*')


def _scan_comments(text: str) -> list[_Comment]:
    return [
        _Comment(m.start(), m.end(), m.group().rstrip())
        for m in _STRING_OR_COMMENT.finditer(text)
        if m.group().startswith("#")
    ]


class _Source:
    """Offsets of a parsed text: span → offset, offset → line, where comments and blank lines are."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.comments = _scan_comments(text)
        self._comment_starts = [c.start for c in self.comments]

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col - 1

    def start(self, span) -> int:
        return self.offset(span.line, span.col)

    def end(self, span) -> int:
        return self.offset(span.end_line, span.end_col)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)

    def has_comment(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self._comment_starts, start)
        return i < len(self.comments) and self.comments[i].start < end

    def blank_line_between(self, start: int, end: int) -> bool:
        return self.text.count("\n", start, end) >= 2

    def next_char(self, pos: int, ch: str) -> int:
        """Offset of the next ``ch`` at or after ``pos``, skipping whitespace and comments."""
        i = pos
        while self.text[i] != ch:
            i = self.text.index("\n", i) + 1 if self.text[i] == "#" else i + 1
        return i


# --- layout: the tree as lines, each knowing the source range it prints --------------------------


@dataclass
class _Line:
    depth: int
    text: str = ""
    start: int | None = None  # source offset of the first token printed on this line
    end: int | None = None  # source offset just after the last one
    opens: bool = False  # ends with a bracket whose contents follow on their own lines
    closes: bool = False  # starts with the closing bracket of such contents
    blank_before: bool = False  # always preceded by a blank line (between top-level blocks)
    trailing: str | None = None  # a comment at the end of the line
    trailing_col: int = 0  # where it starts, counted from the indent

    def source_end(self) -> int:
        """``end``, which a line laid out from a source always has."""
        assert self.end is not None
        return self.end


class _Layout:
    def __init__(self, src: _Source | None):
        self.src = src
        self.lines: list[_Line] = []

    # building lines
    def _line(self, depth: int, **flags) -> None:
        self.lines.append(_Line(depth, **flags))

    def _put(self, text: str, start: int | None = None, end: int | None = None) -> None:
        line = self.lines[-1]
        line.text += text
        if start is not None:
            assert end is not None  # a printed token's source range has both ends
            line.start = start if line.start is None else line.start
            line.end = end if line.end is None else max(line.end, end)

    def _range(self, span) -> tuple[int | None, int | None]:
        if self.src is None or span is None:
            return None, None
        return self.src.start(span), self.src.end(span)

    @staticmethod
    def _bracket(pos: int | None) -> tuple[int | None, int | None]:
        return (pos, pos + 1) if pos is not None else (None, None)

    def _open_after(self, span, ch: str) -> int | None:
        """Source offset of the bracket ``ch`` that follows a name (comments may sit in between)."""
        if self.src is None or span is None:
            return None
        return self.src.next_char(self.src.end(span), ch)

    def _close_of(self, span) -> int | None:
        return None if self.src is None or span is None else self.src.end(span) - 1

    def _spread(self, v) -> bool:
        """Lay a container out one item per line: only to keep a comment written inside its brackets.

        A comment before the opening bracket (`f # x` `(1)`) moves above the line instead; spreading
        for it would not be idempotent, since the next run no longer finds it inside.
        """
        if self.src is None or v.span is None:
            return False
        if isinstance(v, (ast.SetLit, ast.ListLit, ast.TupleLit)):
            return self.src.has_comment(self.src.start(v.span), self.src.end(v.span))
        if isinstance(v, (ast.Call, ast.NamedBlock)):
            return self._inside_has_comment(
                self._open_after(v.name_span, "(" if isinstance(v, ast.Call) else "{"), self._close_of(v.span)
            )
        return False

    def _inside_has_comment(self, open_: int | None, close: int | None) -> bool:
        if self.src is None or open_ is None:
            return False
        assert close is not None  # a bracket found in the source closes there too
        return self.src.has_comment(open_, close)

    # the tree
    def file(self, spec: ast.SpecFile) -> list[_Line]:
        prev = None
        for item in spec.items:
            separate = prev is not None and (isinstance(item, ast.Block) or isinstance(prev, ast.Block))
            self._line(0, blank_before=separate)
            if isinstance(item, ast.Use):
                self._put(f"use {_string(item.path)}", *self._range(item.span))
            else:
                self._block(item)
            prev = item
        return self.lines

    def _block(self, b: ast.Block) -> None:
        start = self._range(b.kind_span)[0]
        self._put(f"{b.kind} {b.name} ", start, self._range(b.name_span)[1])
        self._body(b.entries, 0, b.name_span, b.span)

    def _body(self, entries, depth: int, name_span, span) -> None:
        """``{ entries }`` after a block's or named block's name."""
        open_, close = self._open_after(name_span, "{"), self._close_of(span)
        if not entries and not self._inside_has_comment(open_, close):
            self._put("{}", open_, None if close is None else close + 1)
            return
        self._put("{", *self._bracket(open_))
        self.lines[-1].opens = True
        width = max((len(e.key) for e in entries), default=0)
        for e in entries:
            self._entry(e, depth + 1, width)
        self._line(depth, closes=True)
        self._put("}", *self._bracket(close))

    def _entry(self, e: ast.Entry, depth: int, width: int) -> None:
        self._line(depth)
        key_start, key_end = self._range(e.key_span)
        if isinstance(e.value, ast.NamedBlock) and not e.value.name:
            self._put(e.key.ljust(width) + " ", key_start, key_end)
            self._body(e.value.entries, depth, e.key_span, e.value.span)
            return
        if isinstance(e.value, ast.NamedBlock):
            nb = e.value
            self._put(e.key.ljust(width), key_start, key_end)
            self._put(f" {nb.name} ", *self._range(nb.name_span))
            self._body(nb.entries, depth, nb.name_span, nb.span)
            return
        self._put(e.key.ljust(width) + " ", key_start, key_end)
        self._value(e.value, depth)

    def _value(self, v: ast.Value, depth: int) -> None:
        if isinstance(v, ast.Membership) and self.src is not None:  # either side may need spreading
            self._value(v.element, depth)
            self._put(" in ")
            self._value(v.collection, depth)
        elif isinstance(v, ast.Comparison) and self.src is not None:
            self._value(v.left, depth)
            self._put(f" {v.op} ")
            self._value(v.right, depth)
        elif isinstance(v, ast.Definition) and self.src is not None:
            self._put(f"{v.name} = ", *self._range(v.name_span))
            self._value(v.value, depth)
        elif not self._spread(v):
            self._put(value(v, as_written=self.src is not None), *self._range(v.span))
        elif isinstance(v, ast.Call):
            self._put(v.name, *self._range(v.name_span))
            self._items(_call_args(v, True), "(", ")", self._open_after(v.name_span, "("), v.span, depth)
        elif isinstance(v, (ast.SetLit, ast.ListLit, ast.TupleLit)):
            opener, closer = {ast.SetLit: ("{", "}"), ast.ListLit: ("[", "]"), ast.TupleLit: ("(", ")")}[type(v)]
            self._items(v.items, opener, closer, self._range(v.span)[0], v.span, depth)
        elif isinstance(v, ast.NamedBlock):
            self._put(f"{v.name} ", *self._range(v.name_span))
            self._body(v.entries, depth, v.name_span, v.span)
        else:
            raise TypeError(type(v))

    def _items(self, items, opener: str, closer: str, open_, span, depth: int) -> None:
        """Bracketed items one per line, each with a trailing comma (so `(x,)` stays a tuple)."""
        self._put(opener, *self._bracket(open_))
        self.lines[-1].opens = True
        for it in items:
            self._line(depth + 1)
            if isinstance(it, ast.Kwarg):
                self._put(f"{it.name} {it.op} ", *self._range(it.name_span))
                self._value(it.value, depth + 1)
            else:
                self._value(it, depth + 1)
            self._put(",")
        self._line(depth, closes=True)
        self._put(closer, *self._bracket(self._close_of(span)))


# --- rendering: lines, comments and blank lines ----------------------------------------------------


@dataclass
class _Out:
    """One printed line: a laid-out line or a comment on its own line."""

    depth: int
    text: str
    start: int | None
    end: int | None
    line: _Line | None = None
    blank_before: bool = False


def _render(lines: list[_Line], src: _Source | None) -> str:
    out = (
        _with_comments(lines, src)
        if src is not None
        else [_Out(ln.depth, ln.text, None, None, ln, ln.blank_before) for ln in lines]
    )
    _align_trailing(out)
    text: list[str] = []
    for o in out:
        if o.blank_before and text:
            text.append("")
        body = o.text
        if o.line is not None and o.line.trailing is not None:
            body = body.ljust(o.line.trailing_col) + o.line.trailing
        text.append(_INDENT * o.depth + body if body else "")
    return "\n".join(text) + "\n" if text else ""


def _with_comments(lines: list[_Line], src: _Source) -> list[_Out]:
    out: list[_Out] = []
    pending = list(src.comments)
    pending.reverse()  # a stack, first comment on top
    prev: _Line | None = None
    for ln in lines:
        # laid out from a parsed source, every line prints tokens with a source range
        assert ln.start is not None and ln.end is not None
        group: list[_Out] = []
        while pending and pending[-1].start < ln.start:
            c = pending.pop()
            if (
                prev is not None
                and prev.trailing is None
                and not group
                and src.line_of(c.start) == src.line_of(prev.source_end() - 1)
            ):
                prev.trailing = c.text  # it sat on the same line as the tokens printed just before
            else:
                depth = ln.depth + 1 if ln.closes else ln.depth
                group.append(_Out(depth, c.text, c.start, c.end))
        while pending and pending[-1].start < ln.end:  # inside tokens printed on one line: just above it
            c = pending.pop()
            # above a closing line it sits inside the brackets, as it will when read again (idempotence)
            group.append(_Out(ln.depth + 1 if ln.closes else ln.depth, c.text, ln.start, ln.start))
        group.append(_Out(ln.depth, ln.text, ln.start, ln.end, ln))
        _place_blank_lines(out, group, src, ln)
        out.extend(group)
        prev = ln
    tail: list[_Out] = []
    for c in reversed(pending):
        if (
            prev is not None
            and prev.trailing is None
            and not tail
            and src.line_of(c.start) == src.line_of(prev.source_end() - 1)
        ):
            prev.trailing = c.text
        else:
            tail.append(_Out(0, c.text, c.start, c.end))
    _place_blank_lines(out, tail, src, None)
    out.extend(tail)
    return out


def _place_blank_lines(out: list[_Out], group: list[_Out], src: _Source, ln: _Line | None) -> None:
    """Keep one blank line wherever the source had one or more, except just inside brackets; a block
    that must be separated from the item before it gets one before its leading comments."""
    prev = out[-1] if out else None
    for o in group:
        if (
            prev is not None
            and not (prev.line is not None and prev.line.opens)
            and not (o.line is not None and o.line.closes)
        ):
            assert prev.end is not None and o.start is not None  # (lines placed in a source have ranges)
            o.blank_before = src.blank_line_between(prev.end, o.start)
        prev = o
    if ln is not None and ln.blank_before and out and not any(o.blank_before for o in group):
        group[0].blank_before = True


def _align_trailing(out: list[_Out]) -> None:
    """Trailing comments of consecutive sibling lines share a column: a run ends at a blank line, a
    comment line, a change of depth, or a line that opens or closes brackets (which stands alone)."""
    run: list[_Line] = []

    def flush():
        col = max((len(_INDENT * ln.depth + ln.text) for ln in run if ln.trailing is not None), default=0) + 2
        for ln in run:
            ln.trailing_col = col - len(_INDENT * ln.depth)
        run.clear()

    for o in out:
        ln = o.line
        if (
            ln is None
            or o.blank_before
            or ln.opens
            or ln.closes
            or (run and (run[-1].depth != ln.depth or run[-1].opens or run[-1].closes))
        ):
            flush()
        if ln is not None:
            run.append(ln)
    flush()
