"""``nn.LayerNorm`` and ``nn.GroupNorm`` affine parameters: ∇γ_i = Σ_t δ_{i,t} ⊙ x̂_{i,t} and
∇β_i = Σ_t δ_{i,t} (x̂ the normalised input, recomputed from the saved input): small, formed directly."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from . import Direct, Rule, Unsupported, register


class LayerNormRule(Rule):
    types = (nn.LayerNorm,)

    def parts(self, m, calls, deltas) -> dict:
        gw, gb = 0, 0
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            nd = len(m.normalized_shape)
            if x.dim() <= nd:
                raise Unsupported("LayerNorm input without a batch dimension")
            B = x.shape[0]
            xh = F.layer_norm(x.to(d.dtype), m.normalized_shape, None, None, m.eps)
            shape = (B, -1) + tuple(m.normalized_shape)
            gw = gw + (xh * d).reshape(shape).sum(dim=1)
            gb = gb + d.reshape(shape).sum(dim=1)
        out = {}
        if m.weight is not None and m.weight.requires_grad:
            out["weight"] = [Direct(gw)]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [Direct(gb)]
        return out


class GroupNormRule(Rule):
    types = (nn.GroupNorm,)

    def parts(self, m, calls, deltas) -> dict:
        gw, gb = 0, 0
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            if x.dim() < 2:
                raise Unsupported("GroupNorm input without a batch dimension")
            B, C = x.shape[0], x.shape[1]
            xh = F.group_norm(x.to(d.dtype), m.num_groups, None, None, m.eps)
            gw = gw + (xh * d).reshape(B, C, -1).sum(dim=2)
            gb = gb + d.reshape(B, C, -1).sum(dim=2)
        out = {}
        if m.weight is not None and m.weight.requires_grad:
            out["weight"] = [Direct(gw)]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [Direct(gb)]
        return out


register(LayerNormRule())
register(GroupNormRule())
