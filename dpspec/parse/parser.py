"""Text → syntax tree. Never lets a lark exception reach a user: every failure is a Diagnostic.

Front-end limits keep hostile input bounded: size, nesting depth and number length are capped
before lark sees the text, so parsing is linear-time and cannot exhaust the stack.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from dpspec.diagnostics import Diagnostic, Span
from dpspec.parse import ast

MAX_SOURCE_BYTES = 1_000_000
MAX_NESTING = 32
MAX_NUMBER_CHARS = 64

_GRAMMAR_PATH = Path(__file__).resolve().parent.parent / "dpspec.lark"

# Human names for lark terminal names, used in "expected ..." messages.
_TOKEN_NAMES = {
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "COMMA": "`,`",
    "EQUAL": "`=`",
    "IDENT": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "IN": "`in`",
    "USE": "`use`",
    "$END": "end of file",
}


@lru_cache(maxsize=1)
def _lark():
    import lark

    return lark.Lark(
        _GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=False,
        cache=True,  # pickled parser tables: keeps `dpspec check` start-up fast
    )


def grammar_text() -> str:
    return _GRAMMAR_PATH.read_text(encoding="utf-8")


def parse_text(text: str, file: str = "<string>") -> tuple[ast.SpecFile | None, list[Diagnostic]]:
    """Parse one file's text. Returns (tree or None, diagnostics); never raises on bad input."""
    diags = _precheck(text, file)
    if diags:
        return None, diags
    import lark

    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedInput as e:
        first = _syntax_diagnostic(e, text, file)
        return None, [first] + _more_syntax_errors(text, file, first)
    except RecursionError:
        return None, [
            Diagnostic("DPS007", "the spec is nested too deeply", Span.point(file, 1, 1),
                       hint=f"keep nesting below {MAX_NESTING} levels")
        ]
    try:
        return _Builder(file).file(tree), []
    except _NumberError as e:
        return None, [e.diag]


class _NumberError(Exception):
    def __init__(self, diag: Diagnostic):
        self.diag = diag


def _precheck(text: str, file: str) -> list[Diagnostic]:
    """Reject input lark should not see: oversize, control bytes, runaway nesting or digits."""
    if len(text) > MAX_SOURCE_BYTES:
        return [Diagnostic("DPS007", f"the spec is too large ({len(text)} characters)",
                           Span.point(file, 1, 1), hint=f"specs are limited to {MAX_SOURCE_BYTES} characters")]
    m = re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", text)
    if m:
        line, col = _line_col(text, m.start())
        return [Diagnostic("DPS006", f"unexpected control character {m.group()!r}",
                           Span.point(file, line, col), hint="a .dps file is UTF-8 text; is this a binary file?")]
    depth = 0
    for i, ch in _brackets(text):
        if ch in "{[(":
            depth += 1
            if depth > MAX_NESTING:
                line, col = _line_col(text, i)
                return [Diagnostic("DPS007", "the spec is nested too deeply", Span.point(file, line, col),
                                   hint=f"keep nesting below {MAX_NESTING} levels")]
        else:
            depth = max(0, depth - 1)
    m = re.search(r"[0-9.eE+\-]{%d,}" % (MAX_NUMBER_CHARS + 1), text)
    if m and re.search(r"\d", m.group()):
        line, col = _line_col(text, m.start())
        return [Diagnostic("DPS106", "number literal is too long", Span(file, line, col, line, col + len(m.group())),
                           hint=f"write numbers with at most {MAX_NUMBER_CHARS} characters, e.g. 1e-12")]
    return []


MAX_SYNTAX_ERRORS = 20


def _top_level_segments(text: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level item: text up to and including a `}` that closes depth 0."""
    segs, depth, start = [], 0, 0
    for i, ch in _brackets(text):
        if ch in "{[(":
            depth += 1
            continue
        depth -= 1
        if depth <= 0:
            depth = 0
            if ch == "}":
                segs.append((start, i + 1))
                start = i + 1
    if text[start:].strip():
        segs.append((start, len(text)))
    return segs


def _more_syntax_errors(text: str, file: str, first: Diagnostic) -> list[Diagnostic]:
    """Error recovery: parse each top-level block on its own so every broken block is reported."""
    import lark

    out: list[Diagnostic] = []
    for start, end in _top_level_segments(text):
        line, col = _line_col(text, start)
        seg = "\n" * (line - 1) + " " * (col - 1) + text[start:end]
        try:
            _lark().parse(seg)
        except lark.exceptions.UnexpectedInput as e:
            d = _syntax_diagnostic(e, seg, file)
            if d.span != first.span and all(d.span != o.span for o in out):
                out.append(d)
        except RecursionError:
            continue
        if len(out) >= MAX_SYNTAX_ERRORS:
            break
    return out


def _brackets(text: str):
    """(position, character) of every bracket outside strings and comments."""
    in_str = in_comment = False
    for i, ch in enumerate(text):
        if in_comment:
            in_comment = ch != "\n"
        elif in_str:
            if (ch == '"' and text[i - 1] != "\\") or ch == "\n":
                in_str = False
        elif ch == "#":
            in_comment = True
        elif ch == '"':
            in_str = True
        elif ch in "{[()]}":
            yield i, ch


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _expected(names) -> str:
    shown = sorted({_TOKEN_NAMES.get(n, f"`{n.lower()}`") for n in names if not n.startswith("__")})
    if not shown:
        return ""
    if len(shown) > 6:
        shown = shown[:6] + ["…"]
    return "expected " + ", ".join(shown)


def _syntax_diagnostic(e, text: str, file: str) -> Diagnostic:
    import lark

    line = getattr(e, "line", 1) or 1
    col = getattr(e, "column", 1) or 1
    if line < 1:
        line, col = _line_col(text, len(text))
    if isinstance(e, lark.exceptions.UnexpectedCharacters):
        ch = text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(text) else ""
        if ch == '"':
            return Diagnostic("DPS002", "unterminated string", Span.point(file, line, col),
                              hint='close the string with `"` on the same line')
        return Diagnostic("DPS001", f"unexpected character {ch!r}", Span.point(file, line, col),
                          hint=_expected(e.allowed) or None)
    if isinstance(e, lark.exceptions.UnexpectedEOF) or (
        isinstance(e, lark.exceptions.UnexpectedToken) and e.token.type == "$END"
    ):
        exp = getattr(e, "expected", None) or getattr(e, "accepts", None) or set()
        eline, ecol = _line_col(text, len(text.rstrip()))
        opened = _unclosed_open(text)
        if opened is not None:
            oline, ocol = _line_col(text, opened[0])
            closer = {"{": "}", "[": "]", "(": ")"}[opened[1]]
            return Diagnostic("DPS003", f"expected `{closer}` before the end of the file",
                              Span.point(file, eline, max(ecol, 1)),
                              hint=f"`{opened[1]}` opened at line {oline}, column {ocol} is never closed")
        return Diagnostic("DPS001", "unexpected end of file", Span.point(file, eline, max(ecol, 1)),
                          hint=_expected(exp) or None)
    if isinstance(e, lark.exceptions.UnexpectedToken):
        tok = e.token
        width = len(str(tok)) or 1
        exp = set(e.expected or ())
        shown = str(tok)
        if tok.type == "NUMBER" and exp and "NUMBER" not in exp and "IDENT" in exp:
            hint = "a setting name must start with a letter"
        elif "RBRACE" in exp and tok.type in ("STRING", "NUMBER"):
            hint = "expected a setting name or `}`"
        elif exp == {"LBRACE"} or (exp and exp <= {"LBRACE", "IDENT"} and "LBRACE" in exp):
            hint = "a block is written `kind name { ... }`"
        else:
            hint = _expected(exp) or None
        return Diagnostic("DPS001", f"unexpected {_describe_token(tok)} `{shown}`",
                          Span(file, line, col, line, col + width), hint=hint)
    return Diagnostic("DPS001", "syntax error", Span.point(file, line, col))


def _describe_token(tok) -> str:
    return {"IDENT": "name", "NUMBER": "number", "STRING": "string"}.get(tok.type, "symbol")


def _unclosed_open(text: str):
    """Position and character of the innermost bracket left open at the end, ignoring strings/comments."""
    stack = []
    for i, ch in _brackets(text):
        if ch in "{[(":
            stack.append((i, ch))
        elif stack:
            stack.pop()
    return stack[-1] if stack else None


class _Builder:
    """lark tree → ast, attaching spans."""

    def __init__(self, file: str):
        self.f = file

    def span(self, node) -> Span | None:
        meta = getattr(node, "meta", None)
        if meta is not None and not getattr(meta, "empty", True):
            return Span(self.f, meta.line, meta.column, meta.end_line, meta.end_column)
        if hasattr(node, "line") and node.line is not None:  # a Token
            return Span(self.f, node.line, node.column, node.end_line, node.end_column)
        return None

    def file(self, tree) -> ast.SpecFile:
        items = []
        for ch in tree.children:
            if ch.data == "use_stmt":
                items.append(ast.Use(_unquote(ch.children[0]), self.span(ch)))
            else:
                items.append(self.block(ch))
        return ast.SpecFile(tuple(items), file=self.f)

    def block(self, t) -> ast.Block:
        kind, name, *entries = t.children
        return ast.Block(str(kind), str(name), tuple(self.entry(e) for e in entries), self.span(t),
                         self.span(kind), self.span(name), file=self.f)

    def entry(self, t) -> ast.Entry:
        key, value = t.children
        return ast.Entry(str(key), self.value(value), self.span(t), self.span(key))

    def items(self, t) -> tuple:
        if t is None:
            return ()
        return tuple(self.value(c) for c in t.children)

    def value(self, t):
        from lark import Token

        if isinstance(t, Token):  # bare token never reaches here with this grammar
            return ast.Ident(str(t), self.span(t))
        d = t.data
        c = t.children
        sp = self.span(t)
        if d == "ident":
            return ast.Ident(str(c[0]), sp)
        if d == "number":
            return self.number(c[0], sp)
        if d == "string":
            return ast.String(_unquote(c[0]), sp)
        if d == "call":
            args, kwargs = [], []
            if len(c) > 1:
                for a in c[1].children:
                    if getattr(a, "data", None) == "kwarg":
                        kwargs.append(ast.Kwarg(str(a.children[0]), self.value(a.children[1]),
                                                self.span(a), self.span(a.children[0])))
                    else:
                        args.append(self.value(a))
            return ast.Call(str(c[0]), tuple(args), tuple(kwargs), sp, self.span(c[0]))
        if d == "named_block":
            return ast.NamedBlock(str(c[0]), tuple(self.entry(e) for e in c[1:]), sp, self.span(c[0]))
        if d == "set":
            return ast.SetLit(self.items(c[0] if c else None), sp)
        if d == "list":
            return ast.ListLit(self.items(c[0] if c else None), sp)
        if d == "tuple":
            rest = self.items(c[1]) if len(c) > 1 else ()
            return ast.TupleLit((self.value(c[0]),) + rest, sp)
        if d == "membership":
            return ast.Membership(self.value(c[0]), self.value(c[1]), sp)
        raise AssertionError(f"unknown tree node {d}")

    def number(self, tok, sp) -> ast.Number:
        text = str(tok)
        pct = text.endswith("%")
        body = text[:-1] if pct else text
        v = float(body)
        if v != v or v in (float("inf"), float("-inf")):
            raise _NumberError(Diagnostic("DPS106", f"number `{text}` is not finite", sp,
                                          hint="use a finite number, e.g. 1e300 at most"))
        is_int = not pct and re.fullmatch(r"[+-]?\d+", body) is not None
        if pct:
            v = v / 100.0
        return ast.Number(v, text, is_int, sp)


def _unquote(tok) -> str:
    s = str(tok)[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)
