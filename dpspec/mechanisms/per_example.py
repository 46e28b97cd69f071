"""Per-example gradients and clipping, shared by the private trainers (torch, imported lazily).

* :func:`per_example_grads` — per-example gradients by ``torch.func`` (``vmap`` over ``grad`` of the
  single-example loss, ``functional_call`` with the model's parameters and buffers): each example
  is evaluated as a batch of one, so its gradient depends on nothing but that example.
* :func:`clipped_grad_sum` — Σ_i clip(g_i) for flat ℓ2 clipping (g·min{1, C/‖g‖₂}) or per-layer
  clipping (each parameter tensor e clipped to C_e), with a non-finite per-example gradient
  replaced by zero (inside the clip ball, so the sensitivity argument is unchanged; the callers keep
  their public normaliser and never drop the step) and counted — never silently. This is the one
  non-finite policy of every trainer (docs/threat-model.md §1); the count is private.

Two implementations of the clipped sum, checked against each other in the tests:

* ``method="vmap"`` — materialises the (B, d) per-example gradients (the reference).
* ``method="ghost"`` — for ``nn.Sequential`` stacks of ``nn.Linear`` layers and element-wise
  activations, where the per-example weight gradient is the outer product δ_i a_iᵀ of the layer's
  output gradient and input: ‖∇W_i‖² = ‖a_i‖²‖δ_i‖² and ‖∇b_i‖² = ‖δ_i‖² give the norms without
  materialising per-example gradients, and the clipped sum is one matrix product (s ⊙ δ)ᵀ a.
  The per-example losses still come from ``vmap`` over the loss on batches of one, and the
  allow-list of layers guarantees that example i's output depends only on example i.
* ``method="loop"`` — one autograd pass per example (a batch of one each): for layers ``vmap`` has no
  batching rule for (e.g. ``nn.GRU``); slower, the same numbers.
* ``method="rules"`` — the per-layer rules of :mod:`dpspec.torch.clipping` (ghost / book-keeping
  clipping for ``nn.Linear`` anywhere, convolutions, embeddings, LayerNorm / GroupNorm and
  ``nn.MultiheadAttention``): no (B, d) gradients of the large layers; checked once per model against
  vmap (each example alone) before it is used.
* ``method="auto"`` — ghost when supported, else the rules when they cover every trainable parameter
  (and passed that check), else vmap, else (vmap raised) loop; ``ClippedSum.method`` says which and
  ``ClippedSum.fallback`` why the rules were not used.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

__all__ = [
    "trainable_parameters",
    "per_example_grads",
    "ghost_supported",
    "clipped_grad_sum",
    "ClippedSum",
    "combine_clipped",
    "blocked_clipped_sum",
    "whole_blocks",
    "whole_rows",
    "GHOST_ACTIVATIONS",
]

GHOST_ACTIVATIONS = (
    "ReLU",
    "LeakyReLU",
    "ELU",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "Softplus",
    "Identity",
    "Flatten",
    "Hardtanh",
    "ReLU6",
    "Mish",
    "SELU",
    "CELU",
)


@contextmanager
def _full_precision(x):
    """A region without autocast on ``x``'s device and with full-float32 matrix products (the norms' and
    the clipped sum's arithmetic: :func:`dpspec.torch.clipping.kernels.ieee_matmul`)."""
    import torch

    from dpspec.torch.clipping.kernels import ieee_matmul

    with torch.autocast(x.device.type if x.device.type in ("cuda", "cpu") else "cpu", enabled=False), ieee_matmul():
        yield


def _acc(dtype):
    from dpspec.mechanisms.noise_device import accumulation_dtype

    return accumulation_dtype(dtype)


def trainable_parameters(model) -> dict:
    """{name: detached tensor} of the trainable parameters; ValueError naming ``model`` if none."""
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    if not params:
        raise ValueError("model has no trainable parameters (every parameter has requires_grad=False)")
    return params


def _single_loss_out(model, loss_fn, buffers):
    """As :func:`_single_loss`, with the example's output as auxiliary value."""
    from torch.func import functional_call

    def loss_one(p, x, y):
        out = functional_call(model, (p, buffers), (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0)), out.squeeze(0).detach()

    return loss_one


def _single_loss(model, loss_fn, buffers):
    from torch.func import functional_call

    def loss_one(p, x, y):
        out = functional_call(model, (p, buffers), (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0))

    return loss_one


def per_example_grads(model, loss_fn: Callable, xb, yb, *, with_loss: bool = False):
    """{name: (B, *shape)} per-example gradients of ``loss_fn(model(x_i[None]), y_i[None])``
    via ``torch.func.vmap(grad(...))``; with ``with_loss`` also the (B,) per-example losses."""
    from torch.func import grad, grad_and_value, vmap

    params = trainable_parameters(model)
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    f = _single_loss(model, loss_fn, buffers)
    if with_loss:
        g, loss = vmap(grad_and_value(f), in_dims=(None, 0, 0), randomness="different")(params, xb, yb)
        return g, loss
    return vmap(grad(f), in_dims=(None, 0, 0), randomness="different")(params, xb, yb)


class ClippedSum:
    """Σ_i clip(g_i) per parameter, with bookkeeping.

    ``norms``: (B,) pre-clip per-example ℓ2 norms (flat) or (B, E) per block; ``nonfinite``: number of
    examples whose non-finite gradient was replaced by zero (their indices in ``nonfinite_index``; a
    function of the private data); ``losses``: (B,)
    per-example losses (nan where non-finite); ``method``: the implementation used.

    The counts are reporting, not part of the step: the ghost, vmap and rules paths leave them on the
    device (:meth:`deferred`) and read them only when ``nonfinite``, ``nonfinite_index`` or
    ``clipped_fraction`` is asked for, so a step makes no host round trip for them
    (``nonfinite_count`` is the count without a read).
    """

    def __init__(
        self,
        sums: dict,
        batch: int,
        nonfinite: int,
        nonfinite_index: list,
        norms,
        losses,
        method: str,
        clipped_fraction: float,
        outputs=None,
        fallback: str = "",
    ):
        self.sums, self.batch, self.norms, self.losses, self.method = sums, batch, norms, losses, method
        # (B, *out) the model's outputs, each computed on its example alone (ghost, vmap, loop); None if not kept
        self.outputs = outputs
        # why the per-layer rules (dpspec.torch.clipping) were not used, when method is vmap or loop under auto
        self.fallback = fallback
        # (nonfinite, nonfinite_index, clipped_fraction) once read; None while they are on the device
        self._counts: tuple[int, list, float] | None = (nonfinite, list(nonfinite_index), clipped_fraction)
        self._masks: tuple[Any, Any] | None = None  # (bad, over): (B,) device masks, read on demand
        self.graphed = False  # replayed from a CUDA graph (dpspec.torch.cuda_graph)

    @classmethod
    def deferred(cls, sums, batch: int, bad, over, norms, losses, method: str, outputs=None, fallback: str = ""):
        """A ClippedSum whose counts stay on the device: ``bad`` (B,) marks the zeroed non-finite examples,
        ``over`` (B,) the clipped ones."""
        cs = cls(sums, batch, 0, [], norms, losses, method, 0.0, outputs, fallback)
        cs._counts, cs._masks = None, (bad, over)
        return cs

    def _read(self) -> tuple:
        if self._counts is None:  # one host read (two when some example is non-finite)
            assert self._masks is not None  # `deferred` sets the masks whenever it clears the counts
            bad, over = self._masks
            nbad, nover = (int(v) for v in _stack_counts(bad, over).tolist())
            idx = _nonzero_list(bad) if nbad else []
            self._counts = (nbad, idx, nover / self.batch if self.batch else 0.0)
        return self._counts

    @property
    def nonfinite(self) -> int:
        return self._read()[0]

    @property
    def nonfinite_index(self) -> list:
        return self._read()[1]

    @property
    def clipped_fraction(self) -> float:
        return self._read()[2]

    @property
    def nonfinite_mask(self):
        """The (B,) bool mask of the zeroed non-finite examples while it is on the device (the counts not read),
        else None."""
        return None if self._counts is not None or self._masks is None else self._masks[0]

    @property
    def nonfinite_count(self):
        """The number of zeroed non-finite examples: a 0-dim tensor on the device while it is not read (no
        host round trip), else an int."""
        if self._counts is None:
            assert self._masks is not None  # `deferred` sets the masks whenever it clears the counts
            return self._masks[0].sum()
        return self._counts[0]

    def __repr__(self) -> str:
        counts = "(on the device)" if self._counts is None else f"nonfinite={self._counts[0]}"
        return f"ClippedSum(method={self.method!r}, batch={self.batch}, {counts})"


def _stack_counts(bad, over):
    import torch

    return torch.stack([bad.sum(), over.sum()])


def _nonzero_list(mask) -> list:
    import torch

    return torch.nonzero(mask).flatten().tolist()


def combine_clipped(parts: list, sums: dict | None = None) -> ClippedSum:
    """The ClippedSum of a batch from those of its consecutive chunks (virtual batches): the sums
    added in chunk order, the per-example records concatenated. Each example is clipped alone in every
    method, so chunking changes nothing but the order of the floating-point additions. Counts left on
    the device stay there (their masks are concatenated). ``sums``: the batch's sums, added by the caller
    (:func:`blocked_clipped_sum`); the parts' own are then not read."""
    import torch

    parts = [p for p in parts if p.batch] or parts[:1]
    if len(parts) == 1:
        if sums is not None:
            parts[0].sums = sums
        return parts[0]
    if sums is None:
        sums = {k: v.clone() for k, v in parts[0].sums.items()}
        for p in parts[1:]:
            for k, v in p.sums.items():
                sums[k] += v
    B = sum(p.batch for p in parts)
    methods = "+".join(dict.fromkeys(p.method for p in parts))
    outs = None if any(p.outputs is None for p in parts) else torch.cat([p.outputs for p in parts])
    norms, losses = torch.cat([p.norms for p in parts]), torch.cat([p.losses for p in parts])
    if all(p._counts is None for p in parts):
        bad = torch.cat([p._masks[0] for p in parts])
        over = torch.cat([p._masks[1] for p in parts])
        return ClippedSum.deferred(sums, B, bad, over, norms, losses, methods, outs, parts[0].fallback)
    off, idx = 0, []
    for p in parts:
        idx += [off + i for i in p.nonfinite_index]
        off += p.batch
    frac = sum(p.clipped_fraction * p.batch for p in parts) / B
    return ClippedSum(sums, B, len(idx), idx, norms, losses, methods, frac, outs, parts[0].fallback)


def whole_rows(value, name: str = "max_physical_batch_size") -> int:
    """``value`` as a whole number of rows ≥ 1 (any integer type; not a bool, a float or a string): ValueError
    naming ``name`` otherwise."""
    import operator

    try:
        rows = operator.index(value)
    except TypeError:
        rows = 0
    if isinstance(value, bool) or rows < 1:
        raise ValueError(f"{name} must be a whole number of rows ≥ 1, got {value!r}")
    return rows


def whole_blocks(block_size, m=None) -> int | None:
    """``block_size`` as a whole number of rows ≥ 1 of which ``m`` (the physical batch size, or None) is a multiple;
    ValueError otherwise."""
    if block_size is None:
        return None
    k = whole_rows(block_size, "block_size")
    if m is not None and (m := whole_rows(m)) % k:
        raise ValueError(
            f"max_physical_batch_size={m} is not a multiple of block_size={k}: the step is the blocks' sum added "
            f"in order, and a chunk must hold whole blocks (use {max(k, m - m % k)})"
        )
    return k


def blocked_clipped_sum(clipped_sum: Callable, x, y, block: int, start: dict | None = None) -> ClippedSum:
    """``clipped_sum(x, y)`` of a batch computed on its consecutive blocks of ``block`` rows, each alone, their sums
    added one after another, in block order, into a running total that continues ``start`` (the total of the
    logical batch's earlier chunks; copied, not changed) or begins with the first block's sums. Every
    operation on a block sees that block's rows only, and the additions come in the same order however the
    logical batch is cut into chunks of whole blocks: the same sums, bit for bit, for every physical batch size
    that is a multiple of ``block`` (``make_private(..., block_size=...)``), at the speed of batches of ``block``
    rows. The blocks' records (norms, losses, outputs, masks) are concatenated."""
    import torch

    def rows(t, i):
        return t[i : i + block] if torch.is_tensor(t) else t

    total = None if start is None else {k: v.clone() for k, v in start.items()}
    parts = []
    for i in range(0, int(x.shape[0]), block):
        cs = clipped_sum(rows(x, i), rows(y, i))
        if total is None:
            total = dict(cs.sums)  # (a step's own fresh tensors: added into in place from here on)
        else:
            for k, v in cs.sums.items():
                total[k] += v
        cs.sums = {}  # added: a parameter-sized copy per block let go now, not at the batch's end
        parts.append(cs)
    if not parts:  # an empty batch: its (zero) sums as they are
        return clipped_sum(x, y)
    return combine_clipped(parts, total)


def _ghost_layers(model):
    """[(name_prefix, linear)] if the model is a supported Sequential, else None."""
    import torch.nn as nn

    if not isinstance(model, nn.Sequential):
        return None
    leaves = []

    def walk(mod, prefix):
        for name, child in mod.named_children():
            full = f"{prefix}{name}"
            if isinstance(child, nn.Sequential):
                walk(child, full + ".")
            else:
                leaves.append((full, child))

    walk(model, "")
    layers = []
    for name, mod in leaves:
        if isinstance(mod, nn.Linear):
            layers.append((name, mod))
        elif type(mod).__name__ in GHOST_ACTIVATIONS and type(mod).__module__.startswith("torch.nn"):
            if any(p.requires_grad for p in mod.parameters(recurse=False)):
                return None
        else:
            return None
    if not layers:
        return None
    # every trainable parameter must belong to a Linear layer
    owned = {id(p) for _, m in layers for p in m.parameters(recurse=False)}
    if any(p.requires_grad and id(p) not in owned for p in model.parameters()):
        return None
    return leaves


_GHOST_LEAVES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ghost_layers_cached(model, params: dict):
    """:func:`_ghost_layers` of ``model``, whose trainable parameters are ``params`` (name → tensor), cached per
    model while its modules (each one's name, object and type, in order) and its trainable parameters (each
    one's name and object, in order) stay the same: a module replaced, added, removed or renamed, or a parameter
    replaced, moved to another module, frozen or unfrozen, is looked at again. The key's modules and parameters
    are held by weak references, checked alive at each look-up, so that their ids name them while it is cached:
    a strong one would keep the model (the first of its modules, and the cache's key) alive for good."""
    mods = list(model.named_modules())
    held = list(params.values())
    key = (tuple((n, id(m), type(m)) for n, m in mods), tuple((k, id(p)) for k, p in params.items()))
    hit = _GHOST_LEAVES.get(model)
    if hit is not None and hit[0] == key and all(r() is not None for r in hit[1]):
        return None if hit[2] is None else [(n, r()) for n, r in hit[2]]
    leaves = _ghost_layers(model)
    refs = [weakref.ref(m) for _, m in mods[1:]] + [weakref.ref(p) for p in held]  # (the model is the key)
    _GHOST_LEAVES[model] = (key, refs, None if leaves is None else [(n, weakref.ref(m)) for n, m in leaves])
    return leaves


def ghost_supported(model) -> bool:
    """True iff :func:`clipped_grad_sum` can use the ghost-norm path for ``model``."""
    return _ghost_layers(model) is not None


class _GhostUnsupported(Exception):
    pass


def _blocks(model):
    return [(k, v) for k, v in model.named_parameters() if v.requires_grad]


def _check_clips(model, clip, per_layer_clips, params=None):
    """(C, None) or (None, [C_e]); ``params``: the trainable parameters by name when the caller has them."""
    if (clip is None) == (per_layer_clips is None):
        raise ValueError("give exactly one of clip and per_layer_clips")
    if clip is not None:
        c = float(clip)
        if not (c > 0) or c != c or c == float("inf"):
            raise ValueError(f"clip must be a finite number > 0, got {clip!r}")
        return c, None
    blocks = _blocks(model) if params is None else params
    if len(per_layer_clips) != len(blocks):
        raise ValueError(f"per-layer clipping gives {len(per_layer_clips)} norms for {len(blocks)} parameter tensors")
    pcs = [float(c) for c in per_layer_clips]
    if any(not (c > 0) or c == float("inf") for c in pcs):
        raise ValueError("per_layer_clips must be finite numbers > 0")
    return None, pcs


def _vmap_sum(model, loss_fn, xb, yb, clip, pcs, loop: bool = False, pad=None) -> ClippedSum:
    import torch

    from dpspec.torch.clipping.kernels import clip_tensor, constant, nonfinite, weighted_sum

    if loop:
        g, loss, outputs = _per_example_loop(model, loss_fn, xb, yb)
    else:
        from torch.func import grad_and_value, vmap

        params = trainable_parameters(model)
        buffers = {k: v.detach() for k, v in model.named_buffers()}
        f = _single_loss_out(model, loss_fn, buffers)
        g, (loss, outputs) = vmap(grad_and_value(f, has_aux=True), in_dims=(None, 0, 0), randomness="different")(
            params, xb, yb
        )
    with _full_precision(xb):  # clipping and sums in the accumulation dtype, outside an autocast region
        names = list(g.keys())
        B = xb.shape[0]
        g = {k: v.to(_acc(v.dtype)) for k, v in g.items()}  # norms and sums in float32 or wider
        sq = torch.stack([g[k].reshape(B, -1).pow(2).sum(dim=1) for k in names], dim=1)  # (B, E)
        bad = nonfinite(sq).any(dim=1) | nonfinite(loss)
        if pad is not None:  # padding rows: left out like a non-finite example
            bad = bad | pad
        # zeroed on the device whether or not any is non-finite: deciding would be a host read per step
        for k in names:
            shape = (B,) + (1,) * (g[k].dim() - 1)
            g[k] = torch.where(bad.reshape(shape), constant(0.0, g[k]), g[k])
        zero = constant(0.0, sq)
        sq = torch.where(bad[:, None], zero, sq)
        sums = {}
        if pcs is None:
            norm = sq.sum(dim=1).sqrt()
            scale = (clip / (norm + 1e-12)).clamp(max=1.0)
            scale = torch.where(bad, zero, scale)
            for k in names:
                sums[k] = weighted_sum(scale, g[k])
            norms, over = norm, norm > clip
        else:
            norm = sq.sqrt()
            c = clip_tensor(pcs, norm)
            scale = (c[None, :] / (norm + 1e-12)).clamp(max=1.0)
            scale = torch.where(bad[:, None], zero, scale)
            for j, k in enumerate(names):
                sums[k] = weighted_sum(scale[:, j], g[k])
            norms, over = norm, (norm > c[None, :]).any(dim=1)
        loss = torch.where(bad, constant(float("nan"), loss), loss.detach())
        return ClippedSum.deferred(sums, B, bad, over, norms.detach(), loss, "loop" if loop else "vmap", outputs)


def _per_example_loop(model, loss_fn, xb, yb):
    """The (B, *shape) per-example gradients and (B,) losses of :func:`per_example_grads`, one
    autograd pass per example (each a batch of one)."""
    import torch

    params = {k: v.detach().requires_grad_(True) for k, v in trainable_parameters(model).items()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    f = _single_loss_out(model, loss_fn, buffers)
    rows, losses, outs = {k: [] for k in params}, [], []
    for i in range(int(xb.shape[0])):
        loss, out = f(params, xb[i], yb[i])
        outs.append(out)
        gs = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        for (k, v), g in zip(params.items(), gs):
            rows[k].append(torch.zeros_like(v) if g is None else g)
        losses.append(loss.detach())
    return {k: torch.stack(v) for k, v in rows.items()}, torch.stack(losses), torch.stack(outs)


def _reference_grads(model, loss_fn, xb, yb):
    """The per-example gradients the rules are checked against: :func:`per_example_grads` (vmap), or for a
    model vmap cannot run (``nn.GRU``; ``torch.utils.checkpoint``, whose saved-tensor hooks torch.func
    refuses) the same gradients one example at a time."""
    try:
        return per_example_grads(model, loss_fn, xb, yb)
    except RuntimeError:
        return _per_example_loop(model, loss_fn, xb, yb)[0]


def _ghost_sum(model, loss_fn, xb, yb, clip, pcs, leaves=None, names=None, pad=None) -> ClippedSum:
    """``leaves``: :func:`_ghost_layers` of the model; ``names``: its trainable parameters' names, in order
    (both computed here when not given).

    Memory: what must live from the backward pass to the sums is each trainable layer's input a and output
    gradient δ (the book-keeping of the clipped sum Σ_i s_i δ_i a_iᵀ, whose scales s need every layer's norms
    first). Nothing else is kept: a layer's output z is named by its gradient edge, not held (the graph
    keeps it only where an activation saves its input); each layer is cast to the accumulation dtype on its
    own, replacing its copy in the lists; and the masked copies of a and δ exist for one layer at a time,
    just before its matrix product, the originals released as they are made."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from dpspec.torch.clipping.engine import per_example_losses
    from dpspec.torch.clipping.kernels import clip_tensor, constant, nonfinite

    get_edge = getattr(torch.autograd.graph, "get_gradient_edge", None)  # torch >= 2.2
    if leaves is None:
        leaves = _ghost_layers(model)
    # per Linear layer with a trainable parameter: its input, detached; the gradient edge of its output z as the
    # layer's own operation made it (an in-place activation then rewrites z, whose gradient is no longer the
    # layer's output gradient), which keeps the graph's node, not z; and z's shape and dtype
    acts: list = []
    edges: list = []
    metas: list = []
    lin_names: list[tuple[str, nn.Linear]] = []
    a, x = xb, None
    for name, mod in leaves:
        if isinstance(mod, nn.Linear):
            if a.dim() != 2:
                raise _GhostUnsupported
            if not any(p.requires_grad for p in mod.parameters(recurse=False)):
                a = F.linear(a, mod.weight, mod.bias)  # a frozen layer: no sum of its own, its gradient passes
                continue
            x = a.detach()
            acts.append(x)
            a = F.linear(x if not lin_names else a, mod.weight, mod.bias)
            edges.append(a if get_edge is None else get_edge(a))
            metas.append((a.shape, a.dtype))
            lin_names.append((name, mod))
        else:
            a = mod(a)
    out = a
    del a, x
    losses = per_example_losses(loss_fn, out, yb)
    bad = nonfinite(losses) if pad is None else nonfinite(losses) | pad  # padding rows: no gradient, no part
    # the backward of Σ_i w_i ℓ_i, w_i = 1 (0 for a non-finite example or a padding row), seeded with w itself: the
    # values the backward of where(bad, 0, losses).sum() would feed the loss's backward, without the sum and the
    # mask's own backward
    seed = torch.where(bad, constant(0.0, losses), constant(1.0, losses))
    deltas: list = list(torch.autograd.grad(losses, edges, grad_outputs=seed, allow_unused=True))
    del edges, seed
    for j, (shape, dtype) in enumerate(metas):
        if deltas[j] is None:
            deltas[j] = torch.zeros(shape, dtype=dtype, device=out.device)
    B = xb.shape[0]
    with _full_precision(xb):  # clipping and sums in the accumulation dtype, outside an autocast region
        acc = _acc(out.dtype)  # norms and sums in float32 or wider
        # per-example squared norms per block, in named_parameters order (weight, bias per layer); each layer
        # cast on its own (its copy in the dtype it was computed in released here)
        cols = []
        for j, (_name, mod) in enumerate(lin_names):
            acts[j], deltas[j] = acts[j].to(acc), deltas[j].to(acc)
            dsq = deltas[j].pow(2).sum(dim=1)
            if mod.weight.requires_grad:
                cols.append(acts[j].pow(2).sum(dim=1) * dsq)
            if mod.bias is not None and mod.bias.requires_grad:
                cols.append(dsq)
        sq = torch.stack(cols, dim=1)
        bad = bad | nonfinite(sq).any(dim=1)
        # zeroed on the device whether or not any is non-finite: deciding would be a host read per step
        zero, bad2 = constant(0.0, sq), bad[:, None]
        sq = torch.where(bad2, zero, sq)
        sums = {}
        if pcs is None:
            norm = sq.sum(dim=1).sqrt()
            # (a non-finite example's norm is 0 here, its scale 1: its rows are zeroed below, so it adds 0)
            s_all = (clip / (norm + 1e-12)).clamp(max=1.0)[:, None]
            for j, (name, mod) in enumerate(lin_names):
                # a non-finite example's rows zeroed (not scaled: 0 · ∞ is NaN), then scaled in place
                ds = torch.where(bad2, zero, deltas[j])
                deltas[j] = None
                ds.mul_(s_all)
                if mod.weight.requires_grad:
                    x = torch.where(bad2, zero, acts[j])
                    acts[j] = None
                    sums[f"{name}.weight"] = ds.t() @ x
                    del x
                else:
                    acts[j] = None
                if mod.bias is not None and mod.bias.requires_grad:
                    sums[f"{name}.bias"] = ds.sum(dim=0)
                del ds
            norms, over = norm, norm > clip
        else:
            norm = sq.sqrt()
            c = clip_tensor(pcs, norm)
            # (a non-finite example's norms are 0 here, its scales 1: its rows are zeroed below, so it adds 0)
            scale = (c[None, :] / (norm + 1e-12)).clamp(max=1.0)
            col = 0
            for j, (name, mod) in enumerate(lin_names):
                d = torch.where(bad2, zero, deltas[j])
                deltas[j] = None
                if mod.weight.requires_grad:
                    x = torch.where(bad2, zero, acts[j])
                    acts[j] = None
                    sums[f"{name}.weight"] = (d * scale[:, col : col + 1]).t() @ x
                    del x
                    col += 1
                else:
                    acts[j] = None
                if mod.bias is not None and mod.bias.requires_grad:
                    sums[f"{name}.bias"] = (d * scale[:, col : col + 1]).sum(dim=0)
                    col += 1
                del d
            norms, over = norm, (norm > c[None, :]).any(dim=1)
        if names is None:
            names = [k for k, _ in _blocks(model)]
        sums = {k: sums[k] for k in names}
        losses = torch.where(bad, constant(float("nan"), losses), losses.detach())
        norms = norms.detach() if norms.requires_grad else norms  # (made from detached tensors: no view op)
        return ClippedSum.deferred(sums, B, bad, over, norms, losses, "ghost", out.detach())


def clipped_grad_sum(
    model,
    loss_fn: Callable,
    xb,
    yb,
    *,
    clip: float | None = None,
    per_layer_clips=None,
    method: str = "auto",
    pad=None,
) -> ClippedSum:
    """Σ_i clip(∇ℓ(x_i, y_i)) for each trainable parameter (see the module docstring).

    ``clip``: flat ℓ2 clip norm C > 0, or ``per_layer_clips``: one C_e > 0 per trainable tensor in
    ``model.named_parameters()`` order. An empty batch returns zeros. ``method``: auto | vmap | ghost.
    ``pad``: a (B,) bool tensor on the batch's device marking rows that are padding, not examples (a batch
    brought to a fixed size: dpspec.torch.cuda_graph): their loss is zeroed before the backward and their
    rows are left out of the norms and sums like a non-finite example's (their records read as non-finite:
    the caller drops them), so what they hold never reaches the sums.
    """
    import torch

    # the trainable parameters themselves (their names, shapes, dtype, device): the paths that read their
    # values (vmap, loop) detach them; one walk of the model per call
    params = dict(_blocks(model))
    if not params:
        trainable_parameters(model)  # its ValueError
    clip, pcs = _check_clips(model, clip, per_layer_clips, params)
    if method not in ("auto", "vmap", "ghost", "rules", "loop"):
        raise ValueError(f"method must be 'auto', 'vmap', 'ghost', 'rules' or 'loop', got {method!r}")
    B = int(xb.shape[0])
    if B == 0:
        z = {k: torch.zeros_like(v, dtype=_acc(v.dtype)) for k, v in params.items()}
        first = next(iter(params.values()))  # (the norms and losses in the accumulation dtype, as a batch's are)
        empty = {"device": first.device, "dtype": _acc(first.dtype)}
        return ClippedSum(z, 0, 0, [], torch.zeros(0, **empty), torch.zeros(0, **empty), "empty", 0.0)
    leaves = _ghost_layers_cached(model, params) if method in ("auto", "ghost") else None
    if method == "ghost" and leaves is None:
        raise ValueError("method='ghost' needs an nn.Sequential of nn.Linear layers and element-wise activations")
    if leaves is not None:
        try:
            return _ghost_sum(model, loss_fn, xb, yb, clip, pcs, leaves, list(params), pad=pad)
        except _GhostUnsupported:
            if method == "ghost":
                raise ValueError("method='ghost' needs 2-D inputs to every nn.Linear layer") from None
    if method == "loop":
        return _vmap_sum(model, loss_fn, xb, yb, clip, pcs, loop=True, pad=pad)
    if method == "vmap":
        return _vmap_sum(model, loss_fn, xb, yb, clip, pcs, pad=pad)
    why = ""
    if method in ("auto", "rules"):  # the per-layer rules (dpspec.torch.clipping): no (B, d) gradients
        from dpspec.torch.clipping import Unsupported
        from dpspec.torch.clipping import engine as rules

        try:
            ok, why = rules.verified(model, loss_fn, xb, yb, params, _reference_grads)
            if ok:
                return rules.clipped_sum(model, loss_fn, xb, yb, clip, pcs, params, ClippedSum, pad=pad)
        except Unsupported as e:
            why = str(e)
        if method == "rules":
            raise ValueError(f"method='rules' does not cover this model: {why}")
    try:
        cs = _vmap_sum(model, loss_fn, xb, yb, clip, pcs, pad=pad)
    except RuntimeError:  # a layer vmap cannot batch (nn.GRU): the same gradients, one example at a time
        cs = _vmap_sum(model, loss_fn, xb, yb, clip, pcs, loop=True, pad=pad)
    cs.fallback = why
    return cs
