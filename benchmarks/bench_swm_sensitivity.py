"""Benchmark: sliced W∞ sensitivity (ZV25 eq. 6, Prop 4.1) vs the exact unsliced W∞ (Lemma P.2).

Part A (headline): 5 secrets, all ordered pairs, n samples per secret in d dimensions, m uniform
directions; wall time and peak memory (tracemalloc: peak of Python/numpy allocations during the
sensitivity computation, samples excluded; plus the process max RSS).

Part B (scaling): one pair of secrets, d dimensions; sliced time over a range of n (O(m n log n))
and exact unsliced W∞ by binary search + Hopcroft–Karp (scipy maximum_bipartite_matching) over the
range of n where it is feasible (O(d n² + n^{2.5} log n) time, Θ(n²) memory); the ratio of the
sensitivities (max_u Δ^u / Δ∞ ≤ 1 and √Δ̄² / Δ∞) and of times; fitted log-log slopes.

    .venv/bin/python benchmarks/bench_swm_sensitivity.py --quick
    .venv/bin/python benchmarks/bench_swm_sensitivity.py            # n = 10^6, d = 100, m = 200
"""

from __future__ import annotations

import argparse
import gc
import math
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpspec import pufferfish as pf  # noqa: E402


def make_secret_samples(n, d, k, seed):
    """k secrets: N(μ_s, diag(scale_s²)) with μ_s = s·0.05·1 and scale 1 + 0.02 s (float64)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in range(k):
        Z = rng.standard_normal((n, d))
        Z *= 1.0 + 0.02 * s
        Z += 0.05 * s
        out[("θ", f"s{s}")] = Z
    return out


def headline(n, d, m, k, seed, memory_limit):
    t0 = time.perf_counter()
    samples = make_secret_samples(n, d, k, seed)
    t_gen = time.perf_counter() - t0
    pairs = pf.all_distinct_pairs([f"s{s}" for s in range(k)])
    U = pf.sphere_profile(m, d, seed=seed + 1).directions
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    last = [time.perf_counter()]

    def progress(done, total):
        now = time.perf_counter()
        if now - last[0] > 15 or done == total:
            print(f"    {done}/{total} directions, {now - t0:.1f} s", file=sys.stderr, flush=True)
            last[0] = now

    rep = pf.sliced_sensitivity_report(samples, pairs, U, memory_limit=memory_limit, progress=progress)
    t = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    sample_bytes = sum(v.nbytes for v in samples.values())
    del samples
    return {
        "n": n, "d": d, "m": m, "secrets": k, "ordered_pairs": len(pairs), "instances": len(rep.instances),
        "seconds": t, "gen_seconds": t_gen, "peak_bytes": peak, "maxrss_bytes": maxrss,
        "sample_bytes": sample_bytes, "chunk": rep.chunk_size, "buffer_bytes": rep.buffer_bytes,
        "delta_max": float(rep.deltas.max()), "delta_bar": float(math.sqrt(np.mean(rep.deltas**2))),
    }


def scaling(ns_sliced, ns_exact, d, m, seed):
    rows = []
    U = pf.sphere_profile(m, d, seed=seed + 1).directions
    for n in sorted(set(ns_sliced) | set(ns_exact)):
        s = make_secret_samples(n, d, 2, seed)
        X, Y = s[("θ", "s0")], s[("θ", "s1")]
        row = {"n": n}
        t0 = time.perf_counter()
        deltas = pf.slice_sensitivities(s, [("s0", "s1")], U)
        row["t_sliced"] = time.perf_counter() - t0
        row["delta_max"] = float(deltas.max())
        row["delta_bar"] = float(math.sqrt(np.mean(deltas**2)))
        if n in ns_exact:
            t0 = time.perf_counter()
            dinf, stats = pf.w_inf_exact(X, Y, return_stats=True)
            row["t_exact"] = time.perf_counter() - t0
            row["w_inf"] = dinf
            row["checks"] = stats["feasibility_checks"]
        rows.append(row)
        print(f"    n={n}: " + ", ".join(f"{k}={v:.4g}" for k, v in row.items() if k != "n"), file=sys.stderr, flush=True)
    return rows


def slope(xs, ys):
    xs, ys = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(xs, ys, 1)[0]) if len(xs) >= 2 else float("nan")


def fmt_bytes(b):
    return f"{b / 2**20:,.0f} MiB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small run (n = 10^5 headline, unsliced up to 1000)")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--m", type=int, default=200)
    ap.add_argument("--secrets", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory-limit", type=int, default=256 * 2**20, help="bytes for sorted projection buffers")
    ap.add_argument("--exact-max-n", type=int, default=None, help="largest n for the unsliced exact W∞")
    ap.add_argument("--out", type=Path, default=None, help="also write the markdown tables here")
    a = ap.parse_args(argv)

    n = a.n or (100_000 if a.quick else 1_000_000)
    exact_max = a.exact_max_n or (1000 if a.quick else 4000)
    ns_exact = [x for x in (125, 250, 500, 1000, 2000, 4000, 8000) if x <= exact_max]
    ns_sliced = sorted(set(ns_exact + [x for x in (10_000, 100_000, 1_000_000) if x <= n]))

    lines = []
    print(f"[A] headline: n={n:,} per secret, d={a.d}, m={a.m}, {a.secrets} secrets", file=sys.stderr)
    h = headline(n, a.d, a.m, a.secrets, a.seed, a.memory_limit)
    lines += [
        f"## Sliced W∞ sensitivity, {h['secrets']} secrets × n = {h['n']:,}, d = {h['d']}, m = {h['m']}",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| ordered pairs (instances) | {h['ordered_pairs']} ({h['instances']}; 10 distinct W∞ per direction) |",
        f"| wall time, sensitivity | {h['seconds']:.1f} s |",
        f"| wall time, generating samples | {h['gen_seconds']:.1f} s |",
        f"| samples held (float64) | {fmt_bytes(h['sample_bytes'])} |",
        f"| peak extra memory during computation (tracemalloc) | {fmt_bytes(h['peak_bytes'])} |",
        f"| direction chunk / sorted-projection buffers | {h['chunk']} directions / {fmt_bytes(h['buffer_bytes'])} |",
        f"| process max RSS (incl. samples) | {fmt_bytes(h['maxrss_bytes'])} |",
        f"| max_u Δ^u, √Δ̄² | {h['delta_max']:.4f}, {h['delta_bar']:.4f} |",
        "",
    ]
    print("\n".join(lines))
    gc.collect()

    print(f"[B] scaling: one pair, d={a.d}, m={a.m}", file=sys.stderr)
    rows = scaling(ns_sliced, ns_exact, a.d, a.m, a.seed)
    tab = [
        f"## Scaling, one pair, d = {a.d}, m = {a.m} (sliced: sort per direction; exact: bisection + Hopcroft–Karp)",
        "",
        "| n | sliced s | exact unsliced s | exact/sliced time | Δ∞ (ℓ2 W∞) | max_u Δ^u | max_u Δ^u / Δ∞ | √Δ̄² / Δ∞ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "t_exact" in r:
            tab.append(f"| {r['n']:,} | {r['t_sliced']:.3f} | {r['t_exact']:.2f} | {r['t_exact'] / r['t_sliced']:.0f}× | "
                       f"{r['w_inf']:.3f} | {r['delta_max']:.3f} | {r['delta_max'] / r['w_inf']:.3f} | "
                       f"{r['delta_bar'] / r['w_inf']:.3f} |")
        else:
            tab.append(f"| {r['n']:,} | {r['t_sliced']:.3f} | — | — | — | {r['delta_max']:.3f} | — | — |")
    ex = [r for r in rows if "t_exact" in r and r["n"] >= 250]
    sl = [r for r in rows if r["n"] >= 1000]
    tab += [
        "",
        f"Fitted log-log slopes: sliced time ~ n^{slope([r['n'] for r in sl], [r['t_sliced'] for r in sl]):.2f} "
        f"(n ≥ 1000; O(n log n) predicts ≈ 1.05–1.1), exact unsliced ~ n^{slope([r['n'] for r in ex], [r['t_exact'] for r in ex]):.2f} "
        f"(n ≥ 250; the paper's O(n³ log n) bound; Hopcroft–Karp on a dense threshold graph is O(n^2.5) per check, and "
        f"the n² distance matrix dominates memory). Sorting is O(n log n) but its constant rises ≈4× once a "
        f"projection row (8n bytes) no longer fits in cache (n ≳ 10^5), which steepens the sliced slope at n = 10^6.",
        "",
    ]
    print("\n".join(tab))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text("# bench_swm_sensitivity\n\n" + "\n".join(lines + tab) + "\n")


if __name__ == "__main__":
    main()
