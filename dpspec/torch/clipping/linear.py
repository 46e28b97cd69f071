"""``nn.Linear`` anywhere in a module tree, on inputs (B, *, d_in): sequence dims are positions t."""

from __future__ import annotations

import torch.nn as nn

from . import Direct, Outer, Rule, Unsupported, register


def batch_first(x, B: int, what: str):
    """``x`` as (B, T, d): dim 0 must be the batch (a layer fed (T, B, d) is not covered)."""
    if x.dim() < 2 or x.shape[0] != B:
        raise Unsupported(f"{what}: input of shape {tuple(x.shape)} has no leading batch dimension of {B}")
    return x if x.dim() == 3 else x.reshape(B, -1, x.shape[-1])


def outer_parts(pairs, B: int, what: str):
    """(Outer, Direct-or-None) from the (input, output gradient) pairs of a layer's calls: the calls'
    positions are concatenated (a layer applied twice is one sum over both)."""
    import torch

    As = [batch_first(a, B, what) for a, _ in pairs]
    Ds = [batch_first(d, B, what) for _, d in pairs]
    A = As[0] if len(As) == 1 else torch.cat(As, dim=1)
    D = Ds[0] if len(Ds) == 1 else torch.cat(Ds, dim=1)
    return Outer(A, D), Direct(D.sum(dim=1))


class LinearRule(Rule):
    types = (nn.Linear,)

    def parts(self, m, calls, deltas) -> dict:
        B = calls[0][0][0].shape[0]
        outer, bias = outer_parts([(inp[0], d[0]) for (inp, _), d in zip(calls, deltas)], B, "nn.Linear")
        out = {}
        if m.weight.requires_grad:
            out["weight"] = [outer]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [bias]
        return out


register(LinearRule())
