"""Hugging Face's ``Conv1D`` (``transformers.pytorch_utils.Conv1D``: GPT-2's attention and MLP projections), a
linear map with its weight stored transposed: ``y = x W + b`` with W of shape (d_in, d_out). Its
per-example weight gradient is Σ_t a_{i,t} δ_{i,t}ᵀ (d_in × d_out) — the ``nn.Linear`` outer product with
the roles of input and output gradient swapped, so it is the part ``Outer(A=δ, D=a)`` (same norm, the
sum in the parameter's own layout). Matched by the class's qualified name: dpspec does not import
``transformers``. Like every rule, checked once per model against each example alone (``engine.verified``)."""

from __future__ import annotations

from . import Outer, Rule, register
from .linear import outer_parts


class HFConv1DRule(Rule):
    types = ()
    type_names = ("transformers.pytorch_utils.Conv1D",)

    def parts(self, m, calls, deltas) -> dict:
        B = calls[0][0][0].shape[0]
        outer, bias = outer_parts([(inp[0], d[0]) for (inp, _), d in zip(calls, deltas)], B, "Conv1D")
        out = {}
        if m.weight.requires_grad:  # (d_in, d_out): Σ_t a_t δ_tᵀ, the Linear's part transposed
            out["weight"] = [Outer(outer.D, outer.A)]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [bias]
        return out


register(HFConv1DRule())
