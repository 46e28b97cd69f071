"""``nn.LayerNorm``, ``nn.RMSNorm``, ``nn.GroupNorm`` and ``nn.InstanceNorm1d/2d`` (without running
statistics) affine parameters: ∇γ_i = Σ_t δ_{i,t} ⊙ x̂_{i,t} and ∇β_i = Σ_t δ_{i,t} (x̂ the normalised
input, recomputed from the saved input): small, formed directly."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from . import Direct, Rule, Unsupported, register, total


def affine_parts(m, calls, deltas, normalised, per_example, what: str, min_dim: int) -> dict:
    """The parts of a normalisation layer's affine parameters: ∇γ_i = Σ_t δ_{i,t} ⊙ x̂_{i,t} (the weight, if
    trainable) and ∇β_i = Σ_t δ_{i,t} (the bias, if any and trainable), over its calls.
    ``normalised(x, dtype)``: x̂ in ``dtype``; ``per_example(t, x)``: t summed over the positions of each
    example, (B, *parameter shape); ``min_dim``: the fewest dimensions of a batched input."""
    weight = m.weight is not None and m.weight.requires_grad
    bias = getattr(m, "bias", None) is not None and m.bias.requires_grad
    gw, gb = [], []
    for (inp, _), (d,) in zip(calls, deltas):
        x = inp[0]
        if x.dim() < min_dim:
            raise Unsupported(f"{what} input without a batch dimension")
        if weight:
            gw.append(per_example(normalised(x, d.dtype) * d, x))
        if bias:
            gb.append(per_example(d, x))
    out = {}
    if weight:
        out["weight"] = [Direct(total(gw))]
    if bias:
        out["bias"] = [Direct(total(gb))]
    return out


def _over_features(m):
    """Summed over every position of an example, the last dimensions (``m.normalized_shape``) kept."""
    shape = tuple(m.normalized_shape)
    return lambda t, x: t.reshape((x.shape[0], -1) + shape).sum(dim=1)


def _over_channels(t, x):
    """Summed over every position of an example, the channels (dim 1) kept."""
    return t.reshape(x.shape[0], x.shape[1], -1).sum(dim=2)


class LayerNormRule(Rule):
    types = (nn.LayerNorm,)

    def parts(self, m, calls, deltas) -> dict:
        def xh(x, dtype):
            return F.layer_norm(x.to(dtype), m.normalized_shape, None, None, m.eps)

        return affine_parts(m, calls, deltas, xh, _over_features(m), "LayerNorm", len(m.normalized_shape) + 1)


class GroupNormRule(Rule):
    types = (nn.GroupNorm,)

    def parts(self, m, calls, deltas) -> dict:
        def xh(x, dtype):
            return F.group_norm(x.to(dtype), m.num_groups, None, None, m.eps)

        return affine_parts(m, calls, deltas, xh, _over_channels, "GroupNorm", 2)


class RMSNormRule(Rule):
    types = tuple(t for t in (getattr(nn, "RMSNorm", None),) if t is not None)

    def parts(self, m, calls, deltas) -> dict:
        def xh(x, dtype):
            return F.rms_norm(x.to(dtype), m.normalized_shape, None, m.eps)

        return affine_parts(m, calls, deltas, xh, _over_features(m), "RMSNorm", len(m.normalized_shape) + 1)


class InstanceNormRule(Rule):
    types = (nn.InstanceNorm1d, nn.InstanceNorm2d)

    def check(self, m) -> str | None:
        if m.track_running_stats:
            return "running statistics"
        return None

    def parts(self, m, calls, deltas) -> dict:
        for (inp, _), _d in zip(calls, deltas):
            if inp[0].dim() != m._get_no_batch_dim() + 1:
                raise Unsupported("InstanceNorm input without a batch dimension")

        def xh(x, dtype):
            return F.instance_norm(x.to(dtype), eps=m.eps)

        return affine_parts(m, calls, deltas, xh, _over_channels, "InstanceNorm", 0)


register(LayerNormRule())
register(GroupNormRule())
register(RMSNormRule())
register(InstanceNormRule())
