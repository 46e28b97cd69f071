"""The Gaussian release mechanism: answer + N(0, σ² I).

Sampler: numpy's PCG64 generator with the ziggurat normal sampler (``Generator.normal``). Like
every floating-point Gaussian sampler it is exposed to least-significant-bit attacks (Mironov
2012); the certificate lists exact real-valued sampling as an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GaussianRelease:
    """Adds N(0, σ² I) to a query answer whose ℓ2 sensitivity is at most ``sensitivity``."""

    sigma: float
    sensitivity: float
    name: str = "release"

    def release(self, answer, rng: np.random.Generator | int | None = None) -> np.ndarray | float:
        """Return ``answer`` plus fresh Gaussian noise of standard deviation ``sigma``."""
        a = np.asarray(answer, dtype=float)
        if not np.all(np.isfinite(a)):
            raise ValueError("the query answer contains NaN or infinite values; refusing to release it")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        out = a + rng.normal(0.0, self.sigma, size=a.shape)
        return float(out) if out.ndim == 0 else out

    __call__ = release
