"""The private step's small operations with fewer dispatches, the same numbers (torch, imported lazily).

A private step on a GPU runs a few hundred small kernels; launching them from Python — the dispatcher,
the launch, a host→device copy of a Python number — is its cost, not running them. These helpers compute
exactly what the obvious code computes (the same values, layouts and kernels for the results), with fewer
dispatched operations. Shared by the per-layer rules, :mod:`dpspec.mechanisms.per_example` (ghost and vmap
clipping) and :mod:`dpspec.torch.guards`.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

__all__ = ["constant", "clip_tensor", "positions", "segments", "zero_rows", "nonfinite", "weighted_sum", "ieee_matmul"]


_CONSTANTS: dict = {}


def constant(value: float, like):
    """A 0-dim tensor holding ``value`` in ``like``'s dtype, on its device: made once per (value, dtype,
    device) and shared — a ``torch.where`` operand that needs no fill kernel per call (a Python number
    there becomes a fresh device scalar each time). Read-only: never modify it in place."""
    import torch

    key = (repr(float(value)), like.dtype, like.device)
    t = _CONSTANTS.get(key)
    if t is None:
        with torch.inference_mode(False), torch.no_grad():
            t = _CONSTANTS[key] = torch.full((), float(value), dtype=like.dtype, device=like.device)
    return t


def clip_tensor(pcs, like):
    """The per-layer clip norms as a (E,) tensor in ``like``'s dtype, on its device: made once per (norms,
    dtype, device), not copied to the device at every step. Read-only."""
    import torch

    key = (tuple(pcs), like.dtype, like.device)
    t = _CONSTANTS.get(key)
    if t is None:
        with torch.inference_mode(False), torch.no_grad():
            t = _CONSTANTS[key] = torch.tensor(list(key[0]), dtype=like.dtype, device=like.device)
    return t


def positions(index, like):
    """``index`` (a list of ints) as a long tensor on ``like``'s device: made once per (index, device) and
    shared, not copied to the device at every step. Read-only."""
    import torch

    key = ("positions", tuple(int(i) for i in index), like.device)
    t = _CONSTANTS.get(key)
    if t is None:
        with torch.inference_mode(False), torch.no_grad():
            t = _CONSTANTS[key] = torch.tensor(key[1], dtype=torch.long, device=like.device)
    return t


def segments(widths, like, owners=None):
    """(indicator, columns) for consecutive segments of the given widths: the (Σw, S) 0/1 matrix whose
    product with a (B, Σw) tensor sums each segment's columns, and the (Σw,) index of each column's owner
    (``owners[segment]``; by default the segment's own index). Made once per (widths, owners, dtype,
    device), in ``like``'s dtype, on its device. Read-only."""
    import torch

    widths = tuple(int(w) for w in widths)
    owners = tuple(range(len(widths))) if owners is None else tuple(int(o) for o in owners)
    key = ("segments", widths, owners, like.dtype, like.device)
    t = _CONSTANTS.get(key)
    if t is None:
        dev, long = like.device, torch.long
        with torch.inference_mode(False), torch.no_grad():
            seg = torch.repeat_interleave(
                torch.arange(len(widths), dtype=long, device=dev), torch.tensor(widths, dtype=long, device=dev)
            )
            ind = torch.zeros(len(seg), len(widths), dtype=like.dtype, device=dev)
            ind[torch.arange(len(seg), dtype=long, device=dev), seg] = 1
            cols = torch.tensor(owners, dtype=long, device=dev)[seg]
            t = _CONSTANTS[key] = (ind, cols)
    return t


def zero_rows(x, bad):
    """``x`` with the rows (dim 0) where ``bad`` is True set to 0, contiguous: the values and layout of
    ``x.masked_fill(bad[:, None, ...], 0)`` in one kernel (masked_fill copies, then fills). ``bad``: (B,),
    or already shaped (B, 1, …) to ``x``'s rank."""
    import torch

    if bad.dim() != x.dim():
        bad = bad.reshape((-1,) + (1,) * (x.dim() - 1))
    return torch.where(bad, constant(0.0, x), x).contiguous()


def nonfinite(x):
    """``~torch.isfinite(x)`` for a floating tensor: x − x is 0 exactly when x is finite (IEEE 754: ∞ − ∞
    and NaN − anything are NaN), two kernels where isfinite and the negation launch five."""
    return (x - x) != 0


def weighted_sum(s, G, s3=None):
    """Σ_b s_b G_b for ``s`` (B,) and ``G`` (B, *shape): the one batched product that
    ``torch.einsum("b,b...->...", s, G)`` reduces to (the same ``bmm`` on the same layouts, so the same
    numbers), without einsum's permutes and views. ``s3``: ``s.reshape(1, 1, B)`` when the caller has it."""
    import torch

    if G.dim() < 2:
        return torch.einsum("b,b...->...", s, G)
    B = G.shape[0]
    s3 = s.reshape(1, 1, B) if s3 is None else s3
    return torch.bmm(s3, G.reshape(1, B, -1)).reshape(G.shape[1:])


@contextmanager
def ieee_matmul():
    """Float32 matrix products in full float32 inside (the caller's setting restored after).

    A user may allow TensorFloat-32 (``torch.backends.cuda.matmul.allow_tf32``,
    ``torch.set_float32_matmul_precision("high")``, ``torch.backends.cuda.matmul.fp32_precision = "tf32"``)
    or bfloat16 (``"medium"``, oneDNN on CPU) in float32 products: their inputs are rounded to 10 or 8
    mantissa bits (relative error up to 2⁻¹¹ or 2⁻⁹). The per-example norms and the clipped sum are
    products too — Gram matrices, Σ_i s_i δ_iᵀ a_i, Σ_i s_i G_i — and the clipping bounds one example's
    contribution to the sum only if the norm it was scaled by is the norm of what the sum adds: with
    TF32 in the norms or the sum, an example could add about 10⁻³·C more than C. The forward and
    backward are left as the user set them (an example's activations and output gradients, however
    rounded, are its own); the norms and sums are computed inside this context."""
    import torch

    with _IEEE_LOCK:  # one process-wide setting: the first region in sets it, the last one out restores it
        if _IEEE_DEPTH[0] == 0:
            _IEEE_SAVED[:] = [_set_ieee(torch)]
        _IEEE_DEPTH[0] += 1
    try:
        yield
    finally:
        with _IEEE_LOCK:
            _IEEE_DEPTH[0] -= 1
            if _IEEE_DEPTH[0] == 0:
                _restore(torch, _IEEE_SAVED.pop())


_IEEE_LOCK = threading.Lock()
_IEEE_DEPTH = [0]
_IEEE_SAVED: list = []


def _set_ieee(torch):
    """Full-float32 products; returns what to restore."""
    cm = torch.backends.cuda.matmul
    mk = getattr(torch.backends.mkldnn, "matmul", None)
    if hasattr(cm, "fp32_precision"):  # the per-backend precision API (torch ≥ 2.9); never mixed with the legacy one
        saved = ("new", cm.fp32_precision, None if mk is None else mk.fp32_precision)
        cm.fp32_precision = "ieee"
        if mk is not None:
            mk.fp32_precision = "ieee"
        return saved
    saved = ("legacy", torch.get_float32_matmul_precision(), None)
    torch.set_float32_matmul_precision("highest")  # also turns allow_tf32 off
    return saved


def _restore(torch, saved) -> None:
    api, a, b = saved
    if api == "new":
        torch.backends.cuda.matmul.fp32_precision = a
        mk = getattr(torch.backends.mkldnn, "matmul", None)
        if mk is not None:
            mk.fp32_precision = b
    else:
        torch.set_float32_matmul_precision(a)
