"""Graph input for relational DP-SGD: validation, node attributes, node-disjoint splits.

``RelationalGraph`` holds an undirected edge list over nodes 0..n-1 with node attributes
(a feature matrix and/or raw texts).  Bad input is never silently repaired in a way that changes
the privacy analysis:

* self-loops, duplicate (also reversed) edges, node ids outside 0..n-1 -> DPS608, unless
  ``clean=True`` is passed, which drops them *before* anything private is computed and counts
  them in ``report`` (the accountant then sees the cleaned counts; dropping a self-loop or a
  duplicate only removes a node's own data, so the neighbouring relation is unchanged);
* dangling edges (an endpoint without attributes) -> DPS608 (or dropped with ``clean=True``);
* isolated nodes are kept: they are entities of the private graph and count in n (Alg. 2 draws
  negatives from all n nodes; Thm 3 uses n = |V|);
* missing text for a node -> DPS609 unless ``missing_text="empty"`` (the node keeps an empty
  string; a data-independent placeholder does not affect the analysis).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpspec.accounting.relational import RelationalSoundnessError

__all__ = [
    "RelationalGraph",
    "validate_edges",
    "from_graph_dataset",
    "node_disjoint_split",
    "induced_subgraph",
    "SplitResult",
]


def validate_edges(edges, num_nodes: int, clean: bool = False) -> tuple[np.ndarray, dict]:
    """Canonical (i < j), unique, in-range edges.  Raises DPS608 on the first problem unless
    ``clean``; returns (edges, report)."""
    e = np.asarray(edges)
    if e.size == 0:
        return np.zeros((0, 2), dtype=np.int64), {"self_loops": 0, "duplicates": 0, "dangling": 0}
    if e.ndim != 2 or e.shape[1] != 2:
        raise RelationalSoundnessError(f"edges must have shape (E, 2), got {e.shape}", rule="DPS608")
    if not np.issubdtype(e.dtype, np.integer):
        if not np.all(np.isfinite(e)) or not np.all(e == np.round(e)):
            raise RelationalSoundnessError("edges must be integer node indices", rule="DPS608")
        e = e.astype(np.int64)
    e = e.astype(np.int64)
    rep = {"self_loops": 0, "duplicates": 0, "dangling": 0}
    bad = (e < 0) | (e >= num_nodes)
    dangling = bad.any(axis=1)
    if dangling.any():
        rep["dangling"] = int(dangling.sum())
        if not clean:
            raise RelationalSoundnessError(
                f"{rep['dangling']} edge(s) reference nodes outside 0..{num_nodes - 1} (dangling)",
                rule="DPS608",
                hint="drop them before training (clean=True) or add the missing nodes",
            )
        e = e[~dangling]
    loops = e[:, 0] == e[:, 1]
    if loops.any():
        rep["self_loops"] = int(loops.sum())
        if not clean:
            raise RelationalSoundnessError(
                f"{rep['self_loops']} self-loop(s)",
                rule="DPS608",
                hint="a node is not related to itself; clean=True drops them",
            )
        e = e[~loops]
    e = np.sort(e, axis=1)
    u, idx = np.unique(e, axis=0, return_index=True)
    if u.shape[0] != e.shape[0]:
        rep["duplicates"] = int(e.shape[0] - u.shape[0])
        if not clean:
            raise RelationalSoundnessError(
                f"{rep['duplicates']} duplicate edge(s) (reversed pairs count as duplicates of an undirected edge)",
                rule="DPS608",
                hint="a duplicate would be sampled twice and double the node's sensitivity; clean=True keeps one copy",
            )
    return u.astype(np.int64), rep


@dataclass
class RelationalGraph:
    """Undirected graph with node attributes; ``edges`` (E, 2), i < j, unique."""

    num_nodes: int
    edges: np.ndarray
    features: np.ndarray | None = None
    texts: list[str] | None = None
    labels: np.ndarray | None = None
    name: str = "graph"
    report: dict = field(default_factory=dict)

    @classmethod
    def build(
        cls, num_nodes, edges, features=None, texts=None, labels=None, name="graph", clean=False, missing_text="error"
    ) -> RelationalGraph:
        if isinstance(num_nodes, bool) or int(num_nodes) != num_nodes or num_nodes < 2:
            raise RelationalSoundnessError(f"num_nodes must be an integer >= 2, got {num_nodes}", rule="DPS608")
        n = int(num_nodes)
        e, rep = validate_edges(edges, n, clean)
        if features is not None:
            X = features.toarray() if hasattr(features, "toarray") else np.asarray(features)
            if X.shape[0] != n:
                raise RelationalSoundnessError(f"features have {X.shape[0]} rows for {n} nodes", rule="DPS609")
            if not np.all(np.isfinite(X)):
                raise RelationalSoundnessError("features contain NaN/inf", rule="DPS609")
            features = X.astype(np.float32)
        if texts is not None:
            texts = list(texts)
            if len(texts) != n:
                raise RelationalSoundnessError(f"{len(texts)} texts for {n} nodes", rule="DPS609")
            missing = [i for i, t in enumerate(texts) if t is None or not str(t).strip()]
            if missing:
                rep["missing_text"] = len(missing)
                if missing_text == "error":
                    raise RelationalSoundnessError(
                        f"{len(missing)} node(s) have no text (first: {missing[:5]})",
                        rule="DPS609",
                        hint="missing_text='empty' encodes them as empty strings (data-independent placeholder)",
                    )
                if missing_text != "empty":
                    raise ValueError("missing_text must be 'error' or 'empty'")
                texts = ["" if (t is None or not str(t).strip()) else str(t) for t in texts]
        if features is None and texts is None:
            raise RelationalSoundnessError("a relational graph needs node features or texts", rule="DPS609")
        deg = np.bincount(e.ravel(), minlength=n)
        rep["isolated_nodes"] = int(np.count_nonzero(deg == 0))
        return cls(n, e, features, texts, None if labels is None else np.asarray(labels), name, rep)

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[0])

    def degrees(self) -> np.ndarray:
        return np.bincount(self.edges.ravel(), minlength=self.num_nodes)

    def with_edges(self, edges: np.ndarray, name: str | None = None) -> RelationalGraph:
        return RelationalGraph(
            self.num_nodes,
            np.asarray(edges, dtype=np.int64),
            self.features,
            self.texts,
            self.labels,
            name or self.name,
            dict(self.report),
        )


def from_graph_dataset(ds, missing_text="error") -> RelationalGraph:
    """From :class:`dpspec.data.graphs.GraphDataset` (Cora: features; CiteSeer: texts)."""
    return RelationalGraph.build(
        ds.num_nodes, ds.edges, ds.features, ds.texts, ds.labels, ds.name, missing_text=missing_text
    )


def induced_subgraph(g: RelationalGraph, nodes: np.ndarray, name: str) -> tuple[RelationalGraph, np.ndarray]:
    """Subgraph induced on ``nodes`` (sorted, reindexed 0..len-1); returns (graph, old ids)."""
    nodes = np.unique(np.asarray(nodes, dtype=np.int64))
    new = np.full(g.num_nodes, -1, dtype=np.int64)
    new[nodes] = np.arange(nodes.size)
    keep = (new[g.edges[:, 0]] >= 0) & (new[g.edges[:, 1]] >= 0)
    e = np.sort(new[g.edges[keep]], axis=1)
    feats = None if g.features is None else g.features[nodes]
    texts = None if g.texts is None else [g.texts[i] for i in nodes]
    labels = None if g.labels is None else g.labels[nodes]
    sub = RelationalGraph(
        int(nodes.size),
        e,
        feats,
        texts,
        labels,
        name,
        {"isolated_nodes": int(np.count_nonzero(np.bincount(e.ravel(), minlength=nodes.size) == 0))},
    )
    return sub, nodes


@dataclass
class SplitResult:
    train: RelationalGraph
    test: RelationalGraph
    train_nodes: np.ndarray  # original ids
    test_nodes: np.ndarray
    dropped_cross_edges: int


def node_disjoint_split(
    g: RelationalGraph, test_fraction: float = 0.2, seed: int = 0, by_label: np.ndarray | None = None
) -> SplitResult:
    """Node-disjoint train/test split for zero-shot link prediction (train on one graph, test on
    held-out entities, as the paper's cross-domain protocol).  Nodes are split at random (or by
    ``by_label``: a boolean mask of test nodes, e.g. some classes = another domain); edges
    between the parts are dropped (counted), so no test entity or relation is seen in training.
    The private training graph is ``train`` (its n and m go to the accountant)."""
    if by_label is not None:
        test_mask = np.asarray(by_label, bool)
        if test_mask.shape != (g.num_nodes,):
            raise RelationalSoundnessError("by_label must be a boolean mask over nodes", rule="DPS610")
    else:
        if not 0 < test_fraction < 1:
            raise ValueError("test_fraction must be in (0, 1)")
        rng = np.random.default_rng(seed)
        perm = rng.permutation(g.num_nodes)
        test_mask = np.zeros(g.num_nodes, bool)
        test_mask[perm[: int(round(test_fraction * g.num_nodes))]] = True
    tr_nodes = np.nonzero(~test_mask)[0]
    te_nodes = np.nonzero(test_mask)[0]
    train, _ = induced_subgraph(g, tr_nodes, g.name + "-train")
    test, _ = induced_subgraph(g, te_nodes, g.name + "-test")
    cross = g.num_edges - train.num_edges - test.num_edges
    if np.intersect1d(tr_nodes, te_nodes).size:
        raise RelationalSoundnessError("train and test nodes overlap", rule="DPS610")
    return SplitResult(train, test, tr_nodes, te_nodes, int(cross))
