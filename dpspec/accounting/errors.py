"""One error type for configurations whose guarantee would not be provable.

Each mechanism family keeps its own catalogue of stable rule ids (``DPS4xx`` SWM, ``DPS5xx``
SRPP-SGD, ``DPS6xx`` relational DP-SGD, ``DPS7xx`` GCON) and registers it here, so
``except SoundnessError`` catches every family and an unknown rule id is a programming error.
"""

from __future__ import annotations

from collections.abc import Mapping

from dpspec.errors import DpspecError

_CATALOGUE: dict[str, str] = {}


def register_rules(rules: Mapping[str, str]) -> None:
    """Add a family's rule catalogue (id -> one-line summary)."""
    for rid, summary in rules.items():
        if _CATALOGUE.get(rid, summary) != summary:
            raise ValueError(f"soundness rule id {rid} registered twice with different meanings")
        _CATALOGUE[rid] = summary


def known_rules() -> dict[str, str]:
    return dict(_CATALOGUE)


class SoundnessError(DpspecError, ValueError):
    """A configuration whose guarantee would not be provable (an upper bound could fail).

    ``rule`` is a stable id from a registered catalogue; ``hint`` says how to fix it.
    """

    def __init__(self, message: str, *, rule: str, hint: str | None = None):
        if rule not in _CATALOGUE:
            raise ValueError(f"unknown soundness rule id {rule!r}")
        self.rule = rule
        self.hint = hint
        self.message = message
        text = f"[{rule}] {message}"
        if hint:
            text += f" (hint: {hint})"
        super().__init__(text)
