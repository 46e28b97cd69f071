"""The canonical text of a spec: one setting per line, two-space indent, normalised literals.

``parse(fmt(s)) == parse(s)`` for every spec that parses (tests check it with hypothesis).
Comments are not part of the tree and are dropped. The canonical text is what certificates embed
and hash, so two specs that differ only in layout or comments get the same certificate.
"""

from __future__ import annotations

import re

from dpspec.parse import ast

_INDENT = "  "


def fmt(spec: ast.SpecFile) -> str:
    parts: list[str] = []
    uses = spec.uses
    for u in uses:
        parts.append(f"use {_string(u.path)}")
    if uses:
        parts.append("")
    for i, b in enumerate(spec.blocks):
        if i:
            parts.append("")
        parts.extend(_block_lines(b))
    return "\n".join(parts) + "\n" if parts else ""


def fmt_block(b: ast.Block) -> str:
    return "\n".join(_block_lines(b)) + "\n"


def _block_lines(b: ast.Block) -> list[str]:
    if not b.entries:
        return [f"{b.kind} {b.name} {{}}"]
    width = max(len(e.key) for e in b.entries)
    lines = [f"{b.kind} {b.name} {{"]
    for e in b.entries:
        lines.extend(_entry_lines(e, 1, width))
    lines.append("}")
    return lines


def _entry_lines(e: ast.Entry, depth: int, width: int) -> list[str]:
    pad = _INDENT * depth
    key = e.key.ljust(width)
    if isinstance(e.value, ast.NamedBlock):
        nb = e.value
        if not nb.entries:
            return [f"{pad}{key} {nb.name} {{}}"]
        w = max(len(x.key) for x in nb.entries)
        out = [f"{pad}{key} {nb.name} {{"]
        for x in nb.entries:
            out.extend(_entry_lines(x, depth + 1, w))
        out.append(f"{pad}}}")
        return out
    return [f"{pad}{key} {value(e.value)}"]


def value(v: ast.Value) -> str:
    if isinstance(v, ast.Ident):
        return v.name
    if isinstance(v, ast.Number):
        return number(v)
    if isinstance(v, ast.String):
        return _string(v.value)
    if isinstance(v, ast.Call):
        args = [value(a) for a in v.args] + [f"{k.name} = {value(k.value)}" for k in v.kwargs]
        return f"{v.name}({', '.join(args)})"
    if isinstance(v, ast.SetLit):
        return "{" + ", ".join(value(x) for x in v.items) + "}"
    if isinstance(v, ast.ListLit):
        return "[" + ", ".join(value(x) for x in v.items) + "]"
    if isinstance(v, ast.TupleLit):
        inner = ", ".join(value(x) for x in v.items)
        return f"({inner},)" if len(v.items) == 1 else f"({inner})"
    if isinstance(v, ast.Membership):
        return f"{value(v.element)} in {value(v.collection)}"
    if isinstance(v, ast.NamedBlock):
        inner = " ".join(f"{x.key} {value(x.value)}" for x in v.entries)
        return f"{v.name} {{ {inner} }}" if inner else f"{v.name} {{}}"
    raise TypeError(type(v))


def number(n: ast.Number) -> str:
    """Shortest text that reads back as the same float (integers stay integers)."""
    if n.is_int:
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
