"""Aggregate releases under product priors: the ∞-Wasserstein sensitivity of a dataset's aggregate,
bounded through the conditional laws of one record's contribution.

Setting (Kifer & Machanavajjhala 2014, §3 and §7 "data evolution scenarios"; Song, Wang & Chaudhuri
2017, §3). A dataset X = (x_1, …, x_n); a prior θ under which the records are independent (a product
prior: the empirical world θ_D of n i.i.d. records, or ``bernoulli``/``categorical`` families); the
secret concerns one record i (``S = s(x_i)``: an attribute value or a predicate of x_i). A
*decomposable* query f(X) = c · Σ_j g(x_j) (``mean``/``histogram``: c = 1/n; ``sum``: c = 1).

**Lemma A (aggregate W∞).** For any norm ‖·‖ on the output space and any secrets s, s′ with positive
prior mass under θ,

    W∞(P_θ(f(X) | S = s), P_θ(f(X) | S = s′)) ≤ c · W∞(P_θ(g(x_i) | S = s), P_θ(g(x_i) | S = s′)).

*Proof.* Under θ, R = Σ_{j≠i} g(x_j) is a function of records independent of x_i, and S is a
function of x_i, so R is independent of (x_i, S) and has the same law given S = s and S = s′.
Let π be a coupling of g(x_i)|s and g(x_i)|s′ with ‖a − a′‖ ≤ w := the right-hand W∞ / c π-a.s.
(for the finite laws used here the couplings form a compact polytope, so a minimiser exists: a
bottleneck matching; for general laws see Champion, De Pascale & Juutinen 2008, SIAM J. Math.
Anal.). Draw (a, a′) ~ π and R independently; (c(R + a), c(R + a′))
is a coupling of the two conditional laws of f(X), and ‖c(R + a) − c(R + a′)‖ = c‖a − a′‖ ≤ c·w
almost surely. ∎

So the noise of an aggregate scales like (a record's shift)/n, not like the range. The bound holds
for every θ in a family whose per-record conditional laws P_θ(x_i | S) are the same for all its
members (the ``bernoulli``/``categorical`` families vary only the secret's marginal), so the sup
over the family is the same number: p enters only through which pairs have positive mass.

**Lemma B (membership, sum).** With the secret "record i is in the dataset" (``member(record)``)
and f = Σ_j g(x_j) over the records present, f|in = R + g(x_i) and f|out = R with R independent of
the membership of i; the identity coupling of R gives W∞ ≤ ess sup ‖g(x_i)‖. (For a mean the
normaliser changes with membership; only ``sum`` is supported.)

The per-record W∞ is computed in the weighted ℓ1 norm ‖v‖_w = Σ_k w_k |v_k| (w_k = 1 / range_k), the
norm the Laplace noise of the Wasserstein mechanism is calibrated in: exactly (bottleneck matching,
:func:`dpspec.pufferfish.wasserstein.w_inf_exact` with the cityblock metric on scaled coordinates)
when the two finite laws are small enough, otherwise by the largest cross distance
max_{x ∈ A, y ∈ B} ‖x − y‖_w, which bounds every coupling's sup. Both are rounded up by a
floating-point error bound.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["aggregate_factor", "weighted_l1_w_inf", "max_cross_distance", "max_weighted_norm", "DECOMPOSABLE"]

#: queries f(X) = c · Σ_j g(x_j): the function name → how c depends on n
DECOMPOSABLE = {"mean": "1/n", "histogram": "1/n", "sum": "1"}

#: exact bottleneck matching up to this many (|A| × |B|) cells; a bound beyond
EXACT_CELLS = 4_000_000

_U = 2.0**-53


def aggregate_factor(function: str, n: int) -> float:
    """c of f(X) = c Σ_j g(x_j) for a dataset of ``n`` records (Lemma A)."""
    if function not in DECOMPOSABLE:
        raise ValueError(f"`{function}` is not a sum of per-record contributions")
    if int(n) < 1:
        raise ValueError("an aggregate needs at least one record")
    return 1.0 / int(n) if DECOMPOSABLE[function] == "1/n" else 1.0


def _round_up(x: float, d: int) -> float:
    """x plus a bound on the floating-point error of a d-term sum of non-negative terms
    (Higham Thm 3.1: relative γ_d), then one ulp up."""
    gamma = d * _U / (1.0 - d * _U)
    return math.nextafter(x * (1.0 + 2.0 * gamma) + 1e-300, math.inf)


def max_cross_distance(A: np.ndarray, B: np.ndarray, w: np.ndarray) -> float:
    """max_{x ∈ A, y ∈ B} Σ_k w_k |x_k − y_k|, exactly, through the 2^d sign vectors σ:
    Σ_k w_k |x_k − y_k| = max_σ σ·(w∘x) − σ·(w∘y); beyond d = 14 the box bound
    Σ_k w_k (max(A_k ∪ B_k) − min(A_k ∪ B_k)) (an upper bound)."""
    A = np.asarray(A, float) * w
    B = np.asarray(B, float) * w
    d = A.shape[1]
    if d > 14:
        hi = np.maximum(A.max(axis=0), B.max(axis=0))
        lo = np.minimum(A.min(axis=0), B.min(axis=0))
        return _round_up(float(np.sum(hi - lo)), d)
    best = 0.0
    for signs in itertools.product((1.0, -1.0), repeat=d - 1):
        s = np.array((1.0, *signs))
        pa, pb = A @ s, B @ s
        best = max(best, float(pa.max() - pb.min()), float(pb.max() - pa.min()))
    return _round_up(best, d)


def max_weighted_norm(A: np.ndarray, w: np.ndarray) -> float:
    """max_{x ∈ A} Σ_k w_k |x_k| (Lemma B), rounded up."""
    A = np.abs(np.asarray(A, float)) * w
    return _round_up(float(np.max(A.sum(axis=1))), A.shape[1])


def weighted_l1_w_inf(
    A: np.ndarray, B: np.ndarray, w: np.ndarray, *, exact_cells: int = EXACT_CELLS
) -> tuple[float, str]:
    """An upper bound on the weighted-ℓ1 W∞ between the uniform laws on the rows of A and B, and how it
    was obtained: ``"exact"`` (bottleneck matching) or ``"cross_distance"`` (the largest cross distance,
    when |A|·|B| exceeds ``exact_cells``)."""
    from .wasserstein import w_inf_exact

    A = np.asarray(A, float)
    B = np.asarray(B, float)
    w = np.asarray(w, float)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1] or A.shape[1] != w.size:
        raise ValueError("A and B must be (n, d) arrays with one weight per column")
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B)) and np.all(np.isfinite(w)) and np.all(w >= 0)):
        raise ValueError("records and weights must be finite (weights non-negative)")
    if A.shape[0] * B.shape[0] <= exact_cells:
        val = w_inf_exact(A * w, B * w, metric="cityblock")
        # cdist's sum and the scaling each err by at most γ_d relatively: round up
        return _round_up(float(val), A.shape[1] + 1), "exact"
    return max_cross_distance(A, B, w), "cross_distance"
