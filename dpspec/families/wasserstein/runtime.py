"""The runtime Wasserstein mechanism as compiled from a spec.

``release(data)`` (``output aggregate``) evaluates the query on the dataset — values clamped to the
declared bounds — and adds independent Laplace noise with the certified scales; an aggregate whose
noise scales like 1/n refuses a dataset of any other size than the certified n.
``release_records(rows)`` (``output per_record``) releases each record's answer with fresh noise. Each
object releases once (its :class:`~dpspec.mechanisms.ledger.PrivacyLedger` has a budget of one
output): Pufferfish releases do not compose in general. Every scale comes from the certificate,
none from the data or the caller. Sampler: numpy's PCG64 ``laplace`` (not hardened against
floating-point attacks; see the certificate's assumptions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dpspec.mechanisms.ledger import DataMismatchError, PrivacyLedger, Spent
from dpspec.mechanisms.release import Released, ReleaseReport, query_columns

if TYPE_CHECKING:
    from dpspec.pufferfish.queries import Query


@dataclass(frozen=True)
class WassersteinRelease:
    columns: tuple[str, ...]
    query: Query  # a dpspec.pufferfish query (Mean, Sum, Histogram)
    scales: tuple[float, ...]  # Laplace scale per output coordinate, from the certificate
    output: str = "aggregate"
    records: int | None = None  # the certified n of an aggregate whose noise scales like 1/n
    epsilon: float = 0.0
    name: str = "release"
    _ledger: PrivacyLedger = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if len(self.scales) != int(self.query.dim) or not all(s >= 0 and np.isfinite(s) for s in self.scales):
            raise ValueError("one finite non-negative Laplace scale per output coordinate is required")
        object.__setattr__(self, "_ledger", PrivacyLedger(self.name, 1, self._spent, unit="output"))

    def _noise(self, shape, rng) -> np.ndarray:
        rng = np.random.default_rng(rng)
        return rng.laplace(0.0, 1.0, size=shape) * np.asarray(self.scales)

    def _report(self, X: np.ndarray, value) -> Released:
        from dpspec.data.bind import fingerprint

        q = self.query
        lo, hi, cols = getattr(q, "lo", None), getattr(q, "hi", None), getattr(q, "columns", None)
        clamped = 0
        if lo is not None and cols is not None:
            V = X[:, list(cols)]
            clamped = int(((V < lo) | (V > hi)).sum())
        rep = ReleaseReport(
            self.name, getattr(q, "name", "query"), int(X.shape[0]), clamped, 0, fingerprint(X), "given to release()"
        )
        return Released(value, rep)

    def release(self, data, rng=None) -> Released:
        """The aggregate plus Laplace noise, once per object."""
        if self.output != "aggregate":
            raise DataMismatchError(
                f"`{self.name}` is certified per record (`output per_record`); use release_records [DPS148]"
            )
        X = query_columns(self.name, self.columns, data)
        if self.records is not None and X.shape[0] != self.records:
            raise DataMismatchError(
                f"`{self.name}` is certified for the aggregate of {self.records} records (its noise "
                f"scales like 1/n); the data has {X.shape[0]} [DPS148]"
            )
        self._ledger.charge(1)
        v = np.asarray(self.query(X), float)
        return self._report(X, v + self._noise(v.shape, rng))

    def release_records(self, data, rng=None) -> Released:
        """Each record's answer plus fresh Laplace noise, in one call (one output)."""
        if self.output != "per_record":
            raise DataMismatchError(
                f"`{self.name}` is certified for the dataset's aggregate (`output aggregate`): its "
                "noise does not cover one answer per record [DPS148]"
            )
        X = query_columns(self.name, self.columns, data)
        self._ledger.charge(1)
        v = np.asarray(self.query.per_record(X), float)
        return self._report(X, v + self._noise(v.shape, rng))

    def simulate(self, data, rng=None) -> np.ndarray:
        """One independent run's output, outside the ledger: for audits drawing many runs on the scenario's own
        laws. Never use it to publish anything."""
        X = np.asarray(data, float)
        v = np.asarray(self.query(X) if self.output == "aggregate" else self.query.per_record(X), float)
        return v + self._noise(v.shape, rng)

    def privacy_spent(self, delta: float | None = None) -> Spent:
        return self._ledger.privacy_spent(delta)

    @property
    def ledger(self) -> PrivacyLedger:
        return self._ledger

    def _spent(self, outputs: int, delta: float | None) -> Spent:
        return Spent(
            self.name,
            "pufferfish",
            outputs,
            1,
            float(self.epsilon) if outputs else 0.0,
            note="ε-Pufferfish privacy of the declared scenario, not differential privacy",
        )
