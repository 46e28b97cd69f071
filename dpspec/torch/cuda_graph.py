"""The private step's per-example computation replayed as a CUDA graph (``make_private(cuda_graph=True)``).

A small model's private step on a GPU is bound by the host, not the device: the clipped sum launches a
few hundred kernels (the forward, the backward to the layers' outputs, each layer's per-example norms,
the clip and the sums), and launching one costs the host about as long as a small kernel runs. A CUDA
graph records those launches once and replays them in one (``torch.cuda.CUDAGraph``).

What is replayed is :meth:`DpSgdBackend.clipped_sum` — the batch's clipped per-example gradient sum, a
function of the batch and the parameters only. The clip is inside the graph, so every replay bounds each
example's contribution by C exactly as the eager step does; the noise, the ledger's charge, the loss
check and the optimizer run outside it, as before. A replay reads its batch from buffers the batch is
copied into, and writes fresh tensors (copies of the graph's outputs), so a step never sees another
step's sums or outputs.

When: on CUDA, for a tensor batch of a shape seen :data:`WARMUP` times eagerly (the rules' one-time check
against vmap, the cached constants and cuDNN's choice of kernels happen then), at most :data:`MAX_GRAPHS`
graphs per model. A graph is keyed by the batch's and target's shapes, dtypes and devices, the parameters'
storage, shapes, dtypes and ``requires_grad`` (a parameter replaced by another tensor, or frozen, is a new
key), every module's train/eval flag, the autocast state and the TF32 flags. Not replayed (the eager step
runs, and :attr:`GraphedClippedSum.status` says why): another device; a batch that is not one tensor with
a tensor target; a capture that fails (a host read in the forward, say); a new shape once MAX_GRAPHS are
taken (Poisson sampling's batch sizes vary, and each new size would be a capture: use fixed-size batches).

What you accept by opting in (docs/training.md): the forward does the same operations for every batch
of a shape — no Python-side randomness or data-dependent Python control flow (dropout is fine: it draws
from the CUDA generator, which graphs advance). Each graph keeps its step's memory reserved for the
graph's life.
"""

from __future__ import annotations

from typing import Any

WARMUP = 2  # eager steps of a shape before its capture
MAX_GRAPHS = 4  # graphs per model (each keeps its step's memory reserved)
_SEEN_LIMIT = 64  # shapes remembered while warming up (Poisson sizes would grow the count without end)


def _autocast_state(torch) -> tuple:
    try:  # torch ≥ 2.4
        return (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))
    except TypeError:  # pragma: no cover - older torch
        return (torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype())


class _Captured:
    """One captured graph: its input buffers and the ClippedSum whose tensors the graph writes."""

    def __init__(self, graph, x, y, cs):
        self.graph, self.x, self.y, self.cs = graph, x, y, cs

    def replay(self, x, y, result):
        import torch

        self.x.copy_(x)
        self.y.copy_(y)
        self.graph.replay()
        cs = self.cs
        names = list(cs.sums)
        bad, over = cs._masks
        floats = [cs.sums[k] for k in names] + [cs.norms, cs.losses]
        if cs.outputs is not None:
            floats.append(cs.outputs)
        # fresh tensors (one fused copy): the next replay overwrites the graph's own, and the step adds its
        # noise into the sums in place
        fresh = torch._foreach_mul(floats, 1.0)
        sums = dict(zip(names, fresh[: len(names)]))
        norms, losses = fresh[len(names)], fresh[len(names) + 1]
        outputs = fresh[len(names) + 2] if cs.outputs is not None else None
        out = result.deferred(sums, cs.batch, bad.clone(), over.clone(), norms, losses, cs.method, outputs, cs.fallback)
        out.graphed = True
        return out


class GraphedClippedSum:
    """``fn(x, y)`` (a :class:`~dpspec.mechanisms.per_example.ClippedSum` of the batch) replayed as a CUDA
    graph where it can be (module docstring); ``status`` says what happened."""

    device_type = "cuda"

    def __init__(self, fn, model):
        self.fn, self.model = fn, model
        self._graphs: dict = {}
        self._seen: dict = {}
        self._pool = None  # one memory pool for a model's graphs: they never run at once, and each keeps its outputs
        self.replays = 0
        self.disabled: str | None = None
        self._last_eager = "no step yet"

    @property
    def status(self) -> str:
        if self.disabled is not None:
            return f"not replayed: {self.disabled}"
        if self._graphs:
            return f"{self.replays} step(s) replayed from {len(self._graphs)} CUDA graph(s)"
        return f"not replayed yet: {self._last_eager}"

    def _key(self, x, y) -> tuple:
        import torch

        m = self.model
        return (
            (x.device, tuple(x.shape), x.dtype, y.device, tuple(y.shape), y.dtype),
            tuple((p.data_ptr(), tuple(p.shape), p.dtype, p.requires_grad) for p in m.parameters()),
            tuple(mod.training for mod in m.modules()),
            _autocast_state(torch),
            (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
        )

    def __call__(self, x, y):
        import torch

        if self.disabled is not None:
            return self.fn(x, y)
        if not (torch.is_tensor(x) and torch.is_tensor(y)):
            self._last_eager = "the batch is not one tensor with a tensor target"
            return self.fn(x, y)
        if x.device.type != self.device_type:
            self._last_eager = f"the batch is on {x.device.type}, not CUDA"
            return self.fn(x, y)
        key = self._key(x, y)
        captured = self._graphs.get(key)
        if captured is None:
            if len(self._seen) >= _SEEN_LIMIT and key not in self._seen:
                self._seen.clear()
            seen = self._seen[key] = self._seen.get(key, 0) + 1
            if seen <= WARMUP:
                self._last_eager = f"warming up ({seen} of {WARMUP} eager steps of this batch shape)"
                return self.fn(x, y)
            if len(self._graphs) >= MAX_GRAPHS:
                self._last_eager = (
                    f"{MAX_GRAPHS} graphs are taken and the batch's shape or the model's state is new "
                    "(Poisson batch sizes vary: use fixed-size batches)"
                )
                return self.fn(x, y)
            captured = self._capture(x, y)
            if captured is None:
                return self.fn(x, y)
            self._graphs[key] = captured
            self._seen.pop(key, None)
        self.replays += 1
        return captured.replay(x, y, type(captured.cs))

    def _capture(self, x, y) -> _Captured | None:
        import torch

        sx, sy = x.clone(), y.clone()
        try:
            graph, cs = self._record(sx, sy)
        except Exception as e:  # a host read, an unsupported op: the eager step from now on
            self.disabled = f"the capture failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
            if x.device.type == "cuda":
                torch.cuda.synchronize(x.device)
            return None
        if getattr(cs, "_masks", None) is None:  # counts read on the host: cannot be replayed
            self.disabled = f"the {cs.method} path reads its counts on the host"
            return None
        return _Captured(graph, sx, sy, cs)

    def _record(self, sx, sy) -> tuple:
        """(the CUDA graph of ``fn(sx, sy)``, the ClippedSum whose tensors it writes)."""
        import contextlib

        import torch

        graph = torch.cuda.CUDAGraph()
        enabled, dtype = _autocast_state(torch)
        # autocast's cache of cast weights must not be captured (it is freed when the user's autocast ends)
        cast = torch.autocast("cuda", dtype=dtype, cache_enabled=False) if enabled else contextlib.nullcontext()
        side = torch.cuda.Stream(device=sx.device)  # warm-up on a side stream, as torch asks before a capture
        side.wait_stream(torch.cuda.current_stream(sx.device))
        with torch.cuda.stream(side), cast:
            self.fn(sx, sy)
        torch.cuda.current_stream(sx.device).wait_stream(side)
        with torch.cuda.graph(graph, pool=self._pool), cast:
            cs: Any = self.fn(sx, sy)
        if self._pool is None:
            self._pool = graph.pool()
        return graph, cs
