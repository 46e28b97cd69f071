"""Reference workloads for the three trainers, single-process or data-parallel (tests, benchmarks,
and the ``torchrun`` example in docs/distributed.md).

Each ``run_*(comm, cfg)`` builds seeded synthetic data and a seeded model, trains with the
unmodified single-process trainer when ``cfg["single"]`` (``comm`` ignored) and with ``comm=comm``
otherwise, and returns a dict of plain tensors/arrays (final parameters, batch sizes, the injected
noise when the comm records it, wall time). Launch under torchrun::

    torchrun --standalone --nproc_per_node=2 -m dpspec.distributed.examples dpsgd --steps 50
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["run_dpsgd", "run_srpp", "run_relational", "mlp", "synthetic_classification", "DEFAULTS"]

DEFAULTS = {
    "dpsgd": dict(n=512, d=20, hidden=32, classes=4, rate=0.125, steps=30, sigma=1.0, clip=1.0, lr=0.2,
                  momentum=0.5, seed=0),
    "srpp": dict(n=400, d=20, hidden=32, classes=4, batch=40, steps=20, clip=1.0, lr=0.1, seed=0),
    "relational": dict(n=300, K=4, k_neg=2, batch=24.0, steps=12, sigma=1.0, clip=1.0, clipping="freq",
                       seed=0, graph_seed=0),
}


def synthetic_classification(n: int, d: int, classes: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(10_000 + seed)
    centres = torch.randn(classes, d, generator=g) * 2.0
    y = torch.randint(0, classes, (n,), generator=g)
    X = centres[y] + torch.randn(n, d, generator=g)
    return X, y


def mlp(d: int, hidden: int, classes: int, seed: int):
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))


def _params(model_or_dict) -> dict:
    items = model_or_dict.named_parameters() if hasattr(model_or_dict, "named_parameters") else model_or_dict.items()
    return {k: v.detach().clone() for k, v in items}


def _injected(comm) -> object:
    import torch

    if comm is None or not comm.record_noise or not comm.injected:
        return None
    return torch.stack(comm.injected) if len({t.numel() for t in comm.injected}) == 1 else list(comm.injected)


def _warm_up() -> None:
    """Import what the first optimizer construction imports (torch._dynamo, ~1 s) before timing."""
    import torch

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def run_dpsgd(comm, cfg: dict | None = None) -> dict:
    """Plain DP-SGD (Poisson sampling, flat clipping) on an MLP."""
    from dpspec.mechanisms.dpsgd import DpSgd

    _warm_up()

    c = {**DEFAULTS["dpsgd"], **(cfg or {})}
    X, y = synthetic_classification(c["n"], c["d"], c["classes"], c["seed"])
    model = mlp(c["d"], c["hidden"], c["classes"], c["seed"])
    mech = DpSgd(noise_multiplier=c["sigma"], clip_norm=c["clip"], sampling="poisson", sample_rate=c["rate"],
                 steps=c["steps"], dataset_size=c["n"], learning_rate=c["lr"], momentum=c["momentum"])
    use = None if c.get("single") else comm
    if use is not None:
        use.barrier()  # start the clocks together (process start-up skew is not training time)
    t0 = time.perf_counter()
    rep = mech.train(model, X, y, seed=c["seed"], comm=use)
    secs = time.perf_counter() - t0
    return {"params": _params(model), "batch_sizes": list(rep.batch_sizes), "seconds": secs,
            "examples": int(sum(rep.batch_sizes)), "injected": _injected(use), "noise_std": mech.noise_std,
            "rank": 0 if use is None else use.rank}


def run_srpp(comm, cfg: dict | None = None) -> dict:
    """SRPP-SGD (without-replacement batches, HUC calibration) on an MLP."""
    from dpspec.srpp import FixedPairWorlds, LrSchedule, OptimizerSpec, Sampling, SrppSgdPlan, calibrate, train_srpp_sgd

    c = {**DEFAULTS["srpp"], **(cfg or {})}
    _warm_up()
    X, y = synthetic_classification(c["n"], c["d"], c["classes"], c["seed"])
    model = mlp(c["d"], c["hidden"], c["classes"], c["seed"])
    plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=c["n"], batch_size=c["batch"]),
                       optimizer=OptimizerSpec(LrSchedule(c["lr"], c["steps"]), momentum=0.0), clip=c["clip"])
    cal = calibrate(plan, FixedPairWorlds(c["n"], 1), alpha=4, epsilon=2.0)
    use = None if c.get("single") else comm
    t0 = time.perf_counter()
    rep = train_srpp_sgd(model, X, y, plan, cal, seed=c["seed"], comm=use)
    return {"params": _params(model), "batch_sizes": list(rep.batch_sizes), "seconds": time.perf_counter() - t0,
            "injected": _injected(use), "noise_std": float(np.ravel(plan.gradient_noise_std(cal))[0]),
            "rank": 0 if use is None else use.rank}


def community_graph(n: int, seed: int, c: int = 5, p_in: float = 0.08, p_out: float = 0.004, d: int = 40):
    from dpspec.relational import RelationalGraph

    rng = np.random.default_rng(seed)
    comm = rng.integers(0, c, n)
    A = rng.random((n, n))
    P = np.where(comm[:, None] == comm[None, :], p_in, p_out)
    iu = np.triu_indices(n, 1)
    E = np.stack(iu, 1)[(A < P)[iu]]
    X = (rng.random((n, d)) < 0.08).astype(float)
    return RelationalGraph.build(n, E, features=X, labels=comm)


def run_relational(comm, cfg: dict | None = None) -> dict:
    """Relational DP-SGD (Poisson positives, NEG-SAMPLE-WOR negatives, degree cap K) on an MLP encoder."""
    from dpspec.relational.capping import cap_degrees, max_degree
    from dpspec.relational.encoders import MLPEncoder
    from dpspec.relational.trainer import RelationalTrainer, TrainConfig

    from .relational import global_capped_graph

    c = {**DEFAULTS["relational"], **(cfg or {})}
    raw = community_graph(c["n"], c["graph_seed"])
    use = None if c.get("single") else comm
    if use is None:
        g = raw.with_edges(cap_degrees(raw.edges, raw.num_nodes, c["K"], c["seed"]))
    else:
        g = global_capped_graph(raw, c["K"], use, seed=c["seed"])
    enc = MLPEncoder(g.features, hidden=16, out=8, seed=c["seed"])
    tc = TrainConfig(batch_size=c["batch"], k_neg=c["k_neg"], degree_cap=c["K"], clip=c["clip"], sigma=c["sigma"],
                     clipping=c["clipping"], steps=c["steps"], lr=0.05, optimizer="sgd", seed=c["seed"])
    tr = RelationalTrainer(g, enc, tc, comm=use)
    t0 = time.perf_counter()
    res = tr.train()
    return {"params": _params(tr.params), "batch_sizes": list(res.batch_sizes), "losses": list(res.losses),
            "seconds": time.perf_counter() - t0, "injected": _injected(use), "noise_std": c["sigma"] * c["clip"],
            "shards": list(tr.shards), "num_nodes": g.num_nodes, "max_degree": max_degree(g.edges, g.num_nodes),
            "raw_max_degree": max_degree(raw.edges, raw.num_nodes), "rank": 0 if use is None else use.rank}


RUNNERS = {"dpsgd": run_dpsgd, "srpp": run_srpp, "relational": run_relational}


def main(argv=None) -> int:  # pragma: no cover - exercised by hand under torchrun
    import argparse

    from .comm import init_from_env

    ap = argparse.ArgumentParser(description="data-parallel private training on a reference workload")
    ap.add_argument("workload", choices=sorted(RUNNERS))
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--backend", default=None)
    a = ap.parse_args(argv)
    comm = init_from_env(a.backend)
    try:
        cfg = {} if a.steps is None else {"steps": a.steps}
        out = RUNNERS[a.workload](comm, cfg)
        if comm.is_main:
            digest = float(sum(float(v.double().abs().sum()) for v in out["params"].values()))
            print(f"rank 0 of {comm.world_size} ({comm.backend}): {len(out['batch_sizes'])} steps in "
                  f"{out['seconds']:.2f}s, Σ|θ| = {digest:.6f}")
    finally:
        comm.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
