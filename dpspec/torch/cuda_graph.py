"""The private step's per-example computation replayed as a CUDA graph (``make_private(cuda_graph=True)``).

A small model's private step on a GPU is bound by the host, not the device: the clipped sum launches a
few hundred kernels (the forward, the backward to the layers' outputs, each layer's per-example norms,
the clip and the sums), and launching one costs the host about as long as a small kernel runs. A CUDA
graph records those launches once and replays them in one (``torch.cuda.CUDAGraph``).

What is replayed is the training backend's ``clipped_sum`` — the batch's clipped per-example gradient sum, a
function of the batch and the parameters only — and, as a second graph, the check that the loop's loss
is the criterion (DPS165; a function of the output, its gradient and the target). The clip is inside
the graph, so every replay bounds each example's contribution by C exactly as the eager step does; the
noise, the ledger's charge and the optimizer run outside it, as before. A replay reads its batch from
buffers the batch is copied into, and writes fresh tensors (copies of the graph's outputs), so a step
never sees another step's sums or outputs.

When: on CUDA, for a tensor batch of a shape seen :data:`WARMUP` times eagerly (the rules' one-time check
against vmap, the cached constants and cuDNN's choice of kernels happen then), at most :data:`MAX_GRAPHS`
graphs per function. Poisson batches, whose size varies, are padded to a few sizes
(:class:`GraphedClippedSum`'s ``bucket``); the padding rows are marked and contribute nothing; the loss
check is padded to the same sizes (:class:`GraphedLossCheck`), the padding rows not compared. A graph
is keyed by the batch's and target's shapes, dtypes and devices, the parameters' storage, shapes, dtypes
and ``requires_grad`` (a parameter replaced by another tensor, or frozen, is a new key), the buffers'
storage (the criterion's too, when it is a module: for the loss check's graph as well), every module's
train/eval flag, the autocast state and the TF32 flags; a graph is dropped (and captured again after the
warm-up) once a tensor the modules held as a plain attribute when it was captured is replaced. Not
replayed (the eager step runs, and :attr:`GraphedClippedSum.status` says why): another device; a batch
that is not one tensor with a tensor target; a capture that fails (a host read in the forward, say, a
tensor read that could not be watched, or a tensor attribute without storage); a new shape once
MAX_GRAPHS are taken.

What you accept by opting in (docs/training.md): the forward does the same operations for every batch
of a shape — no Python-side randomness or data-dependent Python control flow (dropout is fine: it draws
from the CUDA generator, which graphs advance). A graph reads memory, not Python names: the warm-up before
a shape's first capture and every capture check each tensor the step reads (:meth:`Replayer._audit_run`),
and one that is not its input, a parameter, a buffer, a module's tensor attribute, a shared constant or made
by that run (a tensor in a closure, a global or a container, which a replay would read at its old address
once replaced; host memory copied to the device), or a tensor attribute the step reads and then rebinds,
fails the capture. A model's graphs (the clipped sum's
and the loss check's) share one memory pool per device, which stays reserved while they live. A new
batch shape of the clipped sum (a Poisson batch's new padded size) releases that pool before each of its
eager warm-up steps (:meth:`GraphPools.release`): an eager step cannot use a pool's free memory, so it
would take a second working set beside it. A dropped graph is captured again, without a warm-up, when its
shape comes back, and the graphs are captured from the most rows to the fewest, which share their blocks
(an ascending order kept one working set per size).
"""

from __future__ import annotations

import gc
from typing import Any

from dpspec.errors import DpspecError

WARMUP = 2  # eager steps of a shape before its capture
MAX_GRAPHS = 6  # graphs per function replayed (a model's graphs share one memory pool per device)
_SEEN_LIMIT = 64  # shapes remembered while warming up (Poisson sizes would grow the count without end)


def _autocast_state(torch) -> tuple:
    try:  # torch ≥ 2.4
        return (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))
    except TypeError:  # pragma: no cover - older torch
        return (torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype())


def _is_tensor(v) -> bool:
    import torch

    return torch.is_tensor(v)


_NO_STORAGE = "no storage"  # what _storage gives a tensor without storage (unequal to any storage it had)


def _storage(v) -> tuple | str | None:
    """(address, shape, dtype) of a tensor, None for anything else, :data:`_NO_STORAGE` for a tensor without
    storage (a wrapper a forward under torch.func left on a module: its memory cannot be watched)."""
    if not _is_tensor(v):
        return None
    try:
        return (v.data_ptr(), tuple(v.shape), v.dtype)
    except RuntimeError:
        return _NO_STORAGE


_SIDE_STREAMS: dict = {}


def _drop_cublas_workspaces(torch) -> None:
    """Forget cuBLAS's per-stream workspaces (each is made again at its stream's next matrix product; a torch
    without the call keeps them)."""
    drop = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if drop is not None:
        drop()


def _side_stream(dev):
    """One side stream per device for every capture: a library such as cuBLAS keeps a workspace per stream
    it has run on (tens of MiB), so a new stream per capture would keep one more each time."""
    import torch

    key = (dev.type, dev.index if dev.index is not None else torch.cuda.current_device())
    s = _SIDE_STREAMS.get(key)
    if s is None:
        s = _SIDE_STREAMS[key] = torch.cuda.Stream(device=dev)
    return s


def _held_tensors(modules) -> list:
    """(module, name, storage) of every tensor the modules hold as a plain attribute (a mask, a table, a
    cache made by the forward; their parameters and buffers are keyed apart). Raises for one without storage:
    a graph that read it could not tell when it is replaced (the capture fails; the eager step runs)."""
    held = [(mod, k, _storage(v)) for mod in modules for k, v in vars(mod).items() if _is_tensor(v)]
    for mod, k, st in held:
        if st == _NO_STORAGE:
            raise RuntimeError(
                f"the tensor attribute `{k}` of a {type(mod).__name__} has no storage (made under torch.func)"
            )
    return held


# captures dropped for an undecided rules check before one is kept as it is (a dataset whose every probe is
# non-finite would otherwise cost a capture every few steps for nothing)
_NOT_YET_LIMIT = 3


class _NotYet(DpspecError):
    """A capture made fine but of a step that a later batch would compute otherwise (its clipping method is not
    decided yet): dropped, and the shape warmed up again."""


class UnwatchedReadError(DpspecError, RuntimeError):
    """The step read a tensor that a graph's key and watch do not cover (its capture fails; the eager step runs)."""


def _storage_id(t) -> int | None:
    """The address of a tensor's storage (its views share it); None for a tensor without one."""
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return None


# operations that read a host tensor's memory on a CUDA run (a copy to the device, indices moved there): captured,
# such a copy reads the host address again at every replay, so even a number there is not taken by value
_HOST_READS = frozenset(
    {"_to_copy", "copy_", "copy", "_copy_from", "_copy_from_and_resize", "index", "index_put", "index_put_"}
    | {"_index_put_impl_", "_unsafe_index", "_unsafe_index_put", "index_select", "index_add", "index_copy"}
)


def _read_audit(known: set, device):
    """A ``TorchDispatchMode`` that lists the tensors a run reads without covering them: a tensor is covered when
    its storage is in ``known`` (the run's inputs, the modules' parameters, buffers and tensor attributes, the
    shared constants) or was written by an operation of the run itself (added to ``known`` as it goes). What is
    left is a tensor reached another way — held in a closure, a global, a list or a dict attribute — which a graph
    would read by its address at every replay, whatever the name is bound to by then. On a CUDA run (``device``)
    a host tensor is never covered — a captured copy reads its address at every replay, and host memory the run
    made and freed is reused — except a 0-dim one in an operation that takes it as a number (not a copy or an
    index: :data:`_HOST_READS`). A storage passed as such (``Tensor.set_``) is checked as a tensor is."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    fresh = {torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default}  # torch.tensor(data)
    on_host = device.type == "cpu"

    class ReadAudit(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.unwatched: list = []
            self.read: set = set()  # the storages the run read

        def covered(self, t, op: str) -> bool:
            if t.numel() == 0:
                return True
            if not on_host and t.device.type == "cpu":
                return t.dim() == 0 and op not in _HOST_READS
            sid = _storage_id(t)
            return sid is not None and sid in known

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            op = str(func.overloadpacket.__name__)
            for a in tree_flatten((args, kwargs))[0]:
                if isinstance(a, torch.TypedStorage):
                    a = a._untyped_storage
                if isinstance(a, torch.UntypedStorage):
                    self.read.add(int(a.data_ptr()))
                    host = not on_host and a.device.type == "cpu"
                    if a.nbytes() and (host or int(a.data_ptr()) not in known):
                        self.unwatched.append((op, ("storage",), None))
                elif isinstance(a, torch.Tensor):
                    self.read.add(_storage_id(a))
                    if func not in fresh and not self.covered(a, op):
                        self.unwatched.append((op, tuple(a.shape), a.dtype))
                        if a.device.type == device.type:
                            known.add(_storage_id(a))  # (named once)
            out = func(*args, **kwargs)
            for o in tree_flatten(out)[0]:
                if isinstance(o, torch.Tensor):
                    known.add(_storage_id(o))
            return out

    return ReadAudit()


def _first_rows(cs, B: int):
    """The ClippedSum of a padded batch's first B rows (the examples): the sums hold nothing of the padding
    rows; their records are dropped."""
    bad, over = cs._masks
    out = type(cs).deferred(
        cs.sums,
        B,
        bad[:B],
        over[:B],
        cs.norms[:B],
        cs.losses[:B],
        cs.method,
        None if cs.outputs is None else cs.outputs[:B],
        cs.fallback,
    )
    out.graphed = cs.graphed
    return out


def criterion_modules(criterion) -> tuple:
    """``(criterion,)`` when it is a module (its tensors, a class weight, are read by a graph of it), else ()."""
    import torch

    return (criterion,) if isinstance(criterion, torch.nn.Module) else ()


def _rows(key) -> int:
    """The rows of a Replayer key's first input (0 for none)."""
    first = key[0][0] if key[0] else None
    return int(first[1][0]) if first is not None and first[1] else 0


def _same_but_rows(a, b) -> bool:
    """Two Replayer keys that differ at most in their inputs' rows (the same state, devices, dtypes and other
    dimensions)."""

    def rest(arg):
        return None if arg is None else (arg[0], arg[1][1:], arg[2])

    return a[1] == b[1] and len(a[0]) == len(b[0]) and all(rest(x) == rest(y) for x, y in zip(a[0], b[0]))


def _arange(rows_cache: dict, dev, size: int, B: int):
    """An arange of at least ``size`` on ``dev``, kept in ``rows_cache`` (device → arange) between calls."""
    import torch

    rows = rows_cache.get(dev)
    if rows is None or rows.shape[0] < size:
        rows = rows_cache[dev] = torch.arange(max(size, 2 * B), device=dev)
    return rows


def _padded(rows_cache: dict, tensors, B: int, size: int):
    """``tensors`` (B rows each) padded to ``size`` rows by repeating their first row, and the mask of the padding
    rows (``rows_cache``: device → an arange, kept between calls). For the eager warm-ups and a capture; a replay
    copies the batch into its buffers' first rows and leaves in the padding rows what earlier batches wrote
    there (:meth:`_Captured.replay_rows`): what a padding row holds never reaches the results (it is marked: its
    loss is zeroed before the backward, its rows left out of the norms and sums, its record dropped)."""
    import torch

    rows = _arange(rows_cache, tensors[0].device, size, B)
    pad = rows[:size] >= B  # (a Python bound: a kernel argument, no copy to the device)
    if size > B:
        tensors = tuple(torch.cat([t, t[:1].expand(size - B, *t.shape[1:])]) for t in tensors)
    return tensors, pad


class GraphPools:
    """The memory pools of a model's graphs — one per device, shared by its Replayers (the clipped sum's and the
    loss check's) — and the stream each device's graphs were last replayed on.

    Sharing a pool is safe when its graphs never run at once: a replay's outputs are copied out
    (:meth:`Replayer.fresh`) before the next replay, so a graph's working memory is dead once its replay ends
    and another graph may use it, while the outputs each graph writes stay allocated for its life. Replays on
    one stream follow each other; a replay on another stream than the last one (a loop that runs its forward
    and ``optimizer.step()`` on different streams) first makes its stream wait for that one (:meth:`order`,
    queued on the device, no host wait)."""

    def __init__(self):
        import weakref

        self.handles: dict = {}  # device index → the pool's handle (``CUDAGraph.pool()``)
        self.streams: dict = {}  # device index → the stream of the last replay there
        self.members: weakref.WeakSet = weakref.WeakSet()  # the Replayers whose graphs are in these pools
        self.broken = False  # a capture failed: the pools are not released again (Replayer._fail)

    def release(self, dev) -> None:
        """Drop every graph in the pool on ``dev`` and return the pool's memory to the device. Each Replayer keeps
        what it needs to capture a dropped graph again, without a warm-up, when its shape comes back
        (:attr:`Replayer._known`). Called by a Replayer that is not light before a new shape's eager warm-up steps
        and before the warm-up on the side stream that precedes its capture, which would otherwise take a working
        set beside the pool (the allocator gives eager steps none of a graph pool's free memory); before a capture
        when the pool holds a graph of the same function and state with fewer rows, so that the graphs are
        captured from the most rows to the fewest (:meth:`Replayer._larger_first`: a smaller graph's tensors fit
        in the blocks a larger one freed, not the reverse; a pool whose shapes came in ascending order held a
        working set per shape); and when a graph is stale (a tensor it read was replaced). Nothing once a capture
        has failed (:meth:`Replayer._fail`)."""
        held = [m for m in list(self.members) if m._holds(dev)]
        if not held or self.broken:
            return
        cuda = dev.type == "cuda"
        if cuda:
            import torch

            torch.cuda.synchronize(dev)  # no replay in flight still reads or writes the pool
        for m in held:
            m._drop(dev)
        if cuda:
            self.handles.pop(dev.index if dev.index is not None else torch.cuda.current_device(), None)
            # the pool's segments, unused once its graphs and their outputs are gone, back to the device
            torch.cuda.empty_cache()

    def order(self, dev) -> None:
        """Before a replay on ``dev`` (a CUDA device) on the current stream: wait for the last replay's stream."""
        if dev.type != "cuda":
            return
        import torch

        stream = torch.cuda.current_stream(dev)
        index = stream.device_index
        last = self.streams.get(index)
        if last is not None and last != stream:
            stream.wait_stream(last)
        self.streams[index] = stream


class _Captured:
    """One captured graph: its input buffers and the outputs it writes."""

    def __init__(self, graph, inputs, outputs):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs
        self.held: list = []  # (module, name, storage) of the tensor attributes when it was captured
        self.device = next(a for a in inputs if a is not None).device

    def drop(self) -> None:
        """Let the graph and its outputs go (their memory is the pool's); the input buffers stay, for a capture
        of the same shape again."""
        self.graph = self.outputs = None

    def replay(self, args):
        import torch

        with torch.no_grad():  # (an input may require a gradient: the loss check's output)
            for mine, arg in zip(self.inputs, args):
                if mine is not None:
                    mine.copy_(arg)
        self.graph.replay()
        return self.outputs

    def replay_rows(self, args, B: int, rows) -> Any:
        """The replay of a batch of B rows padded to the graph's rows: each tensor copied into its buffer's first
        B rows, the padding mask (the last buffer) written from ``rows`` (an arange on the device), one kernel
        each. The padding rows keep what earlier batches left there: they are marked, and nothing they hold
        reaches the results (see :func:`_padded`)."""
        import torch

        *buffers, pad = self.inputs
        with torch.no_grad():
            for mine, arg in zip(buffers, args):
                if mine is not None:
                    mine[:B].copy_(arg)
            torch.ge(rows[: pad.shape[0]], B, out=pad)
        self.graph.replay()
        return self.outputs


class Replayer:
    """``fn(*tensors)`` replayed as a CUDA graph per key where it can be (module docstring); ``status`` says
    what happened. A replay's outputs are :meth:`fresh` copies of the graph's own (which the next replay
    overwrites)."""

    device_type = "cuda"

    def __init__(self, fn, pools: GraphPools | None = None, light: bool = False, roots: tuple = ()):
        self.fn = fn
        # the modules whose tensors fn reads (the model's, a criterion module's): the graph reads their memory, so
        # their parameters and buffers are in its key and a tensor attribute put in the place of one is watched
        self._roots = tuple(roots)
        self._graphs: dict = {}
        # key → a _Captured whose graph the pool's release dropped (its input buffers kept): captured again at
        # once, without the warm-up, when its shape comes back
        self._known: dict = {}
        self._seen: dict = {}
        self.pools = GraphPools() if pools is None else pools  # shared with the model's other Replayers
        self.pools.members.add(self)
        # light: a function whose eager steps take little memory (the loss check): its warm-up runs beside the
        # pool and its captures go into it as it is, without releasing the other graphs
        self.light = light
        self.replays = 0
        self.captured = 0  # captures made (a graph captured again after a release counts again)
        self.disabled: str | None = None
        self._last_eager = "no step yet"

    @property
    def status(self) -> str:
        if self.disabled is not None:
            return f"not replayed: {self.disabled}"
        if self._graphs or self._known:
            return f"{self.replays} step(s) replayed from {len(self._graphs) + len(self._known)} CUDA graph(s)"
        return f"not replayed yet: {self._last_eager}"

    def _holds(self, dev) -> bool:
        return any(c.device == dev for c in self._graphs.values())

    def _drop(self, dev) -> None:
        for key, c in list(self._graphs.items()):
            if c.device == dev:
                c.drop()
                self._known[key] = self._graphs.pop(key)

    def _state_key(self) -> tuple:
        """What besides the inputs' shapes a graph depends on: the autocast state, the TF32 flags and, for the
        modules it reads, each one's train flag, its own parameters' storage, shape, dtype and requires_grad, and
        its buffers' storage, shape and dtype. One walk of the modules per step (host time on every replayed
        step; a tensor shared by two modules is listed twice: the key is still a function of the state)."""
        import torch

        key: list = [
            _autocast_state(torch),
            (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
        ]
        for r in self._roots:
            for mod in r.modules():
                key.append(mod.training)
                key.extend(
                    (p.data_ptr(), tuple(p.shape), p.dtype, p.requires_grad)
                    for p in mod._parameters.values()
                    if p is not None
                )
                key.extend((t.data_ptr(), tuple(t.shape), t.dtype) for t in mod._buffers.values() if t is not None)
        return tuple(key)

    def fresh(self, outputs):
        """Copies of the graph's outputs (a tensor or a tuple of tensors)."""
        if _is_tensor(outputs):
            return outputs.clone()
        return type(outputs)(o.clone() for o in outputs)

    def __call__(self, *args):
        if self.disabled is not None:
            return self.fn(*args)
        if not all(_is_tensor(a) or a is None for a in args):
            self._last_eager = "the batch is not one tensor with a tensor target"
            return self.fn(*args)
        dev = args[0].device
        if dev.type != self.device_type:
            self._last_eager = f"the batch is on {dev.type}, not CUDA"
            return self.fn(*args)
        key = (tuple(None if a is None else (a.device, tuple(a.shape), a.dtype) for a in args), self._state_key())
        captured = self._graphs.get(key)
        if captured is not None and not self._current(captured):
            # a tensor it read has been replaced (its memory, once freed, may hold anything — another example's
            # activations, say): dropped with the pool (the pool's last graph gone, its handle goes too), then
            # warmed up and captured again
            self.pools.release(dev)
            self._graphs.pop(key, None)
            for k in [k for k, c in self._known.items() if k == key or not self._current(c)]:
                del self._known[k]  # (nor those of other shapes that read a replaced tensor)
            captured = None
        if captured is None:
            known = self._known.pop(key, None)
            if known is not None and self._current(known):  # (else: a tensor it read was replaced, as above)
                self._larger_first(key, dev)
                captured = None if self.disabled is not None else self._capture(known.inputs)
            else:
                captured = self._first_capture(key, args, dev)
            if captured is None:
                return self.fn(*args)
            self._graphs[key] = captured
        self.replays += 1
        self.pools.order(dev)
        return self.fresh(captured.replay(args))

    def _replay_padded(self, args: tuple, B: int, size: int, rows: dict):
        """For tensors ``args`` of B rows on one device, to be padded to ``size`` rows: the replay of the graph of
        that shape for the current state if it is held, with the batch copied into the first B rows of its
        buffers (:meth:`_Captured.replay_rows`: no padded copy of the batch is made); else None (the caller pads
        the batch, :func:`_padded`, and makes the usual call: a warm-up, a capture, a stale graph dropped).
        ``rows``: the caller's device → arange cache."""
        import torch

        if self.disabled is not None:
            return None
        dev = args[0].device
        specs = tuple((a.device, (size,) + tuple(a.shape[1:]), a.dtype) for a in args)
        key = (specs + ((dev, (size,), torch.bool),), self._state_key())
        captured = self._graphs.get(key)
        if captured is None or not self._current(captured):
            return None
        self.replays += 1
        self.pools.order(dev)
        return self.fresh(captured.replay_rows(args, B, _arange(rows, dev, size, B)))

    def _larger_first(self, key, dev) -> None:
        """Before ``key``'s capture (unless light): the pool released if it holds a graph of this function for the
        same state with fewer rows, and this function's dropped graphs for the same state with more rows captured
        again, the most rows first. A smaller graph's tensors then take blocks a larger one freed; the other order
        would hold a working set per size. (Only graphs of the same state: another state's graph captured now
        would read that state's tensors — freed, perhaps — when replayed under its key.)"""
        if self.light:
            return
        rows = _rows(key)
        if any(_rows(k) < rows for k in self._graphs if _same_but_rows(k, key)):
            self.pools.release(dev)
        larger = [k for k in self._known if _same_but_rows(k, key) and _rows(k) > rows]
        for k in sorted(larger, key=_rows, reverse=True):
            again = self._known.pop(k)
            if self._current(again):
                again = self._capture(again.inputs)
                if again is None:  # (a failed capture: every graph of the pool dropped)
                    return
                self._graphs[k] = again

    def _first_capture(self, key, args, dev) -> _Captured | None:
        """A shape not captured before: None (the caller runs the eager step) for its first :data:`WARMUP` steps,
        then its capture. Unless light, the pool is released before each warm-up step and before the capture's
        own warm-up (an eager step would take a working set beside it), and :meth:`_larger_first` orders the
        capture."""
        if len(self._seen) >= _SEEN_LIMIT and key not in self._seen:
            self._seen.clear()
        if len(self._graphs) + len(self._known) >= MAX_GRAPHS:
            self._last_eager = f"{MAX_GRAPHS} graphs are taken and the batch's shape or the model's state is new"
            return None
        seen = self._seen[key] = self._seen.get(key, 0) + 1
        if not self.light:
            self.pools.release(dev)
        if seen <= WARMUP:
            self._last_eager = f"warming up ({seen} of {WARMUP} eager steps of this batch shape)"
            return None
        self._seen.pop(key, None)
        static = tuple(None if a is None else a.detach().clone() for a in args)
        try:
            self._warm_up(static)
        except Exception as e:  # (a read it cannot watch; or an error the caller's eager step raises too)
            self._fail(e, static)
            return None
        self._larger_first(key, dev)
        return None if self.disabled is not None else self._capture(static)

    def _capture(self, static: tuple) -> _Captured | None:
        """``fn`` captured on the input buffers ``static`` (copies of a batch's tensors, or a dropped graph's). A
        failed capture turns the replays off for the run (:meth:`_fail`)."""
        try:
            graph, outputs = self._record(static)
            self._check(outputs)
            held = self._held()
        except _NotYet as e:  # the capture is dropped and the shape warmed up again: a later batch decides
            self._last_eager = str(e)
            return None
        except Exception as e:  # a host read, an unsupported op, a tensor attribute that cannot be watched
            self._fail(e, static)
            return None
        captured = _Captured(graph, static, outputs)
        captured.held = held
        self.captured += 1
        return captured

    def _fail(self, e: Exception, static: tuple) -> None:
        """The eager step from now on, for this function and the others whose graphs share the pool (their graphs
        dropped). Nothing is captured into the pool or released again: after a failed capture some torch builds
        leave the allocator recording into the pool, and returning cached memory then trips an internal assert."""
        import torch

        why = f"the capture failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        self.pools.broken = True
        for m in [self, *(m for m in list(self.pools.members) if m is not self)]:
            if m.disabled is None:
                m.disabled = why if m is self else f"a graph sharing its memory pool failed: {why}"
            m._graphs.clear()
            m._known.clear()
        dev = next(a for a in static if a is not None).device
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def _check(self, outputs) -> None:
        """Raises if ``outputs`` cannot be replayed."""

    def _held(self) -> list:
        """What a graph captured now reads besides its key: (module, name, storage) of every tensor attribute the
        modules hold when it is captured (one the forward made on its first call, a private cache), not only
        those there were when the Replayer was made."""
        return _held_tensors(mod for r in self._roots for mod in r.modules())

    def _audited(self, static):
        """``fn(*static)`` with every tensor it reads checked (:meth:`_audit_run`); UnwatchedReadError if one is not
        covered. Run as the warm-up before a shape's first capture, and (by :meth:`_record`) in every capture."""
        outputs, problem = self._audit_run(static)
        if problem is not None:
            raise UnwatchedReadError(problem)
        return outputs

    def _audit_run(self, static) -> tuple:
        """(``fn(*static)``, None), or (its outputs, why a graph of it could not be replayed soundly). A graph reads
        memory, not names: a tensor it read that were replaced between steps would be read at its old address,
        which once freed may hold anything (another example's activations, say), and the per-example bound would
        not hold. So every tensor the run reads must be its input, one of the modules' parameters, buffers and
        tensor attributes (the key and :meth:`_held` watch those), a shared constant, or made by the run itself
        (:func:`_read_audit`); and the run must not rebind the modules' tensor attributes (the watch would follow
        the new tensor while a replay reads the old one)."""
        from dpspec.torch.clipping.kernels import _CONSTANTS

        mods = [mod for r in self._roots for mod in r.modules()]
        before = [(mod, k, v) for mod in mods for k, v in vars(mod).items() if _is_tensor(v)]  # tensor attributes
        tensors = [a for a in static if a is not None] + [v for *_, v in before]
        for mod in mods:
            tensors += [p for p in mod._parameters.values() if p is not None]
            tensors += [b for b in mod._buffers.values() if b is not None]
        tensors += [t for v in _CONSTANTS.values() for t in (v if isinstance(v, tuple) else (v,))]
        known = {_storage_id(t) for t in tensors} - {None}
        self._held()  # (its error for a tensor attribute without storage)
        with _read_audit(known, tensors[0].device) as audit:
            outputs = self.fn(*static)
        # an attribute the run read and then rebound or deleted: the watch, taken after the capture, would follow
        # the new tensor while a replay reads the old one's memory (one the run did not read, rebound as a pre-hook
        # recomputes a weight, is not read by the graph)
        rebound = [(mod, k) for mod, k, v in before if vars(mod).get(k) is not v and _storage_id(v) in audit.read]
        if rebound:
            mod, k = rebound[0]
            return outputs, (
                f"the step rebinds the tensor attribute `{k}` of a {type(mod).__name__} after reading it: a graph "
                "would read the tensor it held at the capture, freed once replaced (update it in place, or keep it "
                "as a buffer)"
            )
        if audit.unwatched:
            op, shape, dtype = audit.unwatched[0]
            more = f" (and {len(audit.unwatched) - 1} more)" if len(audit.unwatched) > 1 else ""
            what = "storage" if shape == ("storage",) else f"{tuple(shape)} {str(dtype).replace('torch.', '')} tensor"
            return outputs, (
                f"the step reads a {what} in `{op}`{more} that is not its input, a parameter, a buffer or a tensor "
                "attribute of a module: one in a closure, a global or a container (or host memory copied to the "
                "device), which a graph would read by its old address once replaced (register it as a buffer or "
                "hold it as a module attribute)"
            )
        return outputs, None

    def _current(self, captured) -> bool:
        """Whether the tensor attributes ``captured`` may read are still those it was captured with."""
        return all(_storage(getattr(mod, k, None)) == st for mod, k, st in captured.held)

    def _warm_up(self, static) -> None:
        """``fn`` run once on the side stream the captures use, before a shape's first capture (as torch asks:
        lazy state made there, not in the capture), its reads checked (:meth:`_audited`); a graph dropped by a
        release is captured again without it.
        Nothing on another device than CUDA (the tests' simulated captures)."""
        import torch

        dev = next(a for a in static if a is not None).device
        if dev.type != "cuda":
            return
        with torch.cuda.device(dev):
            user = torch.cuda.current_stream(dev)
            side = _side_stream(dev)
            # the eager steps' cached blocks belong to the user's stream, and the allocator gives a stream only
            # its own: returned first (as torch.cuda.graph does before the capture), the side stream's warm-up
            # takes that memory again instead of as much beside it (a fixed-size loop's device footprint
            # measured twice its eager step's before)
            # cuBLAS keeps a workspace per stream (tens of MiB), made at a stream's first matrix product: dropped
            # with the cached blocks, before the warm-up and before the capture, so that the capture makes the
            # side stream's inside the graph's pool (where its replays use it), and dropped after it, so that no
            # eager product later takes the pool's memory for one (torch's inductor does the same around its
            # captures); the two streams used to keep one each beside the pool
            torch.cuda.synchronize(dev)
            _drop_cublas_workspaces(torch)
            torch.cuda.empty_cache()
            side.wait_stream(user)
            try:
                with torch.cuda.stream(side), self._autocast(torch):
                    self._audited(static)
            finally:
                user.wait_stream(side)
            torch.cuda.synchronize(dev)

    @staticmethod
    def _autocast(torch):
        """The caller's autocast state, its cache of cast weights off (it must not be captured: it is freed when
        the user's autocast ends)."""
        import contextlib

        enabled, dtype = _autocast_state(torch)
        return torch.autocast("cuda", dtype=dtype, cache_enabled=False) if enabled else contextlib.nullcontext()

    def _record(self, static) -> tuple:
        """(the CUDA graph of ``fn(*static)``, the outputs it writes), captured on the side stream into the pool."""
        import torch

        dev = next(a for a in static if a is not None).device
        # on the batch's device and a stream of it: torch.cuda.graph's own stream is made on the device current
        # when it is first used, and a capture there does not record the kernels of a batch on another device
        # (cuda:1 while cuda:0 is current): they run now, on that device's stream — the capture fails at their
        # first allocation, or records nothing and every replay hands out this batch's sums
        with torch.cuda.device(dev):
            user = torch.cuda.current_stream(dev)
            side = _side_stream(dev)
            torch.cuda.synchronize(dev)
            _drop_cublas_workspaces(torch)  # (see _warm_up: the side stream's workspace made in the pool)
            graph = torch.cuda.CUDAGraph()
            index = dev.index if dev.index is not None else torch.cuda.current_device()
            # no garbage collection during the capture: a finalizer it runs may call CUDA from this thread (an
            # event destroyed, pinned host memory freed: earlier steps' loss-check reads), which invalidates a
            # capture (seen as "operation failed due to a previous error during capture", now and then, in a
            # process that had trained before); no collection first either (torch dropped its own for the
            # cost: a full collection per capture), the garbage is collected after
            collecting = gc.isenabled()
            gc.disable()
            try:
                with torch.cuda.graph(graph, pool=self.pools.handles.get(index), stream=side), self._autocast(torch):
                    # the reads of the capture itself checked (what the warm-up made is not the capture's own)
                    outputs, problem = self._audit_run(static)
            except BaseException:
                # a capture that ends in error leaves torch.cuda.graph's stream current (its exit stops at the
                # failed capture_end): the caller's stream back, for the eager steps that follow
                torch.cuda.set_stream(user)
                raise
            finally:
                if collecting:
                    gc.enable()
                _drop_cublas_workspaces(torch)
        self.pools.handles.setdefault(index, graph.pool())
        if problem is not None:  # (raised once the capture has ended: the caller drops the graph and the pool)
            raise UnwatchedReadError(problem)
        return graph, outputs


class GraphedClippedSum(Replayer):
    """``fn(x, y, pad)`` (a :class:`~dpspec.mechanisms.per_example.ClippedSum` of the batch; ``pad`` marks
    padding rows, as in ``clipped_grad_sum``) replayed as a CUDA graph where it can be; keyed also by the
    model's parameters, buffers, tensor attributes and modes. ``bucket``: None for fixed-size batches, else
    the size ``bucket(B)`` ≥ B a batch of B rows is padded to (Poisson batches): the padding rows (the first row
    repeated, or in a replay what earlier batches left in the graph's buffers) are marked in ``pad``, so
    contribute nothing, and their records are dropped from the result."""

    def __init__(self, fn, model, bucket=None, criterion=None, pools: GraphPools | None = None):
        # the modules whose tensors the step reads: the model's, and the criterion's when it is a module (a
        # class weight); the graph reads their memory, so a tensor put in the place of one must not be replayed
        # from the old memory
        super().__init__(fn, pools, roots=(model,) + criterion_modules(criterion))
        self.model, self.bucket = model, bucket
        self._rows: dict = {}  # device → arange, for the padding masks
        self._not_yet = 0  # captures dropped because the rules' check was not decided on their batch

    def __call__(self, x, y):
        if self.bucket is None:
            return super().__call__(x, y, None)
        if self.disabled is not None or not (_is_tensor(x) and _is_tensor(y)) or x.device.type != self.device_type:
            return super().__call__(x, y, None)  # (eager, unpadded; the base says why)

        B = int(x.shape[0])
        size = int(self.bucket(B))
        same = x.device == y.device and y.shape[:1] == x.shape[:1]
        cs = self._replay_padded((x, y), B, size, self._rows) if same else None
        if cs is None:
            (xp, yp), pad = _padded(self._rows, (x, y), B, size)
            cs = super().__call__(xp, yp, pad)
        if size == B:
            return cs
        if getattr(cs, "_masks", None) is None:  # (an eager step whose counts were read on the host: no rows to drop)
            self._fail(RuntimeError(f"the {cs.method} path reads its counts on the host"), (x,))
            return self.fn(x, y, None)
        return _first_rows(cs, B)

    def _check(self, cs) -> None:
        if getattr(cs, "_masks", None) is None:  # counts read on the host: cannot be replayed
            raise RuntimeError(f"the {cs.method} path reads its counts on the host")
        if cs.method in ("vmap", "loop") and cs.fallback and cs.batch > 1 and self._not_yet < _NOT_YET_LIMIT:
            from dpspec.torch.clipping import engine

            if engine.undecided(self.model):
                self._not_yet += 1
                raise _NotYet("the per-layer rules' check against vmap is not decided yet (this batch's probe)")

    def fresh(self, cs):
        import torch

        names = list(cs.sums)
        bad, over = cs._masks
        floats = [cs.sums[k] for k in names] + [cs.norms, cs.losses]
        if cs.outputs is not None:
            floats.append(cs.outputs)
        # fresh tensors (one fused copy): the next replay overwrites the graph's own, and the step adds its
        # noise into the sums in place
        copies = torch._foreach_mul(floats, 1.0)
        sums = dict(zip(names, copies[: len(names)]))
        norms, losses = copies[len(names)], copies[len(names) + 1]
        outputs = copies[len(names) + 2] if cs.outputs is not None else None
        masks = (bad.clone(), over.clone())
        out = type(cs).deferred(sums, cs.batch, *masks, norms, losses, cs.method, outputs, cs.fallback)
        out.graphed = True
        return out


class GraphedLossCheck(Replayer):
    """The loop-loss check of Poisson batches, ``fn(G, out, y, pad)`` (the session's ``_loss_verdict``), replayed
    as a CUDA graph per padded size: ``G``, the output and the target are padded to ``bucket(B)`` rows as the
    clipped sum's batch is (the padding rows marked in ``pad`` and not compared), so a few graphs serve every
    batch size. Eager and unpadded, ``fn(G, out, y)``, until ``ready()`` (a checked batch has told a summing
    criterion from an averaging one, which the padded check needs; one whose per-example gradients are all 0
    tells neither), and wherever the base would not replay."""

    def __init__(self, fn, bucket, ready, pools: GraphPools | None = None, light: bool = False, roots: tuple = ()):
        super().__init__(fn, pools, light, roots)
        self.bucket, self.ready = bucket, ready
        self._rows: dict = {}

    def __call__(self, G, out, y):
        tensors = (G, out, y)
        if (
            self.disabled is not None
            or not self.ready()
            or not all(_is_tensor(t) for t in tensors)
            or G.device.type != self.device_type
            or G.shape[0] != out.shape[0]
        ):
            return self.fn(G, out, y)
        B, size = int(G.shape[0]), int(self.bucket(G.shape[0]))
        same = out.device == G.device == y.device and y.shape[0] == B
        ok = self._replay_padded(tensors, B, size, self._rows) if same else None
        if ok is None:
            (G, out, y), pad = _padded(self._rows, tensors, B, size)
            ok = super().__call__(G, out, y, pad)
        return ok
