"""SRPP-SGD runtime benchmark: per-step time of the private step vs the non-private step, and
throughput against Opacus' PrivacyEngine on the same model and batch, measured in one run.

    .venv/bin/python benchmarks/bench_srpp.py [--quick] [--threads 1]

For each workload (MLP on sklearn digits; MLP on UCI Adult if present) the steps are timed
*interleaved* (one step of each method per round, median over rounds), on identical batches:

* ``nonprivate``   — forward, mean loss backward, torch.optim.SGD step;
* ``srpp (auto)``  — :class:`dpspec.srpp.SrppSgdOptimizer.step` (clip, average, noise, SGD); for
  these Sequential MLPs the ghost-norm path of :mod:`dpspec.mechanisms.per_example`;
* ``srpp (vmap)``  — the same step with ``method="vmap"`` (torch.func per-example gradients);
* ``opacus``       — Opacus 1.6 ``PrivacyEngine.make_private`` (hooks, per-sample gradients, flat
  clipping, fixed-size batches), ``zero_grad / backward / step``.

Targets: private/non-private ≤ 3×; throughput vs Opacus ≥ 1× (examples per second ratio).
Writes ``benchmarks/results/srpp_bench.md`` (``srpp_bench_quick.md`` with --quick).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _workloads(quick: bool):
    from dpspec.srpp import datasets

    out = []
    Xtr, ytr, _, _ = datasets.digits()
    out.append(("digits MLP 64-256-256-10", Xtr, ytr, (64, 256, 256, 10), 128))
    try:
        Xa, ya, _, _ = datasets.adult()
        out.append(("Adult MLP 104-256-256-2", Xa, ya, (104, 256, 256, 2), 512))
    except Exception as e:  # data root missing
        print(f"[skip] Adult: {e}")
    return out


def _mlp(sizes, seed=0):
    import torch

    torch.manual_seed(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def bench_workload(name, X, y, sizes, B, rounds, warmup):
    import torch

    from dpspec.srpp import FixedPairWorlds, LrSchedule, OptimizerSpec, Sampling, SrppSgdOptimizer, SrppSgdPlan, calibrate

    N = len(X)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    steps = rounds + warmup + 5
    plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=N, batch_size=B),
                       optimizer=OptimizerSpec(LrSchedule(0.05, steps), momentum=0.9), clip=1.0)
    cal = calibrate(plan, FixedPairWorlds(N, 5), alpha=16, epsilon=64, accountant="sa_huc")
    rng = np.random.default_rng(0)
    batches = [torch.as_tensor(rng.choice(N, B, replace=False)) for _ in range(steps)]

    # non-private
    m_np = _mlp(sizes)
    opt_np = torch.optim.SGD(m_np.parameters(), lr=0.05, momentum=0.9)
    ce = torch.nn.functional.cross_entropy

    def step_np(i):
        xb, yb = Xt[batches[i]], yt[batches[i]]
        opt_np.zero_grad(set_to_none=True)
        ce(m_np(xb), yb).backward()
        opt_np.step()

    priv = {}
    for method in ("auto", "vmap"):
        priv[method] = SrppSgdOptimizer(_mlp(sizes), plan, cal, seed=0, method=method)

    def step_priv(method):
        o = priv[method]

        def f(i):
            o.step(Xt[batches[i]], yt[batches[i]], batches[i].numpy())  # a batch of its own sampler: named by idx
        return f

    # opacus
    from opacus import PrivacyEngine

    m_op = _mlp(sizes)
    opt_op = torch.optim.SGD(m_op.parameters(), lr=0.05, momentum=0.9)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(Xt, yt), batch_size=B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="rdp")
        m_op, opt_op, _ = engine.make_private(module=m_op, optimizer=opt_op, data_loader=loader,
                                              noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False)

    def step_op(i):
        xb, yb = Xt[batches[i]], yt[batches[i]]
        opt_op.zero_grad(set_to_none=True)
        ce(m_op(xb), yb).backward()
        opt_op.step()

    methods = {"nonprivate": step_np, "srpp (auto)": step_priv("auto"), "srpp (vmap)": step_priv("vmap"),
               "opacus": step_op}
    times = {k: [] for k in methods}
    for i in range(warmup):
        for f in methods.values():
            f(i)
    for r in range(rounds):
        for k, f in methods.items():
            t0 = time.perf_counter()
            f(warmup + r)
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"name": name, "batch": B, "params": sum(p.numel() for p in m_np.parameters()), "median_s": med,
            "method": priv["auto"].report.method}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    rounds, warmup = (15, 3) if args.quick else (60, 5)
    rows = []
    for name, X, y, sizes, B in _workloads(args.quick):
        rows.append(bench_workload(name, X, y, sizes, B, rounds, warmup))
    lines = ["# SRPP-SGD runtime benchmark", "",
             f"torch {torch.__version__}, {args.threads} thread(s), median of {rounds} interleaved steps "
             f"after {warmup} warm-up rounds; batches identical across methods.", "",
             "| workload | params | B | non-private ms | SRPP step ms (path) | SRPP vmap ms | Opacus ms "
             "| private/non-private | throughput vs Opacus | vmap vs Opacus |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        m = r["median_s"]
        lines.append(
            f"| {r['name']} | {r['params']:,} | {r['batch']} | {m['nonprivate'] * 1e3:.2f} | "
            f"{m['srpp (auto)'] * 1e3:.2f} ({r['method']}) | {m['srpp (vmap)'] * 1e3:.2f} | {m['opacus'] * 1e3:.2f} | "
            f"{m['srpp (auto)'] / m['nonprivate']:.2f}× | {m['opacus'] / m['srpp (auto)']:.2f}× | "
            f"{m['opacus'] / m['srpp (vmap)']:.2f}× |")
    lines += ["", "Targets: private/non-private ≤ 3×; throughput vs Opacus ≥ 1× (Opacus time / SRPP time).",
              "The SRPP step includes clipping, averaging, Gaussian noise for every parameter and the SGD update; "
              "the non-private step is forward + backward + SGD."]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "benchmarks" / "results" / ("srpp_bench_quick.md" if args.quick else "srpp_bench.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
