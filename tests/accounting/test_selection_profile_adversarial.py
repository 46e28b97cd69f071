"""Adversarial checks of the privacy-profile bound for best-of-K (dpspec.accounting.selection_profile).

Run-count distributions at the edge of what a double holds: the bound must stay an upper bound (or fail closed at
δ = 1), never turn into a NaN that every comparison with a target δ silently accepts."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpspec.accounting.selection import RunCount
from dpspec.accounting.selection_profile import (
    _psi_down,
    _psi_up,
    profile_from_dp,
    profile_selection_delta,
    profile_selection_epsilon,
)

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


def test_an_extreme_run_count_is_refused_not_certified():
    """The same through the compiler: GCON runs certified (0.55, 1e-4) each, K ~ D_{300, 0.094} (E[K] ≈ 2891). The
    atom alone gives δ ≈ 0.29 at every ε; the NaN bound certified ε = 1 at δ = 1e-4. Now: no finite ε (DPS959)."""
    import dpspec
    from dpspec.diagnostics import SpecError

    text = GCON_SPEC.replace("RUNS", "runs truncated_negative_binomial(eta = 300, gamma = 0.094)")
    with pytest.raises(SpecError) as e:
        dpspec.compile(dpspec.loads(text))
    assert "DPS959" in str(e.value)


GCON_SPEC = """privacy links { unit edge  data synthetic(generator = sbm_graph, size = 400, seed = 1) }
train g { mechanism gcon  propagation appr(restart = 0.6, steps = [2, inf])  loss pseudo_huber(delta = 0.5)
          regularization 0.2  encoder mlp(hidden = 16, epochs = 20, seed = 0)  pseudo_labels true
          guarantee dp(epsilon = 0.5, delta = 1e-4) }
tune search { train g  candidates { regularization [0.1, 0.5] }  RUNS  select best(score = f1, on = public)
              guarantee dp(delta = 1e-4) }
"""


# ------------------------------------------------------------------ Ψ̄ and its rounding margin at the extremes


def _mp_psi_bar(runs: RunCount, v):
    """φ'(1 - v) at 50 digits from the closed forms."""
    v = mp.mpf(v)
    if runs.kind == "poisson":
        mu = mp.mpf(runs.mu)
        return mu * mp.e ** (-mu * v)
    eta, gamma = mp.mpf(runs.eta), mp.mpf(runs.gamma)
    a = (1 - gamma) / mp.log(1 / gamma) if eta == 0 else eta * (1 - gamma) / (gamma ** (-eta) - 1)
    return a * (gamma + (1 - gamma) * v) ** (-(eta + 1))


@pytest.mark.parametrize(
    "runs",
    [
        RunCount.tnb(300.0, 0.094),
        RunCount.tnb(2000.0, 0.5),
        RunCount.tnb(-0.99, 1e-8),
        RunCount.tnb(0.0, 1e-300),
        RunCount.tnb(1.0, 0.1),
        RunCount.tnb(20.0, 0.3),
        RunCount.poisson(300.0),  # exp(-μv) is off by up to μv/2 ulps: 64 ulps were not enough
        RunCount.poisson(3.0),
    ],
    ids=lambda r: r.describe(),
)
def test_psi_bar_within_its_rounding_margin(runs):
    """Ψ̄ rounded up (down) by its stated margin is at (below) the 50-digit value, wherever it is a normal double."""
    v = np.concatenate([[0.0, 1e-12, 1e-6, 1e-3], np.linspace(0.05, 1.0, 96)])
    up, down = _psi_up(runs, v), _psi_down(runs, v)
    for x, u, d in zip(v, up, down):
        ref = _mp_psi_bar(runs, float(x))
        if not (mp.mpf("1e-300") < ref < mp.mpf("1e300")):
            continue
        assert mp.mpf(float(u)) >= ref and mp.mpf(float(d)) <= ref, (x, u, d, ref)
        assert abs(mp.mpf(float(u)) / ref - 1) < 1e-9
