"""Runs the per-layer rules: one batched forward with the rules' captures, one backward to the
layers' outputs during which each layer's parts and per-example norms are formed (and what the sum
does not need let go: see :class:`_Layer`), the clipped sum from the parts.

Soundness of the batched forward: example i's gradient is read off the batched forward, which is
example i's own only if no layer mixes the examples of a batch. BatchNorm is refused before
(DPS164); for the rest, the first time a model is seen its per-example gradient norms and gradient
sum from the rules are checked against ``torch.func.vmap`` on batches of one (each example alone)
on the first examples of the batch, with torch's dropout layers off; a model that disagrees — a layer
coupling examples, a layer fed (T, B, ·) — is never run by the rules again (vmap is used, and
``ClippedSum.method`` says so). ``nn.MultiheadAttention`` with ``batch_first=False`` is refused
outright (the layers around it see the batch in dim 1).

The plan and the check are cached per model, keyed by its modules and its trainable parameters; a
model whose layers' settings are changed in place afterwards (``batch_first``, a padding mode) is
re-planned and re-checked after :func:`forget`.
"""

from __future__ import annotations

import math
import weakref

from . import Direct, Outer, Unsupported, rule_for, total
from .kernels import clip_tensor, constant, ieee_matmul, nonfinite, positions, segments, weighted_sum, zero_rows

__all__ = ["plan", "clipped_sum", "verified", "supported", "undecided", "forget"]

_VERDICTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
PROBE_EXAMPLES = 4
FLOAT32_RTOL = 1e-3  # the check's tolerance in float32 (rounding ~1e-6, a coupled batch O(1))
FLOAT64_RTOL = 1e-7


def plan(model):
    """[(name, module, rule)] covering every trainable parameter, or :class:`Unsupported` (cached per
    model while its modules and its trainable parameters stay the same)."""
    # the modules and each one's parameters (and whether they are trainable), in one walk of the model
    sig = tuple(
        (id(m), tuple((id(p), p.requires_grad) for p in m._parameters.values() if p is not None))
        for m in model.modules()
    )
    hit = _PLANS.get(model)
    if hit is not None and hit[0] == sig:
        if isinstance(hit[1], Unsupported):
            raise hit[1]
        return hit[1]
    try:
        entries = _plan(model)
    except Unsupported as e:
        _PLANS[model] = (sig, e)
        raise
    _PLANS[model] = (sig, entries)
    return entries


def _plan(model):
    import torch.nn as nn

    entries, owner, skip = [], {}, []
    for name, m in model.named_modules():
        if any(name.startswith(s + ".") for s in skip):
            continue
        if isinstance(m, nn.MultiheadAttention) and not m.batch_first:
            raise Unsupported(f"{name or 'model'}: nn.MultiheadAttention with batch_first=False")
        r = rule_for(m)
        if r is None:
            continue
        ps = r.params(m)
        if any("." in k for k in ps):
            skip.append(name)
        if not any(p.requires_grad for p in ps.values()):
            continue
        why = r.check(m)
        if why is not None:
            raise Unsupported(f"{name or 'model'} ({type(m).__name__}): {why}")
        for k, p in ps.items():
            if p.requires_grad:
                if id(p) in owner:
                    raise Unsupported(f"parameter shared by two layers ({owner[id(p)]})")
                owner[id(p)] = f"{name}.{k}" if name else k
        entries.append((name, m, r))
    for k, p in model.named_parameters():
        if p.requires_grad and id(p) not in owner:
            raise Unsupported(f"parameter `{k}` belongs to a layer without a rule")
    if not entries:
        raise Unsupported("no trainable layer")
    return entries


def supported(model) -> str | None:
    """None if every trainable parameter has a rule, else why not."""
    try:
        plan(model)
    except Unsupported as e:
        return str(e)
    return None


def _gram(X, grams):
    """X Xᵀ per example (B, T, T); ``grams`` caches it per tensor view within one batch (the q, k and v
    projections of self-attention share their input)."""
    import torch

    if grams is None:
        return torch.bmm(X, X.transpose(1, 2))
    key = (X.data_ptr(), X.dtype, tuple(X.shape), X.stride())
    hit = grams.get(key)
    if hit is None:  # X is kept with its Gram matrix: its memory is not reused by another tensor meanwhile
        hit = grams[key] = (X, torch.bmm(X, X.transpose(1, 2)))
    return hit[1]


def _part_sq(p, B, grams=None):
    if isinstance(p, Outer):
        if p.G is not None:  # the rule formed the per-example gradients
            return p.G.pow(2).sum(dim=(1, 2))
        A, D = p.A, p.D
        T, di, do = A.shape[1], A.shape[2], D.shape[2]
        if T == 1:
            return A.pow(2).sum(dim=(1, 2)) * D.pow(2).sum(dim=(1, 2))
        if T * T <= di * do:  # ghost norm: (T × T) Gram matrices
            return (_gram(A, grams) * _gram(D, grams)).sum(dim=(1, 2))
        import torch

        p.G = torch.bmm(D.transpose(1, 2), A)  # the (B, d_out, d_in) gradients: kept for the sum
        return p.G.pow(2).sum(dim=(1, 2))
    if isinstance(p, Direct):
        return (p.G if p.G.dim() == 2 else p.G.reshape(B, -1)).pow(2).sum(dim=1)
    same = (p.idx.unsqueeze(2) == p.idx.unsqueeze(1)).to(p.D.dtype)
    return (_gram(p.D, None) * same).sum(dim=(1, 2))


class _Shared:
    """What the parts of one batch share, made once: the non-finite examples' mask in each rank, each
    tensor with those rows zeroed (the q, k and v projections of self-attention share their input), and
    the views of the scales (one dispatched operation each, instead of one per part)."""

    def __init__(self, bad):
        self.bad = bad
        self._bads: dict = {}
        self._masked: dict = {}
        self._views: dict = {}

    def mask(self, x):
        """``x`` with the rows of the non-finite examples zeroed (their scale is 0, but 0 · inf is NaN)."""
        if self.bad is None:
            return x
        key = (x.data_ptr(), x.dtype, tuple(x.shape), x.stride())
        hit = self._masked.get(key)
        if hit is None:  # x is kept with its masked copy: its memory is not reused meanwhile
            b = self._bads.get(x.dim())
            if b is None:
                b = self._bads[x.dim()] = self.bad.reshape((-1,) + (1,) * (x.dim() - 1))
            hit = self._masked[key] = (x, zero_rows(x, b))
        return hit[1]

    def release(self) -> None:
        """Drop the masked copies (those of one parameter's parts: the next parameter's are other tensors)."""
        self._masked.clear()

    def view(self, s, shape):
        """``s.reshape(shape)`` (``s`` is kept: its id names it)."""
        key = (id(s), shape)
        hit = self._views.get(key)
        if hit is None:
            hit = self._views[key] = (s, s.reshape(shape))
        return hit[1]


def _part_sum(p, s, bad, shared=None):
    """Σ_i s_i ∇_i of one part; ``bad``: the non-finite examples' mask, None when there are none;
    ``shared``: the batch's :class:`_Shared` (made here when not given)."""
    import torch

    sh = _Shared(bad) if shared is None else shared
    if isinstance(p, Outer):
        if p.G is not None:
            return weighted_sum(s, sh.mask(p.G), sh.view(s, (1, 1, -1)))
        D = sh.mask(p.D) * sh.view(s, (-1, 1, 1))
        return D.reshape(-1, D.shape[-1]).t() @ sh.mask(p.A).reshape(-1, p.A.shape[-1])
    if isinstance(p, Direct):
        return weighted_sum(s, sh.mask(p.G), sh.view(s, (1, 1, -1)))
    D = sh.mask(p.D) * sh.view(s, (-1, 1, 1))
    out = torch.zeros(p.rows, D.shape[-1], dtype=D.dtype, device=D.device)
    return out.index_add_(0, p.idx.reshape(-1), D.reshape(-1, D.shape[-1]))


def _capture(model, entries, xb, acc, devtype):
    """The batched forward with every rule's capture: (output, [:class:`_Layer`], gradient edges of the
    layers' outputs that require a gradient)."""
    import torch

    edges: list = []
    B = int(xb.shape[0])
    layers = {id(m): _Layer(n, m, r, acc, B, devtype, edges) for n, m, r in entries}

    def record(m, inputs, out):
        r = rule_for(m)
        spread = r.per_example(m, inputs, out, B)  # a lookup shared by the batch, made one row per example
        if spread is not None:
            inputs, out = spread
        layers[id(m)].record(inputs, r.outputs(out))
        return None if spread is None else out  # (a forward hook's value replaces the layer's output)

    undo = [r.install(m, record) for _, m, r in entries]
    try:
        with torch.enable_grad():
            out = model(xb)
    except BaseException:
        edges.clear()  # (see _grads: the layers' hooks and the edges' nodes would form a reference cycle)
        raise
    finally:
        for u in undo:
            u()
    return out, list(layers.values()), edges


class _Layer:
    """One trainable layer's calls in a batch, turned into its parts as soon as the backward has given the
    gradients of all its outputs (a tensor hook on each output). The layer's inputs and output gradients
    are then let go — only what the clipped sum needs stays (:func:`_compact`) — so the output gradients of
    the whole model are never alive together: the backward frees each one once the layers below have used
    it, as in a non-private step."""

    __slots__ = (
        *("name", "m", "r", "acc", "B", "devtype", "edges"),
        *("calls", "deltas", "metas", "waiting", "parts", "sq", "error"),
    )

    def __init__(self, name, m, r, acc, B, devtype, edges):
        self.name, self.m, self.r = name, m, r
        self.acc, self.B, self.devtype, self.edges = acc, B, devtype, edges
        self.calls: list = []  # per call: its inputs (detached)
        self.deltas: list = []  # per call: [output gradient or None, …]
        self.metas: list = []  # per call: [(shape, dtype, device), …] of its outputs (not the outputs: kept alive)
        self.waiting = 0
        self.parts: dict | None = None
        self.sq: dict | None = None
        self.error: BaseException | None = None

    def record(self, inputs, outs) -> None:
        import torch
        from torch.autograd.graph import get_gradient_edge

        for z in outs:  # the parts read example i off row i: a layer fed the examples' rows flattened (B·T, d)
            if z.dim() == 0 or z.shape[0] != self.B:  # would give B·T "examples" (a crash in the sums): vmap
                raise Unsupported(
                    f"{self.name or 'model'}: an output of shape {tuple(z.shape)} has no leading batch dimension "
                    f"of {self.B}"
                )
        j = len(self.calls)
        self.calls.append(tuple(x.detach() if torch.is_tensor(x) else x for x in inputs))
        self.deltas.append([None] * len(outs))
        self.metas.append([(z.shape, z.dtype, z.device) for z in outs])
        for i, z in enumerate(outs):
            if z.requires_grad:
                self.waiting += 1
                z.register_hook(self._hook(j, i))
                self.edges.append(get_gradient_edge(z))

    def _hook(self, j, i):
        def hook(g):
            self.deltas[j][i] = g  # no graph is made in this backward: nothing to detach
            self.waiting -= 1
            if self.waiting == 0:
                self.finish()

        return hook

    def finish(self) -> None:
        """The layer's parts and per-example squared norms (once; an output that got no gradient counts as
        zeros). An error is kept, and raised by :func:`_grads` after the backward (inside a backward hook the
        autograd engine would wrap it)."""
        if self.parts is not None or self.error is not None:
            return
        try:
            self._finish()
        except Exception as e:
            self.error = e
        finally:
            self.calls, self.deltas = [], []

    def _finish(self) -> None:
        import torch

        acc = self.acc

        def cast(x):
            return x.to(acc) if torch.is_tensor(x) and x.is_floating_point() else x

        # the rules' arithmetic in the accumulation dtype, its products in full float32 (ieee_matmul)
        with torch.autocast(self.devtype, enabled=False), ieee_matmul():
            deltas = [
                tuple(
                    cast(d if d is not None else torch.zeros(shape, dtype=dtype, device=dev))
                    for d, (shape, dtype, dev) in zip(ds, ms)
                )
                for ds, ms in zip(self.deltas, self.metas)
            ]
            calls = [(tuple(cast(x) for x in inp), None) for inp in self.calls]
            self.calls, self.deltas = [], []
            parts = self.r.parts(self.m, calls, deltas)
            del calls, deltas
            grams: dict = {}  # Gram matrices shared by this layer's parts (q, k and v share their input)
            # a parameter whose parts are all formed directly (biases, norm weights) is left to _direct: all of
            # them are squared and summed in a few batched operations there, not a few each
            self.sq = {
                k: total(_part_sq(p, self.B, grams) for p in ps)
                for k, ps in parts.items()
                if not all(isinstance(p, Direct) for p in ps)
            }
            del grams
            for ps in parts.values():
                for p in ps:
                    _compact(p)
            self.parts = parts


def _compact(p) -> None:
    """Let go of what the clipped sum does not need: an outer-product part whose per-example gradients were
    formed keeps those only (its activations and output gradients are larger)."""
    if isinstance(p, Outer) and p.G is not None:
        p.A = p.D = None


def per_example_losses(loss_fn, out, yb):
    """(B,) ``loss_fn`` on each (output, target) pair as a batch of one: ``vmap``, or for the default
    criterion ``F.cross_entropy`` its ``reduction="none"`` values (the same numbers, one call)."""
    import torch.nn.functional as F
    from torch.func import vmap

    if loss_fn is F.cross_entropy and out.dim() == 2 and yb.dim() == 1 and not yb.is_floating_point():
        return F.cross_entropy(out, yb, reduction="none")
    return vmap(lambda o, t: loss_fn(o.unsqueeze(0), t.unsqueeze(0)), randomness="different")(out, yb)


def _grads(model, loss_fn, xb, yb, names, pad=None):
    """(out, losses, bad, {name: [parts]}, {name: (B,) squared norms}) for the batch: one forward, one
    backward to the trainable layers' outputs, each layer's parts and norms made during that backward
    (the parameters formed directly have no norm yet: :func:`_direct`)."""
    import torch

    from dpspec.mechanisms.noise_device import accumulation_dtype

    entries = plan(model)
    p0 = next(p for p in model.parameters() if p.requires_grad)
    out, layers, edges = _capture(model, entries, xb, accumulation_dtype(p0.dtype), p0.device.type)
    try:
        for ly in layers:
            if not ly.calls:
                raise Unsupported(f"{ly.name}: a trainable layer the forward did not call")
        losses = per_example_losses(loss_fn, out, yb)
        bad = nonfinite(losses) if pad is None else nonfinite(losses) | pad  # padding rows: no gradient
        if not edges:
            raise Unsupported("no trainable layer was called")
        if losses.requires_grad:
            # the backward of Σ_i w_i ℓ_i, w_i = 1 (0 for a non-finite example or a padding row), seeded with w
            # itself (what the backward of where(bad, 0, losses).sum() would feed the loss's backward); to the
            # layers' outputs only (no parameter gradient is formed); gradient edges, not the outputs themselves:
            # holding the outputs would keep them alive through the backward
            seed = torch.where(bad, constant(0.0, losses), constant(1.0, losses))
            torch.autograd.backward(losses, grad_tensors=seed, inputs=edges)
            del seed
    finally:
        # every layer holds this list, whose edges hold the graph's nodes, which hold the layers' hooks: a
        # reference cycle that would keep the nodes the backward did not run (and what they saved: the lowest
        # trainable layers' inputs) until Python's cyclic collector runs
        edges.clear()
    parts, sq = {}, {}
    for ly in layers:
        ly.finish()  # a layer whose outputs got no gradient: zeros
        if ly.error is not None:
            raise ly.error
        for k, ps in ly.parts.items():
            key = f"{ly.name}.{k}" if ly.name else k
            parts[key] = ps
            if k in ly.sq:
                sq[key] = ly.sq[k]
        ly.parts = ly.sq = None
    missing = [k for k in names if k not in parts]
    if missing:
        raise Unsupported(f"no rule gave the gradient of {missing}")
    return out, losses, bad, parts, sq


def clipped_sum(model, loss_fn, xb, yb, clip, pcs, params, result, pad=None):
    """The :class:`~dpspec.mechanisms.per_example.ClippedSum` of the batch by the rules (see
    ``clipped_grad_sum`` for ``clip`` / ``pcs``; ``result`` is that class); :class:`Unsupported` if a layer
    is outside them."""
    import torch

    names = list(params)
    B = int(xb.shape[0])
    out, losses, bad, parts, sqs = _grads(model, loss_fn, xb, yb, names, pad)
    # norms and sums in the accumulation dtype, products in full float32 (ieee_matmul)
    with torch.autocast(out.device.type, enabled=False), ieee_matmul():
        return _clip_and_sum(out, losses, bad, parts, sqs, names, params, B, clip, pcs, result)


def _direct(parts, sqs, names, B):
    """The parameters whose parts are all formed directly (every bias, the norms' weights): (their
    (B, Σd) per-example gradients side by side, (B, K) their per-example squared norms — one product with
    a 0/1 segment matrix —, their names, their widths), or None if there are fewer than two (whose norm is
    then added to ``sqs``). One batched operation per step where each parameter took a few (a GPU step is
    bound by launching them)."""
    import torch

    keys = [k for k in names if k not in sqs]
    if len(keys) < 2:  # nothing to batch: the parameter's own norm, its sum by _part_sum
        for k in keys:
            sqs[k] = total(_part_sq(p, B) for p in parts[k])
        return None
    blocks = [p.G if p.G.dim() == 2 else p.G.reshape(B, -1) for k in keys for p in parts[k]]  # (no view op per part)
    G = blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=1)
    widths = [sum(math.prod(p.G.shape[1:]) for p in parts[k]) for k in keys]  # (no per-part view op)
    for k in keys:
        del parts[k]
    ind, _ = segments(widths, G)
    return G, (G * G) @ ind, keys, widths


def _stack_norms(sqs, direct, names):
    """(B, E) squared norms in the parameters' order: the others' stacked, the directly formed ones'
    beside them, the columns put in order by one gather (no per-column views)."""
    import torch

    rest = [k for k in names if k in sqs]
    if direct is None:
        return torch.stack([sqs.pop(k) for k in rest], dim=1)
    _, dsq, keys, _ = direct
    sq = dsq if not rest else torch.cat([torch.stack([sqs.pop(k) for k in rest], dim=1), dsq], dim=1)
    order = rest + keys
    if order == list(names):
        return sq
    return sq.index_select(1, positions([order.index(k) for k in names], sq))


def _clip_and_sum(out, losses, bad, parts, sqs, names, params, B, clip, pcs, result):
    import torch

    direct = _direct(parts, sqs, names, B)
    sq = _stack_norms(sqs, direct, names)  # (B, E)
    bad = bad | nonfinite(sq).any(dim=1)
    zero = constant(0.0, sq)
    sq = torch.where(bad[:, None], zero, sq)
    if pcs is None:
        norm = sq.sum(dim=1).sqrt()
        # (a non-finite example's norm is 0 here, its scale 1: _Shared.mask zeroes its rows in every part, so it
        # adds 0)
        s = (clip / (norm + 1e-12)).clamp(max=1.0)
        scales = {k: s for k in names}
        over = norm > clip
    else:
        norm = sq.sqrt()
        c = clip_tensor(pcs, norm)
        sc = (c[None, :] / (norm + 1e-12)).clamp(max=1.0)  # (a non-finite example's rows: see above)
        scales = {k: sc[:, j] for j, k in enumerate(names)}
        over = (norm > c[None, :]).any(dim=1)
    sums = {}
    shared = _Shared(bad)
    if direct is not None:  # Σ_i s_i G_i of every directly formed parameter, in one product
        G, _, keys, widths = direct
        Gm = shared.mask(G)
        if pcs is None:
            row = (shared.view(s, (1, -1)) @ Gm).reshape(-1)
        else:  # each column scaled by its parameter's scale
            _, cols = segments(widths, G, [names.index(k) for k in keys])
            row = (sc.index_select(1, cols) * Gm).sum(dim=0)
        for k, v in zip(keys, row.split(widths)):
            sums[k] = v if v.shape == params[k].shape else v.reshape(params[k].shape)
        shared.release()
        del G, Gm, direct
    for k in names:
        if k in sums:
            continue
        # the non-finite rows are zeroed on the device whether or not there are any (no host read per step;
        # the counts are read only when reported: ClippedSum.deferred); each parameter's parts are let go
        # once its sum is formed, and so are their masked copies
        ss = [_part_sum(p, scales[k], bad, shared) for p in parts.pop(k)]
        shared.release()
        v = ss[0] if len(ss) == 1 else torch.cat([x.reshape(-1) for x in ss])
        sums[k] = v if v.shape == params[k].shape else v.reshape(params[k].shape)
    del shared
    sums = {k: sums[k] for k in names}  # in the parameters' order (the noise is drawn in it)
    losses = torch.where(bad, constant(float("nan"), losses), losses.detach())
    norm = norm.detach() if norm.requires_grad else norm  # (made from the backward's tensors: no view op)
    return result.deferred(sums, B, bad, over, norm, losses, "rules", out.detach())


def _reference(model, loss_fn, xb, yb, names, per_example_grads):
    """(B, E) squared per-example norms and unclipped sums by vmap on batches of one."""
    import torch

    g = per_example_grads(model, loss_fn, xb, yb)
    B = xb.shape[0]
    sq = torch.stack([g[k].reshape(B, -1).pow(2).sum(dim=1) for k in names], dim=1)
    return sq, {k: g[k].sum(dim=0) for k in names}


def verified(model, loss_fn, xb, yb, params, per_example_grads) -> tuple[bool, str]:
    """Whether the rules agree with vmap (each example alone) on this model: checked once per model (on
    the distinct examples among the first of ``xb``, dropout off), then cached; a batch with fewer than two
    distinct examples there decides nothing (False, not cached: vmap for that batch). ``per_example_grads``:
    the vmap reference (``dpspec.mechanisms.per_example.per_example_grads``). Raises :class:`Unsupported`
    if a layer has no rule.

    The check is structural (a layer that mixes examples gives O(1) differences). It runs in the
    model's precision (float32 for a 16-bit model); where float32 disagrees beyond its tolerance, it is
    repeated once on a float64 copy, whose rounding (~1e-15) cannot hide a structural difference: deep
    float32 models on GPU kernels (attention, TF32 convolutions) differ between a batch and each example
    alone by more than float32's tolerance without any coupling."""
    import torch

    sig = tuple((k, tuple(p.shape)) for k, p in params.items())
    hit = _VERDICTS.get(model)
    if hit is not None and hit[0] == sig:
        return hit[1], hit[2]
    plan(model)
    xs, ys = _distinct(xb[:PROBE_EXAMPLES], yb[:PROBE_EXAMPLES])
    if int(xs.shape[0]) < 2:  # one example (or copies of one) agrees with itself alone whatever the layers do
        return False, "fewer than two distinct examples to probe (not cached: checked again on the next batch)"
    dtype = next(iter(params.values())).dtype
    probe = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    ok, why, finite = _compare(model, loss_fn, xs, ys, params, per_example_grads, probe)
    if not finite:
        return False, why
    if not ok and probe != torch.float64:
        ok64, why64, finite64 = _compare(model, loss_fn, xs, ys, params, per_example_grads, torch.float64)
        if finite64:
            ok, why = ok64, why64 if not ok64 else ""
    _VERDICTS[model] = (sig, ok, why)
    return ok, why


def _distinct(xs, ys):
    """The rows of the probe that are not copies of an earlier row (input and target): a batch of copies of
    one example — a batch of one, or one padded to a fixed size by repeating its first row
    (dpspec.torch.cuda_graph) — goes through a layer that mixes the examples of a batch as that example
    alone would, so it cannot tell such a layer apart (one host read)."""
    import torch

    k = int(xs.shape[0])
    if k < 2:
        return xs, ys
    x, y = xs.reshape(k, -1), ys.reshape(k, -1)
    same = ((x[:, None] == x[None]).all(dim=2) & (y[:, None] == y[None]).all(dim=2)).tolist()
    keep = [i for i in range(k) if not any(same[i][:i])]
    if len(keep) == k:
        return xs, ys
    idx = torch.tensor(keep, device=xs.device)
    return xs.index_select(0, idx), ys.index_select(0, idx)


def _compare(model, loss_fn, xs, ys, params, per_example_grads, probe) -> tuple[bool, str, bool]:
    """(agree, why not, finite): the rules against vmap on ``xs`` with the model in ``probe`` precision
    (a copy where that is not the parameters' dtype)."""
    import torch

    names = list(params)
    if next(iter(params.values())).dtype != probe:
        # a copy in the probe's precision (16-bit rounding would hide a structural difference)
        import copy

        trainable = set(params)
        model = copy.deepcopy(model).to(probe)
        params = {n: p for n, p in model.named_parameters() if n in trainable and p.requires_grad}
        xs = xs.to(probe) if xs.is_floating_point() else xs
        ys = ys.to(probe) if ys.is_floating_point() else ys
    acc = probe
    # in train mode (eval mode may take other paths: nn.TransformerEncoderLayer's fused kernel), with the
    # dropout of torch's own layers off (a random mask differs between the batch and each example alone)
    drops: list = [(m, m.p) for m in model.modules() if isinstance(m, torch.nn.modules.dropout._DropoutNd)]
    drops += [(m, m.dropout) for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)]
    for m, _ in drops:
        setattr(m, "p" if hasattr(m, "p") else "dropout", 0.0)
    k = int(xs.shape[0])
    dev = next(iter(params.values())).device
    try:  # in full precision: an autocast region around the step would hide a structural difference
        with torch.autocast(dev.type, enabled=False), ieee_matmul():  # and in full float32 products
            _, losses, bad, parts, sqs = _grads(model, loss_fn, xs, ys, names)
            # each parameter's norm from its parts one by one (the step batches the directly formed ones)
            sq = torch.stack([sqs[n] if n in sqs else total(_part_sq(p, k) for p in parts[n]) for n in names], dim=1)
            ones = torch.ones(k, dtype=acc, device=sq.device)
            sums = {}
            for n in names:
                ss = [_part_sum(p, ones, bad if bool(bad.any()) else None) for p in parts[n]]
                v = ss[0] if len(ss) == 1 else torch.cat([x.reshape(-1) for x in ss])
                sums[n] = v.reshape(params[n].shape)
            ref_sq, ref_sum = _reference(model, loss_fn, xs, ys, names, per_example_grads)
    finally:
        for m, p in drops:
            setattr(m, "p" if hasattr(m, "p") else "dropout", p)
    # a structural error gives O(1) differences; rounding ~1e-15 (float64), ~1e-6 (float32)
    rtol = FLOAT64_RTOL if acc == torch.float64 else FLOAT32_RTOL
    fin = torch.isfinite(ref_sq).all() and torch.isfinite(sq).all()
    if not bool(fin):
        return False, "non-finite values in the probe (not cached: checked again on the next batch)", False
    if not torch.allclose(sq, ref_sq, rtol=rtol, atol=rtol * float(ref_sq.abs().max()) + 1e-30):
        return False, "per-example norms differ from each example alone (a layer couples the batch?)", True
    # the sums on the norms' scale: relative to the largest of all the parameters' sums, as the norms are to
    # the largest squared norm (a parameter whose gradient is zero up to rounding — a bias before an
    # InstanceNorm, which removes it — has sums of pure rounding that agree with nothing on their own scale)
    scale = max(float(ref_sum[n].abs().max()) for n in names)
    for n in names:
        if not torch.allclose(sums[n], ref_sum[n], rtol=rtol, atol=rtol * scale + 1e-30):
            return False, f"gradient sum of `{n}` differs from each example alone", True
    return True, "", True


def undecided(model) -> bool:
    """Whether the rules' check against vmap is still to be made for ``model``: no verdict is cached and its plan is
    not refused (the last batches had fewer than two distinct examples to probe, or a non-finite probe; the next
    batch checks again)."""
    hit = _PLANS.get(model)
    if hit is not None and isinstance(hit[1], Unsupported):
        return False
    return model not in _VERDICTS


def forget(model) -> None:
    """Drop the cached plan and check of ``model`` (after changing its layers' settings in place)."""
    _PLANS.pop(model, None)
    _VERDICTS.pop(model, None)
