"""The direction of imports between dpspec's stages.

    families, ir, diagnostics, limits, errors  (leaves: the family table and the IR import nothing heavy;
                                            the IR reads the table, never a family's folder)
    a family folder (dpspec/families/<f>/)  (imported by no shared module: the stages reach it through the
                                            registry; its underscore names stay inside it)
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


FAMILY_FOLDERS = frozenset(p.parent.name for p in (PKG / "families").glob("*/__init__.py"))


def _folder_of(module: str) -> str | None:
    """The family folder that ``module`` (or a name imported from it) lies in, or None."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["dpspec", "families"] and len(parts) > 2 and parts[2] in FAMILY_FOLDERS else None


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses_of_folders(p: Path) -> set[str]:
    """What file ``p`` takes from a family folder by an underscore name: ``from dpspec.families.f.m import _x``, a
    private module (``dpspec.families.f._m``), or ``M._x`` on a name ``M`` bound to a folder's module."""
    tree = ast.parse(p.read_text(encoding="utf-8"))
    out, aliases = set(), {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if _folder_of(a.name):
                    if any(_private(x) for x in a.name.split(".")):
                        out.add(a.name)
                    aliases[a.asname or a.name] = a.name
        elif isinstance(n, ast.ImportFrom) and (n.module or n.level):
            module = _absolute(p, n.level, n.module)
            for a in n.names:
                full = f"{module}.{a.name}"
                if not _folder_of(full):
                    continue
                if any(_private(x) for x in full.split(".")):
                    out.add(full)
                aliases[a.asname or a.name] = full
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
            if _private(n.attr):
                out.add(f"{aliases[n.value.id]}.{n.attr}")
    return out


def test_a_family_folders_underscore_names_stay_inside_it():
    """A module outside ``dpspec/families/<f>/`` (a shared stage, or another family's folder) uses only the public
    names of ``<f>``: what two families or a stage share is public (``dpspec.mechanisms.release.query_columns``
    rather than another runtime's ``_matrix``)."""
    for p in sorted(PKG.rglob("*.py")):
        own = _folder_of(_module(p))
        bad = {m for m in _private_uses_of_folders(p) if _folder_of(m) != own}
        assert not bad, f"{p.relative_to(ROOT)} uses the private names {sorted(bad)}"


def test_the_shared_stages_reach_a_family_folder_only_through_the_registry():
    """No module outside the family folders (the stages, the runtime packages, the registry and its hook types)
    imports a family folder, at module or function level: it finds a family's code through the registry
    (``dpspec.families.FAMILIES``, ``load``, ``dpspec.families.hooks.load_hook``), so adding, moving or removing a
    family edits no shared module. (A family folder may import another's public names: the Markov Quilt
    Mechanism releases through the Wasserstein runtime.)"""
    for p in sorted(PKG.rglob("*.py")):
        if _folder_of(_module(p)):
            continue
        bad = {m for m in _imports(p, False) if _folder_of(m)}
        assert not bad, f"{p.relative_to(ROOT)} imports the family folder(s) {sorted(bad)}"


def test_the_folder_rules_can_fail(tmp_path):
    """The two checks above see a private name, a private module, an attribute of a folder's module and a plain
    import of a folder."""
    assert {"gcon", "swm", "dpsgd"} <= FAMILY_FOLDERS
    f = tmp_path / "x.py"
    f.write_text(
        "from dpspec.families.swm.runtime import _hidden, Runtime\n"
        "import dpspec.families.gcon._private_mod\n"
        "from dpspec.families.dpsgd import runtime as R\n"
        "R._secure_sources()\n"
        "def f():\n    from dpspec.families.gcon import compile\n",
        encoding="utf-8",
    )
    uses = _private_uses_of_folders(f)
    assert uses == {
        "dpspec.families.swm.runtime._hidden",
        "dpspec.families.gcon._private_mod",
        "dpspec.families.dpsgd.runtime._secure_sources",
    }
    assert {m for m in _imports(f, False) if _folder_of(m)} >= {"dpspec.families.gcon.compile"}
