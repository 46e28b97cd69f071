"""Graph validation (rules DPS716, DPS717) and canonicalisation counts."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpspec.accounting.gcon import GconError
from dpspec.families.gcon.graph import Graph


def test_duplicates_and_reversed_pairs_merged():
    g = Graph.from_edges(4, [[0, 1], [1, 0], [0, 1], [2, 3]])
    assert g.num_edges == 2
    assert g.summary.merged_duplicates == 2
    assert g.summary.num_input_pairs == 4
    A = g.adjacency.toarray()
    assert np.array_equal(A, A.T) and set(np.unique(A)) <= {0.0, 1.0} and not A.diagonal().any()
    assert g.summary.num_components == 2
    assert any(w["rule"] == "DPS717" for w in g.summary.warnings)


@pytest.mark.parametrize("n,edges", [
    (0, []), (3, [[0, 0]]), (3, [[0, 3]]), (3, [[-1, 2]]), (3, [[0.5, 1]]), (3, [[0, 1, 2]]),
])
def test_edge_list_errors(n, edges):
    with pytest.raises(GconError) as info:
        Graph.from_edges(n, edges)
    assert info.value.rule == "DPS716"


@pytest.mark.parametrize("A", [
    np.array([[0, 1], [0, 0]]),          # directed
    np.array([[0, 2], [2, 0]]),          # weighted
    np.array([[1, 1], [1, 0]]),          # self-loop
    np.zeros((0, 0)),                    # empty
    np.zeros((2, 3)),                    # not square
])
def test_adjacency_errors(A):
    with pytest.raises(GconError) as info:
        Graph.from_adjacency(sp.csr_matrix(A))
    assert info.value.rule == "DPS716"


def test_no_edges_warns():
    g = Graph.from_edges(5, np.zeros((0, 2), dtype=int))
    assert g.num_edges == 0 and g.summary.num_isolated == 5
    assert any(w["rule"] == "DPS717" and "no edges" in w["message"] for w in g.summary.warnings)


def test_connected_graph_no_warning():
    g = Graph.from_adjacency(sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]])))
    assert g.summary.num_components == 1 and g.summary.warnings == ()
    assert g.edge_list().tolist() == [[0, 1], [0, 2]]
