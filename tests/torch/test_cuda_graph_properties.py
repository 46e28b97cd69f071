"""Properties of make_private(cuda_graph=True) over random runs: a graphed run is the eager run.

Without a GPU the captures are simulated, as in tests/torch/test_cuda_graph.py: a "graph" that, on replay,
recomputes its function from the captured input buffers and writes the result into the captured outputs — what
a CUDA graph does to its own memory. The simulation here is stricter in three ways, so that what a real graph
would get wrong shows up on the CPU:

* a capture runs nothing: the outputs it leaves hold garbage (NaN, flipped masks) until the graph's first
  replay;
* a graph dropped with its pool (:meth:`GraphPools.release`) has its outputs overwritten (the pool's memory goes
  back to the device);
* a replay checks that the model is in the state its graph was captured in — the parameters' and buffers'
  storage, shapes, dtypes and ``requires_grad``, every module's train flag, the tensor attributes the modules
  held then, the loss check's criterion kind — and raises :class:`StaleReplay` otherwise: the simulated replay
  reads the modules by their Python names, but a real one reads the memory it was captured with.

Each random run (Poisson batches of small datasets, so that several padded sizes come in random order; virtual
batches, whose chunks differ in size within a step; float32 and float64; state changes between steps; a loop that
from some step on is refused) is made twice with the same seed, eagerly and graphed: the parameters after every
step, the steps taken and the refusals are the same (the parameters bit for bit with fixed-size batches, up to
the padding's order of additions with Poisson batches), nothing but the documented refusals is raised, the status
is well formed and no function holds more than MAX_GRAPHS graphs.

Two holes found this way have a test of their own at the end: the loss check's graph did not follow the
criterion's class weights (it is now keyed by the criterion module's tensors as the clipped sum's is), and a tensor
attribute without storage (a cache the forward made under torch.func) made the graphed step raise (its capture now
fails, and the eager step runs).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
import dpspec.torch.cuda_graph as cg
from dpspec.torch import CriterionMismatchError, UnnoisedParameterError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_cuda_graph  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings(
    "ignore::dpspec.torch.SamplingOverrideWarning", "ignore:There is a performance drop"
)

SPEC = test_cuda_graph.SPEC.replace("dataset_size 48", "dataset_size {n}")  # (the same training, any N)
STEPS = 12
# (dataset size, sampling): Poisson rates whose batches fall in two or three padded sizes (multiples of 8, or of 16
# for qN = 28.8) in an order the sampler's seed decides, the rate 0.1 with a batch of one or an empty batch now and
# then; fixed-size batches
POISSON = [
    (32, "poisson(rate = 0.3)"),
    (24, "poisson(rate = 0.45)"),
    (40, "poisson(rate = 0.1)"),
    (48, "poisson(rate = 0.6)"),
]
FIXED = [(24, "without_replacement(batch_size = 6)"), (32, "without_replacement(batch_size = 9)")]
# the tolerance of a Poisson run: a padded batch's sums run over the padding rows' zeros too, which changes the
# order of the floating-point additions (docs/training.md); fixed-size batches are not padded and must agree bit
# for bit
POISSON_ATOL = {torch.float32: 1e-6, torch.float64: 1e-12}


@functools.cache
def _compiled(n: int, sampling: str):
    return dpspec.compile(SPEC.format(n=n, sampling=sampling, steps=STEPS)).mechanisms["model"]


def mechanism(n: int, sampling: str):
    """A fresh mechanism of the compiled training (its own ledger, nothing charged): one compile per training."""
    return dataclasses.replace(_compiled(n, sampling))


# --- the stricter simulation ----------------------------------------------------------------------------------


class StaleReplay(AssertionError):
    """A graph replayed under another state of the model than the one it was captured in."""


def _state(roots) -> tuple:
    """What a graph reads of ``roots``' modules besides its inputs, as a real graph sees it (memory, not names)."""
    out: list = []
    for r in roots:
        for mod in r.modules():
            out.append(mod.training)
            for k, p in mod._parameters.items():
                if p is not None:
                    out.append((k, p.data_ptr(), tuple(p.shape), p.dtype, p.requires_grad))
            for k, b in mod._buffers.items():
                if b is not None:
                    out.append((k, b.data_ptr(), tuple(b.shape), b.dtype))
    return tuple(out)


def _where(v) -> tuple:
    """A tensor's storage, or (a tensor without one: a torch.func wrapper) the object itself."""
    try:
        return (v.data_ptr(), tuple(v.shape), v.dtype)
    except RuntimeError:
        return (id(v), tuple(v.shape), v.dtype)


def _attributes(roots) -> list:
    """(module, name, storage) of the tensors the modules hold as plain attributes."""
    return [
        (mod, k, _where(v)) for r in roots for mod in r.modules() for k, v in vars(mod).items() if torch.is_tensor(v)
    ]


def _tensors(out) -> list:
    if torch.is_tensor(out):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    ts = [*out.sums.values(), out.norms, out.losses, *(out._masks or ())]  # a ClippedSum
    return ts + ([] if out.outputs is None else [out.outputs])


def _garbage(out) -> None:
    """Overwrite a graph's outputs (memory nobody may read)."""
    with torch.no_grad():
        for t in _tensors(out):
            if t.is_floating_point():
                t.fill_(float("nan"))
            elif t.dtype == torch.bool:
                t.logical_not_()
            else:
                t.fill_(-1)


def _copy_into(mine, new) -> None:
    with torch.no_grad():
        for a, b in zip(_tensors(mine), _tensors(new)):
            a.copy_(b)


def _strict_record(self, static):
    """A capture on the CPU: the outputs garbage until the first replay; a replay recomputes into them after
    checking that the model is in the state of the capture."""
    type(self).captures += 1
    if hasattr(self, "_roots"):  # the clipped sum: the model's and the criterion's tensors
        roots, session = self._roots, None
    else:  # the loss check: the criterion's tensors (a class weight), and its kind, which is read in Python
        session = self.fn.__self__
        roots = (session.criterion,) if isinstance(session.criterion, nn.Module) else ()
    kind = getattr(session, "_criterion_sum", None)
    outputs = self.fn(*static)
    _garbage(outputs)
    state, held = _state(roots), _attributes(roots)
    fn, cls = self.fn, type(self)

    class Graph:
        def replay(self):
            what = cls.__name__
            if _state(roots) != state:
                raise StaleReplay(
                    f"{what}: a graph replayed with other parameters, buffers or modes than its capture's"
                )
            for mod, k, storage in held:
                v = getattr(mod, k, None)
                if not torch.is_tensor(v) or _where(v) != storage:
                    raise StaleReplay(f"{what}: a graph replayed after the tensor attribute `{k}` it read was replaced")
            if getattr(session, "_criterion_sum", None) != kind:
                raise StaleReplay(f"{what}: a loss check replayed after the criterion's kind changed")
            cls.replayed += 1
            _copy_into(outputs, fn(*static))

    return Graph(), outputs


def _no_warm_up(self, static):
    type(self).warmups += 1


class Strict:
    device_type = "cpu"
    captures = warmups = replayed = 0
    _record = _strict_record
    _warm_up = _no_warm_up


class StrictClippedSum(Strict, cg.GraphedClippedSum):
    pass


class StrictCheck(Strict, cg.Replayer):
    pass


class StrictPaddedCheck(Strict, cg.GraphedLossCheck):
    pass


class DroppedToGarbage(cg._Captured):
    def drop(self):
        if self.outputs is not None:  # the pool's memory back to the device: anything may be written there
            _garbage(self.outputs)
        super().drop()


SIMULATED = (StrictClippedSum, StrictCheck, StrictPaddedCheck)


@pytest.fixture(autouse=True, scope="module")
def simulated():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cg, "GraphedClippedSum", StrictClippedSum)
        mp.setattr(cg, "Replayer", StrictCheck)
        mp.setattr(cg, "GraphedLossCheck", StrictPaddedCheck)
        mp.setattr(cg, "_Captured", DroppedToGarbage)
        yield


# --- the model, the data and a run ----------------------------------------------------------------------------


class Net(nn.Module):
    """A small model with what a state change can touch: two layers (one may be frozen), a dropout (p = 0) and a
    LayerNorm (their train flags change nothing but the key), a buffer, a plain tensor attribute the forward reads
    and a cache the forward makes when it has none. The cache is kept only when it is a plain tensor: a forward
    under torch.func (the vmap path, which a batch of one takes) makes a wrapper without storage, which turns the
    replays off (the test at the end), and the random runs check the replays."""

    keep_any_cache = False

    def __init__(self, dtype):
        super().__init__()
        self.a = nn.Linear(5, 8, dtype=dtype)
        self.norm = nn.LayerNorm(8, dtype=dtype)
        self.drop = nn.Dropout(0.0)
        self.b = nn.Linear(8, 3, dtype=dtype)
        self.register_buffer("shift", torch.zeros(8, dtype=dtype))
        self.scale = torch.ones(5, dtype=dtype)

    def forward(self, x):
        cache = getattr(self, "_cache", None)
        if cache is None:
            cache = torch.full((3,), 0.1, dtype=x.dtype)
            if self.keep_any_cache or not torch._C._functorch.is_functorch_wrapped_tensor(cache):
                self._cache = cache
        h = self.drop(torch.tanh(self.norm(self.a(x * self.scale)) + self.shift))
        return self.b(h) + cache


def _replace_data(p, factor: float) -> None:
    p.data = p.data * factor  # the same Parameter, a new tensor (another storage)


def _in_place(t, factor: float) -> None:
    with torch.no_grad():
        t.mul_(factor)  # the same storage: a graph reads the new values


# state changes made between steps, each one line of a user's loop, on the model and the criterion (both runs make
# the same ones)
EVENTS = {
    "freeze a": lambda m, crit: m.a.requires_grad_(False),
    "unfreeze a": lambda m, crit: m.a.requires_grad_(True),
    "toggle dropout": lambda m, crit: m.drop.train(not m.drop.training),
    "toggle norm": lambda m, crit: m.norm.train(not m.norm.training),
    "toggle model": lambda m, crit: m.train(not m.training),  # (the inner model; the private one stays in train)
    "replace scale": lambda m, crit: setattr(m, "scale", m.scale * 0.9),
    "scale in place": lambda m, crit: _in_place(m.scale, 1.1),
    "drop cache": lambda m, crit: delattr(m, "_cache") if hasattr(m, "_cache") else None,
    "replace buffer": lambda m, crit: setattr(m, "shift", m.shift + 0.01),
    "replace b.weight data": lambda m, crit: _replace_data(m.b.weight, 0.95),
    "replace a.bias data": lambda m, crit: _replace_data(m.a.bias, 1.0),
    "b.weight in place": lambda m, crit: _in_place(m.b.weight, 0.9),
    # (the criterion's class weights replaced, all equal: the same loss, a new buffer)
    "replace class weights": lambda m, crit: setattr(crit, "weight", crit.weight * 0.5),
}
RANDOM_EVENTS = sorted(EVENTS)
# what makes the loop's step refused from a step on: the documented refusals, CriterionMismatchError (a loss that is
# not the criterion's, a gradient reaching a parameter directly) and UnnoisedParameterError (a frozen parameter
# given a gradient by hand)
REFUSALS = ("wrong loss", "regulariser", "hand gradient")


@dataclasses.dataclass(frozen=True)
class Plan:
    n: int
    sampling: str
    seed: int = 1
    dtype: torch.dtype = torch.float32
    chunk: int | None = None  # max_physical_batch_size
    events: tuple = ()  # (step, name): the state change named, made just before that step
    refuse: tuple | None = None  # (step, one of REFUSALS): done from that step on
    momentum: float = 0.0


def data(n: int, dtype):
    g = torch.Generator().manual_seed(n)
    return TensorDataset(torch.randn(n, 5, generator=g, dtype=dtype), torch.randint(0, 3, (n,), generator=g))


def flat(m) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


@dataclasses.dataclass
class Outcome:
    params: list  # the parameters after each step taken
    taken: int
    refusal: tuple | None  # (error class, the step it names)
    status: str | None
    replayers: tuple = ()


def uniform_class_weights(dtype) -> nn.Module:
    return nn.CrossEntropyLoss(weight=torch.ones(3, dtype=dtype))  # (a mean of per-example losses)


def run(plan: Plan, cuda_graph: bool, criterion=uniform_class_weights, events=EVENTS, model=Net) -> Outcome:
    """The ordinary loop over the private loader, with the plan's state changes and refusals."""
    for cls in SIMULATED:
        cls.captures = cls.warmups = cls.replayed = 0
    torch.manual_seed(0)
    m, crit = model(plan.dtype), criterion(plan.dtype)
    model, opt, loader = dt.make_private(
        mechanism(plan.n, plan.sampling),
        m,
        torch.optim.SGD(m.parameters(), lr=0.5, momentum=plan.momentum),
        data(plan.n, plan.dtype),
        criterion=crit,
        seed=plan.seed,
        cuda_graph=cuda_graph,
        max_physical_batch_size=plan.chunk,
    )
    refuse_at, how = plan.refuse or (STEPS + 1, None)

    def change(step: int) -> dict:
        for at, name in plan.events:
            if at == step:
                events[name](m, crit)
        if step == refuse_at and how == "hand gradient":
            m.a.requires_grad_(False)
        return {k: p.detach().clone() for k, p in m.named_parameters() if not p.requires_grad}

    params: list = []
    refusal = None
    frozen = change(1)
    try:
        while opt.steps_remaining:
            for xb, yb in loader:
                step = opt.steps_taken + 1
                opt.zero_grad()
                loss = crit(model(xb), yb)
                if step >= refuse_at and how == "wrong loss":
                    loss = 3 * loss
                elif step >= refuse_at and how == "regulariser":
                    loss = loss + 0.01 * m.b.weight.pow(2).sum()
                loss.backward()
                if step >= refuse_at and how == "hand gradient":
                    m.a.weight.grad = torch.zeros_like(m.a.weight)
                opt.step()
                if opt.steps_taken == step:  # (the last chunk of a virtual batch)
                    params.append(flat(m))
                    # a frozen parameter is not stepped (its .grad is None after zero_grad: the optimizer skips it)
                    for k, p in m.named_parameters():
                        if k in frozen:
                            assert torch.equal(p.detach(), frozen[k]), k
                    frozen = change(step + 1)
    except (CriterionMismatchError, UnnoisedParameterError) as e:  # the documented refusals
        at = re.search(r"at step (\d+)", str(e))
        refusal = (type(e).__name__, int(at.group(1)) if at else None)
    s = model._session
    replayers = (s.backend.graphed, s._verdict) if cuda_graph else ()
    return Outcome(params, opt.steps_taken, refusal, model.cuda_graph_status, replayers)


STATUS = re.compile(
    r"(?P<replays>\d+) step\(s\) replayed from (?P<graphs>\d+) CUDA graph\(s\)"
    r"|not replayed yet: (warming up \([12] of 2 eager steps of this batch shape\)"
    rf"|{cg.MAX_GRAPHS} graphs are taken and the batch's shape or the model's state is new|no step yet)"
)


def check_graphed(eager: Outcome, graphed: Outcome, atol: float | None, fallback: str | None = None) -> None:
    """The graphed run is the eager run (``atol`` None: bit for bit), and its status is well formed; ``fallback``:
    the replays were turned off by a capture that failed with that message (the eager step from then on)."""
    assert eager.status is None
    assert (graphed.taken, graphed.refusal) == (eager.taken, eager.refusal)
    assert len(graphed.params) == len(eager.params) == eager.taken
    for step, (g, e) in enumerate(zip(graphed.params, eager.params), 1):
        assert g.dtype == e.dtype
        if atol is None:
            assert torch.equal(g, e), f"step {step}: {(g - e).abs().max():.3g}"
        else:
            assert torch.allclose(g, e, rtol=0, atol=atol), f"step {step}: {(g - e).abs().max():.3g}"
    if fallback is not None:
        assert graphed.status.startswith("not replayed: the capture failed") and fallback in graphed.status
        assert all(r.disabled is not None and not r._graphs for r in graphed.replayers)
        return
    assert STATUS.fullmatch(graphed.status), graphed.status
    for r in graphed.replayers:
        assert r.disabled is None  # (no simulated capture fails)
        done = STATUS.fullmatch(r.status)
        assert done, r.status
        assert len(r._graphs) + len(r._known) <= cg.MAX_GRAPHS
        if done["graphs"] is not None:
            assert int(done["graphs"]) == len(r._graphs) + len(r._known) and int(done["replays"]) == r.replays
    # every replay counted was a replay of a live graph
    assert sum(r.replays for r in graphed.replayers) == sum(cls.replayed for cls in SIMULATED)


def check(plan: Plan) -> Outcome:
    eager, graphed = run(plan, False), run(plan, True)
    # Poisson batches are padded: the sums run over the padding rows' zeros too, which changes the order of the
    # floating-point additions (docs/training.md); fixed-size batches are not padded and agree bit for bit
    check_graphed(eager, graphed, POISSON_ATOL[plan.dtype] if plan.sampling.startswith("poisson") else None)
    return graphed


DTYPES = st.sampled_from([torch.float32, torch.float64])
SEEDS = st.integers(0, 2**16)
CHUNKS = st.none() | st.integers(2, 7)


@settings(max_examples=30, deadline=None)
@given(config=st.sampled_from(POISSON), seed=SEEDS, dtype=DTYPES, chunk=CHUNKS)
def test_poisson_runs_in_padded_sizes_of_random_order_are_the_eager_runs(config, seed, dtype, chunk):
    """Poisson batches (an empty one now and then) in two or three padded sizes in the order the seed draws them,
    whole or in chunks of different sizes within a step: the graphed run's parameters after every step are the
    eager run's, up to the order of the additions over the padding rows."""
    graphed = check(Plan(*config, seed=seed, dtype=dtype, chunk=chunk))
    assert graphed.taken == STEPS


@settings(max_examples=40, deadline=None)
@given(
    config=st.sampled_from(FIXED + POISSON),
    seed=SEEDS,
    dtype=DTYPES,
    chunk=CHUNKS,
    events=st.lists(st.tuples(st.integers(2, STEPS), st.sampled_from(RANDOM_EVENTS)), max_size=8),
    refuse=st.none() | st.none() | st.tuples(st.integers(1, STEPS), st.sampled_from(REFUSALS)),
    momentum=st.sampled_from([0.0, 0.5]),
)
def test_state_changes_between_steps_are_the_eager_runs(config, seed, dtype, chunk, events, refuse, momentum):
    """Random interleavings, between steps, of a layer frozen and unfrozen, train/eval toggles, a tensor attribute,
    a buffer or a parameter's data replaced or changed in place, a cache dropped, and a loop that from some step on
    is refused: the graphed run takes the eager run's steps (bit for bit with fixed-size batches), is refused where
    it is, and never replays a graph under another state than its capture's."""
    check(Plan(*config, seed, dtype, chunk, tuple(events), refuse, momentum))


def test_the_properties_are_not_vacuous():
    """A fixed-size run with a state change every few steps replays between them; one with a new state at every
    step keeps each function within MAX_GRAPHS graphs (the rest run eagerly)."""
    n, sampling = FIXED[0]
    events = ((4, "replace b.weight data"), (6, "toggle norm"), (8, "replace scale"), (10, "freeze a"))
    graphed = check(Plan(n, sampling, events=events))
    assert graphed.replayers[0].replays >= 3 and StrictClippedSum.captures >= 3
    # chunks of 2 rows, three a step: each state's graph is captured at its step's third chunk
    graphed = check(Plan(n, sampling, chunk=2, events=tuple((s, "replace b.weight data") for s in range(2, 13))))
    clipped_sum = graphed.replayers[0]
    assert len(clipped_sum._graphs) + len(clipped_sum._known) == cg.MAX_GRAPHS
    assert clipped_sum._last_eager.startswith(f"{cg.MAX_GRAPHS} graphs are taken")


@pytest.mark.parametrize(
    "hole, event",
    [
        ("_state_key", "replace b.weight data"),  # a key that leaves out the parameters
        ("_current", "replace scale"),  # a graph never found stale
    ],
)
def test_the_strict_simulation_catches_a_graph_replayed_under_another_state(monkeypatch, hole, event):
    """The harness has teeth: with the key or the staleness check of cuda_graph.py knocked out, a replay under
    another state than its capture's is caught (a real graph would read the old tensors' memory)."""
    if hole == "_state_key":
        monkeypatch.setattr(StrictClippedSum, "_state_key", lambda self: (cg._autocast_state(torch),))
    else:
        monkeypatch.setattr(StrictClippedSum, "_current", lambda self, captured: True)
    with pytest.raises(StaleReplay, match="StrictClippedSum"):
        run(Plan(*FIXED[0], events=((5, event),)), True)


# --- the loss check's graph and the criterion's tensors ---------------------------------------------------------

W1, W2 = (1.0, 2.0, 3.0), (3.0, 1.0, 0.5)


def summed_class_weights(dtype) -> nn.Module:
    crit = nn.CrossEntropyLoss(weight=torch.tensor(W1, dtype=dtype), reduction="sum")  # a sum of per-example losses
    crit.w1, crit.w2 = crit.weight, torch.tensor(W2, dtype=dtype)  # (both kept alive: no memory is freed)
    return crit


CLASS_WEIGHTS = {
    **EVENTS,
    "class weights w1": lambda m, crit: setattr(crit, "weight", crit.w1),
    "class weights w2": lambda m, crit: setattr(crit, "weight", crit.w2),
}


def _record_reading_the_capture_s_criterion(self, static):
    """A capture of the loss check whose replay reads the criterion's buffers of the capture, as a CUDA graph reads
    their memory (here still alive: the other weights)."""
    crit = self.fn.__self__.criterion
    held = dict(crit._buffers)
    outputs = self.fn(*static)
    fn = self.fn

    class Graph:
        def replay(self):
            now = dict(crit._buffers)
            crit._buffers.update(held)
            try:
                _copy_into(outputs, fn(*static))
            finally:
                crit._buffers.update(now)

    return Graph(), outputs


@pytest.mark.parametrize(
    "events, chunk",
    [
        # the weights back to w1 at step 8: the clipped sum's dropped w1 graph is captured again without a release,
        # and the loss check's graph, captured under w2 at steps 6-7, is replayed
        (((6, "class weights w2"), (8, "class weights w1")), None),
        # the clipped sum's six graphs taken (a new state at steps 1-6, one graph each): w2 at step 7 is a new key
        # that runs eagerly without a release, and the loss check's graph of w1 is replayed
        (tuple((s, "replace b.weight data") for s in range(2, 7)) + ((7, "class weights w2"),), 2),
    ],
    ids=["weights back", "graphs taken"],
)
def test_the_loss_check_s_graph_follows_the_criterion_s_class_weights(monkeypatch, events, chunk):
    """A summing criterion with class weights that the loop changes between steps (both weight tensors alive): the
    eager run takes every step, and so does the graphed run, whose loss check is keyed by the criterion's buffers.
    (Before: its graph, replayed after the change, read the weights of its capture and refused the right loss of
    that step with CriterionMismatchError, and the strict simulation found the stale replay.)"""
    plan = Plan(*FIXED[0], chunk=chunk, events=events)
    eager = run(plan, False, summed_class_weights, CLASS_WEIGHTS)
    assert (eager.taken, eager.refusal) == (STEPS, None)
    with monkeypatch.context() as mp:
        mp.setattr(StrictCheck, "_record", _record_reading_the_capture_s_criterion)
        graphed = run(plan, True, summed_class_weights, CLASS_WEIGHTS)
    assert (graphed.taken, graphed.refusal) == (eager.taken, eager.refusal)  # (before: refused at step 8, or 7)
    check_graphed(eager, run(plan, True, summed_class_weights, CLASS_WEIGHTS), None)  # (before: StaleReplay)


# --- a tensor attribute without storage ----------------------------------------------------------------------------


class CachesAnything(Net):
    keep_any_cache = True  # (the cache its first forward makes, under torch.func: a wrapper without storage)


def test_a_cache_made_under_torch_func_does_not_stop_the_graphed_run():
    """Batches of one take the vmap path, so the forward that makes the model's cache runs under torch.func and the
    cache is a wrapper without storage. The eager run trains with it; a graph that read it could not tell when it
    is replaced, so the capture fails and the graphed run is the eager run from then on (it used to raise out of
    the step)."""
    plan = Plan(24, "without_replacement(batch_size = 1)")
    eager = run(plan, False, model=CachesAnything)
    assert (eager.taken, eager.refusal) == (STEPS, None)
    check_graphed(eager, run(plan, True, model=CachesAnything), None, fallback="has no storage (made under torch.func)")
