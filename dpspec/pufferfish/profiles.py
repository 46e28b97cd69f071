"""Slice profiles (𝒰, ω): finite sets of unit directions with probability weights (ZV25 §3.2).

Two readings of a sampled profile must be told apart and recorded (digest §3.2):
* ``"finite"`` — ω *is* the empirical profile ω_m = Σ_ℓ ω_ℓ δ_{u_ℓ}; the guarantee is exact with
  respect to these directions (ZV25 §4.3.2 "Finite ω").
* ``"monte_carlo"`` — ω is the continuous uniform measure on 𝕊^{d−1} and the m directions are
  i.i.d. draws; the PAC Thms 4.7/4.8 apply (needs γ and Δ0).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

__all__ = ["SliceProfile", "explicit_profile", "axes_profile", "sphere_profile", "check_directions"]

SPHERE_GENERATOR = "numpy.random.default_rng(seed).standard_normal((m, d)); rows divided by their ℓ2 norm"


def check_directions(directions, *, name: str = "directions", tol: float = 1e-9) -> np.ndarray:
    """Validate an (m, d) array of unit rows; returns it as float64."""
    U = np.asarray(directions, dtype=float)
    if U.ndim == 1:
        U = U[None, :]
    if U.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (m, d), got shape {U.shape}")
    if U.shape[0] == 0:
        raise ValueError(f"{name} is empty: a slice profile needs at least one direction")
    if U.shape[1] == 0:
        raise ValueError(f"{name} has dimension d = 0")
    if not np.all(np.isfinite(U)):
        raise ValueError(f"{name} contains non-finite values")
    norms = np.linalg.norm(U, axis=1)
    bad = np.abs(norms - 1.0) > tol
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"{name} must be unit vectors (ℓ2 norm 1); row {i} has norm {norms[i]!r} "
            "(use explicit_profile(..., normalize=True))"
        )
    return U


def _check_weights(weights, m: int) -> np.ndarray:
    if weights is None:
        return np.full(m, 1.0 / m)
    w = np.asarray(weights, dtype=float).reshape(-1)
    if w.shape[0] != m:
        raise ValueError(f"weights has {w.shape[0]} entries for {m} directions")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and non-negative")
    s = float(w.sum())
    if abs(s - 1.0) > 1e-9:
        raise ValueError(f"weights must sum to 1, got {s!r}")
    return w / s


@dataclass(frozen=True, eq=False)
class SliceProfile:
    """A slice profile: ``directions`` (m, d) unit rows and ``weights`` (m,) summing to 1."""

    directions: np.ndarray
    weights: np.ndarray
    kind: str = "explicit"  # explicit | axes | sphere
    reading: str = "finite"  # finite | monte_carlo
    seed: int | None = None

    def __post_init__(self):
        if self.reading not in ("finite", "monte_carlo"):
            raise ValueError(f"reading must be 'finite' or 'monte_carlo', got {self.reading!r}")
        if self.reading == "monte_carlo":
            from dpspec.accounting.swm import SoundnessError

            if self.kind != "sphere":
                raise SoundnessError(
                    "the Monte-Carlo (PAC) reading needs directions drawn i.i.d. from the continuous profile",
                    rule="DPS407",
                    hint="use sphere_profile(m, d, seed, reading='monte_carlo')",
                )
            if not np.allclose(self.weights, 1.0 / self.m, rtol=0, atol=1e-15):
                raise SoundnessError("the Monte-Carlo reading needs uniform weights 1/m", rule="DPS407")

    @property
    def m(self) -> int:
        return int(self.directions.shape[0])

    @property
    def d(self) -> int:
        return int(self.directions.shape[1])

    def describe(self) -> dict:
        """A JSON-able description, with hashes of the directions and weights (float64 LE bytes)."""
        out = {
            "kind": self.kind,
            "reading": self.reading,
            "m": self.m,
            "d": self.d,
            "directions_sha256": hashlib.sha256(np.ascontiguousarray(self.directions, "<f8").tobytes()).hexdigest(),
            "weights_sha256": hashlib.sha256(np.ascontiguousarray(self.weights, "<f8").tobytes()).hexdigest(),
            "weights": "uniform" if np.allclose(self.weights, 1.0 / self.m, rtol=0, atol=1e-15) else "explicit",
        }
        if self.kind == "sphere":
            out["seed"] = self.seed
            out["generator"] = SPHERE_GENERATOR
        return out


def explicit_profile(directions, weights=None, *, normalize: bool = False) -> SliceProfile:
    """A finite profile from user directions (rows; normalised if ``normalize``) and weights."""
    U = np.asarray(directions, dtype=float)
    if U.ndim == 1:
        U = U[None, :]
    if normalize:
        if U.ndim != 2 or U.shape[0] == 0:
            raise ValueError("directions must be a non-empty 2-D array (m, d)")
        n = np.linalg.norm(U, axis=1)
        if np.any(n == 0) or not np.all(np.isfinite(n)):
            raise ValueError("directions contain a zero or non-finite row; cannot normalise")
        U = U / n[:, None]
    U = check_directions(U)
    return SliceProfile(U.copy(), _check_weights(weights, U.shape[0]), kind="explicit")


def axes_profile(d: int, weights=None) -> SliceProfile:
    """The d coordinate axes e_1..e_d (uniform weights unless given)."""
    d = int(d)
    if d < 1:
        raise ValueError(f"d must be ≥ 1, got {d}")
    return SliceProfile(np.eye(d), _check_weights(weights, d), kind="axes")


def sphere_profile(m: int, d: int, seed: int, *, reading: str = "finite") -> SliceProfile:
    """m directions uniform on 𝕊^{d−1} (u = g/‖g‖, g ~ 𝒩(0, I_d)), weights 1/m, reproducible from seed.

    ``reading="finite"``: the guarantee is w.r.t. these m directions (exact). ``"monte_carlo"``:
    w.r.t. the uniform measure on the sphere, with the PAC terms of Thms 4.7/4.8.
    """
    m, d = int(m), int(d)
    if m < 1:
        raise ValueError(f"m (number of directions) must be ≥ 1, got {m}")
    if d < 1:
        raise ValueError(f"d must be ≥ 1, got {d}")
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((m, d))
    n = np.linalg.norm(G, axis=1)
    while np.any(n == 0):  # probability zero; keep it deterministic anyway
        G[n == 0] = rng.standard_normal((int(np.sum(n == 0)), d))
        n = np.linalg.norm(G, axis=1)
    return SliceProfile(G / n[:, None], np.full(m, 1.0 / m), kind="sphere", reading=reading, seed=seed)
