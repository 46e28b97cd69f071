"""The discrete Gaussian's PLD (dpspec.accounting._pld_discrete_gaussian) and the (ε, δ) four-output pair
(dpspec.accounting._pld_laplace.approx_dp_pmf): against the exact privacy profile by direct mpmath summation
over ℤ (both orders of the pair), exact compositions, dp_accounting, and hypothesis properties."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpspec.accounting._pld_discrete_gaussian import discrete_gaussian_pmf, tail_upper, truncation
from dpspec.accounting._pld_laplace import approx_dp_pmf
from dpspec.accounting.pld import pld_approx_dp, pld_compose, pld_discrete_gaussian

D = 1e-4  # the loss grid of these tests


def _weights(sigma, lo, hi):
    s2 = 2 * mp.mpf(sigma) ** 2
    return {k: mp.exp(-(mp.mpf(k) ** 2) / s2) for k in range(lo, hi + 1)}


def _normaliser(sigma):
    k = int(16 * sigma) + 20  # the terms left out are < e^{-128}
    return mp.fsum(_weights(sigma, -k, k).values())


def exact_profile(sigma, shift, eps, order="PQ"):
    """δ(ε) = Σ_k max(0, P(k) − e^ε Q(k)) for P = N_Z(0, σ²), Q = N_Z(Δ, σ²) (or the reverse order), by direct
    summation at 40 digits over every k that carries more than e^{-128} of either law."""
    with mp.workdps(40):
        k = int(16 * sigma) + 20
        w = _weights(sigma, -k - shift, k + shift)
        z = _normaliser(sigma)
        e = mp.exp(eps)
        out = mp.mpf(0)
        for x in range(-k, k + shift + 1):
            p, q = w[x] / z, w[x - shift] / z
            if order == "QP":
                p, q = q, p
            out += max(mp.mpf(0), p - e * q)
        return out


def pmf_delta(pmf, eps):
    """δ(ε) of one step's PMF: its +∞ mass plus Σ p(l)(1 − e^{ε − l})_+ (float, an independent reading)."""
    l = pmf.losses
    m = l > eps
    return pmf.inf_mass + float(np.sum(pmf.probs[m] * -np.expm1(eps - l[m])))


def numpy_profile(sigma, shift, eps):
    k = np.arange(-int(20 * sigma) - 30, int(20 * sigma) + 30 + shift, dtype=float)
    w = np.exp(-k * k / (2 * sigma * sigma))
    z = w.sum()
    return float(np.maximum(w / z - math.exp(eps) * np.exp(-((k - shift) ** 2) / (2 * sigma * sigma)) / z, 0).sum())


# ------------------------------------------------------------------------------- the tail bound


@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.5, 7.0, 40.0])
def test_tail_bound_and_normaliser_bound_hold_against_direct_summation(sigma):
    with mp.workdps(40):
        z = _normaliser(sigma)
        assert z >= mp.sqrt(2 * mp.pi) * sigma  # Poisson summation: Z ≥ √(2π)σ
        top = int(16 * sigma) + 20
        w = _weights(sigma, 0, top)
        for n in sorted({1, 2, int(sigma) + 1, int(3 * sigma) + 1, int(8 * sigma) + 1, int(11 * sigma) + 2}):
            exact = mp.fsum(w[k] for k in range(n, top + 1)) / z
            bound = float(tail_upper(n, sigma))
            assert bound >= exact  # the +∞ atom never understates the truncated mass
            if n >= sigma >= 1:  # and it is below CKS20's subgaussian bound there (tighter by ~n/σ)
                assert bound <= math.exp(-n * n / (2 * sigma * sigma))
            if n >= 3 * sigma >= 3:  # within one term of the exact tail
                assert bound <= exact * (1 + 1.5 * n / sigma**2) + 1e-300


def test_truncation_is_the_least_support_whose_tail_bound_is_small():
    for sigma, tail in [(0.5, 1e-28), (5.07, 1e-14), (300.0, 1e-30)]:
        k = truncation(sigma, tail)
        assert float(tail_upper(k + 1, sigma)) <= tail < float(tail_upper(k, sigma))


# ------------------------------------------------------------------------- one step, exactly


@pytest.mark.parametrize("sigma,shift", [(0.6, 1), (2.0, 1), (5.07, 1), (4.0, 3), (25.0, 7)])
def test_discrete_gaussian_pld_dominates_the_exact_profile_and_is_close(sigma, shift):
    p = pld_discrete_gaussian(sigma, shift, discretization=D)
    for eps in (0.0, 0.05, 0.3, 1.0, 2.5):
        got = p.delta(eps).delta
        exact = max(exact_profile(sigma, shift, eps, "PQ"), exact_profile(sigma, shift, eps, "QP"))
        assert got >= exact  # never below, in either order of the pair
        # every loss rounded up by < d: the certified profile is at most the exact one at ε − d
        assert got <= float(exact_profile(sigma, shift, eps - 1.01 * D)) * (1 + 1e-6) + 1e-12


@pytest.mark.parametrize("sigma,shift", [(3.0, 1), (60.0, 2), (400.0, 9)])
def test_the_analytic_path_for_large_sigma_dominates_too(sigma, shift):
    # the support summed term by term, and the analytic CDF bound used beyond N_DIRECT (forced here)
    direct = discrete_gaussian_pmf(sigma, shift, D)
    analytic = discrete_gaussian_pmf(sigma, shift, D, n_direct=1)
    assert direct.offset == analytic.offset and direct.size == analytic.size
    td = np.cumsum(direct.probs[::-1])[::-1]
    ta = np.cumsum(analytic.probs[::-1])[::-1]
    assert np.all(ta >= td * (1 - 1e-12))  # the analytic tail sums only move mass up
    shift_loss = shift / sigma**2  # ≤ one integer of Y: the analytic bound's extra loss
    for eps in (0.0, 0.2 * shift / sigma, 2.0 * shift / sigma):
        exact = exact_profile(sigma, shift, eps)
        for pmf in (direct, analytic):
            assert pmf_delta(pmf, eps) >= exact
        assert pmf_delta(analytic, eps) <= float(exact_profile(sigma, shift, eps - D - shift_loss)) + 1e-9


def test_discrete_gaussian_pld_against_dp_accounting():
    from dp_accounting.pld import privacy_loss_distribution as P

    for sigma, shift, k in [(2.0, 1, 1), (5.0, 2, 3), (12.0, 1, 5)]:
        ours = pld_discrete_gaussian(sigma, shift, k, discretization=D)
        pess = P.from_discrete_gaussian_mechanism(sigma, sensitivity=shift, value_discretization_interval=D)
        opt = P.from_discrete_gaussian_mechanism(
            sigma, sensitivity=shift, value_discretization_interval=D, pessimistic_estimate=False
        )
        pess, opt = pess.self_compose(k), opt.self_compose(k)
        for delta in (1e-3, 1e-6, 1e-9):
            e = ours.epsilon(delta).epsilon
            assert e >= opt.get_epsilon_for_delta(delta) - 1e-9
            assert e <= pess.get_epsilon_for_delta(delta) + 2 * k * D


def _exact_composition(parts, eps):
    """δ(ε) of the product pair of discrete Gaussian pairs [(σ, Δ), …] by exact enumeration of the composed
    loss Σ Δ_i(Δ_i − 2k_i)/(2σ_i²) under Π N_Z(0, σ_i²) (40 digits)."""
    with mp.workdps(40):
        dist = {mp.mpf(0): mp.mpf(1)}
        for sigma, shift in parts:
            k = int(16 * sigma) + 20
            z = _normaliser(sigma)
            step = {}
            for x, wx in _weights(sigma, -k, k).items():
                loss = mp.mpf(shift * (shift - 2 * x)) / (2 * mp.mpf(sigma) ** 2)
                step[loss] = step.get(loss, 0) + wx / z
            new = {}
            for a, pa in dist.items():
                for b, pb in step.items():
                    if pa * pb > mp.mpf(10) ** -45:
                        new[a + b] = new.get(a + b, 0) + pa * pb
            dist = new
        e = mp.mpf(eps)
        return mp.fsum(p * (1 - mp.exp(e - loss)) for loss, p in dist.items() if loss > e)


@pytest.mark.parametrize("parts", [[(1.5, 1)] * 3, [(2.0, 1), (3.0, 2)], [(1.2, 1), (2.5, 1), (4.0, 3)]])
def test_a_composition_of_discrete_gaussians_is_at_least_the_exact_composed_profile(parts):
    ours = pld_compose(*[pld_discrete_gaussian(s, dl, discretization=D) for s, dl in parts])
    for eps in (0.0, 0.5, 1.5, 3.0):
        got = ours.delta(eps).delta
        exact = _exact_composition(parts, eps)
        assert got >= exact
        assert got <= _exact_composition(parts, eps - 1.01 * len(parts) * D) * (1 + 1e-6) + 1e-12


# ---------------------------------------------------------------------------- properties

PROPS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(sigma=st.floats(0.4, 30.0), shift=st.integers(1, 6), eps=st.floats(0.0, 3.0))
def test_the_pair_with_shift_delta_covers_every_smaller_integer_shift(sigma, shift, eps):
    """The [D] lemma: T(N_Z(0), N_Z(t)) is non-increasing in the integer t, so the certified profile of shift
    Δ is at least the exact profile of every 1 ≤ t ≤ Δ."""
    pmf = discrete_gaussian_pmf(sigma, shift, 1e-3)
    got = pmf_delta(pmf, eps)
    for t in range(1, shift + 1):
        assert got >= numpy_profile(sigma, t, eps) - 1e-12
    assert numpy_profile(sigma, shift, eps) >= numpy_profile(sigma, max(shift - 1, 1), eps) - 1e-15


@PROPS
@given(sigma=st.floats(4.0, 60.0), factor=st.floats(1.05, 3.0), shift=st.integers(1, 5), steps=st.integers(1, 4))
def test_certified_epsilon_is_monotone_in_sigma_and_in_the_shift(sigma, factor, shift, steps):
    """ε(δ) falls with σ and grows with Δ, up to the grid's rounding (2 cells a step). (The exact profile is
    *not* monotone in σ below σ ≈ 3.6 at large ε — e.g. Δ = 1, ε = 2, σ ≈ 0.5 — so the range starts at 4;
    dpspec never relies on that monotonicity: every calibration is re-certified.)"""
    tol = 2 * steps * 1e-3

    def eps(s, dl):
        return pld_discrete_gaussian(s, dl, steps, discretization=1e-3).epsilon(1e-6).epsilon

    base = eps(sigma, shift)
    assert eps(sigma * factor, shift) <= base + tol
    assert eps(sigma, shift + 1) >= base - tol


# ------------------------------------------------------------------- the (ε, δ) four-output pair


def _kov_exact(eps, delta, k, eps1):
    """δ(ε′) of k (ε, δ) four-output pairs composed (Kairouz, Oh & Viswanath 2015 Thm 3.3's sum):
    1 − (1 − δ)^k (1 − Σ_i C(k, i) (e^{ε(k−i)} − e^{ε′} e^{εi})_+ / (1 + e^ε)^k)."""
    with mp.workdps(40):
        e, e1 = mp.mpf(eps), mp.mpf(eps1)
        s = (
            mp.fsum(
                mp.binomial(k, i) * max(mp.mpf(0), mp.exp(e * (k - i)) - mp.exp(e1) * mp.exp(e * i))
                for i in range(k + 1)
            )
            / (1 + mp.exp(e)) ** k
        )
        return 1 - (1 - mp.mpf(delta)) ** k * (1 - s)


@pytest.mark.parametrize("eps,delta,k", [(0.3, 1e-7, 1), (0.1, 1e-6, 5), (1.0, 1e-5, 3), (0.05, 0.0, 8)])
def test_approx_dp_pair_against_the_exact_composition_and_dp_accounting(eps, delta, k):
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as P

    ours = pld_approx_dp(eps, delta, k, discretization=D)
    for e1 in (0.0, eps / 2, eps * k / 2, eps * k * 0.9):
        got = ours.delta(e1).delta
        assert got >= _kov_exact(eps, delta, k, e1)
        assert got <= _kov_exact(eps, delta, k, e1 - 1.01 * k * D) * (1 + 1e-9) + 1e-12
    if delta > 0:
        ref = P.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, delta), D).self_compose(k)
        for target in (k * delta * 1.5, k * delta + 1e-4):
            e = ours.epsilon(target).epsilon
            assert abs(e - ref.get_epsilon_for_delta(target)) <= k * D + 1e-9


def test_approx_dp_pmf_puts_delta_on_the_infinite_loss_and_rounds_the_atoms_up():
    pmf = approx_dp_pmf(0.7, 1e-6, 1e-3)
    assert pmf.inf_mass >= 1e-6
    l, p = pmf.losses, pmf.probs
    nz = p > 0
    assert l[nz].min() >= -0.7 and l[nz].max() >= 0.7 and l[nz].max() < 0.7 + 1e-3
    assert p[nz].sum() + pmf.inf_mass >= 1 - 1e-15
    hi = 0.999999 * math.exp(0.7) / (1 + math.exp(0.7))
    assert p[l >= 0.7].sum() >= hi


def test_constructors_refuse_bad_arguments():
    with pytest.raises(ValueError, match="integer"):
        pld_discrete_gaussian(3.0, 1.5)
    with pytest.raises(ValueError, match="sigma"):
        pld_discrete_gaussian(0.0, 1)
    with pytest.raises(ValueError, match="delta"):
        pld_approx_dp(1.0, 1.0)
