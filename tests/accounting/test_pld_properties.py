"""Hypothesis properties of the PLD accountant (dpspec.accounting.pld).

The exact epsilon is non-increasing in sigma and non-decreasing in the rate, the number of
steps and the group size (the pairs are ordered by post-processing, and connect-the-dots
interpolation and composition preserve that order), and no larger than the RDP epsilon
(RDP is a relaxation of the same pairs).  The certified values must show the same, up to
their float round-ups (relative 1e-9).  Monotonicity holds on every grid, so grid 1e-3 keeps
those examples fast; the comparison with RDP uses the automatic grid (on a coarse grid the
CTD split inflates the loss variance by up to T d^2 / 4, which exceeds RDP's slack when the
per-step loss is tiny, e.g. q = 1e-4, sigma = 3, d = 1e-3: 0.0075 vs RDP 0.0055).
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpspec import accounting as acc

D = 1e-3
PROPS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])

sigmas = st.floats(0.5, 8.0)
rates = st.sampled_from([1e-4, 1e-3, 0.01, 0.05, 0.2, 0.7])
steps = st.sampled_from([1, 3, 30, 300, 3000])
deltas = st.sampled_from([1e-3, 1e-5, 1e-8, 1e-11])


def eps(sigma, q, t, delta, k=1):
    return acc.pld_dpsgd(sigma, q, t, group_size=k, discretization=D).epsilon(delta).epsilon


def ge(a, b, rel=1e-9):
    return a >= b - rel * max(abs(a), abs(b)) - 1e-12


@PROPS
@given(sigma=sigmas, q=rates, t=steps, delta=deltas)
def test_monotone_in_sigma_rate_and_steps(sigma, q, t, delta):
    e = eps(sigma, q, t, delta)
    assert math.isfinite(e) and e >= 0
    assert ge(e, eps(sigma * 1.3, q, t, delta)), "not non-increasing in sigma"
    assert ge(eps(sigma, min(1.0, 2 * q), t, delta), e), "not non-decreasing in the rate"
    assert ge(eps(sigma, q, 2 * t, delta), e), "not non-decreasing in the steps"
    assert ge(e, eps(sigma, q, t, min(0.5, 10 * delta))), "not non-increasing in delta"


@PROPS
@given(sigma=st.floats(0.7, 8.0), q=rates, t=steps, delta=deltas)
def test_not_above_rdp(sigma, q, t, delta):
    """PLD (automatic grid) <= RDP on the same pair, up to two grid steps."""
    r = acc.pld_dpsgd(sigma, q, t).epsilon(delta)
    rdp = acc.dpsgd_epsilon(sigma, q, t, delta)
    assert r.epsilon <= rdp * (1 + 1e-9) + 2 * r.discretization


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.floats(0.8, 6.0), q=st.sampled_from([1e-3, 0.01, 0.1]), t=st.sampled_from([1, 10, 100]),
       delta=st.sampled_from([1e-4, 1e-7]))
def test_group_monotone_and_not_above_group_rdp(sigma, q, t, delta):
    e1, e2, e3 = (eps(sigma, q, t, delta, k) for k in (1, 2, 3))
    assert ge(e2, e1) and ge(e3, e2), "not non-decreasing in the group size"
    r3 = acc.pld_dpsgd(sigma, q, t, group_size=3).epsilon(delta)
    rdp3 = acc.dpsgd_epsilon(sigma, q, t, delta, group_size=3)
    assert r3.epsilon <= rdp3 * (1 + 1e-9) + 2 * r3.discretization


@PROPS
@given(sigma=sigmas, q=rates, t=steps)
def test_delta_curve_is_non_increasing(sigma, q, t):
    pld = acc.pld_dpsgd(sigma, q, t, discretization=D)
    es = [0.0, 0.1, 0.5, 1.0, 3.0]
    ds = [pld.delta(e).delta for e in es]
    assert all(0.0 <= x <= 1.0 for x in ds)
    assert all(ge(a, b) for a, b in zip(ds, ds[1:]))
