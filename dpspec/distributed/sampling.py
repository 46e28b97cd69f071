"""Global samplers: the declared sampling over the WHOLE dataset, identical on every rank.

Every rank builds the sampler from the same seed and draws the same global batch (Poisson: each
of the n examples independently with probability q; without replacement: a uniform B-subset);
it then keeps :func:`~dpspec.distributed.comm.shard_indices` of the selected indices. The
per-rank batches are therefore a partition of one batch drawn exactly as the accountant assumes —
unlike a per-worker ``DistributedSampler``, which shuffles and splits the *dataset* and would make
the effective sampling fixed-size-per-rank (not the declared one).

The generator consumption is the single-process trainers': :class:`GlobalSampler` with
``seed`` draws the batches ``DpSgd.batches(n, np.random.default_rng(seed))`` draws.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .comm import Comm

__all__ = ["GlobalSampler"]


@dataclass
class GlobalSampler:
    """``scheme``: "poisson" (``rate``) or "without_replacement" (``batch_size``) over ``n`` examples."""

    n: int
    scheme: str
    rate: float | None = None
    batch_size: int | None = None
    seed: int | None = None
    comm: Comm | None = None

    def __post_init__(self):
        if self.scheme not in ("poisson", "without_replacement"):
            raise ValueError(f"scheme must be 'poisson' or 'without_replacement', got {self.scheme!r}")
        self.rng = np.random.default_rng(self.seed)
        self.step = 0

    def draw_global(self) -> np.ndarray:
        if self.scheme == "poisson":
            return np.flatnonzero(self.rng.random(self.n) < self.rate)
        if self.batch_size is None:
            raise ValueError("the without_replacement scheme needs batch_size")
        return self.rng.choice(self.n, size=int(self.batch_size), replace=False)

    def draw(self) -> tuple[np.ndarray, np.ndarray]:
        """(global batch, this rank's shard); checks that all ranks drew the same batch."""
        idx = self.draw_global()
        local = idx
        if self.comm is not None:
            self.comm.check_consensus(idx, self.step)
            local = self.comm.shard(idx)
        self.step += 1
        return idx, local

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        while True:
            yield self.draw()
