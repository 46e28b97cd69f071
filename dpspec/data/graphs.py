"""Loaders for the citation graphs under the data root: Cora (LINQS) and CiteSeer with raw text.

Files are read in place from ``data_root()`` (``$DPSPEC_DATA_DIR`` or the shared folder); nothing
is copied into the repository. The raw files have quirks; each is handled explicitly and counted in
``GraphDataset.report`` (a ``LoadReport``):

* ``*.cites`` lines are ``cited \\t citing`` (a directed citation). GCON's graph is undirected, so
  ``a b`` and ``b a`` are one edge: reversed pairs are **merged** (``reciprocal_merged``) and
  repeated lines are **deduplicated** (``duplicate_lines``).
* citations whose endpoint is not in the node file (CiteSeer: papers without text) are **dropped**
  (``dangling_lines``: non-self-loop lines with a missing endpoint; ``dangling_ids``: distinct
  missing ids over all lines);
* self-citations are **dropped** (``self_loops``): A must have a zero diagonal; GCON adds the
  self-loops itself in ``D^-1(A + I)``;
* every node keeps a label (both files label every node); ``isolated_nodes`` counts nodes left with
  degree 0 after the drops, ``components`` the connected components.

Counts on the shared copies (checked by ``tests/families/gcon/test_loaders.py``):

* Cora: 2708 nodes, 1433 binary features, 7 classes; 5429 citation lines, 0 self-loops, 0 dangling,
  5278 undirected edges (151 reciprocal pairs merged).
* CiteSeer (text): 3186 nodes with text, 6 classes; 4732 citation lines, 124 self-loops, 141
  ids without text, 331 further lines dropped as dangling, 52 reciprocal pairs merged: 4225
  undirected edges; 86 isolated nodes, 472 components.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpspec import limits
from dpspec.data import data_root, read_data_text

__all__ = ["GraphDataset", "LoadReport", "load_cora", "load_citeseer", "planetoid_split", "canonical_edges"]


@dataclass
class LoadReport:
    """What the loader found and did. All counts refer to the raw files."""

    node_lines: int = 0
    nodes: int = 0
    duplicate_node_ids: int = 0
    citation_lines: int = 0
    self_loops: int = 0
    dangling_lines: int = 0
    dangling_ids: int = 0
    duplicate_lines: int = 0
    reciprocal_merged: int = 0
    edges: int = 0
    isolated_nodes: int = 0
    components: int = 0
    label_counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class GraphDataset:
    """A node-classification graph: ``node_ids[i]`` is node i; ``edges`` is (E, 2), i < j, unique."""

    name: str
    node_ids: list[str]
    labels: np.ndarray
    label_names: list[str]
    edges: np.ndarray
    features: sp.csr_matrix | None
    texts: list[str] | None
    report: LoadReport

    @property
    def num_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[0])

    @property
    def num_classes(self) -> int:
        return len(self.label_names)


def canonical_edges(pairs: list[tuple[str, str]], index: dict[str, int], report: LoadReport) -> np.ndarray:
    """Map id pairs to unique undirected edges (i < j), counting every quirk into ``report``."""
    from scipy.sparse.csgraph import connected_components

    report.citation_lines = len(pairs)
    seen_lines: set[tuple[str, str]] = set()
    missing: set[str] = set()
    keys: set[tuple[int, int]] = set()
    for a, b in pairs:
        if (a, b) in seen_lines:
            report.duplicate_lines += 1
            continue
        seen_lines.add((a, b))
        ia, ib = index.get(a), index.get(b)
        if ia is None:
            missing.add(a)
        if ib is None:
            missing.add(b)
        if a == b:
            report.self_loops += 1
            continue
        if ia is None or ib is None:
            report.dangling_lines += 1
            continue
        key = (min(ia, ib), max(ia, ib))
        if key in keys:
            report.reciprocal_merged += 1
            continue
        keys.add(key)
    report.dangling_ids = len(missing)
    edges = np.array(sorted(keys), dtype=np.int64).reshape(-1, 2)
    report.edges = int(edges.shape[0])
    n = len(index)
    adj = sp.csr_matrix(
        (np.ones(2 * len(edges)), (np.r_[edges[:, 0], edges[:, 1]], np.r_[edges[:, 1], edges[:, 0]])), shape=(n, n)
    )
    deg = np.diff(adj.indptr)
    report.isolated_nodes = int(np.count_nonzero(deg == 0))
    report.components = int(connected_components(adj, directed=False)[0])
    return edges


def _lines(text: str) -> io.StringIO:
    """The text as the file would read in text mode (universal newlines: \\r\\n and \\r become \\n)."""
    return io.StringIO(text, newline=None)


def _base(root: str | Path | None) -> Path:
    return Path(root) if root is not None else data_root()


def _read_cites(text: str, name: str) -> list[tuple[str, str]]:
    pairs = []
    for i, line in enumerate(_lines(text)):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise ValueError(f"{name}: line {i + 1} is not a citation `cited citing` ({len(parts)} fields)")
        pairs.append((parts[0], parts[1]))
    limits.require("records", len(pairs), f"the number of citation lines of {name}")
    return pairs


def load_cora(root: str | Path | None = None) -> GraphDataset:
    """Cora (LINQS release): ``cora.content`` (id, 1433 binary words, label), ``cora.cites``.

    Features are a sparse 0/1 CSR matrix; labels are indices into the sorted label names.
    """
    base = _base(root)
    content = read_data_text("cora/cora.content", base)  # the sandbox: regular files, size-capped
    cites = read_data_text("cora/cora.cites", base)
    report = LoadReport()
    ids: list[str] = []
    label_str: list[str] = []
    rows, cols = [], []
    index: dict[str, int] = {}
    width = None
    for line in _lines(content):
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 3:
            continue
        report.node_lines += 1
        if width is None:
            width = len(parts) - 2
        elif len(parts) - 2 != width:
            raise ValueError(f"cora.content: line {report.node_lines} has {len(parts) - 2} features")
        if parts[0] in index:
            report.duplicate_node_ids += 1
            continue
        i = len(ids)
        index[parts[0]] = i
        ids.append(parts[0])
        label_str.append(parts[-1])
        nz = [k for k, v in enumerate(parts[1:-1]) if v != "0"]
        rows.extend([i] * len(nz))
        cols.extend(nz)
    report.nodes = len(ids)
    limits.require("nodes", len(ids), "the number of nodes of cora")
    limits.require("columns", width or 0, "the number of features of cora")
    X = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ids), width or 0))
    names = sorted(set(label_str))
    lab_index = {s: k for k, s in enumerate(names)}
    labels = np.array([lab_index[s] for s in label_str], dtype=np.int64)
    report.label_counts = {s: int(np.count_nonzero(labels == k)) for k, s in enumerate(names)}
    edges = canonical_edges(_read_cites(cites, "cora.cites"), index, report)
    return GraphDataset("cora", ids, labels, names, edges, X, None, report)


def load_citeseer(root: str | Path | None = None) -> GraphDataset:
    """CiteSeer with raw title+abstract text (TAPE copy): ``citeseer_texts.txt`` (records of three
    lines: id, text, label) and ``citeseer.cites``. Only the 3186 papers with text are nodes;
    citations to the others are dropped and counted. ``features`` is None (use
    ``dpspec.families.gcon.encoder.tfidf_features(ds.texts)``)."""
    base = _base(root)
    texts_file = read_data_text("tag_citeseer/citeseer_texts.txt", base)
    cites = read_data_text("tag_citeseer/citeseer.cites", base)
    report = LoadReport()
    lines = _lines(texts_file).read().split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    if len(lines) % 3:
        raise ValueError(f"citeseer_texts.txt: {len(lines)} lines is not a multiple of 3")
    ids: list[str] = []
    texts: list[str] = []
    label_str: list[str] = []
    index: dict[str, int] = {}
    for k in range(0, len(lines), 3):
        pid, text, lab = lines[k].strip(), lines[k + 1], lines[k + 2].strip()
        report.node_lines += 1
        if pid in index:
            report.duplicate_node_ids += 1
            continue
        index[pid] = len(ids)
        ids.append(pid)
        texts.append(text)
        label_str.append(lab)
    report.nodes = len(ids)
    limits.require("nodes", len(ids), "the number of nodes of citeseer")
    names = sorted(set(label_str))
    lab_index = {s: k for k, s in enumerate(names)}
    labels = np.array([lab_index[s] for s in label_str], dtype=np.int64)
    report.label_counts = {s: int(np.count_nonzero(labels == k)) for k, s in enumerate(names)}
    edges = canonical_edges(_read_cites(cites, "citeseer.cites"), index, report)
    empty = sum(1 for t in texts if not t.strip())
    if empty:
        report.notes.append(f"{empty} node(s) with empty text")
    return GraphDataset("citeseer", ids, labels, names, edges, None, texts, report)


def planetoid_split(
    labels: np.ndarray, per_class: int = 20, num_val: int = 500, num_test: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random Planetoid-style split: ``per_class`` training nodes per class, then ``num_val`` and
    ``num_test`` nodes drawn from the rest (the fixed Planetoid indices are not in the raw files).
    Returns sorted ``(train, val, test)`` index arrays; label-dependent but edge-free."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train = []
    for k in np.unique(labels[labels >= 0]):
        idx = np.flatnonzero(labels == k)
        train.extend(rng.choice(idx, size=min(per_class, idx.size), replace=False).tolist())
    train_a = np.array(sorted(train), dtype=np.int64)
    rest = np.setdiff1d(np.flatnonzero(labels >= 0), train_a)
    rest = rng.permutation(rest)
    val = np.sort(rest[:num_val])
    test = np.sort(rest[num_val : num_val + num_test])
    return train_a, val, test
