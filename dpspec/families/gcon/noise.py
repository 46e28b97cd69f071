"""Noise samplers of the GCON release.

Objective-perturbation noise -- Algorithm 2, eq. (14), Lemma 6 (Wei et al. 2024)
--------------------------------------------------------------------------------
Each column ``b_j`` of ``B in R^{d x c}`` is drawn independently with density proportional to
``exp(-beta ||b||_2)`` on R^d. In polar coordinates that is

* radius ``a ~ Erlang(d, rate beta)`` = Gamma(shape d, scale 1/beta), pdf
  ``a^{d-1} e^{-beta a} beta^d / (d-1)!`` (eq. (14)); ``E a = d / beta``;
* direction uniform on the sphere S^{d-1}: ``u / ||u||`` with ``u ~ N(0, I_d)`` (Lemma 6, by the
  rotation invariance of the standard normal).

``rng.gamma`` is numpy's Marsaglia-Tsang sampler; ``rng.standard_normal`` is the ziggurat.

AMP output noise
----------------
``gaussian_output_noise`` draws i.i.d. ``N(0, sigma^2)`` entries for the approximate-minimiser
correction (Iyengar et al. 2019 Alg. 1; sigma from ``dpspec.accounting.gcon.amp_calibration``).

Floating-point caveats (rule DPS724)
------------------------------------
The privacy proofs are about continuous distributions. A float64 sampler produces a discrete
distribution that only approximates them: the radius has ~53 bits of relative resolution, the
direction is a normalised float vector, and the tails are cut where the generator's uniform
variates run out (about 2^-53). Mironov (2012, "On significance of the least significant bits for
differential privacy") showed that such artefacts can break the Laplace mechanism's guarantee when
the output reveals the low-order bits of ``f(D) + noise``. Here the noise is not released directly
(it enters an optimisation whose output is further rounded and, with AMP, perturbed by Gaussian
noise), and no attack on objective perturbation is known, but the formal guarantee is for the
idealised real-valued sampler. Also: numpy's PCG64 is not a cryptographic generator; a seeded run is
reproducible and must never be used for a production release (use ``rng=None``, which seeds from
the OS entropy pool).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["sample_objective_noise", "sample_radius", "sample_direction", "gaussian_output_noise", "as_generator"]


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """``None`` -> OS-entropy-seeded PCG64; an int -> a reproducible (test-only) generator."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def sample_radius(d: int, beta: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Erlang(d, rate beta) radii -- eq. (14): ``rng.gamma(shape=d, scale=1/beta)``."""
    return rng.gamma(shape=float(d), scale=1.0 / beta, size=size)


def sample_direction(d: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` directions uniform on S^{d-1}, as a (d, size) array -- Alg. 2, Lemma 6.

    Gaussian vectors are normalised; a zero vector (probability 0, but possible in floats for
    d = 1) is redrawn.
    """
    u = rng.standard_normal((d, size))
    norms = np.linalg.norm(u, axis=0)
    while np.any(norms == 0.0):
        bad = norms == 0.0
        u[:, bad] = rng.standard_normal((d, int(bad.sum())))
        norms = np.linalg.norm(u, axis=0)
    return u / norms


def sample_objective_noise(d: int, c: int, beta: float, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """``B = [b_1 ... b_c]`` with i.i.d. columns of density prop. to ``exp(-beta ||b||)`` --
    Alg. 2 applied to each column (eq. (13)-(14)). ``beta = inf`` (Psi = 0) returns zeros."""
    g = as_generator(rng)
    if beta == math.inf:
        return np.zeros((d, c))
    if not (beta > 0.0 and math.isfinite(beta)):
        raise ValueError(f"beta must be > 0, got {beta!r}")
    return sample_direction(d, c, g) * sample_radius(d, beta, c, g)[None, :]


def gaussian_output_noise(
    shape: tuple[int, ...], sigma: float, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """i.i.d. ``N(0, sigma^2)`` of the AMP step (Iyengar et al. 2019, Alg. 1 last line)."""
    g = as_generator(rng)
    if sigma == 0.0:
        return np.zeros(shape)
    return sigma * g.standard_normal(shape)
