"""The runtime Gaussian sliced Wasserstein mechanism as compiled from a spec.

``release(data)`` evaluates the spec's query on a dataset (a Table, a dict of columns, or a
matrix whose columns are the query's columns in order) and adds N(0, σ² I) with the certified σ².
``release_record(row)`` is the per-record reading of ``empirical``/``balanced`` priors. Sampler:
numpy's PCG64 ``standard_normal`` (not hardened against floating-point attacks; see the
certificate's assumptions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SwmRelease:
    columns: tuple[str, ...]
    mechanism: object  # dpspec.pufferfish.SWMMechanism
    name: str = "release"

    @property
    def sigma(self) -> float:
        return self.mechanism.calibration.sigma

    def _matrix(self, data) -> np.ndarray:
        if isinstance(data, np.ndarray):
            return data
        if hasattr(data, "matrix"):
            return data.matrix(self.columns)
        if isinstance(data, dict):
            return np.column_stack([np.asarray(data[c], dtype=float) for c in self.columns])
        return np.asarray(data, dtype=float)

    def release(self, data, rng=None) -> np.ndarray:
        """query(data) + N(0, σ² I)."""
        return self.mechanism.release(self._matrix(data), rng)

    def release_records(self, data, rng=None) -> np.ndarray:
        """Per-record reading: each record's query vector plus fresh noise."""
        return self.mechanism.release_records(self._matrix(data), rng)
