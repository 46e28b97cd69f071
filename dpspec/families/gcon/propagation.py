"""APPR / PPR feature propagation of GCON (Wei et al. 2024, Sec. IV-C2), sparse.

Formulas (paper equation numbers):

* F1, Alg. 1 line 4:  ``A^ = A + I``, ``D_ii = sum_k A^_ik``, ``A~ = D^-1 A^`` (row-stochastic, r = 0).
* F2, eq. (9):  ``R_m = alpha sum_{i<m} (1-alpha)^i A~^i + (1-alpha)^m A~^m`` (APPR, 0 < m < inf),
  ``R_inf = alpha (I - (1-alpha) A~)^-1`` (PPR, invertible by Lemma 3), ``R_0 = I``;
  recursive form eq. (4): ``R_m = (1-alpha) A~ R_{m-1} + alpha I``.
* F3, eqs. (10)-(11):  ``Z_m = R_m X`` and ``Z = (1/s) [Z_m1 || ... || Z_ms]``.
* F14, eq. (16): private inference uses only each node's own edges,
  ``R^_m = (1 - alpha_I) A~ + alpha_I I`` (``I`` for m = 0).

Nothing here materialises an n x n dense matrix: ``Z_m`` is computed with m sparse products
``Z <- (1-alpha) A~ Z + alpha X`` (exactly ``R_m X`` by eq. (4)).

PPR (m = inf) is computed by the same recursion truncated at ``k = ceil(log(tol/2)/log(1-alpha))``
steps, i.e. as ``R_k X``. Two facts make this sound and accurate:
(i) privacy: what is computed is the APPR feature ``Z_k``, whose sensitivity ``Psi(Z_k) =
2(1-alpha)/alpha [1 - (1-alpha)^k]`` is *below* the PPR value ``2(1-alpha)/alpha`` that the
calibration charges (Lemma 2 is monotone in m), so the certified Psi stays an upper bound;
(ii) accuracy: ``R_inf - R_k = (1-alpha)^k A~^k (R_inf - I)`` and rows of ``R_inf X`` and ``X``
have norm <= 1, so every row of ``Z_k`` is within ``2 (1-alpha)^k <= tol`` of ``Z_inf``.
``ppr_method="solve"`` instead solves ``(I - (1-alpha) A~) Z = alpha X`` with a sparse LU
(exact up to rounding; for small graphs and tests).

Floating point: Lemma 2 is a statement in exact arithmetic. Computed rows differ from exact ones by
O(m u) relative (u = 2^-53); the theorem's ``||z_i|| <= 1`` is enforced on the output by
``enforce_unit_ball`` (rows above 1 by rounding are scaled back, an edge-free, per-row operation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from dpspec.accounting.gcon import GconError, normalise_steps
from dpspec.families.gcon.graph import Graph

__all__ = [
    "transition_matrix",
    "propagate",
    "propagate_features",
    "private_inference_features",
    "public_inference_features",
    "ppr_truncation_steps",
    "enforce_unit_ball",
    "dense_transition_matrix",
    "dense_propagation_matrix",
]


def _adjacency(graph: Graph | sp.spmatrix) -> sp.csr_matrix:
    return graph.adjacency if isinstance(graph, Graph) else Graph.from_adjacency(graph).adjacency


def transition_matrix(graph: Graph | sp.spmatrix) -> sp.csr_matrix:
    """``A~ = D^-1 (A + I)`` -- F1 (Sec. IV-C2, Alg. 1 line 4, r = 0). Row-stochastic CSR."""
    a = _adjacency(graph)
    n = a.shape[0]
    ahat = (a + sp.identity(n, format="csr", dtype=np.float64)).tocsr()
    deg = np.asarray(ahat.sum(axis=1)).ravel()
    return (sp.diags(1.0 / deg) @ ahat).tocsr()


def ppr_truncation_steps(alpha: float, tol: float = 1e-12) -> int:
    """Steps k of the truncated PPR recursion with row error ``2 (1-alpha)^k <= tol`` (eq. (9))."""
    if alpha >= 1.0:
        return 0
    return max(1, math.ceil(math.log(tol / 2.0) / math.log1p(-alpha)))


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not (0.0 < a <= 1.0):
        raise GconError("DPS705", f"restart probability alpha = {alpha!r} is outside (0, 1]", "choose alpha in (0, 1]")
    return a


def propagate(
    P: sp.csr_matrix, X: np.ndarray, alpha: float, m: float, *, ppr_method: str = "iterate", ppr_tol: float = 1e-12
) -> np.ndarray:
    """``Z_m = R_m X`` -- F2/F3, eqs. (4), (9), (10). ``P`` is ``A~`` from ``transition_matrix``.

    ``m`` is a non-negative integer or ``math.inf`` (PPR). APPR uses the recursion of eq. (4);
    PPR uses the truncated recursion (see module docstring) or a sparse LU solve.
    """
    a = _check_alpha(alpha)
    X = np.asarray(X, dtype=np.float64)
    if m == 0 or a == 1.0:
        return X.copy()
    q = 1.0 - a
    if m == math.inf:
        if ppr_method == "solve":
            n = P.shape[0]
            M = (sp.identity(n, format="csc") - q * P).tocsc()
            lu = spla.splu(M)
            return a * lu.solve(X)
        if ppr_method != "iterate":
            raise ValueError(f"unknown ppr_method {ppr_method!r}")
        k = ppr_truncation_steps(a, ppr_tol)
    else:
        k = int(m)
    Z = X.copy()
    aX = a * X
    for _ in range(k):
        Z = q * (P @ Z) + aX
    return Z


def enforce_unit_ball(Z: np.ndarray) -> np.ndarray:
    """Scale back rows whose float norm exceeds 1 (rounding only; the exact rows have norm <= 1).

    The proofs of Lemmas 7-9 use ``||z_i||_2 <= 1``. Rows are convex combinations of unit vectors,
    so any excess is rounding (O(m u)); such rows are divided by their norm times (1 + 2^-50).
    """
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    bad = norms > 1.0
    if np.any(bad):
        if norms.max() > 1.0 + 1e-9:
            raise GconError(
                "DPS715",
                f"a propagated row has norm {norms.max():.12g} > 1",
                "input feature rows must have unit L2 norm (normalise after the encoder)",
            )
        Z = Z.copy()
        Z[bad] /= (norms[bad] * (1.0 + 2.0**-50))[:, None]
    return Z


def propagate_features(
    graph: Graph | sp.spmatrix,
    X: np.ndarray,
    alpha: float,
    steps: Any,
    *,
    ppr_method: str = "iterate",
    ppr_tol: float = 1e-12,
    P: sp.csr_matrix | None = None,
) -> np.ndarray:
    """Training features ``Z = (1/s) [R_m1 X || ... || R_ms X]`` -- F3, eq. (11).

    The 1/s weight is part of Lemma 2's Psi(Z) = (1/s) sum_i Psi(Z_mi); it also keeps
    ``||z_i|| <= 1`` (each block has row norm <= 1, so the concatenation has norm <= 1/sqrt(s)).
    """
    ms = normalise_steps(steps)
    if P is None:
        P = transition_matrix(graph)
    blocks = [propagate(P, X, alpha, m, ppr_method=ppr_method, ppr_tol=ppr_tol) for m in ms]
    Z = np.hstack(blocks) / len(ms)
    return enforce_unit_ball(Z)


def private_inference_features(
    graph: Graph | sp.spmatrix, X: np.ndarray, inference_restart: float, steps: Any, *, P: sp.csr_matrix | None = None
) -> np.ndarray:
    """Private-graph inference features -- F14, eq. (16), Alg. 4.

    Block i is ``X`` if ``m_i = 0`` and ``((1 - alpha_I) A~ + alpha_I I) X`` otherwise, so row v
    depends only on v's own edges, degree and the public features of v's neighbours. Answers are
    private only if **each node receives only its own prediction** (DPS723); publishing all rows
    together reveals every node's adjacency. The blocks are scaled by 1/s like training (eq. (16)
    omits the factor; the argmax is unchanged).
    """
    ms = normalise_steps(steps)
    aI = float(inference_restart)
    if not (0.0 <= aI <= 1.0):
        raise GconError(
            "DPS705",
            f"inference restart alpha_I = {inference_restart!r} outside [0, 1]",
            "the paper tunes alpha_I in {alpha} U {0.1, 0.9}",
        )
    if P is None:
        P = transition_matrix(graph)
    X = np.asarray(X, dtype=np.float64)
    one_hop = (1.0 - aI) * (P @ X) + aI * X
    blocks = [X if m == 0 else one_hop for m in ms]
    return enforce_unit_ball(np.hstack(blocks) / len(ms))


def public_inference_features(
    graph: Graph | sp.spmatrix, X: np.ndarray, alpha: float, steps: Any, **kw: Any
) -> np.ndarray:
    """Public-graph inference (Alg. 4, else-branch): Z of eq. (11) recomputed on the target graph,
    whose edges are declared public (they are not protected by the certificate)."""
    return propagate_features(graph, X, alpha, steps, **kw)


# ------------------------------------------------------------------ dense references (tests)


def dense_transition_matrix(adjacency: np.ndarray) -> np.ndarray:
    """Dense ``D^-1 (A + I)`` for small graphs (reference for tests and benchmarks)."""
    A = np.asarray(adjacency, dtype=np.float64)
    Ah = A + np.eye(A.shape[0])
    return Ah / Ah.sum(axis=1, keepdims=True)


def dense_propagation_matrix(P: np.ndarray, alpha: float, m: float) -> np.ndarray:
    """Dense ``R_m`` straight from eq. (9) (sum form, or the inverse for m = inf)."""
    n = P.shape[0]
    q = 1.0 - alpha
    if m == math.inf:
        return alpha * np.linalg.inv(np.eye(n) - q * P)
    m = int(m)
    if m == 0:
        return np.eye(n)
    R = np.zeros((n, n))
    Pk = np.eye(n)
    for i in range(m):
        R += alpha * q**i * Pk
        Pk = Pk @ P
    return R + q**m * Pk
