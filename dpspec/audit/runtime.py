"""Runtime audits: distinguishing tests of what the runtime object does beyond the noise and the clip.

The privacy audits (each family's auditor) test the certified step. The runtime audits test the runtime
paths around it, each with two neighbouring inputs and a statistic that a
runtime hole makes powerful, through the public API a user's loop calls:

* ``normaliser`` (DP-SGD, Poisson or full batch): D₀ has r zero-gradient records, D₁ one more. One
  step of ``private_gradients`` is observed; the statistic is the log of the empirical standard
  deviation of the released (normalised) gradient over thousands of coordinates. A runtime that
  divides by q·len(data) releases noise of scale σC/(q·r) on D₀ and σC/(q·(r+1)) on D₁: a threshold
  test separates them (TPR ≈ 1, FPR ≈ 0). With the certificate's constant normaliser the two
  outputs have the same law.
* ``non-finite`` (DP-SGD, SRPP-SGD, relational): on D₁ the canary record's gradient is non-finite (NaN input),
  on D₀ the record has gradient 0 (SRPP: −scale·C, the other world). Observed: the released values
  of the first k steps and whether they are finite. A runtime that drops (or poisons) the whole step
  when one example is non-finite freezes exactly when the canary is sampled; replacing its gradient
  by zero keeps the step within the certified sensitivity.
* ``step budget`` (DP-SGD, SRPP-SGD, relational): the canary neighbours of the privacy audit; a user's
  loop asks for ``budget_factor`` × T steps (starting a new optimizer or trainer of the same
  mechanism when one refuses) and stops at :class:`~dpspec.mechanisms.ledger.BudgetExceededError`
  (``budget_factor`` 25; 100 for SRPP-SGD, whose per-step leakage is smaller).
  Compared with the certificate's ε for all T steps: a runtime without a budget releases the extra
  steps and the transcript leaks more than certified. (Run on certificates of at most
  ``max_budget_steps`` = 40 steps; the extra steps cost time.)
* ``per-batch cap`` (DP-SGD, SRPP-SGD, relational): the user's loop passes batches that break a cap —
  the canary record repeated ``repeats`` times (DP-SGD; SRPP: a batch of B copies of an affected
  record), one edge of the canary node repeated (relational) — and, when the runtime refuses, the
  batch drawn as accounted. A runtime that accepts the batch adds the canary's clipped gradient
  many times.
* ``wrapper rewind``, ``wrapper parameter``, ``wrapper non-finite`` (DP-SGD): the same neighbours
  through ``dpspec.torch.make_private`` — a checkpoint reloaded to buy more noisy steps, a parameter
  added to the optimizer that the private step does not noise, a NaN record that stops the run
  (``dpspec/families/dpsgd/wrapper_audit.py``).

This module is their shared machinery — :class:`RuntimeAudit` (mixed into a family's privacy audit),
:func:`budget_steps`, :func:`oriented`, :func:`with_options`, :func:`skip` and :func:`runtime_targets` —
and names no family: each family's audit module defines its own runtime audits with them.

Every target runs a fresh copy of the mechanism per trial (its own ledger: one trial is one run),
has its claim computed from the certificate's numbers (not the object's), and is capped at
``max_trials`` outputs per neighbour: the verdicts are stark and the runs cost per-trial calls.
``options`` (per target or mechanism): ``records``, ``dim``, ``repeats``, ``budget_factor``,
``max_budget_steps``, ``checks`` (run only these of :data:`RUNTIME_CHECKS`), ``runtime = False``
to skip them all.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .base import AuditContext, SkippedTarget

__all__ = ["RUNTIME_CHECKS", "RuntimeAudit", "budget_steps", "oriented", "runtime_targets", "skip", "with_options"]

RUNTIME_CHECKS = (
    "normaliser",
    "non-finite",
    "step budget",
    "per-batch cap",
    "wrapper rewind",
    "wrapper parameter",
    "wrapper non-finite",
)


def oriented(f, x0, x1):
    """``f`` signed so that higher scores point to D₁ on the selection split (the engine's convention)."""
    d = float(np.nanmean(f(x1)) - np.nanmean(f(x0)))
    sign = -1.0 if d < 0 else 1.0
    return lambda x: sign * f(x)


def with_options(ctx: AuditContext, **opts) -> AuditContext:
    return dataclasses.replace(ctx, options={**ctx.options, **opts})


def skip(reason: str):
    from .api import AuditError

    return AuditError(reason)


class RuntimeAudit:
    name: str  # (set by the ``AuditTarget`` it is mixed into)
    check = ""
    default_trials = 400
    max_trials: int | None = 500
    pilot_trials = 8  # one run per output: the cost per output does not depend on how many are drawn

    def label(self) -> str:
        return f"{self.name} · {self.check}"


def budget_steps(ctx: AuditContext, T: int, factor: float = 25.0) -> tuple[int, int]:
    cap = int(ctx.options.get("max_budget_steps", 40))
    if T > cap:
        raise skip(
            f"step budget: the certificate covers {T} steps; the budget audit asks for "
            f"budget_factor × T steps and runs on certificates of at most {cap} steps "
            "(the families' runtime tests check the refusal itself)"
        )
    return T, int(math.ceil(float(ctx.options.get("budget_factor", factor)) * T))


def runtime_targets(ctx: AuditContext, classes) -> list:
    from .api import AuditError

    if ctx.options.get("runtime") is False:
        return []
    only = ctx.options.get("checks")
    out = []
    for cls in classes:
        if only is not None and cls.check not in only:
            continue
        try:
            out.append(cls(ctx))
        except AuditError as e:
            out.append(SkippedTarget(ctx.name, f"{ctx.name} · {cls.check}", str(e)))
    return out
