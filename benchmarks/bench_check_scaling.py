"""`dpspec check` on generated specs of 1k … 40k blocks: time per block, and its ratio to the smallest.

`check` must be linear in the spec's size: the time per block stays flat (ratio ≈ 1) from 1k to
40k blocks. The specs cycle through realistic blocks (a privacy unit, a Gaussian release, a DP-SGD
training, a composition), each referring to the others by name. The resource limits on a spec's
size (`dpspec.limits`: source bytes, tokens, blocks) are raised for this benchmark, since 40k
blocks are far above what a spec may hold by default.

    python benchmarks/bench_check_scaling.py [--sizes 1000,2000,5000,10000,20000,40000] [--repeat 1]

Prints CPU seconds (this process) and wall seconds per size, µs per block, and the ratio of µs per
block to the smallest size. Exit status 1 when the largest ratio exceeds --max-ratio (default 2.0).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def raise_size_limits() -> None:
    """Lift the limits on a spec's size (the point here is to go far beyond them)."""
    for name, value in (("SOURCE_BYTES", 10**9), ("TOKENS", 10**9), ("BLOCKS", 10**7), ("DIAGNOSTICS", 10**6)):
        os.environ[f"DPSPEC_MAX_{name}"] = str(value)


def generate(n_blocks: int) -> str:
    """A spec of ``n_blocks`` blocks: privacy, release, train, compose, repeated."""
    out = []
    i = 0
    while len(out) < n_blocks:
        out.append(f"privacy people_{i} {{\n  unit record\n  dataset_size 60000\n}}\n")
        out.append(f"release stat_{i} {{\n  protect   people_{i}\n  mechanism gaussian\n"
                   f"  query     sum(col_{i}, bounds = [0, {i + 1}])\n  noise     gaussian(sigma = 50)\n"
                   f"  guarantee dp(delta = 1e-7)\n}}\n")
        out.append(f"train model_{i} {{\n  protect  people_{i}\n  mechanism dpsgd\n"
                   f"  sampling poisson(expected_batch = 256)\n  clipping flat(C = 1.0)\n  epochs   2\n"
                   f"  noise_multiplier 1.1\n  guarantee dp(delta = 1e-6)\n}}\n")
        out.append(f"compose both_{i} {{\n  parts     [stat_{i}, model_{i}]\n  guarantee dp(delta = 1e-6)\n}}\n")
        i += 1
    return "\n".join(out[:n_blocks])


def check_time(text: str) -> tuple[float, float, bool]:
    import dpspec
    from dpspec.parse import parser

    if hasattr(parser, "MAX_SOURCE_BYTES"):  # versions before dpspec.limits kept the size cap here
        parser.MAX_SOURCE_BYTES = 10**9
    c0, w0 = time.process_time(), time.perf_counter()
    spec = dpspec.loads(text, name="generated.dps")
    return time.process_time() - c0, time.perf_counter() - w0, spec.ok


def main() -> int:
    if not os.environ.get("PYTHONPATH"):  # this checkout's dpspec, unless PYTHONPATH names another
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise_size_limits()
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000,40000")
    ap.add_argument("--repeat", type=int, default=1, help="best of this many runs per size")
    ap.add_argument("--max-ratio", type=float, default=2.0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    check_time(generate(50))  # warm up: imports, pydantic schemas
    print(f"{'blocks':>7} {'bytes':>10} {'cpu s':>8} {'wall s':>8} {'µs/block':>9} {'ratio':>6}  ok")
    base = None
    worst = 0.0
    for n in sizes:
        text = generate(n)
        runs = [check_time(text) for _ in range(args.repeat)]
        cpu, wall, ok = min(runs)
        per = cpu / n * 1e6
        base = base or per
        worst = max(worst, per / base)
        print(f"{n:7d} {len(text):10d} {cpu:8.2f} {wall:8.2f} {per:9.1f} {per / base:6.2f}  {ok}", flush=True)
    print(f"largest ratio of time per block to the smallest size: {worst:.2f} (limit {args.max_ratio})")
    return 0 if worst <= args.max_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
