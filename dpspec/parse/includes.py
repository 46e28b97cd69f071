"""Resolve ``use "other.dps"`` includes: read, parse, detect cycles and missing files.

Semantics: ``use`` makes the *definitions* of another file (its ``scenario`` and ``privacy``
blocks) visible in this one. Its releases and trainings are not compiled again by the including
file. A file included twice (a diamond) is read once.

Where an included file may live (the rule `dpspec check` enforces, DPS004):

* the path is relative to the including file's folder, uses ``/`` between folders and names a
  ``.dps`` file; absolute paths are refused;
* resolved, symbolic links followed, it must lie inside the *include root*: the folder of the
  spec given to dpspec (for a spec given as text, ``base_dir`` or the working folder). ``..`` is
  fine as long as it stays inside (``use "../shared/people.dps"`` from ``specs/sub/``, when the
  root spec is in ``specs/``), never above;
* it must be a regular file (not a folder, FIFO or device) of at most the ``source_bytes``
  limit, read without blocking; at most ``includes`` files per spec (``dpspec.limits``).

Cycles are found by real path, so a symbolic link cannot hide one, and a symbolic-link loop is a
diagnostic, not a crash. A spec recompiled from a certificate has no includes (its canonical text
is flattened): ``load_program(..., allow_includes=False)`` refuses any ``use``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from dpspec import limits as L
from dpspec.diagnostics import Diagnostic, Span
from dpspec.parse import ast
from dpspec.parse.parser import parse_text

SHARED_KINDS = ("scenario", "privacy")


def __getattr__(name):  # MAX_INCLUDES is a limit now (dpspec.limits); kept readable for old callers
    if name == "MAX_INCLUDES":
        return L.limit("includes")
    raise AttributeError(name)


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
        stack: list[tuple[str, bool]] = [(self.root, True)]
        while stack:  # iterative: an include chain is as long as the include limit allows
            name, is_root = stack.pop()
            if name in seen or name not in self.files:
                continue
            seen.add(name)
            for b in self.files[name].blocks:
                if is_root or b.kind in SHARED_KINDS:
                    out.append(b)
            stack.extend((inc, False) for inc in reversed(self.includes.get(name, [])))
        return out


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def read_spec_file(path: str | os.PathLike, *, regular_only: bool) -> tuple[str | None, str | None, str | None]:
    """(text, None, None) or (None, reason, hint): the file as UTF-8 text, at most the
    ``source_bytes`` limit, never blocking on a FIFO or device when ``regular_only``."""
    from dpspec.data import FileRefused, read_bounded

    try:
        data = read_bounded(path, "source_bytes", what="the spec", regular_only=regular_only)
    except FileNotFoundError:
        return None, "not found", None
    except FileRefused as e:
        return None, e.reason, e.hint
    except L.LimitExceeded as e:
        return None, f"is too large ({e.message})", e.hint
    try:
        return data.decode("utf-8"), None, None
    except UnicodeDecodeError as e:
        return None, f"is not UTF-8 text (byte {e.start})", "a .dps file is UTF-8 text"


def load_program(
    path: str | Path | None = None, text: str | None = None, name: str | None = None, *, allow_includes: bool = True
) -> Program:
    """Load a spec from a file path or from text (``name`` labels text in messages).

    With text and a path, the path only places the spec (its folder resolves ``use`` lines)."""
    if text is None and path is None:
        raise ValueError("give a path or a text")
    if text is not None:
        root_name = name or (str(path) if path else "<string>")
        base = Path(os.path.abspath(path)).parent if path else Path.cwd()
        prog = Program(root=root_name)
        _Loader(prog, base, allow_includes).load(root_name, text, base, None)
        return prog
    assert path is not None  # (refused above when neither is given)
    root_name = name or str(path)
    prog = Program(root=root_name)
    # the root spec is the one the user named: a pipe (`/dev/stdin`) is read, but never past the limit
    src, err, hint = read_spec_file(path, regular_only=False)
    if src is None:
        prog.diagnostics.append(
            Diagnostic("DPS004", f"cannot read `{path}`: {err}", None, hint=hint or "check the path")
        )
        return prog
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        real = Path(os.path.abspath(path))
    _Loader(prog, real.parent, allow_includes).load(root_name, src, real.parent, str(real))
    return prog


_USE_HINT = 'write a relative path to a .dps file next to the spec or below it, e.g. use "shared/people.dps"'


def include_path_problem(path: str) -> str | None:
    """Why a ``use`` path is refused before looking at the disk, or None."""
    if not path.strip():
        return "the path is empty"
    if re.search(r"[\x00-\x1f\x7f]", path):
        return "the path contains a control character"
    if "\\" in path:
        return "the path contains a backslash (separate folders with `/`)"
    if path.startswith(("/", "~")) or re.match(r"[A-Za-z]:", path):
        return "the path is absolute; includes are relative to the including file"
    if PurePosixPath(path).suffix != ".dps":
        return "only .dps files can be included"
    return None


class _Loader:
    def __init__(self, prog: Program, include_root: Path, allow_includes: bool):
        self.prog = prog
        try:
            self.include_root = include_root.resolve()
        except (OSError, RuntimeError):
            self.include_root = include_root
        self.allow_includes = allow_includes
        self.keys: dict[str, str] = {}  # real path → display name (diamonds are read once)
        self.n_files = 1  # the root, then every file accepted for reading

    def load(self, name: str, text: str, base: Path, real: str | None) -> None:
        """Parse ``text`` and follow its includes depth-first, without recursion (a chain of
        includes is as long as the include limit allows, far beyond Python's stack)."""
        prog = self.prog
        if real is not None:
            self.keys[real] = name
        # (name, text, folder, chain of real paths to this file)
        work = [(name, text, base, [real] if real else [])]
        while work:
            name, text, base, chain = work.pop()
            prog.sources[name] = text
            tree, diags = parse_text(text, name)
            prog.diagnostics.extend(diags)
            if tree is None:
                continue
            prog.files[name] = tree
            prog.includes[name] = []
            pending = []
            for use in tree.uses:
                item = self._resolve(name, use, base, chain)
                if item is None:
                    continue
                disp, real_target, src = item
                prog.includes[name].append(disp)
                if src is not None:
                    pending.append((disp, src, Path(real_target).parent, chain + [real_target]))
            work.extend(reversed(pending))

    def _resolve(self, name: str, use: ast.Use, base: Path, chain: list[str]):
        """(display name, real path, text or None if already loaded) of an include, or None after a
        diagnostic."""
        prog = self.prog

        def refuse(message: str, hint: str, rule: str = "DPS004"):
            prog.diagnostics.append(Diagnostic(rule, message, use.span, hint=hint))
            return None

        if not self.allow_includes:
            return refuse(
                f'`use "{use.path}"` is not allowed here',
                "a spec recompiled from a certificate is self-contained; its includes were flattened",
            )
        problem = include_path_problem(use.path)
        if problem:
            return refuse(f"cannot include `{use.path}`: {problem}", _USE_HINT)
        try:
            target = (base / use.path).resolve(strict=True)
        except FileNotFoundError:
            return refuse(
                f"cannot include `{use.path}`: not found",
                f"looked for {_display(Path(os.path.abspath(base / use.path)))}",
            )
        except (OSError, RuntimeError):  # a symbolic-link loop, a path through a file, ...
            return refuse(
                f"cannot include `{use.path}`: the path cannot be resolved (a symbolic link loop?)",
                "check the symbolic links on the path",
            )
        if target != self.include_root and self.include_root not in target.parents:
            return refuse(
                f"cannot include `{use.path}`: it lies outside the spec's folder",
                f"includes stay inside {_display(self.include_root)} (the folder of the spec given to "
                "dpspec); move the shared file there",
            )
        key = str(target)
        if key in chain:
            cycle = " → ".join([Path(s).name for s in chain[chain.index(key) :]] + [target.name])
            return refuse(f"include cycle: {cycle}", "remove one of the `use` lines in the cycle", "DPS005")
        if key in self.keys:
            return self.keys[key], key, None  # already loaded (diamond)
        if self.n_files >= L.limit("includes"):
            return refuse(
                "too many included files",
                f"at most {L.limit('includes')} files per spec ({L.hint('includes')})",
                "DPS007",
            )
        src, err, hint = read_spec_file(target, regular_only=True)
        if src is None:
            return refuse(f"cannot include `{use.path}`: {err}", hint or f"looked for {_display(target)}")
        disp = _display(target)
        if disp in prog.sources or disp in self.keys.values():  # another file already shown under this name
            disp = key
        self.keys[key] = disp
        self.n_files += 1
        return disp, key, src


def first_span(file: str) -> Span:
    return Span.point(file, 1, 1)
