"""The benchmark baselines of Song, Wang & Chaudhuri 2017's Markov-chain comparison: GK16 (Ghosh &
Kleinberg 2016) and Song et al.'s MQMApprox bound — against the paper's closed forms for a binary chain,
dense linear algebra on short chains, and the exact MQM."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpspec.families.markov_quilt import MarkovChain, calibrate_mqm, max_influence
from dpspec.families.markov_quilt.baselines import (
    absolute_spectral_gap,
    gk16_gamma,
    gk16_scale,
    song_mqm_approx,
)


def binary(p: float, q: float) -> np.ndarray:
    """Song et al.'s synthetic chain: P(0 → 1) = q, P(1 → 1) = p."""
    return np.array([[1 - q, q], [1 - p, p]])


def song_gamma_closed_form(p: float, q: float) -> float:
    """γ for the binary chain from the four ratios written out by hand (P(X_i = 1 | a, b) for a, b ∈ {0, 1},
    changing b), as in the paper's released code; ½ log of the largest ratio or inverse ratio."""
    f1 = (p * p + p * (1 - q)) / (p * p + q * (1 - p))
    f2 = (p / q) * ((1 - q) ** 2 + q * (1 - p)) / ((1 - p) * (1 - q) + p * (1 - p))
    f3 = (1 - p) / (1 - q) * ((1 - q) * q + q * p) / ((1 - p) * q + p * p)
    f4 = ((1 - q) ** 2 + p * (1 - q)) / ((1 - q) ** 2 + q * (1 - p))
    fs = [f1, f2, f3, f4]
    return math.log(max(fs + [1 / f for f in fs])) / 2


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.7, 0.9])
@pytest.mark.parametrize("q", [0.1, 0.4, 0.6, 0.9])
def test_gk16_gamma_matches_the_binary_closed_form(p, q):
    gl, gr = gk16_gamma(binary(p, q))
    ref = song_gamma_closed_form(p, q)
    assert gl == pytest.approx(ref, rel=1e-12) and gr == pytest.approx(ref, rel=1e-12)


def dense_gk16(P, T, eps, ends):
    """The same baseline with dense numpy: Γ built entry by entry, ‖Γ‖₂ by SVD, Φ by inversion."""
    k = P.shape[0]
    ch = MarkovChain(P)

    def half_log(laws):
        return max(float(np.max(np.abs(np.log(u) - np.log(v)))) for u in laws for v in laws) / 2

    def cond(a, b):
        w = P[a] * P[:, b]
        return w / w.sum()

    gr = max(half_log([cond(a, b) for b in range(k)]) for a in range(k))
    gl = max(half_log([cond(a, b) for a in range(k)]) for b in range(k))
    G = np.zeros((T, T))
    for i in range(T - 1):
        G[i, i + 1], G[i + 1, i] = gr, gl
    if ends == "exact":
        G[0, 1] = half_log([ch.initial * P[:, b] / (ch.initial * P[:, b]).sum() for b in range(k)])
        G[T - 1, T - 2] = half_log([P[a] for a in range(k)])
    norm = np.linalg.svd(G, compute_uv=False)[0]
    if norm >= 1:
        return norm, math.inf
    row = np.linalg.inv(np.eye(T) - G).sum(1).max()
    return norm, (1 / T) / (eps / (2 * row))


@pytest.mark.parametrize("ends", ["song", "exact"])
@pytest.mark.parametrize("seed", range(3))
def test_gk16_scale_agrees_with_dense_linear_algebra(seed, ends):
    rng = np.random.default_rng(seed)
    P = rng.uniform(0.6, 1.0, (3, 3))  # weak correlation: ‖Γ‖₂ < 1, a non-reversible chain (γ_l ≠ γ_r)
    P /= P.sum(1, keepdims=True)
    T = 25
    r = gk16_scale(P, T, 0.7, ends=ends)
    norm, scale = dense_gk16(P, T, 0.7, ends)
    assert r.spectral_norm == pytest.approx(norm, rel=1e-10)
    assert r.applicable and r.scale == pytest.approx(scale, rel=1e-10)


def test_gk16_on_a_long_symmetric_chain_tends_to_two_over_one_minus_two_gamma():
    """Γ tridiagonal Toeplitz with γ: the interior row sums of (I − Γ)^{-1} tend to 1/(1 − 2γ), so the
    frequency's Laplace scale tends to (1/T)·2/(ε(1 − 2γ))."""
    P = binary(0.6, 0.4)
    T, eps = 4000, 1.0
    r = gk16_scale(P, T, eps)
    g = gk16_gamma(P)[1]
    assert r.spectral_norm == pytest.approx(2 * g * math.cos(math.pi / (T + 1)), rel=1e-9)
    assert r.scale * T == pytest.approx(2 / (eps * (1 - 2 * g)), rel=1e-6)


def test_gk16_is_not_applicable_when_the_influence_norm_reaches_one():
    P = binary(0.8, 0.2)  # γ ≈ 1.07 > 1/2
    r = gk16_scale(P, 1000, 1.0)
    assert not r.applicable and r.spectral_norm > 1 and r.scale == math.inf
    P = np.array([[1.0, 0.0], [0.5, 0.5]])  # a zero transition: infinite influence
    assert not gk16_scale(P, 10, 1.0).applicable


def song_exact_influence(P, q, T, i, a, b):
    """Song et al.'s MQMExact influence of the quilt {X_{i−a}, X_{i+b}} on a binary chain, written from the
    paper's ratios: downstream r_b = P^b(0, v)/P^b(1, v), upstream u_a = P^a(u, 0)/P^a(u, 1) (max and min
    over v, u), c_i = P(X_i = 1)/P(X_i = 0); e = log max(max r·max u·c, 1/(min r·min u·c))."""
    Pa = np.linalg.matrix_power(P, a)
    Pb = np.linalg.matrix_power(P, b)
    pi = q @ np.linalg.matrix_power(P, i)
    down = Pb[0] / Pb[1]
    up = Pa[:, 0] / Pa[:, 1]
    c = pi[1] / pi[0]
    return math.log(max(down.max() * up.max() * c, 1 / (down.min() * up.min() * c)))


@pytest.mark.parametrize("seed", range(6))
def test_max_influence_agrees_with_song_et_al_s_binary_ratio_formula(seed):
    rng = np.random.default_rng(seed)
    p, q = rng.uniform(0.05, 0.95, 2)
    init = None if seed % 2 else rng.dirichlet([1, 1])
    ch = MarkovChain(binary(p, q), init)
    T = 40
    for i, a, b in [(20, 1, 1), (20, 3, 5), (7, 7, 2), (30, 12, 9)]:
        ref = song_exact_influence(ch.transition, ch.initial, T, i, a, b)
        got = max_influence(ch, T, i, a, b)
        assert got >= ref and got == pytest.approx(ref, rel=1e-8, abs=2e-9)


@pytest.mark.parametrize("p, q", [(0.6, 0.4), (0.8, 0.2), (0.9, 0.3), (0.3, 0.2)])
def test_song_mqm_approx_is_never_below_the_exact_mqm(p, q):
    """Song et al.'s MQMApprox bounds the influence of every chain with that gap and π_min, so its scale is
    at least the exact MQM's for the chain itself."""
    ch = MarkovChain(binary(p, q))
    T, eps = 300, 1.0
    approx = song_mqm_approx(float(ch.initial.min()), absolute_spectral_gap(ch.transition), T, eps)
    exact = calibrate_mqm(ch, T, eps)
    assert approx.scale >= exact.scale
