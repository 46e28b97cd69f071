"""Relational DP-SGD's reference workload for ``python -m dpspec.distributed.examples relational``
(``Family.distributed_example``)."""

from __future__ import annotations

import time

import numpy as np

WORKLOAD = "relational"
DEFAULTS = dict(n=300, K=4, k_neg=2, batch=24.0, steps=12, sigma=1.0, clip=1.0, clipping="freq", seed=0, graph_seed=0)


def community_graph(n: int, seed: int, c: int = 5, p_in: float = 0.08, p_out: float = 0.004, d: int = 40):
    from dpspec.relational import RelationalGraph

    rng = np.random.default_rng(seed)
    comm = rng.integers(0, c, n)
    A = rng.random((n, n))
    P = np.where(comm[:, None] == comm[None, :], p_in, p_out)
    iu = np.triu_indices(n, 1)
    E = np.stack(iu, 1)[(A < P)[iu]]
    X = (rng.random((n, d)) < 0.08).astype(float)
    return RelationalGraph.build(n, E, features=X, labels=comm)


def run(comm, cfg: dict | None = None) -> dict:
    """Relational DP-SGD (Poisson positives, NEG-SAMPLE-WOR negatives, degree cap K) on an MLP encoder (on
    :func:`~dpspec.distributed.examples.device`)."""
    from dpspec.distributed.examples import _injected, _params, device
    from dpspec.relational.capping import cap_degrees, max_degree
    from dpspec.relational.encoders import MLPEncoder
    from dpspec.relational.trainer import RelationalTrainer, TrainConfig

    from .sharding import global_capped_graph

    c = {**DEFAULTS, **(cfg or {})}
    raw = community_graph(c["n"], c["graph_seed"])
    use = None if c.get("single") else comm
    if use is None:
        g = raw.with_edges(cap_degrees(raw.edges, raw.num_nodes, c["K"], c["seed"]))
    else:
        g = global_capped_graph(raw, c["K"], use, seed=c["seed"])
    enc = MLPEncoder(g.features, hidden=16, out=8, seed=c["seed"])
    enc.module.to(device(comm, c))  # (the trainer moves the node tables to the module's device)
    tc = TrainConfig(
        batch_size=c["batch"],
        k_neg=c["k_neg"],
        degree_cap=c["K"],
        clip=c["clip"],
        sigma=c["sigma"],
        clipping=c["clipping"],
        steps=c["steps"],
        lr=0.05,
        optimizer="sgd",
        seed=c["seed"],
    )
    tr = RelationalTrainer(g, enc, tc, comm=use)
    t0 = time.perf_counter()
    res = tr.train()
    return {
        "params": _params(tr.params),
        "batch_sizes": list(res.batch_sizes),
        "losses": list(res.losses),
        "seconds": time.perf_counter() - t0,
        "injected": _injected(use),
        "noise_std": c["sigma"] * c["clip"],
        "shards": list(tr.shards),
        "num_nodes": g.num_nodes,
        "max_degree": max_degree(g.edges, g.num_nodes),
        "raw_max_degree": max_degree(raw.edges, raw.num_nodes),
        "rank": 0 if use is None else use.rank,
    }
