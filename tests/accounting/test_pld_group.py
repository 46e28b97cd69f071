"""Group privacy with PLD (dpspec.accounting.pld_group): the Poisson group-K dominating pair
(Schuchardt et al. NeurIPS 2024) against mpmath at T = 1, dp_accounting's mixture-of-Gaussians
PLD on the same grid, the RDP group bound and the group lemma."""

from __future__ import annotations

import logging

import mpmath as mp
import numpy as np
import pytest

from dpspec import accounting as acc
from dpspec.accounting.pld import PldStep

logging.getLogger("absl").setLevel(logging.ERROR)


def _w(k, q):
    return [mp.binomial(k, j) * mp.mpf(q) ** j * (1 - mp.mpf(q)) ** (k - j) for j in range(k + 1)]


def group_delta(k, q, s, eps, direction):
    """Exact hockey-stick divergence of one step of the group-K pair (noise s)."""
    w, s, eps = _w(k, q), mp.mpf(s), mp.mpf(eps)

    def ell(x):          # log of the mixture / N(0) likelihood ratio (increasing in x)
        return mp.log(mp.fsum(wj * mp.exp((j * x - j * j / mp.mpf(2)) / (s * s))
                              for j, wj in enumerate(w)))

    def root(v):         # ell(x) = v by bisection (ell is increasing)
        lo, hi = mp.mpf(-200), mp.mpf(200)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if ell(mid) < v else (lo, mid)
        return (lo + hi) / 2

    if direction == "remove":        # P = mixture, Q = N(0): L = ell(x) > eps  <=> x > x*
        if eps <= mp.log(w[0]):
            return 1 - mp.exp(eps)
        x = root(eps)
        return mp.fsum(wj * mp.ncdf(-(x - j) / s) for j, wj in enumerate(w)) \
            - mp.exp(eps) * mp.ncdf(-x / s)
    if -eps <= mp.log(w[0]):         # add: L = -ell(x) > eps  <=>  x < x*
        return mp.mpf(0)
    x = root(-eps)
    return mp.ncdf(x / s) - mp.exp(eps) * mp.fsum(wj * mp.ncdf((x - j) / s) for j, wj in enumerate(w))


def test_group_of_one_is_the_single_element_pair_exactly():
    q = 0.013
    lw = PldStep("poisson", 1.0, 1, q, 1.0, 1).log_weights()
    assert lw[0] == np.log1p(-q) and lw[1] == pytest.approx(np.log(q), rel=1e-15)
    a = acc.pld_dpsgd(1.1, q, 500, group_size=1)
    assert a.relation == "add_remove"
    r1 = a.epsilon(1e-6)
    r2 = acc.pld_group_lemma_epsilon(1.1, q, 500, 1e-6, 1)
    assert r2.epsilon == r1.epsilon


@pytest.mark.parametrize("k,q,sigma,delta", [(2, 0.05, 1.0, 1e-5), (3, 0.2, 2.0, 1e-4),
                                             (9, 0.522, 0.344, 1e-5), (16, 0.0182, 0.457, 1e-5)])
def test_group_one_step_vs_mpmath(k, q, sigma, delta):
    r = acc.pld_dpsgd(sigma, q, 1, group_size=k).epsilon(delta)
    with mp.workdps(30):
        for direction in ("remove", "add"):
            assert group_delta(k, q, sigma, r.epsilon, direction) <= delta     # certified
        lo, hi = mp.mpf(0), mp.mpf(r.epsilon)
        f = lambda e: max(group_delta(k, q, sigma, e, "remove"),  # noqa: E731
                          group_delta(k, q, sigma, e, "add"))
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > delta else (lo, mid)
    exact = float(hi)
    assert exact <= r.epsilon <= exact * 1.002 + 1e-3


@pytest.mark.slow
def test_group_matches_dp_accounting_mixture_pld():
    """The same pair through dp_accounting's MixtureGaussianPrivacyLoss (what the authors
    use), same CTD grid: equal to ~1e-6 (its inverse-loss search is slow; grid 2e-3)."""
    from dp_accounting.pld import privacy_loss_distribution as P
    from scipy.stats import binom
    k, q, sigma, steps, d = 3, 0.05, 1.5, 50, 2e-3
    sens = np.arange(k + 1, dtype=float)
    probs = binom.pmf(np.arange(k + 1), k, q)
    pess = P.from_mixture_gaussian_mechanism(sigma, sens, probs, value_discretization_interval=d)
    e_dpa = pess.self_compose(steps).get_epsilon_for_delta(1e-6)
    ours = acc.pld_dpsgd(sigma, q, steps, group_size=k, discretization=d).epsilon(1e-6).epsilon
    assert ours == pytest.approx(e_dpa, rel=1e-5)
    # never below the optimistic estimate of the same pair: a lower bound on the exact epsilon
    # of the worst-case datasets (the pair is tight), so no sound certificate may go under it
    opt = P.from_mixture_gaussian_mechanism(sigma, sens, probs, pessimistic_estimate=False,
                                            value_discretization_interval=d / 4, use_connect_dots=False)
    e_low = opt.self_compose(steps).get_epsilon_for_delta(1e-6)
    auto = acc.pld_dpsgd(sigma, q, steps, group_size=k).epsilon(1e-6).epsilon
    assert e_low <= auto <= ours * (1 + 1e-9)
    assert auto <= e_low * 1.05        # and the automatic grid is within 5 % of it


@pytest.mark.parametrize("k", [2, 4])
def test_group_below_rdp_group_bound_and_group_lemma(k):
    sigma, q, steps, delta = 1.2, 0.01, 300, 1e-5
    pld = acc.pld_dpsgd(sigma, q, steps, group_size=k).epsilon(delta)
    assert pld.relation == f"add_remove_group_{k}" and "Schuchardt" in pld.theorem
    rdp = acc.dpsgd_epsilon(sigma, q, steps, delta, group_size=k)
    lemma = acc.pld_group_lemma_epsilon(sigma, q, steps, delta, k)
    assert pld.epsilon < rdp
    assert pld.epsilon <= lemma.epsilon
    one = acc.pld_epsilon(sigma, q, steps, delta)
    assert one < pld.epsilon                         # a group costs more than one element
    if k == 4:
        two = acc.pld_dpsgd(sigma, q, steps, group_size=2).epsilon(delta).epsilon
        assert two < pld.epsilon                     # monotone in K


def test_group_lemma_is_certified():
    """The group-lemma epsilon satisfies delta_1(eps/K) sum_{i<K} e^{i eps/K} <= delta."""
    k, sigma, q, steps, delta = 3, 1.5, 0.02, 200, 1e-5
    r = acc.pld_group_lemma_epsilon(sigma, q, steps, delta, k)
    e1 = r.epsilon / k
    d1 = acc.pld_dpsgd(sigma, q, steps).delta(e1).delta
    assert d1 * np.expm1(k * e1) / np.expm1(e1) <= delta * (1 + 1e-12)
    assert "Vadhan" in r.theorem


@pytest.mark.parametrize("sigma,q,steps,k", [(0.344, 0.522, 3, 9), (0.457, 0.0182, 2, 16)])
def test_few_steps_of_a_large_group_get_a_grid_sized_to_the_answer(sigma, q, steps, k):
    """A handful of steps with a large epsilon: the automatic grid is coarsened to the answer's scale
    (T d <~ 1e-3 eps), so the FFT is thousands of points, not the 3.5 M / 4.1 M of the 1e-4 grid, and
    the certificate stays between dp_accounting's optimistic estimate (a lower bound on the exact
    epsilon of this tight pair) and pessimistic references."""
    from dp_accounting.pld import privacy_loss_distribution as P
    from scipy.stats import binom

    delta = 1e-5
    r = acc.pld_dpsgd(sigma, q, steps, group_size=k).epsilon(delta)
    assert r.fft_length <= 1 << 15 and r.discretization >= 16e-4  # the work done, not the time taken
    assert r.delta_error <= 1e-6 * delta
    sens, probs = np.arange(k + 1, dtype=float), binom.pmf(np.arange(k + 1), k, q)
    opt = P.from_mixture_gaussian_mechanism(sigma, sens, probs, pessimistic_estimate=False,
                                            value_discretization_interval=0.1, use_connect_dots=False)
    assert opt.self_compose(steps).get_epsilon_for_delta(delta) <= r.epsilon
    pess = P.from_mixture_gaussian_mechanism(sigma, sens, probs, value_discretization_interval=r.discretization)
    assert r.epsilon <= pess.self_compose(steps).get_epsilon_for_delta(delta) * (1 + 1e-9)
    assert r.epsilon < acc.dpsgd_epsilon(sigma, q, steps, delta, group_size=k)  # the RDP group bound
    # the coarser grid costs at most 1e-3 of epsilon against a 16 times finer one (an explicit grid is kept)
    fine = acc.pld_dpsgd(sigma, q, steps, group_size=k, discretization=r.discretization / 16).epsilon(delta)
    assert fine.discretization == r.discretization / 16 and fine.fft_length > r.fft_length
    assert fine.epsilon <= r.epsilon <= fine.epsilon * (1 + 1e-3)
