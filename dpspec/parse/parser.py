"""Text → syntax tree. Never lets an exception reach a user: every failure is a Diagnostic.

The grammar is ``dpspec/dpspec.lark`` (copied to ``grammar/dpspec.lark``), an LALR(1) grammar
that documents the language. It is small enough to be parsed by the hand-written recursive-descent
parser below, which is several times faster than a generic parser and builds the syntax tree
directly; ``tests/frontend/test_grammar_oracle.py`` checks with generated and mutated inputs that
both accept the same texts and build the same trees.

Hostile input stays bounded: the text's size, the number of tokens, the nesting depth, the
length of a number and the size of a list are capped (``dpspec.limits``), every step is linear
in the text, and the nesting depth is enforced by the parser itself, so no input can exhaust the
stack.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from pathlib import Path

from dpspec import limits as L
from dpspec.diagnostics import Diagnostic, Span
from dpspec.parse import ast

MAX_SYNTAX_ERRORS = 20

_GRAMMAR_PATH = Path(__file__).resolve().parent.parent / "dpspec.lark"

# Human names for token kinds (the grammar's terminal names), used in "expected ..." messages.
_TOKEN_NAMES = {
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "COMMA": "`,`",
    "EQUAL": "`=`",
    "COMPARE": "a comparison (`>`, `<=`, `==`, …)",
    "IDENT": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "IN": "`in`",
    "USE": "`use`",
    "$END": "end of file",
}

# One alternative per terminal of the grammar, in the grammar's own regular expressions; `bad` is
# any other character (a lexical error, reported when the parser reaches it).
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\f\r\n]+)
  | (?P<comment>\#[^\n]*)
  | (?P<IDENT>[A-Za-z_](?:[A-Za-z0-9_\-]*[A-Za-z0-9_])?)
  | (?P<NUMBER>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?)
  | (?P<STRING>"[^"\\\n]*(?:\\.[^"\\\n]*)*")  # "(?:[^"\\\n]|\\.)*", unrolled: linear, no backtracking
  | (?P<LBRACE>\{) | (?P<RBRACE>\}) | (?P<LSQB>\[) | (?P<RSQB>\]) | (?P<LPAR>\() | (?P<RPAR>\))
  | (?P<COMMA>,) | (?P<COMPARE>[<>]=?|[=!]=) | (?P<EQUAL>=)
  | (?P<bad>.)
""",
    re.X | re.S,
)

_PRIMARY_START = ("IDENT", "NUMBER", "STRING", "LBRACE", "LSQB", "LPAR")
_CLOSER = {"LBRACE": "RBRACE", "LSQB": "RSQB", "LPAR": "RPAR"}
_MAX_INT_EXACT = 2**53  # integers above this cannot be held exactly by a float


def grammar_text() -> str:
    return _GRAMMAR_PATH.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _lark():
    """The published grammar as a lark LALR parser: the reference the hand-written parser below is
    tested against (same trees, same spans), and the terminals the editor grammars are generated from."""
    import lark

    return lark.Lark(grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=False)


def parse_text(text: str, file: str = "<string>") -> tuple[ast.SpecFile | None, list[Diagnostic]]:
    """Parse one file's text. Returns (tree or None, diagnostics); never raises on bad input."""
    diags = _precheck(text, file)
    if diags:
        return None, diags
    src = _Source(text, file)
    try:
        return _Parser(src, 0, len(text)).spec_file(), []
    except _Stop as e:
        first = e.diag
    if first.rule in ("DPS007", "DPS106"):  # a limit: no point in looking further
        return None, [first]
    return None, [first] + _more_syntax_errors(src, first)


class _Stop(Exception):
    """Parsing stops here with one diagnostic."""

    def __init__(self, diag: Diagnostic):
        self.diag = diag


def _precheck(text: str, file: str) -> list[Diagnostic]:
    """Reject input the parser should not see: oversize, control bytes, runaway digits."""
    max_bytes = L.limit("source_bytes")
    if len(text) > max_bytes:
        return [
            Diagnostic(
                "DPS007",
                f"the spec is too large ({len(text):,} characters, the limit is {max_bytes:,})",
                Span.point(file, 1, 1),
                hint=L.hint("source_bytes"),
            )
        ]
    m = re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", text)
    if m:
        line, col = _line_col(text, m.start())
        return [
            Diagnostic(
                "DPS006",
                f"unexpected control character {m.group()!r}",
                Span.point(file, line, col),
                hint="a .dps file is UTF-8 text; is this a binary file?",
            )
        ]
    max_chars = L.limit("number_chars")
    for m in re.finditer(rf"[0-9.eE+\-]{{{max_chars + 1},}}", text):
        if not re.search(r"\d", m.group()):
            continue  # a long run of `e`, `-`, `.`: not a number (the parser reports it)
        line, col = _line_col(text, m.start())
        return [
            Diagnostic(
                "DPS106",
                "number literal is too long",
                Span(file, line, col, line, col + len(m.group())),
                hint=f"write numbers with at most {max_chars} characters, e.g. 1e-12",
            )
        ]
    return []


# --- positions -------------------------------------------------------------------------------------


class _Source:
    """The text, its tokens and a line index, shared by every parse of (a segment of) one file."""

    def __init__(self, text: str, file: str):
        self.text = text
        self.file = file
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self._tokens: tuple[list, list, list, list, list] | None = None

    def line_col(self, pos: int) -> tuple[int, int]:
        i = bisect_right(self.newlines, pos - 1)  # newlines strictly before pos
        line_start = self.newlines[i - 1] + 1 if i else 0
        return i + 1, pos - line_start + 1

    def span(self, start: int, end: int) -> Span:
        line, col = self.line_col(start)
        if end <= start:
            return Span(self.file, line, col, line, col + 1)
        end_line, end_col = self.line_col(end)
        return Span(self.file, line, col, end_line, end_col)

    def tokens(self) -> tuple[list, list, list, list, list]:
        """(kinds, starts, ends, lines, cols) of every token, whitespace and comments dropped, at most
        ``limits.limit("tokens")`` of them. Lines are counted on the way (a token never spans lines)."""
        if self._tokens is None:
            kinds: list[str | None] = []
            starts: list[int] = []
            ends: list[int] = []
            lines: list[int] = []
            cols: list[int] = []
            max_tokens = L.limit("tokens")
            text = self.text
            line, line_start = 1, 0
            for m in _TOKEN_RE.finditer(text):
                k = m.lastgroup
                if k == "ws":
                    a, b = m.span()
                    n = text.count("\n", a, b)
                    if n:
                        line += n
                        line_start = text.rfind("\n", a, b) + 1
                    continue
                if k == "comment":
                    continue
                if len(kinds) >= max_tokens:
                    raise _Stop(
                        Diagnostic(
                            "DPS007",
                            f"the spec has more than {max_tokens:,} tokens",
                            self.span(m.start(), m.end()),
                            hint=L.hint("tokens"),
                        )
                    )
                a, b = m.span()
                kinds.append(k)
                starts.append(a)
                ends.append(b)
                lines.append(line)
                cols.append(a - line_start + 1)
            self._tokens = (kinds, starts, ends, lines, cols)
        return self._tokens


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


# --- the parser --------------------------------------------------------------------------------------


class _Parser:
    """Recursive descent over the token list, one method per rule of ``dpspec.lark``.

    ``lo``/``hi`` restrict parsing to the tokens of one text segment (for error recovery).
    """

    def __init__(self, src: _Source, lo: int, hi: int):
        self.src = src
        self.file = src.file
        kinds, starts, ends, lines, cols = src.tokens()
        self.kinds, self.starts, self.ends, self.lines, self.cols = kinds, starts, ends, lines, cols
        self.i = bisect_right(starts, lo - 1)
        self.hi = bisect_right(starts, hi - 1)  # first token index at or after `hi`
        self.lo_pos, self.hi_pos = lo, hi
        self.text = src.text
        self.depth = 0
        self.max_depth = L.limit("nesting")
        self.max_items = L.limit("list_items")
        self.max_blocks = L.limit("blocks")

    # token access
    def kind(self) -> str:
        return self.kinds[self.i] if self.i < self.hi else "$END"

    def value(self, i: int) -> str:
        return self.text[self.starts[i] : self.ends[i]]

    def tok_span(self, i: int) -> Span:
        col = self.cols[i]
        return Span(self.file, self.lines[i], col, self.lines[i], col + self.ends[i] - self.starts[i])

    def span_between(self, first: int, last: int) -> Span:
        """From the start of token ``first`` to the end of token ``last``."""
        return Span(
            self.file,
            self.lines[first],
            self.cols[first],
            self.lines[last],
            self.cols[last] + self.ends[last] - self.starts[last],
        )

    def expect(self, kind: str, expected: tuple[str, ...] | None = None) -> int:
        if self.kind() != kind:
            self.fail(expected or (kind,))
        i = self.i
        self.i += 1
        return i

    def is_keyword(self, word: str) -> bool:
        return self.i < self.hi and self.kinds[self.i] == "IDENT" and self.value(self.i) == word

    # nesting
    def enter(self, i: int) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise _Stop(
                Diagnostic(
                    "DPS007",
                    "the spec is nested too deeply",
                    self.tok_span(i),
                    hint=f"keep nesting below {self.max_depth} levels ({L.hint('nesting')})",
                )
            )

    # rules
    def spec_file(self) -> ast.SpecFile:
        items: list[ast.Use | ast.Block] = []
        n_blocks = 0
        while self.i < self.hi:
            if self.is_keyword("use"):
                first = self.i
                self.i += 1
                s = self.expect("STRING")
                items.append(ast.Use(_unquote(self.value(s)), self.span_between(first, s)))
            elif self.kind() == "IDENT":
                n_blocks += 1
                if n_blocks > self.max_blocks:
                    raise _Stop(
                        Diagnostic(
                            "DPS007",
                            f"the spec has more than {self.max_blocks:,} blocks",
                            self.tok_span(self.i),
                            hint=L.hint("blocks"),
                        )
                    )
                items.append(self.block())
            else:
                self.fail(("IDENT", "USE", "$END"))
        return ast.SpecFile(tuple(items), file=self.file)

    def block(self) -> ast.Block:
        k = self.i
        self.i += 1
        n = self.expect("IDENT")
        ob = self.expect("LBRACE")
        self.enter(ob)
        entries = self.entries()
        close = self.expect("RBRACE", ("IDENT", "RBRACE"))
        self.depth -= 1
        return ast.Block(
            self.value(k),
            self.value(n),
            entries,
            self.span_between(k, close),
            self.tok_span(k),
            self.tok_span(n),
            file=self.file,
        )

    def entries(self) -> tuple[ast.Entry, ...]:
        out = []
        kinds = self.kinds
        while self.i < self.hi and kinds[self.i] == "IDENT":
            k = self.i
            self.i += 1
            val = self.entry_block(k) if self.at_entry_block() else self.setting_value()
            out.append(ast.Entry(self.value(k), val, self.span_between(k, self.i - 1), self.tok_span(k)))
            listed = isinstance(val, ast.Call) and kinds[self.i - 1] == "RSQB"  # `weights [1, 2]`
            if (isinstance(val, ast.Membership) or listed) and self.is_keyword("in"):
                # the grammar's LALR lexer reads `in` after any complete value as the keyword,
                # so `a x in s in t` is an error, not a setting named `in`
                raise _Stop(
                    Diagnostic(
                        "DPS001",
                        "unexpected keyword `in`",
                        self.tok_span(self.i),
                        hint="a setting's value has at most one `in`, as in `secret race in {A, B}`",
                    )
                )
        if self.kind() != "RBRACE":
            self.fail(("IDENT", "RBRACE"))
        return tuple(out)

    def at_entry_block(self) -> bool:
        """``IDENT "{" head_entry entry* "}"``: a `{` whose first setting's value does not start with
        `{` or `(` (otherwise the `{` opens a set)."""
        i, kinds = self.i, self.kinds
        return (
            i + 2 < self.hi
            and kinds[i] == "LBRACE"
            and kinds[i + 1] == "IDENT"
            and kinds[i + 2] in ("IDENT", "NUMBER", "STRING", "LSQB")
        )

    def entry_block(self, key: int) -> ast.NamedBlock:
        """A setting's value that is a block of settings: a ``NamedBlock`` with no name, whose name
        span is the setting's key (``candidates { learning_rate [0.1, 0.5] }``)."""
        o = self.i
        self.enter(o)
        self.i += 1
        entries = self.entries()
        c = self.expect("RBRACE", ("IDENT", "RBRACE"))
        self.depth -= 1
        return ast.NamedBlock("", entries, self.span_between(key, c), self.tok_span(key))

    def setting_value(self):
        """``value: primary | primary "in" primary | IDENT "=" condition | IDENT list``."""
        first = self.i
        if self.kind() == "IDENT" and self.i + 1 < self.hi and self.kinds[self.i + 1] == "EQUAL":
            self.i += 2
            cond = self.condition()
            return ast.Definition(self.value(first), cond, self.span_between(first, self.i - 1), self.tok_span(first))
        if self.kind() == "IDENT" and self.i + 1 < self.hi and self.kinds[self.i + 1] == "LSQB":
            # `split weights [1, 1, 2]`: the call weights([1, 1, 2]) (a setting's value only)
            self.i += 1
            lst = ast.ListLit(*self.items("LSQB"))
            return ast.Call(self.value(first), (lst,), (), self.span_between(first, self.i - 1), self.tok_span(first))
        p = self.primary()
        if self.is_keyword("in"):
            self.i += 1
            q = self.primary()
            return ast.Membership(p, q, self.span_between(first, self.i - 1))
        return p

    def condition(self):
        """``condition: primary COMPARE primary | primary "in" primary``."""
        first = self.i
        p = self.primary()
        if self.kind() == "COMPARE":
            op = self.value(self.i)
            self.i += 1
            q = self.primary()
            return ast.Comparison(p, op, q, self.span_between(first, self.i - 1))
        if self.is_keyword("in"):
            self.i += 1
            q = self.primary()
            return ast.Membership(p, q, self.span_between(first, self.i - 1))
        self.fail(("COMPARE", "IN"))

    def primary(self):
        i = self.i
        k = self.kind()
        if k == "IDENT":
            self.i += 1
            nxt = self.kind()
            if nxt == "LPAR":
                return self.call(i)
            if nxt == "LBRACE":
                return self.named_block(i)
            return ast.Ident(self.value(i), self.tok_span(i))
        if k == "NUMBER":
            self.i += 1
            return self.number(i)
        if k == "STRING":
            self.i += 1
            return ast.String(_unquote(self.value(i)), self.tok_span(i))
        if k == "LBRACE":
            return ast.SetLit(*self.items("LBRACE"))
        if k == "LSQB":
            return ast.ListLit(*self.items("LSQB"))
        if k == "LPAR":
            return self.tuple_()
        self.fail(_PRIMARY_START)

    def items(self, opener: str) -> tuple[tuple, Span]:
        """``"{" [items] "}"`` and ``"[" [items] "]"``; items: primary ("," primary)* [","]."""
        o = self.i
        self.enter(o)
        self.i += 1
        closer = _CLOSER[opener]
        out = []
        if self.kind() != closer:
            out.append(self.primary())
            while self.kind() == "COMMA":
                self.i += 1
                if self.kind() == closer:
                    break
                out.append(self.primary())
                if len(out) > self.max_items:
                    raise _Stop(
                        Diagnostic(
                            "DPS007",
                            f"a list with more than {self.max_items:,} items",
                            self.span_between(o, self.i - 1),
                            hint=L.hint("list_items"),
                        )
                    )
        c = self.expect(closer, ("COMMA", closer))
        self.depth -= 1
        return tuple(out), self.span_between(o, c)

    def tuple_(self) -> ast.TupleLit:
        """``"(" primary "," [items] ")"``."""
        o = self.i
        self.enter(o)
        self.i += 1
        out = [self.primary()]
        self.expect("COMMA")
        if self.kind() != "RPAR":
            out.append(self.primary())
            while self.kind() == "COMMA":
                self.i += 1
                if self.kind() == "RPAR":
                    break
                out.append(self.primary())
                if len(out) > self.max_items:
                    raise _Stop(
                        Diagnostic(
                            "DPS007",
                            f"a tuple with more than {self.max_items:,} items",
                            self.span_between(o, self.i - 1),
                            hint=L.hint("list_items"),
                        )
                    )
        c = self.expect("RPAR", ("COMMA", "RPAR"))
        self.depth -= 1
        return ast.TupleLit(tuple(out), self.span_between(o, c))

    def call(self, name: int) -> ast.Call:
        """``IDENT "(" [args] ")"``; args: arg ("," arg)* [","]; arg: primary | IDENT "=" primary."""
        o = self.i
        self.enter(o)
        self.i += 1
        args, kwargs = [], []
        if self.kind() != "RPAR":
            while True:
                if self.kind() == "IDENT" and self.i + 1 < self.hi and self.kinds[self.i + 1] == "EQUAL":
                    k = self.i
                    self.i += 2
                    v = self.primary()
                    if self.kind() == "COMPARE":  # `where = sex == "Female"`: arg: IDENT "=" comparison
                        op = self.i
                        self.i += 1
                        v = ast.Comparison(v, self.value(op), self.primary(), self.span_between(k + 2, self.i - 1))
                    kwargs.append(ast.Kwarg(self.value(k), v, self.span_between(k, self.i - 1), self.tok_span(k)))
                elif (
                    self.kind() == "IDENT"
                    and self.i + 1 < self.hi
                    and self.kinds[self.i + 1] == "IDENT"
                    and self.value(self.i + 1) == "in"
                ):
                    k = self.i
                    self.i += 2
                    v = self.primary()
                    kwargs.append(
                        ast.Kwarg(self.value(k), v, self.span_between(k, self.i - 1), self.tok_span(k), op="in")
                    )
                else:
                    args.append(self.primary())
                if len(args) + len(kwargs) > self.max_items:
                    raise _Stop(
                        Diagnostic(
                            "DPS007",
                            f"a call with more than {self.max_items:,} arguments",
                            self.span_between(name, self.i - 1),
                            hint=L.hint("list_items"),
                        )
                    )
                if self.kind() != "COMMA":
                    break
                self.i += 1
                if self.kind() == "RPAR":
                    break
        c = self.expect("RPAR", ("COMMA", "RPAR"))
        self.depth -= 1
        return ast.Call(self.value(name), tuple(args), tuple(kwargs), self.span_between(name, c), self.tok_span(name))

    def named_block(self, name: int) -> ast.NamedBlock:
        """``IDENT "{" entry* "}"``."""
        o = self.i
        self.enter(o)
        self.i += 1
        entries = self.entries()
        c = self.expect("RBRACE", ("IDENT", "RBRACE"))
        self.depth -= 1
        return ast.NamedBlock(self.value(name), entries, self.span_between(name, c), self.tok_span(name))

    def number(self, i: int) -> ast.Number:
        text = self.value(i)
        sp = self.tok_span(i)
        pct = text.endswith("%")
        body = text[:-1] if pct else text
        v = float(body)
        if v != v or v in (float("inf"), float("-inf")):
            raise _Stop(
                Diagnostic(
                    "DPS106", f"number `{text}` is not finite", sp, hint="use a finite number, e.g. 1e300 at most"
                )
            )
        is_int = not pct and re.fullmatch(r"[+-]?\d+", body) is not None
        if is_int and abs(int(body)) > _MAX_INT_EXACT:
            # a float cannot hold it exactly: refuse rather than round it silently
            raise _Stop(
                Diagnostic(
                    "DPS106",
                    f"the whole number `{text}` is above 2^53 and cannot be held exactly",
                    sp,
                    hint=f"write it in floating-point form (e.g. {v:.6e}) if an approximate value is meant",
                )
            )
        if pct:
            v = v / 100.0
        return ast.Number(v, text, is_int, sp)

    # errors
    def fail(self, expected: tuple[str, ...]):
        raise _Stop(self.error(expected))

    def error(self, expected: tuple[str, ...]) -> Diagnostic:
        if self.i >= self.hi:
            return self.end_of_input(expected)
        i = self.i
        k = self.kinds[i]
        sp = self.tok_span(i)
        if k == "bad":
            ch = self.value(i)
            if ch == '"':
                return Diagnostic(
                    "DPS002", "unterminated string", sp, hint='close the string with `"` on the same line'
                )
            return Diagnostic("DPS001", f"unexpected character {ch!r}", sp, hint=_expected(expected) or None)
        exp = set(expected)
        shown = self.value(i)
        if k == "IDENT" and shown in ("use", "in") and "IDENT" not in exp:  # a keyword, not a name
            k = {"use": "USE", "in": "IN"}[shown]
        hint: str | None
        if k == "NUMBER" and "NUMBER" not in exp and "IDENT" in exp:
            hint = "a setting name must start with a letter"
        elif "RBRACE" in exp and k in ("STRING", "NUMBER"):
            hint = "expected a setting name or `}`"
        elif exp == {"LBRACE"} or (exp and exp <= {"LBRACE", "IDENT"} and "LBRACE" in exp):
            hint = "a block is written `kind name { ... }`"
        else:
            hint = _expected(exp) or None
        return Diagnostic("DPS001", f"unexpected {_describe_token(k)} `{shown}`", sp, hint=hint)

    def end_of_input(self, expected) -> Diagnostic:
        seg = self.text[self.lo_pos : self.hi_pos]
        eline, ecol = self.src.line_col(self.lo_pos + len(seg.rstrip()))
        opened = _unclosed_open(seg)
        if opened is not None:
            oline, ocol = self.src.line_col(self.lo_pos + opened[0])
            closer = {"{": "}", "[": "]", "(": ")"}[opened[1]]
            return Diagnostic(
                "DPS003",
                f"expected `{closer}` before the end of the file",
                Span.point(self.file, eline, max(ecol, 1)),
                hint=f"`{opened[1]}` opened at line {oline}, column {ocol} is never closed",
            )
        return Diagnostic(
            "DPS001",
            "unexpected end of file",
            Span.point(self.file, eline, max(ecol, 1)),
            hint=_expected(expected) or None,
        )


def _describe_token(kind: str) -> str:
    return {"IDENT": "name", "NUMBER": "number", "STRING": "string", "USE": "keyword", "IN": "keyword"}.get(
        kind, "symbol"
    )


def _expected(names) -> str:
    shown = sorted({_TOKEN_NAMES.get(n, f"`{n.lower()}`") for n in names})
    if not shown:
        return ""
    if len(shown) > 6:
        shown = shown[:6] + ["…"]
    return "expected " + ", ".join(shown)


# --- error recovery ------------------------------------------------------------------------------------


def _more_syntax_errors(src: _Source, first: Diagnostic) -> list[Diagnostic]:
    """Error recovery: parse each top-level block on its own so every broken block is reported."""
    out: list[Diagnostic] = []
    for start, end in _top_level_segments(src.text):
        try:
            _Parser(src, start, end).spec_file()
        except _Stop as e:
            d = e.diag
            if d.span != first.span and all(d.span != o.span for o in out):
                out.append(d)
        if len(out) >= MAX_SYNTAX_ERRORS:
            break
    return out


# A string (closed, or cut at the end of its line), a comment, or a bracket. Inside a string a
# backslash escapes the next character, so `"a\\"` ends at its second quote.
_BRACKET_SCAN = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|#[^\n]*|[{}\[\]()]')


def _brackets(text: str):
    """(position, character) of every bracket outside strings and comments."""
    for m in _BRACKET_SCAN.finditer(text):
        ch = m.group()
        if len(ch) == 1 and ch in "{}[]()":
            yield m.start(), ch


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


def _unclosed_open(text: str):
    """Position and character of the innermost bracket left open at the end, ignoring strings/comments."""
    stack = []
    for i, ch in _brackets(text):
        if ch in "{[(":
            stack.append((i, ch))
        elif stack:
            stack.pop()
    return stack[-1] if stack else None


def _unquote(s: str) -> str:
    s = s[1:-1]
    if "\\" not in s:
        return s
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)
