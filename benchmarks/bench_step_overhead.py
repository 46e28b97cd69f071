"""The host-side cost of a private step: tiny models on the CPU, 1 thread, where the compute is about nil.

On a GPU a small model's eager private step (``dpspec.torch.make_private``, no CUDA graph) is bound by the
host: the Python code that runs per step and the aten operations it dispatches (each non-view one a kernel
launch, ≈ 35 µs apiece on an H100 in ``bench_gpu.py --full``). This benchmark measures that host cost where
it can be measured without a GPU: ``bench_gpu.py``'s models scaled down to a few units (so that what the
CPU spends is Python, dispatch and allocation, not arithmetic), batch 4, ``torch.set_num_threads(1)``.

For each model, in the same run, on the same data, the loops of :func:`bench_gpu.loops`:

* **non-private**: ``criterion(model(x), y).backward(); optimizer.step()``;
* **dpspec**: ``dpspec.torch.make_private`` (fixed-size batches without replacement, flat clipping C = 1,
  eager: the clipping method it picks — ghost, per-layer rules, vmap — is printed);
* **Opacus ghost** (``grad_sample_mode="ghost"``, the same σ and C), where opacus is importable and accepts
  the model;
* **dpspec graph** and **dpspec graph poisson** (``make_private(..., cuda_graph=True)``, fixed-size and Poisson
  batches), **replays skipped** (:func:`replays_skipped`): on a GPU such a step is the host's work around one
  launch per graph, so its host cost is what is left of the step once the replays cost nothing. Here each
  "graph" is recorded by running the step once and its replays do nothing (the step then reuses stale sums: the
  numbers are not a training's, the host work is), so the figure is the host cost of a graphed step without its
  replays' launches and without the device time of the kernels they replay.

**µs / step**: the median host time of one step (its batch's fetch included), the loops interleaved step by
step over many rounds (a load from other processes slows all alike); **÷ non-private** and **÷ Opacus
ghost**: paired medians (each dpspec step against the other loop's step of the same round). **aten ops /
step**: the operations one step dispatches below autograd (a ``TorchDispatchMode`` count, views included,
the batch's fetch left out).

    python benchmarks/bench_step_overhead.py                 # ~1 min
    python benchmarks/bench_step_overhead.py --rounds 2000   # steadier medians
    python benchmarks/bench_step_overhead.py --only MLP --out /tmp/x.md

Writes benchmarks/results/step_overhead_cpu.md.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu as bg  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from bench_make_private import timed  # noqa: E402

B = 4


def tiny_models() -> dict:
    """name → (build, input maker(n, g)): ``bench_gpu.models``' five, a few units wide."""
    vec, img = bg.vec, bg.img

    def tok(seq):
        return bg.tok(seq, vocab=50)

    return {
        "MLP 8→8→10": (lambda: nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 10)), vec(8)),
        "MLP 8→16→16→10": (
            lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 10)),
            vec(8),
        ),
        "CNN 3×32×32, 3 conv + GroupNorm (width 4)": (lambda: bg.CNN(4), img),
        "TransformerEncoder 2×d8, seq 4": (lambda: bg.Encoder(50, 8, 2, 16, 2), tok(4)),
        "encoder 2×d8 + rank-2 adapters, seq 4": (lambda: bg.adapted(50, 8, 2, 16, 2, 2), tok(4)),
    }


@contextlib.contextmanager
def replays_skipped():
    """Within: ``make_private(..., cuda_graph=True)`` replays on the CPU, each capture a run of the function
    and each replay nothing (for the host cost of a graphed step; see the module docstring)."""
    import dpspec.torch.cuda_graph as cg

    def record(self, static):
        outputs = self.fn(*static)

        class Skipped:
            def replay(self):
                pass

        return Skipped(), outputs

    names = ("Replayer", "GraphedClippedSum", "GraphedLossCheck")
    saved = {name: getattr(cg, name) for name in names}
    for name, cls in saved.items():
        setattr(cg, name, type(cls.__name__, (cls,), {"device_type": "cpu", "_record": record}))
    try:
        yield
    finally:
        for name, cls in saved.items():
            setattr(cg, name, cls)


def paired(a, b):
    return statistics.median(x / y for x, y in zip(a, b))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=400, help="timed steps of each loop (interleaved)")
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--only", default=None, help="run the models whose name contains this")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "step_overhead_cpu.md"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    dev = torch.device("cpu")
    cols = ["non-private", "dpspec", "opacus ghost"]
    graphs = ["dpspec graph", "dpspec graph poisson"]
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    lines = [
        f"# Host cost of a private step, tiny models, CPU {platform.machine()}, 1 thread",
        "",
        f"torch {torch.__version__}; commit {commit}; batch {B}; {args.rounds} timed steps per loop, interleaved, "
        f"after {args.warm} warm-up; `python benchmarks/bench_step_overhead.py`. µs / step: median host time "
        "of a step (its batch's fetch included); ratios: paired medians (dpspec's step over the other loop's "
        "step of the same round). aten ops / step: dispatched below autograd, views included, the fetch left out. "
        "dpspec graph (replays skipped): `cuda_graph=True`, fixed-size / Poisson batches, with every replay a no-op "
        "(its host work without the replays: what bounds a graphed step of a small model on a GPU).",
        "",
        "| model | non-private µs | dpspec µs | Opacus ghost µs | dpspec ÷ non-private | dpspec ÷ Opacus ghost "
        "| dpspec graph µs, replays skipped (fixed / Poisson) | ÷ non-private | aten ops / step (dpspec / non-private "
        "/ Opacus ghost / graph / graph Poisson) | dpspec clipping |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, (build, make) in tiny_models().items():
        if args.only and args.only not in name:
            continue
        print(name, file=sys.stderr)
        with replays_skipped():
            fns, method = bg.loops(build, make, B, dev, 10 * (args.rounds + args.warm + 10), graph=True)
        fns = {k: fns[k] for k in cols + graphs if k in fns}  # (Opacus hooks left out)
        ts = timed(fns, args.warm, args.rounds)  # the loops interleaved step by step
        ops = {k: bg.ops_per_step(fn) for k, fn in fns.items()}
        med = {k: statistics.median(v) * 1e6 for k, v in ts.items()}
        cell = {k: f"{med[k]:.0f}" if k in med else "—" for k in cols}
        vs_np = f"{paired(ts['dpspec'], ts['non-private']):.2f}×"
        vs_og = f"{paired(ts['dpspec'], ts['opacus ghost']):.2f}×" if "opacus ghost" in ts else "—"
        opc = " / ".join(str(ops[k]) if k in ops else "—" for k in cols[1:2] + cols[:1] + cols[2:] + graphs)
        graphed = " / ".join(f"{med[k]:.0f}" for k in graphs)
        graphed_np = " / ".join(f"{paired(ts[k], ts['non-private']):.2f}×" for k in graphs)
        row = (
            f"| {name} | {cell['non-private']} | {cell['dpspec']} | {cell['opacus ghost']} | {vs_np} | {vs_og} "
            f"| {graphed} | {graphed_np} | {opc} | {method} |"
        )
        print("  " + row, file=sys.stderr)
        lines.append(row)
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
