"""``nn.Conv1d`` / ``nn.Conv2d``, grouped or not, any padding (an int, a tuple, ``"same"``, ``"valid"``) and
any padding mode: ∇W_i = Σ_l δ_{i,l} u_{i,l}ᵀ over the output positions l (u: the unfolded input patches).
A convolution's weight is small (C_out × C_in/g·k), so its (B, C_out, C_in/g·k) per-example gradients are
formed — by the convolution's own weight backward on the batch folded into the groups (a grouped
convolution with B·g groups, as ``vmap`` batches it), faster than ``unfold`` — and reused for the clipped
sum; only the large activations and output gradients of the batch are kept, never per-example copies of
them. A padding the convolution cannot express as its own zero padding (``"same"`` with an even kernel,
``reflect`` / ``replicate`` / ``circular``) is applied to the input first, exactly as the module's forward
applies it (its ``_reversed_padding_repeated_twice``), and the weight backward runs without padding."""

from __future__ import annotations

import torch.nn as nn

from . import Direct, Outer, Rule, register, total


class ConvRule(Rule):
    types = (nn.Conv1d, nn.Conv2d)

    def check(self, m) -> str | None:
        if m.padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            return f"padding mode {m.padding_mode!r}"
        return None

    def parts(self, m, calls, deltas) -> dict:

        import torch.nn.functional as F

        from . import Unsupported

        # zero padding the convolution applies itself (ints); any other padding applied to the input here,
        # as the module's forward applies it
        own = m.padding_mode == "zeros" and not isinstance(m.padding, str)
        xs, ds = [], []
        for (inp, _), (d,) in zip(calls, deltas):
            x = inp[0]
            if x.dim() != m.weight.dim():  # unbatched input
                raise Unsupported("unbatched convolution input")
            if not own:
                mode = "constant" if m.padding_mode == "zeros" else m.padding_mode
                x = F.pad(x, m._reversed_padding_repeated_twice, mode=mode)
            if isinstance(m, nn.Conv1d):
                x, d = x.unsqueeze(2), d.unsqueeze(2)
            xs.append(x)
            ds.append(d)
        pads: tuple = tuple(m.padding) if own else (0,) * len(m.kernel_size)
        k: tuple
        if isinstance(m, nn.Conv1d):
            k, dil, pad, st = (1, m.kernel_size[0]), (1, m.dilation[0]), (0, pads[0]), (1, m.stride[0])
        else:
            k, dil, pad, st = tuple(m.kernel_size), tuple(m.dilation), pads, tuple(m.stride)
        B, C_out = ds[0].shape[0], ds[0].shape[1]
        out: dict = {}
        if m.weight.requires_grad:  # the (B, C_out, C_in/g·k) per-example gradients (small for a convolution)
            out["weight"] = [
                Outer(
                    None,
                    None,
                    G=total(_per_example_weight(x, d, k, dil, pad, st, m.groups) for x, d in zip(xs, ds)),
                )
            ]
        if m.bias is not None and m.bias.requires_grad:
            out["bias"] = [Direct(total(d.reshape(B, C_out, -1).sum(dim=2) for d in ds))]
        return out


def _per_example_weight(x, d, k, dil, pad, st, groups=1):
    """∇W_i = the weight gradient of a 2-d convolution (``groups`` groups) on example i alone, for every i:
    PyTorch's convolution backward (weight part only) on the batch folded into the channels, as a
    convolution with ``groups = B·groups`` — the call ``vmap`` makes of example i's ``convolution_backward``
    (its batching rule), made directly: the same kernel on the same layouts, without vmap's per-call cost.
    Folded channel b·C + c falls in group b·groups + c // (C / groups), example b's own group c // (C / groups)."""
    import torch

    from .kernels import constant

    B, C_in, C_out = x.shape[0], x.shape[1], d.shape[1]
    cin = C_in // groups
    w = constant(0.0, x).expand(B * C_out, cin, k[0], k[1])  # only its shape is read (no input gradient)
    g = torch.ops.aten.convolution_backward(
        d.reshape((1, B * C_out) + tuple(d.shape[2:])),
        x.reshape((1, B * C_in) + tuple(x.shape[2:])),
        w,
        None,
        list(st),
        list(pad),
        list(dil),
        False,
        [0, 0],
        B * groups,
        [False, True, False],
    )[1]
    return g.reshape(B, C_out, cin * k[0] * k[1])


register(ConvRule())
