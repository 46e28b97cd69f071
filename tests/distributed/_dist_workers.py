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
