"""SRPP-SGD's backend for ``dpspec.torch.make_private`` (``Family.torch_backend`` in :mod:`dpspec.families`)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np

from dpspec.mechanisms.ledger import DataMismatchError
from dpspec.torch.private import SamplingOverrideWarning


def backend(mech) -> type:
    return SrppBackend


class SrppBackend:
    """``optimizer.step()`` is the SRPP-SGD optimizer's own step (its certificate fixes the optimizer)."""

    def __init__(self, mech, model, optimizer, criterion, n: int, seed, secure: bool = False):
        if secure:
            from dpspec.torch.private import UnsupportedTrainingError

            raise UnsupportedTrainingError(
                f"`{mech.name}` is an SRPP-SGD training: secure mode (OS-CSPRNG integer noise on a grid) covers "
                "DP-SGD trainings only (docs/training.md)"
            )
        s = mech.plan.sampling
        if n != s.dataset_size:
            raise DataMismatchError(
                f"`{mech.name}`: the data has {n} examples but the certificate assumes "
                f"dataset_size = {s.dataset_size}; recompile with the right size"
            )
        o = mech.plan.optimizer
        if optimizer is not None:
            warnings.warn(
                f"`{mech.name}` is an SRPP-SGD training: its certificate depends on the optimizer "
                f"(SGD, momentum {o.momentum:g}, the certified learning-rate schedule), so the step uses "
                f"that optimizer, not the {type(optimizer).__name__} you passed",
                SamplingOverrideWarning,
                stacklevel=3,
            )
        self.mech, self.model, self.criterion, self.n = mech, model, criterion, n
        self.ledger = mech.ledger
        self.opt = mech.optimizer(model, criterion, seed=seed)
        self.inner = self.opt.opt
        self._it: Iterator[np.ndarray] | None = None
        self.rate = float(s.rate)
        self.describe = f"{s.scheme} sampling, rate {s.rate:.6g}"

    def draw(self) -> np.ndarray:
        if self._it is None:
            self._it = self.opt.batches(self.n)
        try:
            return next(self._it)
        except StopIteration:
            self._it = None
            self.ledger.require(1)
            raise

    clipped_sum = None  # the SRPP-SGD step computes its own

    @property
    def nonfinite_examples(self) -> int:
        """Examples whose non-finite gradient the SRPP-SGD step zeroed (private; never publish)."""
        return int(sum(k for _, k in self.opt.report.nonfinite_events))

    def step(self, x, y, idx, clipped=None, named=None) -> None:
        self.opt.step(x, y, idx)

    def state_dict(self) -> dict:
        return {"srpp": self.opt.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.opt.load_state_dict(state["srpp"])
        self._it = None
