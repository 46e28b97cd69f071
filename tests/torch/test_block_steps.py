"""``make_private(..., block_size=k)``: the clipped sum computed on blocks of k rows, each alone, added in order into
one running total, so that a step is the same bit for bit whatever physical batch size (a multiple of k) runs it —
unchunked, ``max_physical_batch_size=m`` or ``virtual_batches`` — on every clipping path, in float64, float32 and
bfloat16, with Poisson and fixed-size batches. The noise, batch and ledger are the unchunked step's, and the update
is the ordinary step's up to the order of the additions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_host_syncs import MODELS as PATHS  # noqa: E402
from test_make_private import SRPP, build, dataset  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings(
    "ignore::dpspec.torch.SamplingOverrideWarning", "ignore:There is a performance drop"
)

SPEC = """
privacy people {{ unit record  dataset_size 40 }}
train model {{
  protect   people
  mechanism dpsgd
  sampling  {sampling}
  clipping  flat(C = 0.5)
  steps     4
  guarantee dp(epsilon = 2, delta = 1e-5)
}}
"""
POISSON, FIXED = "poisson(rate = 0.5)", "without_replacement(batch_size = 20)"


def run(kind, dtype=torch.float64, sampling=POISSON, block=None, m=None, context=False, nan=False):
    """The parameters after the 4 certified steps, and the clipping methods the steps used."""
    torch.manual_seed(0)
    net = PATHS["vmap"]() if kind == "vmap" else build(kind)
    net = net.to(dtype)
    x, y = dataset("mlp" if kind == "vmap" else kind, 40).tensors
    if x.is_floating_point():
        x = x.to(dtype)
        if nan:
            x = x.clone()
            x[3, 0] = float("nan")  # a non-finite example: zeroed in its block
    kw = {} if block is None else {"block_size": block}
    model, opt, loader = dt.make_private(
        dpspec.compile(SPEC.format(sampling=sampling)),
        net,
        torch.optim.SGD(net.parameters(), lr=0.1),
        TensorDataset(x, y),
        seed=1,
        max_physical_batch_size=None if context else m,
        **kw,
    )
    methods = set()
    while opt.steps_remaining:  # (a pass of the loader is an epoch: 1/q steps)
        for xb, yb in _iter(loader, opt, m) if context else loader:
            opt.zero_grad()
            out = model(xb)
            if model._session.pending.clipped is not None:
                methods.add(model._session.pending.clipped.method)
            nn.functional.cross_entropy(out.float(), yb).backward()
            opt.step()
    assert opt.steps_taken == 4
    return torch.cat([p.detach().double().reshape(-1) for p in net.parameters()]), methods, opt.get_epsilon()


def _iter(loader, opt, m):
    with dt.virtual_batches(loader, opt, m) as chunks:
        yield from chunks


@pytest.mark.parametrize(
    "kind, method", [("mlp", "ghost"), ("cnn_groupnorm", "rules"), ("transformer", "rules"), ("vmap", "vmap")]
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("sampling", [POISSON, FIXED], ids=["poisson", "fixed"])
def test_every_physical_batch_size_gives_the_same_bits(kind, method, dtype, sampling):
    if kind in ("transformer", "vmap") and (dtype == torch.bfloat16 or sampling == FIXED):
        pytest.skip("the ghost and CNN rows cover it (keeps the suite short)")
    whole, methods, eps = run(kind, dtype, sampling, block=4)
    assert methods == {method}
    for m in (4, 8, 12):
        chunked, _, eps_m = run(kind, dtype, sampling, block=4, m=m)
        assert torch.equal(chunked, whole), (m, float((chunked - whole).abs().max()))
        assert eps_m == eps
    via_context, _, _ = run(kind, dtype, sampling, block=4, m=8, context=True)
    assert torch.equal(via_context, whole)


def test_a_non_finite_example_is_zeroed_in_its_block_the_same_way():
    whole, _, _ = run("mlp", block=4, nan=True)
    assert torch.isfinite(whole).all()
    for m in (4, 8):
        assert torch.equal(run("mlp", block=4, m=m, nan=True)[0], whole)


@pytest.mark.parametrize("kind", ["mlp", "cnn_groupnorm"])
def test_the_blocked_step_is_the_private_step_up_to_rounding(kind):
    """The same batches and noise as the ordinary step: only the order of the clipped sum's additions differs."""
    blocked, _, eps_blocked = run(kind, block=4)
    ordinary, _, eps = run(kind)
    assert eps_blocked == eps
    assert float((blocked - ordinary).abs().max()) <= 1e-12 * float(ordinary.abs().max())


def test_the_running_total_is_what_makes_the_chunks_agree(monkeypatch):
    """Were each chunk's blocks summed on their own and the chunks then added (the ordinary virtual batch), the
    bits would depend on the chunking: the check above can fail."""
    from dpspec.torch import virtual

    whole = run("cnn_groupnorm", dtype=torch.float32, block=4)[0]
    real = virtual._ChunkBackend.__init__

    def apart(self, backend, logical):  # each chunk's blocks added from zero, the chunks' sums added after
        real(self, backend, logical)
        self.blocked = False

    monkeypatch.setattr(virtual._ChunkBackend, "__init__", apart)
    chunked = {m: run("cnn_groupnorm", dtype=torch.float32, block=4, m=m)[0] for m in (4, 8, 12)}
    assert torch.equal(chunked[4], whole)  # (chunks of one block: the same additions either way)
    assert not torch.equal(chunked[8], whole) or not torch.equal(chunked[12], whole)
    # every chunk reached the step: the difference is rounding, not a chunk left out
    assert all(float((c - whole).abs().max()) < 1e-5 for c in chunked.values())


def test_a_block_s_sums_are_let_go_once_added():
    """Only the running total is parameter-sized: each block's sums are dropped once added (not kept to the
    batch's end: B/k copies of the parameters)."""
    from dpspec.mechanisms.per_example import blocked_clipped_sum, clipped_grad_sum

    net = build("mlp")
    x, y = dataset("mlp", 40).tensors
    seen = []

    def one(xb, yb):
        assert all(cs.sums == {} for cs in seen), "an earlier block's sums still held"
        cs = clipped_grad_sum(net, nn.functional.cross_entropy, xb, yb, clip=1.0)
        seen.append(cs)
        return cs

    total = blocked_clipped_sum(one, x, y, 4)
    assert len(seen) == 10 and total.batch == 40
    ref = clipped_grad_sum(net, nn.functional.cross_entropy, x, y, clip=1.0)
    assert all(torch.allclose(total.sums[k], ref.sums[k], atol=1e-5) for k in ref.sums)


def test_the_settings_that_are_refused():
    c = dpspec.compile(SPEC.format(sampling=POISSON))
    x, y = dataset("mlp", 40).tensors

    def make(**kw):
        net = build("mlp")
        return dt.make_private(c, net, torch.optim.SGD(net.parameters(), lr=0.1), TensorDataset(x, y), **kw)

    with pytest.raises(ValueError, match="max_physical_batch_size=6 is not a multiple of block_size=4"):
        make(block_size=4, max_physical_batch_size=6)
    _, opt, loader = make(block_size=4)
    with pytest.raises(ValueError, match="not a multiple of block_size=4"):
        with dt.virtual_batches(loader, opt, 10):
            pass
    for bad in (0, -2, True, 2.5, "4"):
        with pytest.raises(ValueError, match="block_size must be a whole number"):
            make(block_size=bad)
        with pytest.raises(ValueError, match="max_physical_batch_size must be a whole number of rows ≥ 1"):
            make(max_physical_batch_size=bad)
    _, opt, loader = make()
    with pytest.raises(ValueError, match="max_physical_batch_size must be a whole number"):
        with dt.virtual_batches(loader, opt, None):
            pass
    import numpy as np

    make(block_size=np.int64(4))  # an integer of any kind
    # DP-SGD's: the SRPP-SGD step computes its own sum
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(60, 5, generator=g), torch.randint(0, 2, (60,), generator=g))
    with pytest.raises(ValueError, match="block_size is for DP-SGD trainings"):
        dt.make_private(dpspec.compile(SRPP), nn.Linear(5, 2), None, ds, block_size=4)


@pytest.mark.parametrize("m", [None, 8])
def test_dpsgd_train_with_blocks_is_make_privates_step_bit_for_bit(m):
    c = dpspec.compile(SPEC.format(sampling=POISSON))
    mech = c.mechanism
    x, y = dataset("cnn_groupnorm", 40).tensors
    x = x.double()
    torch.manual_seed(0)
    a = build("cnn_groupnorm").double()
    mech.train(a, x, y, seed=1, block_size=4, max_physical_batch_size=m)
    b, _, _ = run("cnn_groupnorm", block=4)
    assert torch.equal(torch.cat([p.detach().reshape(-1) for p in a.parameters()]), b)
    for bad_m, why in ((6, "not a multiple of block_size=4"), (0, "whole number of rows ≥ 1"), (-4, "rows ≥ 1")):
        with pytest.raises(ValueError, match=why):
            dpspec.compile(SPEC.format(sampling=POISSON)).mechanism.train(
                a, x, y, block_size=4, max_physical_batch_size=bad_m
            )


@pytest.mark.parametrize("kind", ["mlp", "cnn_groupnorm"])
def test_neighbouring_batches_move_the_blocked_sum_by_at_most_the_clip(kind):
    """What a distinguishing test on two neighbouring batches sees of a blocked step: removing one example (which
    shifts every later example into another block) or replacing it by an extreme one moves the clipped sum by at
    most C (removal) and 2C (replacement), as in the unblocked step."""
    from dpspec.mechanisms.per_example import blocked_clipped_sum, clipped_grad_sum

    torch.manual_seed(0)
    net = build(kind).double()
    x, y = dataset(kind, 13).tensors
    x = x.double()
    C = 0.5

    def blocked(xb, yb):
        return blocked_clipped_sum(
            lambda a, b: clipped_grad_sum(net, nn.functional.cross_entropy, a, b, clip=C), xb, yb, 4
        ).sums

    def dist(s, t):
        return float(torch.sqrt(sum(((s[k] - t[k]) ** 2).sum() for k in s)))

    full = blocked(x, y)
    for i in (0, 5, 12):
        keep = torch.arange(13) != i
        assert dist(full, blocked(x[keep], y[keep])) <= C * (1 + 1e-9)
        x2 = x.clone()
        x2[i] = 1e6  # an extreme example in place of example i
        assert dist(full, blocked(x2, y)) <= 2 * C * (1 + 1e-9)
