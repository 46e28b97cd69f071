"""Private selection (hyper-parameter tuning) bounds: against independent mpmath evaluations of
Papernot & Steinke 2022 Thms 2 and 6, against the exact privacy of small discrete procedures
(enumerated output distributions of best-of-K), and monotonicity properties."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpspec.accounting import dpsgd_rdp_curve
from dpspec.accounting.curve import RdpCurve
from dpspec.accounting.selection import (
    RunCount,
    calibrate_selection,
    candidate_envelope,
    delta_at,
    poisson_selection_curve,
    pure_selection_epsilon,
    selection_dp,
    tnb_log_mean,
    tnb_pmf,
    tnb_selection_curve,
)

mp.mp.dps = 40

GRID = np.array([1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0])


def _curve(alphas, rdp, err=0.0) -> RdpCurve:
    return RdpCurve(
        alphas=np.asarray(alphas, float), rdp=np.asarray(rdp, float), theorem="t", method="m", abs_error=err
    )


def _gaussian_curve(sigma: float, alphas=GRID) -> RdpCurve:
    return _curve(alphas, np.asarray(alphas) / (2 * sigma * sigma))


# ---------------------------------------------------------------- independent mpmath references


def _mp_mean(eta, gamma):
    """E[K] by summing k·P[K = k] (a different route from the closed form)."""
    eta, gamma = mp.mpf(eta), mp.mpf(gamma)
    t = 1 - gamma
    if eta == 0:
        norm = -mp.log(gamma)
        return mp.nsum(lambda k: t**k / norm, [1, mp.inf])  # Σ k · t^k/(k log(1/γ))
    norm = gamma ** (-eta) - 1

    def term(k):
        return k * t**k * mp.rf(eta, k) / mp.factorial(k) / norm

    return mp.nsum(term, [1, mp.inf])


def _mp_tnb(alphas, rho, eta, gamma):
    mean = _mp_mean(eta, gamma)
    c = 1 + mp.mpf(eta)
    hats = [c * mp.log(1 / mp.mpf(gamma))]  # λ̂ = 1
    for ah, rh in zip(alphas, rho):
        ah = mp.mpf(float(ah))
        hats.append(c * (1 - 1 / ah) * mp.mpf(float(rh)) + c * mp.log(1 / mp.mpf(gamma)) / ah)
    h = min(hats)
    raw = [mp.mpf(float(r)) + h + mp.log(mean) / (mp.mpf(float(a)) - 1) for a, r in zip(alphas, rho)]
    return _suffix_min(raw)


def _suffix_min(vals):
    """Rényi divergence is non-decreasing in the order: a bound at a larger order bounds a smaller one."""
    return [min(vals[i:]) for i in range(len(vals))]


def _mp_delta(alphas, rho, eps_hat):
    best = mp.mpf(1)
    for a, r in zip(alphas, rho):
        a, r = mp.mpf(float(a)), mp.mpf(float(r))
        best = min(best, mp.e ** ((a - 1) * (r - eps_hat)) * (1 - 1 / a) ** (a - 1) / a)
    tv = mp.sqrt(1 - mp.e ** (-mp.mpf(float(min(rho)))))
    return min(best, tv)


def _mp_poisson(alphas, rho, mu):
    mu = mp.mpf(mu)
    out = []
    for a, r in zip(alphas, rho):
        a = mp.mpf(float(a))
        eh = mp.log(a / (a - 1))
        out.append(max(mp.mpf(float(r)) + mu * _mp_delta(alphas, rho, eh) + mp.log(mu) / (a - 1), mp.mpf(0)))
    return _suffix_min(out)


CURVES = [
    _gaussian_curve(0.8),
    _gaussian_curve(3.0),
    dpsgd_rdp_curve(1.1, 0.01, 300, alphas=GRID),
    dpsgd_rdp_curve(0.7, 256 / 60000, 700, alphas=GRID),
]


@pytest.mark.parametrize("ci", range(len(CURVES)))
@pytest.mark.parametrize("eta,gamma", [(-0.5, 0.2), (0.0, 0.05), (0.5, 0.1), (1.0, 0.01), (1.0, 0.3), (2.0, 0.02)])
def test_tnb_matches_mpmath(ci, eta, gamma):
    c = CURVES[ci]
    got = tnb_selection_curve(c, eta, gamma).rdp
    ref = _mp_tnb(c.alphas, c.rdp, eta, gamma)
    for g, r in zip(got, ref):
        assert g >= float(r) * (1 - 1e-15) - 1e-300  # never below
        assert abs(g - float(r)) <= 1e-9 * max(abs(float(r)), 1e-12), (g, r)


@pytest.mark.parametrize("eta,gamma", [(-0.5, 0.2), (0.0, 0.05), (0.5, 0.1), (1.0, 0.01), (3.0, 0.4)])
def test_tnb_mean_and_pmf(eta, gamma):
    assert math.exp(tnb_log_mean(eta, gamma)) == pytest.approx(float(_mp_mean(eta, gamma)), rel=1e-12)
    total = sum(tnb_pmf(k, eta, gamma) for k in range(1, 20000))
    assert total == pytest.approx(1.0, abs=1e-9)
    assert tnb_pmf(0, eta, gamma) == 0.0


def test_geometric_and_sampler():
    # η = 1 is the geometric distribution γ(1-γ)^{k-1}, mean 1/γ
    for k in (1, 2, 7):
        assert tnb_pmf(k, 1.0, 0.2) == pytest.approx(0.2 * 0.8 ** (k - 1), rel=1e-12)
    runs = RunCount.tnb(1.0, 0.2)
    rng = np.random.default_rng(3)
    draws = np.array([runs.sample(rng) for _ in range(4000)])
    assert draws.min() >= 1
    assert abs(draws.mean() - 5.0) < 5 * math.sqrt(20.0 / 4000)  # sd of geometric: sqrt(1-γ)/γ


@pytest.mark.parametrize("ci", range(len(CURVES)))
@pytest.mark.parametrize("mu", [1.0, 3.0, 10.0, 100.0])
def test_poisson_matches_mpmath(ci, mu):
    c = CURVES[ci]
    got = poisson_selection_curve(c, mu).rdp
    ref = _mp_poisson(c.alphas, c.rdp, mu)
    for g, r in zip(got, ref):
        r = max(float(r), 0.0)
        assert g >= r * (1 - 1e-15)
        assert abs(g - r) <= 1e-9 * max(abs(r), 1e-12), (g, r)


def test_delta_at_matches_mpmath():
    c = CURVES[2]
    for e in (0.01, 0.3, 1.0, 4.0):
        assert delta_at(c, np.array([e]))[0] == pytest.approx(float(_mp_delta(c.alphas, c.rdp, mp.mpf(e))), rel=1e-9)


# ---------------------------------------------------------------- exact small discrete procedures


def _pgf(runs: RunCount, x):
    x = mp.mpf(x)
    if runs.kind == "poisson":
        return mp.e ** (mp.mpf(runs.mu) * (x - 1))
    if runs.kind == "fixed":
        return x**runs.count
    eta, gamma = mp.mpf(runs.eta), mp.mpf(runs.gamma)
    t = (1 - gamma) * x
    if eta == 0:
        return mp.log(1 - t) / mp.log(gamma)
    return ((1 - t) ** (-eta) - 1) / (gamma ** (-eta) - 1)


def _best_of(runs: RunCount, p):
    """Output distribution of best-of-K runs of a mechanism with pmf ``p`` on a totally ordered
    set (index = score): P[max <= y] = E[F(y)^K]; the first entry is 'nothing' (K = 0)."""
    cdf = [mp.mpf(0)]
    for v in p:
        cdf.append(cdf[-1] + mp.mpf(v))
    g = [_pgf(runs, f) for f in cdf]
    return [g[0]] + [g[i + 1] - g[i] for i in range(len(p))]


def _renyi(p, q, a):
    a = mp.mpf(a)
    s = mp.fsum(pi**a * qi ** (1 - a) for pi, qi in zip(p, q) if pi > 0)
    return mp.log(s) / (a - 1)


def _hockey(p, q, eps):
    return mp.fsum(max(mp.mpf(0), pi - mp.e ** mp.mpf(eps) * qi) for pi, qi in zip(p, q))


def _exact_curve(p, q, alphas=GRID) -> RdpCurve:
    vals = [max(_renyi(p, q, a), _renyi(q, p, a)) for a in alphas]
    return _curve(alphas, [float(v) * (1 + 1e-14) + 1e-300 for v in vals])


def _rr(eps):
    e = mp.e ** mp.mpf(eps)
    return [e / (1 + e), 1 / (1 + e)], [1 / (1 + e), e / (1 + e)]


PAIRS = [
    _rr(0.5),
    _rr(1.5),
    # a three-valued score whose top value is rarer on the neighbour
    ([mp.mpf("0.5"), mp.mpf("0.3"), mp.mpf("0.2")], [mp.mpf("0.55"), mp.mpf("0.33"), mp.mpf("0.12")]),
]
RUNS = [
    RunCount.poisson(3.0),
    RunCount.poisson(10.0),
    RunCount.tnb(1.0, 0.1),
    RunCount.tnb(0.0, 0.05),
    RunCount.tnb(-0.5, 0.3),
    RunCount.fixed(4),
]


@pytest.mark.parametrize("pi", range(len(PAIRS)))
@pytest.mark.parametrize("ri", range(len(RUNS)))
def test_never_below_exact(pi, ri):
    p, q = PAIRS[pi]
    runs = RUNS[ri]
    curve = _exact_curve(p, q)
    a_p, a_q = _best_of(runs, p), _best_of(runs, q)
    from dpspec.accounting.selection import selection_curve

    bound = selection_curve(curve, runs)
    for a, b in zip(GRID, bound.rdp):
        exact = max(_renyi(a_p, a_q, a), _renyi(a_q, a_p, a))
        assert b >= float(exact), (a, b, exact)
    for delta in (1e-2, 1e-5):
        res = selection_dp(curve, runs, delta)
        exact_delta = max(_hockey(a_p, a_q, res.epsilon), _hockey(a_q, a_p, res.epsilon))
        assert float(exact_delta) <= delta


@pytest.mark.parametrize("eps0", [0.2, 1.0])
@pytest.mark.parametrize(
    "runs", [RunCount.tnb(1.0, 0.1), RunCount.tnb(0.0, 0.02), RunCount.tnb(2.0, 0.5), RunCount.fixed(3)]
)
def test_pure_bound_never_below_exact(eps0, runs):
    p, q = _rr(eps0)
    a_p, a_q = _best_of(runs, p), _best_of(runs, q)
    exact = max(abs(mp.log(x / y)) for x, y in zip(a_p, a_q) if x > 0)
    bound = pure_selection_epsilon(eps0, runs)
    assert bound >= float(exact)
    assert pure_selection_epsilon(eps0, RunCount.poisson(5)) is None
    # the pure bound joins the minimum: selection_dp with delta = 0 uses it alone
    assert selection_dp(None, runs, 0.0, pure_epsilon=eps0).epsilon == bound


def test_envelope_of_different_candidates_never_below_exact():
    """Candidates differ: one run draws one of two mechanisms uniformly; the mixture's output
    (candidate, score) ordered by score then candidate is bounded through the envelope."""
    (p1, q1), (p2, q2) = _rr(0.4), _rr(1.2)
    half = mp.mpf(1) / 2
    # mixture output ordered: (score 0, c1), (score 0, c2), (score 1, c1), (score 1, c2)
    mix_p = [half * p1[0], half * p2[0], half * p1[1], half * p2[1]]
    mix_q = [half * q1[0], half * q2[0], half * q1[1], half * q2[1]]
    env = candidate_envelope([_exact_curve(p1, q1), _exact_curve(p2, q2)])
    runs = RunCount.poisson(5.0)
    from dpspec.accounting.selection import selection_curve

    bound = selection_curve(env, runs)
    a_p, a_q = _best_of(runs, mix_p), _best_of(runs, mix_q)
    for a, b in zip(GRID, bound.rdp):
        assert b >= float(max(_renyi(a_p, a_q, a), _renyi(a_q, a_p, a)))
    assert np.all(env.rdp >= _exact_curve(p2, q2).rdp)


# ---------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    sigma=st.floats(0.5, 8.0),
    mu1=st.floats(1.0, 200.0),
    f=st.floats(1.0, 5.0),
    delta=st.sampled_from([1e-5, 1e-8]),
)
def test_poisson_monotone(sigma, mu1, f, delta):
    c = _gaussian_curve(sigma)
    e1 = selection_dp(c, RunCount.poisson(mu1), delta).epsilon
    assert selection_dp(c, RunCount.poisson(mu1 * f), delta).epsilon >= e1  # more runs
    assert selection_dp(_gaussian_curve(sigma / f), RunCount.poisson(mu1), delta).epsilon >= e1  # larger per-run ε


@settings(max_examples=40, deadline=None)
@given(
    sigma=st.floats(0.5, 8.0),
    eta=st.floats(-0.9, 3.0),
    gamma=st.floats(0.001, 0.9),
    f=st.floats(1.0, 5.0),
)
def test_tnb_monotone(sigma, eta, gamma, f):
    c = _gaussian_curve(sigma)
    r1, r2 = RunCount.tnb(eta, gamma), RunCount.tnb(eta, gamma / f)  # smaller γ: larger mean
    assert r2.mean() >= r1.mean() * (1 - 1e-12)
    e1 = selection_dp(c, r1, 1e-6).epsilon
    assert selection_dp(c, r2, 1e-6).epsilon >= e1
    assert selection_dp(_gaussian_curve(sigma / f), r1, 1e-6).epsilon >= e1


def test_selection_costs_more_than_one_run_and_fixed_runs_compose():
    from dpspec.accounting import dp_from_curve

    c = dpsgd_rdp_curve(1.0, 256 / 60000, 700)
    single = dp_from_curve(c, 1e-6).epsilon
    for runs in (RunCount.poisson(10), RunCount.tnb(1.0, 0.1), RunCount.fixed(10)):
        assert selection_dp(c, runs, 1e-6).epsilon > single
    assert selection_dp(c, RunCount.fixed(3), 1e-6).epsilon == dp_from_curve(c.scaled(3), 1e-6).epsilon


def test_calibration_meets_target_and_is_tight():
    def curve_of(z):
        return dpsgd_rdp_curve(z, 0.01, 200, alphas=GRID)

    runs = RunCount.poisson(10)
    z, res = calibrate_selection(curve_of, runs, 3.0, 1e-6, rel_tol=1e-3)
    assert res.epsilon <= 3.0
    assert selection_dp(curve_of(z), runs, 1e-6).epsilon == res.epsilon
    assert selection_dp(curve_of(z * (1 - 2e-3)), runs, 1e-6).epsilon > 3.0
    with pytest.raises(ValueError):
        calibrate_selection(curve_of, runs, 1e-4, 1e-6, hi=2.0)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: RunCount.poisson(0),
        lambda: RunCount.tnb(-1.0, 0.5),
        lambda: RunCount.tnb(1.0, 1.0),
        lambda: RunCount.fixed(0),
        lambda: RunCount("binomial"),
    ],
)
def test_bad_run_counts_refused(bad):
    with pytest.raises(ValueError):
        bad()
