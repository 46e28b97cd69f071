"""make_private(cuda_graph=True): what a graph may read (dpspec.torch.cuda_graph, ``Replayer._audited``).

A CUDA graph reads memory, not names. Its key and watch cover the batch, the modules' parameters, buffers
and tensor attributes; a tensor reached another way (a closure, a global, a list attribute) could be
replaced between steps, and a replay would read its old memory — once freed, anything (another example's
activations). The warm-up before a shape's first capture runs the step with every tensor it reads checked;
one not covered fails the capture, and every step runs eagerly.

The captures are simulated on the CPU as in test_cuda_graph.py (whose simulated warm-up runs the same check),
so every model kind the step checksums train is graphed here with the check on: none of them reads a tensor
the check does not cover."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
import dpspec.torch.cuda_graph as cg
from dpspec.mechanisms.per_example import clipped_grad_sum

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_checksums  # noqa: E402
import test_cuda_graph  # noqa: E402
from _loops import train_to_the_end  # noqa: E402
from test_cuda_graph import CNN, Simulated, simulated  # noqa: E402,F401  (the fixture: simulated captures)

pytestmark = test_cuda_graph.pytestmark
SPEC = test_cuda_graph.SPEC.replace("flat(C = 0.7)", "{clipping}")  # (also per-layer clip norms here)
FIXED, POISSON = "without_replacement(batch_size = 12)", "poisson(rate = 0.25)"


def run(
    build, X, y, cuda_graph, sampling=FIXED, steps=8, criterion=F.cross_entropy, clipping="flat(C = 0.7)", dtype=None
):
    """The model's parameters after ``steps`` private steps, and the run's graph status (the model in ``dtype``, by
    default the input's, or float32 for integer inputs)."""
    torch.manual_seed(0)
    m = build().to(dtype or (X.dtype if X.is_floating_point() else torch.float32))
    model, opt, loader = dt.make_private(
        dpspec.compile(SPEC.format(sampling=sampling, steps=steps, clipping=clipping)),
        m,
        torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.3),
        TensorDataset(X, y),
        seed=1,
        criterion=criterion,
        cuda_graph=cuda_graph,
    )
    train_to_the_end(model, opt, loader, criterion)
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    return flat, model.cuda_graph_status


def checksum_data(name, dtype):
    build, make, _ = step_checksums.MODELS[name]
    g = torch.Generator().manual_seed(1)
    X, y = make(g), torch.randint(0, 3, (48,), generator=g)
    return build, (X.to(dtype) if X.is_floating_point() else X), y


@pytest.mark.parametrize("sampling", [FIXED, POISSON], ids=["fixed", "poisson"])
@pytest.mark.parametrize("name", list(step_checksums.MODELS))
def test_every_model_kind_is_replayed_with_its_reads_covered(name, sampling):
    """The ghost MLP, the rules' CNN, encoder (nn.MultiheadAttention), adapters and mixed layers, vmap and the
    loop (nn.GRU): the check finds nothing to refuse, the graphs are replayed, and the run is the eager run's
    (bit for bit with fixed-size batches; Poisson batches are padded in the graphs, not eagerly)."""
    build, X, y = checksum_data(name, torch.float64 if name in ("mlp", "cnn") else torch.float32)
    eager, _ = run(build, X, y, False, sampling, steps=10)
    graphed, status = run(build, X, y, True, sampling, steps=10)
    assert status.endswith("CUDA graph(s)") and not status.startswith("0 "), status
    if sampling == FIXED:
        assert torch.equal(graphed, eager)
    else:
        assert torch.allclose(graphed, eager, rtol=1e-5, atol=1e-6)


def test_per_layer_clipping_and_a_criterion_module_with_a_buffer_are_covered():
    """Per-layer clip norms (a shared constant tensor) and a criterion module whose buffer the loss reads."""

    class Tempered(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("t", torch.tensor(2.0, dtype=torch.float64))

        def forward(self, o, y):
            return F.cross_entropy(o / self.t, y)

    build, X, y = checksum_data("cnn", torch.float64)
    clip = "per_layer(C = [0.3, 0.4, 0.5, 0.3, 0.4, 0.5, 0.3, 0.4, 0.5, 0.3])"
    eager, _ = run(build, X, y, False, criterion=Tempered(), clipping=clip)
    graphed, status = run(build, X, y, True, criterion=Tempered(), clipping=clip)
    assert status == "6 step(s) replayed from 1 CUDA graph(s)"
    assert torch.equal(graphed, eager)


_SHIFT: list = []  # a tensor read through a global


class GlobalRead(CNN):
    def forward(self, x):
        return super().forward(x + _SHIFT[0])


class ListAttribute(CNN):
    """A tensor held in a list attribute: not a tensor attribute of the module, so not watched."""

    def __init__(self):
        super().__init__()
        self.tables = [torch.full((1, 6, 6), 0.1)]

    def forward(self, x):
        return super().forward(x * self.tables[0])


class TensorAttribute(ListAttribute):
    """The same tensor held as a plain attribute: watched (its replacement drops the graph)."""

    def __init__(self):
        super().__init__()
        self.table = self.tables.pop()

    def forward(self, x):
        return CNN.forward(self, x * self.table)


def cnn_data():
    X, y = test_cuda_graph.data().tensors
    return X, y


@pytest.mark.parametrize("build", [GlobalRead, ListAttribute], ids=["global", "list-attribute"])
def test_a_forward_reading_a_tensor_no_graph_watches_is_not_replayed(build):
    """The unsound configuration is refused: its capture fails, with the tensor named, and every step runs
    eagerly — the eager run's numbers, also when the tensor is replaced between steps."""
    _SHIFT[:] = [torch.full((1, 6, 6), 0.1)]
    X, y = cnn_data()
    eager, _ = run(build, X, y, False)
    graphed, status = run(build, X, y, True)
    assert status.startswith("not replayed: the capture failed (UnwatchedReadError: the step reads a (1, 6, 6) float32")
    assert "not its input, a parameter, a buffer or a tensor attribute" in status
    assert torch.equal(graphed, eager)
    assert Simulated.captures == 0


def test_the_same_tensor_as_a_module_attribute_is_replayed():
    X, y = cnn_data()
    eager, _ = run(TensorAttribute, X, y, False)
    graphed, status = run(TensorAttribute, X, y, True)
    assert status == "6 step(s) replayed from 1 CUDA graph(s)"
    assert torch.equal(graphed, eager)


def test_a_criterion_closing_over_a_tensor_is_not_replayed():
    """The loss read through a closure: the clipped sum's per-example losses read it (and the loss check)."""
    scale = torch.tensor([1.0, 2.0, 0.5])

    def criterion(o, t):
        return F.cross_entropy(o * scale, t)

    X, y = cnn_data()
    eager, _ = run(CNN, X, y, False, criterion=criterion)
    graphed, status = run(CNN, X, y, True, criterion=criterion)
    assert status.startswith("not replayed: the capture failed (UnwatchedReadError: the step reads a (3,) float32")
    assert torch.equal(graphed, eager)


def test_the_read_check_itself():
    """What counts as covered: the inputs and the modules' tensors and their views, what the run wrote, a tensor
    made from Python data in the run, an empty tensor; a CPU number in a CUDA run (a kernel takes it by value
    at the capture). Not covered: another tensor, named by the operation that read it, shape and dtype."""
    m = nn.Linear(4, 3)
    m.cache = torch.ones(3)  # a plain tensor attribute: covered
    outside, empty, number = torch.randn(3), torch.empty(0), torch.tensor(2.0)
    x = torch.randn(5, 4)

    def fine(x, t, pad):
        h = m(x) * m.cache + m.weight.t()[0] + torch.tensor([1.0, 2.0, 3.0])
        return h.sum() + empty.sum()

    r = cg.Replayer(fine, roots=(m,))
    assert torch.equal(r._audited((x, None, None)), fine(x, None, None))

    def reads(x, t, pad):
        return (m(x) * outside).sum(dim=0) + number

    with pytest.raises(cg.UnwatchedReadError, match=r"reads a \(3,\) float32 tensor in `mul` \(and 1 more\)"):
        cg.Replayer(reads, roots=(m,))._audited((x, None, None))
    # on a CUDA run (the check reads only the tensors' metadata: CPU tensors stand in) a host tensor is never
    # covered, made by the run or not — a captured copy reads its address at every replay — except a 0-dim one an
    # operation takes as a number; copied to the device, or used as an index, even that one is read by address
    with cg._read_audit(set(), torch.device("cuda")) as audit:
        _ = number * 3  # (a number: taken by value)
        made = torch.ones(3)  # (host memory the run made: flagged where it is read)
        _ = made + 1
        _ = number.to(torch.float64)  # (a copy)
    assert audit.unwatched == [("add", (3,), torch.float32), ("_to_copy", (), torch.float32)]
    # a storage passed as such is checked as a tensor is
    with pytest.raises(cg.UnwatchedReadError, match=r"reads a storage in `set_`"):
        cg.Replayer(
            lambda x, t, pad: x.new_empty(0).set_(outside.untyped_storage(), 0, (3,)) * x[0, :3], roots=(m,)
        )._audited((x, None, None))


class Annealed(CNN):
    """A temperature the forward rebinds at every call (data-independent: fine eagerly). A graph would read the
    tensor the attribute named at the capture, freed once the capture rebinds it; the watch would follow the
    new one."""

    def __init__(self):
        super().__init__()
        self.T = torch.ones(1)

    def forward(self, x):
        T = self.T
        self.T = torch.clamp(T * 0.99, min=1.0)
        return super().forward(x) / T


_CACHE: dict = {}  # a global cache the forward fills on first use of a shape


class LazyGlobal(CNN):
    def forward(self, x):
        key = (tuple(x.shape[1:]), x.dtype)
        if key not in _CACHE:
            _CACHE[key] = torch.full(x.shape[1:], 0.5, dtype=x.dtype)
        return super().forward(x * _CACHE[key])


def test_a_forward_that_rebinds_its_tensor_attribute_is_not_replayed():
    X, y = cnn_data()
    eager, _ = run(Annealed, X, y, False)
    graphed, status = run(Annealed, X, y, True)
    assert status.startswith("not replayed: the capture failed (UnwatchedReadError: the step rebinds the tensor "
                             "attribute `T` of a Annealed after reading it"), status  # fmt: skip
    assert torch.equal(graphed, eager)


def test_the_capture_checks_its_own_reads():
    """What the warm-up made is not the capture's own: a global cache filled by the warm-up's call is read by the
    capture as memory no key covers. The capture's reads are checked too (and a graph captured again after a
    release, which has no warm-up)."""
    torch.manual_seed(0)
    m = LazyGlobal()
    X, y = cnn_data()
    _CACHE.clear()
    r = cg.Replayer(lambda x, t, pad: clipped_grad_sum(m, F.cross_entropy, x, t, clip=0.7, pad=pad), roots=(m,))
    static = (X[:8].clone(), y[:8].clone(), None)
    r._audited(static)  # the first call: it makes the cache, its own
    with pytest.raises(cg.UnwatchedReadError, match=r"reads a \(1, 6, 6\) float32 tensor in `mul`"):
        r._audited(static)  # the capture's call reads it from the global
    _CACHE.clear()
    eager, _ = run(LazyGlobal, X, y, False)
    _CACHE.clear()
    graphed, status = run(LazyGlobal, X, y, True)
    assert status.startswith("not replayed: the capture failed (UnwatchedReadError"), status
    assert torch.equal(graphed, eager)  # (here refused at the warm-up: the eager steps filled the cache)


@pytest.mark.parametrize("family", ["bert", "gpt2", "distilbert"])
def test_hugging_face_models_are_replayed_with_their_reads_covered(family):
    """Hugging Face encoders and decoders as transformers ships them (position-id buffers, attention masks made
    in the forward, rotary or absolute positions): nothing they read escapes the check."""
    transformers = pytest.importorskip("transformers")
    small = dict(vocab_size=20, num_labels=3)
    if family == "bert":
        cfg = transformers.BertConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **small,
        )  # fmt: skip
        cls = transformers.BertForSequenceClassification
    elif family == "gpt2":
        cfg = transformers.GPT2Config(
            n_embd=16, n_layer=1, n_head=2, n_positions=8, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            pad_token_id=0, **small,
        )  # fmt: skip
        cls = transformers.GPT2ForSequenceClassification
    else:
        cfg = transformers.DistilBertConfig(
            dim=16, n_layers=1, n_heads=2, hidden_dim=32, max_position_embeddings=8, dropout=0.0,
            attention_dropout=0.0, seq_classif_dropout=0.0, **small,
        )  # fmt: skip
        cls = transformers.DistilBertForSequenceClassification

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = cls(cfg)

        def forward(self, x):
            return self.hf(input_ids=x).logits

    g = torch.Generator().manual_seed(1)
    X, y = torch.randint(1, 20, (48, 6), generator=g), torch.randint(0, 3, (48,), generator=g)
    eager, _ = run(Wrapped, X, y, False)
    graphed, status = run(Wrapped, X, y, True)
    assert status == "6 step(s) replayed from 1 CUDA graph(s)", status
    assert torch.equal(graphed, eager)


@pytest.mark.parametrize("name", ["cnn", "encoder"])
def test_bfloat16_models_are_replayed_with_their_reads_covered(name):
    """The read check, the padded replay and the loss check's confirmation in a bfloat16 model: replayed, and the
    run stays within bfloat16's rounding of the eager one."""
    build, X, y = checksum_data(name, torch.bfloat16)
    eager, _ = run(build, X, y, False, POISSON, steps=10, dtype=torch.bfloat16)
    graphed, status = run(build, X, y, True, POISSON, steps=10, dtype=torch.bfloat16)
    assert status.endswith("CUDA graph(s)") and not status.startswith("0 "), status
    assert graphed.dtype == torch.bfloat16 and bool(torch.isfinite(graphed.float()).all())
    assert torch.allclose(graphed.float(), eager.float(), rtol=0.05, atol=0.02)
