"""CSV loaders for the small tabular datasets under the data root (pandas-free).

Datasets (see ``shared/data/README.md`` for provenance and checksums):

* UCI Adult: ``adult/adult.data`` (32,561 rows) and ``adult/adult.test`` (16,281 rows; its first
  line is the banner ``|1x3 Cross validator``; labels carry a trailing ``.``). Separator ``", "``,
  missing values ``?`` (2,399 / 1,221 rows contain one), no header.
* UCI Heart Disease, Cleveland processed: ``heart_cleveland/processed.cleveland.data`` (303 rows,
  14 float columns, 6 ``?`` values: ca 4, thal 2), no header.
* UCI Student Performance: ``student/student-mat.csv`` (395) and ``student-por.csv`` (649);
  separator ``;``, quoted strings, header row.

Missing values are handled explicitly: ``missing="drop"`` (default) removes every row with a missing
value and reports how many (``Table.n_dropped``, per column ``Table.missing_counts``);
``missing="keep"`` keeps them as ``nan`` (numeric columns) or ``None`` (categorical columns).
Files are read from the data root (:func:`dpspec.data.data_root`), through its sandbox
(:func:`dpspec.data.read_data_text`: regular files inside the root, size-capped); nothing is copied.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dpspec import limits

from . import data_root, read_data_text

__all__ = [
    "Table",
    "ADULT_COLUMNS",
    "HEART_COLUMNS",
    "load_adult",
    "load_heart_cleveland",
    "load_student",
]

ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
_ADULT_NUMERIC = {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
HEART_COLUMNS = (
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
    "num",
)


@dataclass(frozen=True, eq=False)
class Table:
    """A small column store: numeric columns as float64 arrays, categorical ones as object arrays."""

    name: str
    columns: tuple[str, ...]
    data: dict
    numeric_columns: frozenset
    n_raw: int
    n_dropped: int = 0
    rows_with_missing: int = 0
    missing_counts: dict = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(next(iter(self.data.values())).shape[0]) if self.data else 0

    @property
    def n_rows(self) -> int:
        return len(self)

    def column(self, name: str) -> np.ndarray:
        if name not in self.data:
            raise KeyError(f"{self.name}: no column {name!r}; columns are {list(self.columns)}")
        return self.data[name]

    def is_numeric(self, name: str) -> bool:
        self.column(name)
        return name in self.numeric_columns

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        """Float matrix (n, k) of numeric columns (in the given order)."""
        cols = []
        for n in names:
            if not self.is_numeric(n):
                raise ValueError(f"{self.name}: column {n!r} is categorical; encode it first (codes())")
            cols.append(self.column(n))
        return np.column_stack(cols) if cols else np.zeros((len(self), 0))

    def codes(self, name: str, categories: Sequence | None = None) -> tuple[np.ndarray, tuple]:
        """Integer codes of a categorical column and the category list (order of first appearance)."""
        v = self.column(name)
        cats = tuple(dict.fromkeys(x for x in v.tolist() if x is not None)) if categories is None else tuple(categories)
        index = {c: i for i, c in enumerate(cats)}
        out = np.array([index.get(x, -1) for x in v.tolist()], dtype=np.int64)
        if np.any(out < 0):
            raise ValueError(f"{self.name}: column {name!r} has values outside {cats!r}")
        return out, cats

    def select(self, mask) -> Table:
        mask = np.asarray(mask)
        return Table(
            self.name,
            self.columns,
            {k: v[mask] for k, v in self.data.items()},
            self.numeric_columns,
            self.n_raw,
            self.n_dropped,
            self.rows_with_missing,
            dict(self.missing_counts),
            self.sources,
        )


def _root(root) -> Path:
    return Path(root) if root is not None else data_root()


def _read(root, relative: str) -> tuple[str, Path]:
    """(text, path for the record) of a file under the data root, read through the sandbox."""
    base = _root(root)
    return read_data_text(relative, base), base / relative


def text_lines(text: str):
    """The lines of a text as a file would give them (newlines kept, for csv.reader)."""
    return io.StringIO(text, newline="")


def _build(name, columns, rows, numeric, missing, sources, missing_token="?") -> Table:
    if missing not in ("drop", "keep"):
        raise ValueError(f"missing must be 'drop' or 'keep', got {missing!r}")
    limits.require("records", len(rows), f"the number of rows of {name}")
    limits.require("columns", len(columns), f"the number of columns of {name}")
    n_raw = len(rows)
    miss = np.zeros((n_raw, len(columns)), dtype=bool)
    for i, r in enumerate(rows):
        if len(r) != len(columns):
            raise ValueError(f"{name}: row {i + 1} has {len(r)} fields, expected {len(columns)}")
        for j, x in enumerate(r):
            if x == missing_token or x == "":
                miss[i, j] = True
    missing_counts = {c: int(miss[:, j].sum()) for j, c in enumerate(columns) if miss[:, j].any()}
    row_missing = np.any(miss, axis=1)  # (one flag per row; the method's stub allows a scalar)
    keep = ~row_missing if missing == "drop" else np.ones(n_raw, dtype=bool)
    data = {}
    for j, c in enumerate(columns):
        vals = [r[j] for r, k in zip(rows, keep) if k]
        mj = [m for m, k in zip(miss[:, j], keep) if k]
        if c in numeric:
            arr = np.array([np.nan if m else float(x) for x, m in zip(vals, mj)], dtype=float)
        else:
            arr = np.array([None if m else x for x, m in zip(vals, mj)], dtype=object)
        data[c] = arr
    return Table(
        name,
        tuple(columns),
        data,
        frozenset(numeric),
        n_raw,
        int(n_raw - keep.sum()),
        int(row_missing.sum()),
        missing_counts,
        tuple(str(s) for s in sources),
    )


def _read_adult_file(text: str, test: bool) -> list[list[str]]:
    rows = []
    for i, line in enumerate(text_lines(text)):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue  # the trailing blank line
        if i == 0 and line.startswith("|"):
            continue  # adult.test banner "|1x3 Cross validator"
        fields = [f.strip() for f in line.split(",")]
        if test and fields and fields[-1].endswith("."):
            fields[-1] = fields[-1][:-1]
        rows.append(fields)
    return rows


def load_adult(split: str = "train", *, missing: str = "drop", root=None) -> Table:
    """UCI Adult: ``split`` in {"train" (adult.data), "test" (adult.test), "both"}.

    Raw rows: 32,561 / 16,281; with ``missing="drop"``: 30,162 / 15,060. Income labels are
    normalised to ``"<=50K"`` / ``">50K"`` (the test file's trailing period removed).
    """
    if split not in ("train", "test", "both"):
        raise ValueError(f"split must be 'train', 'test' or 'both', got {split!r}")
    files = {
        "train": [("adult.data", False)],
        "test": [("adult.test", True)],
        "both": [("adult.data", False), ("adult.test", True)],
    }[split]
    rows, sources = [], []
    for fname, test in files:
        text, p = _read(root, f"adult/{fname}")
        rows += _read_adult_file(text, test)
        sources.append(p)
    return _build(f"adult:{split}", ADULT_COLUMNS, rows, _ADULT_NUMERIC, missing, sources)


def load_heart_cleveland(*, missing: str = "drop", root=None) -> Table:
    """UCI Heart Disease (Cleveland, processed): 303 rows; 297 after dropping the 6 ``?`` rows.

    All columns are numeric (floats such as ``63.0``); ``num`` is 0 (no disease) … 4.
    """
    text, p = _read(root, "heart_cleveland/processed.cleveland.data")
    rows = []
    for line in text_lines(text):
        line = line.strip()
        if line:
            rows.append([f.strip() for f in line.split(",")])
    return _build("heart_cleveland", HEART_COLUMNS, rows, set(HEART_COLUMNS), missing, [p])


def load_student(subject: str = "mat", *, missing: str = "drop", root=None) -> Table:
    """UCI Student Performance, ``subject`` in {"mat" (395 rows), "por" (649 rows)}.

    ``;``-separated with a header and quoted strings; a column is numeric when every value parses
    as a number (so the quoted ``"5"`` grades G1/G2 are numeric).
    """
    if subject not in ("mat", "por"):
        raise ValueError(f"subject must be 'mat' or 'por', got {subject!r}")
    text, p = _read(root, f"student/student-{subject}.csv")
    reader = csv.reader(text_lines(text), delimiter=";", quotechar='"')
    header = next(reader, None)
    if not header:
        raise ValueError(f"student-{subject}.csv is empty")
    rows = [r for r in reader if r]
    numeric = set()
    for j, c in enumerate(header):
        ok = True
        for r in rows:
            x = r[j] if j < len(r) else ""
            if x in ("", "?"):
                continue
            try:
                float(x)
            except ValueError:
                ok = False
                break
        if ok:
            numeric.add(c)
    return _build(f"student:{subject}", tuple(header), rows, numeric, missing, [p])
