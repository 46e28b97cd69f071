"""dpspec.accounting.concentration: the DKW–Massart radius, against mpmath and against the
inequality it stands for (the empirical CDF of uniform draws, simulated)."""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpspec.accounting import swm
from dpspec.accounting.concentration import dkw_radius


@given(st.integers(1, 10**9), st.floats(1e-300, 1 - 1e-12))
def test_dkw_radius_is_the_closed_form(n, rho):
    mp.mp.dps = 50
    exact = mp.sqrt(mp.log(2 / mp.mpf(rho)) / (2 * n))
    assert dkw_radius(n, rho) == pytest.approx(float(exact), rel=1e-14)


def test_the_swm_accountant_re_exports_the_same_function():
    assert swm.dkw_radius is dkw_radius


@pytest.mark.parametrize("n, rho", [(0, 0.05), (10, 0.0), (10, 1.0), (10, -0.1)])
def test_dkw_radius_refuses_meaningless_inputs(n, rho):
    with pytest.raises(ValueError):
        dkw_radius(n, rho)


def test_the_band_holds_at_least_as_often_as_it_promises():
    """sup_x |F̂_n(x) − x| over n uniform draws exceeds e_n(ρ) with frequency ≤ ρ (Massart 1990)."""
    rng = np.random.default_rng(7)
    n, rho, trials = 200, 0.2, 4000
    e = dkw_radius(n, rho)
    u = np.sort(rng.random((trials, n)), axis=1)
    i = np.arange(1, n + 1)
    sup = np.maximum(i / n - u, u - (i - 1) / n).max(axis=1)  # Kolmogorov–Smirnov statistic
    freq = float(np.mean(sup > e))
    # a binomial 3σ margin above ρ; DKW–Massart is conservative, so the frequency is well below ρ
    assert freq <= rho + 3 * math.sqrt(rho * (1 - rho) / trials)
    assert freq > 0  # the band is not vacuous at this n
