"""Resolve a spec's data binding (``csv(...)``, ``synthetic(...)``, ``dataset(name)``) to a Table, and a
graph binding (``graph cora``, ``synthetic(generator = sbm_graph, ...)``, a bound graph) to a GraphDataset
(``load_graph``).

``csv`` paths are relative to the data root and are read through its sandbox (see
:mod:`dpspec.data`). Known schemas (``adult``, ``heart_cleveland``,
``student``) use loaders that handle each file's real quirks; any other CSV is read with a header
row, the given separator, and ``?``/empty as missing (rows with a missing value are dropped and
counted).
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import numpy as np

from dpspec import limits
from dpspec.data import data_root, read_data_text, tabular
from dpspec.data.synthetic import generate
from dpspec.errors import DpspecError
from dpspec.ir import models as ir

SCHEMAS = ("adult", "heart_cleveland", "student")


class DataBindingError(DpspecError, ValueError):
    """The binding names a file/schema/dataset that cannot be used (message says why)."""


def load_table(binding, bound: dict | None = None, missing: str = "drop") -> tabular.Table:
    """``missing``: ``drop`` rows with a missing value (default) or ``keep`` them as nan/None
    (files only; a bound dataset is used as given)."""
    if isinstance(binding, ir.SyntheticData):
        return generate(binding.generator, binding.size, binding.seed)
    if isinstance(binding, ir.NamedData):
        bound = bound or {}
        if binding.name not in bound:
            raise DataBindingError(
                f"dataset `{binding.name}` is not bound; pass data={{'{binding.name}': ...}} to dpspec.compile"
            )
        return as_table(bound[binding.name], binding.name)
    if isinstance(binding, ir.CsvData):
        return _load_csv(binding, missing)
    raise DataBindingError(f"a {binding.source} binding does not hold a table")


def _frame_columns(obj) -> dict | None:
    """A pandas DataFrame, a polars DataFrame or LazyFrame as a dict of numpy columns (missing values: nan in
    numeric columns, None in others), or None for any other object. Neither library is imported here: an
    object is recognised by the module its type comes from."""
    mod = type(obj).__module__.split(".")[0]
    if mod == "pandas" and hasattr(obj, "columns"):
        out = {}
        for c in obj.columns:
            col = obj[c]
            if col.dtype.kind in "fiub":
                out[str(c)] = col.to_numpy(dtype=float, na_value=np.nan)
            else:
                out[str(c)] = np.array([None if v is None or v != v else v for v in col.tolist()], dtype=object)
        return out
    if mod == "polars" and (hasattr(obj, "get_column") or hasattr(obj, "collect")):
        if not hasattr(obj, "get_column"):  # a LazyFrame: evaluated by polars' streaming engine first
            obj = obj.collect(engine="streaming")
        out = {}
        for c in obj.columns:
            col = obj.get_column(c)
            if col.dtype.is_numeric():
                out[str(c)] = col.cast(float).fill_null(float("nan")).to_numpy()
            else:
                out[str(c)] = np.array(col.to_list(), dtype=object)
        return out
    return None


def as_table(obj, name: str) -> tabular.Table:
    if isinstance(obj, tabular.Table):
        return obj
    frame = _frame_columns(obj)
    if frame is not None:
        obj = frame
    if isinstance(obj, dict):
        data, numeric = {}, set()
        n = None
        for k, v in obj.items():
            a = np.asarray(v)
            if a.ndim != 1:
                raise DataBindingError(f"column `{k}` of dataset `{name}` must be one-dimensional")
            n = len(a) if n is None else n
            if len(a) != n:
                raise DataBindingError(f"dataset `{name}`: columns have different lengths")
            if a.dtype.kind in "fiub":
                data[k] = a.astype(float)
                numeric.add(k)
            else:
                data[k] = a.astype(object)
        return tabular.Table(name, tuple(data), data, frozenset(numeric), n_raw=n or 0, sources=(f"bound:{name}",))
    raise DataBindingError(
        f"dataset `{name}` must be a dpspec Table, a dict of columns, or a pandas or polars DataFrame"
    )


def schema_columns(schema: str, path: str) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """(columns, numeric columns) a named schema gives a file, known without reading it (None: not known)."""
    if schema == "adult":
        return tabular.ADULT_COLUMNS, frozenset(tabular._ADULT_NUMERIC)
    if schema == "heart_cleveland":
        return tabular.HEART_COLUMNS, frozenset(tabular.HEART_COLUMNS)
    return None


def _load_csv(b: ir.CsvData, missing: str = "drop") -> tabular.Table:
    # the binding itself is checked before the data root is looked up
    name = Path(b.path).name
    split = {"adult.data": "train", "adult.test": "test"}.get(name)
    subject = {"student-mat.csv": "mat", "student-por.csv": "por"}.get(name)
    if b.schema_name == "adult" and split is None:
        raise DataBindingError("schema adult reads adult/adult.data or adult/adult.test")
    if b.schema_name == "student" and subject is None:
        raise DataBindingError("schema student reads student/student-mat.csv or student/student-por.csv")
    if b.schema_name not in (None, *SCHEMAS):
        raise DataBindingError(f"unknown schema `{b.schema_name}`; known: {', '.join(SCHEMAS)} (or omit it)")
    root = data_root()
    if b.schema_name == "adult":
        assert split is not None  # (refused above)
        return tabular.load_adult(split, missing=missing, root=root)
    if b.schema_name == "heart_cleveland":
        return tabular.load_heart_cleveland(missing=missing, root=root)
    if b.schema_name == "student":
        assert subject is not None  # (refused above)
        return tabular.load_student(subject, missing=missing, root=root)
    sep = b.separator or ","
    if len(sep) != 1 or sep in ('"', "\n", "\r"):
        raise DataBindingError(f"the separator must be one character other than a quote or a newline, got {sep!r}")
    text = read_data_text(b.path, root)  # the sandbox: inside the data root, a regular file, size-capped
    reader = csv.reader(tabular.text_lines(text), delimiter=sep, skipinitialspace=True)
    try:
        header = next(reader, None)
        if not header:
            raise DataBindingError(f"{b.path} is empty")
        rows = [r for r in reader if r]
    except csv.Error as e:
        raise DataBindingError(f"{b.path} is not valid CSV: {e}") from None
    path = root / b.path
    numeric = set()
    for j, c in enumerate(header):
        vals = [r[j] for r in rows if j < len(r) and r[j] not in ("", "?")]
        try:
            [float(x) for x in vals]
            numeric.add(c)
        except ValueError:
            pass
    return tabular._build(f"csv:{b.path}", tuple(header), rows, numeric, missing, [path])


def fingerprint(*arrays) -> str:
    """sha256 over the bytes of the arrays actually used (numbers as float64, labels as text)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind in "fiub":
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        else:
            h.update("\x1f".join(map(str, a.ravel().tolist())).encode("utf-8"))
        h.update(b"\x1e")
    return "sha256:" + h.hexdigest()


# --- graphs: a training's `data graph ...` binding ------------------------------------------------


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
