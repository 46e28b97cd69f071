"""Relational DP-SGD across ranks: the degree-capped graph and every step's tuples are global.

* :func:`global_capped_graph` — rank 0 caps the raw graph (``cap_degrees``, seeded and
  deterministic) and broadcasts the kept edges; every rank checks the digest. Capping per rank (on a
  partition of the edges) would bound each rank's degree by K but not the *global* degree, which
  is what Thm 3 / Thm C.1 need.
* The trainer (``RelationalTrainer(..., comm=comm)``) draws the Poisson positives over the capped
  edges and the NEG-SAMPLE-WOR negatives with the same generator on every rank, computes the clip
  thresholds on the global batch (FREQ-CLIP depends on all tuples), and clips only its contiguous
  shard of the tuples; the noise is added once (rank 0, before the all-reduce).
* :func:`max_node_tuples` — the audit used by the tests: across all ranks' shards of one step, the
  largest number of positive tuples touching one node (≤ K by construction).
"""

from __future__ import annotations

import numpy as np

from dpspec.distributed.comm import Comm

__all__ = ["global_capped_graph", "max_node_tuples"]


def global_capped_graph(graph, K: int, comm: Comm, seed: int = 0, method: str = "greedy"):
    """``graph.with_edges(cap_degrees(graph.edges, n, K, seed, method))``, computed on rank 0 only
    and broadcast (identical on every rank, checked)."""
    from dpspec.relational.capping import cap_degrees

    edges = cap_degrees(graph.edges, graph.num_nodes, K, seed, method) if comm.is_main else None
    edges = np.asarray(comm.broadcast_object(edges), dtype=np.int64).reshape(-1, 2)
    comm.check_consensus(edges.ravel())
    return graph.with_edges(edges)


def max_node_tuples(shards_per_rank: list, num_nodes: int) -> int:
    """``shards_per_rank[r]`` = [(step, pos (b_r, 2))] from ``RelationalTrainer.shards``; returns
    max over steps and nodes of the number of positive tuples containing the node, summed over
    ranks (the quantity the degree cap K bounds in the sensitivity proof)."""
    per_step: dict = {}
    for shards in shards_per_rank:
        for step, pos in shards:
            per_step.setdefault(step, []).append(np.asarray(pos, dtype=np.int64).reshape(-1, 2))
    best = 0
    for parts in per_step.values():
        pos = np.concatenate(parts)
        if pos.size:
            best = max(best, int(np.bincount(pos.ravel(), minlength=num_nodes).max()))
    return best
