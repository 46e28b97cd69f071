"""Virtual batches: a certified batch processed in physical chunks is the same private step — the same
batch, the same noise (the generator consumed identically), the ledger charged once per logical batch,
and the same update up to the order of the floating-point additions of the clipped sum."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.mechanisms.ledger import CapExceededError

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::dpspec.torch.SamplingOverrideWarning")

SPEC = """
privacy people { unit record  dataset_size 40 }
train model {
  protect   people
  mechanism dpsgd
  sampling  poisson(rate = 0.3)
  clipping  flat(C = 0.5)
  steps     4
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.norm, self.b = nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.norm(self.a(x))))


def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(40, 6, generator=g, dtype=torch.float64), torch.randint(0, 3, (40,), generator=g)


def model():
    torch.manual_seed(0)
    return Tree().double()


def flat(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def close(a, b, rtol=1e-12):
    return float((a - b).abs().max()) <= rtol * float(b.abs().max())


@pytest.fixture(scope="module")
def compiled():
    return dpspec.compile(SPEC)


def test_dpsgd_train_in_chunks_is_the_same_step(compiled):
    X, y = data()
    ref, got = model(), model()
    r1 = dpspec.compile(SPEC).mechanism.train(ref, X, y, seed=3)
    r2 = dpspec.compile(SPEC).mechanism.train(got, X, y, seed=3, max_physical_batch_size=3)
    assert r1.batch_sizes == r2.batch_sizes and max(r1.batch_sizes) > 3  # real chunking happened
    assert r2.clipping.startswith("rules")
    assert not torch.equal(flat(ref), flat(model())) and close(flat(got), flat(ref))


def test_the_noise_and_the_ledger_are_those_of_the_unchunked_step(compiled):
    X, y = data()
    outs = []
    for m_phys in (None, 2):
        mech = dpspec.compile(SPEC).mechanism
        m = model()
        gen = torch.Generator().manual_seed(11)
        cs = mech._clipped_sum(m, nn.functional.cross_entropy, X[:9], y[:9], m_phys)
        g = mech.private_gradients(
            m, nn.functional.cross_entropy, X[:9], y[:9], generator=gen, idx=list(range(9)), clipped=cs
        )
        outs.append((g, gen.get_state(), mech.ledger.steps_taken, cs))
    (g1, s1, t1, c1), (g2, s2, t2, c2) = outs
    assert torch.equal(s1, s2) and t1 == t2 == 1  # the same draws from the generator, one charge
    assert c2.batch == 9 and close(c1.norms, c2.norms) and c1.clipped_fraction == c2.clipped_fraction
    for k in g1:
        assert close(g2[k], g1[k])


def run_make_private(m_phys, steps=4):
    X, y = data()
    m = model()
    c = dpspec.compile(SPEC)
    kw = {} if m_phys is None else {"max_physical_batch_size": m_phys}
    pm, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.5), TensorDataset(X, y), seed=5, **kw)
    chunks, charged = [], []
    while opt.steps_remaining:  # epochs
        for x, t in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(pm(x), t).backward()
            before = opt.steps_taken
            opt.step()
            chunks.append(len(x))
            charged.append(opt.steps_taken - before)
    return m, chunks, charged, opt


def test_make_private_with_physical_chunks_steps_once_per_logical_batch():
    ref, sizes, charged, _ = run_make_private(None)
    assert charged == [1] * 4
    got, chunks, charged2, opt = run_make_private(3)
    assert all(c <= 3 for c in chunks) and sum(chunks) == sum(sizes)
    assert sum(charged2) == opt.steps_taken == len(sizes) == 4
    assert len(chunks) == sum(max(1, math.ceil(s / 3)) for s in sizes)
    assert close(flat(got), flat(ref)) and not torch.equal(flat(got), flat(model()))


def test_a_chunk_must_be_stepped_on_and_the_context_manager_form():
    X, y = data()
    m = model()
    pm, opt, loader = dt.make_private(
        dpspec.compile(SPEC), m, torch.optim.SGD(m.parameters(), lr=0.5), TensorDataset(X, y), seed=5
    )
    with dt.virtual_batches(loader, opt, 2) as chunks:
        it = iter(chunks)
        x, t = next(it)
        assert len(x) <= 2
        with pytest.raises(CapExceededError, match="chunk"):
            next(it)
    with pytest.raises(ValueError):
        dt.VirtualDataLoader(loader, 0)


@pytest.mark.parametrize("m_phys", [3, 40])
def test_a_physical_batch_size_defines_one_step_bit_for_bit(m_phys):
    """What holds bit for bit (docs/training.md, "Large batches"): the step with physical batch size m is one
    function of (batch, seed, m) — make_private's virtual loader and DpSgd.train(max_physical_batch_size=m)
    give the same parameters exactly — and a physical size of at least the batch is the unchunked step."""
    X, y = data()
    mech = dpspec.compile(SPEC).mechanism
    a = model()
    mech.train(a, X, y, seed=5, max_physical_batch_size=m_phys)
    b = model()
    c = dpspec.compile(SPEC)
    pm, opt, loader = dt.make_private(
        c,
        b,
        torch.optim.SGD(b.parameters(), lr=mech.learning_rate, momentum=mech.momentum),
        TensorDataset(X, y),
        seed=5,
        max_physical_batch_size=m_phys,
    )
    while opt.steps_remaining:
        for x, t in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(pm(x), t).backward()
            opt.step()
    assert torch.equal(flat(a), flat(b))
    if m_phys >= 40:  # never chunked: the plain step, bit for bit
        ref = model()
        dpspec.compile(SPEC).mechanism.train(ref, X, y, seed=5)
        assert torch.equal(flat(ref), flat(a))


def test_every_chunk_of_the_first_logical_batch_decides_its_loss_check_before_the_charge():
    """The loop-loss check (DPS165) of the first logical step is read at once in every chunk — a mismatch in
    a later chunk is refused before anything is charged; from the second logical step on, the checks are
    read a step late (docs/training.md)."""
    X, y = data()
    m = model()
    pm, opt, loader = dt.make_private(
        dpspec.compile(SPEC),
        m,
        torch.optim.SGD(m.parameters(), lr=0.5),
        TensorDataset(X, y),
        seed=5,
        max_physical_batch_size=2,
    )
    before, seen = flat(m), []
    with pytest.raises(dt.CriterionMismatchError):
        for x, t in loader:
            final = loader._s.backend.final  # this chunk is its logical batch's last
            seen.append(final)
            smoothing = 0.3 if final else 0.0  # only the last chunk's loss is not the criterion
            nn.functional.cross_entropy(pm(x), t, label_smoothing=smoothing).backward()
            opt.step()
    assert seen == [False] * (len(seen) - 1) + [True] and len(seen) >= 2  # refused at the first batch's end
    assert opt.steps_taken == 0 and torch.equal(flat(m), before)
