"""The RMSNorm layers of Hugging Face's Llama-family models (Llama, Mistral, Qwen2, Qwen3, Phi-3: ``w ·
x̂`` with x̂ = x / √(mean(x²) + ε) computed in float32 and cast back) and Gemma (``x̂ · (1 + w)``): the
per-example gradient of w is Σ_t δ_{i,t} ⊙ x̂_{i,t} either way, x̂ recomputed from the saved input with
the layer's own float32 arithmetic; small, formed directly. Matched by the classes' qualified names:
dpspec does not import ``transformers``. Like every rule, checked once per model against each example
alone (``engine.verified``): a class whose arithmetic differs is caught there and runs by vmap."""

from __future__ import annotations

from . import Rule, Unsupported, register
from .norm import affine_parts

LLAMA_STYLE = tuple(
    f"transformers.models.{m}.modeling_{m}.{c}RMSNorm"
    for m, c in (("llama", "Llama"), ("mistral", "Mistral"), ("qwen2", "Qwen2"), ("qwen3", "Qwen3"), ("phi3", "Phi3"))
)
GEMMA = tuple(f"transformers.models.{m}.modeling_{m}.{c}RMSNorm" for m, c in (("gemma", "Gemma"), ("gemma2", "Gemma2")))


class HFRMSNormRule(Rule):
    types = ()
    type_names = LLAMA_STYLE + GEMMA

    def parts(self, m, calls, deltas) -> dict:
        import torch

        eps = getattr(m, "variance_epsilon", getattr(m, "eps", None))
        if eps is None:
            raise Unsupported(f"{type(m).__name__} without an epsilon")

        def xh(x, dtype):  # the layer's own arithmetic: in float32, then cast
            xf = x.to(torch.float32)
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)

        def per_example(t, x):
            return t.reshape(x.shape[0], -1, x.shape[-1]).sum(dim=1)

        return affine_parts(m, calls, deltas, xh, per_example, "RMSNorm", 2)


register(HFRMSNormRule())
