"""Rules for the execution target of a training (DPS80x): where it runs, never what it guarantees.

DPS805 (backend unavailable), DPS806 (ranks drew different batches) and DPS807 (the run is not the
recorded target) are raised at run time by :mod:`dpspec.distributed.comm`; they are listed here so that the
catalogue documents them.
"""

from __future__ import annotations

import os
import shutil

from dpspec.check.framework import Context, diag, register_front_end, rule
from dpspec.families import FAMILIES

BACKENDS = ("gloo", "nccl")
# the families with a data-parallel runtime (dpspec.families), and one without for the failing example
DISTRIBUTED_MECHANISMS = tuple(k for k, f in FAMILIES.items() if f.distributed)
_LOCAL_ONLY = next(k for k, f in FAMILIES.items() if f.block == "train" and not f.distributed)


def spec(execution="distributed(workers = 2, backend = gloo)", mechanism=DISTRIBUTED_MECHANISMS[0]):
    return (
        "privacy people {\n  unit record\n  dataset_size 60000\n}\n"
        f"train classifier {{\n  mechanism {mechanism}\n  sampling  poisson(expected_batch = 256)\n"
        "  clipping  flat(C = 1.0)\n  steps     100\n  guarantee dp(epsilon = 8, delta = 1e-6)\n"
        f"  execution {execution}\n}}\n"
    )


GOOD = spec()


def cuda_visible() -> bool:
    """Whether this machine shows an NVIDIA GPU (no torch import: `dpspec check` stays fast)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia") or bool(shutil.which("nvidia-smi"))


def _executions(ctx: Context):
    for t in ctx.spec.trainings:
        if t.execution is not None:
            yield t, t.execution


@rule(
    "DPS801",
    "an execution target needs at least one worker",
    bad=spec("distributed(workers = 0)"),
    good=GOOD,
    explanation="`workers` is the number of data-parallel processes (torchrun's --nproc_per_node × nodes); "
    "it must be a whole number ≥ 1.",
)
def check_workers(ctx: Context):
    for t, e in _executions(ctx):
        if e.workers < 1:
            yield diag(
                "DPS801",
                f"`{t.name}` runs on {e.workers} workers",
                e,
                "workers",
                hint="write distributed(workers = 2, backend = gloo)",
            )


@rule(
    "DPS802",
    "an unknown collective backend",
    bad=spec("distributed(workers = 2, backend = mpi)"),
    good=GOOD,
    explanation="The distributed trainers run on torch.distributed with gloo (CPU) or NCCL (GPUs); other "
    "backends are not tested against the noise-once and global-sampling properties.",
)
def check_backend(ctx: Context):
    from dpspec.diagnostics import did_you_mean

    for _t, e in _executions(ctx):
        if e.backend not in BACKENDS:
            yield diag(
                "DPS802",
                f"unknown backend `{e.backend}`",
                e,
                "backend",
                hint=did_you_mean(e.backend, BACKENDS, "backend") or "use gloo (CPU) or nccl (GPUs)",
            )


@rule(
    "DPS803",
    "nccl on a machine without GPUs",
    bad="(see tests/distributed/test_execution_spec.py)",
    good=GOOD,
    severity="warning",
    explanation="NCCL runs on CUDA GPUs only. The check looks at the machine that checks the spec (which may "
    "not be the one that trains), so it is a warning; at run time DPS805 is an error.",
)
def check_nccl(ctx: Context):
    for t, e in _executions(ctx):
        if e.backend == "nccl" and not cuda_visible():
            yield diag(
                "DPS803",
                f"`{t.name}` asks for backend nccl but this machine shows no CUDA GPU",
                e,
                "backend",
                hint="use backend = gloo on CPU machines, or check the spec where the GPUs are",
            )


@rule(
    "DPS804",
    "a mechanism without a distributed runtime",
    bad=spec(mechanism=_LOCAL_ONLY),
    good=GOOD,
    explanation=f"Only the DP-SGD family ({', '.join(DISTRIBUTED_MECHANISMS)}) has a data-parallel runtime that "
    "keeps the certified sampling, clipping and noise; the others (e.g. GCON, which trains by one "
    "exact minimisation) run in one process.",
)
def check_mechanism(ctx: Context):
    for t, e in _executions(ctx):
        if e.kind == "distributed" and t.mechanism not in DISTRIBUTED_MECHANISMS:
            yield diag(
                "DPS804",
                f"mechanism `{t.mechanism}` has no distributed runtime",
                e,
                hint="remove `execution`, or use one of " + ", ".join(DISTRIBUTED_MECHANISMS),
            )


register_front_end(
    "DPS805",
    "the collective backend is not available at run time",
    "run",
    bad="(see tests/distributed/test_distributed_training.py)",
    good=GOOD,
    explanation="dpspec.distributed refuses an unknown backend or nccl without CUDA before it "
    "initialises a process group.",
)
register_front_end(
    "DPS806",
    "the ranks drew different global batches",
    "run",
    bad="(see tests/distributed/test_distributed_training.py)",
    good=GOOD,
    explanation="Every rank must draw the same global batch (same seed); an all-reduced digest "
    "checks it at every step. Otherwise the sampling is not the declared one.",
)
register_front_end(
    "DPS807",
    "the run does not match the recorded execution target",
    "run",
    bad="(see tests/distributed/test_execution_spec.py)",
    good=GOOD,
    explanation="Comm.check_target(certificate_result.execution) compares the process group with the "
    "certificate's workers and backend, so that the certificate documents the real run.",
)
