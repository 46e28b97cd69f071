"""The privacy ledger: what a runtime object has spent of its certificate, and the refusals.

A certificate states a guarantee for a fixed amount of use: a number of steps for a training, one
output for a release. The runtime object that carries the certificate keeps a ledger of what it
actually did and refuses to go beyond it:

- ``charge(n)`` is called *before* the n steps (or outputs) are produced; if the budget would be
  exceeded it raises :class:`BudgetExceededError` and nothing is released;
- ``privacy_spent(delta)`` answers "how much ε have I spent so far?" from the same accountant the
  certificate used, evaluated at the steps actually taken;
- ``state_dict()`` / ``load_state_dict()`` carry the ledger across a checkpoint, so a resumed run
  continues the same budget instead of starting a fresh one.

The ledger never imports the compiler: the ``accountant`` callable it is given is built by the
runtime object from numbers in its certificate (dpspec.accounting only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


class CertificateGuardError(RuntimeError):
    """A runtime object was asked to do something its certificate does not cover."""


class BudgetExceededError(CertificateGuardError):
    """More steps (or outputs) were requested than the certificate accounts for."""


class CapExceededError(CertificateGuardError):
    """A per-batch cap of the certificate (records per batch, node degree, …) would be exceeded."""


class DataMismatchError(CertificateGuardError, ValueError):
    """The data handed to the runtime differs from what the certificate assumes (size, columns, …)."""


@dataclass(frozen=True)
class Spent:
    """Privacy spent after ``steps`` of ``budget_steps``: ``epsilon`` at ``delta`` (for an (ε, δ)
    notion) or ε(α) at ``alpha`` (RDP/SRPP notions). ``exact_for_run`` is False when the number is
    the full-run bound rather than one for the steps taken (one-shot mechanisms such as GCON)."""

    target: str
    notion: str
    steps: int
    budget_steps: int
    epsilon: float
    delta: Optional[float] = None
    alpha: Optional[float] = None
    exact_for_run: bool = True
    note: str = ""

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != ""}


# (steps taken, δ or None) -> Spent. Built by the runtime object from its certificate.
Accountant = Callable[[int, Optional[float]], Spent]


class PrivacyLedger:
    """Steps taken against a certified budget, and ε spent so far (see the module docstring)."""

    def __init__(self, target: str, budget_steps: int, accountant: Accountant, *, unit: str = "step"):
        if budget_steps < 0:
            raise ValueError("a step budget cannot be negative")
        self.target = target
        self.budget_steps = int(budget_steps)
        self.unit = unit
        self._accountant = accountant
        self.steps_taken = 0

    @property
    def remaining(self) -> int:
        return self.budget_steps - self.steps_taken

    def charge(self, n: int = 1) -> None:
        """Record ``n`` more steps, or raise :class:`BudgetExceededError` (recording nothing)."""
        if n < 0:
            raise ValueError("cannot charge a negative number of steps")
        if self.steps_taken + n > self.budget_steps:
            raise BudgetExceededError(
                f"`{self.target}`: the certificate covers {self.budget_steps} {self.unit}(s); "
                f"{self.steps_taken} taken, {n} more requested. Compile a spec with a larger budget "
                "(and a correspondingly larger ε or more noise) to go further.")
        self.steps_taken += n

    def privacy_spent(self, delta: float | None = None) -> Spent:
        """ε spent after the steps taken so far, from the certificate's own accountant."""
        return self._accountant(self.steps_taken, delta)

    def state_dict(self) -> dict:
        return {"target": self.target, "budget_steps": self.budget_steps, "steps_taken": self.steps_taken}

    def load_state_dict(self, state: dict) -> None:
        """Resume a ledger; refuses a state from another target or another budget."""
        if state.get("target") != self.target or int(state.get("budget_steps", -1)) != self.budget_steps:
            raise DataMismatchError(
                f"this ledger state belongs to `{state.get('target')}` with a budget of "
                f"{state.get('budget_steps')} {self.unit}(s), not to `{self.target}` with {self.budget_steps}")
        taken = int(state["steps_taken"])
        if not 0 <= taken <= self.budget_steps:
            raise DataMismatchError(f"a ledger state with {taken} {self.unit}(s) taken is outside the budget "
                                    f"of {self.budget_steps}")
        self.steps_taken = taken
