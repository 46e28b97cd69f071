"""Relational DP-SGD under ``dpspec.torch.make_private`` (``Family.torch_backend`` in :mod:`dpspec.families`):
refused, its steps are not DataLoader batches."""

from __future__ import annotations

from dpspec.torch.private import UnsupportedTrainingError


def backend(mech) -> type:
    raise UnsupportedTrainingError(
        f"`{mech.name}` is a relational DP-SGD training: its steps are tuples sampled from the degree-capped "
        "graph (positive edges and negatives drawn under the caps K and k), not (x, y) batches of a DataLoader, "
        "and its per-tuple gradients involve two nodes' encodings. Use its own trainer: "
        "`compiled.mechanism.trainer()` / `.train()` (docs/training.md)"
    )
