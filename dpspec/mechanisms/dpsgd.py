"""The DP-SGD runtime: samples batches as accounted, clips per-example gradients, adds noise.

What the certificate assumes, this object does:
- Poisson sampling draws each example independently with probability q at every step (the
  batch size is random, possibly 0); without-replacement sampling draws a fresh uniform subset
  of exactly B examples at every step. Never "shuffle and call it Poisson".
- Per-example gradients come from ``torch.func`` (vmap over grad; shared utilities in
  :mod:`dpspec.mechanisms.per_example`, with the equivalent ghost-norm path for Sequential MLPs);
  each is clipped to ℓ2 norm ≤ C (flat) or each layer to C_l (per-layer, total C = √Σ C_l²)
  before summation.
- The clipped sum gets N(0, (σC)² I) noise exactly once per step, then is divided by the
  *expected* batch size qn (or B), a data-independent constant.

torch is imported lazily: compiling a spec never imports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np


@dataclass
class TrainingReport:
    steps: int
    noise_std: float
    batch_sizes: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    skipped_nonfinite: list[int] = field(default_factory=list)
    injected_noise_std: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class DpSgd:
    noise_multiplier: float
    clip_norm: float
    sampling: str  # "poisson", "without_replacement" or "full_batch"
    sample_rate: float
    steps: int
    batch_size: float | None = None
    dataset_size: int | None = None
    learning_rate: float = 0.1
    momentum: float = 0.0
    per_layer_clip: tuple[float, ...] | None = None
    name: str = "train"

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise added to the clipped gradient sum (σ·C)."""
        return self.noise_multiplier * self.clip_norm

    # --- sampling ---------------------------------------------------------------------------------

    def batches(self, n: int, rng: np.random.Generator, steps: int | None = None) -> Iterator[np.ndarray]:
        """Index arrays, one per step, drawn exactly as the accountant assumes."""
        if self.dataset_size is not None and n != self.dataset_size:
            raise ValueError(f"the data has {n} examples but the certificate assumes dataset_size = "
                             f"{self.dataset_size}; recompile with the right size")
        for _ in range(self.steps if steps is None else steps):
            if self.sampling == "poisson":
                yield np.flatnonzero(rng.random(n) < self.sample_rate)
            elif self.sampling == "without_replacement":
                yield rng.choice(n, size=int(self.batch_size), replace=False)
            else:
                yield np.arange(n)

    def expected_batch(self, n: int) -> float:
        if self.sampling == "without_replacement":
            return float(self.batch_size)
        return self.sample_rate * n

    # --- one private step ---------------------------------------------------------------------------

    def private_gradients(self, model, loss_fn: Callable, xb, yb, n: int, generator=None, comm=None):
        """Clipped, noised, normalised gradient for each trainable parameter (a dict name → tensor).

        Per-example gradients and clipping come from :mod:`dpspec.mechanisms.per_example` (torch.func
        vmap over grad; the ghost-norm path for Sequential MLPs). If any example has a non-finite
        gradient the returned gradients are non-finite, so that :meth:`train` skips the step and
        records it (the behaviour of this runtime since its first version).
        """
        import torch

        from dpspec.mechanisms.per_example import clipped_grad_sum, trainable_parameters

        params = trainable_parameters(model)
        if self.per_layer_clip is not None and len(self.per_layer_clip) != len(params):
            raise ValueError(f"per-layer clipping gives {len(self.per_layer_clip)} norms for "
                             f"{len(params)} parameter tensors")
        cs = clipped_grad_sum(model, loss_fn, xb, yb,
                              clip=None if self.per_layer_clip is not None else self.clip_norm,
                              per_layer_clips=self.per_layer_clip)
        summed = cs.sums
        if cs.nonfinite:
            summed = {k: torch.full_like(v, float("nan")) for k, v in summed.items()}
        denom = self.expected_batch(n)
        if comm is not None:
            # distributed (dpspec.distributed): (xb, yb) is this rank's shard of the global batch;
            # the clipped sums are all-reduced and the noise is added once, on rank 0, before the sum
            std = self.noise_std
            reduced = comm.noisy_sum(summed, lambda i, s: torch.normal(0.0, std, size=s.shape, generator=generator,
                                                                       dtype=s.dtype))
            return {k: v / denom for k, v in reduced.items()}
        out = {}
        for k, s in summed.items():
            noise = torch.normal(0.0, self.noise_std, size=s.shape, generator=generator, dtype=s.dtype)
            out[k] = (s + noise) / denom
        return out

    # --- a whole run -------------------------------------------------------------------------------

    def train(self, model, X, y, loss_fn: Callable | None = None, *, seed: int | None = None,
              progress: bool = False, steps: int | None = None, comm=None) -> TrainingReport:
        """Train ``model`` in place on tensors (X, y) for the certified number of steps.

        ``comm`` (a :class:`dpspec.distributed.Comm`): run data-parallel — every rank draws the same
        global batch, clips its shard, and the noise is added once per step (docs/distributed.md)."""
        import torch

        if loss_fn is None:
            loss_fn = torch.nn.functional.cross_entropy
        n = len(X)
        rng = np.random.default_rng(seed)
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=self.learning_rate,
                              momentum=self.momentum)
        total = self.steps if steps is None else min(steps, self.steps)
        rep = TrainingReport(steps=total, noise_std=self.noise_std)
        names = [k for k, p in model.named_parameters() if p.requires_grad]
        if comm is not None:
            comm.broadcast_parameters(model)
        for t, idx in enumerate(self.batches(n, rng, total)):
            if comm is not None:
                comm.check_consensus(idx, t)
                local = comm.shard(idx)
                xb, yb = X[local], y[local]
            else:
                xb, yb = X[idx], y[idx]
            grads = self.private_gradients(model, loss_fn, xb, yb, n, generator=gen, comm=comm)
            if not all(torch.isfinite(g).all() for g in grads.values()):
                rep.skipped_nonfinite.append(t)  # recorded, never silent: the step is dropped
                continue
            for k, p in zip(names, (p for p in model.parameters() if p.requires_grad)):
                p.grad = grads[k]
            opt.step()
            rep.batch_sizes.append(len(idx))
            if progress and (t % max(1, total // 20) == 0 or t == total - 1):
                print(f"  step {t + 1}/{total}", flush=True)
        return rep


def steps_for_epochs(epochs: float, rate: float) -> int:
    return max(1, math.ceil(epochs / rate))
