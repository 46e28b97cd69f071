"""Private vs non-private step time and peak memory on whatever device is present (CUDA if available).

For each model, in the same run, on the same device, data and batch size:

* **non-private**: ``criterion(model(x), y).backward(); optimizer.step()``;
* **dpspec**: ``dpspec.torch.make_private`` (fixed-size batches of B without replacement, flat clipping
  C = 1; the clipping method it picks — ghost, per-layer rules, vmap — is printed);
* **Opacus hooks** and **Opacus ghost** (``grad_sample_mode="hooks"`` / ``"ghost"``, the same σ and C,
  ``poisson_sampling=False``), where Opacus accepts the model.

Step times are medians over the timed steps after warm-up, the loops interleaved step by step (a load
from other processes slows all alike); ratios are paired (each step against the non-private step of
the same round, then the median). **Peak step memory** (:func:`step_peak_mib`, any device): the most a
step (its batch's fetch included) allocates above what is allocated when it starts, in MiB, after the
warm-up and timed steps, so what the other loops, the models and the previous steps hold is not
counted. On CUDA ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, less
``memory_allocated`` at the start (the larger of two steps); elsewhere the allocator's events recorded by
``torch.profiler`` (``profile_memory=True``), their running sum's maximum over one step (the step before
it profiled too, so that the tensors it leaves are seen freed). What a loop keeps from one step to the
next is in the start, not in this figure: Opacus hooks keeps every per-example gradient (``grad_sample``,
B × the parameters) until the next ``zero_grad``, which frees it inside the step before the new ones
are made. **aten ops / step**: the operations one
step dispatches below autograd (a ``TorchDispatchMode`` count, views included; the batch's fetch is not
counted in either loop) — on a GPU each non-view one is a kernel launch or more, and their host cost is
what bounds a small model's step.
**Loop memory** (CUDA; :func:`loop_memory`), each loop in a fresh process of its own (the model, its
data and its loop built, nothing else run; the processes in parallel, each with its own allocator), over
its warm-up steps (the CUDA graphs captured in them): the **device footprint**, ``max_memory_reserved``
less ``memory_reserved`` before the loop's first step — what its training takes from the caching
allocator in whole segments: what it keeps between steps (gradients, optimizer state, Opacus hooks'
per-example gradients, a CUDA graph's pool) and its steps' working memory, with the allocator's
rounding — and the **loop peak**, ``max_memory_allocated`` less ``memory_allocated`` before it (the same,
without the rounding and the cached free blocks; a graph's replays allocate nothing, its capture is
counted). In one process the loops measured before leave partly used segments whose free space the next
loop takes without reserving, which made such figures depend on the order of the loops. The step peak
leaves out what a loop keeps; the loop memory counts it.

Models (the issue's; ``--full`` sizes): MLP 512→512→10 (B 256); MLP 512→1024→1024→10 (B 1024); CNN
3×32×32 with three convolutions and GroupNorm (B 256); nn.TransformerEncoder 2 layers, d 256, seq 128
(B 64); a BERT-base-sized encoder (12 layers, d 768, 12 heads, seq 128, B 32) frozen, with rank-8
adapters on its feed-forward layers. Without ``--full`` every size is scaled down (quick, CPU-friendly).

    python benchmarks/bench_gpu.py            # quick sizes (a minute or two on a CPU)
    python benchmarks/bench_gpu.py --full     # the issue's sizes (for a GPU)
    python benchmarks/bench_gpu.py --secure   # also dpspec's secure mode (OS-CSPRNG integer noise on a grid)
    python benchmarks/bench_gpu.py --profile where.txt   # also where a step's time goes (host, kernels)

Writes benchmarks/results/bench_gpu_<device>.md.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import dpspec  # noqa: E402
import dpspec.torch as dt  # noqa: E402
from dpspec.torch.lora import add_lora  # noqa: E402

SPEC = """
privacy people {{ unit record  dataset_size {n} }}
train model {{ protect people  mechanism dpsgd  sampling without_replacement(batch_size = {b})
  clipping flat(C = 1.0)  steps {steps}  guarantee dp(epsilon = 8, delta = 1e-5) }}
"""


class CNN(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, w, 3, padding=1), nn.GroupNorm(4, w)
        self.c2, self.n2 = nn.Conv2d(w, 2 * w, 3, padding=1, stride=2), nn.GroupNorm(4, 2 * w)
        self.c3, self.n3 = nn.Conv2d(2 * w, 2 * w, 3, padding=1, stride=2), nn.GroupNorm(4, 2 * w)
        self.fc = nn.Linear(2 * w * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.n1(self.c1(x)))
        x = torch.relu(self.n2(self.c2(x)))
        x = torch.relu(self.n3(self.c3(x)))
        return self.fc(x.flatten(1))


class Encoder(nn.Module):
    def __init__(self, vocab, d, heads, ff, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d, 10)

    def forward(self, x):
        return self.fc(self.enc(self.emb(x)).mean(dim=1))


def adapted(vocab, d, heads, ff, layers, rank):
    m = Encoder(vocab, d, heads, ff, layers)
    add_lora(m, rank, include=lambda name: "linear" in name)
    m.fc.requires_grad_(True)
    return m


def vec(d):
    """Input maker: n vectors of d standard normals."""
    return lambda n, g: torch.randn(n, d, generator=g)


def img(n, g):
    """Input maker: n images 3×32×32."""
    return torch.randn(n, 3, 32, 32, generator=g)


def tok(seq, vocab=1000):
    """Input maker: n sequences of ``seq`` token ids below ``vocab``."""
    return lambda n, g: torch.randint(0, vocab, (n, seq), generator=g)


def models(full: bool) -> dict:
    """name → (build, input maker(n, g), batch)."""

    if full:
        return {
            "MLP 512→512→10 (B 256)": (
                lambda: nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)),
                vec(512),
                256,
            ),
            "MLP 512→1024→1024→10 (B 1024)": (
                lambda: nn.Sequential(
                    nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
                ),
                vec(512),
                1024,
            ),
            "CNN 3×32×32, 3 conv + GroupNorm (B 256)": (lambda: CNN(32), img, 256),
            "TransformerEncoder 2×d256, seq 128 (B 64)": (lambda: Encoder(1000, 256, 4, 1024, 2), tok(128), 64),
            "BERT-base-sized encoder + rank-8 adapters, seq 128 (B 32)": (
                lambda: adapted(1000, 768, 12, 3072, 12, 8),
                tok(128),
                32,
            ),
        }
    return {
        "MLP 512→512→10 (B 64)": (
            lambda: nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)),
            vec(512),
            64,
        ),
        "MLP 512→1024→1024→10 (B 128)": (
            lambda: nn.Sequential(
                nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
            ),
            vec(512),
            128,
        ),
        "CNN 3×32×32, 3 conv + GroupNorm (B 32)": (lambda: CNN(16), img, 32),
        "TransformerEncoder 2×d64, seq 32 (B 16)": (lambda: Encoder(1000, 64, 4, 256, 2), tok(32), 16),
        "encoder 2×d128 + rank-4 adapters, seq 32 (B 8)": (lambda: adapted(1000, 128, 4, 512, 2, 4), tok(32), 8),
    }


def ce(out, y):
    return nn.functional.cross_entropy(out, y)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def forever(loader):
    while True:
        yield from loader


def _step(fetch, body):
    """One step: ``body(*fetch())``; ``.parts`` keeps the two (the ops count leaves the fetch out)."""

    def step():
        body(*fetch())

    step.parts = (fetch, body)
    return step


PRIVATE_MODELS: dict = {}


class DeviceBatches(torch.utils.data.Sampler):
    """Shuffled batches of ``b`` indices drawn on the data's device (a ``torch.randperm`` per epoch, sliced),
    for the non-private and Opacus loops: with ``DataLoader(..., sampler=DeviceBatches(...), batch_size=None)``
    a batch is one gather per tensor, queued without a host wait. (A DataLoader with ``batch_size=b``
    indexes a ``TensorDataset`` one example at a time and stacks: 2·B indexing operations per step, which
    on a GPU take longer than a small model's step and would hide the private steps' overhead; dpspec's own
    loader gathers each batch at once.)"""

    def __init__(self, n, b, dev):
        self.n, self.b, self.dev = n, b, dev

    def __len__(self):
        return self.n // self.b

    def __iter__(self):
        perm = torch.randperm(self.n, device=self.dev)
        return iter(perm[i * self.b : (i + 1) * self.b] for i in range(len(self)))


def batched(X, y, b, dev):
    return DataLoader(TensorDataset(X, y), sampler=DeviceBatches(len(X), b, dev), batch_size=None)


LOOPS = (
    "non-private",
    "dpspec",
    "dpspec graph",
    "dpspec graph poisson",
    "dpspec secure",
    "opacus hooks",
    "opacus ghost",
)


def loops(build, make, b, dev, total, secure=False, graph=False, only=None):
    """name → one-step callable (``.parts``: its batch fetch and the step on the batch), plus the clipping
    method dpspec picked. ``only``: build that loop alone and run nothing (the method is None then: finding it
    runs the model, which would take memory, such as cuBLAS's workspace, before a measure of the loop's)."""

    def want(name):
        return only is None or only == name

    n = 4 * b
    g = torch.Generator().manual_seed(0)
    X, y = make(n, g).to(dev), torch.randint(0, 10, (n,), generator=g).to(dev)
    fns = {}

    if want("non-private"):
        torch.manual_seed(0)
        m0 = build().to(dev)
        opt0 = torch.optim.SGD([p for p in m0.parameters() if p.requires_grad], lr=0.01)
        it0 = forever(batched(X, y, b, dev))

        def nonprivate(xb, yb):
            opt0.zero_grad()
            ce(m0(xb), yb).backward()
            opt0.step()

        fns["non-private"] = _step(lambda: next(it0), nonprivate)

    c = dpspec.compile(SPEC.format(n=n, b=b, steps=total))
    sigma = c.mechanism.noise_multiplier
    private_models = PRIVATE_MODELS  # name → the loop's private model (for its CUDA graph's status and pool)
    private_models.clear()

    def private_loop(name, poisson=False, **kw):
        if not want(name):
            return None
        torch.manual_seed(0)
        m = build().to(dev)
        spec = SPEC.format(n=n, b=b, steps=total)
        if poisson:  # the same expected batch size
            spec = spec.replace(f"without_replacement(batch_size = {b})", f"poisson(rate = {b / n!r})")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pm, opt, loader = dt.make_private(
                dpspec.compile(spec),
                m,
                torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.01),
                TensorDataset(X, y),
                **kw,
            )
        it = forever(loader)

        def private(xb, yb):
            opt.zero_grad()
            ce(pm(xb), yb).backward()
            opt.step()

        fns[name] = _step(lambda: next(it), private)
        private_models[name] = pm
        return m

    m1 = private_loop("dpspec", seed=0)
    if graph:  # the clipped sum replayed as a CUDA graph (dpspec.torch.cuda_graph)
        private_loop("dpspec graph", seed=0, cuda_graph=True)
        # Poisson batches of the same expected size, padded to a few sizes (the loss check padded too)
        private_loop("dpspec graph poisson", poisson=True, seed=0, cuda_graph=True)
    if secure:  # the same loop in secure mode (dpspec.mechanisms.secure_noise_training)
        private_loop("dpspec secure", secure=True)
    method = None
    if only is None:
        from dpspec.mechanisms.per_example import clipped_grad_sum

        cs = clipped_grad_sum(m1, ce, X[:b], y[:b], clip=1.0)
        method = cs.method + (f" ({cs.fallback})" if cs.fallback else "")

    try:
        from opacus import PrivacyEngine
    except ImportError:
        return fns, method
    for mode in ("hooks", "ghost"):
        if not want(f"opacus {mode}"):
            continue
        torch.manual_seed(0)
        m = build().to(dev)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = PrivacyEngine().make_private(
                    module=m,
                    optimizer=torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.01),
                    data_loader=batched(X, y, b, dev),
                    criterion=nn.CrossEntropyLoss(),
                    noise_multiplier=sigma,
                    max_grad_norm=1.0,
                    poisson_sampling=False,
                    grad_sample_mode=mode,
                )
        except Exception as e:  # Opacus refuses the model (e.g. nn.MultiheadAttention)
            print(f"  opacus {mode}: refuses ({type(e).__name__}: {str(e)[:80]})", file=sys.stderr)
            continue
        if mode == "ghost":
            model, opt, crit, loader = out
        else:
            (model, opt, loader), crit = out, ce
        it = forever(loader)

        def step(xb, yb, model=model, opt=opt, crit=crit):
            opt.zero_grad()
            crit(model(xb), yb).backward()
            opt.step()

        fns[f"opacus {mode}"] = _step(lambda it=it: next(it), step)
    return fns, method


def ops_per_step(fn) -> int:
    """The aten operations one step of ``fn`` (a :func:`loops` callable) dispatches, its batch's fetch
    left out (a ``TorchDispatchMode`` sees each operation below autograd, views included)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    fetch, body = fn.parts
    batch = fetch()
    with Count() as c:
        body(*batch)
    return c.n


MEASURED = "bench_gpu.measured_step"


def _profiled_peak_bytes(fn, dev) -> int:
    """The allocator-level peak of the second of two calls of ``fn`` above its start, in bytes, from
    ``torch.profiler``'s memory events: each ``[memory]`` event is one allocation (``nbytes > 0``) or free
    (``nbytes < 0``); in time order, the running sum of those on ``dev``'s device type inside the second
    call is what is allocated above its start, and its maximum (0 if nothing is allocated) is the peak.
    The profiler records the free of a block only if it recorded its allocation, so the first call runs
    under it too: the tensors a step leaves to the next (``.grad``, the pending batch) are then seen freed
    (a block made before the first call and freed in the second is not, and would count as still held)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
        with record_function(MEASURED):
            fn()
    events = list(prof.profiler.kineto_results.events())
    (mark,) = [e for e in events if e.name() == MEASURED]
    kind = dev.type.upper()
    mem = [
        e
        for e in events
        if e.name() == "[memory]"
        and str(e.device_type()).rsplit(".", 1)[-1] == kind
        and mark.start_ns() <= e.start_ns() <= mark.end_ns()
    ]
    total = peak = 0
    for e in sorted(mem, key=lambda e: e.start_ns()):
        total += e.nbytes()
        peak = max(peak, total)
    return peak


def step_peak_mib(fn, dev) -> float:
    """The peak memory one step ``fn()`` allocates above what is allocated when it starts, in MiB, on
    ``dev`` (``fn`` is called twice; call it after a warm-up step, so that optimizer state, cached constants
    and lazily built kernels are allocated already). On CUDA from the caching allocator's statistics
    (``max_memory_allocated`` after ``reset_peak_memory_stats``, less ``memory_allocated`` before the call;
    the larger of the two calls), elsewhere from the allocator's events recorded by ``torch.profiler`` over
    the second call (:func:`_profiled_peak_bytes`)."""
    gc.collect()  # garbage of earlier steps freed now, not during the step
    if dev.type != "cuda":
        return _profiled_peak_bytes(fn, dev) / 2**20
    peak = 0
    for _ in range(2):
        sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        fn()
        sync(dev)
        peak = max(peak, torch.cuda.max_memory_allocated(dev) - before)
    return peak / 2**20


def profile_steps(fns, dev, steps=5, top=12) -> str:
    """Where the time of ``steps`` steps of the non-private and dpspec loops goes, from ``torch.profiler``:
    the wall time per step, the device time its kernels take per step (if the kernels' time is well below
    the wall time, the step is bound by the host launching them, not by the device), and the operations
    that take the most device and host time."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    out = []
    for k in [k for k in ("non-private", "dpspec", "dpspec graph") if k in fns]:
        fn = fns[k]
        fn()
        sync(dev)
        with profile(activities=acts) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            sync(dev)
            wall = (time.perf_counter() - t0) / steps
        ev = prof.key_averages()
        kernels = [e for e in ev if e.device_type == torch.autograd.DeviceType.CUDA]  # (ops' rows double them)
        device_us = sum(e.self_device_time_total for e in kernels) / steps
        out.append(f"## {k}: wall {wall * 1e3:.2f} ms / step (profiled), kernels {device_us / 1e3:.2f} ms / step")
        if dev.type == "cuda":
            out.append(ev.table(sort_by="self_cuda_time_total", row_limit=top, max_name_column_width=60))
        out.append(ev.table(sort_by="self_cpu_time_total", row_limit=top, max_name_column_width=60))
    return "\n".join(out)


def graph_pool_mib(pm) -> float | None:
    """The memory the private model's CUDA graphs keep reserved (their pools' segments: the clipped sum's and
    the loss check's graphs share one pool per device), in MiB; None without graphs. A replay allocates
    nothing there, so the step peak does not see it."""
    graphed = getattr(pm._session.backend, "graphed", None)
    if graphed is None or not graphed.pools.handles:
        return None
    pools = {tuple(p) for p in graphed.pools.handles.values()}
    segs = torch.cuda.memory_snapshot()
    return sum(s["total_size"] for s in segs if tuple(s.get("segment_pool_id", ())) in pools) / 2**20


OPS_COLUMNS = ("dpspec", "dpspec graph", "dpspec graph poisson", "non-private")  # counted where they run
POISSON_WARMUP = 16  # the Poisson loops' extra warm-up steps (in :func:`measure`)


def measure(fns, dev, warm, steps):
    """(step times, step peaks, the CUDA graph's capture step's peak). The warm-up steps run loop by loop; the
    graph is captured at the loop's step WARMUP + 1, inside the warm-up: the most that step allocates above
    its start is the graph's working set. A Poisson loop warms up :data:`POISSON_WARMUP` steps more, so that
    the graphs of the common sizes are captured before the timed steps."""
    from dpspec.torch.cuda_graph import WARMUP

    capture = {}
    for k, fn in fns.items():
        for i in range(warm + (POISSON_WARMUP if "poisson" in k else 0)):
            if dev.type == "cuda" and k == "dpspec graph" and i == WARMUP:
                sync(dev)
                torch.cuda.reset_peak_memory_stats(dev)
                before = torch.cuda.memory_allocated(dev)
                fn()
                sync(dev)
                capture[k] = (torch.cuda.max_memory_allocated(dev) - before) / 2**20
            else:
                fn()
    ts = {k: [] for k in fns}
    for _ in range(steps):
        for k, fn in fns.items():
            sync(dev)
            t0 = time.perf_counter()
            fn()
            sync(dev)
            ts[k].append(time.perf_counter() - t0)
    peak = {k: step_peak_mib(fn, dev) for k, fn in fns.items()}  # MiB above the step's start, each loop alone
    return ts, peak, capture


def loop_memory(fn, dev, steps) -> dict | None:
    """A loop's memory over its first ``steps`` steps, in MiB, on CUDA (None elsewhere): ``footprint``,
    ``max_memory_reserved`` less ``memory_reserved`` before them (after ``empty_cache``): what the loop takes
    from the allocator in whole segments; ``peak``, ``max_memory_allocated`` less ``memory_allocated`` before
    them: the most its tensors hold at once, what it keeps between steps included. Meant to run in a process
    that has built the loop and run nothing else (:func:`footprints`)."""
    if dev.type != "cuda":
        return None
    gc.collect()
    sync(dev)
    torch.cuda.empty_cache()
    reserved, allocated = torch.cuda.memory_reserved(dev), torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    for _ in range(steps):
        fn()
    sync(dev)
    return {
        "footprint": (torch.cuda.max_memory_reserved(dev) - reserved) / 2**20,
        "peak": (torch.cuda.max_memory_allocated(dev) - allocated) / 2**20,
    }


def _one_loop_memory(args) -> int:
    """``--memory-of MODEL::LOOP``: that loop alone, its :func:`loop_memory` (and its graphs' pool) as one JSON
    line on stdout; nothing if the loop is not built (Opacus refuses the model, or is not installed)."""
    import json

    model_name, loop = args.memory_of.split("::")
    build, make, b = models(args.full)[model_name]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # (elsewhere: the plumbing, no figures)
    warm = 3 + (POISSON_WARMUP if "poisson" in loop else 0)
    fns, _ = loops(build, make, b, dev, warm + 4, secure=loop == "dpspec secure", graph=dev.type == "cuda", only=loop)
    if loop not in fns:
        return 0
    mem = loop_memory(fns[loop], dev, warm)
    if mem is not None and loop in PRIVATE_MODELS:
        mem["pool"] = graph_pool_mib(PRIVATE_MODELS[loop])
        graphed = getattr(PRIVATE_MODELS[loop]._session.backend, "graphed", None)
        if graphed is not None:  # the clipped sum's captures over those steps (again after a release included)
            mem["captures"] = graphed.captured
    print("LOOP-MEMORY " + json.dumps(mem), flush=True)
    return 0


def footprints(names, args, workers=4) -> dict:
    """(model, loop) → :func:`loop_memory` of that loop, each in a fresh process (``--memory-of``), ``workers``
    at a time; a loop whose process printed nothing is left out."""
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(name, loop) for name in names for loop in LOOPS if loop != "dpspec secure" or args.secure]

    def run(job):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--memory-of", "::".join(job)]
        cmd += ["--full"] if args.full else []
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("LOOP-MEMORY ")]
        if done.returncode != 0 or not lines:
            if done.returncode != 0:
                print(f"  memory of {job}: exit {done.returncode}: {done.stderr[-300:]}", file=sys.stderr)
            return job, None
        return job, json.loads(lines[-1].split(" ", 1)[1])

    with ThreadPoolExecutor(workers) as pool:
        return {job: mem for job, mem in pool.map(run, jobs) if mem is not None}


def memory_cells(mem, cols) -> str:
    """The footprint, loop-peak and footprint-ratio cells of a row (``mem``: loop → :func:`loop_memory`)."""

    def fp(c):
        m = mem[c]
        notes = ([f"pool {m['pool']:.0f}"] if m.get("pool") is not None else []) + (
            [f"{m['captures']} captures"] if m.get("captures") else []
        )
        return f"{m['footprint']:.0f}" + (f" ({', '.join(notes)})" if notes else "")

    loops_ = ["non-private"] + cols
    footprint = " / ".join(fp(c) if c in mem else "—" for c in loops_)
    peak = " / ".join(f"{mem[c]['peak']:.0f}" if c in mem else "—" for c in loops_)
    opacus = [mem[c]["footprint"] for c in ("opacus hooks", "opacus ghost") if c in mem]
    ratio = (
        " / ".join(f"{mem[c]['footprint'] / min(opacus):.2f}×" for c in ("dpspec", "dpspec graph") if c in mem)
        if opacus and min(opacus) > 0
        else "—"
    )
    return f"{footprint} | {peak} | {ratio}"


def write_table(rows, dev, args, warm, steps, final=True) -> None:
    """Writes (and, when ``final``, prints) the table of the models measured so far."""
    devname = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU {platform.machine()}, 1 thread"
    graph = dev.type == "cuda"
    cols = (
        ["dpspec"]
        + (["dpspec graph", "dpspec graph poisson"] if graph else [])
        + (["dpspec secure"] if args.secure else [])
        + ["opacus hooks", "opacus ghost"]
    )
    lines = [
        "# Private vs non-private step on " + devname,
        "",
        f"torch {torch.__version__}; {'full' if args.full else 'quick (scaled-down)'} sizes; {steps} timed steps "
        f"after {warm} warm-up; `python benchmarks/bench_gpu.py{' --full' if args.full else ''}`. Ratios: paired "
        "medians of (private step / non-private step of the same round). Peak step MiB above start: the most one "
        "step allocates above what is allocated when it starts, its batch's fetch included ("
        + (
            "`torch.cuda.max_memory_allocated` less `memory_allocated` before, the larger of two steps"
            if dev.type == "cuda"
            else "the allocator's events recorded by `torch.profiler` over one step, the step before profiled too"
        )
        + "; what a loop keeps between steps, e.g. Opacus hooks' per-example gradients, is in the start, not "
        "in this figure); dpspec ÷ min(Opacus): dpspec's over the smaller of Opacus hooks / ghost. aten ops / step: "
        "the operations one step dispatches below autograd, views included, the batch's fetch left out (a graphed "
        "loop's: those outside its graphs' replays, which launch the rest at once). "
        "The non-private and Opacus loops fetch each batch by one gather on the device (`DeviceBatches`), "
        "as dpspec's loader does."
        + (
            " dpspec graph: `make_private(..., cuda_graph=True)`, the clipped sum and the loss check replayed as "
            "CUDA graphs (dpspec.torch.cuda_graph); a replay allocates little, so its memory figure adds in brackets "
            "the step that captured the graph (the graph's working set, allocated above that step's start) and the "
            "graphs' pool, which stays reserved (whole segments of the allocator). dpspec graph poisson: the same "
            "with Poisson sampling of the same expected batch size (each batch padded to a multiple of a width "
            "≥ 2√B, a few graphs). Loop memory (:func:`loop_memory`), each loop in a fresh process of its own "
            "over its warm-up steps (graphs captured): device footprint, `max_memory_reserved` less "
            "`memory_reserved` before its first step (what it takes from the allocator in whole segments, "
            "what it keeps between steps and a graph's pool included; the pool in brackets); loop peak, "
            "`max_memory_allocated` less `memory_allocated` before it (no rounding, no cached free blocks). "
            "dpspec ÷ min(Opacus) by footprint: dpspec's / dpspec graph's footprint over the smaller of "
            "Opacus hooks' / ghost's."
            if graph
            else ""
        ),
        "",
        "| model | non-private (ms) | "
        + " | ".join(f"{c} (ms, ×non-private)" for c in cols)
        + f" | dpspec{' / dpspec graph' if graph else ''} ÷ Opacus ghost | peak step MiB above start (non-private / "
        + " / ".join(cols)
        + ") | dpspec ÷ min(Opacus) | "
        + (
            (
                "device footprint MiB (non-private / "
                + " / ".join(cols)
                + ") | loop peak MiB (non-private / "
                + " / ".join(cols)
                + ") | dpspec / dpspec graph ÷ min(Opacus), footprint | "
            )
            if graph
            else ""
        )
        + f"aten ops / step ({' / '.join(k for k in OPS_COLUMNS if graph or 'graph' not in k)}) | dpspec clipping |",
        "|" + "---|" * (len(cols) + 7 + 3 * graph),
    ]
    for name, method, med, ratio, peak, vs_ghost, ops, pool, footprint in rows:
        cells = [f"{med[c] * 1e3:.2f} ({ratio[c]:.2f}×)" if c in med else "refuses" for c in cols]
        held = f" (capture {pool[0]:.2f}, pool {pool[1]:.2f})" if pool else ""
        mem = " / ".join(
            (f"{peak[c]:.2f}" + (held if c == "dpspec graph" else "")) if c in peak else "—"
            for c in ["non-private"] + cols
        )
        opacus = [peak[c] for c in ("opacus hooks", "opacus ghost") if c in peak]
        vs_opacus = f"{peak['dpspec'] / min(opacus):.2f}×" if opacus and min(opacus) > 0 else "—"
        lines.append(
            f"| {name} | {med['non-private'] * 1e3:.2f} | "
            + " | ".join(cells)
            + f" | {' / '.join(f'{v:.2f}×' for v in vs_ghost) if vs_ghost else '—'} | {mem} | {vs_opacus}"
            + (" | " + memory_cells(footprint, cols) if graph else "")
            + f" | {' / '.join(str(ops[k]) for k in OPS_COLUMNS if k in ops)} | {method} |"
        )
    text = "\n".join(lines) + "\n"
    if final:
        print(text)
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"bench_gpu_{dev.type}.md"
    out.write_text(text, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="the issue's model sizes (for a GPU)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--only", default=None, help="run the models whose name contains this")
    ap.add_argument("--out", default=None)
    ap.add_argument("--secure", action="store_true", help="also time dpspec's secure mode")
    ap.add_argument("--profile", default=None, help="write where a step's time goes to this file")
    ap.add_argument("--no-memory", action="store_true", help="leave out the loop memory (a process per loop)")
    ap.add_argument("--memory-of", default=None, help=argparse.SUPPRESS)  # MODEL::LOOP, in its own process
    args = ap.parse_args()
    if args.memory_of:
        return _one_loop_memory(args)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cpu":
        torch.set_num_threads(1)
    warm, steps = (3, args.steps or 30) if args.full else (1, args.steps or 4)
    rows, profiles = [], []
    names = [name for name in models(args.full) if not args.only or args.only in name]
    # each loop's memory in a fresh process of its own, before this process takes any device memory
    mems = footprints(names, args) if dev.type == "cuda" and not args.no_memory else {}
    for name, (build, make, b) in models(args.full).items():
        if name not in names:
            continue
        print(name, file=sys.stderr)
        fns, method = loops(
            build,
            make,
            b,
            dev,
            warm + steps + 4 + POISSON_WARMUP + (7 if args.profile else 0),
            secure=args.secure,
            graph=dev.type == "cuda",
        )
        ts, peak, capture = measure(fns, dev, warm, steps)
        footprint = {loop: m for (model, loop), m in mems.items() if model == name}
        pool = graph_pool_mib(PRIVATE_MODELS["dpspec graph"]) if "dpspec graph" in PRIVATE_MODELS else None
        pool = None if pool is None else (capture.get("dpspec graph"), pool)
        for k in ("dpspec graph", "dpspec graph poisson"):
            if k in PRIVATE_MODELS:
                print(f"  {k}: {PRIVATE_MODELS[k].cuda_graph_status}", file=sys.stderr)
        # one more step of each; a graphed loop's count is what it dispatches outside its graphs' replays
        ops = {k: ops_per_step(fns[k]) for k in OPS_COLUMNS if k in fns}
        med = {k: statistics.median(v) for k, v in ts.items()}
        ratio = {k: statistics.median(a / r for a, r in zip(v, ts["non-private"])) for k, v in ts.items()}
        vs_ghost = (
            [
                statistics.median(a / r for a, r in zip(ts[k], ts["opacus ghost"]))
                for k in ("dpspec", "dpspec graph")
                if k in ts
            ]
            if "opacus ghost" in ts
            else None
        )
        rows.append((name, method, med, ratio, peak, vs_ghost, ops, pool, footprint))
        if args.profile:
            profiles.append(f"# {name}\n\n{profile_steps(fns, dev)}\n")
            Path(args.profile).write_text("\n".join(profiles), encoding="utf-8")
        write_table(rows, dev, args, warm, steps, final=False)  # what is measured so far survives a kill
        print(
            "  "
            + ", ".join(f"{k} {v * 1e3:.2f} ms ({ratio[k]:.2f}×)" for k, v in med.items())
            + (f"; dpspec (graph) / opacus ghost {' / '.join(f'{v:.2f}×' for v in vs_ghost)}" if vs_ghost else "")
            + (f"; graph capture step {pool[0]:.2f} MiB, pool {pool[1]:.2f} MiB" if pool else "")
            + (
                "; device footprint / loop peak MiB "
                + ", ".join(f"{k} {v['footprint']:.0f} / {v['peak']:.0f}" for k, v in footprint.items())
                if footprint
                else ""
            )
            + "; aten ops / step "
            + ", ".join(f"{k} {v}" for k, v in ops.items())
            + "; peak step MiB above start "
            + ", ".join(f"{k} {v:.2f}" for k, v in peak.items())
            + f"; clipping: {method}",
            file=sys.stderr,
        )
    write_table(rows, dev, args, warm, steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
