"""The statistics release: evaluate a count, sum, mean or quantile on the data, add the certified noise, once.

Built from its certificate (:meth:`StatisticRelease.from_certificate`): the noise, its scale, Δ, the
column, its clamping bounds, the filter, the group column and its declared keys, the quantile grid and
the partition-selection threshold all come from the certificate's ``mechanism.parameters`` and
``query`` record, never from the data or the caller.

``release(data)`` reads the data (a dpspec ``Table``, a dict of columns, a pandas or polars DataFrame, a
polars LazyFrame — aggregated out of core where that is exact, see ``_evaluate_lazy`` —, a Dask DataFrame —
aggregated out of core partition by partition, exactly, see ``outofcore`` — or nothing for the
data bound at compile time), keeps the rows the filter keeps, clamps every value of the column
to [lo, hi] (a missing value becomes the bound nearest 0; discrete noise: rounded to an integer inside
the bounds), evaluates the query per declared key (rows of other groups are dropped: a record then
moves one group's answer only), adds the noise and returns ``Released(value, report)``: ``value`` is a
number, or a dict key → number for a grouped query; the report carries the noise distribution and its
95 % error bound (OpenDP's ``summarize(alpha = 0.05)``) beside the private run counts.

Samplers: ``laplace`` and ``gaussian`` use numpy's PCG64 generator (``Generator.laplace`` /
``Generator.normal``): exact real-valued sampling is an assumption the certificate states (Mironov
2012). ``discrete_laplace`` and ``discrete_gaussian`` are exact: Canonne, Kamath & Steinke 2020
Algs. 1–3 in rational arithmetic with ``secrets`` randomness (no seeded ``rng``). The quantile's
exponential mechanism samples argmax(ε u / 2 + Gumbel) with numpy (the Gumbel-max identity; floating
point is again an assumption).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from dpspec.mechanisms.ledger import CertificateGuardError, DataMismatchError, PrivacyLedger, Spent

_OPS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


@dataclass(frozen=True)
class StatisticReport:
    """What one release read and how accurate it is. ``noise``/``scale``: the noise distribution;
    ``error_95``: |noise| ≤ this with probability ≥ 95 % per coordinate (public: it depends on the
    certificate only); ``rows``, ``clamped``, ``missing`` and ``data_fingerprint`` are private (keep
    them with the data)."""

    target: str
    query: str
    noise: str
    scale: float
    error_95: float
    expected_abs_error: float
    rows: int
    clamped: int
    missing: int
    data_fingerprint: str
    data_source: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Released(NamedTuple):
    value: Any
    report: StatisticReport


# --- exact discrete samplers (CKS20) ----------------------------------------------------------------


def discrete_laplace_exact(scale: Fraction, randbelow=None) -> int:
    """P(x) ∝ exp(−|x|/scale) on ℤ for a rational scale = t/s > 0 (CKS20 Alg. 2, exact)."""
    from dpspec.mechanisms.secure_noise import _rb, bernoulli_exp

    scale = Fraction(scale)
    t, s = scale.numerator, scale.denominator
    rb = _rb(randbelow)
    while True:
        u = rb(t)
        if not bernoulli_exp(Fraction(u, t), rb):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rb):
            v += 1
        y = (u + t * v) // s
        negative = rb(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian_exact(sigma: float, randbelow=None) -> int:
    """N_ℤ(0, σ²) with σ² the exact square of the float σ (CKS20 Alg. 3)."""
    from dpspec.mechanisms.secure_noise import discrete_gaussian

    return discrete_gaussian(Fraction(sigma) ** 2, randbelow)


def draw(noise: str, scale: float, size: int, rng=None) -> np.ndarray:
    """``size`` independent noise values of the certified kind and scale."""
    if noise in ("laplace", "gaussian"):
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        return rng.laplace(0.0, scale, size) if noise == "laplace" else rng.normal(0.0, scale, size)
    if rng is not None:
        raise ValueError(
            "discrete noise draws its randomness from the operating system (secrets); a seeded rng "
            "would make it predictable"
        )
    if noise == "discrete_laplace":
        return np.array([discrete_laplace_exact(Fraction(scale)) for _ in range(size)], dtype=float)
    if noise == "discrete_gaussian":
        return np.array([discrete_gaussian_exact(scale) for _ in range(size)], dtype=float)
    raise ValueError(f"unknown noise {noise!r}")


# --- the query ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatisticPlan:
    """The query as the certificate states it."""

    function: str  # count | sum | mean | quantile
    column: str | None
    bounds: tuple[float, float] | None
    by: str | None = None
    keys: tuple[str, ...] | None = None  # None with ``by``: partition selection
    where: tuple[str, str, Any] | None = None
    integer: bool = False  # discrete noise: values rounded to integers inside the bounds
    dataset_size: int | None = None  # a mean divides by it (else: noisy denominator)
    q: float | None = None
    grid: int = 0  # quantile: number of candidates, evenly spaced over the bounds

    @property
    def column_bounds(self) -> tuple[float, float]:
        """[lo, hi] of the column a sum, mean or quantile reads: each states its bounds (DPS155)."""
        assert self.bounds is not None
        return self.bounds

    @property
    def level(self) -> float:
        """The q of a quantile: a quantile states 0 < q < 1 (DPS155)."""
        assert self.q is not None
        return self.q

    def text(self) -> str:
        args = [self.column] if self.column else []
        if self.q is not None:
            args.append(f"q = {self.q:g}")
        if self.bounds:
            args.append(f"bounds = [{self.bounds[0]:g}, {self.bounds[1]:g}]")
        if self.by:
            args.append(f"by = {self.by}")
        if self.keys is not None:
            args.append("keys = [" + ", ".join(json.dumps(k) for k in self.keys) + "]")
        if self.where:
            c, op, v = self.where
            args.append(f"where = {c} {op} {json.dumps(v) if isinstance(v, str) else format(v, 'g')}")
        return f"{self.function}({', '.join(args)})"

    def evaluate_lazy(self, lf, target: str):
        """Out of core on a polars LazyFrame: ``_evaluate_lazy``."""
        return _evaluate_lazy(self, lf, target)

    def columns_read(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for c in (self.column, self.by, self.where and self.where[0]) if c))

    def check(self, table, target: str) -> None:
        """Refuse data the certificate does not describe, before any value is read (DPS148)."""
        for c in self.columns_read():
            if c not in table.columns:
                raise DataMismatchError(f"`{target}` reads column `{c}`, which the data does not have [DPS148]")
        if self.column and not table.is_numeric(self.column):
            raise DataMismatchError(
                f"`{target}` reads column `{self.column}` as numbers, but it is categorical in the data [DPS148]"
            )
        if self.where and not isinstance(self.where[2], str) and not table.is_numeric(self.where[0]):
            raise DataMismatchError(
                f"`{target}` compares column `{self.where[0]}` with a number, but it is "
                "categorical in the data [DPS148]"
            )

    def _mask(self, table) -> np.ndarray:
        n = len(table)
        if not self.where:
            return np.ones(n, dtype=bool)
        c, op, v = self.where
        col = table.column(c)
        if table.is_numeric(c):
            x = np.asarray(col, dtype=float)
            ok = ~np.isnan(x)
            target = float(v) if not isinstance(v, str) else _as_number(v)
            if target is None:  # a category compared with a numeric column: no row equals it
                return np.full(n, op == "!=") & ok
            return ok & _OPS[op](np.where(ok, x, 0.0), target)
        vals = np.array([None if x is None else str(x) for x in col.tolist()], dtype=object)
        ok = np.array([x is not None for x in vals.tolist()], dtype=bool)
        eq = np.array([x == str(v) for x in vals.tolist()], dtype=bool)
        return ok & (eq if op == "==" else ~eq)

    def _groups(self, table, mask) -> tuple[np.ndarray, tuple[str, ...]]:
        """Group index per row (−1: outside the declared keys or the filter) and the group keys."""
        col = table.column(self.by)
        if table.is_numeric(self.by):
            vals = [None if (x is None or math.isnan(x)) else _number_key(float(x)) for x in col.tolist()]
        else:
            vals = [None if x is None else str(x) for x in col.tolist()]
        keys = (
            self.keys
            if self.keys is not None
            else tuple(sorted({v for v, m in zip(vals, mask) if m and v is not None}))
        )
        index: dict[str | None, int]
        if self.keys is not None and table.is_numeric(self.by):
            index = {_number_key(float(k)) if _as_number(k) is not None else k: i for i, k in enumerate(keys)}
        else:
            index = {k: i for i, k in enumerate(keys)}
        g = np.array([index.get(v, -1) if m else -1 for v, m in zip(vals, mask)], dtype=np.int64)
        return g, keys

    def values(self, table, mask) -> tuple[np.ndarray, int, int]:
        """The clamped values of the column (all rows), clamped count and missing count over kept rows."""
        lo, hi = self.column_bounds
        v = np.asarray(table.column(self.column), dtype=float)
        nan = np.isnan(v)
        v = np.where(nan, min(max(0.0, lo), hi), v)
        out = (v < lo) | (v > hi)
        v = np.clip(v, lo, hi)
        if self.integer:
            v = np.clip(np.round(v), math.ceil(lo), math.floor(hi))
        return v, int((out & mask).sum()), int((nan & mask).sum())

    def quantile_utility(self, table) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(candidates, utility per candidate, clamped, missing) of a quantile: the ``grid`` candidates c_j
        evenly spaced in [lo, hi] (public) and u(c) = −|#{x < c} − q n| over the kept rows' clamped values
        (n of them); inserting or removing one row moves every u(c) by at most max(q, 1 − q) ≤ 1."""
        mask = self._mask(table)
        v, clamped, missing = self.values(table, mask)
        x = np.sort(v[mask])
        lo, hi = self.column_bounds
        cand = np.linspace(lo, hi, self.grid)
        below = np.searchsorted(x, cand, side="left").astype(float)
        return cand, -np.abs(below - self.level * len(x)), clamped, missing

    def evaluate(self, table):
        """(sums per group, counts per group or None, keys or None, clamped, missing, arrays read)."""
        mask = self._mask(table)
        arrays = [np.asarray(table.column(c)) for c in self.columns_read()] or [np.arange(len(table))]
        if self.by:
            g, keys = self._groups(table, mask)
        else:
            g, keys = np.where(mask, 0, -1), None
        k = len(keys) if keys is not None else 1
        kept = g >= 0
        counts = np.bincount(g[kept], minlength=k).astype(float)
        if self.function == "count":
            return counts, None, keys, 0, 0, arrays
        v, clamped, missing = self.values(table, kept)  # counted over the rows the query reads
        sums = np.array([math.fsum(v[kept & (g == j)].tolist()) for j in range(k)])
        return sums, counts, keys, clamped, missing, arrays


def _is_lazy(data) -> bool:
    return (
        type(data).__module__.split(".")[0] == "polars" and hasattr(data, "collect") and not hasattr(data, "get_column")
    )


@dataclass(frozen=True)
class _Aggregated:
    """The aggregates of a query evaluated out of core: ``result`` as ``StatisticPlan.evaluate`` returns it."""

    rows: int
    result: tuple

    def __len__(self) -> int:
        return self.rows


def _evaluate_lazy(plan: StatisticPlan, lf, target: str):
    """The query's aggregates computed by polars' streaming engine on a LazyFrame (data larger than memory):
    filter, group, clamp, count and sum in the engine, only the per-group aggregates in memory. Exactly the
    in-memory path's numbers: counts are integers, and a sum is taken here only when every clamped value is
    an integer (then an Int64 sum is exact, as ``math.fsum`` is); otherwise None (the caller collects the
    frame and evaluates it in memory). Quantiles, non-string group columns and a category compared with a
    numeric column also return None."""
    import polars as pl

    schema = lf.collect_schema()
    for c in plan.columns_read():
        if c not in schema:
            raise DataMismatchError(f"`{target}` reads column `{c}`, which the data does not have [DPS148]")
    if plan.function not in ("count", "sum", "mean"):
        return None
    if plan.column and not schema[plan.column].is_numeric():
        raise DataMismatchError(
            f"`{target}` reads column `{plan.column}` as numbers, but it is categorical in the data [DPS148]"
        )
    if plan.by and schema[plan.by] != pl.String:
        return None
    keep = pl.lit(True)
    if plan.where:
        c, op, v = plan.where
        col = pl.col(c)
        if schema[c].is_numeric():
            if isinstance(v, str):
                return None
            x = col.cast(pl.Float64)
            cmp = {"==": x == v, "!=": x != v, "<": x < v, "<=": x <= v, ">": x > v, ">=": x >= v}[op]
            keep = x.is_not_null() & x.is_not_nan() & cmp
        elif schema[c] == pl.String:
            keep = col.is_not_null() & ((col == str(v)) if op == "==" else (col != str(v)))
        else:
            return None
    q = lf.filter(keep)
    if plan.by and plan.keys is not None:
        q = q.filter(pl.col(plan.by).is_in(list(plan.keys)))
    elif plan.by:
        q = q.filter(pl.col(plan.by).is_not_null())
    aggs = [pl.len().alias("n")]
    if plan.column:
        lo, hi = plan.column_bounds
        raw = pl.col(plan.column).cast(pl.Float64)
        miss = raw.is_null() | raw.is_nan()
        v = pl.when(miss).then(min(max(0.0, lo), hi)).otherwise(raw)
        out = (v < lo) | (v > hi)
        v = v.clip(lo, hi)
        if plan.integer:
            v = v.round().clip(math.ceil(lo), math.floor(hi))
        aggs += [
            miss.sum().alias("missing"),
            out.sum().alias("clamped"),
            (v != v.round()).any().alias("fractional"),
            v.round().cast(pl.Int64).sum().alias("sum"),
        ]
    if plan.by:
        agg = q.group_by(plan.by).agg(aggs).collect(engine="streaming")
        found = {r[plan.by]: r for r in agg.iter_rows(named=True)}
        keys = plan.keys if plan.keys is not None else tuple(sorted(found))
    else:
        agg = q.select(aggs).collect(engine="streaming")
        found, keys = {None: agg.row(0, named=True)}, None
    rows_ = [found.get(k) for k in (keys if keys is not None else (None,))]
    if plan.column and any(r is not None and r["fractional"] for r in rows_):
        return None  # a non-integer value: exact sums need the in-memory path
    counts = np.array([float(r["n"]) if r else 0.0 for r in rows_])
    n_rows = int(lf.select(pl.len()).collect(engine="streaming").item())
    if plan.function == "count":
        return _Aggregated(n_rows, (counts, None, keys, 0, 0, []))
    sums = np.array([float(r["sum"] or 0) if r else 0.0 for r in rows_])
    clamped = int(sum(int(r["clamped"] or 0) for r in rows_ if r))
    missing = int(sum(int(r["missing"] or 0) for r in rows_ if r))
    return _Aggregated(n_rows, (sums, counts, keys, clamped, missing, []))


def _number_key(x: float) -> str:
    """The group key of a numeric value: its short form ("30", "1e+06") when that reads back as the same
    float, else the shortest exact one ("1000001.0", "0.1000001"): distinct values never share a group."""
    short = format(x, "g")
    return short if float(short) == x else repr(x)


def _as_number(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


# --- the release ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatisticRelease:
    """A count, sum, mean or quantile of the data with certified noise, released once.

    Build it with :meth:`from_certificate` (the compiler does)."""

    name: str
    plan: StatisticPlan
    noise: str  # laplace | discrete_laplace | gaussian | discrete_gaussian | exponential
    scale: float  # of the answer's noise (the sum's for a mean with a noisy denominator)
    count_scale: float | None = None  # a mean's noisy denominator
    threshold: float | None = None  # partition selection: keys with a noisy count below it are dropped
    epsilon: float = 0.0
    delta: float | None = None
    error_95: float = 0.0
    expected_abs_error: float = 0.0
    data: Any = field(default=None, repr=False, compare=False)
    data_name: str | None = None
    data_source: str = ""
    _ledger: PrivacyLedger = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_ledger", PrivacyLedger(self.name, 1, self._spent, unit="output"))

    @classmethod
    def from_certificate(cls, record, *, data=None, data_name: str | None = None):
        """The runtime of a certificate's release result: every number is read from ``record``."""
        p = record.mechanism.parameters
        q = record.query
        where = None
        if p.get("where_column") is not None:
            where = (str(p["where_column"]), str(p["where_op"]), p["where_value"])
        keys = tuple(json.loads(str(p["keys"]))) if p.get("keys") is not None else None
        plan = StatisticPlan(
            function=q.function,
            column=q.columns[0] if q.columns else None,
            bounds=(float(q.bounds[0][0]), float(q.bounds[0][1])) if q.bounds else None,
            by=p.get("by"),
            keys=keys,
            where=where,
            integer=str(p["noise"]).startswith("discrete"),
            dataset_size=q.dataset_size,
            q=float(p["q"]) if p.get("q") is not None else None,
            grid=int(p.get("grid") or 0),
        )
        g = record.guarantee
        return cls(
            name=record.name,
            plan=plan,
            noise=str(p["noise"]),
            scale=float(p["scale"]),
            count_scale=float(p["count_scale"]) if p.get("count_scale") is not None else None,
            threshold=float(p["threshold"]) if p.get("threshold") is not None else None,
            epsilon=float(g.epsilon),
            delta=g.delta,
            error_95=float(p["error_95"]),
            expected_abs_error=float(p["expected_abs_error"]),
            data=data,
            data_name=data_name,
            data_source=q.data or "",
        )

    def release(self, data=None, rng: np.random.Generator | int | None = None) -> Released:
        """Evaluate the certified query on ``data`` (omitted: the data bound at compile time), add the
        certified noise; once per object. ``DataMismatchError`` (nothing charged) for data the certificate
        does not describe; ``BudgetExceededError`` on a second call."""
        from dpspec.families.statistics import outofcore

        lazy = self.plan.evaluate_lazy(data, self.name) if _is_lazy(data) else None  # out of core (polars)
        if lazy is None and _is_lazy(data) and hasattr(data, "collect_batches"):
            # the queries polars' engine cannot aggregate exactly (float sums, means, quantiles, …): its
            # streaming batches, aggregated exactly one by one
            lazy = _Aggregated(*outofcore.evaluate_batches(self.plan, data, self.data_name or self.name))
        if lazy is not None:
            table, source = lazy, "a polars LazyFrame, aggregated out of core"
        elif outofcore.is_dask(data):  # out of core (Dask), partition by partition
            lazy = _Aggregated(*outofcore.evaluate(self.plan, data, self.data_name or self.name))
            table, source = lazy, "a Dask DataFrame, aggregated out of core"
        else:
            table, source = self._table(data)
            self.plan.check(table, self.name)
        if self.noise.startswith("discrete") and rng is not None:
            raise ValueError(
                "discrete noise draws its randomness from the operating system (secrets); a seeded "
                "rng would make it predictable"
            )
        self._ledger.charge(1)
        from dpspec.data.bind import fingerprint

        err95 = self.error_95
        if self.plan.function == "quantile":
            value, clamped, missing, arrays = self._quantile(table, rng)
        else:
            value, clamped, missing, arrays, err95 = self._statistic(table, rng)
        report = StatisticReport(
            self.name,
            self.plan.text(),
            self.noise,
            self.scale,
            err95,
            self.expected_abs_error,
            int(len(table)),
            clamped,
            missing,
            fingerprint(*arrays) if lazy is None else "not computed (out of core)",
            source,
        )
        return Released(value, report)

    __call__ = release

    def _statistic(self, table, rng):
        p = self.plan
        sums, counts, keys, clamped, missing, arrays = (
            table.result if isinstance(table, _Aggregated) else p.evaluate(table)
        )
        gen = rng if (rng is None or isinstance(rng, np.random.Generator)) else np.random.default_rng(rng)
        noisy = sums + draw(self.noise, self.scale, len(sums), gen)
        err95 = self.error_95
        if p.function == "mean":
            if p.dataset_size is not None:
                noisy = noisy / float(p.dataset_size)
            else:
                den = counts + draw(self.noise, self.count_scale, len(counts), gen)
                lo, hi = p.bounds
                err95 = float(np.max(self._mean_bound(noisy, den)))
                noisy = np.clip(noisy / np.maximum(den, 1.0), lo, hi)  # post-processing
        if keys is None:
            return float(noisy[0]), clamped, missing, arrays, err95
        if self.threshold is not None:  # partition selection: only keys whose noisy count clears the threshold
            kept = {k: float(x) for k, x in zip(keys, noisy) if x >= self.threshold}
            return kept, clamped, missing, arrays, err95
        return {k: float(x) for k, x in zip(keys, noisy)}, clamped, missing, arrays, err95

    def _mean_bound(self, s_noisy: np.ndarray, c_noisy: np.ndarray) -> np.ndarray:
        """A 95 % bound on |S'/C' − S/C| from the released S', C' only (post-processing): with |Z_s| ≤ e_s and
        |Z_c| ≤ e_c, each at 97.5 % (a union bound), S'/C' − S/C = (C' Z_s − S' Z_c) / (C' (C' − Z_c)), so the
        error is at most (C' e_s + |S'| e_c) / (C' (C' − e_c)) when C' > e_c, and at most hi − lo always (the
        released mean and the true one both lie in [lo, hi])."""
        from dpspec.families.statistics.accountant import error_bound

        lo, hi = self.plan.column_bounds
        # a mean without a public n is certified with a noisy count, and its certificate records that scale
        assert self.count_scale is not None
        es = error_bound(self.noise, self.scale, 0.025)
        ec = error_bound(self.noise, self.count_scale, 0.025)
        c = np.asarray(c_noisy, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            b = (c * es + np.abs(s_noisy) * ec) / (c * (c - ec))
        return np.where(c > ec, np.minimum(b, hi - lo), hi - lo)

    def _quantile(self, table, rng):
        """Exponential mechanism (McSherry & Talwar 2007, Thm 6) over ``grid`` candidates c_j evenly spaced
        in [lo, hi]: utility u(c) = −|#{x < c} − q n|, which one record moves by at most 1, sampled with
        probability ∝ exp(ε u / 2)."""
        p = self.plan
        cand, u, clamped, missing = table.result if isinstance(table, _Aggregated) else p.quantile_utility(table)
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        j = int(np.argmax(u / self.scale + gen.gumbel(size=len(cand))))  # scale = 2/ε (the certificate's)
        arrays = [] if isinstance(table, _Aggregated) else [np.asarray(table.column(c)) for c in p.columns_read()]
        return float(cand[j]), clamped, missing, arrays

    def release_answer(self, answer, rng=None):
        """Refused: the certificate covers the query evaluated by dpspec on the data (its Δ rests on dpspec's
        own filter, grouping and clamping)."""
        raise CertificateGuardError(
            f"`{self.name}` is certified for `{self.plan.text()}` evaluated by dpspec on the data: call release(data)"
        )

    def simulate(self, answers, rng=None) -> np.ndarray:
        """Each row of ``answers`` plus independent certified noise, as separate one-shot releases would give
        it: for audits on synthetic worst-case answers only (reads no data, charges nothing)."""
        a = np.asarray(answers, dtype=float)
        return a + draw(self.noise, self.scale, a.size, rng).reshape(a.shape)

    # --- the ledger ---------------------------------------------------------------------------------

    def privacy_spent(self, delta: float | None = None) -> Spent:
        return self._ledger.privacy_spent(delta)

    @property
    def ledger(self) -> PrivacyLedger:
        return self._ledger

    def _spent(self, outputs: int, delta: float | None) -> Spent:
        return Spent(self.name, "approximate_dp", outputs, 1, self.epsilon if outputs else 0.0, delta=self.delta)

    def _table(self, data):
        from dpspec.mechanisms.release import release_table

        return release_table(self.name, data, self.data, self.data_source, self.data_name)
