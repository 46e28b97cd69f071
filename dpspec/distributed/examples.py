"""Reference workloads for the data-parallel trainers, single-process or data-parallel (tests,
benchmarks, and the ``torchrun`` example in docs/distributed.md).

Each family with a data-parallel runtime names its workload module in :mod:`dpspec.families`
(``distributed_example``): its ``WORKLOAD`` name, its ``DEFAULTS`` and ``run(comm, cfg)``, also
reachable here as ``run_<WORKLOAD>``, ``DEFAULTS[WORKLOAD]`` and ``RUNNERS[WORKLOAD]``. A run builds
seeded synthetic data and a seeded model, trains with the unmodified single-process trainer when
``cfg["single"]`` (``comm`` ignored) and with ``comm=comm`` otherwise, and returns a dict of plain
tensors/arrays (final parameters, batch sizes, the injected noise when the comm records it, wall
time). Launch under torchrun::

    torchrun --standalone --nproc_per_node=2 -m dpspec.distributed.examples WORKLOAD --steps 50
"""

from __future__ import annotations

__all__ = ["device", "mlp", "synthetic_classification", "DEFAULTS", "RUNNERS"]  # noqa: F822 - built by module __getattr__


def synthetic_classification(n: int, d: int, classes: int, seed: int):
    """(X, y) on the CPU from a CPU generator: the same data whatever device a run trains on (it moves them)."""
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
    return {k: v.detach().cpu().clone() for k, v in items}


def device(comm, cfg: dict):
    """Where a workload trains: ``cfg["device"]`` when given, else where the process group's collectives take
    their tensors (this rank's GPU under NCCL, which reduces CUDA tensors only; the CPU under gloo and alone)."""
    import torch

    return torch.device(cfg["device"]) if cfg.get("device") else comm.collective_device()


def _injected(comm) -> object:
    import torch

    if comm is None or not comm.record_noise or not comm.injected:
        return None
    inj = [t.cpu() for t in comm.injected]
    return torch.stack(inj) if len({t.numel() for t in inj}) == 1 else inj


def _warm_up() -> None:
    """Import what the first optimizer construction imports (torch._dynamo, ~1 s) before timing."""
    import torch

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def _workloads() -> dict:
    """{workload name: module} of the families with a data-parallel example (``Family.distributed_example``)."""
    from dpspec.families import FAMILIES
    from dpspec.families.hooks import load_hook

    mods = (load_hook(f.distributed_example, "distributed_example") for f in FAMILIES.values() if f.distributed_example)
    return {m.WORKLOAD: m for m in mods}


def __getattr__(name: str):
    if name == "RUNNERS":  # {workload: run(comm, cfg) -> dict}
        return {w: m.run for w, m in _workloads().items()}
    if name == "DEFAULTS":  # {workload: its default configuration}
        return {w: m.DEFAULTS for w, m in _workloads().items()}
    if name.startswith("run_") and name[len("run_") :] in _workloads():
        return _workloads()[name[len("run_") :]].run
    raise AttributeError(name)


def main(argv=None) -> int:  # pragma: no cover - exercised by hand under torchrun
    import argparse

    from .comm import init_from_env

    ap = argparse.ArgumentParser(description="data-parallel private training on a reference workload")
    ap.add_argument("workload", choices=sorted(_workloads()))
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--backend", default=None)
    a = ap.parse_args(argv)
    comm = init_from_env(a.backend)
    try:
        cfg = {} if a.steps is None else {"steps": a.steps}
        out = _workloads()[a.workload].run(comm, cfg)
        if comm.is_main:
            digest = float(sum(float(v.double().abs().sum()) for v in out["params"].values()))
            print(
                f"rank 0 of {comm.world_size} ({comm.backend}): {len(out['batch_sizes'])} steps in "
                f"{out['seconds']:.2f}s, Σ|θ| = {digest:.6f}"
            )
    finally:
        comm.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
