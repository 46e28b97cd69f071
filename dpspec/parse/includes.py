"""Resolve ``use "other.dps"`` includes: read, parse, detect cycles and missing files.

Semantics: ``use`` makes the *definitions* of another file (its ``scenario`` and ``privacy``
blocks) visible in this one. Its releases and trainings are not compiled again by the including
file. Paths are relative to the including file. A file included twice (a diamond) is read once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dpspec.diagnostics import Diagnostic, Span
from dpspec.parse import ast
from dpspec.parse.parser import parse_text

MAX_INCLUDES = 64
SHARED_KINDS = ("scenario", "privacy")


@dataclass
class Program:
    """A root spec file plus everything it includes."""

    root: str
    files: dict[str, ast.SpecFile] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # file → the files it includes (resolved display names), in order
    includes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def root_file(self) -> ast.SpecFile | None:
        return self.files.get(self.root)

    def visible_blocks(self) -> list[ast.Block]:
        """The root's own blocks, then shared definitions from includes (depth-first, once each)."""
        out: list[ast.Block] = []
        seen: set[str] = set()

        def visit(name: str, is_root: bool):
            if name in seen or name not in self.files:
                return
            seen.add(name)
            for b in self.files[name].blocks:
                if is_root or b.kind in SHARED_KINDS:
                    out.append(b)
            for inc in self.includes.get(name, []):
                visit(inc, False)

        visit(self.root, True)
        return out


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _read(path: Path) -> tuple[str | None, str | None]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "not found"
    except IsADirectoryError:
        return None, "is a directory"
    except OSError as e:
        return None, e.strerror or "cannot be read"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return None, f"is not UTF-8 text (byte {e.start})"


def load_program(path: str | Path | None = None, text: str | None = None, name: str | None = None) -> Program:
    """Load a spec from a file path or from text (``name`` labels text in messages)."""
    if text is None and path is None:
        raise ValueError("give a path or a text")
    if text is not None:
        root_name = name or (str(path) if path else "<string>")
        base = Path(path).resolve().parent if path else Path.cwd()
        prog = Program(root=root_name)
        _load_text(prog, root_name, text, base, stack=[])
        return prog
    p = Path(path)
    root_name = name or str(path)
    prog = Program(root=root_name)
    src, err = _read(p)
    if src is None:
        prog.diagnostics.append(Diagnostic("DPS004", f"cannot read `{path}`: {err}", None,
                                           hint="check the path"))
        return prog
    _load_text(prog, root_name, src, p.resolve().parent, stack=[str(p.resolve())])
    return prog


def _load_text(prog: Program, name: str, text: str, base: Path, stack: list[str]) -> None:
    prog.sources[name] = text
    tree, diags = parse_text(text, name)
    prog.diagnostics.extend(diags)
    if tree is None:
        return
    prog.files[name] = tree
    prog.includes[name] = []
    for use in tree.uses:
        target = (base / use.path).resolve()
        key = str(target)
        if key in stack:
            cycle = " → ".join([Path(s).name for s in stack[stack.index(key):]] + [target.name])
            prog.diagnostics.append(Diagnostic("DPS005", f"include cycle: {cycle}", use.span,
                                               hint="remove one of the `use` lines in the cycle"))
            continue
        disp = _display(target)
        prog.includes[name].append(disp)
        if disp in prog.files or disp in prog.sources:
            continue  # already loaded (diamond)
        if len(prog.sources) >= MAX_INCLUDES:
            prog.diagnostics.append(Diagnostic("DPS007", "too many included files", use.span,
                                               hint=f"at most {MAX_INCLUDES} files per spec"))
            return
        src, err = _read(target)
        if src is None:
            prog.diagnostics.append(Diagnostic("DPS004", f"cannot include `{use.path}`: {err}", use.span,
                                               hint=f"looked for {target}"))
            continue
        _load_text(prog, disp, src, target.parent, stack + [key])


def first_span(file: str) -> Span:
    return Span.point(file, 1, 1)
