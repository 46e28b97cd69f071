"""The accountants' one log-sum-exp and log-binomial kernel (dpspec.accounting._logmath), against mpmath
and scipy, and the errstate-free form against the guarded one bit for bit."""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from dpspec.accounting._logmath import log_binom_pmf, logsumexp_rows, logsumexp_rows_bare

_entries = st.one_of(st.floats(-700, 700), st.just(-np.inf))


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(float, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=_entries), st.data())
def test_logsumexp_rows_against_mpmath(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    got = np.asarray(logsumexp_rows(x, axis))
    with np.errstate(under="ignore", divide="ignore"):
        assert np.asarray(logsumexp_rows_bare(x, axis)).tobytes() == got.tobytes()
    moved = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    mp.mp.dps = 40
    for row, value in zip(moved, got.reshape(-1)):
        if np.all(np.isneginf(row)):
            assert value == -np.inf  # an empty sum stays -inf, never NaN
            continue
        exact = mp.log(mp.fsum(mp.exp(mp.mpf(v)) for v in row if np.isfinite(v)))
        assert value == pytest.approx(float(exact), rel=1e-14, abs=1e-13)


def test_a_plus_infinity_gives_plus_infinity():
    assert logsumexp_rows(np.array([[0.0, np.inf, -np.inf]]), -1)[0] == np.inf


@pytest.mark.parametrize("n", [0, 1, 7, 60, 1000])
@pytest.mark.parametrize("p", [1e-12, 1e-3, 0.3, 0.5, 0.999])
def test_log_binom_pmf_against_scipy(n, p):
    k = np.arange(n + 1, dtype=float)
    got = log_binom_pmf(k, n, math.log(p), math.log1p(-p))
    ref = stats.binom.logpmf(k, n, p)
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-9, atol=1e-9)
    assert float(np.exp(logsumexp_rows(got, -1))) == pytest.approx(1.0, abs=1e-12)
