"""Resolve a spec's data binding (``csv(...)``, ``synthetic(...)``, ``dataset(name)``) to a Table.

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
