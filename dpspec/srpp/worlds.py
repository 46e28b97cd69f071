"""Two-world Pufferfish scenarios for SRPP-SGD experiments (ZV25 App. W.3).

:func:`prevalence_worlds` builds the class-prevalence secret of the CIFAR experiment for any label
vector: world s₀ has exactly n₀ = ⌊p_low N⌋ records of the secret class, world s₁ exactly
n₁ = ⌊p_high N⌋, each reached by *minimal* relabelling (first from the original labels to s₀, then
from s₀ to s₁), so the two label vectors differ in exactly Δ = |n₁ − n₀| records — the input of
:class:`~dpspec.srpp.discrepancy.FixedPairWorlds` (note ⌊0.10004·50000⌋ − ⌊0.1·50000⌋ = 2, not the
paper's 20; digest §13.2).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["prevalence_worlds", "relabel_to_count"]


def relabel_to_count(labels, secret_class, target: int, rng: np.random.Generator, n_classes: int | None = None):
    """Minimal relabelling of ``labels`` to exactly ``target`` records of ``secret_class``:
    random non-secret records become the secret class, or random secret records get a uniformly
    drawn other class. Returns a new array."""
    y = np.asarray(labels).copy()
    N = y.shape[0]
    if not (0 <= int(target) <= N):
        raise ValueError(f"target count must lie in [0, {N}], got {target!r}")
    classes = np.unique(y) if n_classes is None else np.arange(int(n_classes))
    others = classes[classes != secret_class]
    if others.size == 0:
        raise ValueError("the labels need at least one class besides the secret class")
    is_s = y == secret_class
    n = int(is_s.sum())
    if n < target:
        pick = rng.choice(np.flatnonzero(~is_s), size=target - n, replace=False)
        y[pick] = secret_class
    elif n > target:
        pick = rng.choice(np.flatnonzero(is_s), size=n - target, replace=False)
        y[pick] = rng.choice(others, size=pick.size)
    return y


def prevalence_worlds(
    labels, secret_class, p_low: float, p_high: float, *, seed: int = 0, n_classes: int | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """(y₀, y₁, Δ): the two label worlds of ZV25 App. W.3 with prevalences p_low and p_high."""
    y = np.asarray(labels)
    N = y.shape[0]
    if not (0.0 <= p_low <= 1.0 and 0.0 <= p_high <= 1.0):
        raise ValueError("prevalences must lie in [0, 1]")
    rng = np.random.default_rng(seed)
    n0, n1 = math.floor(p_low * N), math.floor(p_high * N)
    y0 = relabel_to_count(y, secret_class, n0, rng, n_classes)
    y1 = relabel_to_count(y0, secret_class, n1, rng, n_classes)
    delta = int((y0 != y1).sum())
    assert delta == abs(n1 - n0)
    return y0, y1, delta
