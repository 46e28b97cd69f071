"""The front half of the pipeline as one call: text → program → IR → checked IR.

This module imports no numerical library, so that ``dpspec check`` stays fast.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dpspec import limits
from dpspec.diagnostics import Diagnostic, SpecError
from dpspec.ir.models import SpecIR
from dpspec.parse import ast
from dpspec.parse.fmt import fmt
from dpspec.parse.includes import Program, load_program


@dataclass
class Spec:
    """A loaded and checked spec: the IR plus its sources and diagnostics.

    ``ok`` is False when any error was found; ``ir`` is then a partial IR (the blocks that lowered).
    """

    program: Program
    ir: SpecIR | None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.ir is not None and not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def sources(self) -> dict[str, str]:
        return self.program.sources

    def canonical_text(self) -> str:
        """The flattened canonical text: every visible block (own + included definitions), no `use`."""
        blocks = self.program.visible_blocks()
        return fmt(ast.SpecFile(tuple(blocks), file=self.program.root))

    def raise_for_errors(self) -> Spec:
        if not self.ok:
            raise SpecError(self.errors or self.diagnostics, self.sources)
        return self


def analyse(program: Program) -> Spec:
    from dpspec.check import run_checks
    from dpspec.lower import lower_program
    from dpspec.lower.lowering import cap_note

    diags = list(program.diagnostics)
    if not program.ok or program.root_file is None:
        return Spec(program, None, diags)
    spec_ir, ldiags, failed = lower_program(program)
    diags.extend(ldiags)
    if spec_ir is not None:
        found = run_checks(spec_ir, failed)
        diags.extend(found)
        if sum(d.is_error for d in found) >= limits.limit("diagnostics"):
            diags.append(cap_note("the checks stopped at the reporting limit; further problems may exist"))
    return Spec(program, spec_ir, diags)


def load(source: str | Path, *, name: str | None = None, includes: bool = True) -> Spec:
    """Load and check a spec from a path, or from text if ``source`` contains a newline or a brace.

    Never raises on a bad spec: inspect ``.ok`` and ``.diagnostics`` (or call ``.raise_for_errors()``).
    ``includes=False`` refuses every ``use`` line (DPS004), e.g. for a spec from a certificate.
    """
    with _collector_paused():
        if isinstance(source, Path) or ("\n" not in source and "{" not in source):
            return analyse(load_program(path=source, name=name, allow_includes=includes))
        return analyse(load_program(text=source, name=name or "<string>", allow_includes=includes))


def loads(text: str, *, name: str = "<string>", base_dir: str | Path | None = None, includes: bool = True) -> Spec:
    """Load and check a spec from text. ``use`` paths resolve against ``base_dir`` (default: the
    working folder) and must stay inside it; ``includes=False`` refuses every ``use`` line."""
    path = Path(base_dir) / name if base_dir is not None else None
    with _collector_paused():
        return analyse(load_program(path=path, text=text, name=name, allow_includes=includes))


@contextmanager
def _collector_paused():
    """Pause Python's cycle collector while the front end runs.

    Parsing, lowering and checking allocate many small objects that reference counting frees (the
    syntax tree and the IR hold no cycles); with the collector on, its full passes over the growing
    heap cost more than all the front end's own work on a large spec (they made `check` of a
    1 MB spec several times slower).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
