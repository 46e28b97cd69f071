"""Degree capping (pre-processing of Alg. 3): keep a subset of edges with max degree <= K.

What the accountant needs, and what capping can give
-----------------------------------------------------
Thm 3 / Thm C.1 are proved for neighbouring *capped* graphs that differ by one node and its <= K
edges (E = E' + {(n, u_i)}_{i<=K}).  The certificate therefore protects a node of the capped
graph (the paper's reading, via Daigavane et al. 2021).  Can a capping map h make the raw-graph
relation G ~ G - u land on that relation, i.e. h(G - u) = h(G) minus u's (<= K) edges?

**No map can [D].**  Take a star: centre w with leaves x_1..x_N.  Pure-removal stability applied
to the leaves one at a time makes h monotone on stars (h(star on A) subset of h(star on B) for A
subset of B); for a randomised h, symmetry gives E|h(star_{N+1}) edges at w| =
E|h(star_N)| + P(the removed leaf's edge was kept) = E|h(star_N)| (N+1)/N, so E|h(star_N)|
grows linearly in N, contradicting max degree <= K.  Any degree cap therefore sometimes *adds*
an edge elsewhere when a node leaves (its neighbour's freed budget is reused), and the guarantee
cannot be transferred to the raw graph for free.

This module offers two maps and states exactly what each satisfies (tested with hypothesis):

* ``"greedy"`` (default; random edge order, keep an edge while both endpoints have < K kept
  edges -- "randomly drop edges until max degree <= K").  Max degree <= K; removing a node from
  the *capped* graph removes exactly its <= K edges (the accountant's relation).
* ``"mutual_topk"``: with a seeded random key per edge, keep (a, b) iff it is among the K
  smallest keys at a *and* at b.  Max degree <= K, and **removal-monotone**: for every raw graph
  G and node u, h(G) minus u's edges is a subset of h(G - u), so removing u deletes at most K kept
  edges (all incident to u) and never deletes another one; the edges it may *add* are at most one
  per raw neighbour w of u whose edge to u was among w's K smallest keys
  (:func:`capping_change`).

Both are deterministic given ``seed``; the seed is data-independent.
"""

from __future__ import annotations

import numpy as np

from dpspec.accounting.relational import RelationalSoundnessError

__all__ = ["cap_degrees", "max_degree", "capping_change", "edge_keys"]


def max_degree(edges: np.ndarray, num_nodes: int) -> int:
    e = np.asarray(edges)
    if e.size == 0:
        return 0
    return int(np.bincount(e.ravel(), minlength=num_nodes).max())


def edge_keys(edges: np.ndarray, seed: int) -> np.ndarray:
    """A seeded pseudo-random key per undirected edge that depends only on (min, max, seed), so
    an edge keeps its key when other nodes are removed (needed for the stability property)."""
    e = np.sort(np.asarray(edges, dtype=np.uint64), axis=1)
    # splitmix64-style mixing (uint64 arithmetic wraps modulo 2^64 by design)
    with np.errstate(over="ignore"):
        x = (e[:, 0] * np.uint64(0x9E3779B97F4A7C15)) ^ (e[:, 1] + np.uint64(seed) * np.uint64(0xBF58476D1CE4E5B9))
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def cap_degrees(edges, num_nodes: int, K: int, seed: int = 0, method: str = "greedy") -> np.ndarray:
    """Edges (subset, sorted rows) with max degree <= K.  Raises DPS607 for K < 1."""
    if isinstance(K, bool) or int(K) != K or K < 1:
        raise RelationalSoundnessError(
            f"degree cap K must be an integer >= 1, got {K}", rule="DPS607", hint="K = 0 keeps no edge"
        )
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if e.shape[0] == 0:
        return e
    keys = edge_keys(e, seed)
    order = np.lexsort((e[:, 1], e[:, 0], keys))  # ties broken by the edge itself
    if method == "greedy":
        deg = np.zeros(num_nodes, dtype=np.int64)
        keep = np.zeros(e.shape[0], dtype=bool)
        for i in order:
            a, b = e[i]
            if deg[a] < K and deg[b] < K:
                keep[i] = True
                deg[a] += 1
                deg[b] += 1
        out = e[keep]
    elif method == "mutual_topk":
        rank = np.empty(e.shape[0], dtype=np.int64)
        rank[order] = np.arange(e.shape[0])
        ok = np.zeros((e.shape[0], 2), dtype=bool)
        # incidence list: (node, edge, side) for both endpoints; position of each edge among
        # all edges of its node, ordered by key rank
        v = np.concatenate([e[:, 0], e[:, 1]])
        eid = np.concatenate([np.arange(e.shape[0])] * 2)
        sid = np.repeat([0, 1], e.shape[0])
        idx = np.lexsort((rank[eid], v))
        vs = v[idx]
        start = np.r_[0, np.flatnonzero(np.diff(vs)) + 1]
        pos = np.arange(idx.size) - np.repeat(start, np.diff(np.r_[start, idx.size]))
        ok[eid[idx], sid[idx]] = pos < K
        # an edge appears once per endpoint: (a,b) is in a's list (side 0) and b's (side 1)
        out = e[ok[:, 0] & ok[:, 1]]
    else:
        raise ValueError("method must be 'greedy' or 'mutual_topk'")
    out = out[np.lexsort((out[:, 1], out[:, 0]))]
    if max_degree(out, num_nodes) > K:  # defensive: the guarantee the accountant relies on
        raise RelationalSoundnessError("capping produced a degree > K", rule="DPS607")
    return out


def capping_change(edges, num_nodes: int, K: int, node: int, seed: int = 0, method: str = "mutual_topk") -> dict:
    """Compare h(G) and h(G - node) (node's edges removed from the raw graph; ids unchanged).

    Returns counts: ``removed_incident`` (kept edges of ``node``), ``removed_other`` (kept edges
    not incident to ``node`` that disappear -- 0 for mutual_topk), ``added`` (edges kept only
    without ``node``) and ``added_bound`` (for mutual_topk: raw neighbours w of ``node`` whose
    edge to it is among w's K smallest keys)."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    h = cap_degrees(e, num_nodes, K, seed, method)
    inc = (e[:, 0] == node) | (e[:, 1] == node)
    h2 = cap_degrees(e[~inc], num_nodes, K, seed, method)
    s1 = {tuple(x) for x in h.tolist()}
    s2 = {tuple(x) for x in h2.tolist()}
    gone = s1 - s2
    rem_inc = sum(1 for a, b in gone if node in (a, b))
    bound = 0
    if method == "mutual_topk":
        keys = edge_keys(e, seed)
        for i in np.nonzero(inc)[0]:
            w = e[i, 1] if e[i, 0] == node else e[i, 0]
            mine = (e[:, 0] == w) | (e[:, 1] == w)
            if np.sum(keys[mine] < keys[i]) < K:
                bound += 1
    return {
        "removed_incident": rem_inc,
        "removed_other": len(gone) - rem_inc,
        "added": len(s2 - s1),
        "added_bound": bound,
    }
