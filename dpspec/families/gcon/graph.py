"""Graph container and validation for GCON (edge-level DP, Wei et al. 2024).

GCON protects the edge set of an undirected, unweighted graph (Sec. III, eq. (8)): neighbouring
graphs differ by one added/removed undirected edge. The adjacency A must be symmetric, 0/1 and
have a zero diagonal; the mechanism itself adds the self-loops, ``A~ = D^-1 (A + I)`` (Sec. IV-C2).
This module turns an edge list or a sparse adjacency into that canonical A and reports what it had
to merge, and refuses inputs the theorem does not cover (rule DPS716). Several connected
components, isolated nodes, or no edges at all are *not* violations of Lemmas 1-2 (Psi does not
depend on connectivity; Cora has 78 components); they are reported as DPS717 warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from dpspec.accounting.gcon import GconError

__all__ = ["Graph", "GraphSummary"]


@dataclass(frozen=True)
class GraphSummary:
    """Counts describing a canonical GCON graph (all edges undirected, no self-loops)."""

    num_nodes: int
    num_edges: int  # distinct undirected edges {i, j}, i != j
    num_input_pairs: int  # rows of the edge list given (or nnz of the sparse input)
    merged_duplicates: int  # input pairs that repeated an edge already seen (incl. (j,i))
    num_components: int
    num_isolated: int  # nodes of degree 0
    max_degree: int
    warnings: tuple[dict[str, str], ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


class Graph:
    """Undirected, unweighted graph on nodes ``0..n-1`` with a canonical 0/1 adjacency.

    Build with ``Graph.from_edges(n, edges)`` (pairs in either direction; duplicates and reversed
    pairs are merged and counted) or ``Graph.from_adjacency(A)`` (must already be symmetric 0/1 with
    zero diagonal). Self-loops are an error (A~ adds them itself); so are out-of-range ids, negative
    or non-unit weights, and an empty node set.
    """

    def __init__(self, adjacency: sp.csr_matrix, summary: GraphSummary) -> None:
        self.adjacency = adjacency
        self.summary = summary

    @property
    def num_nodes(self) -> int:
        return self.adjacency.shape[0]

    @property
    def num_edges(self) -> int:
        return self.summary.num_edges

    def degrees(self) -> np.ndarray:
        return np.diff(self.adjacency.indptr).astype(np.int64)

    def edge_list(self) -> np.ndarray:
        """Distinct undirected edges as an (E, 2) array with i < j."""
        coo = sp.triu(self.adjacency, k=1).tocoo()
        return np.stack([coo.row, coo.col], axis=1).astype(np.int64)

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_edges(cls, num_nodes: int, edges: Any) -> Graph:
        n = int(num_nodes)
        if n <= 0:
            raise GconError(
                "DPS716", f"the graph has no nodes (n = {num_nodes})", "GCON needs at least one node; check the loader"
            )
        e = np.asarray(edges)
        if e.size == 0:
            e = np.zeros((0, 2), dtype=np.int64)
        if e.ndim != 2 or e.shape[1] != 2:
            raise GconError(
                "DPS716", f"edges must be an (E, 2) array, got shape {e.shape}", "pass pairs of node indices"
            )
        if not np.issubdtype(e.dtype, np.integer):
            if np.issubdtype(e.dtype, np.floating) and np.all(np.isfinite(e)) and np.all(e == np.round(e)):
                e = e.astype(np.int64)
            else:
                raise GconError(
                    "DPS716",
                    "edge endpoints must be integer node indices",
                    "map node ids to 0..n-1 first (see dpspec.data.graphs)",
                )
        e = e.astype(np.int64, copy=False)
        if e.size and (e.min() < 0 or e.max() >= n):
            raise GconError(
                "DPS716",
                f"edge endpoints outside 0..{n - 1}",
                "drop citations to nodes that are not in the node set (the loaders report them as dangling)",
            )
        loops = int(np.count_nonzero(e[:, 0] == e[:, 1])) if e.size else 0
        if loops:
            raise GconError(
                "DPS716",
                f"{loops} self-loop(s) in the edge list",
                "remove them: A must have a zero diagonal; A~ = D^-1(A + I) adds the self-loops itself (Sec. IV-C2)",
            )
        lo = np.minimum(e[:, 0], e[:, 1])
        hi = np.maximum(e[:, 0], e[:, 1])
        key = np.unique(lo * n + hi)
        u, v = key // n, key % n
        rows = np.concatenate([u, v])
        cols = np.concatenate([v, u])
        adj = sp.csr_matrix((np.ones(rows.size, dtype=np.float64), (rows, cols)), shape=(n, n))
        adj.sort_indices()
        return cls(adj, cls._summarise(adj, num_input_pairs=int(e.shape[0]), merged=int(e.shape[0] - key.size)))

    @classmethod
    def from_adjacency(cls, adjacency: Any) -> Graph:
        a = sp.csr_matrix(adjacency, dtype=np.float64)
        n = a.shape[0]
        if a.shape[0] != a.shape[1] or n == 0:
            raise GconError(
                "DPS716", f"adjacency must be square and non-empty, got {a.shape}", "pass an n x n 0/1 symmetric matrix"
            )
        a.eliminate_zeros()
        if a.nnz and not np.all(a.data == 1.0):
            raise GconError(
                "DPS716",
                "adjacency has weights other than 0/1",
                "GCON covers unweighted graphs only (Lemma 1 uses 0/1 entries)",
            )
        if a.diagonal().any():
            raise GconError(
                "DPS716",
                "adjacency has a non-zero diagonal (self-loops)",
                "remove them; A~ = D^-1(A + I) adds the self-loops itself",
            )
        if (a != a.T).nnz:
            raise GconError(
                "DPS716",
                "adjacency is not symmetric (directed graph)",
                "GCON's neighbouring relation is one undirected edge; symmetrise (A + A^T > 0) before training",
            )
        a.sort_indices()
        return cls(a, cls._summarise(a, num_input_pairs=int(a.nnz), merged=0))

    @staticmethod
    def _summarise(adj: sp.csr_matrix, num_input_pairs: int, merged: int) -> GraphSummary:
        n = adj.shape[0]
        deg = np.diff(adj.indptr)
        ncomp = int(connected_components(adj, directed=False)[0]) if n else 0
        m = int(adj.nnz // 2)
        warns: list[dict[str, str]] = []
        if m == 0:
            warns.append(
                {
                    "rule": "DPS717",
                    "severity": "warning",
                    "message": "the graph has no edges: propagation is the identity",
                    "hint": "GCON then equals its edge-free encoder",
                }
            )
        elif ncomp > 1:
            warns.append(
                {
                    "rule": "DPS717",
                    "severity": "warning",
                    "message": f"the graph has {ncomp} connected components "
                    f"({int(np.count_nonzero(deg == 0))} isolated nodes)",
                    "hint": "allowed by Lemmas 1-2; isolated nodes keep their own features",
                }
            )
        return GraphSummary(
            num_nodes=n,
            num_edges=m,
            num_input_pairs=num_input_pairs,
            merged_duplicates=merged,
            num_components=ncomp,
            num_isolated=int(np.count_nonzero(deg == 0)),
            max_degree=int(deg.max()) if n else 0,
            warnings=tuple(warns),
        )
