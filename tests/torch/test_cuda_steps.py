"""The private steps on a CUDA device (skipped without one): every trainer runs, its parameters stay on
the device, the per-layer rules agree with vmap there, and a seeded run is reproducible."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.mechanisms.per_example import clipped_grad_sum

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loops import train_to_the_end  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.filterwarnings("ignore::dpspec.torch.SamplingOverrideWarning"),
]

SPEC = """
privacy people { unit record  dataset_size 64 }
train model {
  protect   people
  mechanism dpsgd
  sampling  poisson(rate = 0.25)
  clipping  flat(C = 1.0)
  steps     3
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc(self.enc(self.emb(x)).mean(dim=1))


def data(dev):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 11, (64, 6), generator=g).to(dev), torch.randint(0, 3, (64,), generator=g).to(dev)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_make_private_on_cuda(dtype):
    dev = torch.device("cuda")
    finals = []
    for _ in range(2):
        torch.manual_seed(0)
        m = Encoder().to(dev, dtype)
        X, y = data(dev)
        model, opt, loader = dt.make_private(
            dpspec.compile(SPEC),
            m,
            torch.optim.SGD(m.parameters(), lr=0.1),
            TensorDataset(X, y),
            seed=0,
            max_physical_batch_size=8,
        )
        train_to_the_end(model, opt, loader, nn.functional.cross_entropy)
        assert all(p.device.type == "cuda" and p.dtype == dtype for p in m.parameters())
        finals.append(torch.cat([p.detach().float().reshape(-1) for p in m.parameters()]))
    assert torch.equal(finals[0], finals[1])  # seeded: the same batches and the same noise


@pytest.mark.parametrize("cuda_graph", [False, True])
def test_make_private_steps_do_not_synchronize_after_the_first(cuda_graph):
    """After the first step (its loss check is read at once, and the rules' one-time check against vmap
    runs), a make_private step queues its work without waiting for the device: the previous step's loss
    check is read from pinned host memory (torch's synchronisation debug mode would warn otherwise). With
    cuda_graph=True the same holds for the replayed steps (the third step is the capture, which waits)."""
    import warnings

    dev = torch.device("cuda")
    torch.manual_seed(0)
    m = Encoder().to(dev)
    X, y = data(dev)
    sampling = "without_replacement(batch_size = 13)" if cuda_graph else "poisson(rate = 0.2)"
    spec = SPEC.replace("steps     3", "steps     6").replace("poisson(rate = 0.25)", sampling)
    model, opt, loader = dt.make_private(
        dpspec.compile(spec),
        m,
        torch.optim.SGD(m.parameters(), lr=0.1),
        TensorDataset(X, y),
        seed=0,
        cuda_graph=cuda_graph,
    )
    first = 3 if cuda_graph else 2
    it = iter(loader)  # one epoch: 1/q = 5 steps
    for i in range(5):
        xb, yb = next(it)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if i >= first:
                torch.cuda.set_sync_debug_mode("warn")
            try:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        if i >= first:
            syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
            assert not syncs, syncs
    if cuda_graph:
        assert model.cuda_graph_status == "3 step(s) replayed from 1 CUDA graph(s)"


class CNN(nn.Module):
    def __init__(self, p=0.0):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(4, 8)
        self.drop = nn.Dropout(p)
        self.fc = nn.Linear(8 * 8 * 8, 3)

    def forward(self, x):
        return self.fc(self.drop(torch.relu(self.norm(self.conv(x)))).flatten(1))


class HostRead(CNN):
    def forward(self, x):
        if x.abs().sum().item() < 0:  # a host read: cannot be captured
            x = -x
        return super().forward(x)


_SHIFT: list = []  # a tensor the forward reads through a global (a graph could not watch it)


class GlobalRead(CNN):
    def forward(self, x):
        return super().forward(x + _SHIFT[0])


def graph_run(make, cuda_graph, dtype=torch.float32, autocast=False, steps=6, chunk=None, sampling=None):
    dev = torch.device("cuda")
    torch.manual_seed(0)
    m = make().to(dev, dtype)
    g = torch.Generator().manual_seed(0)
    if isinstance(m, Encoder):
        X, y = data(dev)
    else:
        X, y = torch.randn(64, 3, 8, 8, generator=g).to(dev, dtype), torch.randint(0, 3, (64,), generator=g).to(dev)
    spec = SPEC.replace("steps     3", f"steps     {steps}").replace(
        "poisson(rate = 0.25)", sampling or "without_replacement(batch_size = 16)"
    )
    model, opt, loader = dt.make_private(
        dpspec.compile(spec),
        m,
        torch.optim.SGD(m.parameters(), lr=0.1),
        TensorDataset(X, y),
        seed=0,
        cuda_graph=cuda_graph,
        max_physical_batch_size=chunk,
    )
    while opt.steps_remaining:
        for xb, yb in loader:
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                out = model(xb)
            nn.functional.cross_entropy(out.float(), yb).backward()
            opt.step()
    graph_run.check = model._session._verdict  # the loss check's replayer (cuda_graph=True) or the function
    graph_run.pools = model._session.backend.graphed.pools if cuda_graph else None
    return torch.cat([p.detach().float().reshape(-1) for p in m.parameters()]), model.cuda_graph_status


@pytest.mark.parametrize("make", [CNN, Encoder], ids=["cnn", "encoder"])
@pytest.mark.parametrize("chunk", [None, 8], ids=["batch", "virtual"])
def test_cuda_graph_replays_the_eager_step(make, chunk):
    """make_private(cuda_graph=True) on the device: the same steps as the eager run with the same seed (the
    same kernels replayed; cuDNN may pick kernels that add in another order), replayed from one graph."""
    eager, none = graph_run(make, False, chunk=chunk)
    graphed, status = graph_run(make, True, chunk=chunk)
    assert none is None
    replayed = 4 if chunk is None else 10  # (6 steps × 2 chunks, the first 2 eager)
    assert status == f"{replayed} step(s) replayed from 1 CUDA graph(s)"
    assert graph_run.check.status == f"{replayed} step(s) replayed from 1 CUDA graph(s)"  # the loss check
    # the clipped sum's graph and the loss check's share one memory pool on the device, and its segments are
    # the allocator's
    assert graph_run.check.pools is graph_run.pools and len(graph_run.pools.handles) == 1
    (pool,) = graph_run.pools.handles.values()
    assert any(tuple(s.get("segment_pool_id", ())) == tuple(pool) for s in torch.cuda.memory_snapshot())
    assert torch.allclose(graphed, eager, rtol=1e-4, atol=1e-5), (graphed - eager).abs().max()


def test_cuda_graph_pads_poisson_batches():
    """Poisson batches (qN = 16) are padded to multiples of 8: a few graphs, the eager run's steps."""
    import re

    eager, _ = graph_run(CNN, False, sampling="poisson(rate = 0.25)", steps=16)
    graphed, status = graph_run(CNN, True, sampling="poisson(rate = 0.25)", steps=16)
    done = re.fullmatch(r"(\d+) step\(s\) replayed from (\d+) CUDA graph\(s\)", status)
    assert done is not None, status
    replayed, graphs = (int(w) for w in done.groups())
    assert graphs <= 4 and replayed >= 4, status  # (each size warms up twice; a rare one may never be captured)
    # the loss check is padded to the same sizes and replayed from the same pool
    assert "replayed from" in graph_run.check.status and graph_run.check.pools is graph_run.pools
    assert torch.allclose(graphed, eager, rtol=1e-4, atol=1e-5), (graphed - eager).abs().max()


def test_cuda_graph_with_dropout_autocast_and_bfloat16():
    for kwargs in ({"autocast": True}, {"dtype": torch.bfloat16}):
        final, status = graph_run(lambda: CNN(0.3), True, **kwargs)
        assert torch.isfinite(final).all()
        assert status == "4 step(s) replayed from 1 CUDA graph(s)", kwargs


def test_cuda_graph_replays_on_two_streams_are_ordered():
    """Two Replayers sharing a pool, replayed alternately on two streams: each replay waits for the last one
    (GraphPools.order), and every result is its own function of its input."""
    import dpspec.torch.cuda_graph as cg

    pools = cg.GraphPools()
    f = cg.Replayer(lambda x: (x * 2 + 1).sin(), pools)
    g = cg.Replayer(lambda x: (x - 3).cos() * x, pools)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    outs = []
    for i in range(8):
        x = torch.full((1 << 16,), float(i), device="cuda")
        with torch.cuda.stream(s1 if i % 2 else s2):
            s = torch.cuda.current_stream()
            s.wait_stream(torch.cuda.default_stream())
            outs.append((x, f(x), g(x)))
    torch.cuda.synchronize()
    assert "replayed" in f.status and "replayed" in g.status and len(pools.handles) == 1
    for x, fx, gx in outs:
        assert torch.allclose(fx, (x * 2 + 1).sin()) and torch.allclose(gx, (x - 3).cos() * x)


class Held(nn.Module):
    """A tensor a graphed function reads, held as a buffer: a graph's key and watch cover a module's tensors, and
    its read check refuses one read from a closure."""

    def __init__(self, w):
        super().__init__()
        self.register_buffer("w", w)


def footprint(run) -> float:
    """The device memory ``run()`` reserves above what is reserved before it (MiB): its peak, cached blocks and
    graph pools included, after returning what is cached and cuBLAS's workspaces (every run makes its own)."""
    import gc

    import dpspec.torch.cuda_graph as cg

    gc.collect()
    torch.cuda.synchronize()
    cg._drop_cublas_workspaces(torch)
    torch.cuda.empty_cache()
    start = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_reserved() - start) / 2**20


@pytest.mark.parametrize("work", ["intermediates", "matmul"])
def test_cuda_graph_capture_takes_no_second_working_set(work):
    """The capture's warm-up on the side stream reuses the memory the eager steps cached on the user's stream
    (returned to the device first), and the side stream's cuBLAS workspace is made inside the graph's pool:
    the device footprint of warm-up, capture and replays is about one working set and one workspace (the
    eager steps', then the graph's pool), not two side by side. ``intermediates``: 128 MiB of them;
    ``matmul``: a small matrix product, whose footprint is mostly cuBLAS's workspace."""

    import dpspec.torch.cuda_graph as cg

    if work == "intermediates":
        held = Held(torch.randn(1 << 15, device="cuda"))
        x = torch.randn(1 << 10, device="cuda")

        def fn(x):  # two 64 MiB tensors alive at once, a scalar out
            return torch.outer(x, held.w).sin().sum()

    else:
        held = Held(torch.randn(512, 512, device="cuda"))
        x = torch.randn(256, 512, device="cuda")

        def fn(x):
            return (x @ held.w).relu().sum()

    eager = footprint(lambda: fn(x))
    replayer = cg.Replayer(fn, roots=(held,))
    outs: list = []
    graphed = footprint(lambda: outs.extend(replayer(x) for _ in range(cg.WARMUP + 3)))
    assert replayer.status == "3 step(s) replayed from 1 CUDA graph(s)"
    assert all(torch.allclose(out, fn(x), rtol=1e-4) for out in outs)
    assert eager >= (128 if work == "intermediates" else 4)
    assert graphed <= 1.5 * eager, (graphed, eager)


def test_cuda_graphs_of_several_batch_sizes_take_one_working_set():
    """Poisson batches come in a few padded sizes, in any order. A new size's eager warm-up steps and the warm-up
    before its capture run with the graphs' pool released, and graphs are captured from the most rows to the
    fewest, so that a smaller graph's tensors take the blocks a larger one freed: in each of the six orders of
    three sizes, the device footprint of the warm-ups, captures and replays is the largest size's eager working
    set and a few small segments — not one working set per size, nor an eager one beside the pool (before: 130
    MiB more or worse, the order 512, 256, 1024 included). Every replay is its own input's result."""
    import itertools

    import dpspec.torch.cuda_graph as cg

    held = Held(torch.randn(1 << 15, device="cuda"))

    def fn(x):  # two tensors of rows × 128 KiB alive at once
        return torch.outer(x, held.w).sin().sum(1)

    xs = {n: torch.randn(n, device="cuda") for n in (256, 512, 1024)}
    eager = footprint(lambda: fn(xs[1024]))
    assert eager >= 256

    def run(sizes, outs):
        replayer = cg.Replayer(fn, roots=(held,))
        for n in [n for n in sizes for _ in range(cg.WARMUP + 1)] + list(sizes) * 2:
            outs.append((n, replayer(xs[n])))
        return replayer.status

    for sizes in itertools.permutations(xs):
        outs: list = []
        status: list = []
        graphed = footprint(lambda s=sizes, o=outs, st=status: st.append(run(s, o)))
        assert status[0].endswith("replayed from 3 CUDA graph(s)"), (sizes, status)
        assert all(torch.allclose(out, fn(xs[n]), rtol=1e-4, atol=1e-5) for n, out in outs)
        assert graphed <= eager + 32, (sizes, graphed, eager)


def test_cuda_graph_capture_failure_falls_back():
    eager, _ = graph_run(HostRead, False)
    before = torch.cuda.current_stream()
    graphed, status = graph_run(HostRead, True)
    assert status.startswith("not replayed: the capture failed"), status
    assert torch.allclose(graphed, eager, rtol=1e-4, atol=1e-5)
    # the failed capture leaves the caller's stream current (torch.cuda.graph's exit stops at the failed end)
    assert torch.cuda.current_stream() == before


def test_cuda_graph_of_a_forward_reading_a_global_tensor_is_refused():
    """A tensor read through a global is not in a graph's key or watch: were it replaced, a replay would read
    its old memory. The warm-up's read check finds it on the device; every step runs eagerly."""
    _SHIFT[:] = [torch.full((3, 1, 1), 0.1, device="cuda")]
    eager, _ = graph_run(GlobalRead, False)
    graphed, status = graph_run(GlobalRead, True)
    assert status.startswith("not replayed: the capture failed (UnwatchedReadError"), status
    assert torch.allclose(graphed, eager, rtol=1e-4, atol=1e-5)


def cnn_and_its_clipped_sum(dev, n):
    """A CNN on ``dev``, n random images and labels there, and its clipped sum (C = 0.7) as a function of
    (x, t, pad), the one GraphedClippedSum replays."""
    torch.manual_seed(0)
    m = CNN().to(dev)
    g = torch.Generator().manual_seed(1)
    X, y = torch.randn(n, 3, 8, 8, generator=g).to(dev), torch.randint(0, 3, (n,), generator=g).to(dev)

    def fn(x, t, pad=None):
        return clipped_grad_sum(m, nn.functional.cross_entropy, x, t, clip=0.7, pad=pad)

    return m, X, y, fn


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="one CUDA device")
def test_cuda_graph_of_a_batch_on_another_device_than_the_current_one():
    """The model and the batch on cuda:1 while cuda:0 is current: the capture must record the step (on
    cuda:1), so that each replay is the clipped sum of its own batch, not the capture's."""
    from dpspec.torch.cuda_graph import WARMUP, GraphedClippedSum

    dev = torch.device("cuda:1")
    torch.cuda.set_device(0)
    m, X, y, fn = cnn_and_its_clipped_sum(dev, 32)
    graphed = GraphedClippedSum(fn, m)
    for i in range(WARMUP + 3):
        xb, yb = X[8 * (i % 4) : 8 * (i % 4) + 8], y[8 * (i % 4) : 8 * (i % 4) + 8]
        got, ref = graphed(xb, yb), fn(xb, yb)
        for k in ref.sums:
            assert torch.allclose(got.sums[k], ref.sums[k], rtol=1e-5, atol=1e-6), (i, k)
    assert graphed.replays == 3


def test_cuda_graph_replay_reads_the_new_batch_and_the_clip_holds():
    from dpspec.torch.cuda_graph import WARMUP, GraphedClippedSum

    m, X, y, fn = cnn_and_its_clipped_sum(torch.device("cuda"), 16)
    graphed = GraphedClippedSum(fn, m)
    for _ in range(WARMUP + 1):
        first = graphed(X, y)
    X2 = X.clone()
    X2[3] = 1e4
    second = graphed(X2, y)
    assert first.graphed and second.graphed and graphed.replays == 2
    ref = fn(X2, y)
    for k in ref.sums:
        assert torch.allclose(second.sums[k], ref.sums[k], rtol=1e-5, atol=1e-6), k
    moved = torch.cat([(first.sums[k] - second.sums[k]).reshape(-1) for k in ref.sums]).norm()
    assert moved <= 2 * 0.7 * (1 + 1e-5)


def test_dpsgd_train_and_rules_on_cuda():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    m = Encoder().to(dev, torch.float64)
    X, y = data(dev)
    rep = dpspec.compile(SPEC).mechanism.train(m, X, y, seed=1)
    assert rep.clipping == "rules"
    got = clipped_grad_sum(m, nn.functional.cross_entropy, X[:8], y[:8], clip=0.5, method="rules")
    ref = clipped_grad_sum(m, nn.functional.cross_entropy, X[:8], y[:8], clip=0.5, method="vmap")
    for k in ref.sums:
        assert torch.allclose(got.sums[k], ref.sums[k], rtol=1e-6, atol=1e-12), k


def test_dpsgd_train_with_cuda_graphs():
    """``DpSgd.train(..., cuda_graph=True)`` on the device: Poisson batches replayed from a few graphs, the eager
    run's steps."""
    dev = torch.device("cuda")
    spec = SPEC.replace("steps     3", "steps     12")

    def run(cuda_graph):
        torch.manual_seed(0)
        m = CNN().to(dev)
        g = torch.Generator().manual_seed(0)
        X, y = torch.randn(64, 3, 8, 8, generator=g).to(dev), torch.randint(0, 3, (64,), generator=g).to(dev)
        rep = dpspec.compile(spec).mechanism.train(m, X, y, seed=1, cuda_graph=cuda_graph)
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()]), rep

    eager, _ = run(False)
    graphed, rep = run(True)
    assert rep.cuda_graph.endswith("CUDA graph(s)") and not rep.cuda_graph.startswith("0 "), rep.cuda_graph
    assert torch.allclose(graphed, eager, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_secure_mode_on_cuda(dtype):
    """Secure mode on the device: the noise is formed there (the OS bytes copied once per tensor), on the grid,
    in the sums' dtype; on the same bytes it is the CPU's result (float64 transcendental functions may differ
    in the last place, which moves a rounded coordinate only rarely)."""
    import hashlib

    from dpspec.mechanisms import secure_noise_training as sn

    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    sums = {"w": torch.randn(64, 33, generator=g), "b": torch.randn(7, generator=g)}

    def stream():
        data, pos = hashlib.shake_256(b"cuda").digest(1 << 16), [0]

        def read(n):
            pos[0] += n
            return data[pos[0] - n : pos[0]]

        return read

    outs = []
    for where in ("cpu", "cuda"):
        sn.urandom, real = stream(), sn.urandom
        try:
            outs.append(sn.SecureGaussianNoise().add({k: v.to(where) for k, v in sums.items()}, 1.3, 0.7))
        finally:
            sn.urandom = real
    for k in sums:
        assert outs[1][k].device.type == "cuda" and outs[1][k].dtype == torch.float32
        assert int((outs[0][k] != outs[1][k].cpu()).sum()) <= 1
    torch.manual_seed(0)
    m = Encoder().to(dev, dtype)
    X, y = data(dev)
    model, opt, loader = dt.make_private(
        dpspec.compile(SPEC), m, torch.optim.SGD(m.parameters(), lr=0.1), TensorDataset(X, y), secure=True
    )
    train_to_the_end(model, opt, loader, nn.functional.cross_entropy)
    assert all(p.device.type == "cuda" and p.dtype == dtype and torch.isfinite(p.float()).all() for p in m.parameters())


def test_relational_tables_on_cuda():
    import numpy as np

    from dpspec.relational import RelationalGraph, cap_degrees, node_disjoint_split
    from dpspec.relational.encoders import MLPEncoder, SubsetEncoder
    from dpspec.relational.trainer import RelationalTrainer, TrainConfig

    rng = np.random.default_rng(0)
    n = 120
    E = np.stack(np.triu_indices(n, 1), 1)
    E = E[rng.random(len(E)) < 0.05]
    sp = node_disjoint_split(RelationalGraph.build(n, E, features=rng.random((n, 10))), 0.25, seed=0)
    tr = sp.train.with_edges(cap_degrees(sp.train.edges, sp.train.num_nodes, 5, 0))
    for ghost in (True, False):
        enc = MLPEncoder(sp.train.features, hidden=8, out=4, seed=1)
        enc.module.to("cuda")
        sub = SubsetEncoder(enc, np.arange(tr.num_nodes))
        cfg = TrainConfig(batch_size=10, clipping="static", clip=0.5, sigma=1.0, steps=3)
        t = RelationalTrainer(tr, sub, cfg, use_ghost=ghost)
        assert enc.X.device.type == "cuda" and sub.ids.device.type == "cuda"
        t.train()
        assert all(p.device.type == "cuda" and torch.isfinite(p).all() for p in enc.module.parameters())
        assert t.embed(ids=np.arange(5)).shape == (5, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_normaliser_in_one_kernel_is_the_division_on_cuda(dtype):
    """The DP-SGD step divides its noisy sums by the certificate's normaliser with one foreach kernel where
    the device's division is a multiplication by a reciprocal: the same bits as ``v / denom``."""
    from dpspec.families.dpsgd.runtime import _divided

    g = torch.Generator(device="cuda").manual_seed(0)
    xs = {f"p{i}": torch.randn(1000 + i, generator=g, device="cuda", dtype=dtype) * 10.0 ** (i - 3) for i in range(6)}
    for denom in (12.0, 0.3, 7.0, 16.0, 3e-3, 48 * 0.25):
        got = _divided(xs, denom)
        assert list(got) == list(xs) and all(torch.equal(got[k], xs[k] / denom) for k in xs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_srpp_sgd_on_cuda(dtype, monkeypatch):
    """SRPP-SGD's trainer and make_private on the device: the parameters stay there in their dtype, finite, and
    a seeded run is reproducible (cuDNN's deterministic kernels: another algorithm's order of addition moves a
    bfloat16 weight by a unit in the last place)."""
    from test_device_dtype import SRPP

    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    dev = torch.device("cuda")
    finals = []
    for _ in range(2):
        torch.manual_seed(0)
        m = CNN().to(dev, dtype)
        g = torch.Generator().manual_seed(0)
        X = torch.randn(32, 3, 8, 8, generator=g).to(dev, dtype)
        y = torch.randint(0, 2, (32,), generator=g).to(dev)
        dpspec.compile(SRPP).mechanism.train(m, X, y, loss_fn=nn.functional.cross_entropy, seed=0, steps=2)
        model, opt, loader = dt.make_private(dpspec.compile(SRPP), m, None, TensorDataset(X, y), seed=0)
        train_to_the_end(model, opt, loader, nn.functional.cross_entropy)
        assert all(p.device.type == "cuda" and p.dtype == dtype for p in m.parameters())
        finals.append(torch.cat([p.detach().float().reshape(-1) for p in m.parameters()]))
    assert torch.isfinite(finals[0]).all() and torch.allclose(finals[0], finals[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("workload", ["dpsgd", "srpp", "relational"])
def test_distributed_examples_on_cuda_in_one_process(workload):
    """Each family's data-parallel example with its model and data on the device, in one process (NCCL's
    reduction needs a GPU per rank: tests/distributed runs two where there are two): finite parameters, and a
    seeded run is reproducible."""
    from dpspec.distributed import examples as ex
    from dpspec.distributed.comm import Comm

    runs = [ex.RUNNERS[workload](Comm(), {"steps": 4, "single": True, "device": "cuda"}) for _ in range(2)]
    for k, v in runs[0]["params"].items():
        assert torch.isfinite(v).all() and torch.allclose(v, runs[1]["params"][k], rtol=1e-5, atol=1e-6), k
    assert runs[0]["batch_sizes"] == runs[1]["batch_sizes"]


@pytest.mark.parametrize("cuda_graph", [False, True], ids=["eager", "graph"])
def test_block_steps_are_the_same_bits_for_every_physical_batch_size_on_cuda(cuda_graph, monkeypatch):
    """make_private(..., block_size=8) on the device, with deterministic kernels: unchunked and in chunks of 8 and
    16 rows, the same parameters bit for bit (eagerly, and with each block's sum replayed from a CUDA graph)."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    dev = torch.device("cuda")
    finals = []
    for m in (None, 8, 16):
        torch.manual_seed(0)
        net = CNN().to(dev)
        g = torch.Generator().manual_seed(0)
        X = torch.randn(64, 3, 8, 8, generator=g).to(dev)
        y = torch.randint(0, 3, (64,), generator=g).to(dev)
        spec = SPEC.replace("steps     3", "steps     6")
        model, opt, loader = dt.make_private(
            dpspec.compile(spec),
            net,
            torch.optim.SGD(net.parameters(), lr=0.1),
            TensorDataset(X, y),
            seed=0,
            block_size=8,
            max_physical_batch_size=m,
            cuda_graph=cuda_graph,
        )
        train_to_the_end(model, opt, loader, nn.functional.cross_entropy)
        finals.append(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
    assert all(torch.equal(f, finals[0]) for f in finals[1:])
