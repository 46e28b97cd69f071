"""The one error type of the calibrate/emit stage: a located diagnostic, like any spec error."""

from __future__ import annotations

from typing import NoReturn

from dpspec.check.framework import diag
from dpspec.diagnostics import Diagnostic
from dpspec.errors import DpspecError


class CompileError(DpspecError):
    def __init__(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic
        super().__init__(diagnostic.message)


def fail(rule: str, message: str, node, field: str | None = None, hint: str | None = None) -> NoReturn:
    """Stop compiling this target with diagnostic ``rule`` pointing at ``node``'s ``field``."""
    raise CompileError(diag(rule, message, node, field, hint=hint))
