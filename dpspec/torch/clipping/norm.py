"""``nn.LayerNorm``, ``nn.RMSNorm``, ``nn.GroupNorm`` and ``nn.InstanceNorm1d/2d`` (without running
statistics) affine parameters: ∇γ_i = Σ_t δ_{i,t} ⊙ x̂_{i,t} and ∇β_i = Σ_t δ_{i,t} (x̂ the normalised
input, recomputed from the saved input): small, formed directly."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from . import Direct, Rule, Unsupported, register, total


class LayerNormRule(Rule):
    types = (nn.LayerNorm,)

    def parts(self, m, calls, deltas) -> dict:
        gw, gb = [], []
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            nd = len(m.normalized_shape)
            if x.dim() <= nd:
                raise Unsupported("LayerNorm input without a batch dimension")
            B = x.shape[0]
            shape = (B, -1) + tuple(m.normalized_shape)
            if m.weight is not None and m.weight.requires_grad:
                xh = F.layer_norm(x.to(d.dtype), m.normalized_shape, None, None, m.eps)
                gw.append((xh * d).reshape(shape).sum(dim=1))
            if m.bias is not None and m.bias.requires_grad:
                gb.append(d.reshape(shape).sum(dim=1))
        out = {}
        if m.weight is not None and m.weight.requires_grad:
            out["weight"] = [Direct(total(gw))]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [Direct(total(gb))]
        return out


class GroupNormRule(Rule):
    types = (nn.GroupNorm,)

    def parts(self, m, calls, deltas) -> dict:
        gw, gb = [], []
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            if x.dim() < 2:
                raise Unsupported("GroupNorm input without a batch dimension")
            B, C = x.shape[0], x.shape[1]
            if m.weight is not None and m.weight.requires_grad:
                xh = F.group_norm(x.to(d.dtype), m.num_groups, None, None, m.eps)
                gw.append((xh * d).reshape(B, C, -1).sum(dim=2))
            if m.bias is not None and m.bias.requires_grad:
                gb.append(d.reshape(B, C, -1).sum(dim=2))
        out = {}
        if m.weight is not None and m.weight.requires_grad:
            out["weight"] = [Direct(total(gw))]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [Direct(total(gb))]
        return out


class RMSNormRule(Rule):
    types = tuple(t for t in (getattr(nn, "RMSNorm", None),) if t is not None)

    def parts(self, m, calls, deltas) -> dict:
        if m.weight is None or not m.weight.requires_grad:
            return {}
        gw = []
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            nd = len(m.normalized_shape)
            if x.dim() <= nd:
                raise Unsupported("RMSNorm input without a batch dimension")
            xh = F.rms_norm(x.to(d.dtype), m.normalized_shape, None, m.eps)
            gw.append((xh * d).reshape((x.shape[0], -1) + tuple(m.normalized_shape)).sum(dim=1))
        return {"weight": [Direct(total(gw))]}


class InstanceNormRule(Rule):
    types = (nn.InstanceNorm1d, nn.InstanceNorm2d)

    def check(self, m) -> str | None:
        if m.track_running_stats:
            return "running statistics"
        return None

    def parts(self, m, calls, deltas) -> dict:
        gw, gb = [], []
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            if x.dim() != m._get_no_batch_dim() + 1:
                raise Unsupported("InstanceNorm input without a batch dimension")
            B, C = x.shape[0], x.shape[1]
            if m.weight is not None and m.weight.requires_grad:
                xh = F.instance_norm(x.to(d.dtype), eps=m.eps)
                gw.append((xh * d).reshape(B, C, -1).sum(dim=2))
            if m.bias is not None and m.bias.requires_grad:
                gb.append(d.reshape(B, C, -1).sum(dim=2))
        out = {}
        if m.weight is not None and m.weight.requires_grad:
            out["weight"] = [Direct(total(gw))]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [Direct(total(gb))]
        return out


register(LayerNormRule())
register(GroupNormRule())
register(RMSNormRule())
register(InstanceNormRule())
