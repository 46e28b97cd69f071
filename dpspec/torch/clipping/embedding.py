"""``nn.Embedding`` (dense, no ``max_norm``, no ``scale_grad_by_freq``): ∇E_i = Σ_t e_{x_t} δ_tᵀ, so
‖∇E_i‖² = Σ_{t,s} [x_t = x_s] δ_t·δ_s, and Σ_i s_i ∇E_i is one ``index_add`` of the scaled δ."""

from __future__ import annotations

import torch.nn as nn

from . import Embed, Rule, Unsupported, register


class EmbeddingRule(Rule):
    types: tuple = (nn.Embedding,)

    def per_example(self, m, inputs, out, B: int):
        """A lookup made once for the whole batch — indices (1, T), as GPT-2's position embedding, whose
        output is broadcast against the batch — made one row per example: the indices and the output
        expanded to B rows (views, no copy), so the gradient each example's row receives is its own."""
        x = inputs[0] if inputs else None
        if B <= 1 or x is None or x.dim() < 1 or x.shape[0] != 1 or out.dim() != x.dim() + 1:
            return None
        return (x.expand((B,) + tuple(x.shape[1:])),) + tuple(inputs[1:]), out.expand((B,) + tuple(out.shape[1:]))

    def check(self, m) -> str | None:
        if m.sparse or m.max_norm is not None or m.scale_grad_by_freq:
            return "sparse, max_norm or scale_grad_by_freq embedding"
        return None

    def parts(self, m, calls, deltas) -> dict:
        import torch

        if not m.weight.requires_grad:
            return {}
        idx, D = [], []
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            if x.dim() < 1 or d.shape[:-1] != x.shape:
                raise Unsupported("embedding input without a batch dimension")
            B = x.shape[0]
            ii = x.reshape(B, -1)
            dd = d.reshape(B, -1, d.shape[-1])
            if m.padding_idx is not None:  # the padding row gets no gradient
                dd = dd * (ii != m.padding_idx).unsqueeze(-1).to(dd.dtype)
            idx.append(ii)
            D.append(dd)
        if len(idx) > 1:
            idx, D = [torch.cat(idx, dim=1)], [torch.cat(D, dim=1)]
        return {"weight": [Embed(idx[0], D[0], m.num_embeddings)]}


register(EmbeddingRule())


class ScaledEmbeddingRule(EmbeddingRule):
    """Hugging Face's scaled word embeddings (Gemma's and Gemma 2's: the lookup times ``embed_scale``): the
    embedding's rule with each output gradient scaled by it. Matched by the classes' qualified names (those
    tested: tests/torch/test_clipping_rules.py)."""

    types = ()
    type_names = tuple(
        f"transformers.models.{m}.modeling_{m}.{c}ScaledWordEmbedding"
        for m, c in (("gemma", "GemmaText"), ("gemma2", "Gemma2Text"))
    )

    def parts(self, m, calls, deltas) -> dict:
        import torch

        from .kernels import constant

        s = m.embed_scale
        scaled = []
        for d in deltas:
            (g,) = d
            scale = s.to(device=g.device, dtype=g.dtype) if torch.is_tensor(s) else constant(float(s), g)
            scaled.append((g * scale,))
        return super().parts(m, calls, scaled)


register(ScaledEmbeddingRule())
