"""Scale-out on existing engines: ``torch.distributed`` for private training, Dask for sensitivity.

Nothing here is a home-made engine. Training uses the collectives of ``torch.distributed``
(gloo on CPU, NCCL on GPUs) directly; sensitivity estimation uses ``dask.array``. What this layer
adds is the privacy bookkeeping that a generic data-parallel wrapper would get wrong:

* **global sampling** — every rank draws the *same* global batch (Poisson / without replacement
  over the whole dataset) from the same seeded generator, checks by an all-reduced digest that
  all ranks agree, and keeps a contiguous shard of the selected indices (never per-worker
  shuffling, never a per-worker sampler);
* **clip before the all-reduce** — each rank clips its examples (tuples) locally; the all-reduce
  sums already-clipped per-example gradients, so the sum is exactly the single-process clipped sum;
* **noise once** — the Gaussian noise of a global step is drawn on rank 0 only, from a dedicated
  generator seeded as the single-process trainer seeds it, and added to rank 0's contribution
  *before* the all-reduce SUM; every other rank contributes zero noise. The reduced vector is
  Σ_r S_r + Z with one Z ~ N(0, σ²C² I): exactly the certified variance (docs/distributed.md).

Modules: :mod:`.comm` (init/teardown under ``torchrun`` or ``torch.multiprocessing.spawn``, the
:class:`~dpspec.distributed.comm.Comm` object the trainers accept as ``comm=``), :mod:`.sampling`
(global samplers and sharding), :mod:`.relational` (globally capped graph, sharded tuples),
:mod:`.sensitivity` (sliced ∞-Wasserstein sensitivity on Dask). torch and dask are imported
lazily.
"""

from __future__ import annotations

__all__ = ["Comm", "init_from_env", "spawn", "shard_indices", "GlobalSampler", "BACKENDS", "dask_slice_sensitivities"]

BACKENDS = ("gloo", "nccl")


def __getattr__(name):  # lazy: importing dpspec.distributed must not import torch or dask
    if name in ("Comm", "init_from_env", "spawn", "shard_indices"):
        from . import comm

        return getattr(comm, name)
    if name == "GlobalSampler":
        from .sampling import GlobalSampler

        return GlobalSampler
    if name == "dask_slice_sensitivities":
        from .sensitivity import dask_slice_sensitivities

        return dask_slice_sensitivities
    raise AttributeError(name)
