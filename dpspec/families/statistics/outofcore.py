"""Out of core: the certified query evaluated partition by partition — the partitions of a Dask DataFrame
(in parallel, on Dask's scheduler) or the batches of a polars LazyFrame's streaming engine
(``collect_batches``) — equal to the in-memory path.

Each partition (a pandas or polars DataFrame) is read with the in-memory path's own functions (``as_table``, then
``StatisticPlan._mask``, ``_groups`` and ``values``: the same filter, declared-key selection, clamping,
rounding and missing-value rule), and reduced to aggregates that combine *exactly* across partitions:

* counts per group (integers), clamped and missing counts (integers);
* sums per group as exact rationals: every float x = m·2^e (m a 53-bit integer, ``numpy.frexp``), summed
  per exponent in int64 halves (exact below 2^36 rows per partition) and combined as Python integers; the
  total is rounded once (``float(Fraction)``, correctly rounded), which is what ``math.fsum`` returns for
  the in-memory sum (a correctly rounded sum);
* a quantile's utility: #{x < c_j} per candidate (integers) and the number of kept rows.

Only these aggregates leave the workers; the noise is added by the caller from the certificate, as on the
in-memory path.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpspec.mechanisms.ledger import DataMismatchError

_HALF = 26  # int64 halves of a 53-bit mantissa: sums of |hi| < 2^27 and lo < 2^26 are exact below 2^36 rows


def is_dask(data) -> bool:
    return type(data).__module__.split(".")[0] == "dask" and hasattr(data, "to_delayed") and hasattr(data, "columns")


def exact_sum(values: np.ndarray) -> Fraction:
    """The exact sum of finite float64 values, as a rational."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return Fraction(0)
    f, e = np.frexp(v)
    m = np.ldexp(f, 53).astype(np.int64)  # exact: f has at most 53 significant bits
    e = e.astype(np.int64) - 53
    total = Fraction(0)
    for u in np.unique(e).tolist():
        mm = m[e == u]
        s = (int((mm >> _HALF).sum()) << _HALF) + int((mm & ((1 << _HALF) - 1)).sum())
        total += Fraction(s << u) if u >= 0 else Fraction(s, 1 << -u)
    return total


def _partition(plan, pdf, name: str):
    """Aggregates of one partition (module doc)."""
    from dpspec.data.bind import DataBindingError, as_table

    try:
        table = as_table(pdf, name)
    except DataBindingError as e:
        raise DataMismatchError(f"`{name}`: {e} [DPS148]") from None
    plan.check(table, name)
    mask = plan._mask(table)
    if plan.function == "quantile":
        v, clamped, missing = plan.values(table, mask)
        x = np.sort(v[mask])
        cand = np.linspace(plan.bounds[0], plan.bounds[1], plan.grid)
        below = np.searchsorted(x, cand, side="left").astype(np.int64)
        return len(table), {"below": below, "n": len(x)}, clamped, missing
    if plan.by:
        g, keys = plan._groups(table, mask)
    else:
        g, keys = np.where(mask, 0, -1), (None,)
    kept = g >= 0
    counts = np.bincount(g[kept], minlength=len(keys))
    out = {k: [int(counts[j]), Fraction(0)] for j, k in enumerate(keys) if counts[j] or plan.keys is not None}
    if plan.function == "count":
        return len(table), out, 0, 0
    v, clamped, missing = plan.values(table, kept)
    for j, k in enumerate(keys):
        if k in out:
            out[k][1] = exact_sum(v[kept & (g == j)])
    return len(table), out, clamped, missing


def evaluate(plan, ddf, name: str):
    """(rows, aggregates) of the query on a Dask DataFrame: the aggregates as ``StatisticPlan.evaluate``
    returns them (sums, counts, keys, clamped, missing, arrays = []), or, for a quantile, (candidates,
    utility, clamped, missing)."""
    import dask

    for c in plan.columns_read():
        if c not in ddf.columns:
            raise DataMismatchError(f"`{name}` reads column `{c}`, which the data does not have [DPS148]")
    cols = list(plan.columns_read()) or list(ddf.columns[:1])  # a plain count reads the rows only
    parts = dask.compute(*[dask.delayed(_partition)(plan, p, name) for p in ddf[cols].to_delayed()])
    return combine(plan, parts)


def evaluate_batches(plan, lf, name: str, chunk_size: int = 1 << 20):
    """(rows, aggregates) of the query on a polars LazyFrame, streamed in batches of ``chunk_size`` rows
    (polars' ``collect_batches``; only the columns the query reads), as :func:`evaluate`."""
    schema = lf.collect_schema()
    for c in plan.columns_read():
        if c not in schema:
            raise DataMismatchError(f"`{name}` reads column `{c}`, which the data does not have [DPS148]")
    cols = list(plan.columns_read())
    src = lf.select(cols) if cols else lf.with_row_index("_row").select("_row")  # a plain count: the rows only
    parts = [_partition(plan, b, name) for b in src.collect_batches(chunk_size=chunk_size)]
    return combine(plan, parts)


def combine(plan, parts):
    """The partitions' aggregates combined exactly (module doc)."""
    rows = sum(p[0] for p in parts)
    clamped = sum(int(p[2]) for p in parts)
    missing = sum(int(p[3]) for p in parts)
    if plan.function == "quantile":
        cand = np.linspace(plan.bounds[0], plan.bounds[1], plan.grid)
        below = sum((p[1]["below"] for p in parts), np.zeros(plan.grid, dtype=np.int64))
        n = sum(p[1]["n"] for p in parts)
        return rows, (cand, -np.abs(below.astype(float) - plan.q * n), clamped, missing)
    merged: dict = {}
    for p in parts:
        for k, (c, s) in p[1].items():
            acc = merged.setdefault(k, [0, Fraction(0)])
            acc[0] += c
            acc[1] += s
    if not plan.by:
        keys = None
        order: tuple = (None,)
    else:
        keys = plan.keys if plan.keys is not None else tuple(sorted(merged))
        order = keys
    counts = np.array([float(merged.get(k, (0, 0))[0]) for k in order])
    if plan.function == "count":
        return rows, (counts, None, keys, 0, 0, [])
    sums = np.array([float(merged.get(k, (0, Fraction(0)))[1]) for k in order])
    return rows, (sums, counts, keys, clamped, missing, [])
