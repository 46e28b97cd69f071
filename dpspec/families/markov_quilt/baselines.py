"""Baselines of Song, Wang & Chaudhuri 2017's Markov-chain comparison (§6, synthetic data) — for the
benchmark (``benchmarks/pufferfish_evaluation.py``), **not certified mechanisms**: dpspec issues no
certificate from them.

**GK16** (Ghosh & Kleinberg 2016, "Inferential privacy guarantees for differentially private
mechanisms", arXiv:1603.01508; ITCS 2017), as Song et al. apply it to a Markov chain. An ε_DP-DP
mechanism is ν-inferentially private for a prior whose *influence matrix* Γ (Γ_ij: how much X_j moves
the conditional law of X_i given all other variables) has spectral norm ‖Γ‖₂ < 1, with

    ν = 2·ε_DP·max_i Σ_j Φ_ij,   Φ = (I − Γ)^{-1}.

So the baseline calibrates the Laplace mechanism of the statistic (sensitivity L per record) to
ε_DP = ν / (2 max_i Σ_j Φ_ij), i.e. the Laplace scale L/ε_DP; when ‖Γ‖₂ ≥ 1 it is *not applicable*
(no guarantee, no noise level). On a chain X_i depends on the rest only through X_{i−1}, X_{i+1}, so Γ
is tridiagonal; Song et al. give every off-diagonal entry the same value

    γ = ½ · max log [ P(X_i = x | X_{i−1} = a, X_{i+1} = b) / P(X_i = x | X_{i−1} = a, X_{i+1} = b′) ]

(over x, a, b, b′ and the inverse ratios; P(X_i = x | a, b) ∝ P(a, x)·P(x, b)). This follows the
authors' released code for the paper (github.com/shs037/pufferfish: ``inferentialPrivacy_cal_gamma.m``,
the binary chain's four ratios; ``inferentialPrivacy2.m``, option "paper exact", the one their
``run_synthetic.m`` uses), generalised here to k states: the right neighbour's influence γ_r (changing
b) on the super-diagonal and the left one's γ_l (changing a) on the sub-diagonal (equal for reversible
chains, hence for every 2-state chain). The end nodes have one neighbour and another conditional law;
Song et al. use γ there too (``ends="song"``); ``ends="exact"`` computes their rows from the chain
(P(X_0 = x | X_1 = b) ∝ q(x)P(x, b); P(X_{T−1} = x | X_{T−2} = a) = P(a, x)).

**MQMApprox as Song et al. state it** (§4.4; ``k_findBest_2dir.m``): for a chain with absolute
spectral gap g = 1 − |λ₂| and minimum stationary probability π_min, Δ_t = e^{−g t}/π_min and the
quilt {X_{i−a}, X_{i+b}} gets the influence bound 2·log((1 + Δ_a)/(1 − Δ_a)) + log((1 + Δ_b)/(1 − Δ_b))
(the left side counted twice: their bound covers non-stationary starts). dpspec's certified variant is
:func:`~dpspec.families.markov_quilt.mqm.calibrate_mqm_reversible` (stationary reversible class, λ^t
instead of e^{−g t}, the left side once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .mqm import MarkovChain, MqmCalibration, calibrate_by_bound

__all__ = ["Gk16Result", "gk16_gamma", "gk16_scale", "song_mqm_approx", "absolute_spectral_gap"]


def _conditional(P: np.ndarray, a: int, b: int) -> np.ndarray | None:
    """P(X_i = · | X_{i−1} = a, X_{i+1} = b) ∝ P(a, ·) P(·, b); None if the pair (a, b) is impossible."""
    w = P[a] * P[:, b]
    s = w.sum()
    return None if s == 0 else w / s


def _half_max_log_ratio(laws: list[np.ndarray]) -> float:
    """½ max over pairs of laws and outcomes x of |log l(x)/l′(x)| (+∞ if one is 0 where the other is not)."""
    best = 0.0
    for u in laws:
        for v in laws:
            if np.any((u > 0) != (v > 0)):
                return math.inf
            m = u > 0
            best = max(best, float(np.max(np.abs(np.log(u[m]) - np.log(v[m])))))
    return best / 2


def gk16_gamma(P: np.ndarray) -> tuple[float, float]:
    """(γ_l, γ_r): the influence of the left neighbour (changing a) and of the right one (changing b) on an
    interior node's conditional law, each ½ max |log ratio| (module docstring)."""
    P = np.asarray(P, float)
    k = P.shape[0]
    right = max(
        _half_max_log_ratio([c for b in range(k) if (c := _conditional(P, a, b)) is not None]) for a in range(k)
    )
    left = max(_half_max_log_ratio([c for a in range(k) if (c := _conditional(P, a, b)) is not None]) for b in range(k))
    return left, right


def _end_gammas(chain: MarkovChain) -> tuple[float, float]:
    """(Γ_{0,1}, Γ_{T−1,T−2}): the influence of X_1 on X_0 and of X_{T−2} on X_{T−1}."""
    P, q = chain.transition, chain.start
    first = []
    for b in range(chain.k):
        w = q * P[:, b]
        if w.sum() > 0:
            first.append(w / w.sum())
    last = [P[a] for a in range(chain.k) if q[a] > 0]  # stationary start: p_{T−2} = q
    return _half_max_log_ratio(first), _half_max_log_ratio(last)


@dataclass(frozen=True)
class Gk16Result:
    """The GK16 baseline for a chain of T steps: ``applicable`` iff ‖Γ‖₂ < 1; then the DP level ε_DP and
    the Laplace scale L/ε_DP (``math.inf`` otherwise)."""

    gamma_left: float
    gamma_right: float
    spectral_norm: float
    max_row_sum: float
    epsilon_dp: float
    scale: float

    @property
    def applicable(self) -> bool:
        return self.spectral_norm < 1


def _spectral_norm(sub: np.ndarray, sup: np.ndarray) -> float:
    """‖Γ‖₂ of a tridiagonal Γ with zero diagonal (sub[i] = Γ_{i+1,i}, sup[i] = Γ_{i,i+1}): the square root
    of the largest eigenvalue of ΓᵀΓ, which is pentadiagonal with (ΓᵀΓ)_jj = sup_{j−1}² + sub_j²,
    (ΓᵀΓ)_{j,j+1} = 0, (ΓᵀΓ)_{j,j+2} = sub_j·sup_{j+1}."""
    from scipy.linalg import eigvals_banded

    T = sub.size + 1
    diag = np.zeros(T)
    diag[1:] += sup**2
    diag[:-1] += sub**2
    band = np.zeros((3, T))  # upper form: row 2 the diagonal, row 1 the first, row 0 the second super-diagonal
    band[2] = diag
    band[0, 2:] = sub[:-1] * sup[1:]
    top = eigvals_banded(band, lower=False, select="i", select_range=(T - 1, T - 1))
    return float(math.sqrt(max(top[0], 0.0)))


def gk16_scale(
    chain: MarkovChain | np.ndarray,
    T: int,
    epsilon: float,
    *,
    lipschitz: float | None = None,
    ends: str = "song",
) -> Gk16Result:
    """The GK16 baseline's Laplace scale for a statistic of the chain's T steps (L = 1/T by default: the
    frequency of a state), at Pufferfish level ``epsilon`` (module docstring). Not certified."""
    chain = chain if isinstance(chain, MarkovChain) else MarkovChain(np.asarray(chain, float))
    if ends not in ("song", "exact"):
        raise ValueError("ends is 'song' (γ everywhere, as Song et al.) or 'exact'")
    L = 1.0 / T if lipschitz is None else float(lipschitz)
    gl, gr = gk16_gamma(chain.transition)
    sub = np.full(T - 1, gl)  # Γ_{i+1,i}: the left neighbour's influence on node i + 1
    sup = np.full(T - 1, gr)  # Γ_{i,i+1}: the right neighbour's influence on node i
    if ends == "exact":
        g0, g_last = _end_gammas(chain)
        sup[0], sub[-1] = g0, g_last
    if not (np.all(np.isfinite(sub)) and np.all(np.isfinite(sup))):
        return Gk16Result(gl, gr, math.inf, math.inf, 0.0, math.inf)
    norm = _spectral_norm(sub, sup)
    if norm >= 1:
        return Gk16Result(gl, gr, norm, math.inf, 0.0, math.inf)
    from scipy.linalg import solve_banded

    # row sums of Φ = (I − Γ)^{-1} = Φ·1: solve (I − Γ) x = 1 (Φ ≥ 0 by the Neumann series, ‖Γ‖₂ < 1)
    ab = np.zeros((3, T))
    ab[0, 1:] = -sup
    ab[1] = 1.0
    ab[2, :-1] = -sub
    x = solve_banded((1, 1), ab, np.ones(T))
    row = float(np.max(x))
    eps_dp = float(epsilon) / (2 * row)
    return Gk16Result(gl, gr, norm, row, eps_dp, L / eps_dp)


def absolute_spectral_gap(P: np.ndarray) -> float:
    """g = 1 − |λ₂|, λ₂ the eigenvalue of P of second-largest modulus."""
    lam = np.sort(np.abs(np.linalg.eigvals(np.asarray(P, float))))
    return float(1 - lam[-2])


def song_mqm_approx(
    pi_min: float, gap: float, T: int, epsilon: float, *, lipschitz: float | None = None
) -> MqmCalibration:
    """MQMApprox with Song et al.'s influence bound 2·h(a) + h(b), h(t) = log((1 + Δ_t)/(1 − Δ_t)),
    Δ_t = e^{−g t}/π_min (module docstring). A benchmark baseline (dpspec certifies its own class bound)."""

    def h(t: int) -> float:
        d = math.exp(-gap * t) / pi_min
        return math.inf if d >= 1 else math.log1p(d) - math.log1p(-d)

    def bound(a, b):
        return (2 * h(a) if a is not None else 0.0) + (h(b) if b is not None else 0.0)

    return calibrate_by_bound(
        bound, T, epsilon, lipschitz=lipschitz, method=f"Song et al. MQMApprox (π_min = {pi_min:g}, g = {gap:g})"
    )
