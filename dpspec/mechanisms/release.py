"""What a one-shot release returns: the noised answer and the private report of what it read.

Shared by the release families' runtime classes (the Gaussian release, the sliced Wasserstein and
Wasserstein mechanisms), with the column reading of those that read a matrix (:func:`query_columns`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


@dataclass(frozen=True)
class ReleaseReport:
    """What one release read: ``rows`` of the data, ``clamped`` values moved into their bounds,
    ``missing`` values replaced by a bound, and a sha256 ``data_fingerprint`` of the columns read.

    These are **private quantities**: the row count, the clamped and missing counts and the
    fingerprint are functions of the data that no noise covers (under add/remove the row count
    differs between neighbours). Keep the report with the data; publish only ``Released.value``."""

    target: str
    query: str
    rows: int
    clamped: int
    missing: int
    data_fingerprint: str
    data_source: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Released(NamedTuple):
    """The noised answer (the only thing the certificate covers) and the private run report."""

    value: Any
    report: ReleaseReport


def release_table(name: str, data: Any, bound: Any, bound_source: str | None, data_name: str | None):
    """``(table, source)`` a release evaluates its query on: the data given to ``release(data)``, or the data
    bound when the spec was compiled; anything else is refused (``DataMismatchError``, DPS148)."""
    from dpspec.data.bind import DataBindingError, as_table
    from dpspec.mechanisms.errors import DataMismatchError

    if data is None:
        if bound is None:
            where = (
                f"its dataset `{data_name}` is bound at run time"
                if data_name
                else "no data was bound when the spec was compiled"
            )
            raise DataMismatchError(f"`{name}`: {where}; pass it as release(data) [DPS148]")
        return bound, bound_source
    try:
        return as_table(data, data_name or name), "given to release()"
    except DataBindingError as e:
        raise DataMismatchError(f"`{name}`: {e} [DPS148]") from None


def query_columns(name: str, columns: tuple[str, ...], data: Any) -> np.ndarray:
    """The matrix of ``columns``, in order, that the release ``name`` reads from ``data`` (a Table, a dict of
    columns, or a matrix whose columns are ``columns`` in order), refusing data without them
    (``DataMismatchError``, DPS148) before anything is read."""
    from dpspec.diagnostics import did_you_mean
    from dpspec.mechanisms.errors import DataMismatchError

    if not hasattr(data, "matrix") and not isinstance(data, dict):
        X = np.asarray(data, dtype=float)
        if X.ndim != 2 or X.shape[1] != len(columns):
            raise DataMismatchError(
                f"`{name}` reads {len(columns)} columns ({', '.join(columns)}); "
                f"a matrix of shape {X.shape} does not have them [DPS148]"
            )
        return X
    names = tuple(data.columns) if hasattr(data, "matrix") else tuple(data)
    for c in columns:
        if c not in names:
            raise DataMismatchError(
                f"`{name}` reads column `{c}`, which the data does not have ("
                f"{did_you_mean(c, names, 'column') or 'its columns are ' + ', '.join(names)}) "
                "[DPS148]"
            )
    if hasattr(data, "matrix"):
        try:
            return data.matrix(columns)
        except ValueError as e:
            raise DataMismatchError(f"`{name}`: {e} [DPS148]") from None
    return np.column_stack([np.asarray(data[c], dtype=float) for c in columns])
