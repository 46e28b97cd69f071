"""Process-group setup and the privacy-relevant collectives (a thin layer over ``torch.distributed``).

Launch paths
------------
* ``torchrun --nproc_per_node=W script.py`` — the script calls :func:`init_from_env` (``env://``:
  ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set by torchrun) and gets a
  :class:`Comm`; :meth:`Comm.close` tears the group down.
* tests / one machine — :func:`spawn(fn, world_size)` meets through a temporary file, starts W
  processes with ``torch.multiprocessing.spawn``, calls ``fn(comm, *args)`` in each and returns
  the per-rank return values (pickled through a temporary directory).

The collectives a private step needs
------------------------------------
:meth:`Comm.noisy_sum` is the one place noise enters: rank 0 adds ``noise(i, tensor)`` (drawn from
its dedicated generator, in the same order as the single-process trainer draws it) to its local
clipped sums, every other rank adds nothing, and one ``all_reduce(SUM)`` over a flat buffer
returns Σ_r S_r + Z on every rank. With ``record_noise=True`` it also all-reduces the noiseless
sums and records the injected vector (reduced − clean) — a test hook, it doubles the traffic.

:meth:`Comm.check_consensus` all-reduces (min, max) of a 52-bit digest (CRC-32 and size) of the global batch: if any
rank drew a different batch (a seed mismatch would silently change the sampling distribution) it
raises :class:`DistributedSoundnessError` (DPS806) on every rank. The trainers call
:meth:`Comm.check_step`, which adds each rank's privacy-ledger state to the digest: every rank keeps
the same ledger (charged at the same steps, before the noise), so every rank refuses a step beyond
the certified budget at the same step and no collective is left waiting; a rank resumed from another
checkpoint is caught at its first step.
"""

from __future__ import annotations

import os
import socket
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dpspec.errors import DpspecError

__all__ = [
    "Comm",
    "DistributedSoundnessError",
    "init_from_env",
    "spawn",
    "shard_indices",
    "free_port",
    "default_backend",
]


class DistributedSoundnessError(DpspecError, RuntimeError):
    """A distributed run would not match the certified mechanism (rule id in ``rule``)."""

    def __init__(self, message: str, rule: str = "DPS806", hint: str | None = None):
        super().__init__(f"{rule}: {message}" + (f" (hint: {hint})" if hint else ""))
        self.rule = rule
        self.hint = hint


def shard_indices(idx, rank: int, world_size: int):
    """The contiguous shard of ``idx`` owned by ``rank`` (``np.array_split``: sizes differ by ≤ 1).

    The union over ranks is ``idx`` and the shards are disjoint, so the all-reduced sum of per-rank
    clipped sums is the clipped sum of the global batch."""
    idx = np.asarray(idx)
    n = idx.shape[0]
    lo = (n * rank) // world_size
    hi = (n * (rank + 1)) // world_size
    return idx[lo:hi]


def shard_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    return (n * rank) // world_size, (n * (rank + 1)) // world_size


def default_backend() -> str:
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Comm:
    """A handle on an initialised process group (or a single process when ``world_size == 1``)."""

    rank: int = 0
    world_size: int = 1
    backend: str = "gloo"
    record_noise: bool = False
    check: bool = True
    injected: list = field(default_factory=list)  # with record_noise: one flat tensor per noisy_sum
    _owns_group: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def check_target(self, execution) -> None:
        """Raise DPS807 unless this process group is the certificate's execution target
        (``TargetCertificate.execution`` or the IR ``Execution``; ``None`` accepts anything).

        A mismatch does not change the privacy analysis (it never depends on the target); it means
        the run is not the one the certificate documents, which a reviewer should know."""
        if execution is None:
            return
        target = getattr(execution, "target", None) or getattr(execution, "kind", None)
        workers = 1 if target == "single" else int(execution.workers)
        backend = None if target == "single" else execution.backend
        if self.world_size != workers or (backend is not None and self.world_size > 1 and backend != self.backend):
            raise DistributedSoundnessError(
                f"the certificate records {target}(workers = {workers}, backend = {backend}) but this run has "
                f"{self.world_size} process(es) on {self.backend}",
                rule="DPS807",
                hint="launch with torchrun --nproc_per_node matching `workers`, or recompile the spec",
            )

    # --- sharding -------------------------------------------------------------------------------

    def shard(self, idx):
        return shard_indices(idx, self.rank, self.world_size)

    def bounds(self, n: int) -> tuple[int, int]:
        return shard_bounds(n, self.rank, self.world_size)

    # --- collectives ----------------------------------------------------------------------------

    def _all_reduce(self, t, op=None):
        if not self.distributed:
            return t
        import torch.distributed as dist

        dist.all_reduce(t, op=dist.ReduceOp.SUM if op is None else op)
        return t

    def all_reduce_sum(self, t):
        return self._all_reduce(t)

    def noisy_sum(self, tensors, noise: Callable | None):
        """Σ over ranks of ``tensors`` (a dict name → tensor or a list), plus noise added ONCE.

        ``noise(i, t)`` returns the noise tensor for the i-th entry ``t`` (same shape); it is called
        on rank 0 only, in order, so rank 0's generator is consumed exactly as in a single-process
        run. Returns the same container type with the reduced tensors (identical on every rank)."""
        import torch

        keys = list(tensors.keys()) if isinstance(tensors, dict) else None
        vals = list(tensors.values()) if keys is not None else list(tensors)
        shapes = [v.shape for v in vals]
        dtype = vals[0].dtype if vals else torch.float32
        if vals:
            flat = torch.cat([v.reshape(-1).to(dtype) for v in vals])
        else:
            flat = torch.zeros(0, device=self.collective_device())
        clean = flat.clone() if self.record_noise else None
        if self.rank == 0 and noise is not None:
            z = torch.cat([noise(i, v).reshape(-1).to(dtype) for i, v in enumerate(vals)])
            flat = flat + z
        self._all_reduce(flat)
        if clean is not None:  # (recording the noise)
            self._all_reduce(clean)
            self.injected.append((flat - clean).detach().clone())
        out, off = [], 0
        for s in shapes:
            k = int(np.prod(s)) if len(s) else 1
            out.append(flat[off : off + k].reshape(s))
            off += k
        return dict(zip(keys, out)) if keys is not None else out

    def collective_device(self):
        """Where this process group's collectives take their tensors: the current CUDA device under NCCL
        (which reduces only CUDA tensors), else the CPU."""
        import torch

        if self.backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def check_consensus(self, idx, step: int | None = None) -> None:
        """Raise DPS806 on every rank unless all ranks hold the same global batch ``idx``."""
        if not (self.distributed and self.check):
            return
        import torch
        import torch.distributed as dist

        a = np.ascontiguousarray(np.asarray(idx, dtype=np.int64))
        digest = (zlib.crc32(a.tobytes()) << 20) ^ (a.size & 0xFFFFF)
        t = torch.tensor([digest, -digest], dtype=torch.int64, device=self.collective_device())
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if int(t[0]) != digest or int(-t[1]) != digest:
            where = "" if step is None else f" at step {step}"
            raise DistributedSoundnessError(
                f"the ranks drew different global batches{where}: the sampling would not be the declared "
                "sampling over the whole dataset",
                hint="give every rank the same seed; do not shuffle per worker",
            )

    def check_step(self, idx, ledger=None, step: int | None = None) -> None:
        """:meth:`check_consensus` of the global batch together with the privacy ledger's state: every
        rank keeps its own ledger of the run, and they must agree (same certificate, same steps taken)
        so that every rank refuses a step beyond the budget at the same step (DPS806 otherwise)."""
        a = np.asarray(idx, dtype=np.int64).ravel()
        if ledger is not None:
            a = np.concatenate([a, np.array([ledger.consensus_token(), a.size], dtype=np.int64)])
        self.check_consensus(a, step)

    def broadcast_parameters(self, module_or_tensors) -> None:
        """Copy rank 0's parameters to every rank (what DDP does at construction)."""
        if not self.distributed:
            return
        import torch
        import torch.distributed as dist

        ts = (
            list(module_or_tensors.parameters())
            if hasattr(module_or_tensors, "parameters")
            else list(module_or_tensors)
        )
        with torch.no_grad():
            for p in ts:
                dist.broadcast(p.data, src=0)

    def broadcast_object(self, obj):
        if not self.distributed:
            return obj
        import torch.distributed as dist

        box = [obj if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather_object(self, obj) -> list:
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self._owns_group:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self._owns_group = False


def init_from_env(backend: str | None = None, **kw) -> Comm:
    """Initialise the default process group from torchrun's environment (``env://``).

    Without ``WORLD_SIZE`` in the environment (a plain ``python script.py``) returns a
    single-process :class:`Comm` and initialises nothing. ``backend`` defaults to NCCL when CUDA is
    available, else gloo; NCCL without CUDA raises DPS805."""
    import torch
    import torch.distributed as dist

    backend = backend or default_backend()
    _check_backend(backend)
    ws = int(os.environ.get("WORLD_SIZE", "1"))
    if ws == 1 and "RANK" not in os.environ:
        return Comm(0, 1, backend, **kw)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, init_method="env://")
        owns = True
    else:
        owns = False
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return Comm(dist.get_rank(), dist.get_world_size(), backend, _owns_group=owns, **kw)


def _check_backend(backend: str) -> None:
    import torch

    if backend not in ("gloo", "nccl"):
        raise DistributedSoundnessError(
            f"unknown backend {backend!r}", rule="DPS805", hint="use gloo (CPU) or nccl (GPUs)"
        )
    if backend == "nccl" and not torch.cuda.is_available():
        raise DistributedSoundnessError(
            "backend nccl needs CUDA GPUs and none is available", rule="DPS805", hint="use backend gloo on CPU machines"
        )


def _worker(rank: int, world_size: int, backend: str, fn, args, outdir: str, threads: int | None, comm_kw: dict):
    import torch
    import torch.distributed as dist

    if threads:
        torch.set_num_threads(threads)
    if backend == "nccl":  # a GPU per rank (NCCL refuses two ranks on one), as torchrun's LOCAL_RANK gives
        torch.cuda.set_device(rank % torch.cuda.device_count())
    # rendezvous through a file in the run's own temporary folder: no port is picked and released
    # first, so parallel runs on one machine cannot race for it
    dist.init_process_group(
        backend=backend, init_method="file://" + os.path.join(outdir, "rendezvous"), rank=rank, world_size=world_size
    )
    comm = Comm(rank, world_size, backend, _owns_group=True, **comm_kw)
    try:
        res = fn(comm, *args)
        # whole or absent (a rename): a result file is only ever one a finished ``fn`` wrote
        path = os.path.join(outdir, f"rank{rank}.pt")
        torch.save(res, path + ".part")
        os.replace(path + ".part", path)
        # every rank done before any tears its group down: a gloo peer whose connection is closed under it
        # aborts the process (std::terminate), seen under load
        comm.barrier()
    finally:
        comm.close()


def spawn(
    fn: Callable, world_size: int = 2, args: tuple = (), *, backend: str = "gloo", threads: int | None = 1, **comm_kw
) -> list:
    """Run ``fn(comm, *args)`` in ``world_size`` fresh processes (``torch.multiprocessing.spawn``,
    rendezvous through a file in a temporary folder); returns the list of per-rank return values. ``fn`` must be
    importable
    (a module-level function). ``threads`` sets ``torch.set_num_threads`` in each worker.

    A worker killed by a signal after every rank has saved its result is not an error: that is the process
    group's teardown (a gloo peer whose connection is closed under it aborts its process, seen on a loaded
    machine), after all the work; an exception raised in ``fn``, or a death before every result is saved,
    is raised."""
    import torch
    import torch.multiprocessing as mp

    _check_backend(backend)
    with tempfile.TemporaryDirectory(prefix="dpspec-dist-") as d:
        paths = [os.path.join(d, f"rank{r}.pt") for r in range(world_size)]
        try:
            mp.spawn(_worker, args=(world_size, backend, fn, args, d, threads, comm_kw), nprocs=world_size, join=True)
        except mp.ProcessExitedException:
            if not all(os.path.exists(p) for p in paths):
                raise
        return [torch.load(p, weights_only=False) for p in paths]
