"""Propagation F1-F3, F14 (Wei et al. 2024 eqs. (4), (9)-(11), (16)) against dense references,
and the §9 sanity check of Lemma 2 (empirical psi <= Psi)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from gcon_testlib import er_edges, path_edges, star_edges, unit_rows

from dpspec.accounting.gcon import GconError, propagation_sensitivity
from dpspec.families.gcon.graph import Graph
from dpspec.families.gcon.propagation import (
    dense_propagation_matrix,
    dense_transition_matrix,
    enforce_unit_ball,
    ppr_truncation_steps,
    private_inference_features,
    propagate,
    propagate_features,
    transition_matrix,
)


def _graphs(rng):
    return {
        "er": Graph.from_edges(30, er_edges(30, 0.15, rng)),
        "star": Graph.from_edges(12, star_edges(12)),
        "path": Graph.from_edges(15, path_edges(15)),
        "empty": Graph.from_edges(6, np.zeros((0, 2), dtype=int)),
    }


def test_transition_matrix_row_stochastic(rng):
    for name, g in _graphs(rng).items():
        P = transition_matrix(g)
        assert np.allclose(np.asarray(P.sum(axis=1)).ravel(), 1.0, atol=1e-15), name
        assert np.allclose(P.toarray(), dense_transition_matrix(g.adjacency.toarray()), atol=1e-15)
        assert np.all(P.diagonal() > 0)  # self-loops added by the mechanism


@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("m", [0, 1, 2, 5, 10, math.inf])
def test_sparse_matches_dense(rng, alpha, m):
    for name, g in _graphs(rng).items():
        X = unit_rows(g.num_nodes, 4, rng)
        P = transition_matrix(g)
        Pd = dense_transition_matrix(g.adjacency.toarray())
        ref = dense_propagation_matrix(Pd, alpha, m) @ X
        got = propagate(P, X, alpha, m)
        assert np.allclose(got, ref, atol=1e-11), (name, alpha, m)
        if m == math.inf:
            got2 = propagate(P, X, alpha, m, ppr_method="solve")
            assert np.allclose(got2, ref, atol=1e-12)


def test_recursion_equals_sum_form(rng):
    g = _graphs(rng)["er"]
    Pd = dense_transition_matrix(g.adjacency.toarray())
    for m in range(1, 6):
        R_prev = dense_propagation_matrix(Pd, 0.3, m - 1)
        R = dense_propagation_matrix(Pd, 0.3, m)
        assert np.allclose(R, 0.7 * Pd @ R_prev + 0.3 * np.eye(Pd.shape[0]), atol=1e-13)  # eq. (4)
        assert np.allclose(R.sum(axis=1), 1.0)  # Lemma 1: rows sum to 1
        assert np.all(R >= 0)


def test_ppr_truncation_bound(rng):
    g = _graphs(rng)["er"]
    X = unit_rows(g.num_nodes, 3, rng)
    P = transition_matrix(g)
    exact = propagate(P, X, 0.2, math.inf, ppr_method="solve")
    for tol in (1e-2, 1e-6):
        k = ppr_truncation_steps(0.2, tol)
        approx = propagate(P, X, 0.2, k)
        assert np.max(np.linalg.norm(approx - exact, axis=1)) <= 2 * 0.8**k <= tol
        # the truncated PPR *is* APPR_k, whose Psi is below the certified PPR value
        assert propagation_sensitivity(0.2, [k]) <= propagation_sensitivity(0.2, ["inf"])


def test_concatenation_and_unit_ball(rng):
    g = _graphs(rng)["star"]
    X = unit_rows(g.num_nodes, 5, rng)
    Z = propagate_features(g, X, 0.5, [0, 1, "inf"])
    P = transition_matrix(g)
    ref = np.hstack([X, propagate(P, X, 0.5, 1), propagate(P, X, 0.5, math.inf)]) / 3
    assert np.allclose(Z, ref, atol=1e-12)
    assert np.all(np.linalg.norm(Z, axis=1) <= 1.0)
    W = np.array([[1.0 + 1e-15, 0.0], [0.6, 0.8]])
    assert np.all(np.linalg.norm(enforce_unit_ball(W), axis=1) <= 1.0)
    with pytest.raises(GconError) as info:
        enforce_unit_ball(np.array([[2.0, 0.0]]))
    assert info.value.rule == "DPS715"


def test_private_inference_one_hop(rng):
    g = _graphs(rng)["er"]
    X = unit_rows(g.num_nodes, 3, rng)
    Pd = dense_transition_matrix(g.adjacency.toarray())
    Rh = 0.7 * Pd + 0.3 * np.eye(g.num_nodes)  # eq. (16), alpha_I = 0.3
    Z = private_inference_features(g, X, 0.3, [0, 2])
    assert np.allclose(Z, np.hstack([X, Rh @ X]) / 2, atol=1e-13)
    # row v depends only on v's own edges: removing an edge (a, b) changes rows a and b only
    e = g.edge_list()
    a, b = e[0]
    g2 = Graph.from_edges(g.num_nodes, e[1:])
    Z2 = private_inference_features(g2, X, 0.3, [0, 2])
    changed = np.flatnonzero(np.linalg.norm(Z - Z2, axis=1) > 0)
    assert set(changed.tolist()) <= {a, b}


def _psi(Z, Z2):
    return float(np.sum(np.linalg.norm(Z - Z2, axis=1)))


def test_lemma2_sensitivity_never_exceeded(rng):
    """Digest §9: ER, star and path graphs, n <= 40, random unit features, alpha in
    {0.1, 0.2, 0.5, 0.8}, m in {1, 2, 5, 10, inf}; remove edges one at a time."""
    worst = 0.0
    graphs = [Graph.from_edges(25, er_edges(25, 0.2, rng)), Graph.from_edges(20, star_edges(20)),
              Graph.from_edges(20, path_edges(20)), Graph.from_edges(40, er_edges(40, 0.08, rng))]
    for g in graphs:
        X = unit_rows(g.num_nodes, 6, rng)
        A = g.adjacency.toarray()
        edges = g.edge_list()
        pick = rng.choice(len(edges), size=min(6, len(edges)), replace=False)
        for alpha in (0.1, 0.2, 0.5, 0.8):
            for m in (1, 2, 5, 10, math.inf):
                R = dense_propagation_matrix(dense_transition_matrix(A), alpha, m)
                Z = R @ X
                bound = propagation_sensitivity(alpha, [m])
                for k in pick:
                    i, j = edges[k]
                    A2 = A.copy()
                    A2[i, j] = A2[j, i] = 0.0
                    Z2 = dense_propagation_matrix(dense_transition_matrix(A2), alpha, m) @ X
                    ratio = _psi(Z, Z2) / bound
                    worst = max(worst, ratio)
                    assert ratio <= 1.0 + 1e-12, (alpha, m, ratio)
    assert 0.2 < worst <= 1.0


def test_lemma2_tight_for_m1():
    """Two degree-1 nodes with opposite unit features: psi(Z_1) = Psi(Z_1) = 2(1 - alpha)."""
    X = np.array([[1.0, 0.0], [-1.0, 0.0]])
    for alpha in (0.2, 0.5, 0.9):
        Z = propagate(transition_matrix(Graph.from_edges(2, [[0, 1]])), X, alpha, 1)
        Z2 = propagate(transition_matrix(Graph.from_edges(2, np.zeros((0, 2), dtype=int))), X, alpha, 1)
        assert _psi(Z, Z2) == pytest.approx(propagation_sensitivity(alpha, [1]), rel=1e-12)


def test_sparse_input_adjacency(rng):
    g = _graphs(rng)["er"]
    P1 = transition_matrix(g)
    P2 = transition_matrix(sp.csr_matrix(g.adjacency))
    assert np.allclose(P1.toarray(), P2.toarray())
