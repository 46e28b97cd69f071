"""The graph a GCON or relational training reads, and GCON's public plan (classes, loss nodes,
dimension, split). Shared by the compiler, the runtime mechanism and the auditor, so it lives on the
runtime side: the runtime must not import the compiler."""

from __future__ import annotations

import numpy as np

from dpspec import limits
from dpspec.errors import DpspecError
from dpspec.ir import models as ir
from dpspec.ir.settings import GconSettings


class GraphPlanError(DpspecError, ValueError):
    """A configuration the plan cannot serve; the compiler reports it as diagnostic ``rule``."""

    def __init__(self, rule: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.rule, self.message, self.hint = rule, message, hint


def load_graph(binding, bound: dict | None = None):
    """GraphDataset for ``graph cora|citeseer``, ``synthetic(generator = sbm_graph, ...)`` or a bound one."""
    from dpspec.data import graphs
    from dpspec.data.synthetic import generate_graph

    if isinstance(binding, ir.SyntheticData):
        return generate_graph(binding.generator, binding.size, binding.seed)
    name = binding.name
    if bound and name in bound:
        g = bound[name]
        if isinstance(g, dict):
            return graph_from_arrays(name, g)
        if not isinstance(g, graphs.GraphDataset):  # a list, a string, ...: caught here, not deep inside
            raise ValueError(
                f"the graph `{name}` bound at compile time is a {type(g).__name__}, not a "
                "dpspec.data.graphs.GraphDataset or a dict of arrays"
            )
        return g
    loaders = {"cora": graphs.load_cora, "citeseer": graphs.load_citeseer}
    if name not in loaders:
        raise ValueError(f"unknown graph `{name}`; built in: {', '.join(loaders)} (or bind one at compile time)")
    return loaders[name]()


def graph_from_arrays(name: str, d: dict):
    """``dpspec.compile(spec, data={name: {"edges": E, "features": X, "labels": y}})`` as a GraphDataset.

    ``edges``: (E, 2) node indices, each undirected edge once; ``features`` (n, f) or ``texts`` (n
    strings); ``labels`` (n,) class labels, -1 for an unlabelled node; optional ``num_nodes``. The
    node count, edges and labels enter the calibration, so self-loops, repeated or reversed pairs and
    indices outside the nodes are errors, never silently dropped (as for relational graphs, DPS608).
    """
    import scipy.sparse as sp

    from dpspec.data.graphs import GraphDataset, LoadReport, canonical_edges

    for key in ("edges", "labels"):
        if d.get(key) is None:
            raise ValueError(
                f"graph `{name}` needs `{key}`"
                + (
                    " (an (E, 2) array of node indices)"
                    if key == "edges"
                    else " (one class label per node, -1 if unlabelled)"
                )
            )
    features, texts = d.get("features"), d.get("texts")
    if features is None and texts is None:
        raise ValueError(f"graph `{name}` needs `features` (an (n, f) array) or `texts` (n strings)")
    try:
        labels = np.asarray(d["labels"])
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"`labels` of graph `{name}` is not an array: {e}") from None
    if labels.ndim != 1 or labels.dtype.kind not in "iu" or (labels.size and labels.min() < -1):
        raise ValueError(f"`labels` of graph `{name}` must be a 1-d array of integer classes (-1: unlabelled)")
    n = d.get("num_nodes")
    if n is None:
        n = len(labels)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < int(n):
        raise ValueError(f"`num_nodes` of graph `{name}` must be a positive whole number, got {n!r:.40}")
    n = int(n)
    limits.require("nodes", n, f"nodes of graph `{name}`")
    if texts is not None and (
        isinstance(texts, (str, bytes)) or not hasattr(texts, "__len__") or not all(isinstance(x, str) for x in texts)
    ):
        raise ValueError(f"`texts` of graph `{name}` must be a list of strings, one per node")
    try:
        edges = np.asarray(d["edges"])
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"`edges` of graph `{name}` is not an array: {e}") from None
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "iu":
        raise ValueError(
            f"`edges` of graph `{name}` must be an (E, 2) integer array, got shape {edges.shape} of {edges.dtype}"
        )
    if features is not None:
        try:
            features = sp.csr_matrix(features, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"`features` of graph `{name}` is not an (n, f) numeric array: {e}") from None
        if features.nnz and not np.all(np.isfinite(features.data)):
            raise ValueError(f"`features` of graph `{name}` has NaN or infinite values")
    for what, rows in (
        ("labels", len(labels)),
        ("features", None if features is None else features.shape[0]),
        ("texts", None if texts is None else len(texts)),
    ):
        if rows is not None and rows != n:
            raise ValueError(f"graph `{name}` has {n} nodes but {rows} rows of {what}")
    report = LoadReport(node_lines=n, nodes=n)
    canon = canonical_edges([(str(a), str(b)) for a, b in edges.tolist()], {str(i): i for i in range(n)}, report)
    bad = {
        "self-loops": report.self_loops,
        "repeated pairs": report.duplicate_lines,
        "reversed repeats of an edge": report.reciprocal_merged,
        "edges to a node outside 0..n-1": report.dangling_lines,
    }
    found = ", ".join(f"{k} {what}" for what, k in bad.items() if k)
    if found:
        raise ValueError(
            f"graph `{name}` has {found}; give each undirected edge once, between two different "
            f"nodes in 0..{n - 1} (they change the edge count the guarantee is about)"
        )
    classes = int(labels.max()) + 1 if labels.size else 0
    return GraphDataset(
        name=name,
        node_ids=[str(i) for i in range(n)],
        labels=labels.astype(np.int64),
        label_names=[str(k) for k in range(classes)],
        edges=canon,
        features=features,
        texts=None if texts is None else list(texts),
        report=report,
    )


def plan(t: ir.Training, ds) -> dict:
    """Public quantities the calibration needs: classes, loss nodes, dimension, the split."""
    st = t.settings_as(GconSettings)
    from dpspec.data.graphs import planetoid_split

    split = st.split or ir.SplitSpec()
    train_idx, val_idx, test_idx = planetoid_split(ds.labels, per_class=split.per_class, seed=split.seed)
    c = int(ds.num_classes)
    enc = st.encoder or ir.EncoderSpec(kind="mlp")
    d1 = c if enc.kind == "mlp" else int(ds.features.shape[1]) if ds.features is not None else None
    if d1 is None:
        raise GraphPlanError(
            "DPS726",
            f"graph `{ds.name}` has raw text, not features: it needs an encoder",
            hint="use `encoder mlp(...)` (a TF-IDF of the text feeds the encoder)",
        )
    steps = list(st.propagation.steps)
    n1 = int(ds.num_nodes) if st.pseudo_labels else int(len(train_idx))
    return {
        "classes": c,
        "d1": d1,
        "dim": len(steps) * d1,
        "num_train": n1,
        "train_idx": train_idx,
        "val_idx": val_idx,
        "test_idx": test_idx,
        "steps": steps,
    }
