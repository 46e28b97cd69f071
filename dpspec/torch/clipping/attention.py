"""``nn.MultiheadAttention`` as PyTorch ships it (and so ``nn.TransformerEncoderLayer``/``Decoder``).

The module calls ``F.multi_head_attention_forward`` with its ``in_proj_weight`` and ``out_proj.weight``
directly (``out_proj`` is never called as a module), so no hook on a child can see the projections.
While the clipped sum is computed, the instance's ``forward`` is shadowed by :func:`_forward` — the
same computation written with four visible linear maps (q, k, v, out) — and restored afterwards; the
class is not replaced. Each projection is then an outer-product gradient (:mod:`.linear`):
``in_proj_weight``'s per-example gradient is the three (E, E) blocks stacked, ``in_proj_bias``'s the
three bias gradients. Covered: packed q/k/v weights (``kdim = vdim = embed_dim``), no ``bias_k``/
``bias_v``, no ``add_zero_attn``, batched inputs (either ``batch_first``)."""

from __future__ import annotations

import math

import torch.nn as nn
import torch.nn.functional as F

from . import Rule, Unsupported, register
from .linear import outer_parts


def _float_mask(mask, dtype):
    """An additive mask: a boolean mask is −∞ where True (ignored), a float mask is added as it is."""
    if mask is None:
        return None
    if mask.dtype.is_floating_point:
        return mask.to(dtype)
    import torch

    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask.bool(), float("-inf"))


def _forward(m, record):
    def forward(
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        import torch

        if query.dim() != 3:
            raise Unsupported("unbatched attention input")
        if not m.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        B, L, E = query.shape
        S = key.shape[1]
        H = m.num_heads
        hd = E // H
        W, b = m.in_proj_weight, m.in_proj_bias
        projs = []
        for j, x in enumerate((query, key, value)):
            z = F.linear(x, W[j * E : (j + 1) * E], None if b is None else b[j * E : (j + 1) * E])
            projs.append(z)
        q, k, v = projs
        record(m, (query.detach(), key.detach(), value.detach()), q, k, v)
        q = q.reshape(B, L, H, hd).transpose(1, 2)
        k = k.reshape(B, S, H, hd).transpose(1, 2)
        v = v.reshape(B, S, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        am = _float_mask(attn_mask, scores.dtype)
        if am is None and is_causal:
            am = torch.triu(torch.full((L, S), float("-inf"), dtype=scores.dtype, device=scores.device), 1)
        if am is not None:
            scores = scores + (am.reshape(B, H, L, S) if am.dim() == 3 else am)
        if key_padding_mask is not None:
            kp = _float_mask(key_padding_mask, scores.dtype)
            scores = scores + kp.reshape(B, 1, 1, S)
        attn = torch.softmax(scores, dim=-1)
        attn_d = F.dropout(attn, p=m.dropout, training=m.training) if m.dropout > 0 else attn
        ctx = (attn_d @ v).transpose(1, 2).reshape(B, L, E)
        out = F.linear(ctx, m.out_proj.weight, m.out_proj.bias)
        record(m, (ctx.detach(),), out)
        if not m.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, attn.mean(dim=1) if average_attn_weights else attn

    return forward


class MultiheadAttentionRule(Rule):
    types = (nn.MultiheadAttention,)

    def check(self, m) -> str | None:
        if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
            return "separate q/k/v weights, bias_k/bias_v or add_zero_attn"
        if type(m.out_proj) not in (nn.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear):
            return "a replaced out_proj"
        return None

    def params(self, m) -> dict:
        return {k: p for k, p in m.named_parameters()}

    def install(self, m, record):
        # record(m, inputs, *outputs): the q/k/v call is one record, the output projection another
        m.forward = _forward(m, lambda mod, inputs, *outs: record(mod, inputs, outs))

        def undo():
            del m.forward

        return undo

    def outputs(self, out) -> list:
        return list(out)

    def parts(self, m, calls, deltas) -> dict:
        qkv = [(c, d) for c, d in zip(calls, deltas) if len(c[0]) == 3]
        proj = [(c, d) for c, d in zip(calls, deltas) if len(c[0]) == 1]
        B = calls[0][0][0].shape[0]
        blocks_w, blocks_b = [], []
        for j in range(3):
            ow, ob = outer_parts([(inp[j], d[j]) for (inp, _), d in qkv], B, "nn.MultiheadAttention")
            blocks_w.append(ow)
            blocks_b.append(ob)
        po, pb = outer_parts([(inp[0], d[0]) for (inp, _), d in proj], B, "nn.MultiheadAttention")
        out = {}
        if m.in_proj_weight.requires_grad:
            out["in_proj_weight"] = blocks_w
        if m.in_proj_bias is not None and m.in_proj_bias.requires_grad:
            out["in_proj_bias"] = blocks_b
        if m.out_proj.weight.requires_grad:
            out["out_proj.weight"] = [po]
        if m.out_proj.bias is not None and m.out_proj.bias.requires_grad:
            out["out_proj.bias"] = [pb]
        return out


register(MultiheadAttentionRule())
