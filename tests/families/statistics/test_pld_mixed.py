"""PLD composition of Laplace, discrete Laplace and Gaussian parts (issue 25: `compose … split` of mixed
noises), against closed forms and dp_accounting."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.accounting.pld import pld_compose, pld_gaussian, pld_laplace, pld_pure
from dpspec.certificate.verify import VerificationError
from dpspec.families.statistics import accountant as A
from dpspec.families.statistics.compile import composed_bounds

UNIT = "privacy people { unit record  data dataset(t) }\n"


def table(n=2000, seed=1):
    g = np.random.default_rng(seed)
    return {
        "hours": g.integers(1, 100, n).astype(float),
        "race": g.choice(["A", "B", "C"], n, p=[0.7, 0.2, 0.1]),
    }


@pytest.mark.parametrize("eps", [0.05, 0.7, 3.0])
def test_laplace_pld_is_an_upper_bound_close_to_the_closed_form(eps):
    p = pld_laplace(2.0 / eps, 2.0, discretization=1e-4)
    for e in (0.0, eps / 3, 0.9 * eps):
        exact = -math.expm1((e - eps) / 2)  # δ(ε') = 1 − e^{(ε' − ε)/2} (Koskela et al. 2020 §6)
        got = p.delta(e).delta
        assert exact <= got <= exact + 2e-4  # each loss rounded up by at most two grid steps (d = 1e-4)
    assert p.delta(eps + 2e-4).delta <= 1e-9  # pure: nothing above ε once rounded up to the grid


@pytest.mark.parametrize("t,sens,k", [(0.8, 1, 3), (3.0, 3, 4), (40.0, 99, 2)])
def test_discrete_laplace_pld_against_dp_accounting(t, sens, k):
    from dp_accounting.pld import privacy_loss_distribution as P

    ours = pld_laplace(t, sens, k, discrete=True)
    ref = P.from_discrete_laplace_mechanism(1 / t, sens).self_compose(k)
    opt = P.from_discrete_laplace_mechanism(1 / t, sens, pessimistic_estimate=False).self_compose(k)
    for delta in (1e-3, 1e-6):
        e = ours.epsilon(delta).epsilon
        assert e >= opt.get_epsilon_for_delta(delta) - 1e-12  # an upper bound
        assert e <= ref.get_epsilon_for_delta(delta) + 1e-3 * k  # and as tight as the pessimistic reference


def test_randomized_response_is_the_discrete_laplace_pair_with_shift_one():
    for eps in (0.1, 1.0):
        rr = pld_pure(eps, 2, discretization=1e-5)
        # two RR steps: δ(0) = P(L > 0) − Q(L > 0): L = 2ε w.p. p², 0 w.p. 2p(1 − p); p = e^ε/(1 + e^ε)
        p = math.exp(eps) / (1 + math.exp(eps))
        exact = p * p - (1 - p) * (1 - p)
        assert exact <= rr.delta(0.0).delta <= exact + 2e-5  # losses rounded up by < 1e-5 each


@pytest.mark.parametrize(
    "scales,sigma,delta",
    [((5.0, 5.0, 5.0, 5.0), 2.0, 1e-6), ((3.0, 30.0), 4.0, 1e-5), ((1.0,), 1.5, 1e-8)],
)
def test_mixed_laplace_gaussian_composition_against_dp_accounting(scales, sigma, delta):
    from dp_accounting.pld import privacy_loss_distribution as P

    ours = pld_compose(*[pld_laplace(b, 1.0) for b in scales], pld_gaussian(sigma, 1.0))
    pess = P.from_gaussian_mechanism(sigma)
    opt = P.from_gaussian_mechanism(sigma, pessimistic_estimate=False)
    for b in scales:
        pess = pess.compose(P.from_laplace_mechanism(b))
        opt = opt.compose(P.from_laplace_mechanism(b, pessimistic_estimate=False))
    e = ours.epsilon(delta).epsilon
    assert e >= opt.get_epsilon_for_delta(delta) - 1e-12
    assert e <= pess.get_epsilon_for_delta(delta) * (1 + 1e-3)
    # the accountant's own bound: never above basic composition (Laplace ε add, Gaussian ε(δ))
    basic = A.compose([1 / b for b in scales], [1 / sigma], delta)
    assert e < basic


@settings(max_examples=15, deadline=None)
@given(st.floats(0.05, 2.0), st.floats(0.05, 2.0), st.floats(0.1, 2.0))
def test_pld_bound_is_monotone_in_each_part(e1, e2, mu):
    pairs = [("laplace", 1 / e1, 1.0), ("laplace", 1 / e2, 1.0)]
    base = A.pld_compose(pairs, [mu], 1e-6)
    assert base <= A.pld_compose([("laplace", 1 / (e1 * 1.1), 1.0), pairs[1]], [mu], 1e-6) + 1e-9
    assert base <= A.pld_compose(pairs, [mu * 1.1], 1e-6) + 1e-9
    assert base <= A.compose([e1, e2], [mu], 1e-6) + 1e-9


def test_selection_parts_enter_the_pld_by_their_epsilon_delta_pair():
    lap = ("laplace", 2.0, 1.0, None, None, 0.5, 0.0, 0.0)
    sel = ("discrete_laplace", 4.0, 1.0, None, None, 0.25, 0.0, 1e-7)
    dg = ("discrete_gaussian", 5.0, 1.0, None, None, 0.0, 0.2, 0.0)
    basic, pld = composed_bounds([lap, sel, dg], 1e-6)
    inside = A.pld_compose(
        [("laplace", 2.0, 1.0), ("approx_dp", 0.25, 1e-7), ("discrete_gaussian", 5.0, 1.0)], [], 1e-6
    )
    assert pld == inside
    # composing the selection outside the PLD (its δ spent first, its ε added) is never tighter
    outside = A.pld_compose([("laplace", 2.0, 1.0), ("discrete_gaussian", 5.0, 1.0)], [], 1e-6 - 1e-7 * (1 + 1e-12))
    assert pld <= outside + 0.25 + 1e-9
    # the basic bound: pure ε add, the discrete Gaussian as ρ = Δ²/(2σ²)-zCDP at δ less the selection's
    assert basic == A.compose([0.5, 0.25, 0.0], [], 1e-6 - 1e-7 * (1 + 1e-12), [A.discrete_gaussian_rho(5.0, 1.0)])
    assert composed_bounds([lap, sel, dg], 5e-8) == (math.inf, math.inf)  # δ below the selection's


MIXED = (
    UNIT
    + """
release a { mechanism discrete_gaussian  query count(by = race, keys = ["A", "B", "C"]) }
release b { mechanism laplace  query sum(hours, bounds = [0, 99]) }
release c { mechanism laplace  query count() }
compose both { parts [a, b, c]  guarantee dp(epsilon = 1, delta = 1e-6)  split evenly }
"""
)


def test_a_mixed_split_calibrates_against_the_pld_bound_and_verifies():
    c = dpspec.compile(dpspec.loads(MIXED), data={"t": table()})
    comp = c.certificate.results[-1]
    p = comp.mechanism.parameters
    assert 0.99 <= comp.guarantee.epsilon <= 1.0
    assert p["accounting"] == "pld" and p["pld_epsilon"] == comp.guarantee.epsilon
    assert p["basic_epsilon"] > 1.0  # the shares would break the target under basic composition
    assert dpspec.verify(c.certificate).ok
    # a certificate whose composed ε was lowered does not verify
    from tests.fuzz.certmut import reseal

    d = json.loads(c.certificate.model_dump_json())
    d["results"][-1]["guarantee"]["dp"][0]["epsilon"] *= 0.99
    d["results"][-1]["guarantee"]["epsilon"] *= 0.99
    with pytest.raises(VerificationError):
        assert not dpspec.verify(json.dumps(reseal(d))).ok


@settings(max_examples=30, deadline=None)
@given(st.floats(1e-3, 5.0), st.sampled_from([1e-4, 3e-4, 1e-3, 0.01]), st.integers(1, 7))
def test_laplace_pmfs_round_every_loss_up(eps, d, sens):
    import mpmath as mp

    from dpspec.accounting._pld_laplace import discrete_laplace_pmf, laplace_pmf

    for pmf, exact in (
        (laplace_pmf(eps, d), lambda lp: 1 - mp.exp(-(eps - lp) / 2) / 2),
        (
            discrete_laplace_pmf(sens / eps, sens, d),
            lambda lp: (
                1
                - mp.exp(-(mp.ceil((sens - lp * sens / eps) / 2 - mp.mpf(10) ** -30)) * eps / sens)
                / (1 + mp.exp(-eps / sens))
            ),
        ),
    ):
        p = np.asarray(pmf.probs)
        tails = np.cumsum(p[::-1])[::-1]
        losses = pmf.losses
        assert losses[np.nonzero(p)[0][-1]] >= eps * (1 - 1e-15)  # the atom at ε is not rounded down
        with mp.workdps(30):
            for j in range(1, p.size, max(1, p.size // 40)):
                lp = mp.mpf(float(losses[j - 1]))  # tail at e_j = P(L > e_{j-1}) of the exact pair
                ex = 1 if lp < -eps else (0 if lp >= eps else exact(lp))
                assert tails[j] >= float(ex) * (1 - 1e-14), (j, float(lp))


def test_pure_parts_at_a_large_delta_get_more_than_their_even_share():
    rels = "".join(f"release r{i} {{ mechanism laplace  query count() }}\n" for i in range(8))
    parts = ", ".join(f"r{i}" for i in range(8))
    text = UNIT + rels + f"compose c {{ parts [{parts}]  guarantee dp(epsilon = 2, delta = 1e-3)  split evenly }}"
    c = dpspec.compile(dpspec.loads(text))
    comp = c.certificate.results[-1]
    shares = [r.guarantee.epsilon for r in c.certificate.results[:-1]]
    assert 0.99 * 2 <= comp.guarantee.epsilon <= 2
    assert min(shares) > 1.05 * 2 / 8  # basic composition would give 0.25 each
    assert comp.mechanism.parameters["basic_epsilon"] > 2  # which these shares would exceed
    # the PLD bound agrees with dp_accounting on the same Laplace pairs
    from dp_accounting.pld import privacy_loss_distribution as P

    opt = P.from_laplace_mechanism(1 / shares[0], pessimistic_estimate=False).self_compose(8)
    assert comp.guarantee.epsilon >= opt.get_epsilon_for_delta(1e-3) - 1e-12
