"""Import structure of the accounting package: no cycles, no other dpspec stage."""

from __future__ import annotations

import ast
from pathlib import Path

import dpspec.accounting

PKG = Path(dpspec.accounting.__file__).parent


def _imports(path: Path) -> set[str]:
    """Sibling modules imported anywhere in the file (module level and inside functions)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.startswith("dpspec.accounting."):
            out.add(node.module.split(".")[2])
    return out


def _graph() -> dict[str, set[str]]:
    mods = {p.stem for p in PKG.glob("*.py")}
    return {p.stem: _imports(p) & mods for p in PKG.glob("*.py") if p.stem != "__init__"}


def test_group_and_poisson_do_not_import_each_other_both_ways():
    g = _graph()
    assert "group" in g["poisson"]
    assert "poisson" not in g["group"]
    assert "_sgm" in g["group"] and "group" not in g["_sgm"] and "poisson" not in g["_sgm"]


def test_no_import_cycle_in_accounting():
    g = _graph()
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack + [m, n]))
            if n not in state:
                visit(n, stack + [m])
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, [])


def test_accounting_imports_no_other_dpspec_stage():
    for p in PKG.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                other = node.module.startswith("dpspec.") \
                    and not node.module.startswith(("dpspec.accounting", "dpspec.errors"))  # the error root is a leaf
                assert not other, (p.name, node.module)
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                raise AssertionError(f"{p.name} imports from a parent package")
            if isinstance(node, ast.Import):
                for a in node.names:
                    assert a.name.split(".")[0] != "torch", p.name
                    assert not (a.name.startswith("dpspec.")
                                and not a.name.startswith("dpspec.accounting")), (p.name, a.name)
