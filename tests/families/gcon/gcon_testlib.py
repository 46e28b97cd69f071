"""Helpers for the GCON tests: small random graphs and unit-norm features."""

from __future__ import annotations

import numpy as np


def er_edges(n: int, p: float, rng: np.random.Generator) -> np.ndarray:
    iu = np.triu_indices(n, 1)
    keep = rng.random(iu[0].size) < p
    return np.stack([iu[0][keep], iu[1][keep]], axis=1)


def star_edges(n: int) -> np.ndarray:
    return np.stack([np.zeros(n - 1, dtype=int), np.arange(1, n)], axis=1)


def path_edges(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def unit_rows(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def sbm(n: int, c: int, p_in: float, p_out: float, rng: np.random.Generator):
    lab = rng.integers(0, c, n)
    iu = np.triu_indices(n, 1)
    same = lab[iu[0]] == lab[iu[1]]
    keep = rng.random(iu[0].size) < np.where(same, p_in, p_out)
    edges = np.stack([iu[0][keep], iu[1][keep]], axis=1)
    return lab, edges
