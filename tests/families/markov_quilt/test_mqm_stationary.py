"""The stationary law of a Markov prior (MQM): exact rational GTH elimination, checked against an
independent exact computation (sympy's null space of Sᵀ − I in rationals) on nearly reducible chains,
where an eigenvector solver loses the digits; chains with transient states; refusals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from dpspec.families.markov_quilt import MarkovChain, calibrate_mqm, max_influence
from dpspec.families.markov_quilt.mqm import rounding_slack, stationary, stationary_exact

U = 2.0**-53


def sympy_stationary(P: np.ndarray) -> list[Fraction]:
    """π with π S = π, Σ π = 1, S the stochastic matrix with P's off-diagonal entries (exact binary
    fractions) and the implied diagonal: the null space of Sᵀ − I, in sympy's exact rationals."""
    k = P.shape[0]
    S = sympy.zeros(k, k)
    for i in range(k):
        for j in range(k):
            if i != j:
                S[i, j] = sympy.Rational(Fraction(float(P[i, j])))
        S[i, i] = 1 - sum(S[i, j] for j in range(k) if j != i)
    ns = (S.T - sympy.eye(k)).nullspace()
    assert len(ns) == 1, "the reference needs a unique stationary law"
    v = ns[0] / sum(ns[0])
    return [Fraction(int(sympy.fraction(x)[0]), int(sympy.fraction(x)[1])) for x in v]


def assert_close(pi: np.ndarray, exact: list[Fraction]) -> None:
    for a, b in zip(pi, exact):
        assert abs(Fraction(float(a)) - b) <= b * Fraction(U), (float(a), float(b))


@pytest.mark.parametrize("a, b", [(1e-13, 3e-14), (1e-30, 1e-31), (0.5, 1e-15), (2.0**-60, 2.0**-61)])
def test_nearly_reducible_two_state_chain_matches_the_closed_form(a, b):
    """P = [[1 − a, a], [b, 1 − b]]: π = (b, a)/(a + b), whatever the eigengap a + b."""
    P = np.array([[1 - a, a], [b, 1 - b]])
    ex = stationary_exact(P)
    fa, fb = Fraction(a), Fraction(b)
    assert ex == [fb / (fa + fb), fa / (fa + fb)]
    assert_close(stationary(P), ex)
    assert_close(MarkovChain(P).initial, ex)


def _blocks(rng, sizes, coupling):
    """A nearly completely decomposable chain: dense blocks, coupled by ``coupling``-sized transitions."""
    k = sum(sizes)
    P = np.zeros((k, k))
    o = 0
    for s in sizes:
        P[o : o + s, o : o + s] = rng.uniform(0.1, 1.0, (s, s))
        o += s
    P += coupling * rng.uniform(0.5, 1.0, (k, k)) * (P == 0)
    return P / P.sum(1, keepdims=True)


@pytest.mark.parametrize("seed, coupling", [(0, 1e-9), (1, 1e-12), (2, 1e-15), (3, 1e-14)])
def test_nearly_completely_decomposable_chains_match_sympy(seed, coupling):
    rng = np.random.default_rng(seed)
    P = _blocks(rng, [2, 3] if seed % 2 else [3, 2, 2], coupling)
    ex = sympy_stationary(P)
    assert stationary_exact(P) == ex
    assert_close(stationary(P), ex)


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(2, 5),
    seed=st.integers(0, 10**6),
    exponent=st.integers(3, 40),
)
def test_stationary_law_is_exact_on_random_nearly_reducible_chains(k, seed, exponent):
    rng = np.random.default_rng(seed)
    split = int(rng.integers(1, k))
    P = _blocks(rng, [split, k - split], 10.0**-exponent)
    ex = sympy_stationary(P)
    assert stationary_exact(P) == ex
    assert_close(stationary(P), ex)


def test_transient_states_get_zero_and_two_closed_classes_are_refused():
    P = np.array([[0.5, 0.25, 0.25], [0.0, 0.9, 0.1], [0.0, 0.2, 0.8]])  # state 0 is transient
    ex = stationary_exact(P)
    assert ex[0] == 0 and ex[1] + ex[2] == 1
    f01, f12 = Fraction(0.1), Fraction(0.2)
    assert ex[1] == f12 / (f01 + f12)
    with pytest.raises(ValueError, match="2 closed classes"):
        stationary(np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.5, 0.5]]))
    with pytest.raises(ValueError, match="closed classes"):
        MarkovChain(np.array([[1.0, 0.0], [0.0, 1.0]]))


def brute_influence_exact(P, q, T, i, quilt):
    """max over x ≠ x′, x_Q of log P(x_Q | X_i = x)/P(x_Q | X_i = x′), summing all k^T sequences in exact
    rationals (P and q read as the exact binary fractions of their floats)."""
    import itertools

    k = P.shape[0]
    Pf = [[Fraction(float(v)) for v in row] for row in P]
    qf = [Fraction(float(v)) for v in q]
    joint: dict = {}
    marg = [Fraction(0)] * k
    for seq in itertools.product(range(k), repeat=T):
        pr = qf[seq[0]]
        for t in range(1, T):
            pr *= Pf[seq[t - 1]][seq[t]]
        key = (seq[i], tuple(seq[j] for j in quilt))
        joint[key] = joint.get(key, Fraction(0)) + pr
        marg[seq[i]] += pr
    best = -math.inf
    for x in range(k):
        for y in range(k):
            if x == y or not marg[x] or not marg[y]:
                continue
            for xq in {key[1] for key in joint}:
                num, den = joint.get((x, xq), 0) / marg[x], joint.get((y, xq), 0) / marg[y]
                if num and not den:
                    return math.inf
                if num:
                    best = max(best, math.log(num / den))
    return best


@pytest.mark.parametrize("coupling", [1e-6, 1e-12])
def test_max_influence_of_a_nearly_reducible_chain_is_never_below_the_exact_value(coupling):
    """A stationary chain whose diagonal is exactly 1 − coupling (so its float matrix is stochastic up to
    rounding): the exact-rational enumeration of every sequence against the closed form, rounded up."""
    c = coupling
    P = np.array([[1 - c, c], [2 * c, 1 - 2 * c]])
    ch = MarkovChain(P)
    T = 6
    for i, a, b in [(3, 1, 1), (3, 2, 2), (2, None, 3), (4, 2, None)]:
        quilt = ([i - a] if a is not None else []) + ([i + b] if b is not None else [])
        ref = brute_influence_exact(P, ch.initial, T, i, quilt)
        got = max_influence(ch, T, i, a, b)
        assert got >= ref
        assert got == pytest.approx(ref, rel=1e-8, abs=2e-9)


def test_powers_that_underflow_are_refused():
    """A 3-cycle with transitions of 1e-200: P²(0, 2) = 1e-400 underflows to 0 although it is positive."""
    t = 1e-200
    P = np.array([[1 - t, t, 0.0], [0.0, 1 - t, t], [t, 0.0, 1 - t]])
    ch = MarkovChain(P)
    assert_close(ch.initial, [Fraction(1, 3)] * 3)
    with pytest.raises(ValueError, match="float64's range"):
        calibrate_mqm(ch, 10, 1.0)


def test_rounding_slack_is_far_below_the_fixed_slack_for_moderate_chains_and_grows_with_length():
    assert rounding_slack(10_000, 2) < 1e-10
    assert rounding_slack(10**6, 50) > rounding_slack(10**4, 50)
    assert rounding_slack(10**17, 10) == math.inf
