"""Minibatch sampling schemes of SRPP-SGD and their normalisation (ZV25 §5.1, App. E, App. I).

The accountant needs to know, for every step, the *normalised discrepancy* κ_t = K_t / B̄_t: the
number of secret-affected records in the batch divided by the constant (or realised) batch size
the clipped gradient sum is divided by. :class:`Sampling` fixes that convention once and is shared
by the discrepancy models (which bound κ_t) and the runtime (which draws batches and divides).

* ``"wor"``: uniform subsets of exactly B records without replacement (Assumption I.1); B̄ = B.
* ``"wr"``: B i.i.d. uniform indices (Assumption I.2); repeated indices count repeatedly; B̄ = B.
  HUC is unusable here (the cap collapses to B, Prop I.1; DPS501); sa-HUC is fine.
* ``"poisson"``: each record independently with probability q; B_t is random (App. E).
  ``normalization="expected"`` divides by B̄ = qN (a data-independent constant; an empty batch
  gives ḡ = 0, a deterministic update — App. E (ii)); ``"realized"`` divides by B_t and needs
  ``empty_batch`` ∈ {"skip" (deterministic: no update when B_t = 0), "resample" (redraw until
  B_t ≥ 1)}, else DPS502.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dpspec.accounting.huc import SrppSoundnessError

__all__ = ["Sampling", "SCHEMES"]

SCHEMES = ("wor", "wr", "poisson")


@dataclass(frozen=True)
class Sampling:
    scheme: str
    dataset_size: int
    batch_size: int | None = None
    rate: float | None = None
    normalization: str = "batch"  # "batch" (wor/wr), "expected" / "realized" (poisson)
    empty_batch: str | None = None  # poisson + realized: "skip" | "resample"

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if (
            isinstance(self.dataset_size, bool)
            or not isinstance(self.dataset_size, (int, np.integer))
            or self.dataset_size < 1
        ):
            raise ValueError(f"dataset_size must be an integer ≥ 1, got {self.dataset_size!r}")
        object.__setattr__(self, "dataset_size", int(self.dataset_size))
        if self.scheme in ("wor", "wr"):
            b = self.batch_size
            if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
                raise ValueError(f"batch_size must be an integer ≥ 1 for scheme={self.scheme!r}, got {b!r}")
            if self.scheme == "wor" and b > self.dataset_size:
                raise ValueError(
                    f"batch_size (B = {b}) is larger than dataset_size (N = {self.dataset_size}) "
                    "for sampling without replacement"
                )
            object.__setattr__(self, "batch_size", int(b))
            if self.normalization not in ("batch",):
                raise ValueError(
                    f"normalization must be 'batch' for scheme={self.scheme!r}, got {self.normalization!r}"
                )
            object.__setattr__(self, "rate", self.batch_size / self.dataset_size)
        else:
            q = self.rate
            if q is None and self.batch_size is not None:
                b = self.batch_size
                if b > self.dataset_size:
                    raise ValueError(f"batch_size (B = {b}) is larger than dataset_size (N = {self.dataset_size})")
                q = b / self.dataset_size
            try:
                q = float(q)
            except (TypeError, ValueError):
                raise ValueError(f"rate must be a number in (0, 1] for Poisson sampling, got {self.rate!r}") from None
            if not (0.0 < q <= 1.0):
                raise ValueError(f"rate must lie in (0, 1] for Poisson sampling, got {q!r}")
            object.__setattr__(self, "rate", q)
            object.__setattr__(self, "batch_size", None)
            norm = self.normalization
            if norm == "batch":
                raise SrppSoundnessError(
                    "Poisson sampling has a random batch size: declare how the clipped sum is normalised",
                    rule="DPS502",
                    hint="normalization='expected' (divide by qN; empty batches give a deterministic update) or "
                    "normalization='realized' with empty_batch='skip' or 'resample'",
                )
            if norm not in ("expected", "realized"):
                raise ValueError(f"normalization must be 'expected' or 'realized' for Poisson, got {norm!r}")
            if norm == "realized" and self.empty_batch not in ("skip", "resample"):
                raise SrppSoundnessError(
                    "Poisson sampling normalised by the realised batch size needs B_t ≥ 1 handling: the update "
                    "divides by B_t, which can be 0",
                    rule="DPS502",
                    hint="empty_batch='skip' (no update when B_t = 0, App. E (ii)) or 'resample' (App. E (i))",
                )
            if norm == "expected" and self.empty_batch not in (None, "noise_only"):
                raise ValueError(
                    "with normalization='expected' an empty batch gives ḡ = 0 (noise only); empty_batch must be None"
                )

    # --- derived -------------------------------------------------------------------------------

    @property
    def batch(self) -> int:
        """B of a fixed-size scheme (``wor``, ``wr``): ``__post_init__`` refuses these without an integer B."""
        assert self.batch_size is not None, "a Poisson scheme has no fixed batch size"
        return self.batch_size

    @property
    def q(self) -> float:
        """The sampling rate: ``__post_init__`` sets it for every scheme (B/N for ``wor``, ``wr``)."""
        assert self.rate is not None
        return self.rate

    @property
    def normalizer(self) -> float:
        """B̄: the constant the clipped sum is divided by (None-like for Poisson realized → 0.0)."""
        if self.scheme in ("wor", "wr"):
            return float(self.batch)
        if self.normalization == "expected":
            return self.q * self.dataset_size
        return 0.0

    @property
    def expected_batch(self) -> float:
        return float(self.batch_size) if self.batch_size is not None else self.q * self.dataset_size

    def steps_per_epoch(self) -> int:
        return max(1, math.ceil(self.dataset_size / self.expected_batch))

    def describe(self) -> dict:
        d = {
            "scheme": self.scheme,
            "dataset_size": self.dataset_size,
            "rate": self.rate,
            "normalization": self.normalization,
        }
        if self.batch_size is not None:
            d["batch_size"] = self.batch_size
        if self.empty_batch is not None:
            d["empty_batch"] = self.empty_batch
        return d

    # --- drawing batches exactly as accounted ---------------------------------------------------

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One batch of indices drawn as the accountant assumes (multiset for WR)."""
        n = self.dataset_size
        if self.scheme == "wor":
            return rng.choice(n, size=self.batch_size, replace=False)
        if self.scheme == "wr":
            return rng.integers(0, n, size=self.batch_size)
        while True:
            idx = np.flatnonzero(rng.random(n) < self.q)
            if idx.size > 0 or self.empty_batch != "resample":
                return idx

    def batches(self, n: int, rng: np.random.Generator, steps: int) -> Iterator[np.ndarray]:
        if n != self.dataset_size:
            from dpspec.mechanisms.ledger import DataMismatchError

            raise DataMismatchError(
                f"the data has {n} examples but the certificate assumes dataset_size = "
                f"{self.dataset_size}; recalibrate with the right size"
            )
        for _ in range(int(steps)):
            yield self.draw(rng)
