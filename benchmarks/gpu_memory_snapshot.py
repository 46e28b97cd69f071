"""Where one loop of ``bench_gpu.py`` takes its device memory, step by step (CUDA only).

``bench_gpu.py`` reports each loop's device footprint (``max_memory_reserved`` over its warm-up steps). Where a
footprint is above what its graphs and steps should need (the graphed Poisson loops of the transformer and the
BERT-sized encoder: 716 and 3916 MiB on an H200 against about 600 and 2700 predicted), this script says why: it
builds that loop alone, as ``bench_gpu.py --memory-of`` does, records the caching allocator's history
(``torch.cuda.memory._record_memory_history``, Python stacks) over the same steps, and prints

* the reserved memory per pool at the end (the default pool, each CUDA graph pool) and how much of it is allocated;
* every segment the allocator took from the device (``cudaMalloc``) or gave back, with the step it came in, its
  size, the pool it is in at the end, and the code that asked: the innermost frame in dpspec/ or benchmarks/, and
  the innermost frame of all;
* the reserved memory after each step;
* the blocks still allocated at the end, grouped by that code.

    python benchmarks/gpu_memory_snapshot.py --model Transformer --loop "dpspec graph poisson"
    python benchmarks/gpu_memory_snapshot.py --model BERT --loop "dpspec graph poisson" --out /tmp/bert.txt

``summarize`` works on a snapshot's dict alone (tested on a made-up one on the CPU).
"""

from __future__ import annotations

import argparse
import collections
import gc
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MiB = 2**20


def _short(filename: str) -> str:
    for mark in ("/dpspec/", "/benchmarks/", "/torch/"):
        if mark in filename:
            return mark.strip("/") + "/" + filename.split(mark, 1)[1]
    return filename.rsplit("/", 1)[-1]


def site(frames) -> str:
    """The code that asked for memory: the innermost frame in dpspec/ or benchmarks/ (and the innermost frame of
    all, when it is elsewhere)."""
    frames = frames or []
    ours = next((f for f in frames if any(m in f.get("filename", "") for m in ("/dpspec/", "/benchmarks/"))), None)
    inner = frames[0] if frames else None

    def where(f):
        return f"{_short(f.get('filename', '?'))}:{f.get('line', '?')} {f.get('name', '?')}"

    if ours is None:
        return where(inner) if inner else "?"
    return where(ours) if inner is ours else f"{where(ours)} ← {where(inner)}"


def _pool(segment) -> str:
    pid = tuple(segment.get("segment_pool_id", (0, 0)) or (0, 0))
    return "default" if pid == (0, 0) else f"pool {pid}"


def summarize(snapshot: dict, step_ends: list[int], device: int = 0, top: int = 25) -> str:
    """The text report of a snapshot (``torch.cuda.memory._snapshot()``) whose device trace was recorded over
    the steps; ``step_ends[i]``: the trace's length when step i ended. Frames innermost first, as torch records
    them."""
    lines = []
    segments = [s for s in snapshot.get("segments", []) if s.get("device", device) == device]
    pool_of = {s["address"]: _pool(s) for s in segments}
    by_pool: dict = collections.defaultdict(lambda: [0, 0, 0])
    for s in segments:
        v = by_pool[_pool(s)]
        v[0] += s["total_size"]
        v[1] += s.get("allocated_size", 0)
        v[2] += 1
    lines.append("reserved at the end, by pool (MiB reserved / allocated, segments):")
    for pool, (total, allocated, n) in sorted(by_pool.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {pool}: {total / MiB:.1f} / {allocated / MiB:.1f}, {n}")
    trace = (snapshot.get("device_traces") or [[]])[device]

    def step_of(i: int) -> int:
        return next((k for k, end in enumerate(step_ends) if i < end), len(step_ends))

    lines.append("")
    lines.append("segments taken (+) and given back (−): step, MiB, pool at the end, the code that asked")
    reserved, per_step = 0, collections.OrderedDict()
    for i, e in enumerate(trace):
        action = e.get("action")
        if action not in ("segment_alloc", "segment_free", "segment_map", "segment_unmap"):
            continue
        sign = 1 if action in ("segment_alloc", "segment_map") else -1
        reserved += sign * e["size"]
        per_step[step_of(i)] = reserved
        pool = pool_of.get(e.get("addr"), "freed by the end")
        sign_size = f"{'+' if sign > 0 else '−'}{e['size'] / MiB:.1f}"
        lines.append(f"  step {step_of(i):>3} {sign_size:>10}  {pool:<18} {site(e.get('frames'))}")
    lines.append("")
    lines.append("reserved after each step that changed it (MiB, from the first segment recorded):")
    lines.append("  " + ", ".join(f"step {k}: {v / MiB:.0f}" for k, v in per_step.items()))
    live: collections.Counter = collections.Counter()
    for s in segments:
        for b in s.get("blocks", []):
            if b.get("state") == "active_allocated":
                live[(_pool(s), site(b.get("frames")))] += b["size"]
    lines.append("")
    lines.append(f"allocated at the end, by the code that asked (top {top}, MiB):")
    for (pool, where), size in live.most_common(top):
        lines.append(f"  {size / MiB:9.1f}  {pool:<18} {where}")
    return "\n".join(lines) + "\n"


def main() -> int:
    import bench_gpu as bg
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="Transformer", help="the bench_gpu.py model whose name contains this")
    ap.add_argument("--loop", default="dpspec graph poisson", help=f"one of {', '.join(bg.LOOPS)}")
    ap.add_argument("--steps", type=int, default=None, help="steps recorded (default: bench_gpu.py's warm-up)")
    ap.add_argument("--small", action="store_true", help="bench_gpu.py's small sizes (default: --full's)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", default=None, help="also write the report here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: the allocator's history is CUDA's", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    name, (build, make, b) = next((k, v) for k, v in bg.models(not args.small).items() if args.model in k)
    steps = args.steps or 3 + (bg.POISSON_WARMUP if "poisson" in args.loop else 0)
    fns, _ = bg.loops(build, make, b, dev, steps + 4, graph=True, only=args.loop)
    if args.loop not in fns:
        print(f"{args.loop!r} is not built for {name!r}", file=sys.stderr)
        return 2
    fn = fns[args.loop]
    gc.collect()
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    start = torch.cuda.memory_reserved(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
    step_ends = []
    try:
        step_ends.append(len(torch.cuda.memory._snapshot()["device_traces"][dev.index or 0]))
        for _ in range(steps):
            fn()
            torch.cuda.synchronize(dev)
            step_ends.append(len(torch.cuda.memory._snapshot()["device_traces"][dev.index or 0]))
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    footprint = (torch.cuda.max_memory_reserved(dev) - start) / MiB
    report = (
        f"# {name}, loop {args.loop!r}, {steps} steps, {torch.cuda.get_device_name(dev)}, torch {torch.__version__}\n"
        f"footprint (max reserved − reserved before): {footprint:.0f} MiB\n\n"
        + summarize(snapshot, step_ends[1:], dev.index or 0, args.top)  # (step_ends[0]: before the first step)
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
