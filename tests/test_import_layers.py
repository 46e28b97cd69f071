"""The direction of imports between dpspec's stages.

    families, ir, diagnostics, limits, errors  (leaves: the family table and the IR import nothing heavy;
                                            the IR reads the table, never a family's folder)
    accounting                              (numerics only: no other dpspec stage)
    runtime: mechanisms, relational, srpp, pufferfish, distributed, and a family folder's runtime side
                                            (never the front end or the compiler)
    parse → lower → check → compiler        (the compiler drives the families' compile modules)

Read from the source with ``ast`` (module-level and function-level imports both count where the
test says so), plus one subprocess that imports the runtime and looks at ``sys.modules``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "dpspec"
RUNTIME = ("mechanisms", "relational", "srpp", "pufferfish", "distributed")
#: the compile side of a family folder (docs/extending.md); its other modules (runtime.py and the runtime's
#: machinery beside it, e.g. GCON's trainer.py) are runtime code
FOLDER_COMPILE_SIDE = ("compile", "compose", "split", "rules", "audit")
FRONT_AND_COMPILER = ("dpspec.parse", "dpspec.lower", "dpspec.check", "dpspec.compiler", "dpspec.frontend",
                      # these two recompile specs: the runtime writes run certificates via run_record
                      "dpspec.certificate.run", "dpspec.certificate.verify")


def _module(p: Path) -> str:
    parts = p.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(p: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(p.read_text(encoding="utf-8"))
    nodes = []
    if top_level_only:
        todo = list(tree.body)
        while todo:  # module level, including under `if`/`try` (not inside functions or classes)
            n = todo.pop()
            nodes.append(n)
            if isinstance(n, (ast.If, ast.Try)):
                if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test):
                    continue
                todo += n.body + n.orelse + getattr(n, "finalbody", [])
                for h in getattr(n, "handlers", []):
                    todo += h.body
    else:
        nodes = list(ast.walk(tree))
    out = set()
    for n in nodes:
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and (n.module or n.level):
            module = _absolute(p, n.level, n.module)
            out.add(module)
            out |= {f"{module}.{a.name}" for a in n.names}
    return out


def _absolute(p: Path, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import …`` in file ``p`` (``from .base import x``
    in dpspec/audit/api.py is dpspec.audit.base): relative imports are dependencies too."""
    if level == 0:
        return module or ""
    package = _module(p).split(".") if p.name == "__init__.py" else _module(p).split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _files(package: str):
    return sorted((PKG / package).rglob("*.py")) if (PKG / package).is_dir() else [PKG / f"{package}.py"]


def test_families_table_imports_only_the_standard_library():
    for name in _imports(PKG / "families" / "__init__.py", top_level_only=False):
        assert name.split(".")[0] in sys.stdlib_module_names, f"dpspec/families/__init__.py imports {name}"


def test_the_error_root_imports_only_the_standard_library():
    for name in _imports(PKG / "errors.py", top_level_only=False):
        assert name.split(".")[0] in sys.stdlib_module_names, f"dpspec/errors.py imports {name}"


def _the_family_table(m: str) -> bool:
    """``dpspec.families`` itself or a name defined in it (``dpspec.families.load``), never a family's folder."""
    head, _, name = m.partition("dpspec.families")
    return not head and (not name or (name.count(".") == 1 and not (PKG / "families" / name[1:]).exists()))


def test_ir_imports_no_other_stage():
    """The IR may read the family table (a standard-library leaf below it: a serialised IR finds a training's
    settings model through the table's ``settings_model``), never a family's own folder."""
    for p in _files("ir"):
        bad = {m for m in _imports(p, False) if m.startswith("dpspec.")
               and not m.startswith(("dpspec.ir", "dpspec.errors")) and not _the_family_table(m)}
        assert not bad, f"{p.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_family_table_allowance_is_narrow():
    assert _the_family_table("dpspec.families") and _the_family_table("dpspec.families.load")
    assert not _the_family_table("dpspec.families.dpsgd") and not _the_family_table("dpspec.families.dpsgd.settings")


def test_accounting_imports_no_other_stage():
    for p in _files("accounting"):
        bad = {m for m in _imports(p, False)
               if m.startswith("dpspec") and not m.startswith(("dpspec.accounting", "dpspec.errors"))}
        assert not bad, f"{p.relative_to(ROOT)} imports {sorted(bad)}"


def test_runtime_never_imports_the_front_end_or_the_compiler():
    # the runtime packages, and every family folder's runtime side (docs/extending.md)
    folders = [p for p in sorted((PKG / "families").glob("*/*.py")) if p.stem not in FOLDER_COMPILE_SIDE]
    for p in [*(f for pkg in RUNTIME for f in _files(pkg)), *folders]:
        bad = {m for m in _imports(p, False) if any(m == f or m.startswith(f + ".") for f in FRONT_AND_COMPILER)}
        assert not bad, f"{p.relative_to(ROOT)} imports {sorted(bad)}"


def _first_cycle(top_level_only: bool) -> list[str] | None:
    mods = {_module(p): p for p in PKG.rglob("*.py")}
    graph = {m: {d for d in _imports(p, top_level_only) if d in mods and d != m and not m.startswith(d + ".")}
             for m, p in mods.items()}
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack + [m, n]
            if n not in state:
                found = visit(n, stack + [m])
                if found:
                    return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m, [])
            if found:
                return found
    return None


def test_no_module_level_import_cycle():
    cycle = _first_cycle(top_level_only=True)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_even_through_function_level_imports():
    """A lazy import is still a dependency: e.g. dpspec.certificate.verify verifies run certificates
    itself and dpspec.certificate.run (the writer) imports it, never the other way round."""
    cycle = _first_cycle(top_level_only=False)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_family_compile_modules_do_not_import_the_compile_driver():
    """Shared helpers come from dpspec.compiler.common; the driver imports the families, not back."""
    from dpspec.families import FAMILIES

    for f in FAMILIES.values():
        module = f.compile.partition(":")[0]
        if module == "dpspec.compiler.compile":
            continue
        path = ROOT / (module.replace(".", "/") + ".py")
        assert not {m for m in _imports(path, False) if m.startswith("dpspec.compiler.compile")}, module


def test_importing_the_runtime_loads_no_compiler():
    code = ("import sys, dpspec.families.gaussian.runtime, dpspec.families.dpsgd.runtime, dpspec.families.swm.runtime, "
            "dpspec.families.gcon.runtime, dpspec.families.gcon.trainer, dpspec.families.relational_dpsgd.runtime, "
            "dpspec.families.srpp_sgd.runtime; "
            "print(sorted(m for m in sys.modules if m.startswith(('dpspec.compiler', 'dpspec.check', "
            "'dpspec.lower', 'dpspec.parse'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
