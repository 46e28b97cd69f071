"""DP-SGD's backend for ``dpspec.torch.make_private`` (``Family.torch_backend`` in :mod:`dpspec.families`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpspec.mechanisms.noise_device import device_generator, parameter_device


def backend(mech) -> type:
    # a runtime class may name its own backend (the audit's wrapper mutants, dpspec/families/dpsgd/wrapper_audit.py)
    return getattr(type(mech), "torch_backend", None) or DpSgdBackend


_FOLD = 64  # steps whose non-finite masks are added to the count at once


class DpSgdBackend:
    """``optimizer.step()`` is ``DpSgd.private_gradients`` then the user's optimizer on the noisy gradient."""

    def __init__(
        self,
        mech,
        model,
        optimizer,
        criterion,
        n: int,
        seed,
        secure: bool = False,
        cuda_graph: bool = False,
        block_size: int | None = None,
    ):
        if optimizer is None:
            raise ValueError("give the optimizer (e.g. torch.optim.SGD(model.parameters(), lr=...))")
        self.mech, self.model, self.inner, self.criterion, self.n = mech, model, optimizer, criterion, n
        self.ledger = mech.ledger
        self.secure = bool(secure)
        # the clipped sum computed on blocks of this many rows, each alone, added in order (make_private's
        # block_size: the same bits for every physical batch size that is a multiple of it); None: the batch at once
        self.block_size = block_size
        # examples whose gradient was non-finite and zeroed (private; never publish): a device tensor while
        # unread, so that a step makes no host read for it; the masks of the last steps' zeroed examples
        # (ClippedSum's, on the device) are added to it a few dozen steps at a time (two operations per
        # step fewer than a sum and an addition per step)
        self._nonfinite: Any = 0
        self._nonfinite_masks: list = []
        if self.secure:  # the OS CSPRNG for the batches and the noise (dpspec.mechanisms.secure_noise_training)
            from dpspec.families.dpsgd.runtime import _secure_sources

            self.rng, self.gen = _secure_sources(mech.name, seed)
        else:
            self.rng = np.random.default_rng(seed)
            self.gen = device_generator(int(self.rng.integers(2**62)), parameter_device(model))
        # the clipped sum replayed as a CUDA graph (dpspec.torch.cuda_graph); None: eager
        self.graphed = None
        if cuda_graph:
            from dpspec.families.dpsgd.runtime import graph_bucket
            from dpspec.torch.cuda_graph import GraphedClippedSum

            self.graphed = GraphedClippedSum(
                self._eager_clipped_sum, model, bucket=graph_bucket(mech), criterion=criterion
            )
        mech._check_size(n)  # without replacement the analysis uses N (DataMismatchError)
        self.rate = 1.0 if mech.sampling == "full_batch" else float(mech.sample_rate)
        self.describe = {
            "poisson": f"Poisson sampling, rate q = {mech.sample_rate:.6g}",
            "without_replacement": f"{int(mech.batch_size or 0)} of {n} without replacement",
            "full_batch": "the full batch",
        }.get(mech.sampling, mech.sampling)

    @property
    def nonfinite_examples(self) -> int:
        self._fold_nonfinite()
        if not isinstance(self._nonfinite, int):
            self._nonfinite = int(self._nonfinite)  # the one read, when asked for
        return self._nonfinite

    def _fold_nonfinite(self) -> None:
        """Add the pending masks' counts to the device count (no host read)."""
        masks, self._nonfinite_masks = self._nonfinite_masks, []
        if len({m.device for m in masks}) == 1:
            import torch

            self._nonfinite = self._nonfinite + (masks[0] if len(masks) == 1 else torch.cat(masks)).sum()
        else:  # (a model moved between steps: each mask on its own device)
            for m in masks:
                self._nonfinite = self._nonfinite + m.sum()

    def draw(self) -> np.ndarray:
        return next(self.mech.batches(self.n, self.rng, 1))

    def clipped_sum(self, x, y, start: dict | None = None):
        """This batch's clipped per-example gradient sum (nothing charged, no noise), with the outputs of
        the per-example forward: the model's forward returns them, so the loop's forward is not repeated.
        With ``block_size``, on blocks of that many rows added into a running total that continues ``start``
        (the sums of the logical batch's earlier chunks: :func:`~dpspec.mechanisms.per_example.blocked_clipped_sum`)."""
        if self.block_size is not None:
            from dpspec.mechanisms.per_example import blocked_clipped_sum

            return blocked_clipped_sum(self._whole_clipped_sum, x, y, self.block_size, start)
        return self._whole_clipped_sum(x, y)

    def _whole_clipped_sum(self, x, y):
        if self.graphed is not None:
            return self.graphed(x, y)
        return self._eager_clipped_sum(x, y)

    def _eager_clipped_sum(self, x, y, pad=None):
        if pad is None:  # (a runtime class's own _clipped_sum may not take pad: the audit's no_clipping mutant)
            return self.mech._clipped_sum(self.model, self.criterion, x, y)
        return self.mech._clipped_sum(self.model, self.criterion, x, y, pad=pad)

    def step(self, x, y, idx, clipped=None, named=None) -> None:
        """The private step on the batch; ``clipped``: its ClippedSum if the forward computed it; ``named``: the
        model's ``named_parameters()`` when the caller has just walked them (no other walk of the model)."""
        from dpspec.families.dpsgd.runtime import TrainingReport

        # the batch's ClippedSum, computed in the forward, keeps its zeroed examples' mask on the device: kept
        # here, not counted at every step; otherwise the step's report counts them
        if clipped is None and self.block_size is not None and x.shape[0] > 0:  # (the blocks' sum, not the batch's)
            clipped = self.clipped_sum(x, y)
        mask = None if clipped is None else clipped.nonfinite_mask
        report = None if mask is not None else TrainingReport(steps=1, noise_std=self.mech.noise_std)
        grads = self.mech.private_gradients(
            self.model, self.criterion, x, y, self.n, generator=self.gen, idx=idx, clipped=clipped, report=report
        )
        if report is None:
            self._nonfinite_masks.append(mask)
            if len(self._nonfinite_masks) >= _FOLD:
                self._fold_nonfinite()
        else:
            settled = sum(k for _, k in report.nonfinite_events)
            if settled:  # (adding 0 to the device count would be a kernel per step)
                self._nonfinite = self._nonfinite + settled
            for _, k in report.pending_nonfinite:
                self._nonfinite = self._nonfinite + k
        for k, p in self.model.named_parameters() if named is None else named:
            if p.requires_grad:
                p.grad = grads[k].to(device=p.device, dtype=p.dtype)
        self.inner.step()

    def state_dict(self) -> dict:
        state = {"ledger": self.ledger.state_dict(), "optimizer": self.inner.state_dict()}
        if not self.secure:  # secure mode has no generator state to save (or to leak)
            state.update(rng=self.rng.bit_generator.state, generator=self.gen.get_state())
        return state

    def load_state_dict(self, state: dict) -> None:
        self.ledger.load_state_dict(state["ledger"])
        self.inner.load_state_dict(state["optimizer"])
        if not self.secure and "rng" in state:  # a secure run's state resumes with this run's own generators
            self.rng.bit_generator.state = state["rng"]
            self.gen.set_state(state["generator"])
