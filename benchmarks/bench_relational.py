"""Relational DP-SGD benchmarks.

1. Private vs non-private step time (MLP on Cora features, MiniLM last layer on CiteSeer texts);
   target: private <= 3x non-private.
2. Per-tuple clipped-sum throughput (tuples/s) on the same MLP: dpspec ghost norms, dpspec
   torch.func vmap, and an Opacus per-sample-gradient baseline (GradSampleModule on (b, 2+k, d)
   inputs: one grad_sample per tuple, then clip-and-sum as DPOptimizer does).
3. Accountant: epsilon_DP after 1e5 steps at n = 1e6, m = 5e6 (rate 1e-5, K = 5, k_neg = 4),
   Eq. (3) on dpspec's DEFAULT_ALPHAS (225 orders) and on the authors' 150-order grid; target < 1 s.

    python benchmarks/bench_relational.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"


def _time(fn, reps, warm=2):
    for _ in range(warm):
        fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def bench_steps(quick: bool) -> list[str]:
    import torch
    from dpspec.data.graphs import load_citeseer, load_cora
    from dpspec.relational import cap_degrees, from_graph_dataset, node_disjoint_split
    from dpspec.relational.encoders import MLPEncoder, MiniLMEncoder, SubsetEncoder, \
        minilm_available
    from dpspec.relational.graph import induced_subgraph
    from dpspec.relational.trainer import RelationalTrainer, TrainConfig
    torch.set_num_threads(2)
    reps = 5 if quick else 30
    out = ["## Step time: private vs non-private", "",
           "| model | batch (expected) | non-private ms/step | private ms/step (ghost) | "
           "private ms/step (vmap) | ratio (ghost) |", "|---|---|---|---|---|---|"]
    g = from_graph_dataset(load_cora())
    sp = node_disjoint_split(g, 0.2, 0)
    tr = sp.train.with_edges(cap_degrees(sp.train.edges, sp.train.num_nodes, 5, 0))
    cases = [("MLP 1433-256-128 (Cora)", tr, lambda: SubsetEncoder(
        MLPEncoder(g.features, 256, 128), sp.train_nodes), 64)]
    if minilm_available():
        gc = from_graph_dataset(load_citeseer(), missing_text="empty")
        if quick:
            gc, _ = induced_subgraph(gc, np.arange(600), "citeseer-600")
        spc = node_disjoint_split(gc, 0.2, 0)
        trc = spc.train.with_edges(cap_degrees(spc.train.edges, spc.train.num_nodes, 5, 0))
        base = MiniLMEncoder(gc.texts)
        cases.append(("MiniLM-L6 last layer + proj (CiteSeer)", trc,
                      lambda: SubsetEncoder(base, spc.train_nodes), 16 if quick else 32))
    for name, graph, mk, b in cases:
        times = {}
        for label, private, ghost in (("np", False, True), ("ghost", True, True),
                                      ("vmap", True, False)):
            t = RelationalTrainer(graph, mk(), TrainConfig(batch_size=b, private=private),
                                  use_ghost=ghost)
            rng = np.random.default_rng(0)
            batches = [t.sample() for _ in range(4)]
            it = iter(range(10**9))
            r = reps if "MLP" in name else max(2, reps // 6)
            times[label] = _time(lambda: t.step(batches[next(it) % 4]), r)
            del rng
        out.append(f"| {name} | {b} | {1e3 * times['np']:.1f} | {1e3 * times['ghost']:.1f} | "
                   f"{1e3 * times['vmap']:.1f} | {times['ghost'] / times['np']:.2f}x |")
    return out


def bench_throughput(quick: bool) -> list[str]:
    import torch
    from opacus import GradSampleModule
    from dpspec.relational.encoders import MLPEncoder
    from dpspec.relational.ghost import GhostClipper
    from dpspec.relational.samplers import TupleBatch
    from dpspec.relational.trainer import batched_losses, per_tuple_grads
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    n, d, k = 2000, 1433, 4
    X = (rng.random((n, d)) < 0.013).astype(np.float32)
    out = ["## Per-tuple clipped sum throughput (same MLP 1433-256-128, k_neg = 4)", "",
           "| tuples | dpspec ghost (tuples/s) | dpspec vmap (tuples/s) | Opacus grad_sample "
           "(tuples/s) | ghost / Opacus |", "|---|---|---|---|---|"]
    for b in ([64] if quick else [32, 64, 256]):
        enc = MLPEncoder(X, 256, 128, seed=0)
        pos = rng.integers(0, n, (b, 2))
        batch = TupleBatch(pos, rng.choice(n, (b, k), replace=False) if b * k <= n else
                           rng.integers(0, n, (b, k)), rng.integers(0, 2, (b, k)))
        C = 1.0 / 7

        def factors(norms):
            return torch.clamp(C / (norms + 1e-12), max=1.0)

        gc = GhostClipper(enc.module)

        def ghost():
            gc.run(lambda: batched_losses(enc, enc.params(), batch, "infonce", 5.0, 1.0), b,
                   factors)

        def vm():
            p = {k_: v.detach() for k_, v in enc.params().items()}
            g, _ = per_tuple_grads(enc, p, batch, "infonce", 5.0, 1.0, 64)
            (g * factors(g.norm(dim=1))[:, None]).sum(0)

        net = MLPEncoder(X, 256, 128, seed=0).module
        gsm = GradSampleModule(net)
        slots = torch.as_tensor(batch.node_slots())
        Xin = torch.as_tensor(X)[slots]                     # (b, 2+k, d)
        side = torch.as_tensor(batch.side)

        def opacus():
            for p in gsm.parameters():
                p.grad_sample = None
                p.grad = None
            h = gsm(Xin)
            pos_s = 5.0 * (h[:, 0] * h[:, 1]).sum(-1)
            ends = torch.where(side[..., None] == 0, h[:, :1], h[:, 1:2])
            neg = 5.0 * (ends * h[:, 2:]).sum(-1)
            loss = torch.logsumexp(torch.cat([pos_s[:, None], neg], 1), 1) - pos_s
            loss.sum().backward()
            gs = [p.grad_sample.reshape(b, -1) for p in gsm.parameters()]
            norms = torch.sqrt(sum((x ** 2).sum(1) for x in gs))
            f = factors(norms)
            return [torch.einsum("b...,b->...", p.grad_sample, f) for p in gsm.parameters()]

        reps = 5 if quick else 20
        tg, tv, to = _time(ghost, reps), _time(vm, reps), _time(opacus, reps)
        out.append(f"| {b} | {b / tg:,.0f} | {b / tv:,.0f} | {b / to:,.0f} | {to / tg:.2f}x |")
    return out


def bench_accountant(quick: bool) -> list[str]:
    from dpspec.accounting import DEFAULT_ALPHAS, dp_from_curve
    from dpspec.accounting.relational import (coupled_sampling_rdp_curve,
                                              coupled_sampling_standard_clipping_rdp_curve)
    authors = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), float)
    out = ["## Accountant: ε_DP after 10^5 steps, n = 10^6, m = 5·10^6, rate = 1e-5, K = 5, "
           "k_neg = 4, δ = 1/m", "",
           "| accountant | σ | orders | ε_DP | α* | seconds (curve + conversion) |",
           "|---|---|---|---|---|---|"]
    sigmas = [0.5] if quick else [0.5, 1.0, 3.0]
    for s in sigmas:
        for name, grid in (("DEFAULT_ALPHAS", DEFAULT_ALPHAS), ("authors' grid", authors)):
            t = time.perf_counter()
            c = coupled_sampling_rdp_curve(s, 5 * 10**6, 10**6, 1e-5, 5, 4, alphas=grid)
            r = dp_from_curve(c.scaled(10**5), 2e-7)
            dt = time.perf_counter() - t
            out.append(f"| Eq. (3) | {s} | {name} ({grid.size}) | {r.epsilon:.6g} | "
                       f"{r.best_alpha:g} | {dt:.2f} |")
    if not quick:
        for s in (1.0,):
            t = time.perf_counter()
            c = coupled_sampling_standard_clipping_rdp_curve(s, 5 * 10**6, 10**6, 1e-5, 5, 4,
                                                             alphas=authors)
            r = dp_from_curve(c.scaled(10**5), 2e-7)
            out.append(f"| Thm C.1 | {s} | authors' grid (150) | {r.epsilon:.6g} | "
                       f"{r.best_alpha:g} | {time.perf_counter() - t:.2f} |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    lines = ["# Relational DP-SGD benchmarks" + (" (--quick)" if a.quick else ""), "",
             "Machine: 2 cores, torch CPU (2 threads)."]
    for part in (bench_accountant, bench_steps, bench_throughput):
        lines += [""] + part(a.quick)
        print("\n".join(lines[-12:]), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / ("bench_relational" + ("_quick" if a.quick else "") + ".md")).write_text(
        "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
