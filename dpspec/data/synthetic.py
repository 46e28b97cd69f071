"""Generated datasets for demos and tests (no download, fully determined by a seed).

``secret_groups``: records with a categorical secret ``group`` in {A, B, C} (prior 0.5/0.3/0.2)
and three numeric columns ``x1``, ``x2``, ``x3`` in [0, 10] whose means shift with the group —
a small stand-in for "protect a person's group while releasing summary statistics".
``two_blobs``: a binary ``label`` and numeric ``x1``…``x5`` (a classification task).
``markov_chain``: one row per time step of a 2-state Markov chain (``state`` in {0, 1}, transitions
[[0.8, 0.2], [0.3, 0.7]], started at its stationary law (0.6, 0.4)) and the step ``t`` — correlated data
for the Markov Quilt Mechanism.
"""

from __future__ import annotations

import numpy as np

from dpspec.data import GRAPH_GENERATORS  # noqa: F401 (re-exported)
from dpspec.data import TABLE_GENERATORS as GENERATORS
from dpspec.data.tabular import Table


def generate(generator: str, size: int, seed: int = 0) -> Table:
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator {generator!r}; available: {', '.join(GENERATORS)}")
    rng = np.random.default_rng(seed)
    if generator == "secret_groups":
        groups = rng.choice(np.array(["A", "B", "C"], dtype=object), size=size, p=[0.5, 0.3, 0.2])
        shift = {"A": 0.0, "B": 0.6, "C": 1.2}
        base = np.array([shift[g] for g in groups])
        data = {"group": groups}
        for j, name in enumerate(("x1", "x2", "x3")):
            data[name] = np.clip(rng.normal(4.0 + base * (j + 1) / 2, 1.5, size=size), 0.0, 10.0)
        numeric = frozenset({"x1", "x2", "x3"})
    elif generator == "markov_chain":
        P = np.array([[0.8, 0.2], [0.3, 0.7]])
        s = np.empty(size, dtype=float)
        s[0] = float(rng.random() < 0.4)
        u = rng.random(size)
        for t in range(1, size):
            s[t] = float(u[t] < P[int(s[t - 1]), 1])
        data = {"t": np.arange(size, dtype=float), "state": s}
        numeric = frozenset({"t", "state"})
    else:
        label = rng.integers(0, 2, size=size)
        data = {"label": np.where(label == 1, "yes", "no").astype(object)}
        for j in range(5):
            data[f"x{j + 1}"] = rng.normal(label * (0.5 + 0.2 * j), 1.0, size=size)
        numeric = frozenset(f"x{j + 1}" for j in range(5))
    cols = tuple(data)
    return Table(
        f"synthetic:{generator}",
        cols,
        data,
        numeric,
        n_raw=size,
        sources=(f"synthetic(generator = {generator}, size = {size}, seed = {seed})",),
    )


def generate_graph(generator: str, size: int, seed: int = 0):
    """A stochastic-block-model citation-like graph (a ``GraphDataset``): ``size`` nodes in 4 classes,
    16 noisy non-negative features per node, about 2 edges per node, 80 % of them inside a class."""
    import scipy.sparse as sp

    from dpspec.data.graphs import GraphDataset, LoadReport

    if generator not in GRAPH_GENERATORS:
        raise ValueError(f"unknown graph generator {generator!r}; available: {', '.join(GRAPH_GENERATORS)}")
    rng = np.random.default_rng(seed)
    n, c, f = int(size), 4, 16
    labels = rng.integers(0, c, size=n)
    centres = rng.normal(0, 1, size=(c, f))
    feats = np.abs(centres[labels] + rng.normal(0, 1.2, size=(n, f)))
    # about 2 edges per node, 8 in 10 of them inside the node's class
    m_in, m_out = rng.poisson(1.6 * n), rng.poisson(0.4 * n)
    src = rng.integers(0, n, size=8 * (m_in + m_out) + 64)
    dst = rng.integers(0, n, size=src.size)
    same = labels[src] == labels[dst]
    keep = np.concatenate([np.flatnonzero(same)[:m_in], np.flatnonzero(~same)[:m_out]])
    e = np.sort(np.stack([src[keep], dst[keep]], axis=1), axis=1)
    e = np.unique(e[e[:, 0] != e[:, 1]], axis=0)
    report = LoadReport(nodes=n, edges=int(len(e)))
    return GraphDataset(
        f"synthetic:{generator}",
        [str(i) for i in range(n)],
        labels.astype(np.int64),
        [f"class{k}" for k in range(c)],
        e.astype(np.int64),
        sp.csr_matrix(feats),
        None,
        report,
    )
