"""Samplers of Alg. 3: Poisson positives over the capped edges and NEG-SAMPLE-WOR (Alg. 2).

A batch is a :class:`TupleBatch`: ``pos`` (b, 2) positive edges, ``neg`` (b, k) negative nodes,
``side`` (b, k) which endpoint of the positive each negative is paired with (0 or 1), so the
j-th negative edge of tuple i is (pos[i, side[i, j]], neg[i, j]).

Samplers that break the coupled-sampling analysis are refused by name
(:func:`make_negative_sampler`, :func:`make_positive_sampler`): with-replacement negatives
(DPS602), in-batch negatives (DPS603), negatives that depend on the positives' contents (DPS604),
shuffled or fixed-size positives (DPS605).  Alg. 2 needs |B+| k_neg <= n: when a Poisson batch
exceeds it, :func:`neg_sample_wor` raises DPS606 instead of silently changing the distribution
(the probability is reported by ``dpspec.accounting.relational.overflow_probability``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpspec.accounting.relational import RelationalSoundnessError, check_sampler

__all__ = [
    "TupleBatch",
    "PoissonEdgeSampler",
    "neg_sample_wor",
    "make_negative_sampler",
    "make_positive_sampler",
    "sample_batch",
]


@dataclass
class TupleBatch:
    pos: np.ndarray  # (b, 2) int64
    neg: np.ndarray  # (b, k) int64
    side: np.ndarray  # (b, k) int64 in {0, 1}

    @property
    def size(self) -> int:
        return int(self.pos.shape[0])

    @property
    def k(self) -> int:
        return int(self.neg.shape[1]) if self.neg.ndim == 2 else 0

    def nodes_of(self, i: int) -> set[int]:
        """V_{T_i}: both ends of the positive and every negative node."""
        return {int(self.pos[i, 0]), int(self.pos[i, 1])} | {int(v) for v in self.neg[i]}

    def node_slots(self) -> np.ndarray:
        """(b, 2 + k) node ids per tuple: [u, v, n_1 .. n_k]."""
        return np.concatenate([self.pos, self.neg], axis=1)


class PoissonEdgeSampler:
    """Each capped edge independently with probability ``rate`` (Alg. 3 line 'E+ ~ Poisson')."""

    def __init__(self, edges: np.ndarray, rate: float, rng: np.random.Generator):
        if not 0 <= rate <= 1:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        self.edges = np.asarray(edges, dtype=np.int64)
        self.rate = float(rate)
        self.rng = rng

    def __call__(self) -> np.ndarray:
        mask = self.rng.random(self.edges.shape[0]) < self.rate
        return self.edges[mask]


def neg_sample_wor(pos: np.ndarray, k: int, num_nodes: int, rng: np.random.Generator) -> TupleBatch:
    """Alg. 2 (NEG-SAMPLE-WOR): b k distinct nodes uniformly from all nodes, each paired with a
    uniformly random endpoint of its tuple's positive.  Depends on ``pos`` only through b."""
    b = int(pos.shape[0])
    if b * k > num_nodes:
        raise RelationalSoundnessError(
            f"|B+| k_neg = {b} x {k} > n = {num_nodes}: NEG-SAMPLE-WOR is infeasible for this batch",
            rule="DPS606",
            hint="lower the sampling rate or k_neg (expected batch x k_neg << n)",
        )
    if k == 0 or b == 0:
        return TupleBatch(pos.reshape(-1, 2), np.zeros((b, k), np.int64), np.zeros((b, k), np.int64))
    nodes = rng.choice(num_nodes, size=b * k, replace=False).reshape(b, k)
    side = rng.integers(0, 2, size=(b, k))
    return TupleBatch(pos, nodes.astype(np.int64), side.astype(np.int64))


def make_negative_sampler(kind: str):
    """The negative sampler for ``kind``; only ``"wor"`` (Alg. 2) and ``"none"`` exist, the
    others raise their named error (DPS602/603/604)."""
    check_sampler("poisson", kind)
    if kind == "wor":
        return neg_sample_wor
    if kind == "none":
        return lambda pos, k, n, rng: neg_sample_wor(pos, 0, n, rng)
    raise RelationalSoundnessError(f"unknown negative sampler {kind!r}", rule="DPS611")


def make_positive_sampler(kind: str, edges, rate, rng):
    check_sampler(kind, "wor")
    return PoissonEdgeSampler(edges, rate, rng)


def sample_batch(pos_sampler: PoissonEdgeSampler, k: int, num_nodes: int, rng: np.random.Generator) -> TupleBatch:
    pos = pos_sampler()
    return neg_sample_wor(pos, k, num_nodes, rng)
