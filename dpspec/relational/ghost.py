"""Per-tuple clipped gradient sums without materialising per-tuple gradients ("ghost" norms).

For a layer whose weight gradient is a sum over the rows r of one tuple (the 2 + k node slots,
times the token positions for a transformer), G_i = sum_r delta_r x_r^T, so

    ||G_i||_F^2 = sum_{r, r'} (x_r . x_r') (delta_r . delta_r')           (Gram form)

and the clipped sum is sum_i f_i G_i = einsum(delta, x, f).  Supported layers: ``nn.Linear``
(weight, bias) and ``nn.LayerNorm`` (gamma = sum_r xhat_r * delta_r, beta = sum_r delta_r).
Each tuple's loss depends only on its own rows (no batch statistics), so the gradient of the
summed loss with respect to a row's layer output is that tuple's delta.  Modules with other
trainable parameters are not supported (``supports`` is False; use the vmap path).
Cross-checked against ``torch.func.vmap(grad(...))`` in tests/families/relational_dpsgd/test_rel_trainer.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dpspec.mechanisms.noise_device import accumulation_dtype
from dpspec.torch.clipping.kernels import ieee_matmul

__all__ = ["GhostClipper"]


class GhostClipper:
    def __init__(self, module: nn.Module):
        self.module = module
        self.layers = []
        ok = True
        for m in module.modules():
            own = [p for p in m.parameters(recurse=False) if p.requires_grad]
            if not own:
                continue
            if isinstance(m, (nn.Linear, nn.LayerNorm)):
                self.layers.append(m)
            else:
                ok = False
        self.supports = ok and bool(self.layers)
        self._acts: dict = {}
        self._grads: dict = {}

    def _hooks(self):
        hs = []
        for m in self.layers:

            def fwd(mod, inp, out, key=id(m)):  # noqa: B008 - binds this layer's id at definition
                self._acts[key] = inp[0].detach()
                if out.requires_grad:
                    out.register_hook(lambda g, key=key: self._grads.__setitem__(key, g.detach()))

            hs.append(m.register_forward_hook(fwd))
        return hs

    def run(self, forward_loss, b: int, thresholds_fn):
        """``forward_loss()`` returns the (b,) per-tuple losses, computed with rows grouped so
        that every layer input reshapes to (b, R, features).  ``thresholds_fn(norms)`` returns
        the per-tuple clip factors.  Returns (dict param -> clipped summed gradient, norms,
        losses)."""
        self._acts.clear()
        self._grads.clear()
        hs = self._hooks()
        try:
            with torch.enable_grad():
                losses = forward_loss()
                params = [p for m in self.layers for p in m.parameters(recurse=False)]
                torch.autograd.grad(losses.sum(), params, allow_unused=True)
        finally:
            for h in hs:
                h.remove()
        with ieee_matmul():  # norms and sums in full-float32 products (TF32 would loosen the clipping)
            p0 = next(iter(self.layers[0].parameters()))
            sq = torch.zeros(b, device=p0.device, dtype=accumulation_dtype(p0.dtype))
            # (layer, inputs, output gradients, a LayerNorm's normalised inputs)
            cache: list[tuple[nn.Linear | nn.LayerNorm, torch.Tensor, torch.Tensor, torch.Tensor | None]] = []
            for m in self.layers:
                x = self._acts[id(m)]
                d = self._grads.get(id(m))
                if d is None:
                    d = torch.zeros(
                        *x.shape[:-1],
                        m.weight.shape[0] if isinstance(m, nn.Linear) else x.shape[-1],
                        device=x.device,
                        dtype=x.dtype,
                    )
                X = x.reshape(b, -1, x.shape[-1]).to(sq.dtype)  # norms and sums in float32 or wider
                D = d.reshape(b, -1, d.shape[-1]).to(sq.dtype)
                if isinstance(m, nn.Linear):
                    R = X.shape[1]
                    if R * R <= X.shape[2] * D.shape[2]:
                        gx = torch.bmm(X, X.transpose(1, 2))
                        gd = torch.bmm(D, D.transpose(1, 2))
                        sq = sq + (gx * gd).sum(dim=(1, 2))
                    else:
                        G = torch.bmm(D.transpose(1, 2), X)
                        sq = sq + (G * G).sum(dim=(1, 2))
                    if m.bias is not None:
                        sq = sq + (D.sum(1) ** 2).sum(1)
                    cache.append((m, X, D, None))
                else:
                    xhat = F.layer_norm(X, m.normalized_shape, None, None, m.eps)
                    gg = (xhat * D).sum(1)
                    sq = sq + (gg**2).sum(1)
                    if m.bias is not None:
                        sq = sq + (D.sum(1) ** 2).sum(1)
                    cache.append((m, X, D, xhat))
            norms = sq.clamp(min=0).sqrt()
            f = thresholds_fn(norms)
            out = {}
            for m, X, D, normalised in cache:
                if isinstance(m, nn.Linear):
                    out[m.weight] = torch.einsum("bro,bri,b->oi", D, X, f)
                    if m.bias is not None:
                        out[m.bias] = torch.einsum("bro,b->o", D, f)
                else:
                    assert normalised is not None  # a LayerNorm's entry keeps its normalised inputs
                    out[m.weight] = torch.einsum("brh,b->h", normalised * D, f)
                    if m.bias is not None:
                        out[m.bias] = torch.einsum("brh,b->h", D, f)
        return out, norms, losses.detach()
