"""Zero-shot link-prediction metrics on held-out nodes: MRR, Hits@k (filtered ranking)."""

from __future__ import annotations

import numpy as np

__all__ = ["rank_metrics", "link_prediction_eval"]


def rank_metrics(ranks: np.ndarray, ks=(1, 10)) -> dict:
    """ranks are 1-based; MRR = mean(1/rank), Hits@k = mean(rank <= k)."""
    r = np.asarray(ranks, float)
    if r.size == 0:
        raise ValueError("no ranks: the test graph has no edges")
    out = {"mrr": float(np.mean(1.0 / r))}
    for k in ks:
        out[f"hits@{k}"] = float(np.mean(r <= k))
    out["queries"] = int(r.size)
    return out


def link_prediction_eval(
    emb: np.ndarray, edges: np.ndarray, max_queries: int | None = 2000, seed: int = 0, ks=(1, 10)
) -> dict:
    """For each test edge (u, v) in both directions, rank v among all test nodes except u by the
    score <h_u, h_w>; other true neighbours of u are filtered out (standard filtered ranking).
    Ties count pessimistically (rank = 1 + #{w: s_w >= s_v, w != v})."""
    emb = np.asarray(emb, float)
    e = np.asarray(edges, dtype=np.int64)
    q = np.concatenate([e, e[:, ::-1]])
    rng = np.random.default_rng(seed)
    if max_queries is not None and q.shape[0] > max_queries:
        q = q[rng.choice(q.shape[0], max_queries, replace=False)]
    n = emb.shape[0]
    nbrs: dict[int, list[int]] = {}
    for a, b in e.tolist():
        nbrs.setdefault(a, []).append(b)
        nbrs.setdefault(b, []).append(a)
    S = emb[q[:, 0]] @ emb.T  # (Q, n)
    ranks = np.empty(q.shape[0])
    for i, (u, v) in enumerate(q.tolist()):
        s = S[i].copy()
        s[u] = -np.inf
        others = [w for w in nbrs.get(u, []) if w != v]
        if others:
            s[others] = -np.inf
        ranks[i] = np.count_nonzero(s >= s[v])  # includes v itself: rank >= 1
    del n
    return rank_metrics(ranks, ks)
