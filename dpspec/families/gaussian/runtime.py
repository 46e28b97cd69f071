"""The Gaussian release mechanism: evaluate the certified query on the data, add N(0, σ² I), once.

Built from its certificate (:meth:`GaussianRelease.from_certificate`): σ, Δ, the query's function,
columns, clamping bounds and the public dataset size all come from the certificate's
``mechanism.parameters`` and ``query`` record, never from the data or the caller.

``release(data)`` reads the query's columns from the data (a dpspec ``Table``, a dict of columns,
or nothing to use the data bound when the spec was compiled), clamps every value of column c to
[lo_c, hi_c] (a missing value becomes the bound nearest 0), evaluates the query — ``sum``,
``mean`` = clamped sum / the certified n, ``count``, ``histogram`` over equal-width bins — and adds
the certified noise. Clamping is what makes the certified sensitivity hold for *any* data: the
answers on two neighbouring tables differ by at most Δ (dpspec.compiler.sensitivity).

A release object releases **once**: its :class:`~dpspec.mechanisms.ledger.PrivacyLedger` has a
budget of one output, a second call raises ``BudgetExceededError``. ``privacy_spent()`` reports ε
after the outputs actually produced (0 before, the certificate's ε after).

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

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpspec.mechanisms.ledger import CertificateGuardError, DataMismatchError, PrivacyLedger, Spent
from dpspec.mechanisms.release import Released, ReleaseReport


@dataclass(frozen=True)
class QueryPlan:
    """The query a release evaluates, as its certificate's ``query`` record states it: ``bounds``
    has one [lo, hi] per column; ``dataset_size`` is the public n (a mean divides by it; under
    ``substitution`` the data must have exactly n rows)."""

    function: str
    columns: tuple[str, ...]
    bounds: tuple[tuple[float, float], ...]
    bins: int | None
    dimension: int
    dataset_size: int | None
    relation: str | None

    @classmethod
    def from_record(cls, q, relation: str | None) -> QueryPlan:
        return cls(
            q.function,
            tuple(q.columns),
            tuple((float(lo), float(hi)) for lo, hi in q.bounds),
            q.bins,
            int(q.dimension),
            q.dataset_size,
            relation,
        )

    def text(self) -> str:
        args = list(self.columns) + ([f"bins = {self.bins}"] if self.bins else [])
        if self.bounds:
            args.append("bounds = [" + ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in self.bounds) + "]")
        return f"{self.function}({', '.join(args)})"

    def check(self, table, target: str) -> None:
        """Refuse data the certificate does not describe, before any value is read (DPS148)."""
        from dpspec.diagnostics import did_you_mean

        for c in self.columns:
            if c not in table.columns:
                hint = did_you_mean(c, table.columns, "column") or f"its columns are {', '.join(table.columns)}"
                raise DataMismatchError(
                    f"`{target}` reads column `{c}`, which the data does not have ({hint}) [DPS148]"
                )
            if not table.is_numeric(c):
                raise DataMismatchError(
                    f"`{target}` reads column `{c}` as numbers, but it is categorical in the "
                    "data: encode it as numbers first [DPS148]"
                )
        n = self.dataset_size
        if self.relation == "substitution" and n is not None and len(table) != n:
            # the size is public under substitution, so refusing another size reveals nothing
            raise DataMismatchError(
                f"`{target}` is certified for substitution on exactly {n} rows (dataset_size), "
                f"but the data has {len(table)}; bind the data the certificate describes "
                "[DPS148]"
            )

    def evaluate(self, table) -> tuple[np.ndarray, int, int, list]:
        """(answer, clamped count, missing count, arrays read) on a checked table."""
        if self.function == "count":
            return np.array([float(len(table))]), 0, 0, [np.asarray(table.column(c)) for c in table.columns]
        clamped = missing = 0
        cols, raw = [], []
        for c, (lo, hi) in zip(self.columns, self.bounds):
            v = np.asarray(table.column(c), dtype=float)
            raw.append(v)
            nan = np.isnan(v)
            missing += int(nan.sum())
            v = np.where(nan, min(max(0.0, lo), hi), v)  # a missing value counts as the bound nearest 0
            out = (v < lo) | (v > hi)
            clamped += int(out.sum())
            cols.append(np.clip(v, lo, hi))
        if self.function == "histogram":
            assert self.bins is not None  # a histogram states its bins (DPS129)
            lo, hi = self.bounds[0]
            edges = np.linspace(lo, hi, self.bins + 1)
            idx = np.clip(np.searchsorted(edges, cols[0], side="right") - 1, 0, self.bins - 1)
            return np.bincount(idx, minlength=self.bins).astype(float), clamped, missing, raw
        # math.fsum: the correctly rounded sum, so float re-ordering cannot add to the sensitivity
        sums = np.array([math.fsum(v.tolist()) for v in cols])
        if self.function == "mean":
            assert self.dataset_size is not None  # a mean divides by the public n (DPS129)
            sums = sums / float(self.dataset_size)
        return sums, clamped, missing, raw


def _check_rng(secure: bool, rng) -> None:
    if secure and rng is not None:
        raise ValueError(
            "secure mode draws its randomness from the operating system (secrets); "
            "a seeded rng would make the noise predictable"
        )


def _noise(sigma: float, sensitivity: float, secure: bool, a: np.ndarray, rng):
    if not np.all(np.isfinite(a)):
        raise ValueError("the query answer contains NaN or infinite values; refusing to release it")
    _check_rng(secure, rng)
    if secure:
        from dpspec.mechanisms.secure_noise import secure_gaussian

        dim = int(a.shape[-1]) if a.ndim else 1
        return secure_gaussian(sigma, sensitivity, dim).release(a)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    out = a + rng.normal(0.0, sigma, size=a.shape)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class GaussianRelease:
    """Adds N(0, σ² I) to a query answer whose ℓ2 sensitivity is at most ``sensitivity``, once.

    Build it with :meth:`from_certificate` (the compiler does). ``query`` is None for a release
    whose answer the caller supplies (``vector`` queries, declared sensitivities without bounds).
    ``data``: the table bound when the spec was compiled; ``data_name``: the name of a
    ``dataset(name)`` binding that arrives at run time."""

    sigma: float
    sensitivity: float
    name: str = "release"
    secure: bool = False
    query: QueryPlan | None = None
    dimension: int | None = None
    mu: float | None = None
    delta: float | None = None  # the certificate's δ, for privacy_spent()
    alpha: float | None = None  # the certificate's Rényi order when its guarantee is RDP
    data: Any = field(default=None, repr=False, compare=False)
    data_name: str | None = None
    data_source: str = ""
    _ledger: PrivacyLedger = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_ledger", PrivacyLedger(self.name, 1, self._spent, unit="output"))

    @classmethod
    def from_certificate(cls, record, *, data=None, data_name: str | None = None, secure: bool = False):
        """The runtime of a certificate's release result: every number is read from ``record``."""
        p = record.mechanism.parameters
        q = record.query
        plan = (
            QueryPlan.from_record(q, record.protected.relation) if q is not None and q.evaluated_on == "data" else None
        )
        g = record.guarantee
        return cls(
            sigma=float(p["sigma"]),
            sensitivity=float(p["sensitivity"]),
            name=record.name,
            secure=secure,
            query=plan,
            dimension=q.dimension if q is not None else p.get("dimension"),
            mu=float(p["mu"]),
            delta=g.delta,
            alpha=g.alpha if g.delta is None else None,
            data=data,
            data_name=data_name,
            data_source=(q.data or "") if q is not None else "",
        )

    # --- the one-shot release ---------------------------------------------------------------------

    def release(self, data=None, rng: np.random.Generator | int | None = None) -> Released:
        """Evaluate the certified query on ``data`` (a dpspec Table or a dict of columns; omitted:
        the data bound at compile time), clamp, add the certified noise; once per object.

        Raises ``DataMismatchError`` (nothing charged) when the data lacks a column, a column is not
        numeric, or — under substitution — the data has another size than the certified n;
        ``BudgetExceededError`` on a second call. Returns ``Released(value, report)``: only
        ``value`` is covered by the certificate, the report's counts are private."""
        if self.query is None:
            raise CertificateGuardError(
                f"`{self.name}`: the certificate does not say how to compute this release's answer from data "
                "(a `vector` query, or a declared sensitivity without bounds); compute it yourself and call "
                "release_answer(answer)"
            )
        _check_rng(self.secure, rng)
        table, source = self._table(data)
        self.query.check(table, self.name)
        self._ledger.charge(1)
        answer, clamped, missing, arrays = self.query.evaluate(table)
        from dpspec.data.bind import fingerprint

        value = _noise(self.sigma, self.sensitivity, self.secure, answer if answer.size > 1 else answer[0], rng)
        report = ReleaseReport(
            self.name, self.query.text(), int(len(table)), clamped, missing, fingerprint(*arrays), source
        )
        return Released(value, report)

    __call__ = release

    def release_answer(self, answer, rng: np.random.Generator | int | None = None) -> Released:
        """Add the certified noise to an ``answer`` the caller computed; once per object. Returns
        ``Released(value, report)`` like :meth:`release` (``value, report = release_answer(a)``; the report
        names no rows: the answer came from the caller).

        Caveat: the certificate's guarantee then rests on the caller — the answer must have ℓ2
        sensitivity ≤ ``sensitivity`` w.r.t. the protected unit (the query evaluated on values
        clamped to the certified bounds, a mean divided by the certified n, …). Nothing here can
        check that; prefer ``release(data)``, which evaluates the certified query itself. The answer
        must have the certified dimension.

        Refused for a release whose certificate says the query is evaluated on the data
        (``query.evaluated_on = "data"``): its Δ is derived from the clamping that ``release(data)``
        does, and an answer computed elsewhere would not be covered by that certificate. To release
        an answer of your own, declare it as one (``query vector(dimension = d, sensitivity = Δ)``)."""
        if self.query is not None:
            raise CertificateGuardError(
                f"`{self.name}` is certified for `{self.query.text()}` evaluated by dpspec on the data (values "
                "clamped to the certified bounds): call release(data); an answer computed elsewhere is not covered "
                "by this certificate (declare `query vector(dimension = d, sensitivity = Δ)` to release your own "
                "answer)"
            )
        a = np.asarray(answer, dtype=float)
        dim = self.dimension
        if a.ndim > 1 or (dim is not None and a.size != dim):
            raise DataMismatchError(
                f"`{self.name}` is certified for an answer of dimension {dim}, got shape {a.shape} [DPS148]"
            )
        if not np.all(np.isfinite(a)):
            raise ValueError("the query answer contains NaN or infinite values; refusing to release it")
        _check_rng(self.secure, rng)
        self._ledger.charge(1)
        from dpspec.data.bind import fingerprint

        value = _noise(self.sigma, self.sensitivity, self.secure, a, rng)
        report = ReleaseReport(
            self.name,
            "an answer computed by the caller",
            0,
            0,
            0,
            fingerprint(a.reshape(-1)),
            "given to release_answer()",
        )
        return Released(value, report)

    def simulate(self, answers, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Each row of ``answers`` plus independent certified noise, as that many separate one-shot
        releases would give it. For audits on synthetic worst-case answers (``dpspec audit``): it
        reads no data and is not charged to the ledger, so it must never be given private answers."""
        return np.asarray(_noise(self.sigma, self.sensitivity, self.secure, np.asarray(answers, dtype=float), rng))

    # --- the ledger --------------------------------------------------------------------------------

    def privacy_spent(self, delta: float | None = None) -> Spent:
        """ε spent so far: 0 before the release, the certificate's ε after it (at ``delta``, or at the
        certificate's δ; for an RDP certificate ε(α) at its order)."""
        return self._ledger.privacy_spent(delta)

    @property
    def ledger(self) -> PrivacyLedger:
        return self._ledger

    def _spent(self, outputs: int, delta: float | None) -> Spent:
        from dpspec.accounting import analytic_gaussian as GR

        mu = self.mu if self.mu is not None else self.sensitivity / self.sigma
        if delta is None and self.delta is None and self.alpha is not None:
            eps = float(GR.rdp_curve([self.alpha], mu)[0]) if outputs else 0.0  # as the certificate computes it
            return Spent(self.name, "renyi_dp", outputs, 1, eps, alpha=self.alpha)
        d = delta if delta is not None else self.delta
        if d is None:
            raise ValueError(f"`{self.name}`: give the δ at which to report ε")
        eps = GR.epsilon_of_delta(mu, d) if outputs else 0.0
        return Spent(self.name, "approximate_dp", outputs, 1, eps, delta=d)

    def _table(self, data):
        from dpspec.mechanisms.release import release_table

        return release_table(self.name, data, self.data, self.data_source, self.data_name)


#: the family's runtime class (``Family.runtime``, read from this folder)
Runtime = GaussianRelease
