"""The runtime Gaussian sliced Wasserstein mechanism as compiled from a spec.

``release(data)`` evaluates the spec's query on a dataset (a Table, a dict of columns, or a
matrix whose columns are the query's columns in order) — the query clamps every value to its
declared bounds — and adds N(0, σ² I) with the certified σ². ``release_records(rows)`` is the
per-record reading of ``empirical``/``balanced`` priors (each record's query vector plus fresh
noise, in one call). Either is one output of the certificate: the object's
:class:`~dpspec.mechanisms.ledger.PrivacyLedger` has a budget of one, a second call raises
``BudgetExceededError`` (static SWM releases do not compose, DPS123). ``privacy_spent()`` reports
ε(α) after the outputs produced. Sampler: numpy's PCG64 ``standard_normal`` (not hardened against
floating-point attacks; see the certificate's assumptions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dpspec.mechanisms.ledger import DataMismatchError, PrivacyLedger, Spent
from dpspec.mechanisms.release import Released, ReleaseReport, query_columns

if TYPE_CHECKING:
    from dpspec.pufferfish import SWMMechanism


@dataclass(frozen=True)
class SwmRelease:
    columns: tuple[str, ...]
    mechanism: SWMMechanism
    name: str = "release"
    #: the certificate's reading (``output``): "aggregate" refuses release_records; ``records``: the n an
    #: aggregate mean's noise was calibrated for (Δ ∝ 1/n), so release() refuses any other size
    output: str | None = None
    records: int | None = None
    _ledger: PrivacyLedger = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_ledger", PrivacyLedger(self.name, 1, self._spent, unit="output"))

    @property
    def sigma(self) -> float:
        return self.mechanism.calibration.sigma

    def _released(self, X: np.ndarray, value) -> Released:
        from dpspec.data.bind import fingerprint

        q = self.mechanism.query
        lo, hi, cols = getattr(q, "lo", None), getattr(q, "hi", None), getattr(q, "columns", None)
        clamped = 0
        if lo is not None and cols is not None:
            V = X[:, list(cols)]
            clamped = int(((V < lo) | (V > hi)).sum())
        report = ReleaseReport(
            self.name, getattr(q, "name", "query"), int(X.shape[0]), clamped, 0, fingerprint(X), "given to release()"
        )
        return Released(value, report)

    def release(self, data, rng=None) -> Released:
        """query(data) + N(0, σ² I), once per object; ``Released(value, report)`` — the report's
        counts and fingerprint are private (see :class:`~dpspec.mechanisms.release.ReleaseReport`)."""
        X = query_columns(self.name, self.columns, data)
        if self.records is not None and X.shape[0] != self.records:
            raise DataMismatchError(
                f"`{self.name}` is certified for the aggregate of {self.records} records (its noise "
                f"scales like 1/n); the data has {X.shape[0]} [DPS148]"
            )
        self._ledger.charge(1)
        return self._released(X, self.mechanism.release(X, rng))

    def release_records(self, data, rng=None) -> Released:
        """Per-record reading: each record's query vector plus fresh noise, in one call (one output)."""
        if self.output == "aggregate":
            raise DataMismatchError(
                f"`{self.name}` is certified for the dataset's aggregate (`output aggregate`): "
                "its noise does not cover one answer per record [DPS148]"
            )
        X = query_columns(self.name, self.columns, data)
        self._ledger.charge(1)
        return self._released(X, self.mechanism.release_records(X, rng))

    def simulate(self, data, rng=None, *, per_record: bool = False) -> np.ndarray:
        """One independent run's output on ``data``, outside the ledger: for audits that draw many
        runs on the scenario's own worlds (``dpspec audit``). Each call is another release; never use
        it to publish anything."""
        X = query_columns(self.name, self.columns, data)
        return self.mechanism.release_records(X, rng) if per_record else self.mechanism.release(X, rng)

    def privacy_spent(self, delta: float | None = None) -> Spent:
        """ε(α) of the certified SRPP notion after the outputs produced (0 before); with ``delta``, the
        sliced (ε′, δ)-Pufferfish level (not (ε, δ)-DP)."""
        return self._ledger.privacy_spent(delta)

    @property
    def ledger(self) -> PrivacyLedger:
        return self._ledger

    def _spent(self, outputs: int, delta: float | None) -> Spent:
        cal = self.mechanism.calibration
        notion = "ave_srpp" if cal.flavour == "ave" else "joint_srpp"  # the certificate's notion names
        if delta is not None:
            eps = cal.spp_epsilon(delta)[0] if outputs else 0.0
            return Spent(
                self.name,
                "sliced_pufferfish",
                outputs,
                1,
                float(eps),
                delta=delta,
                note="sliced (ε′, δ)-Pufferfish privacy of the declared scenario, not (ε, δ)-DP",
            )
        eps = cal.epsilon_at(cal.alpha) if outputs else 0.0
        return Spent(self.name, notion, outputs, 1, float(eps), alpha=cal.alpha)


#: the family's runtime class (``Family.runtime``, read from this folder)
Runtime = SwmRelease
