"""Property-based checks (hypothesis, modest example counts)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpspec import accounting as acc

PROP = settings(max_examples=15, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

sigmas = st.floats(0.6, 20.0)
rates = st.floats(1e-4, 0.5)
steps_s = st.integers(1, 20_000)
deltas = st.sampled_from([1e-5, 1e-6, 1e-8])
ORDERS = np.array([1.1, 1.5, 2.0, 3.0, 4.5, 8.0, 16.0, 32.0, 64.0])


@PROP
@given(sigma=sigmas, rate=rates, steps=steps_s, delta=deltas)
def test_epsilon_monotone_in_steps_rate_sigma(sigma, rate, steps, delta):
    e = acc.dpsgd_epsilon(sigma, rate, steps, delta)
    assert acc.dpsgd_epsilon(sigma, rate, steps + max(1, steps // 3), delta) >= e
    assert acc.dpsgd_epsilon(sigma, min(1.0, rate * 1.5), steps, delta) >= e
    assert acc.dpsgd_epsilon(sigma * 1.3, rate, steps, delta) <= e


@PROP
@given(sigma=st.floats(0.8, 10.0), rate=st.floats(1e-3, 0.2), k=st.integers(1, 5))
def test_monotone_in_group_size(sigma, rate, k):
    small = acc.poisson_gaussian_rdp(ORDERS, sigma, rate, k)
    big = acc.poisson_gaussian_rdp(ORDERS, sigma, rate, k + 1)
    assert np.all(big >= small)


@PROP
@given(sigma=sigmas, rate=rates, k=st.integers(1, 4))
def test_rdp_nondecreasing_in_alpha(sigma, rate, k):
    grid = acc.DEFAULT_ALPHAS[acc.DEFAULT_ALPHAS <= (256 if k > 1 else 10_000)]
    rdp = acc.poisson_gaussian_rdp(grid, sigma, rate, k)
    assert np.all(np.diff(rdp) >= -1e-12 * rdp[1:])
    assert np.all(np.isfinite(rdp)) and np.all(rdp >= 0)


@PROP
@given(sigma=sigmas, rate=rates, alpha=st.floats(1.01, 40.0))
def test_group_size_one_is_single_element(sigma, rate, alpha):
    assert acc.poisson_gaussian_rdp(alpha, sigma, rate, 1) == acc.poisson_gaussian_rdp(
        alpha, sigma, rate)
    # the Thm 4.2 code path (K >= 2 machinery) restricted to K = 1 gives the same value
    from dpspec.accounting.group import group_curve
    g = group_curve(np.array([alpha]), sigma, rate, 1).rdp[0]
    assert g == pytest.approx(acc.poisson_gaussian_rdp(alpha, sigma, rate), rel=1e-10)


@PROP
@given(sigma=st.floats(0.8, 8.0), rate=st.floats(1e-3, 0.2), k=st.integers(2, 8),
       alpha=st.sampled_from([1.5, 2.0, 3.0, 4.0, 6.5, 8.0, 16.0]))
def test_tight_not_above_baseline(sigma, rate, k, alpha):
    tight = acc.poisson_gaussian_rdp(alpha, sigma, rate, k)
    base = acc.poisson_gaussian_rdp_baseline(alpha, sigma, rate, k)
    assert tight <= base * (1 + 1e-10)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.floats(0.3, 12.0), rate=st.floats(1e-3, 0.1),
       steps=st.integers(10, 20_000), delta=deltas)
def test_calibration_round_trip(target, rate, steps, delta):
    try:
        sigma = acc.calibrate_dpsgd_sigma(target, delta, rate, steps)
    except ValueError:
        return  # target unreachable or trivial for this draw: covered elsewhere
    assert acc.dpsgd_epsilon(sigma, rate, steps, delta) <= target
    # minimal within the stated tolerance: the bracket's lower end (>= sigma/(1+1e-4))
    # misses the target, hence so does anything below it
    assert acc.dpsgd_epsilon(sigma / (1 + 1.01e-4), rate, steps, delta) > target


@PROP
@given(bad=st.one_of(st.floats(-5, 1.0), st.just(float("nan")), st.just(float("inf"))))
def test_invalid_alpha_raises(bad):
    with pytest.raises(ValueError, match="alpha"):
        acc.poisson_gaussian_rdp(bad, 1.0, 0.01)
    with pytest.raises(ValueError, match="alpha"):
        acc.gaussian_rdp(bad, 1.0)


@PROP
@given(bad=st.one_of(st.floats(-5, 0.0), st.just(float("nan")), st.just(float("inf"))))
def test_invalid_sigma_raises(bad):
    with pytest.raises(ValueError, match="sigma"):
        acc.poisson_gaussian_rdp(2.0, bad, 0.01)
    with pytest.raises(ValueError, match="sigma"):
        acc.dpsgd_epsilon(bad, 0.01, 10, 1e-5)


@PROP
@given(bad=st.one_of(st.floats(-1, -1e-9), st.floats(1.0000001, 5), st.just(float("nan"))))
def test_invalid_rate_raises(bad):
    with pytest.raises(ValueError, match="rate"):
        acc.poisson_gaussian_rdp(2.0, 1.0, bad)
    with pytest.raises(ValueError, match="rate"):
        acc.poisson_rr_rdp(2.0, 0.75, bad)
