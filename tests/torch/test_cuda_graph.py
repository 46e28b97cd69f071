"""make_private(cuda_graph=True): the clipped sum replayed as a CUDA graph (dpspec.torch.cuda_graph).

Without a GPU the capture is simulated: a "graph" that, on replay, recomputes the clipped sum from the
captured input buffers and writes it into the captured output tensors — what a CUDA graph does to its own
memory. That is enough to check what the wrapper adds: the warm-up, the keys, that a replay reads the new
batch and hands each step fresh tensors (the noise is added into them in place, and a virtual batch keeps
several chunks), the fallback when a capture fails, and that a graphed run is the eager run. The real
capture is tested in test_cuda_steps.py (on a GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
import dpspec.torch.cuda_graph as cg
from dpspec.mechanisms.per_example import clipped_grad_sum

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loops import train_to_the_end  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings(
    "ignore::dpspec.torch.SamplingOverrideWarning", "ignore:There is a performance drop"
)

SPEC = """
privacy people {{ unit record  dataset_size 48 }}
train model {{
  protect   people
  mechanism dpsgd
  sampling  {sampling}
  clipping  flat(C = 0.7)
  steps     {steps}
  guarantee dp(epsilon = 4, delta = 1e-5)
}}
"""


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)
        self.drop = nn.Dropout(0.0)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(self.drop(torch.relu(self.norm(self.conv(x)))).flatten(1))


def _copy_into(mine, new):
    """Writes ``new``'s values into ``mine``'s tensors (what a replay does to the graph's outputs)."""
    if torch.is_tensor(mine):
        mine.copy_(new)
    elif isinstance(mine, (tuple, list)):
        for a, b in zip(mine, new):
            _copy_into(a, b)
    else:  # a ClippedSum
        for k, v in mine.sums.items():
            v.copy_(new.sums[k])
        _copy_into((mine.norms, mine.losses, *mine._masks), (new.norms, new.losses, *new._masks))
        if mine.outputs is not None:
            mine.outputs.copy_(new.outputs)


def _simulated_warm_up(self, static):
    type(self).warmups += 1  # (a shape's first capture; a graph dropped by the pool's release has none)
    self._audited(static)  # (as on CUDA: its reads checked)


def _simulated_record(self, static):
    """A capture on the CPU: the replay recomputes into the captured outputs (as a graph writes its memory)."""
    if type(self).fail:
        raise RuntimeError(type(self).fail)
    type(self).captures += 1
    outputs = self._audited(static)  # (as on CUDA: the capture's own reads checked)
    fn = self.fn

    class Graph:
        def replay(self):
            _copy_into(outputs, fn(*static))

    return Graph(), outputs


class Simulated(cg.GraphedClippedSum):
    device_type = "cpu"
    fail: str | None = None
    captures = warmups = 0
    _record = _simulated_record
    _warm_up = _simulated_warm_up


class SimulatedCheck(cg.Replayer):
    device_type = "cpu"
    fail: str | None = None
    captures = warmups = 0
    _record = _simulated_record
    _warm_up = _simulated_warm_up


class SimulatedPaddedCheck(cg.GraphedLossCheck):
    device_type = "cpu"
    fail: str | None = None
    captures = warmups = 0
    _record = _simulated_record
    _warm_up = _simulated_warm_up


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    monkeypatch.setattr(cg, "GraphedClippedSum", Simulated)
    monkeypatch.setattr(cg, "Replayer", SimulatedCheck)
    monkeypatch.setattr(cg, "GraphedLossCheck", SimulatedPaddedCheck)
    for cls in (Simulated, SimulatedCheck, SimulatedPaddedCheck):
        cls.fail, cls.captures, cls.warmups = None, 0, 0


def data():
    g = torch.Generator().manual_seed(2)
    return TensorDataset(torch.randn(48, 1, 6, 6, generator=g), torch.randint(0, 3, (48,), generator=g))


def model_and_data(dtype=None):
    """A seeded CNN and the data, both in ``dtype`` if given (the targets stay integers)."""
    torch.manual_seed(0)
    m, ds = CNN(), data()
    if dtype is not None:
        m = m.to(dtype)
        ds = TensorDataset(ds.tensors[0].to(dtype), ds.tensors[1])
    return m, ds


def train(cuda_graph, sampling="without_replacement(batch_size = 12)", steps=7, keep=None, dtype=None, **kw):
    m, ds = model_and_data(dtype)
    model, opt, loader = dt.make_private(
        dpspec.compile(SPEC.format(sampling=sampling, steps=steps)),
        m,
        torch.optim.SGD(m.parameters(), lr=0.5),
        ds,
        seed=4,
        cuda_graph=cuda_graph,
        **kw,
    )
    while opt.steps_remaining:
        for xb, yb in loader:
            opt.zero_grad()
            out = model(xb)
            if keep is not None:
                keep.append(out)
            nn.functional.cross_entropy(out, yb).backward()
            opt.step()
    return m, model


def flat(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def test_a_graphed_run_is_the_eager_run():
    eager, _ = train(False)
    kept: list = []
    graphed, model = train(True, keep=kept)
    assert torch.equal(flat(graphed), flat(eager))
    # steps 1 and 2 warm up eagerly; the third is captured, and it and the rest are replayed
    assert Simulated.captures == 1
    assert model.cuda_graph_status == "5 step(s) replayed from 1 CUDA graph(s)"
    # every step's output is its own tensor: a later replay does not overwrite what the loop kept
    assert len({o.data_ptr() for o in kept}) == len(kept)
    assert not any(torch.equal(a, b) for a, b in zip(kept, kept[1:]))


def test_virtual_batches_keep_each_chunk_s_sums():
    """Two chunks of one shape replay the same graph within a step: each keeps its own sums."""
    eager, _ = train(False, max_physical_batch_size=6)
    graphed, model = train(True, max_physical_batch_size=6)
    assert torch.allclose(flat(graphed), flat(eager), rtol=0, atol=1e-6)
    assert model.cuda_graph_status.startswith("12 step(s) replayed from 1")  # 7 steps × 2 chunks, 2 warm-up


def test_a_failed_capture_falls_back_to_the_eager_step():
    eager, _ = train(False)
    Simulated.fail = "operation not permitted when stream is capturing"
    graphed, model = train(True)
    assert torch.equal(flat(graphed), flat(eager))
    assert model.cuda_graph_status.startswith("not replayed: the capture failed (RuntimeError: operation not")


def test_poisson_batches_are_padded_to_a_few_sizes():
    """Poisson batches vary in size: each is padded to the next multiple of a width (here 8, for qN = 12),
    the padding rows marked so that they contribute nothing. The run is the eager run (up to the order of
    the additions: the sums run over the padded rows' zeros too), from a few graphs."""
    eager, _ = train(False, sampling="poisson(rate = 0.25)", steps=30)
    graphed, model = train(True, sampling="poisson(rate = 0.25)", steps=30)
    assert torch.allclose(flat(graphed), flat(eager), rtol=0, atol=1e-6)
    import re

    done = re.fullmatch(r"(\d+) step\(s\) replayed from (\d+) CUDA graph\(s\)", model.cuda_graph_status)
    replayed, graphs = (int(w) for w in done.groups())
    assert graphs <= 3 and replayed >= 30 - 2 * graphs - 2  # the sizes 8, 16, 24 (each warmed up twice)
    # the loss check is padded to the same sizes and replayed too
    check = model._session._verdict
    assert SimulatedCheck.captures == 0 and 1 <= SimulatedPaddedCheck.warmups <= 3
    assert check.status.startswith(f"{check.replays} step(s) replayed from") and check.replays >= 20
    assert check.pools is model._session.backend.graphed.pools
    # the loss check is light (warms up beside the pool); the clipped sum releases the pool for a new size
    assert check.light and not model._session.backend.graphed.light


def _poisson_loop(loss_of, cuda_graph=True, steps=16, criterion=None, dtype=None):
    """A Poisson run (qN = 12, padded to multiples of 8) whose loop back-propagates ``loss_of(output, y, step)``,
    with the model and inputs in ``dtype`` if given: the steps it took, and the step named by the
    CriterionMismatchError that stopped it (None if none did)."""
    from dpspec.torch import CriterionMismatchError

    m, ds = model_and_data(dtype)
    kw = {} if criterion is None else {"criterion": criterion}
    model, opt, loader = dt.make_private(
        dpspec.compile(SPEC.format(sampling="poisson(rate = 0.25)", steps=steps)),
        m,
        torch.optim.SGD(m.parameters(), lr=0.5),
        ds,
        seed=4,
        cuda_graph=cuda_graph,
        **kw,
    )
    taken = 0
    try:
        while opt.steps_remaining:
            for xb, yb in loader:
                opt.zero_grad()
                loss_of(model(xb), yb, taken + 1).backward()
                opt.step()
                taken += 1
    except CriterionMismatchError as e:
        import re

        at = re.search(r"at step (\d+)", str(e))
        return taken, int(at.group(1)) if at else 0
    return taken, None


def _ce_sum(o, t):
    return nn.functional.cross_entropy(o, t, reduction="sum")


@pytest.mark.parametrize("criterion", [None, _ce_sum], ids=["mean", "sum"])
def test_the_padded_loss_check_decides_as_the_eager_check(criterion):
    """Poisson batches' loss check, padded and replayed, takes the eager check's decisions: for a criterion that
    averages or sums its examples, and a loop that back-propagates the mean, the sum, or (from step 12, after
    the captures) the criterion's loss as if the batch had its padded size — what a check that mixed up the
    padded and the real size would take; a refusal comes a step late, naming the same step."""
    outcomes = {}
    for scale in ("mean", "sum", "padded"):

        def loss_of(o, t, step, scale=scale):
            per = nn.functional.cross_entropy(o, t, reduction="none")
            if scale == "sum":
                return per.sum()
            if scale == "padded":  # the criterion's own loss, then scaled as if the batch had its padded size
                S, B = -(-o.shape[0] // 8) * 8, o.shape[0]
                if step < 12:
                    return per.mean() if criterion is None else per.sum()
                return per.sum() / S if criterion is None else per.sum() * S / B
            return per.mean()

        SimulatedPaddedCheck.captures = 0
        got = _poisson_loop(loss_of, criterion=criterion)
        assert SimulatedPaddedCheck.captures >= (1 if got[0] >= 8 else 0)
        outcomes[scale] = got
        assert got == _poisson_loop(loss_of, cuda_graph=False, criterion=criterion), scale
    # the decisions themselves: the criterion's own reduction passes, the padded scale is refused at step 12
    assert outcomes["mean" if criterion is None else "sum"] == (16, None)
    assert outcomes["padded"] == (12, 12)


@pytest.mark.parametrize("method", ["ghost", "rules", "vmap", "loop"])
def test_padding_rows_never_reach_the_sums(method):
    """Whatever the padding rows hold (another example, huge or non-finite values), the clipped sum of the
    padded batch is the batch's, and its records of the real rows are the batch's."""
    torch.manual_seed(0)
    if method == "ghost":
        m = nn.Sequential(nn.Linear(36, 8), nn.Tanh(), nn.Linear(8, 3))
    else:
        m = CNN()
    X, y = data().tensors
    X = X.flatten(1) if method == "ghost" else X
    x, t = X[:5], y[:5]
    ref = clipped_grad_sum(m, nn.functional.cross_entropy, x, t, clip=0.7, method=method)
    for junk in (X[5:8], torch.full_like(X[5:8], 1e6), torch.full_like(X[5:8], float("nan"))):
        xp, tp = torch.cat([x, junk]), torch.cat([t, y[5:8]])
        pad = torch.arange(8) >= 5
        got = clipped_grad_sum(m, nn.functional.cross_entropy, xp, tp, clip=0.7, method=method, pad=pad)
        for k in ref.sums:
            assert torch.allclose(got.sums[k], ref.sums[k], rtol=1e-6, atol=1e-7), (method, k)
        assert torch.allclose(got.norms[:5], ref.norms)
        assert got._masks[0][5:].all() and not got._masks[0][:5].any()


def test_without_the_option_nothing_is_graphed_and_cpu_batches_say_why(monkeypatch):
    _, model = train(False)
    assert model.cuda_graph_status is None
    monkeypatch.setattr(Simulated, "device_type", "cuda")
    monkeypatch.setattr(SimulatedCheck, "device_type", "cuda")
    _, model = train(True)
    assert model.cuda_graph_status == "not replayed yet: the batch is on cpu, not CUDA"
    assert Simulated.captures == SimulatedCheck.captures == 0


def test_a_replay_reads_the_new_batch_and_the_clip_holds():
    """The replay on a neighbouring batch (one example replaced by a huge one) is the eager clipped sum of
    that batch, and moves the sum by at most 2C."""
    torch.manual_seed(0)
    m = CNN()
    X, y = data().tensors
    X, y = X[:12], y[:12]

    def fn(x, t, pad=None):
        return clipped_grad_sum(m, nn.functional.cross_entropy, x, t, clip=0.7, pad=pad)

    g = Simulated(fn, m)
    for _ in range(cg.WARMUP + 1):
        first = g(X, y)
    assert first.graphed
    X2 = X.clone()
    X2[5] = 1e4
    second = g(X2, y)
    assert second.graphed and g.replays == 2
    ref = fn(X2, y)
    for k in ref.sums:
        assert torch.equal(second.sums[k], ref.sums[k])
    assert not torch.equal(first.sums["fc.weight"], second.sums["fc.weight"])  # fresh tensors, not the graph's
    moved = torch.cat([(first.sums[k] - second.sums[k]).reshape(-1) for k in ref.sums]).norm()
    assert moved <= 2 * 0.7 * (1 + 1e-6)


def test_keys_a_replaced_parameter_and_a_mode_change():
    torch.manual_seed(0)
    m = CNN()
    X, y = data().tensors
    X, y = X[:8], y[:8]
    m.conv.table = torch.zeros(2)  # a plain tensor attribute
    g = Simulated(lambda x, t, pad: clipped_grad_sum(m, nn.functional.cross_entropy, x, t, clip=1.0, pad=pad), m)
    for _ in range(cg.WARMUP + 2):
        g(X, y)
    assert Simulated.captures == 1 and g.replays == 2
    m.conv.table = torch.zeros(2)  # replaced: the graph would read the old tensor's memory
    assert not g(X, y).graphed
    for _ in range(cg.WARMUP):
        g(X, y)
    assert g(X, y).graphed
    m.fc.weight = nn.Parameter(m.fc.weight.detach().clone())  # a new tensor: the old graph would read the old one
    assert not g(X, y).graphed  # a new key: warming up again
    m.drop.eval()
    assert not g(X, y).graphed
    for _ in range(cg.WARMUP):
        g(X, y)
    assert g(X, y).graphed  # captured again under the new key
    m.drop.mask = torch.ones(3)  # a tensor attribute the capture did not see: the graph cannot have read it
    assert g(X, y).graphed
    m.register_buffer("scale", torch.ones(1))
    assert not g(X, y).graphed  # a new buffer: a new key
    assert g(X[:4], y[:4]).graphed is False


class Cached(CNN):
    """A forward that makes a private table on its first call (after the wrapper is made) and reads it."""

    def forward(self, x):
        if not hasattr(self, "_table"):
            self._table = torch.ones(x.shape[1:])
        return super().forward(x * self._table)


def test_a_tensor_attribute_made_after_the_wrapper_or_private_is_watched():
    """A graph reads the memory of the tensors the modules hold: one replaced after the capture — a cache the
    forward made on its first call, a private attribute, the criterion's class weights — must not be read
    from the freed memory by a replay (it may hold anything: another example's activations). The graph is
    dropped and captured again after the warm-up."""
    torch.manual_seed(0)
    m = Cached()
    X, y = data().tensors
    X, y = X[:8], y[:8]
    crit = nn.CrossEntropyLoss(weight=torch.ones(3))
    g = Simulated(lambda x, t, pad: clipped_grad_sum(m, crit, x, t, clip=1.0, pad=pad), m, criterion=crit)
    for _ in range(cg.WARMUP + 2):
        last = g(X, y)
    assert last.graphed and Simulated.captures == 1
    m._table = torch.full_like(m._table, 2.0)  # made after the wrapper, private: replaced
    assert not g(X, y).graphed and not g._graphs  # dropped, not kept beside a new one
    for _ in range(cg.WARMUP):
        g(X, y)
    assert g(X, y).graphed and Simulated.captures == 2 and len(g._graphs) == 1
    crit.weight = torch.full((3,), 0.5)  # the criterion's buffer: a new key
    assert not g(X, y).graphed


def test_only_dp_sgd_trainings_take_the_option():
    srpp = dpspec.compile((ROOT / "specs" / "digits_srpp.dps").read_text())
    m = nn.Linear(5, 2)
    ds = TensorDataset(torch.randn(1400, 5), torch.randint(0, 2, (1400,)))
    with pytest.raises(ValueError, match="cuda_graph=True is for DP-SGD"):
        dt.make_private(srpp, m, torch.optim.SGD(m.parameters(), lr=0.1), ds, target="classifier", cuda_graph=True)


def test_the_loss_check_is_replayed_and_still_refuses_another_loss():
    """The loop-loss check (DPS165) is the second graph; a loss that stops being the criterion after the
    capture is refused (a step late, as without graphs)."""
    from dpspec.torch import CriterionMismatchError

    torch.manual_seed(0)
    m = CNN()
    model, opt, loader = dt.make_private(
        dpspec.compile(SPEC.format(sampling="without_replacement(batch_size = 12)", steps=8)),
        m,
        torch.optim.SGD(m.parameters(), lr=0.5),
        data(),
        seed=4,
        cuda_graph=True,
    )
    step = 0
    with pytest.raises(CriterionMismatchError, match="at step 6"):
        while opt.steps_remaining:
            for xb, yb in loader:
                step += 1
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xb), yb)
                (loss if step < 6 else 3 * loss).backward()
                opt.step()
    assert SimulatedCheck.captures == 1 and model._session._verdict.replays >= 3
    # the two graphs of the model share its memory pools (one per device): the capture of one may reuse the
    # other's working memory, which is dead once its replay ends
    assert model._session._verdict.pools is model._session.backend.graphed.pools
    assert step == 7  # step 6 was taken with the criterion's private gradient; the 7th is refused


def test_a_runtime_whose_clipped_sum_takes_no_pad_still_steps():
    """The backend asks for padding only when it pads: a DP-SGD runtime whose own ``_clipped_sum`` predates
    ``pad=`` (the audit's no_clipping mutant) steps through make_private as before."""
    from dpspec.families.dpsgd.audit import mutate

    compiled = dpspec.compile(SPEC.format(sampling="without_replacement(batch_size = 12)", steps=2))
    mech = mutate(compiled.mechanisms["model"], "no_clipping", 1.0)
    m = CNN()
    model, opt, loader = dt.make_private(mech, m, torch.optim.SGD(m.parameters(), lr=0.5), data(), seed=4)
    for xb, yb in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    assert opt.steps_taken == 2


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("sampling", ["without_replacement(batch_size = 12)", "poisson(rate = 0.25)"])
def test_float64_and_bfloat16_models_through_the_graph_path(dtype, sampling):
    """The replayed path (fresh copies, padding rows, the padding mask) keeps the parameters' dtype, and
    the run is the eager run: exactly with fixed-size batches, up to the sums' rounding over the padding
    rows' zeros (then cast to the parameters' dtype) with Poisson batches."""
    eager, _ = train(False, sampling=sampling, steps=12, dtype=dtype)
    graphed, model = train(True, sampling=sampling, steps=12, dtype=dtype)
    assert all(p.dtype == dtype for p in graphed.parameters())
    assert "replayed" in model.cuda_graph_status
    if sampling.startswith("without"):
        assert torch.equal(flat(graphed), flat(eager))
    else:
        tol = 1e-12 if dtype == torch.float64 else 2e-2
        assert torch.allclose(flat(graphed).double(), flat(eager).double(), rtol=tol, atol=tol)


def test_the_padded_loss_check_waits_for_a_batch_that_tells_a_sum_from_a_mean():
    """A first checked batch whose per-example output gradients are all 0 (a zero model on zero targets) matches
    the criterion's mean and its sum alike: the padded check, which must know which (a mean's padded gradient is
    rescaled, a sum's is not), waits for a batch that tells them apart. A summing criterion, decided a mean on
    such a batch, would have its later, right losses refused; the eager check takes them."""
    from torch.utils.data import TensorDataset as TD

    def crit(o, t):
        return nn.functional.mse_loss(o, t, reduction="sum")

    def run(cuda_graph):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Flatten(), nn.Linear(36, 3))
        with torch.no_grad():
            for p in m.parameters():
                p.zero_()
        g = torch.Generator().manual_seed(2)
        ds = TD(torch.randn(48, 1, 6, 6, generator=g), torch.zeros(48, 3))
        model, opt, loader = dt.make_private(
            dpspec.compile(SPEC.format(sampling="poisson(rate = 0.25)", steps=16)),
            m,
            torch.optim.SGD(m.parameters(), lr=0.5),
            ds,
            seed=4,
            cuda_graph=cuda_graph,
            criterion=crit,
        )
        train_to_the_end(model, opt, loader, crit)
        return model._session, opt.steps_taken

    assert run(False)[1] == 16  # (eager: the kind is not needed)
    s, taken = run(True)
    assert taken == 16 and s._criterion_sum is True
    assert SimulatedPaddedCheck.captures >= 1 and s._verdict.replays >= 5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
@pytest.mark.parametrize("wrong", [None, "scaled", "regularised", "coupled"])
def test_the_padded_loss_check_in_other_dtypes_refuses_as_the_eager_check(dtype, wrong):
    """Poisson batches' padded, replayed loss check in 16- and 64-bit: the criterion's loss passes; from step 10
    (after the captures) a scaled loss, one with a regulariser on the outputs, or one coupling the examples is
    refused, a step late, at the step the eager check names."""
    F = nn.functional

    def loss_of(o, t, step):
        if wrong is None or step < 10:
            return F.cross_entropy(o, t)
        if wrong == "scaled":
            return 3 * F.cross_entropy(o, t)
        if wrong == "regularised":
            return F.cross_entropy(o, t) + 0.05 * o.pow(2).mean()
        return F.cross_entropy(o - o.mean(dim=0, keepdim=True), t)

    eager = _poisson_loop(loss_of, cuda_graph=False, dtype=dtype)
    SimulatedPaddedCheck.captures = 0
    assert _poisson_loop(loss_of, dtype=dtype) == eager and SimulatedPaddedCheck.captures >= 1
    assert eager == ((16, None) if wrong is None else (10, 10))


def test_a_replay_on_another_stream_waits_for_the_last_replay_s(monkeypatch):
    """The graphs of a model share one memory pool, safe while they never run at once: a replay on another stream
    than the previous replay's (a forward and an optimizer.step() on two streams) first makes its stream wait for
    that one (queued on the device, no host wait); on the same stream nothing is added."""

    class Stream:
        def __init__(self, name):
            self.name, self.device_index, self.waited = name, 0, []

        def wait_stream(self, other):
            self.waited.append(other.name)

    a, b = Stream("a"), Stream("b")
    current = [a]
    monkeypatch.setattr(torch.cuda, "current_stream", lambda dev=None: current[0])
    pools, dev = cg.GraphPools(), torch.device("cuda", 0)
    pools.order(dev)
    pools.order(dev)
    assert a.waited == [] and pools.streams[0] is a
    current[0] = b
    pools.order(dev)
    assert b.waited == ["a"] and pools.streams[0] is b
    current[0] = a
    pools.order(dev)
    assert a.waited == ["b"]
    pools.order(torch.device("cpu"))  # (a CPU batch: nothing to order)
    assert pools.streams == {0: a}


class Recorded(cg.Replayer):
    """A Replayer on the CPU whose captures are simulated (a replay recomputes into the captured outputs). ``log``:
    (function name, rows, "warm-up" or "capture", whether any graph of the pool was held then), in order;
    ``eager``: whether fn runs as the eager step (not in a warm-up, capture or replay)."""

    device_type = "cpu"
    fail: str | None = None

    def __init__(self, fn, pools=None, light=False, log=None):
        super().__init__(fn, pools, light)
        self.log = [] if log is None else log
        self.eager = True

    def _held_now(self):
        return any(m._graphs for m in self.pools.members)

    def _warm_up(self, static):
        self.log.append((self.fn.__name__, static[0].shape[0], "warm-up", self._held_now()))
        self._inside(static)

    def _record(self, static):
        if type(self).fail:
            raise RuntimeError(type(self).fail)
        self.log.append((self.fn.__name__, static[0].shape[0], "capture", self._held_now()))
        outputs = self._inside(static)
        me = self

        class Graph:
            def replay(self):
                outputs.copy_(me._inside(static))

        return Graph(), outputs

    def _inside(self, static):
        self.eager = False
        try:
            return self.fn(*static)
        finally:
            self.eager = True


def _of(log, name, what=None):
    return [(rows, held) if what else (rows, kind) for n, rows, kind, held in log if n == name and what in (None, kind)]


def test_a_new_shape_warms_up_and_is_captured_with_the_pool_released():
    """Poisson batches come in a few padded sizes. A new size's eager warm-up steps and the warm-up before its
    capture run with the pool released (every graph in it dropped: an eager step cannot use a pool's free
    memory, so it would take a working set beside it). A dropped graph is captured again, without a warm-up,
    when its size comes back, after the function's dropped graphs of more rows (the pool released first if it
    holds one of fewer): a smaller graph's tensors fit in the blocks a larger one freed. A light function (the
    loss check) warms up beside the pool and releases nothing. Every replay is its own input's result."""
    pools = cg.GraphPools()
    held_at_eager: list = []

    def heavy(x):
        return (x * 2 + 1).sin()

    def check(x):
        return x.cos()

    log: list = []
    replayers: dict = {}

    def eager_step(fn):
        def step(x):
            if replayers[fn.__name__].eager:  # (not a warm-up, capture or replay)
                held_at_eager.append((fn.__name__, x.shape[0], any(m._graphs for m in pools.members)))
            return fn(x)

        step.__name__ = fn.__name__
        return step

    h = replayers["heavy"] = Recorded(eager_step(heavy), pools, log=log)
    c = replayers["check"] = Recorded(eager_step(check), pools, light=True, log=log)

    def step(rows):
        x = torch.randn(rows)
        assert torch.equal(h(x), heavy(x)) and torch.equal(c(x), check(x))

    for rows in [8] * (cg.WARMUP + 1):
        step(rows)
    assert [(n, r, k) for n, r, k, _ in log] == [
        ("heavy", 8, "warm-up"),
        ("heavy", 8, "capture"),
        ("check", 8, "warm-up"),
        ("check", 8, "capture"),
    ]
    held_at_eager.clear()
    log.clear()
    # a larger size: its warm-ups release the pool; the size-8 graphs come back without a warm-up
    for rows in [16, 8, 16, 8, 16]:
        step(rows)
    assert [(r, held) for n, r, held in held_at_eager if n == "heavy"] == [(16, False), (16, False)]
    assert _of(log, "heavy", "warm-up") == [(16, False)]  # (the pool released for it too)
    assert ("heavy", 8, "capture", False) in log and ("check", 8, "capture", True) in log
    log.clear()
    held_at_eager.clear()
    # a smaller size: its capture follows those of the larger graphs, from 16 rows down to 8
    for rows in [4] * (cg.WARMUP + 1):
        step(rows)
    assert _of(log, "heavy") == [(4, "warm-up"), (16, "capture"), (8, "capture"), (4, "capture")], log
    assert _of(log, "heavy", "warm-up") == [(4, False)]
    for rows in [16, 8, 4, 16]:
        step(rows)
    # a dropped graph that comes back before a larger one: the larger is captured again first
    for rows in [2] * cg.WARMUP:  # (warm-up steps of a new size: the pool released)
        step(rows)
    log.clear()
    step(8)
    assert _of(log, "heavy") == [(16, "capture"), (8, "capture")], log
    log.clear()
    step(4)
    step(16)
    assert _of(log, "heavy") == [(4, "capture")], log
    for rows in [3] * cg.WARMUP:
        step(rows)
    log.clear()
    step(4)
    assert _of(log, "heavy") == [(16, "capture"), (8, "capture"), (4, "capture")], log
    # the light check warms up a new size beside the pool and is captured into it: the heavy graphs stay
    held_at_eager.clear()
    log.clear()
    graphs = dict(h._graphs)
    for _ in range(cg.WARMUP + 1):
        x = torch.randn(32)
        assert torch.equal(c(x), check(x))
    assert held_at_eager == [("check", 32, True)] * cg.WARMUP and h._graphs == graphs
    assert _of(log, "check") == [(32, "warm-up"), (32, "capture")] and all(held for *_, held in log)
    assert h.status == f"{h.replays} step(s) replayed from 3 CUDA graph(s)" and not h.disabled
    assert c.status.endswith("replayed from 4 CUDA graph(s)")  # (8, 16, 4, 32)


def test_only_graphs_of_the_same_state_are_captured_again_first():
    """A dropped graph of another state of the model (other parameters, another mode: another key beyond the
    rows) is not captured again for this one: replayed under its key, it would read that state's tensors."""
    pools = cg.GraphPools()
    state = ["a"]

    class Stateful(Recorded):
        def _state_key(self):
            return (state[0],)

    h = Stateful(lambda x: x + 1, pools)
    for rows in [16] * (cg.WARMUP + 1):
        h(torch.zeros(rows))
    state[0] = "b"
    h.log.clear()
    for rows in [8] * (cg.WARMUP + 1) + [4] * (cg.WARMUP + 1):
        h(torch.zeros(rows))
    assert [(r, k) for _, r, k, _ in h.log] == [
        (8, "warm-up"),
        (8, "capture"),
        (4, "warm-up"),
        (8, "capture"),
        (4, "capture"),
    ]


def test_a_larger_graph_captured_again_is_not_put_beside_a_smaller_one():
    """The safety net of the order: a dropped graph coming back while the pool holds a graph of the same function
    and state with fewer rows releases the pool first (here the larger graph alone was dropped)."""
    h = Recorded(lambda x: x + 1)
    for rows in [16] * (cg.WARMUP + 1) + [8] * (cg.WARMUP + 1):
        h(torch.zeros(rows))
    (k16,) = (k for k in h._graphs if cg._rows(k) == 16)
    h._graphs[k16].drop()
    h._known[k16] = h._graphs.pop(k16)
    h.log.clear()
    assert torch.equal(h(torch.zeros(16)), torch.ones(16))
    assert [(r, k, held) for _, r, k, held in h.log] == [(16, "capture", False)]
    assert [cg._rows(k) for k in h._known] == [8]


def test_a_failed_capture_turns_the_replays_off_and_the_pool_is_not_released_again():
    """A capture that fails — after a warm-up or again without one — turns the replays off (the eager step from
    now on), and no later release returns the pool's memory (some torch builds leave the allocator recording into
    the pool after a failed capture, and emptying the cache then trips an internal assert)."""
    pools = cg.GraphPools()
    h = Recorded(lambda x: x + 1, pools)
    c = Recorded(lambda x: x * 2, pools, light=True)
    for rows in [8] * (cg.WARMUP + 1) + [16] * (cg.WARMUP + 1):
        h(torch.zeros(rows))
        c(torch.zeros(rows))
    assert len(h._graphs) == len(h._known) == 1  # 8 dropped when 16 was warmed up
    Recorded.fail = "not permitted when stream is capturing"
    try:
        assert torch.equal(h(torch.zeros(8)), torch.ones(8))  # its capture again fails: the eager step
    finally:
        Recorded.fail = None
    assert h.disabled.startswith("the capture failed (RuntimeError: not permitted") and pools.broken
    assert h.status.startswith("not replayed: the capture failed")
    # the loss check sharing the pool: off too, its graphs dropped (nothing more is captured into the pool)
    assert c.disabled.startswith("a graph sharing its memory pool failed") and not c._graphs and not h._graphs
    n = len(c.log) + len(h.log)
    assert torch.equal(c(torch.zeros(4)), torch.zeros(4)) and torch.equal(h(torch.zeros(16)), torch.ones(16))
    for _ in range(cg.WARMUP + 1):
        c(torch.zeros(4))
    assert len(c.log) + len(h.log) == n
    pools.release(torch.device("cpu"))  # (a no-op now)


def test_a_failed_capture_of_a_larger_graph_stops_the_ones_after_it():
    """A failure while the larger graphs are captured again (before a smaller one) stops there: nothing more is
    captured and the step runs eagerly."""
    h = Recorded(lambda x: x + 1)
    for rows in [16] * (cg.WARMUP + 1) + [8] * (cg.WARMUP + 1) + [4] * cg.WARMUP:  # (4's warm-ups: released)
        h(torch.zeros(rows))
    h.log.clear()
    replays = h.replays
    Recorded.fail = "not permitted when stream is capturing"
    try:
        assert torch.equal(h(torch.zeros(8)), torch.ones(8))  # 16 fails first: 8 is not captured
    finally:
        Recorded.fail = None
    assert h.log == [] and h.disabled and h.replays == replays and not h._graphs


def test_known_graphs_count_toward_the_limit():
    h = Recorded(lambda x: x + 1)
    for size in range(1, cg.MAX_GRAPHS + 2):
        for _ in range(cg.WARMUP + 1):
            h(torch.zeros(size))
    assert len(h._graphs) + len(h._known) == cg.MAX_GRAPHS
    assert h._last_eager.startswith(f"{cg.MAX_GRAPHS} graphs are taken")
    # each size released the pool for its warm-ups and was captured once; those dropped came back when asked
    assert h.captured == cg.MAX_GRAPHS == len(h.log) - sum(1 for *_, k, _ in h.log if k == "warm-up")


def test_neighbouring_datasets_are_told_apart_only_through_the_record_s_clipped_term():
    """Two datasets that differ in one record (replaced by a huge one), run through graphed clipped sums of
    Poisson-like batches whose sizes come and go (warm-ups releasing the pool, graphs dropped and captured again,
    larger first): at every step the two sums are equal bit for bit when the record is not in the batch, and
    differ by at most 2C in ℓ2 norm when it is — the bound the certificate's sensitivity assumes."""
    C = 0.7
    torch.manual_seed(0)
    m = CNN()
    X, y = data().tensors
    X2 = X.clone()
    X2[0] = 1e4  # the neighbour: record 0 replaced

    def fn(x, t, pad=None):
        return clipped_grad_sum(m, nn.functional.cross_entropy, x, t, clip=C, pad=pad)

    def bucket(b):
        return -(-b // 8) * 8

    g, g2 = (Simulated(fn, m, bucket=bucket) for _ in range(2))
    rng = torch.Generator().manual_seed(3)
    sizes = [5, 7, 6, 12, 3, 14, 7, 20, 11, 4, 6, 13, 19, 2, 8, 15, 7, 22, 5, 9]
    seen_in = 0
    for b in sizes:
        idx = torch.randperm(48, generator=rng)[:b]
        a, a2 = g(X[idx], y[idx]), g2(X2[idx], y[idx])
        eager = fn(X[idx], y[idx])  # (each replay is its own batch's sum, up to the padding's order of additions)
        assert all(torch.allclose(a.sums[k], eager.sums[k], rtol=0, atol=1e-6) for k in a.sums), b
        diff = torch.cat([(a.sums[k] - a2.sums[k]).reshape(-1) for k in a.sums]).norm()
        if (idx == 0).any():
            seen_in += 1
            assert float(diff) <= 2 * C * (1 + 1e-5), (b, float(diff))
        else:
            assert all(torch.equal(a.sums[k], a2.sums[k]) for k in a.sums), b
    assert seen_in >= 2 and g.replays >= 8 and g.captured > len(g._graphs)  # (graphs captured again after releases)


def test_padding_rows_left_by_an_earlier_batch_do_not_reach_the_sums():
    """A replay of a padded size copies the batch into its buffers' first B rows; the padding rows keep what
    earlier batches left there. A record of an earlier batch (here huge, or non-finite) sitting in the padding
    rows of a later batch that does not hold it changes nothing: the sums, norms and losses equal those of the
    neighbouring dataset without that record bit for bit, and the eager sum of the batch."""
    C = 0.7
    torch.manual_seed(0)
    m = CNN()
    X, y = data().tensors

    def fn(x, t, pad=None):
        return clipped_grad_sum(m, nn.functional.cross_entropy, x, t, clip=C, pad=pad)

    for value in (1e4, float("nan")):
        X2 = X.clone()
        X2[0] = value  # the neighbour: record 0 replaced
        g, g2 = (Simulated(fn, m, bucket=lambda b: -(-b // 8) * 8) for _ in range(2))
        # record 0 in the last row of a batch of 8, then batches of 5 without it: the same padded size
        big, small = torch.tensor([7, 6, 5, 4, 3, 2, 1, 0]), torch.tensor([9, 10, 11, 12, 13])
        for _ in range(cg.WARMUP + 1):  # warm-ups, then the capture of size 8
            g(X[big], y[big]), g2(X2[big], y[big])
        g(X[big], y[big]), g2(X2[big], y[big])  # replayed: record 0 written into row 7 of the buffers
        a, a2 = g(X[small], y[small]), g2(X2[small], y[small])
        (buffers,) = [c.inputs[0] for c in g2._graphs.values()]
        assert a2.graphed and bool((buffers[7] == X2[0]).all() or buffers[7].isnan().all())  # left in padding
        eager = fn(X[small], y[small])
        for k in a.sums:
            assert torch.equal(a.sums[k], a2.sums[k])
            assert torch.allclose(a.sums[k], eager.sums[k], rtol=0, atol=1e-6)
        assert torch.equal(a.norms, a2.norms) and torch.equal(a.losses, a2.losses) and a.batch == 5


def test_a_padded_loss_check_of_a_criterion_averaging_over_its_content_is_the_eager_check(monkeypatch):
    """F.cross_entropy averages over the targets that are not ignore_index (-100), not over the rows: the padded
    check's rescaling by padded size ÷ batch size is then wrong, whether the -100 is in the batch or was left in
    the padding rows by an earlier batch. Its failures are confirmed by the eager check on the batch itself: a
    loop that back-propagates the criterion takes every step, as without graphs, and the steps are the eager
    run's; a loop that back-propagates another loss is still refused."""
    from dpspec.torch import CriterionMismatchError

    def loop(cuda_graph, loss=nn.functional.cross_entropy):
        m, ds = model_and_data()
        X, y = ds.tensors
        y = y.clone()
        y[[5, 31]] = -100  # unlabelled examples
        model, opt, loader = dt.make_private(
            dpspec.compile(SPEC.format(sampling="poisson(rate = 0.25)", steps=30)),
            m,
            torch.optim.SGD(m.parameters(), lr=0.5),
            TensorDataset(X, y),
            seed=5,
            cuda_graph=cuda_graph,
        )
        train_to_the_end(model, opt, loader, loss)
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()]), model._session._verdict

    from dpspec.torch import private

    confirmed: list = []
    passed = private._DeferredVerdict.passed

    def counted(self):
        if self.confirm is not None and not bool(self.flag):
            confirmed.append(self.step)
        return passed(self)

    monkeypatch.setattr(private._DeferredVerdict, "passed", counted)
    eager, _ = loop(False)
    graphed, check = loop(True)
    assert check.replays > 10 and confirmed  # (the padded check failed on some batches; the eager one passed)
    assert torch.allclose(graphed, eager, rtol=1e-5, atol=1e-6)
    # a large output's check is the eager one, at once (a confirmation would keep the output a step longer)
    monkeypatch.setattr(private, "_PADDED_CHECK_MAX", 0)
    confirmed.clear()
    graphed, check = loop(True)
    assert check.replays == 0 and not confirmed
    assert torch.allclose(graphed, eager, rtol=1e-5, atol=1e-6)

    calls = [0]

    def halved_later(out, t):  # the criterion for 12 steps, then half of it
        calls[0] += 1
        return (0.5 if calls[0] > 12 else 1.0) * nn.functional.cross_entropy(out, t)

    with pytest.raises(CriterionMismatchError, match="found one step late"):
        loop(True, halved_later)


def test_a_graphed_poisson_batch_with_a_target_of_other_rows_raises_as_the_eager_step():
    torch.manual_seed(0)
    m = CNN()
    X, y = data().tensors

    def fn(x, t, pad=None):
        return clipped_grad_sum(m, nn.functional.cross_entropy, x, t, clip=0.7, pad=pad)

    g = Simulated(fn, m, bucket=lambda b: -(-b // 8) * 8)
    for _ in range(cg.WARMUP + 2):
        assert g(X[:5], y[:5]).batch == 5
    assert g.replays == 2
    with pytest.raises(ValueError, match="batch_size"):
        fn(X[:5], y[:1])
    with pytest.raises(ValueError, match="batch_size"):
        g(X[:5], y[:1])


@pytest.mark.parametrize(
    "sampling, chunk",
    [("without_replacement(batch_size = 12)", None), ("without_replacement(batch_size = 12)", 5),
     ("poisson(rate = 0.25)", None), ("poisson(rate = 0.25)", 5)],
    ids=["fixed", "fixed-chunks", "poisson", "poisson-chunks"],
)  # fmt: skip
def test_the_dpsgd_trainer_takes_the_option(sampling, chunk):
    """``DpSgd.train(..., cuda_graph=True)``: each batch's (or chunk's) clipped sum replayed, as make_private does;
    the run is the eager run's (bit for bit with fixed-size batches), the report says what was replayed."""

    def run(cuda_graph):
        m, ds = model_and_data()
        X, y = ds.tensors
        mech = dpspec.compile(SPEC.format(sampling=sampling, steps=12)).mechanism
        rep = mech.train(m, X, y, seed=3, max_physical_batch_size=chunk, cuda_graph=cuda_graph)
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()]), rep

    eager, rep_eager = run(False)
    graphed, rep = run(True)
    assert rep_eager.cuda_graph == "" and rep.cuda_graph.endswith("CUDA graph(s)"), rep.cuda_graph
    assert int(rep.cuda_graph.split()[0]) >= 6 and Simulated.captures >= 1
    assert rep.batch_sizes == rep_eager.batch_sizes and rep.clipping == rep_eager.clipping
    if sampling.startswith("without") and chunk is None:
        assert torch.equal(graphed, eager)
    else:
        assert torch.allclose(graphed, eager, rtol=1e-5, atol=1e-6)


def test_a_clipped_sum_that_reads_its_counts_on_the_host_runs_eagerly_with_poisson_batches():
    """A runtime whose clipped sum reads its counts on the host cannot be replayed, nor can a padded batch's rows be
    dropped from its counts: its graphs are turned off and each batch is clipped unpadded, as without graphs."""
    import dataclasses

    from dpspec.families.dpsgd.runtime import DpSgd
    from dpspec.mechanisms.per_example import ClippedSum

    @dataclasses.dataclass(frozen=True)
    class HostCounts(DpSgd):
        def _clipped_sum(self, model, loss_fn, xb, yb, max_physical_batch_size=None, pad=None):
            cs = super()._clipped_sum(model, loss_fn, xb, yb, max_physical_batch_size, pad)
            return ClippedSum(cs.sums, cs.batch, cs.nonfinite, cs.nonfinite_index, cs.norms, cs.losses, cs.method,
                              cs.clipped_fraction, cs.outputs, cs.fallback)  # fmt: skip

    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(48, 5, generator=g), torch.randint(0, 3, (48,), generator=g)

    def run(cuda_graph):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
        mech = HostCounts(noise_multiplier=1.0, clip_norm=1.0, sampling="poisson", sample_rate=0.25, steps=8,
                          dataset_size=48, delta=1e-5, name="model")  # fmt: skip
        rep = mech.train(m, X, y, seed=0, cuda_graph=cuda_graph)
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()]), rep

    eager, _ = run(False)
    graphed, rep = run(True)
    assert "reads its counts on the host" in rep.cuda_graph and rep.cuda_graph.startswith("not replayed")
    assert torch.equal(graphed, eager)


def test_a_capture_waits_for_the_rules_check_to_be_decided():
    """The per-layer rules are checked against vmap on a batch's first distinct examples; a batch whose probe is
    non-finite decides nothing (vmap for that batch, checked again on the next). A graph captured on such a batch
    would replay vmap for the rest of the run: the capture is dropped and the shape warmed up again, so the graphed
    run clips each step the way the eager run does, and is then replayed."""
    methods: dict = {False: [], True: []}

    def run(cuda_graph):
        m, ds = model_and_data()
        X, y = ds.tensors
        X = X.clone()
        X[list(range(0, 48, 3))] = float("nan")  # the first batches' probes are non-finite
        mech = dpspec.compile(SPEC.format(sampling="without_replacement(batch_size = 12)", steps=12)).mechanism
        private_gradients = mech.private_gradients

        def spy(*a, **k):
            out = private_gradients(*a, **k)
            methods[cuda_graph].append(k["report"].clipping)
            return out

        object.__setattr__(mech, "private_gradients", spy)
        rep = mech.train(m, X, y, seed=3, cuda_graph=cuda_graph)
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()]), rep

    eager, _ = run(False)
    graphed, rep = run(True)
    assert "vmap" in methods[False] and methods[False][-1] == "rules"
    assert methods[True] == methods[False]
    assert rep.cuda_graph.endswith("CUDA graph(s)") and not rep.cuda_graph.startswith("0 "), rep.cuda_graph
    assert torch.equal(graphed, eager)


_REAL_REPLAYER = cg.Replayer  # (the autouse fixture `simulated` puts the simulation in its place)


class _Cycle:
    """Garbage only the cyclic collector frees; its finalizer notes when it ran (on CUDA such a finalizer may
    free pinned memory or destroy an event, which invalidates a capture under way)."""

    def __init__(self, log):
        self.log, self.me = log, self

    def __del__(self):
        self.log.append("finalized")


@pytest.mark.parametrize("outcome", ["captured", "raises"])
@pytest.mark.parametrize("collector", ["enabled", "disabled"])
def test_no_garbage_collection_during_a_capture(monkeypatch, outcome, collector):
    """``Replayer._record`` (the real one, with torch.cuda's capture calls stood in for on the CPU): the
    collector is off for the capture (a finalizer run inside it may call CUDA: nothing is finalized there, however
    much garbage it makes), and afterwards it is as the caller had it, also when the capture raises."""
    import contextlib
    import gc

    log: list = []

    class Graph:
        def pool(self):
            return (0, 1)

    @contextlib.contextmanager
    def capture(graph, pool=None, stream=None):
        log.append(("begin", gc.isenabled()))
        for _ in range(3 * gc.get_threshold()[0]):  # garbage enough to start a collection, were it on
            _Cycle(log)
        yield
        log.append(("end", gc.isenabled()))

    for name, value in {
        "device": lambda dev: contextlib.nullcontext(),
        "current_stream": lambda dev=None: None,
        "set_stream": lambda s: None,
        "synchronize": lambda dev=None: None,
        "current_device": lambda: 0,
        "CUDAGraph": Graph,
        "graph": capture,
    }.items():
        monkeypatch.setattr(torch.cuda, name, value)
    monkeypatch.setattr(cg, "_side_stream", lambda dev: None)
    monkeypatch.setattr(cg, "_drop_cublas_workspaces", lambda torch: None)

    def fn(x):
        if outcome == "raises":
            raise RuntimeError("an operation the capture refuses")
        return x * 2

    was = gc.isenabled()
    try:
        if collector == "disabled":
            gc.disable()
        replayer = _REAL_REPLAYER(fn)
        if outcome == "raises":
            with pytest.raises(RuntimeError, match="refuses"):
                replayer._record((torch.ones(3),))
        else:
            graph, out = replayer._record((torch.ones(3),))
            assert torch.equal(out, torch.full((3,), 2.0))
        assert gc.isenabled() == (collector == "enabled")
    finally:
        if was:
            gc.enable()
    assert log[0] == ("begin", False), log[:2]
    if outcome == "captured":
        assert log[1] == ("end", False), log[1]  # (nothing finalized in between)
    gc.collect()
    assert "finalized" in log  # (the garbage the capture made: collected after it)


@pytest.mark.parametrize("sampling", ["without_replacement(batch_size = 12)", "poisson(rate = 0.25)"])
def test_block_steps_replayed_from_graphs_are_the_same_bits_for_every_chunk_size(sampling):
    """make_private(..., block_size=4, cuda_graph=True): each block's clipped sum is a graph's replay (fresh
    tensors, added into the running total): unchunked and in chunks of 4, 8 and 12 rows, the same parameters bit
    for bit — with fixed-size batches the eager block run's; with Poisson batches each block is padded as its graph
    pads it (to 8 rows here), the same way in every chunking, and agrees with the eager run to rounding."""
    eager, _ = train(False, sampling=sampling, block_size=4)
    runs = []
    for m in (None, 4, 8, 12):
        graphed, model = train(True, sampling=sampling, block_size=4, max_physical_batch_size=m)
        runs.append(flat(graphed))
        assert "replayed" in model.cuda_graph_status
    assert all(torch.equal(r, runs[0]) for r in runs[1:])
    if sampling.startswith("without"):
        assert torch.equal(runs[0], flat(eager))
    else:
        assert torch.allclose(runs[0], flat(eager), rtol=0, atol=1e-6)
