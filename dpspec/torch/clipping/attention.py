"""``nn.MultiheadAttention`` as PyTorch ships it (and so ``nn.TransformerEncoderLayer``/``Decoder``).

The module calls ``F.multi_head_attention_forward`` with its ``in_proj_weight`` and ``out_proj.weight``
directly (``out_proj`` is never called as a module), so no hook on a child can see the projections.
While the clipped sum is computed, the instance's ``forward`` is shadowed by :func:`_forward` — the
same computation with its in-projection and out-projection as visible linear maps — and restored
afterwards; the class is not replaced. Each projection is an outer-product gradient (:mod:`.linear`):

* self-attention (``query is key is value``, as in ``nn.TransformerEncoderLayer``): one packed
  projection ``x W_inᵀ + b_in`` → (B, L, 3E), one output gradient, one part whose per-example gradient
  is ``in_proj_weight``'s whole (3E, E) gradient (and one (B, 3E) bias part);
* ``key is value`` but not ``query`` (a decoder's cross-attention): q from ``W_in[:E]``, k and v packed
  from ``W_in[E:]`` — two parts, (E, E) and (2E, E);
* otherwise q, k and v separately — three (E, E) parts;
* the out-projection on the heads' concatenated output: one (E, E) part.

A module called several times in one forward in different ways is split into the row blocks common to
its calls (each call's output gradient sliced to them), the parts stacked along the rows of
``in_proj_weight``. Between the projections is ordinary autograd: with ``need_weights=False`` (what
``nn.TransformerEncoderLayer`` passes) the attention itself is ``F.scaled_dot_product_attention`` (the
fused kernels, no (B, H, L, S) scores kept) with the masks, the ``is_causal`` hint and the dropout of
``F.multi_head_attention_forward``; when the weights are asked for, it is computed explicitly (the
weights returned are those after dropout, as there). Covered: packed q/k/v weights
(``kdim = vdim = embed_dim``), no ``bias_k``/``bias_v``, no ``add_zero_attn``, batched inputs (either
``batch_first``)."""

from __future__ import annotations

import math

import torch.nn as nn
import torch.nn.functional as F

from . import Rule, Unsupported, register
from .linear import outer_parts

OUT = "out"  # the tag of the out-projection's record (the in-projection's: its row blocks)


def _float_mask(mask, name, dtype):
    """An additive mask as ``F.multi_head_attention_forward`` makes it: a boolean mask is −∞ where True
    (ignored), a float mask is added as it is."""
    if mask is None:
        return None
    import torch

    if mask.dtype.is_floating_point:
        return mask.to(dtype)
    if mask.dtype != torch.bool:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return torch.zeros_like(mask, dtype=dtype).masked_fill_(mask, float("-inf"))


def _heads(z, B, T, n, H, hd):
    """(B, T, n·E) projection output → its n blocks as (B, H, T, hd) views (no copy)."""
    if n == 1:
        return (z.view(B, T, H, hd).transpose(1, 2),)
    return z.view(B, T, n, H, hd).permute(2, 0, 3, 1, 4).unbind(0)


def _project(m, query, key, value, record):
    """q, k, v as (B, H, ·, hd), the in-projection recorded: inputs ``(blocks, x_1, …)``, outputs
    ``z_1, …``, where ``blocks[j] = (start, stop)`` are the rows of ``in_proj_weight`` (and
    ``in_proj_bias``) that ``z_j = x_j W[start:stop]ᵀ + b[start:stop]`` uses."""
    B, L, E = query.shape
    S = key.shape[1]
    H = m.num_heads
    hd = E // H
    W, b = m.in_proj_weight, m.in_proj_bias

    def lin(x, s, e):
        if s == 0 and e == W.shape[0]:
            return F.linear(x, W, b)
        return F.linear(x, W[s:e], None if b is None else b[s:e])

    if query is key and key is value:  # self-attention: one packed projection
        qkv = lin(query, 0, 3 * E)
        record(m, (((0, 3 * E),), query), qkv)
        return _heads(qkv, B, L, 3, H, hd)
    if key is value:  # q alone, k and v packed
        q, kv = lin(query, 0, E), lin(key, E, 3 * E)
        record(m, (((0, E), (E, 3 * E)), query, key), q, kv)
        return _heads(q, B, L, 1, H, hd) + _heads(kv, B, S, 2, H, hd)
    zs = [lin(x, j * E, (j + 1) * E) for j, x in enumerate((query, key, value))]
    record(m, (((0, E), (E, 2 * E), (2 * E, 3 * E)), query, key, value), *zs)
    return _heads(zs[0], B, L, 1, H, hd) + _heads(zs[1], B, S, 1, H, hd) + _heads(zs[2], B, S, 1, H, hd)


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
        if not m.batch_first:  # (self-attention is told apart in _project: the transposes keep `is`)
            if query is key and key is value:
                query = key = value = query.transpose(0, 1)
            elif key is value:
                query, key = query.transpose(0, 1), key.transpose(0, 1)
                value = key
            else:
                query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        B, L, E = query.shape
        S = key.shape[1]
        H = m.num_heads
        if key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        # the masks as F.multi_head_attention_forward makes them: additive, in the query's dtype
        kpm = _float_mask(key_padding_mask, "key_padding_mask", query.dtype)
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
                "`generate_square_subsequent_mask` to create this mask."
            )
        if is_causal and kpm is None and not need_weights:
            am = None  # the hint is trusted: the fused kernels' causal mask
        else:
            am = _float_mask(attn_mask, "attn_mask", query.dtype)
            if kpm is not None:
                is_causal = False  # the merged mask is no longer causal
        if am is not None:
            if am.dim() == 2:
                if tuple(am.shape) != (L, S):
                    raise RuntimeError(f"The shape of the 2D attn_mask is {am.shape}, but should be {(L, S)}.")
            elif am.dim() == 3:
                if tuple(am.shape) != (B * H, L, S):
                    raise RuntimeError(f"The shape of the 3D attn_mask is {am.shape}, but should be {(B * H, L, S)}.")
                am = am.view(B, H, L, S)
            else:
                raise RuntimeError(f"attn_mask's dimension {am.dim()} is not supported")
        if kpm is not None:
            if tuple(kpm.shape) != (B, S):
                raise AssertionError(f"expecting key_padding_mask shape of {(B, S)}, but got {kpm.shape}")
            kpm = kpm.view(B, 1, 1, S)  # broadcast over heads and queries
            am = kpm if am is None else am + kpm
        p = m.dropout if m.training else 0.0
        q, k, v = _project(m, query, key, value, record)
        weights = None
        if need_weights:
            scores = (q * math.sqrt(1.0 / float(E // H))) @ k.transpose(-2, -1)  # (B, H, L, S)
            if am is not None:
                scores = scores + am
            weights = torch.softmax(scores, dim=-1)
            if p > 0.0:
                weights = F.dropout(weights, p=p)
            ctx = weights @ v
        else:
            ctx = F.scaled_dot_product_attention(q, k, v, am, p, is_causal)
        ctx = ctx.transpose(1, 2).reshape(B, L, E)
        out = F.linear(ctx, m.out_proj.weight, m.out_proj.bias)
        record(m, (OUT, ctx), out)
        if not m.batch_first:
            out = out.transpose(0, 1)
        if weights is None:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights

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
        # record(m, inputs, *outputs): the in-projection is one record, the output projection another
        m.forward = _forward(m, lambda mod, inputs, *outs: record(mod, inputs, outs))

        def undo():
            del m.forward

        return undo

    def outputs(self, out) -> list:
        return list(out)

    def parts(self, m, calls, deltas) -> dict:
        what = "nn.MultiheadAttention"
        proj = [(inp, d) for (inp, _), d in zip(calls, deltas) if not isinstance(inp[0], str)]
        outp = [(inp[1], d[0]) for (inp, _), d in zip(calls, deltas) if isinstance(inp[0], str)]
        B = calls[0][0][1].shape[0]
        # the row blocks of in_proj_weight common to every call (one block for self-attention alone)
        cuts = sorted({c for inp, _ in proj for blk in inp[0] for c in blk})
        if not proj or cuts[0] != 0 or cuts[-1] != m.in_proj_weight.shape[0]:
            raise Unsupported(f"{what}: in-projection records do not cover in_proj_weight")
        blocks_w, blocks_b = [], []
        for s, e in zip(cuts[:-1], cuts[1:]):
            pairs = []
            for inp, d in proj:
                for j, (s0, e0) in enumerate(inp[0]):
                    if s0 <= s and e <= e0:  # the call's output j holds these rows
                        pairs.append((inp[1 + j], d[j] if (s, e) == (s0, e0) else d[j][..., s - s0 : e - s0]))
            if len(pairs) != len(proj):  # each call's outputs tile the rows: one of them holds each block
                raise Unsupported(f"{what}: rows {s}:{e} of in_proj_weight missing from a call")
            ow, ob = outer_parts(pairs, B, what)
            blocks_w.append(ow)
            blocks_b.append(ob)
        po, pb = outer_parts(outp, B, what)
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
