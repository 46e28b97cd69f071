"""SRPP-SGD's reference workload for ``python -m dpspec.distributed.examples srpp`` (``Family.distributed_example``)."""

from __future__ import annotations

import time

import numpy as np

WORKLOAD = "srpp"
DEFAULTS = dict(n=400, d=20, hidden=32, classes=4, batch=40, steps=20, clip=1.0, lr=0.1, seed=0)


def run(comm, cfg: dict | None = None) -> dict:
    """SRPP-SGD (without-replacement batches, HUC calibration) on an MLP (on
    :func:`~dpspec.distributed.examples.device`)."""
    from dpspec.distributed.examples import _injected, _params, _warm_up, device, mlp, synthetic_classification
    from dpspec.srpp import FixedPairWorlds, LrSchedule, OptimizerSpec, Sampling, SrppSgdPlan, calibrate, train_srpp_sgd

    c = {**DEFAULTS, **(cfg or {})}
    _warm_up()
    dev = device(comm, c)
    X, y = (t.to(dev) for t in synthetic_classification(c["n"], c["d"], c["classes"], c["seed"]))
    model = mlp(c["d"], c["hidden"], c["classes"], c["seed"]).to(dev)
    plan = SrppSgdPlan(
        sampling=Sampling("wor", dataset_size=c["n"], batch_size=c["batch"]),
        optimizer=OptimizerSpec(LrSchedule(c["lr"], c["steps"]), momentum=0.0),
        clip=c["clip"],
    )
    cal = calibrate(plan, FixedPairWorlds(c["n"], 1), alpha=4, epsilon=2.0)
    use = None if c.get("single") else comm
    t0 = time.perf_counter()
    rep = train_srpp_sgd(model, X, y, plan, cal, seed=c["seed"], comm=use)
    return {
        "params": _params(model),
        "batch_sizes": list(rep.batch_sizes),
        "seconds": time.perf_counter() - t0,
        "injected": _injected(use),
        "noise_std": float(np.ravel(plan.gradient_noise_std(cal))[0]),
        "rank": 0 if use is None else use.rank,
    }
