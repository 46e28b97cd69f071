"""Host round trips of a private step: the reads of a device tensor's value by the host (``.item()``,
``bool()``, ``float()``, ``int()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``nonzero``, boolean-mask
indexing, ``torch.equal``/``allclose``), each of which waits for the device to finish the work queued
before it. Counted on CPU by a ``TorchFunctionMode`` (``torch.cuda.set_sync_debug_mode`` is CUDA-only).

What docs/training.md ("Devices and dtypes") states, asserted here:

* ``DpSgd.train``: none per step on the ghost, rules and vmap paths — the non-finite counts of the run
  report are read once, when the run ends (``TrainingReport.settle``);
* ``make_private``: the first step's check of the loop's loss (DPS165) decides before anything is
  charged; every later step reads the previous step's verdict only (one per step, per chunk with virtual
  batches: on a GPU a pinned host copy made without waiting, whose read waits for that earlier copy, not
  for the work queued since); the counts (``nonfinite_examples``) are read when asked for.

The sampler's own work is on the host (numpy) and is not a read of a device tensor.
"""

from __future__ import annotations

import collections
import os
import sys

import pytest
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings(
    "ignore::dpspec.torch.SamplingOverrideWarning", "ignore:There is a performance drop"
)

DPSPEC = os.path.dirname(dpspec.__file__)
READS = {
    "item",
    "tolist",
    "__bool__",
    "__float__",
    "__int__",
    "__index__",
    "__complex__",
    "nonzero",
    "numpy",
    "cpu",
    "equal",
    "allclose",
    "masked_select",
    "unique",
    "is_nonzero",
}


def _bool_index(args) -> bool:
    if len(args) < 2:
        return False
    idx = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(torch.is_tensor(i) and i.dtype == torch.bool for i in idx)


class SyncProbe(TorchFunctionMode):
    """Counts the host reads of device values made from dpspec's code (by file:line)."""

    def __init__(self):
        super().__init__()
        self.reads: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in READS or (name == "__getitem__" and _bool_index(args)):
            f = sys._getframe(1)
            while f is not None and not f.f_code.co_filename.startswith(DPSPEC):
                f = f.f_back
            if f is not None:
                self.reads[f"{name} at {os.path.relpath(f.f_code.co_filename, DPSPEC)}:{f.f_lineno}"] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.reads.values())


SPEC = """
privacy people { unit record  dataset_size 64 }
train model {
  protect   people
  mechanism dpsgd
  sampling  poisson(rate = 0.25)
  clipping  flat(C = 1.0)
  steps     8
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""


class Tree(nn.Module):
    """Not a Sequential: the per-layer rules."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 8), nn.Linear(8, 3)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.b(torch.tanh(self.norm(self.a(x))))


class Scaled(nn.Module):
    """A bare parameter outside every rule: the vmap path."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 3)
        self.s = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return self.a(x) * self.s


MODELS = {
    "ghost": lambda: nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)),
    "rules": Tree,
    "vmap": Scaled,
}


def data():
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g)
    X[5, 2] = float("nan")  # a non-finite example: zeroed on the device, counted without a read per step
    return X, y


def test_probe_counts_reads():
    """The probe sees the reads it is meant to catch (from dpspec's own code)."""
    from dpspec.torch.guards import close_on_finite_rows

    t = torch.randn(5)
    with SyncProbe() as p:
        close_on_finite_rows(t, t)  # one bool() of the verdict
    assert p.total == 1
    with SyncProbe() as p:
        _ = float(t.sum())  # from this file: not dpspec's
    assert p.total == 0


@pytest.mark.parametrize("path", sorted(MODELS))
def test_dpsgd_train_reads_nothing_per_step(path):
    X, y = data()
    counts = {}
    for steps in (2, 6):
        c = dpspec.compile(SPEC)
        torch.manual_seed(0)
        m = MODELS[path]()
        c.mechanism.train(m, X, y, steps=1, seed=0)  # the rules' one-time check against vmap is done
        with SyncProbe() as p:
            rep = c.mechanism.train(m, X, y, steps=steps, seed=1)
        assert rep.clipping == path
        counts[steps] = p.total
    assert counts[6] == counts[2] <= 1, counts  # the report's counts: one read for the run
    assert rep.nonfinite_events and all(k == 1 for _, k in rep.nonfinite_events)


@pytest.mark.parametrize("chunk", [None, 5])
@pytest.mark.parametrize("path", sorted(MODELS))
def test_make_private_reads_once_per_step(path, chunk):
    X, y = data()
    torch.manual_seed(0)
    m = MODELS[path]()
    model, opt, loader = dt.make_private(
        dpspec.compile(SPEC),
        m,
        torch.optim.SGD(m.parameters(), lr=0.1),
        TensorDataset(X, y),
        seed=0,
        max_physical_batch_size=chunk,
    )
    per_step, seen = [], collections.Counter()
    for xb, yb in loader:
        taken = opt.steps_taken
        with SyncProbe() as p:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        # after the first (logical) step, whose chunks' loss checks are read at once: the one-time checks
        # (the criterion, the rules against vmap) and the decision before anything is charged
        if taken >= 1:
            per_step.append(p.total)
            seen.update(p.reads)
            assert p.total <= 1, dict(p.reads)
    assert per_step and max(per_step) == 1  # the loss check (DPS165) of the step before
    # ... read where the deferred verdict is read, never where this step's values are computed
    import inspect

    from dpspec.torch import private

    lines, first = inspect.getsourcelines(private._DeferredVerdict.passed)
    line = first + next(i for i, text in enumerate(lines) if "bool(self.flag)" in text)
    assert set(seen) == {f"__bool__ at torch/private.py:{line}"}, seen
    assert opt.nonfinite_examples >= 0  # read when asked for
