"""Tuple losses (§4): InfoNCE and hinge on scores s(u, v) = scale * <h_u, h_v>."""

from __future__ import annotations

import torch

__all__ = ["tuple_scores", "infonce_loss", "hinge_loss", "LOSSES"]


def tuple_scores(h: torch.Tensor, side: torch.Tensor, scale: float):
    """h: (2 + k, d) encodings of [u, v, n_1..n_k]; side: (k,) endpoint index of each negative.
    Returns (positive score, (k,) negative scores)."""
    pos = scale * (h[0] * h[1]).sum()
    if side.numel() == 0:
        return pos, h.new_zeros(0)
    ends = torch.where(side[:, None] == 0, h[0][None, :], h[1][None, :])
    neg = scale * (ends * h[2:]).sum(dim=1)
    return pos, neg


def infonce_loss(pos: torch.Tensor, neg: torch.Tensor, margin: float = 0.0) -> torch.Tensor:
    """-log(exp(s+) / (exp(s+) + sum_j exp(s-_j))) (F2)."""
    logits = torch.cat([pos.reshape(1), neg])
    return torch.logsumexp(logits, dim=0) - pos


def hinge_loss(pos: torch.Tensor, neg: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """sum_j max(0, margin - s+ + s-_j) (§4; the paper's gamma is this margin)."""
    return torch.clamp(margin - pos + neg, min=0.0).sum()


LOSSES = {"infonce": infonce_loss, "hinge": hinge_loss}
