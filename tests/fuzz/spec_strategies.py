"""Hypothesis strategies for spec text: over the grammar, over the language, and mutations.

* :func:`grammar_texts` — texts the grammar (``dpspec/dpspec.lark``) derives, with random layout
  and comments: every one must parse.
* :func:`language_specs` — specs built from the language's own tables (block kinds, settings, call
  signatures of ``dpspec.lower.lowering``) with values that are right, wrong in kind, out of range
  or huge: they exercise lowering, the checker, limits and (for those that check clean) the compiler.
* :func:`token_mutations` / :func:`byte_mutations` — small edits of a text (tokens deleted,
  duplicated, swapped or replaced; bytes flipped, inserted, cut).

Shared by the parser's grammar-oracle test (``tests/frontend``) and the spec fuzzer
(``tests/fuzz/test_spec_fuzz.py``, ``benchmarks/fuzz_specs.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SPECS = sorted((ROOT / "specs").rglob("*.dps"))

# --- the grammar ----------------------------------------------------------------------------------

_ident_tail = st.from_regex(r"[A-Za-z0-9_]{0,5}(-[A-Za-z0-9_]{1,3})?", fullmatch=True)
idents = st.one_of(
    st.sampled_from(["unit", "record", "dp", "epsilon", "delta", "release", "privacy", "in", "use", "x", "a-b"]),
    st.builds(lambda h, t: h + t, st.sampled_from(list("abcxyzAB_")), _ident_tail),
)
plain_idents = idents.filter(lambda s: s not in ("in", "use"))
numbers = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.from_regex(r"[+-]?(\d{1,4}(\.\d{0,3})?|\.\d{1,3})([eE][+-]?\d{1,3})?%?", fullmatch=True),
    st.sampled_from(["0", "1", "1e-6", "5%", "-2.5E+3", ".5", "9007199254740993", "1e309", "1e-400"]),
)
strings = st.text(st.sampled_from(list('abc /.:"\\\'nt{}[]#é')), max_size=10).map(
    lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')


def _join(parts: list[str], seps: list[str]) -> str:
    out = [parts[0]]
    for p, s in zip(parts[1:], seps):
        out.append(s + p)
    return "".join(out)


layout = st.sampled_from([" ", " ", "  ", "\n", "\n  ", "\t", " # note\n", "\r\n"])


@st.composite
def _seq(draw, parts: list[str]) -> str:
    return _join(parts, [draw(layout) for _ in parts[1:]])


def _primary(depth: int):
    leaf = st.one_of(plain_idents, numbers, strings)
    if depth <= 0:
        return leaf
    sub = _primary(depth - 1)
    items = st.lists(sub, max_size=3)

    def bracketed(o, c):
        return st.builds(lambda xs, trail: o + ", ".join(xs) + ("," if trail and xs else "") + c, items, st.booleans())

    kwarg = st.builds(lambda k, v: f"{k} = {v}", idents, sub)
    call = st.builds(lambda n, args, trail: f"{n}(" + ", ".join(args) + ("," if trail and args else "") + ")",
                     plain_idents, st.lists(st.one_of(sub, kwarg), max_size=3), st.booleans())
    tup = st.builds(lambda a, rest: "(" + a + ", " + ", ".join(rest) + ")", sub, st.lists(sub, max_size=2))
    named = st.builds(lambda n, es: n + " { " + " ".join(es) + " }", plain_idents,
                      st.lists(st.builds(lambda k, v: f"{k} {v}", idents, leaf), max_size=2))
    return st.one_of(leaf, bracketed("{", "}"), bracketed("[", "]"), call, tup, named)


_entry = st.builds(lambda k, v, m: f"{k} {v}" + (f" in {m}" if m else ""), idents, _primary(2),
                   st.one_of(st.none(), _primary(1)))
_block = st.builds(lambda k, n, es: f"{k} {n} {{ " + "  ".join(es) + " }", plain_idents, idents,
                   st.lists(_entry, max_size=4))
_use = st.builds(lambda s: f"use {s}", strings)


@st.composite
def grammar_texts(draw) -> str:
    """A text the grammar derives (with random layout): it must parse."""
    items = draw(st.lists(st.one_of(_block, _block, _use), max_size=4))
    text = draw(_seq(items)) if items else ""
    # random layout inside items: spaces may become newlines or comments (a token is never split)
    out = []
    for part in re.split(r'("(?:[^"\\\n]|\\.)*")', text):  # strings keep their spaces
        if part.startswith('"'):
            out.append(part)
            continue
        for p in re.split(r"( +)", part):
            out.append(draw(st.sampled_from([p, "\n", " # c\n", "\t"])) if p and not p.strip() else p)
    return "".join(out) + draw(st.sampled_from(["", "\n", "# end"]))


# --- mutations -------------------------------------------------------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[A-Za-z_][\w\-]*|[+-]?[\d.]+(?:[eE][+-]?\d+)?%?|\S')
_REPLACEMENTS = ["{", "}", "[", "]", "(", ")", ",", "=", "in", "use", '"', "#", "\\", '"a\\\\"', "-", "%",
                 "1e999", "nan", "inf", "-1", "0", "1e15", "1e9", "2.5", "9007199254740993",
                 "x" * 70, "9" * 70, "[" * 40, "(" * 40, "\x00", "\u00e9", "\n", "dp(", "sphere(m = 1000000)"]


@st.composite
def token_mutations(draw, text: str) -> str:
    toks = [m.group() for m in _TOKEN.finditer(text)]
    if not toks:
        return draw(st.sampled_from(_REPLACEMENTS))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(toks) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert"]))
        if op == "delete" and len(toks) > 1:
            del toks[i]
        elif op == "duplicate":
            toks.insert(i, toks[i])
        elif op == "swap":
            j = draw(st.integers(0, len(toks) - 1))
            toks[i], toks[j] = toks[j], toks[i]
        elif op == "replace":
            toks[i] = draw(st.sampled_from(_REPLACEMENTS))
        else:
            toks.insert(i, draw(st.sampled_from(_REPLACEMENTS)))
    return " ".join(toks)


@st.composite
def byte_mutations(draw, text: str) -> str:
    data = bytearray(text.encode("utf-8"))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, max(0, len(data) - 1)))
        op = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "duplicate", "swap"]))
        j = draw(st.integers(i, min(len(data), i + 24)))
        if op == "flip" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[i:j]
        elif op == "insert":
            data[i:i] = draw(st.binary(max_size=8))
        elif op == "truncate":
            del data[i:]
        elif op == "duplicate":
            data[j:j] = data[i:j]
        else:
            data[i:] = data[j:] + data[i:j]
    return data.decode("utf-8", errors="replace")


def example_texts() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in EXAMPLE_SPECS]


def examples():
    """One of the example specs (drawn by index: a strategy over the texts themselves has a huge repr)."""
    texts = example_texts()
    return st.integers(0, len(texts) - 1).map(texts.__getitem__)


@st.composite
def mutated_examples(draw) -> str:
    text = draw(examples())
    return draw(st.one_of(token_mutations(text), byte_mutations(text)))
