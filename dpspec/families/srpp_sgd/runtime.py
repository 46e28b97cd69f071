"""Runtime object of a compiled `srpp_sgd` training (torch imported on first use).

It holds the checked plan and the calibration the certificate was computed from; training always
goes through :class:`dpspec.srpp.SrppSgdOptimizer`, which injects exactly
``plan.gradient_noise_std(calibration)`` — the per-step std the certificate records as
``gradient_noise_std_*`` — into the mean clipped gradient (Zhang & Vorobeychik Lemma 5.1; digest §8.9).

One privacy ledger per mechanism: every optimizer it builds (``optimizer()``, ``train()``) charges
the same T-step budget, so a second optimizer or a second run continues where the first stopped
and the budget is never counted twice; ``privacy_spent()`` is ε(α) of the steps taken, from the
certificate's accountant (HUC, sa-HUC or the amplified accountant) on the prefix of its caps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpspec.mechanisms.ledger import DataMismatchError, LedgerOwner, PrivacyLedger, Spent, fingerprint


@dataclass(frozen=True, eq=False)
class SrppSgdMechanism(LedgerOwner):
    name: str
    plan: Any  # dpspec.srpp.SrppSgdPlan
    calibration: Any  # dpspec.accounting.huc.SRPPSGDCalibration
    discrepancy: Any = None  # dpspec.srpp.DiscrepancyModel the caps were computed from
    ledger: PrivacyLedger = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        cal = self.calibration
        fp = fingerprint(
            mechanism="srpp_sgd",
            sigma2=cal.sigma2,
            alpha=cal.alpha,
            flavour=cal.flavour,
            accountant=cal.accountant,
            steps=self.plan.steps,
            caps=cal.caps_sha256,
            sampling=repr(self.plan.sampling.describe()),
            units=cal.noise_units,
        )
        object.__setattr__(self, "ledger", PrivacyLedger(self.name, self.plan.steps, self._spent, fingerprint=fp))

    @property
    def steps(self) -> int:
        return self.plan.steps

    @property
    def gradient_noise_std(self) -> np.ndarray:
        """(T,) std of the Gaussian noise added to the mean clipped gradient at each step."""
        return self.plan.gradient_noise_std(self.calibration)

    # --- the ledger's accountant --------------------------------------------------------------------

    def _prefix_epsilon(self, steps: int) -> float:
        from dpspec.accounting.huc import amplified_epsilon, srpp_sgd_epsilon

        cal = self.calibration
        if steps == self.plan.steps:
            return float(cal.epsilon_at(cal.alpha))  # exactly the certificate's number
        if cal.accountant == "amplified":
            A, k, lp = cal._amp()
            return float(amplified_epsilon(cal.sigma2, A[:steps], k, lp, cal.alpha))
        caps = cal.caps
        if caps is None:
            from dpspec.srpp import plan_caps

            caps = plan_caps(self.plan, self.discrepancy, cal.accountant)[0]
        caps = np.asarray(caps, dtype=float).reshape(self.plan.steps, -1)
        return float(srpp_sgd_epsilon(cal.sigma2, caps[:steps], cal.alpha, cal.flavour, cal.weights))

    def _spent(self, steps: int, delta: float | None) -> Spent:
        cal = self.calibration
        if delta is not None:
            raise ValueError(
                f"`{self.name}`: SRPP-SGD certifies ε(α) of {cal.notion}, not an (ε, δ) pair; "
                "call privacy_spent() without δ"
            )
        eps = 0.0 if steps == 0 else self._prefix_epsilon(steps)
        note = (
            ""
            if cal.failure_probability == 0
            else f"holds except with probability {cal.failure_probability:.3g} (the caps' failure probability)"
        )
        return Spent(
            target=self.name,
            notion=cal.notion_id,
            steps=steps,
            budget_steps=self.plan.steps,
            epsilon=eps,
            alpha=float(cal.alpha),
            note=note,
            accountant=f"{cal.accountant} ({cal.flavour}), ε(α) of the first {steps} step(s) of the caps",
        )

    # --- training -----------------------------------------------------------------------------------

    def optimizer(self, model, loss_fn=None, *, seed: int | None = None, comm=None):
        """A step-by-step optimizer for your own loop (``opt.batches()``, ``opt.step(xb, yb)`` or
        ``opt.step(xb, yb, idx)``); it charges this mechanism's ledger."""
        from dpspec.srpp import SrppSgdOptimizer

        return SrppSgdOptimizer(
            model, self.plan, self.calibration, loss_fn, seed=seed, comm=comm, ledger=self.ledger, name=self.name
        )

    def train(
        self,
        model,
        X,
        y,
        *,
        loss_fn=None,
        seed: int | None = None,
        steps: int | None = None,
        comm=None,
        progress: bool = False,
    ):
        """Train ``model`` in place on tensors (X, y) for the remaining certified steps (or ``steps`` of
        them); len(X) must be the certified dataset size."""
        from dpspec.srpp import train_srpp_sgd

        if len(X) != self.plan.sampling.dataset_size:
            raise DataMismatchError(
                f"`{self.name}`: the data has {len(X)} examples but the certificate assumes "
                f"dataset_size = {self.plan.sampling.dataset_size}; recompile with the right size"
            )
        return train_srpp_sgd(
            model,
            X,
            y,
            self.plan,
            self.calibration,
            loss_fn,
            seed=seed,
            steps=steps,
            progress=progress,
            comm=comm,
            ledger=self.ledger,
        )


#: the family's runtime class (``Family.runtime``, read from this folder)
Runtime = SrppSgdMechanism
