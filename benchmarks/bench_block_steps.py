"""What ``make_private(..., block_size=k)`` costs: a step whose bits do not depend on the physical batch size is
computed on blocks of k rows, each alone, so it runs at the speed of batches of k rows.

For each model of ``bench_make_private.py`` (fixed-size batches of B without replacement, flat clipping), in the
same run, on the same data, 1 torch thread, the loops interleaved step by step, each step paired with the
ordinary make_private step of the same round:

* **ordinary**: ``make_private`` (the whole batch at once);
* **chunks of 16**: ``max_physical_batch_size=16`` (virtual batches, the ordinary way: bits depend on 16);
* **blocks of k**: ``block_size=k`` for k = 8, 16, 32 (the same bits for every chunk size that is a multiple of k);
* **blocks of 16 in chunks of 32**: ``block_size=16, max_physical_batch_size=32`` (equal to blocks of 16, bit for
  bit: asserted here too).

    python benchmarks/bench_block_steps.py            # ~1 min
    python benchmarks/bench_block_steps.py --steps 40

Writes benchmarks/results/bench_block_steps_cpu.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from bench_make_private import SPEC, ce, models, timed  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

import dpspec  # noqa: E402
import dpspec.torch as dt  # noqa: E402

LOOPS = {
    "ordinary": {},
    "chunks of 16": {"max_physical_batch_size": 16},
    "blocks of 8": {"block_size": 8},
    "blocks of 16": {"block_size": 16},
    "blocks of 32": {"block_size": 32},
    "blocks of 16 in chunks of 32": {"block_size": 16, "max_physical_batch_size": 32},
}


def loops(build, shape, n, b, total):
    g = torch.Generator().manual_seed(0)
    X = torch.randint(0, 100, (n, 32), generator=g) if shape == "tokens" else torch.randn(n, *shape, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    fns, models_ = {}, {}
    for name, kw in LOOPS.items():
        torch.manual_seed(0)
        m = build()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, opt, loader = dt.make_private(
                dpspec.compile(SPEC.format(n=n, b=b, steps=total)),
                m,
                torch.optim.SGD(m.parameters(), lr=0.05),
                TensorDataset(X, y),
                seed=0,
                **kw,
            )

        state: dict = {"it": None}  # this loop's pass over its loader

        def step(model=model, opt=opt, loader=loader, state=state):
            while True:  # one logical step: every chunk of the batch, then the optimizer's step
                if state["it"] is None:
                    state["it"] = iter(loader)
                taken = opt.steps_taken
                for xb, yb in state["it"]:
                    opt.zero_grad()
                    ce(model(xb), yb).backward()
                    opt.step()
                    if opt.steps_taken > taken:
                        return
                state["it"] = None

        fns[name], models_[name] = step, m
    return fns, models_


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20, help="timed steps of each loop (interleaved)")
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_block_steps_cpu.md"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    names = list(LOOPS)
    lines = [
        f"# make_private with block_size: step time, CPU {platform.machine()}, 1 thread",
        "",
        f"torch {torch.__version__}; commit {commit}; {args.steps} timed steps per loop after {args.warm}, the loops "
        "interleaved; `python benchmarks/bench_block_steps.py`. Each cell: the median step in ms, and the median "
        "of its ratio to the ordinary step of the same round.",
        "",
        "| model (batch) | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for mname, (build, shape, b) in models().items():
        print(mname, file=sys.stderr)
        n = 4 * b
        fns, nets = loops(build, shape, n, b, args.warm + args.steps)
        ts = timed(fns, args.warm, args.steps)
        same = torch.equal(
            torch.cat([p.detach().reshape(-1) for p in nets["blocks of 16"].parameters()]),
            torch.cat([p.detach().reshape(-1) for p in nets["blocks of 16 in chunks of 32"].parameters()]),
        )
        assert same, "blocks of 16 unchunked and in chunks of 32 differ"
        cells = []
        for k in names:
            med = statistics.median(ts[k]) * 1e3
            ratio = statistics.median(a / o for a, o in zip(ts[k], ts["ordinary"]))
            cells.append(f"{med:.1f} ms ({ratio:.2f}×)")
        row = f"| {mname} ({b}) | " + " | ".join(cells) + " |"
        print("  " + row, file=sys.stderr)
        lines.append(row)
    lines += ["", "Blocks of 16 unchunked and in chunks of 32 gave the same parameters bit for bit on every model."]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
