"""The reference parser: lark with the published grammar (``dpspec/dpspec.lark``), building the same
syntax tree as ``dpspec.parse.parser``. Tests use it as an oracle for the hand-written parser."""

from __future__ import annotations

import re

from dpspec.diagnostics import Span
from dpspec.parse import ast
from dpspec.parse.parser import _lark


def lark_parser():
    return _lark()


def lark_parse(text: str, file: str = "t.dps") -> ast.SpecFile | None:
    """The tree lark builds for ``text``, or None when lark rejects it (a syntax error)."""
    import lark

    try:
        tree = lark_parser().parse(text)
    except lark.exceptions.LarkError:
        return None
    return _Builder(file).file(tree)


class _Builder:
    """lark tree → ast, attaching spans (the parser's builder before it was hand-written)."""

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
        if t.data == "entry_block":
            key, *entries = t.children
            block = ast.NamedBlock("", tuple(self.entry(e) for e in entries), self.span(t), self.span(key))
            return ast.Entry(str(key), block, self.span(t), self.span(key))
        key, value = t.children
        return ast.Entry(str(key), self.value(value), self.span(t), self.span(key))

    def items(self, t) -> tuple:
        if t is None:
            return ()
        return tuple(self.value(c) for c in t.children)

    def value(self, t):
        d, c, sp = t.data, t.children, self.span(t)
        if d == "ident":
            return ast.Ident(str(c[0]), sp)
        if d == "number":
            text = str(c[0])
            pct = text.endswith("%")
            body = text[:-1] if pct else text
            v = float(body)
            return ast.Number(v / 100.0 if pct else v, text, not pct and re.fullmatch(r"[+-]?\d+", body) is not None,
                              sp)
        if d == "string":
            return ast.String(_unquote(c[0]), sp)
        if d == "call":
            args, kwargs = [], []
            if len(c) > 1:
                for a in c[1].children:
                    if getattr(a, "data", None) in ("kwarg", "kwarg_in"):
                        kwargs.append(ast.Kwarg(str(a.children[0]), self.value(a.children[1]),
                                                self.span(a), self.span(a.children[0]),
                                                op="in" if a.data == "kwarg_in" else "="))
                    else:
                        args.append(self.value(a))
            return ast.Call(str(c[0]), tuple(args), tuple(kwargs), sp, self.span(c[0]))
        if d == "call_list":  # `weights [1, 2]`: a call with the list as its one argument
            b = c[1]  # the `list` rule
            lst = ast.ListLit(self.items(b.children[0] if b.children else None), self.span(b))
            return ast.Call(str(c[0]), (lst,), (), sp, self.span(c[0]))
        if d == "named_block":
            return ast.NamedBlock(str(c[0]), tuple(self.entry(e) for e in c[1:]), sp, self.span(c[0]))
        if d == "set":
            return ast.SetLit(self.items(c[0] if c else None), sp)
        if d == "list":
            return ast.ListLit(self.items(c[0] if c else None), sp)
        if d == "tuple":
            rest = self.items(c[1]) if len(c) > 1 else ()
            return ast.TupleLit((self.value(c[0]),) + rest, sp)
        if d == "comparison":
            return ast.Comparison(self.value(c[0]), str(c[1]), self.value(c[2]), sp)
        if d == "membership":
            return ast.Membership(self.value(c[0]), self.value(c[1]), sp)
        if d == "comparison":
            return ast.Comparison(self.value(c[0]), str(c[1]), self.value(c[2]), sp)
        if d == "definition":
            return ast.Definition(str(c[0]), self.value(c[1]), sp, self.span(c[0]))
        raise AssertionError(f"unknown tree node {d}")


def _unquote(tok) -> str:
    s = str(tok)[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def with_spans(node):
    """A nested structure of the tree *including* every span (ast equality ignores spans)."""
    if isinstance(node, (list, tuple)):
        return tuple(with_spans(x) for x in node)
    if hasattr(node, "__dataclass_fields__"):
        return (type(node).__name__,) + tuple((k, with_spans(getattr(node, k))) for k in node.__dataclass_fields__
                                             if k != "file")
    return node
