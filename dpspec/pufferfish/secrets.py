"""Secrets defined by a predicate on a record (``secret disease = num > 0``): the labels of the records.

A predicate secret is binary, with values ``true`` and ``false``: the discriminative pair is
(s(x_i) = true, s(x_i) = false) for the protected record i (Kifer & Machanavajjhala 2014, §3.1: secrets
are statements about an individual's record; a predicate of the record is one).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PREDICATE_VALUES", "predicate_labels", "label_text"]

PREDICATE_VALUES = ("true", "false")

_OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


def label_text(x) -> str:
    """A column value as a label: 1.0 is "1" (so `num == 1` matches the coded value 1)."""
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return str(int(x))
    return str(x)


def predicate_labels(values, op: str, threshold=None, members=()) -> np.ndarray:
    """Labels "true"/"false" per record for ``column op threshold`` (or ``column in members``).

    Order comparisons need numbers (a non-finite value is an error, never silently false);
    ``==``/``!=``/``in`` compare the values' label text (``label_text``) with the spec's text."""
    v = np.asarray(values, dtype=object)
    if op in _OPS:
        try:
            x = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"the comparison `{op}` needs a numeric column") from None
        if not np.all(np.isfinite(x)):
            raise ValueError("the column has missing or non-finite values")
        hit = _OPS[op](x, float(threshold))
    else:
        text = np.array([label_text(a) for a in v.tolist()], dtype=object)
        if op == "in":
            hit = np.isin(text, [str(m) for m in members])
        elif op in ("==", "!="):
            t = label_text(threshold) if not isinstance(threshold, str) else threshold
            hit = text == t if op == "==" else text != t
        else:
            raise ValueError(f"unknown predicate operator {op!r}")
    return np.where(np.asarray(hit, dtype=bool), PREDICATE_VALUES[0], PREDICATE_VALUES[1]).astype(object)
