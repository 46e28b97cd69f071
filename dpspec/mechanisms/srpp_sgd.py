"""Runtime object of a compiled `srpp_sgd` training (torch imported on first use).

It holds the checked plan and the calibration the certificate was computed from; training always
goes through :class:`dpspec.srpp.SrppSgdOptimizer`, which injects exactly
``plan.gradient_noise_std(calibration)`` — the per-step std the certificate records as
``gradient_noise_std_*`` — into the mean clipped gradient (Zhang & Vorobeychik Lemma 5.1; digest §8.9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class SrppSgdMechanism:
    name: str
    plan: Any          # dpspec.srpp.SrppSgdPlan
    calibration: Any   # dpspec.accounting.huc.SRPPSGDCalibration
    discrepancy: Any = None  # dpspec.srpp.DiscrepancyModel the caps were computed from

    @property
    def steps(self) -> int:
        return self.plan.steps

    @property
    def gradient_noise_std(self) -> np.ndarray:
        """(T,) std of the Gaussian noise added to the mean clipped gradient at each step."""
        return self.plan.gradient_noise_std(self.calibration)

    def optimizer(self, model, loss_fn=None, *, seed: int | None = None, comm=None):
        """A step-by-step optimizer for your own loop (``opt.batches()``, ``opt.step(xb, yb)``)."""
        from dpspec.srpp import SrppSgdOptimizer

        return SrppSgdOptimizer(model, self.plan, self.calibration, loss_fn, seed=seed, comm=comm)

    def train(self, model, X, y, *, loss_fn=None, seed: int | None = None, steps: int | None = None,
              comm=None, progress: bool = False):
        """Train ``model`` in place on tensors (X, y) (len(X) must be the certified dataset size)."""
        from dpspec.srpp import train_srpp_sgd

        if len(X) != self.plan.sampling.dataset_size:
            raise ValueError(f"the data has {len(X)} examples but the certificate assumes dataset_size = "
                             f"{self.plan.sampling.dataset_size}; recompile with the right size")
        return train_srpp_sgd(model, X, y, self.plan, self.calibration, loss_fn, seed=seed, steps=steps,
                              progress=progress, comm=comm)
