"""Robustness sweep of the private-selection accountants (``dpspec.accounting.selection``): extreme but
valid run curves (σ from 0.3 to 1e3, rates from 1e-6 to 1, up to 1e5 steps) and run-count distributions
(means from 1.01 to 1e4) give no NaN, no ε below one run's, monotone growth in the mean number of runs,
and a ``ValueError`` naming the problem outside the domain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpspec import accounting as acc

COVERED_SELECTION = {"RunCount", "SelectionResult", "calibrate_selection", "candidate_envelope", "selection_dp"}
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ORDERS = [1.5, 2.0, 3.0, 8.0, 32.0, 256.0]


def _log_uniform(lo: float, hi: float):
    inner = st.floats(math.log(lo), math.log(hi)).map(math.exp).map(lambda x: min(max(x, lo), hi))
    return st.one_of(st.sampled_from([lo, hi]), inner)


def _curve(sigma: float, rate: float, steps: int):
    return acc.dpsgd_rdp_curve(sigma, rate, steps, alphas=ORDERS)


def _runs(kind: str, mean: float):
    if kind == "poisson":
        return acc.RunCount.poisson(mean)
    if kind == "geometric":
        return acc.RunCount.tnb(1.0, 1.0 / mean)
    return acc.RunCount.fixed(max(1, round(mean)))


@FAST
@given(sigma=_log_uniform(0.3, 1e3), rate=st.one_of(st.just(1.0), _log_uniform(1e-6, 1.0)),
       steps=st.integers(1, 10 ** 5), mean=_log_uniform(1.01, 1e4),
       kind=st.sampled_from(["poisson", "geometric", "fixed"]), delta=_log_uniform(1e-12, 0.1))
def test_selection_is_finite_and_never_below_one_run(sigma, rate, steps, mean, kind, delta):
    curve = _curve(sigma, rate, steps)
    res = acc.selection_dp(curve, _runs(kind, mean), delta)
    one = acc.rdp_to_dp(curve.alphas, curve.rdp, delta)[0]
    assert not math.isnan(res.epsilon) and res.epsilon >= 0
    assert res.epsilon >= one * (1 - 1e-9) or kind == "poisson"  # Poisson K may be 0 (nothing released)
    assert res.delta == delta and res.bounds and res.theorem


@FAST
@given(sigma=_log_uniform(0.5, 100.0), rate=_log_uniform(1e-4, 1.0), mean=_log_uniform(1.5, 1e3),
       kind=st.sampled_from(["poisson", "geometric"]))
def test_more_expected_runs_never_cost_less(sigma, rate, mean, kind):
    curve = _curve(sigma, rate, 100)
    a = acc.selection_dp(curve, _runs(kind, mean), 1e-6).epsilon
    b = acc.selection_dp(curve, _runs(kind, 2 * mean), 1e-6).epsilon
    assert b >= a * (1 - 1e-9)


def test_envelope_is_the_per_order_maximum_and_refuses_mixed_grids():
    lo, hi = _curve(4.0, 0.01, 100), _curve(1.0, 0.01, 100)
    env = acc.candidate_envelope([lo, hi])
    assert np.array_equal(env.rdp, np.maximum(lo.rdp, hi.rdp))
    with pytest.raises(ValueError, match="same alphas"):
        acc.candidate_envelope([lo, acc.dpsgd_rdp_curve(1.0, 0.01, 100, alphas=[2.0, 3.0])])
    with pytest.raises(ValueError, match="at least one"):
        acc.candidate_envelope([])


@pytest.mark.parametrize("make,word", [
    (lambda: acc.RunCount.poisson(0.0), "mu"),
    (lambda: acc.RunCount.poisson(math.nan), "mu"),
    (lambda: acc.RunCount.tnb(-1.0, 0.5), "eta"),
    (lambda: acc.RunCount.tnb(1.0, 1.0), "gamma"),
    (lambda: acc.RunCount.fixed(0), "count"),
    (lambda: acc.selection_dp(_curve(1.0, 0.1, 10), acc.RunCount.fixed(2), 1.0), "delta"),
    (lambda: acc.selection_dp(None, acc.RunCount.poisson(3.0), 1e-6), "no valid selection bound"),
])
def test_value_error_outside_domain(make, word):
    with pytest.raises(ValueError, match=word):
        make()


def test_calibration_meets_its_target_and_says_when_it_cannot():
    runs = acc.RunCount.poisson(10.0)
    z, res = acc.calibrate_selection(lambda s: _curve(s, 0.01, 1000), runs, 4.0, 1e-6)
    assert res.epsilon <= 4.0 and acc.selection_dp(_curve(z, 0.01, 1000), runs, 1e-6).epsilon <= 4.0
    assert isinstance(res, acc.SelectionResult)
    with pytest.raises(ValueError, match="no noise multiplier"):
        acc.calibrate_selection(lambda s: _curve(s, 1.0, 10 ** 5), runs, 1e-3, 1e-12, hi=2.0)
