"""Adversarial checks of the privacy-profile bound for best-of-K (dpspec.accounting.selection_profile).

Run-count distributions at the edge of what a double holds: the bound must stay an upper bound (or fail closed at
δ = 1), never turn into a NaN that every comparison with a target δ silently accepts."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpspec.accounting.selection import RunCount
from dpspec.accounting.selection_profile import profile_from_dp, profile_selection_delta, profile_selection_epsilon

mp.mp.dps = 50


def _mp_pgf_tail(runs: RunCount, u):
    """φ(1 - u) = E[(1 - u)^K] at 50 digits (closed forms: Papernot & Steinke 2022 §2), written in u so that
    1 - (1-γ)(1-u) = γ + (1-γ)u keeps its digits for tiny γ."""
    u = mp.mpf(u)
    if runs.kind == "poisson":
        return mp.e ** (-mp.mpf(runs.mu) * u)
    eta, gamma = mp.mpf(runs.eta), mp.mpf(runs.gamma)
    b = gamma + (1 - gamma) * u
    if eta == 0:
        return mp.log(b) / mp.log(gamma)
    return (b ** (-eta) - 1) / (gamma ** (-eta) - 1)


def _atom_on_top(runs: RunCount, delta0: float) -> float:
    """A lower bound on δ(ε), every ε, of best-of-K over (ε₀, δ₀)-DP runs: the (ε₀, δ₀) randomized-response pair's
    atom of mass δ₀ that only X can output, ranked first: the best run is that atom with probability
    φ(1) - φ(1 - δ₀) under X and never under X'."""
    return float(1 - _mp_pgf_tail(runs, delta0))


EXTREME_RUNS = [
    RunCount.tnb(300.0, 0.094),  # E[K] ≈ 2891: γ^{-(η+1)} overflows a double, the normaliser does not
    RunCount.tnb(100.0, 8.5e-4),
    RunCount.tnb(1.0, 1e-160),  # geometric with mean 1e160
    RunCount.tnb(30.0, 1e-10),
]


@pytest.mark.parametrize("runs", EXTREME_RUNS, ids=lambda r: r.describe())
def test_a_non_finite_bound_fails_closed(runs):
    prof = profile_from_dp([(1.0, 1e-6)])
    floor = _atom_on_top(runs, 1e-6)
    assert floor > 1e-3
    for eps in (0.0, 1.0, 3.0, 50.0):
        d = profile_selection_delta(prof, runs, eps)
        assert d >= floor, (eps, d, floor)
    # no ε meets δ = 1e-3 (the atom alone exceeds it at every ε)
    assert profile_selection_epsilon(prof, runs, 1e-3).epsilon == math.inf
