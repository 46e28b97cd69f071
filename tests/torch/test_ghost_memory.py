"""The ghost clipping path of ``clipped_grad_sum`` (nn.Sequential MLPs): its output gradients are those of each
layer's own output (an in-place activation after it included), frozen layers pass their gradient through, and
its peak memory is the book-keeping (each trainable layer's input and output gradient) plus one layer-sized
temporary — no output kept past the forward, no masked copy of every layer at once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dpspec.mechanisms.per_example import clipped_grad_sum

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]


def _mlp(inplace=False, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(6, 8), nn.ReLU(inplace=inplace), nn.Linear(8, 8), nn.SiLU(inplace=inplace), nn.Linear(8, 3)
    )


def _batch(B=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(B, 6, generator=g) * 2, torch.randint(0, 3, (B,), generator=g)
    x[3, 1] = float("inf")  # one non-finite example: zeroed on both paths
    return x, y


def _close(a, b):
    assert (a.method, b.method) == ("vmap", "ghost")
    assert set(a.sums) == set(b.sums)
    for k in a.sums:
        assert torch.allclose(a.sums[k], b.sums[k], atol=1e-5, rtol=1e-4), k
    assert a.nonfinite_index == b.nonfinite_index == [3]


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("per_layer", [False, True])
def test_in_place_activations(inplace, per_layer):
    """An in-place activation rewrites the layer's output: the gradient taken is still the one of the
    layer's output (before the activation), as vmap's per-example gradients have it."""
    m = _mlp(inplace)
    x, y = _batch()
    kw = dict(per_layer_clips=[0.3, 0.1, 0.2, 0.1, 0.4, 0.05]) if per_layer else dict(clip=0.7)
    _close(clipped_grad_sum(m, F.cross_entropy, x, y, method="vmap", **kw),
           clipped_grad_sum(m, F.cross_entropy, x, y, method="ghost", **kw))  # fmt: skip


@pytest.mark.parametrize("frozen", [[0], [2], [0, 2], [4]])
def test_frozen_layers(frozen):
    m = _mlp()
    for i in frozen:
        m[i].requires_grad_(False)
    x, y = _batch()
    _close(clipped_grad_sum(m, F.cross_entropy, x, y, method="vmap", clip=0.7),
           clipped_grad_sum(m, F.cross_entropy, x, y, method="ghost", clip=0.7))  # fmt: skip


def test_peak_memory_is_the_book_keeping_and_one_layer():
    """At B 256, widths 16→256→256→4 (float32): the book-keeping is the two hidden activations and the
    three output gradients (4 × 256 KiB + 4 KiB), one masked or squared layer on top (256 KiB); the rest
    (losses, norms, the logits) is a few KiB (1303 KiB in all, measured). Before the masks were made per
    layer, the outputs z and the masked copies of every layer added 1.3 MiB (2628 KiB)."""
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    B, d = 256, 256
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))
    x, y = torch.randn(B, 16), torch.randint(0, 4, (B,))
    kept = []

    def step():  # the sums are kept past the step (as the private step keeps them until the optimizer's)
        kept[:] = [clipped_grad_sum(m, F.cross_entropy, x, y, method="ghost", clip=1.0)]

    step()
    assert kept[0].method == "ghost"
    layer = B * d * 4
    book_keeping = 2 * layer + 2 * layer + B * 4 * 4
    peak = bench.step_peak_mib(step, torch.device("cpu")) * 2**20
    # (the sums of the step before are freed when the new ones replace them, after the peak)
    assert peak <= book_keeping + layer + 64 * 2**10, (peak / 2**10, book_keeping / 2**10)
    # the measure sees what must be there: the book-keeping and, in the backward pass, the gradient of the
    # first hidden activation while the first layer's output gradient is made from it
    assert peak >= book_keeping + layer
