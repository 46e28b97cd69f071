"""Step cost of ``dpspec.torch.make_private`` against the runtime's own ``private_gradients`` path and
against Opacus's ``make_private``, measured in the same run on the same models and batch size.

For each model, one DP-SGD certificate (fixed-size batches of B without replacement, so every step
has the same batch size) and three loops, each timed per step (median over the timed steps, after
warm-up steps; the three loops interleaved step by step), 1 torch thread:

* **runtime**: ``idx = next(mech.batches(...))``; ``X[idx], y[idx]``; ``mech.private_gradients(...)``;
  set ``.grad``; ``SGD.step()`` — what ``DpSgd.train`` does;
* **make_private**: the Opacus-style loop on the wrapped objects: ``for x, y in loader:
  optimizer.zero_grad(); ce(model(x), y).backward(); optimizer.step()``;
* **opacus**: ``opacus.PrivacyEngine().make_private`` (hooks, ``poisson_sampling=False``), same loop.

Models: an MLP 256→512→10 (the runtime's ghost-norm path) and a small CNN with GroupNorm (the vmap
path). Target: make_private ≤ 1.2× the runtime path. Ratio = median over the rounds of (step time / the runtime step of the same round).

    python benchmarks/bench_make_private.py            # ~1 min on 2 cores
    python benchmarks/bench_make_private.py --quick
    python benchmarks/bench_make_private.py --secure   # secure mode's noise against the generator's

``--secure`` times, on an MLP 784→1024→256→10 (1.07M parameters), the noise of one step (the clipped
sums' noisy copy: torch's generator, as ``DpSgd._noisy_sum`` draws it, against secure mode's OS-CSPRNG
integer noise on a grid) and a whole ``private_gradients`` step (B = 256) with each, interleaved step by
step; it writes benchmarks/results/bench_make_private_secure.md.

Writes benchmarks/results/bench_make_private.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import dpspec  # noqa: E402
import dpspec.torch as dt  # noqa: E402

SPEC = """
privacy people {{ unit record  dataset_size {n} }}
train model {{ protect people  mechanism dpsgd  sampling without_replacement(batch_size = {b})
  clipping flat(C = 1.0)  steps {steps}  guarantee dp(epsilon = 8, delta = 1e-5) }}
"""


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.n1 = nn.GroupNorm(4, 8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, stride=2)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.n1(self.c1(x)))
        return self.fc(torch.relu(self.c2(x)).flatten(1))


class Encoder(nn.Module):
    """A 2-layer nn.TransformerEncoder (d 64, 4 heads, sequence 32) over token ids, mean-pooled."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(self.enc(self.emb(x)).mean(dim=1))


def models():
    return {"MLP 256→512→10": (lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)),
                               (256,), 256),
            "CNN 1×16×16, GroupNorm": (CNN, (1, 16, 16), 256),
            "TransformerEncoder 2×d64, seq 32": (Encoder, "tokens", 64)}


def ce(out, y):
    return nn.functional.cross_entropy(out, y)


def timed(fns: dict, warm: int, steps: int) -> dict:
    """Step times of each loop, the loops interleaved step by step (a load from other processes on the
    machine then slows all of them alike)."""
    for fn in fns.values():
        for _ in range(warm):
            fn()
    ts = {k: [] for k in fns}
    for _ in range(steps):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            ts[k].append(time.perf_counter() - t0)
    return ts


def bench(build, shape, n, b, warm, steps):
    g = torch.Generator().manual_seed(0)
    if shape == "tokens":
        X = torch.randint(0, 100, (n, 32), generator=g)
    else:
        X = torch.randn(n, *shape, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    total = warm + steps

    # the runtime's own path
    mech = dpspec.compile(SPEC.format(n=n, b=b, steps=total)).mechanism
    torch.manual_seed(0)
    m0 = build()
    opt0 = torch.optim.SGD(m0.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(1)
    names = [k for k, p in m0.named_parameters()]
    it = mech.batches(n, rng, total)

    def runtime_step():
        idx = next(it)
        ii = torch.as_tensor(idx)
        grads = mech.private_gradients(m0, ce, X[ii], y[ii], n, generator=gen, idx=idx)
        for k, p in zip(names, m0.parameters()):
            p.grad = grads[k]
        opt0.step()

    fns = {"runtime": runtime_step}

    # make_private
    c = dpspec.compile(SPEC.format(n=n, b=b, steps=total))
    torch.manual_seed(0)
    m1 = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model1, opt1, loader1 = dt.make_private(c, m1, torch.optim.SGD(m1.parameters(), lr=0.05),
                                             DataLoader(TensorDataset(X, y), batch_size=b), seed=0)
    batches1 = iter(_forever(loader1))

    def wrapped_step():
        xb, yb = next(batches1)
        opt1.zero_grad()
        ce(model1(xb), yb).backward()
        opt1.step()

    fns["make_private"] = wrapped_step
    sigma = c.mechanism.noise_multiplier

    # the non-private step: the same loop on the bare model, the batch drawn by index
    torch.manual_seed(0)
    m2 = build()
    opt2 = torch.optim.SGD(m2.parameters(), lr=0.05)
    rng2 = np.random.default_rng(1)

    def nonprivate_step():
        ii = torch.as_tensor(rng2.choice(n, size=b, replace=False))
        opt2.zero_grad()
        ce(m2(X[ii]), y[ii]).backward()
        opt2.step()

    fns["nonprivate"] = nonprivate_step

    try:
        from opacus import PrivacyEngine
    except ImportError:
        return timed(fns, warm, steps), sigma
    torch.manual_seed(0)
    m = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine()
        try:
            model, opt, loader = engine.make_private(module=m, optimizer=torch.optim.SGD(m.parameters(), lr=0.05),
                                                     data_loader=DataLoader(TensorDataset(X, y), batch_size=b,
                                                                            shuffle=True),
                                                     noise_multiplier=sigma, max_grad_norm=1.0,
                                                     poisson_sampling=False)
        except Exception:  # Opacus refuses the model (nn.MultiheadAttention)
            return timed(fns, warm, steps), sigma
        batches = iter(_forever(loader))

        def opacus_step():
            xb, yb = next(batches)
            opt.zero_grad()
            ce(model(xb), yb).backward()
            opt.step()

        fns["opacus"] = opacus_step
        return timed(fns, warm, steps), sigma


def _forever(loader):
    while True:
        yield from loader


def bench_secure(steps: int, out: str) -> int:
    """Secure mode's cost on a 1M-parameter MLP (see the module docstring)."""
    from dpspec.mechanisms.noise_device import gaussian_like
    from dpspec.mechanisms.secure_noise_training import SecureGaussianNoise

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 256), nn.ReLU(), nn.Linear(256, 10))
    d = sum(p.numel() for p in model.parameters())
    n, b = 4096, 256
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(n, 784, generator=g), torch.randint(0, 10, (n,), generator=g)
    mech = dpspec.compile(SPEC.format(n=n, b=b, steps=10 * steps + 10)).mechanism
    sums = {k: torch.randn(p.shape, generator=g) for k, p in model.named_parameters()}
    gen, sec = torch.Generator().manual_seed(1), SecureGaussianNoise()
    std, sigma, clip = mech.noise_std, mech.noise_multiplier, mech.clip_norm
    rng = np.random.default_rng(0)
    it = mech.batches(n, rng, 10 * steps + 10)

    def step(generator):
        idx = next(it)
        mech.private_gradients(model, ce, X[idx], y[idx], n, generator=generator, idx=idx)

    fns = {
        "noise: generator": lambda: {k: v + gaussian_like(v, std, gen) for k, v in sums.items()},
        "noise: secure": lambda: sec.add(sums, sigma, clip),
        "step: generator": lambda: step(gen),
        "step: secure": lambda: step(sec),
    }
    ts = timed(fns, 2, steps)
    med = {k: statistics.median(v) for k, v in ts.items()}
    cpu = {}  # process CPU time (user + system, os.urandom's syscalls included): steadier on a loaded machine
    for k, fn in fns.items():
        t0 = time.process_time()
        for _ in range(max(3, steps // 4)):
            fn()
        cpu[k] = (time.process_time() - t0) / max(3, steps // 4)
    paired = {
        what: statistics.median(a / r for a, r in zip(ts[f"{what}: secure"], ts[f"{what}: generator"]))
        for what in ("noise", "step")
    }
    lines = [
        "# Secure mode's cost (CPU)",
        "",
        f"Machine: {platform.machine()}, 1 torch thread, Python {platform.python_version()}, "
        f"torch {torch.__version__}; "
        f"`python benchmarks/bench_make_private.py --secure`. MLP 784→1024→256→10, d = {d:,} parameters; median "
        f"over {steps} rounds after 2 warm-up rounds, the four loops interleaved step by step. The noise: the noisy "
        "copy of the clipped sums (torch's CPU generator, `gaussian_like` per tensor, against "
        "`SecureGaussianNoise.add`: 8 bytes of `os.urandom` and float64 Box–Muller per coordinate, integer noise "
        "on the grid added exactly). The step: `private_gradients` (ghost norms, B = 256 of N = 4096 without "
        "replacement) with each.",
        "",
        "| what | generator (ms) | secure (ms) | secure / generator (paired) | CPU time: generator, secure (ms) |",
        "|---|---|---|---|---|",
    ]
    for what in ("noise", "step"):
        lines.append(
            f"| {what} | {med[what + ': generator'] * 1e3:.1f} | {med[what + ': secure'] * 1e3:.1f} "
            f"| {paired[what]:.2f}× | {cpu[what + ': generator'] * 1e3:.1f}, {cpu[what + ': secure'] * 1e3:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    Path(out).write_text(text, encoding="utf-8")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--secure", action="store_true", help="secure mode's noise against the generator's")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 100; --quick: 8)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_make_private.md"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.secure:
        out = args.out.replace("bench_make_private.md", "bench_make_private_secure.md")
        return bench_secure(args.steps or (5 if args.quick else 20), out)
    n = 4096
    warm, steps = (2, 8) if args.quick else (5, 100)
    steps = args.steps or steps
    rows = []
    for name, (build, shape, b) in models().items():
        ts, sigma = bench(build, shape, n, b, warm, steps)
        res = {k: statistics.median(v) for k, v in ts.items()}
        # paired ratios: each round's step against the runtime's step of the same round, then the median
        ratio = {k: statistics.median(a / r for a, r in zip(v, ts["runtime"])) for k, v in ts.items()}
        rows.append((name, res, ratio, ts))
        print(f"{name}: " + ", ".join(f"{k} {v * 1e3:.2f} ms ({ratio[k]:.2f}×)" for k, v in res.items()),
              file=sys.stderr)
    import opacus

    lines = ["# make_private step cost", "",
             f"Machine: {platform.machine()}, 1 torch thread, Python {platform.python_version()}, torch "
             f"{torch.__version__}, opacus {opacus.__version__}; {'quick' if args.quick else 'full'} run; "
             "`python benchmarks/bench_make_private.py`.", "",
             f"Batch B = 256 (the transformer: 64) of N = {n} without replacement, flat clipping C = 1, σ = {sigma:.4g}; median step time "
             f"over {steps} steps after {warm} warm-up steps, the three loops interleaved step by step in the same run. Ratio = median over the "
             "rounds of (step time / the runtime's `private_gradients` step of the same round).", "",
             "The second ratio of each pair is the ratio of the medians (less robust to a changing load).", "",
             "| model | runtime `private_gradients` (ms) | `dpspec.torch.make_private` (ms) | ratio (paired; of medians) "
             "| Opacus `make_private` (ms) | ratio (paired; of medians) | non-private (ms) "
             "| make_private / Opacus (paired) | make_private / non-private (paired) | Opacus / non-private (paired) |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def pair(a, b_):
        return statistics.median(x / y for x, y in zip(a, b_))

    for name, r, q, ts in rows:
        base = r["runtime"]
        op = f"{r['opacus'] * 1e3:.2f}" if "opacus" in r else "— (refuses the model)"
        opq = f"{q['opacus']:.2f}×; {r['opacus'] / base:.2f}×" if "opacus" in q else "—"
        vs_op = f"**{pair(ts['make_private'], ts['opacus']):.2f}×**" if "opacus" in ts else "—"
        op_np = f"{pair(ts['opacus'], ts['nonprivate']):.2f}×" if "opacus" in ts else "—"
        lines.append(f"| {name} | {base * 1e3:.2f} | {r['make_private'] * 1e3:.2f} | **{q['make_private']:.2f}×**; "
                     f"{r['make_private'] / base:.2f}× "
                     f"| {op} | {opq} | {r['nonprivate'] * 1e3:.2f} | {vs_op} "
                     f"| **{pair(ts['make_private'], ts['nonprivate']):.2f}×** | {op_np} |")
    lines += ["", "The wrapped step runs the same `private_gradients` call. The loop's forward is the private step's "
              "own per-example forward (its outputs are returned as the model's output, a leaf, so the loop's "
              "`backward()` stops there and no batch gradient is computed); what it adds is the check that the "
              "loop's loss is the per-example criterion (one autograd call on the output) and the bookkeeping. "
              "Ratios below 1 are within the run-to-run noise of a shared machine (the loops are interleaved step "
              "by step so that a load slows all three alike). Opacus materialises (B, d) per-sample gradients "
              "through hooks, which the ghost-norm path avoids for MLPs."]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
