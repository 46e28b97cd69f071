"""Module-level worker functions for torch.multiprocessing.spawn (must be importable by the child)."""

import numpy as np


def consensus_probe(comm):
    """Each rank offers a different batch: check_consensus must raise DPS806 on every rank."""
    from dpspec.distributed.comm import DistributedSoundnessError

    comm.check_consensus(np.arange(5))  # same batch: passes
    try:
        comm.check_consensus(np.arange(5) + comm.rank, step=3)
    except DistributedSoundnessError as e:
        return e.rule
    return None


def _dpsgd(steps=4, n=24, seed=0):
    import torch

    from dpspec.families.dpsgd.runtime import DpSgd

    g = torch.Generator().manual_seed(seed)
    X, y = torch.randn(n, 5, generator=g), torch.randint(0, 3, (n,), generator=g)
    torch.manual_seed(seed)
    model = torch.nn.Linear(5, 3)
    mech = DpSgd(noise_multiplier=1.0, clip_norm=1.0, sampling="poisson", sample_rate=0.5, steps=steps,
                 dataset_size=n, delta=1e-5, name="model")
    return mech, model, X, y


def budget_on_every_rank(comm):
    """Train the certified steps data-parallel, then ask for one more: every rank refuses at the same step
    (no collective is left waiting) and every rank's ledger says the same."""
    from dpspec.mechanisms.ledger import BudgetExceededError

    mech, model, X, y = _dpsgd()
    mech.train(model, X, y, seed=0, comm=comm)
    try:
        mech.train(model, X, y, seed=1, comm=comm, steps=1)
        refused = None
    except BudgetExceededError as e:
        refused = e.rule
    return {"refused": refused, "steps": mech.ledger.steps_taken, "eps": mech.privacy_spent().epsilon}


def diverging_ledgers(comm):
    """Rank 1 resumes from another checkpoint (one step already taken): the first step's check fails on
    every rank (DPS806) before any noise."""
    from dpspec.distributed.comm import DistributedSoundnessError

    mech, model, X, y = _dpsgd()
    if comm.rank == 1:
        mech.load_ledger_state({**mech.ledger_state(), "steps_taken": 1})
    try:
        mech.train(model, X, y, seed=0, comm=comm, steps=2)
    except DistributedSoundnessError as e:
        return e.rule
    return None


def nonfinite_shard(comm, single=False):
    """One example of rank 1's shard has a non-finite gradient: it is zeroed there as in one process."""
    mech, model, X, y = _dpsgd(steps=3)
    X = X.clone()
    X[-1] = float("nan")  # the last example falls in rank 1's shard whenever it is sampled
    rep = mech.train(model, X, y, seed=0, comm=None if single else comm)
    return {"params": {k: v.detach().clone() for k, v in model.named_parameters()},
            "nonfinite": rep.nonfinite_events}


def srpp_cap_on_every_rank(comm):
    """A user batch with a repeated record is refused on every rank, before any collective."""
    import numpy as np
    import torch

    from dpspec.mechanisms.ledger import CapExceededError
    from dpspec.srpp import FixedPairWorlds, LrSchedule, OptimizerSpec, Sampling, SrppSgdPlan, calibrate
    from dpspec.srpp import SrppSgdOptimizer

    plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=20, batch_size=4),
                       optimizer=OptimizerSpec(LrSchedule(0.1, 3)), clip=1.0)
    cal = calibrate(plan, FixedPairWorlds(20, 1), alpha=4, epsilon=1)
    opt = SrppSgdOptimizer(torch.nn.Linear(3, 2), plan, cal, seed=0, comm=comm)
    X, y = torch.randn(20, 3), torch.randint(0, 2, (20,))
    idx = np.array([0, 0, 0, 0])
    try:
        opt.step(X[idx], y[idx], idx)
    except CapExceededError as e:
        return e.rule
    return None


def runtime_guards(comm):
    """The runtime guards of one process group (one spawn: process start-up dominates the test time)."""
    return {"budget": budget_on_every_rank(comm), "diverging": diverging_ledgers(comm),
            "nonfinite": nonfinite_shard(comm), "srpp_cap": srpp_cap_on_every_rank(comm)}


def dies_after_its_work(comm, when):
    """Rank 1's process is killed by a signal: ``when == "after"``, once its worker has saved the result and
    torn the group down (a timer thread that keeps the process alive until it fires); ``"before"``, inside
    ``fn``, before anything is saved."""
    import os
    import signal
    import threading

    if comm.rank == 1:
        if when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    return comm.rank * 10
