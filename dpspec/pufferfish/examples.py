"""Small callables referenced by example specs, docs and tests (``"dpspec.pufferfish.examples:…"``).

A spec names a Python function as ``"module:function"``: a query (``callable(...)``) maps a
dataset (rows × the named columns) to a vector; a sampler world (``sampler(...)``) draws datasets
from X | secret as ``fn(secret, n, rng)``.
"""

from __future__ import annotations

import numpy as np


def column_means(X) -> np.ndarray:
    """The column means of a dataset."""
    return np.asarray(X, dtype=float).mean(axis=0)


def draw_groups(secret, n, rng) -> list[np.ndarray]:
    """n datasets of 20 rows and 2 columns in [0, 10]; the mean shifts with the secret (A < B < C)."""
    shift = {"A": 0.0, "B": 1.0, "C": 2.0}[str(secret)]
    return [np.clip(rng.normal(4.0 + shift, 1.5, size=(20, 2)), 0.0, 10.0) for _ in range(n)]
