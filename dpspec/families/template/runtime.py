"""The ``noisy_gd`` mechanism object: every number comes from its certificate."""

from __future__ import annotations

from typing import Any

import numpy as np


class Runtime:
    """Adds N(0, σ² I) to a clipped gradient sum, at most the certified number of times."""

    def __init__(self, sigma: float, steps: int):
        self.sigma, self.steps, self.taken = sigma, steps, 0

    @classmethod
    def from_certificate(cls, cert: Any) -> Runtime:
        p = cert.mechanism.parameters
        return cls(float(p["noise_multiplier"]), int(p["steps"]))

    def step(self, grad_sum: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.taken >= self.steps:
            raise RuntimeError("the certificate's step budget is spent")
        self.taken += 1  # charged before the noise is drawn
        return grad_sum + rng.normal(0.0, self.sigma, np.shape(grad_sum))
