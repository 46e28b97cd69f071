"""GCON benchmark: calibration latency, sparse propagation + certified training at 10^6 edges,
and sparse vs dense propagation.

Usage::

    .venv/bin/python benchmarks/bench_gcon.py            # full: 10^6 undirected edges
    .venv/bin/python benchmarks/bench_gcon.py --quick    # 10^5 edges, small dense sizes

Writes ``benchmarks/results/bench_gcon.md`` (or ``bench_gcon_quick.md``). Peak memory is measured
with ``tracemalloc`` (numpy reports its buffers to it) per phase, plus the process max RSS.
Everything runs on the machine's cores as configured (BLAS threads are not changed).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpspec.accounting.gcon import gcon_calibration, gcon_release_calibration  # noqa: E402
from dpspec.families.gcon.encoder import normalise_rows  # noqa: E402
from dpspec.families.gcon.graph import Graph  # noqa: E402
from dpspec.families.gcon.propagation import propagate_features, transition_matrix  # noqa: E402
from dpspec.families.gcon.trainer import GconConfig, train_gcon  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def synthetic_graph(n: int, m: int, c: int, rng: np.random.Generator, homophily: float = 0.8):
    """``m`` distinct undirected edges on ``n`` nodes, ``c`` planted classes (a fraction
    ``homophily`` of edges inside a class), drawn in batches and deduplicated."""
    lab = rng.integers(0, c, n)
    by_class = [np.flatnonzero(lab == k) for k in range(c)]
    keys = np.zeros(0, dtype=np.int64)
    while keys.size < m:
        need = int((m - keys.size) * 1.1) + 16
        u = rng.integers(0, n, need)
        inside = rng.random(need) < homophily
        v = rng.integers(0, n, need)
        for k in range(c):
            sel = inside & (lab[u] == k)
            v[sel] = rng.choice(by_class[k], size=int(sel.sum()))
        ok = u != v
        lo, hi = np.minimum(u[ok], v[ok]), np.maximum(u[ok], v[ok])
        keys = np.unique(np.concatenate([keys, lo * n + hi]))
    keys = rng.permutation(keys)[:m]
    return lab, np.stack([keys // n, keys % n], axis=1)


def features(lab: np.ndarray, d1: int, c: int, rng: np.random.Generator, signal: float = 0.2):
    means = rng.standard_normal((c, d1))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    X = signal * means[lab] + rng.standard_normal((lab.size, d1)) / np.sqrt(d1)
    return normalise_rows(X)


class Phase:
    """Wall time and tracemalloc peak of a block."""

    def __init__(self, name: str, rows: list):
        self.name, self.rows = name, rows

    def __enter__(self):
        gc.collect()
        tracemalloc.start()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        self.peak_mb = peak / 2**20
        self.rows.append((self.name, self.seconds, self.peak_mb))
        return False


def bench_calibration(reps: int = 2000):
    args = (4.0, 1 / 16316, 7, 64, 2995, 0.6, [10], 1.0)
    gcon_calibration(*args)
    t0 = time.perf_counter()
    for _ in range(reps):
        gcon_calibration(*args)
    chain = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for _ in range(reps // 10):
        gcon_release_calibration(*args)
    release = (time.perf_counter() - t0) / (reps // 10)
    return chain, release


def dense_propagation(adj: sp.csr_matrix, X: np.ndarray, alpha: float, m: int) -> np.ndarray:
    """The same recursion with a materialised dense A~ (n x n float64)."""
    n = adj.shape[0]
    P = adj.toarray()
    P[np.diag_indices(n)] += 1.0
    P /= P.sum(axis=1, keepdims=True)
    Z = X.copy()
    for _ in range(m):
        Z = (1 - alpha) * (P @ Z) + alpha * X
    return Z


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10^5 edges and small dense sizes")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.quick:
        n, m_edges, dense_sizes = 20_000, 100_000, [1000, 2000, 4000]
    else:
        n, m_edges, dense_sizes = 100_000, 1_000_000, [2000, 4000, 8000, 16000]
    c, d1, alpha, steps = 5, 32, 0.5, (2, "inf")
    out: list[str] = []
    say = lambda s="": (print(s, flush=True), out.append(s))  # noqa: E731

    say(f"# GCON benchmark{' (quick)' if args.quick else ''}")
    say()
    say(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}.")
    say()
    chain, release = bench_calibration()
    say("## Calibration latency (target < 10 ms)")
    say()
    say("| function | mean time per call |")
    say("|---|---|")
    say(f"| `gcon_calibration` (Thm 1 chain, eqs. (17)-(24)) | {chain * 1e6:.1f} us |")
    say(f"| `gcon_release_calibration` (chain + AMP sigma by bisection) | {release * 1e6:.1f} us |")
    say()

    rows: list = []
    with Phase("synthetic graph generation", rows):
        lab, edges = synthetic_graph(n, m_edges, c, rng)
        X = features(lab, d1, c, rng)
    with Phase("Graph.from_edges (canonical A, counts, components)", rows):
        g = Graph.from_edges(n, edges)
    del edges
    with Phase("transition matrix A~ = D^-1(A+I)", rows):
        P = transition_matrix(g)
    with Phase(f"propagation Z = (1/s)[R_2 X || R_inf X], alpha={alpha}, d1={d1}", rows):
        Z = propagate_features(g, X, alpha, steps, P=P)
    del Z
    train = np.concatenate([np.flatnonzero(lab == k)[:20] for k in range(c)])
    cfg = GconConfig(epsilon=1.0, delta=1 / g.num_edges, restart=alpha, steps=steps,
                     regularization=0.2, grad_tol=1e-8)
    with Phase(f"train_gcon end-to-end (n1 = n = {n}, d = {2 * d1}, c = {c}; incl. propagation)",
               rows) as ph_train:
        res = train_gcon(g, X, lab, train, cfg, pseudo_labels=lab, rng=args.seed)
    with Phase("private inference (1-hop, eq. (16)) for all nodes", rows):
        pred = res.predict(g, X, "private")
    acc_priv = float(np.mean(pred == lab))
    acc_pub = float(np.mean(res.predict(g, X, "public") == lab))
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    say(f"## Sparse pipeline on a synthetic graph: n = {n:,} nodes, |E| = {g.num_edges:,} undirected "
        f"edges ({2 * g.num_edges:,} non-zeros), c = {c}, d1 = {d1}")
    say()
    say("| phase | seconds | peak traced memory (MiB) |")
    say("|---|---|---|")
    for name, sec, mb in rows:
        say(f"| {name} | {sec:.2f} | {mb:.0f} |")
    say()
    say(f"Process max RSS: {maxrss:.0f} MiB. Solver: {res.solver.iterations} Newton iterations, "
        f"certified gradient norm {res.solver.grad_norm_certified:.2e} <= {cfg.grad_tol:.0e} "
        f"(rounding bound {res.solver.grad_norm_rounding_bound:.1e}); AMP sigma "
        f"{res.amp['sigma']:.2e}; beta {res.calibration['beta']:.4g}. Accuracy vs the planted "
        f"labels at eps = 1: private inference {acc_priv:.3f}, public {acc_pub:.3f}.")
    say()

    say("## Sparse vs dense propagation (same recursion, R_2 X, d1 = 32, average degree 20)")
    say()
    say("| n | edges | sparse s | dense s | dense / sparse | dense peak MiB | sparse peak MiB | max abs diff |")
    say("|---|---|---|---|---|---|---|---|")
    ratio = None
    for nd in dense_sizes:
        r2 = np.random.default_rng(nd)
        labd, ed = synthetic_graph(nd, 10 * nd, c, r2)
        Xd = features(labd, d1, c, r2)
        gd = Graph.from_edges(nd, ed)
        rs: list = []
        with Phase("sparse", rs):
            Zs = propagate_features(gd, Xd, alpha, [2])
        with Phase("dense", rs):
            Zd = dense_propagation(gd.adjacency, Xd, alpha, 2)
        diff = float(np.max(np.abs(Zs - Zd)))
        ratio = rs[1][1] / rs[0][1]
        say(f"| {nd:,} | {gd.num_edges:,} | {rs[0][1]:.4f} | {rs[1][1]:.3f} | {ratio:.0f}x | "
            f"{rs[1][2]:.0f} | {rs[0][2]:.1f} | {diff:.1e} |")
        del Zd, Zs
        gc.collect()
    say()
    say(f"At the largest dense size ({dense_sizes[-1]:,} nodes; the dense A~ alone takes "
        f"{dense_sizes[-1] ** 2 * 8 / 2**30:.1f} GiB) dense is {ratio:.0f}x slower. At n = {n:,} a dense "
        f"A~ would need {n ** 2 * 8 / 2**30:.0f} GiB.")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("bench_gcon_quick.md" if args.quick else "bench_gcon.md")
    path.write_text("\n".join(out) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
