"""Scale-out throughput on this machine: data-parallel DP-SGD (1 vs 2 gloo workers) and sliced
W∞ sensitivity on Dask against the in-memory path.

1. DP-SGD on an MLP (``dpspec.distributed.examples.run_dpsgd``; Poisson sampling, flat clipping,
   the ghost-norm per-example path): one worker = the unmodified single-process trainer in a fresh
   process with 1 torch thread; two workers = two gloo processes with 1 thread each, every rank
   drawing the same global batch and clipping half of it. Throughput = examples in the global
   batches / wall time of the training loop (max over ranks); scaling ratio = 2-worker / 1-worker
   throughput, measured in the same run. A 1-process/2-thread run is shown for reference.
2. Sliced sensitivity: ``sliced_sensitivity_report`` (in memory, streaming over directions) against
   ``dask_sliced_sensitivity_report`` (threaded scheduler, 2 workers) on the same samples held in
   RAM and as ``np.memmap`` files; throughput = projected samples × directions per second; the
   results are compared.

    .venv/bin/python benchmarks/bench_distributed.py            # ~2 min on 2 cores
    .venv/bin/python benchmarks/bench_distributed.py --quick

Writes benchmarks/results/bench_distributed.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")

from dpspec.distributed import examples as ex  # noqa: E402
from dpspec.distributed.comm import spawn  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def mlp_cfg(quick: bool) -> dict:
    n = 50000
    return dict(n=n, d=256, hidden=1024, classes=10, rate=2048 / n, steps=10 if quick else 30, sigma=1.0, clip=1.0,
                lr=0.1, momentum=0.9, seed=0)


def bench_training(quick: bool, repeats: int) -> dict:
    cfg = mlp_cfg(quick)
    rows = {"1 worker (1 thread)": [], "2 workers (gloo, 1 thread each)": [], "1 worker (2 threads), reference": []}
    examples = None
    for _ in range(repeats):
        (r,) = spawn(ex.run_dpsgd, 1, ({**cfg, "single": True},), threads=1)
        rows["1 worker (1 thread)"].append(r["examples"] / r["seconds"])
        examples = r["examples"]
        rs = spawn(ex.run_dpsgd, 2, (cfg,), threads=1)
        assert rs[0]["examples"] == examples  # the same global batches
        rows["2 workers (gloo, 1 thread each)"].append(examples / max(x["seconds"] for x in rs))
        (r2,) = spawn(ex.run_dpsgd, 1, ({**cfg, "single": True},), threads=2)
        rows["1 worker (2 threads), reference"].append(r2["examples"] / r2["seconds"])
    med = {k: statistics.median(v) for k, v in rows.items()}
    ratio = med["2 workers (gloo, 1 thread each)"] / med["1 worker (1 thread)"]
    ratios = [b / a for a, b in zip(rows["1 worker (1 thread)"], rows["2 workers (gloo, 1 thread each)"])]
    return {"cfg": cfg, "rows": rows, "median": med, "ratio": ratio, "ratios": ratios, "examples": examples}


def bench_sensitivity(quick: bool, repeats: int) -> dict:
    from dpspec.distributed.sensitivity import dask_sliced_sensitivity_report
    from dpspec.pufferfish.profiles import sphere_profile
    from dpspec.pufferfish.sensitivity import sliced_sensitivity_report

    n, d, m = (100_000 if quick else 300_000), 10, 64
    rng = np.random.default_rng(0)
    samples = {("w", s): rng.normal(loc=0.05 * i, size=(n, d)) for i, s in enumerate("abcd")}
    pairs = [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c")]
    U = sphere_profile(m, d, seed=1).directions
    work = sum(v.shape[0] for v in samples.values()) * m
    out = {"n_per_cell": n, "cells": len(samples), "d": d, "m": m, "rows": {}}
    with tempfile.TemporaryDirectory() as tmp:
        mm = {}
        for i, (k, v) in enumerate(samples.items()):
            f = np.memmap(Path(tmp) / f"{i}.f64", dtype=np.float64, mode="w+", shape=v.shape)
            f[:] = v
            f.flush()
            mm[k] = np.memmap(Path(tmp) / f"{i}.f64", dtype=np.float64, mode="r", shape=v.shape)
        runs = {
            "in-memory path (numpy arrays)": lambda: sliced_sensitivity_report(samples, pairs, U),
            "in-memory path (np.memmap)": lambda: sliced_sensitivity_report(mm, pairs, U),
            "Dask, threads × 2 (numpy arrays)": lambda: dask_sliced_sensitivity_report(
                samples, pairs, U, sample_chunk=1 << 18, direction_chunk=16, num_workers=2),
            "Dask, threads × 2 (np.memmap)": lambda: dask_sliced_sensitivity_report(
                mm, pairs, U, sample_chunk=1 << 18, direction_chunk=16, num_workers=2),
            "Dask, threads × 1 (np.memmap)": lambda: dask_sliced_sensitivity_report(
                mm, pairs, U, sample_chunk=1 << 18, direction_chunk=16, num_workers=1),
        }
        ref = None
        for name, fn in runs.items():
            secs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                rep = fn()
                secs.append(time.perf_counter() - t0)
            if ref is None:
                ref = rep.deltas
            diff = float(np.max(np.abs(rep.deltas - ref) / ref))
            s = statistics.median(secs)
            out["rows"][name] = {"seconds": s, "throughput": work / s, "max_rel_diff": diff}
    return out


def write(tr: dict, se: dict, quick: bool) -> Path:
    c = tr["cfg"]
    lines = ["# Scale-out benchmark (torch.distributed gloo, Dask)", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
             f"{'quick run' if quick else 'full run'}; `python benchmarks/bench_distributed.py"
             f"{' --quick' if quick else ''}`.", "",
             "## DP-SGD on an MLP: 1 vs 2 workers", "",
             f"MLP {c['d']}→{c['hidden']}→{c['classes']} (ReLU), n = {c['n']}, Poisson rate {c['rate']:.4g} "
             f"(expected batch {c['rate'] * c['n']:.0f}), {c['steps']} steps, flat clipping C = {c['clip']}, σ = "
             f"{c['sigma']}; {tr['examples']} examples in the global batches. Median over the repeats; wall time of "
             "the training loop (process start-up and the gloo rendezvous excluded).", "",
             "| configuration | examples / s (median) | runs |", "|---|---|---|"]
    for k, v in tr["rows"].items():
        lines.append(f"| {k} | {tr['median'][k]:,.0f} | {', '.join(f'{x:,.0f}' for x in v)} |")
    lines += ["", f"**Scaling ratio (2 workers / 1 worker, same run): {tr['ratio']:.2f}×** "
              f"(per repeat: {', '.join(f'{x:.2f}' for x in tr['ratios'])}).", "",
              "Per step each rank clips half of the global batch (ghost norms) and the ranks exchange one flat "
              "buffer of the clipped sums (one all-reduce; rank 0 adds the noise before it) plus a 16-byte "
              "all-reduce for the batch-consensus digest. The remaining gap to 2× is the all-reduce latency, "
              "the replicated optimizer step and Poisson draw, and the two processes sharing 2 cores with the "
              "OS.", "",
              "## Sliced W∞ sensitivity: Dask against the in-memory path", "",
              f"{se['cells']} (world, secret) cells × {se['n_per_cell']:,} samples, d = {se['d']}, "
              f"m = {se['m']} directions, 4 pairs, plug-in estimator with the floating-point margin. "
              "Throughput = projected samples × directions per second. `max rel diff` compares Δ^u with the "
              "first row.", "",
              "| path | seconds (median) | samples·directions / s | max rel diff of Δ^u |", "|---|---|---|---|"]
    for k, v in se["rows"].items():
        lines.append(f"| {k} | {v['seconds']:.2f} | {v['throughput']:,.0f} | {v['max_rel_diff']:.1e} |")
    base = se["rows"]["in-memory path (np.memmap)"]["throughput"]
    dk = se["rows"]["Dask, threads × 2 (np.memmap)"]["throughput"]
    lines += ["", f"Dask (2 threads) / in-memory on the same memmapped samples: **{dk / base:.2f}×**.", "",
              "On one 2-core machine Dask is not faster: the in-memory path already streams over direction chunks "
              "with one BLAS call per (chunk, row block) and sorts in place, while the Dask graph adds a gather "
              "(rechunk) of every direction chunk's projections and task scheduling. Dask's value is the "
              "execution model, not single-node speed: samples stay on disk (memmap or any chunked store), the "
              "per-task memory is one direction chunk of one secret's projections, and the same graph runs on a "
              "`dask.distributed` cluster (`scheduler=` argument). The relative differences (~1e-15) are the "
              "rounding of the projections under different BLAS block shapes; both results include the "
              "floating-point margin that dominates it.", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "bench_distributed.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    reps = 2 if a.quick else 3
    tr = bench_training(a.quick, reps)
    print(f"training: {tr['median']}  ratio {tr['ratio']:.2f}", flush=True)
    se = bench_sensitivity(a.quick, reps)
    for k, v in se["rows"].items():
        print(f"sensitivity: {k}: {v['seconds']:.2f}s, rel diff {v['max_rel_diff']:.1e}", flush=True)
    print("wrote", write(tr, se, a.quick))


if __name__ == "__main__":
    main()
