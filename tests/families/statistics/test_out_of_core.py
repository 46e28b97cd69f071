"""Statistics releases out of core (issue 25: on an existing engine): a Dask DataFrame partition by partition
and a polars LazyFrame batch by batch; the aggregates equal the in-memory path's exactly."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.data.bind import as_table
from dpspec.families.statistics import outofcore
from dpspec.mechanisms.ledger import DataMismatchError

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")

UNIT = "privacy people { unit record  data dataset(t) }\n"


def frame(n=3000, seed=3):
    g = np.random.default_rng(seed)
    hours = g.normal(40, 25, n)  # floats, some outside the bounds, some missing
    hours[g.random(n) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "age": g.integers(10, 95, n).astype(float),
            "hours": hours,
            "sex": g.choice(["Male", "Female", "Other"], n),
            "race": g.choice(["A", "B", "C", "D"], n, p=[0.6, 0.25, 0.149, 0.001]),
        }
    )


QUERIES = [
    ("laplace", "count()"),
    ("laplace", 'count(where = sex == "Female")'),
    ("laplace", "sum(hours, bounds = [0.5, 99.25])"),
    ("laplace", 'sum(hours, bounds = [-3.3, 70.1], by = sex, keys = ["Male", "Female", "Nobody"])'),
    ("laplace", "mean(hours, bounds = [0, 99.9], where = age >= 30)"),
    ("laplace", 'mean(hours, bounds = [0, 99], where = sex != "Male")'),
    ("discrete_laplace", "count(by = race)"),  # partition selection: the keys come from the data
    ("discrete_laplace", "sum(age, bounds = [17, 90])"),
    ("laplace", "quantile(age, q = 0.3, bounds = [17, 90])"),
]


def _release(mech, query):
    text = UNIT + f"release a {{ mechanism {mech}  query {query}  guarantee dp(epsilon = 1, delta = 1e-6) }}"
    return dpspec.compile(dpspec.loads(text)).mechanism


@pytest.mark.parametrize("engine", ["dask", "polars"])
@pytest.mark.parametrize("mech,query", QUERIES)
def test_out_of_core_aggregates_equal_the_in_memory_path(mech, query, engine):
    r = _release(mech, query)
    pdf = frame()
    if engine == "dask":
        rows, got = outofcore.evaluate(r.plan, dd.from_pandas(pdf, npartitions=7), "t")
    else:
        pl = pytest.importorskip("polars")
        rows, got = outofcore.evaluate_batches(r.plan, pl.from_pandas(pdf).lazy(), "t", chunk_size=450)
    table = as_table(pdf, "t")
    assert rows == len(pdf)
    if r.plan.function == "quantile":
        ref = r.plan.quantile_utility(table)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]) and got[2:] == ref[2:]
        return
    ref = r.plan.evaluate(table)
    assert np.array_equal(got[0], ref[0])  # sums (or counts): bit for bit
    assert (got[1] is None) == (ref[1] is None) and (got[1] is None or np.array_equal(got[1], ref[1]))
    assert got[2] == ref[2] and got[3:5] == ref[3:5]


def test_a_dask_release_equals_the_in_memory_release():
    q = 'mean(hours, bounds = [0, 99.9], by = sex, keys = ["Male", "Female"])'
    pdf = frame()
    v_mem, rep_mem = _release("laplace", q).release(pdf, rng=5)
    v_dask, rep_dask = _release("laplace", q).release(dd.from_pandas(pdf, npartitions=4), rng=5)
    assert v_mem == v_dask
    assert (rep_dask.rows, rep_dask.clamped, rep_dask.missing) == (rep_mem.rows, rep_mem.clamped, rep_mem.missing)
    assert "Dask" in rep_dask.data_source


def test_a_polars_lazyframe_mean_of_floats_is_streamed_and_equals_the_in_memory_release():
    pl = pytest.importorskip("polars")
    q = 'mean(hours, bounds = [0, 99.9], by = sex, keys = ["Male", "Female"])'
    pdf = frame()
    v_mem, rep_mem = _release("laplace", q).release(pdf, rng=5)
    v_lazy, rep_lazy = _release("laplace", q).release(pl.from_pandas(pdf).lazy(), rng=5)
    assert v_mem == v_lazy and "LazyFrame" in rep_lazy.data_source
    assert (rep_lazy.rows, rep_lazy.clamped, rep_lazy.missing) == (rep_mem.rows, rep_mem.clamped, rep_mem.missing)


def test_a_missing_column_in_a_dask_frame_is_refused_before_any_charge():
    r = _release("laplace", "sum(wage, bounds = [0, 10])")
    with pytest.raises(DataMismatchError):
        r.release(dd.from_pandas(frame(100), npartitions=2))
    r.release(frame(100).assign(wage=1.0))  # nothing was charged: the one release is still there


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e300, 1e300, allow_nan=False) | st.floats(-1, 1), max_size=40))
def test_exact_sum_is_exact_and_rounds_like_fsum(xs):
    s = outofcore.exact_sum(np.array(xs, dtype=float))
    assert s == sum((Fraction(x) for x in xs), Fraction(0))
    assert float(s) == math.fsum(xs)
