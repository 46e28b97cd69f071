"""The Gaussian release mechanism: answer + N(0, σ² I).

Sampler: numpy's PCG64 generator with the ziggurat normal sampler (``Generator.normal``). Like
every floating-point Gaussian sampler it is exposed to least-significant-bit attacks (Mironov
2012); the certificate lists exact real-valued sampling as an assumption.

``secure=True`` switches to :mod:`dpspec.mechanisms.secure_noise`: the discrete Gaussian
(Canonne, Kamath & Steinke 2020) on a dyadic grid 2^-k ≥ 2^20 times finer than σ, exact rational
arithmetic and ``secrets`` randomness; every output is an exact multiple of the grid step. Its
privacy is at least the certificate's: the same RDP curve (CKS20 Thm 4), and for a 1-dimensional
answer δ(ε) ≤ the certified continuous δ(ε) for every ε (CKS20 Thm 7, verified numerically when the
noise is planned). Secure mode refuses a caller-supplied ``rng``.
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
    secure: bool = False

    def release(self, answer, rng: np.random.Generator | int | None = None) -> np.ndarray | float:
        """Return ``answer`` plus fresh Gaussian noise of standard deviation ``sigma``."""
        a = np.asarray(answer, dtype=float)
        if not np.all(np.isfinite(a)):
            raise ValueError("the query answer contains NaN or infinite values; refusing to release it")
        if self.secure:
            if rng is not None:
                raise ValueError("secure mode draws its randomness from the operating system (secrets); "
                                 "a seeded rng would make the noise predictable")
            from dpspec.mechanisms.secure_noise import secure_gaussian

            dim = int(a.shape[-1]) if a.ndim else 1
            return secure_gaussian(self.sigma, self.sensitivity, dim).release(a)
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        out = a + rng.normal(0.0, self.sigma, size=a.shape)
        return float(out) if out.ndim == 0 else out

    __call__ = release
