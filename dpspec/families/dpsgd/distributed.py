"""DP-SGD's reference workload for ``python -m dpspec.distributed.examples dpsgd`` (``Family.distributed_example``)."""

from __future__ import annotations

import time

WORKLOAD = "dpsgd"
DEFAULTS = dict(
    n=512, d=20, hidden=32, classes=4, rate=0.125, steps=30, sigma=1.0, clip=1.0, lr=0.2, momentum=0.5, seed=0
)


def run(comm, cfg: dict | None = None) -> dict:
    """Plain DP-SGD (Poisson sampling, flat clipping) on an MLP (on :func:`~dpspec.distributed.examples.device`)."""
    from dpspec.distributed.examples import _injected, _params, _warm_up, device, mlp, synthetic_classification
    from dpspec.families.dpsgd.runtime import DpSgd

    _warm_up()

    c = {**DEFAULTS, **(cfg or {})}
    dev = device(comm, c)
    X, y = (t.to(dev) for t in synthetic_classification(c["n"], c["d"], c["classes"], c["seed"]))
    model = mlp(c["d"], c["hidden"], c["classes"], c["seed"]).to(dev)
    mech = DpSgd(
        noise_multiplier=c["sigma"],
        clip_norm=c["clip"],
        sampling="poisson",
        sample_rate=c["rate"],
        steps=c["steps"],
        dataset_size=c["n"],
        learning_rate=c["lr"],
        momentum=c["momentum"],
    )
    use = None if c.get("single") else comm
    if use is not None:
        use.barrier()  # start the clocks together (process start-up skew is not training time)
    t0 = time.perf_counter()
    rep = mech.train(model, X, y, seed=c["seed"], comm=use)
    secs = time.perf_counter() - t0
    return {
        "params": _params(model),
        "batch_sizes": list(rep.batch_sizes),
        "seconds": secs,
        "examples": int(sum(rep.batch_sizes)),
        "injected": _injected(use),
        "noise_std": mech.noise_std,
        "rank": 0 if use is None else use.rank,
    }
