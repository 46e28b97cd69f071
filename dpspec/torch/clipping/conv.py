"""``nn.Conv1d`` / ``nn.Conv2d`` (groups = 1, zero padding): ``unfold`` makes the convolution a linear
layer over the output positions, ∇W_i = Σ_l δ_{i,l} u_{i,l}ᵀ with u the unfolded input patches."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from . import Direct, Outer, Rule, register


class ConvRule(Rule):
    types = (nn.Conv1d, nn.Conv2d)

    def check(self, m) -> str | None:
        if m.groups != 1:
            return "grouped convolution"
        if m.padding_mode != "zeros" or isinstance(m.padding, str):
            return f"padding {m.padding!r} / {m.padding_mode}"
        return None

    def parts(self, m, calls, deltas) -> dict:
        import torch

        As, Ds = [], []
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            if x.dim() != m.weight.dim():  # unbatched input
                from . import Unsupported

                raise Unsupported("unbatched convolution input")
            B = x.shape[0]
            if isinstance(m, nn.Conv1d):
                x, d = x.unsqueeze(2), d.unsqueeze(2)
                k, dil, pad, st = (1, m.kernel_size[0]), (1, m.dilation[0]), (0, m.padding[0]), (1, m.stride[0])
            else:
                k, dil, pad, st = m.kernel_size, m.dilation, m.padding, m.stride
            u = F.unfold(x, k, dilation=dil, padding=pad, stride=st)  # (B, C_in·k, L)
            As.append(u.transpose(1, 2))
            Ds.append(d.reshape(B, d.shape[1], -1).transpose(1, 2))  # (B, L, C_out)
        A = As[0] if len(As) == 1 else torch.cat(As, dim=1)
        D = Ds[0] if len(Ds) == 1 else torch.cat(Ds, dim=1)
        out = {}
        if m.weight.requires_grad:
            out["weight"] = [Outer(A, D)]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [Direct(D.sum(dim=1))]
        return out


register(ConvRule())
