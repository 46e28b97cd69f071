"""Low-rank adapters (LoRA, Hu et al., ICLR 2022) for private fine-tuning of a frozen model.

    base = ...pretrained encoder...
    dpspec.torch.lora.add_lora(base, rank=4)          # every nn.Linear gets W x + (α/r) B A x, W frozen
    model, optimizer, loader = make_private(compiled, base, torch.optim.SGD(trainable, lr), data)

Only the adapters (and what you unfreeze, e.g. a new head) are trained: the private step clips and
noises their gradients alone (the frozen weights are public — they are not a function of the private
data — so they add nothing to the sensitivity). ``A`` and ``B`` are ``nn.Linear`` layers, so the
per-layer clipping rules cover them wherever they sit (``dpspec.torch.clipping``).

``nn.MultiheadAttention`` calls its projections' weights directly, never the modules: adapters go on
the ``nn.Linear`` layers a model calls as modules (feed-forward layers, heads, your own projections).
Note that PyTorch's ``nn.TransformerEncoderLayer`` takes a fused fast path in eval mode when nothing
requires grad, which reads ``linear1.weight`` directly and so skips an adapter there; use your own
block (or keep a parameter requiring grad) when evaluating such a model.
"""

from __future__ import annotations

import math

import torch.nn as nn

__all__ = ["LoRALinear", "add_lora", "lora_parameters"]


class LoRALinear(nn.Module):
    """``base(x) + (alpha / rank) · B(A(x))`` with ``base`` frozen; B starts at zero (the adapted model
    starts as the pretrained one)."""

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float | None = None):
        super().__init__()
        if rank < 1:
            raise ValueError(f"rank must be ≥ 1, got {rank}")
        self.base = base.requires_grad_(False)
        p = base.weight
        self.A = nn.Linear(base.in_features, rank, bias=False, device=p.device, dtype=p.dtype)
        self.B = nn.Linear(rank, base.out_features, bias=False, device=p.device, dtype=p.dtype)
        nn.init.kaiming_uniform_(self.A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.B.weight)
        self.scale = float(rank if alpha is None else alpha) / rank

    @property
    def weight(self):  # code that reads a linear layer's weight and bias sees the base layer's
        return self.base.weight

    @property
    def bias(self):
        return self.base.bias

    def forward(self, x):
        return self.base(x) + self.B(self.A(x)) * self.scale


def add_lora(model: nn.Module, rank: int = 4, alpha: float | None = None, *, include=None) -> nn.Module:
    """Freeze ``model`` and wrap each of its ``nn.Linear`` layers (those whose qualified name passes
    ``include``, a predicate; default all) in a :class:`LoRALinear`, in place. Returns ``model``."""
    for p in model.parameters():
        p.requires_grad_(False)
    targets = [(n, m) for n, m in model.named_modules() if type(m) is nn.Linear and (include is None or include(n))]
    for name, lin in targets:
        parent, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, leaf, LoRALinear(lin, rank, alpha))
    return model


def lora_parameters(model: nn.Module) -> list:
    """The adapters' parameters (every ``A`` and ``B`` of the model's :class:`LoRALinear` layers)."""
    return [p for m in model.modules() if isinstance(m, LoRALinear) for p in (*m.A.parameters(), *m.B.parameters())]
