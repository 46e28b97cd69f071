"""The per-example norms and the clipped sum are computed with full-float32 matrix products even where the
user allowed TensorFloat-32 or bfloat16 products (``dpspec.torch.clipping.kernels.ieee_matmul``): with
10-bit products in the norms or the sum, one example could add about 10⁻³·C more than C to the sum."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dpspec.mechanisms.per_example import clipped_grad_sum
from dpspec.torch.clipping import engine
from dpspec.torch.clipping.kernels import ieee_matmul

pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop")

NEW_API = hasattr(torch.backends.cuda.matmul, "fp32_precision")


def _state():
    cm, mk = torch.backends.cuda.matmul, torch.backends.mkldnn.matmul
    if NEW_API:
        return cm.fp32_precision, mk.fp32_precision
    return torch.get_float32_matmul_precision(), cm.allow_tf32


@pytest.fixture
def user_precision():
    """The user allows TF32 on CUDA and bfloat16 in oneDNN products (restored after the test)."""
    saved = _state()
    if NEW_API:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    else:
        torch.set_float32_matmul_precision("medium")
    yield _state()
    if NEW_API:
        torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision = saved
    else:
        torch.set_float32_matmul_precision(saved[0])


def _full() -> tuple:
    return ("ieee", "ieee") if NEW_API else ("highest", False)


def test_ieee_matmul_sets_full_precision_and_restores_the_users(user_precision):
    assert user_precision != _full()
    with ieee_matmul():
        assert _state() == _full()
    assert _state() == user_precision
    with pytest.raises(KeyError):  # restored on an error too
        with ieee_matmul():
            raise KeyError
    assert _state() == user_precision


def test_ieee_matmul_nested_and_from_two_threads(user_precision):
    import threading

    inside, go = [], threading.Barrier(2)

    def region():
        with ieee_matmul():
            go.wait()  # both threads inside at once
            inside.append(_state())
            with ieee_matmul():  # nested
                inside.append(_state())
            go.wait()  # neither leaves before the other has looked (after the nested region ended)
            inside.append(_state())

    threads = [threading.Thread(target=region) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(inside) == 6 and all(state == _full() for state in inside), inside
    assert _state() == user_precision  # restored once the last region left


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.conv = nn.Conv1d(16, 8, 3, padding=1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        h = self.enc(self.emb(x))
        return self.fc(torch.relu(self.conv(h.transpose(1, 2))).mean(dim=2))


def test_the_rules_norms_and_sums_run_in_full_float32(monkeypatch, user_precision):
    seen = []
    for name in ("_part_sq", "_part_sum"):
        inner = getattr(engine, name)

        def wrapped(*a, inner=inner, name=name, **k):
            seen.append((name, _state()))
            return inner(*a, **k)

        monkeypatch.setattr(engine, name, wrapped)
    torch.manual_seed(0)
    m = Block()
    x, y = torch.randint(0, 50, (6, 10)), torch.randint(0, 3, (6,))
    cs = clipped_grad_sum(m, F.cross_entropy, x, y, clip=1.0, method="rules")
    assert cs.method == "rules"
    assert {n for n, _ in seen} == {"_part_sq", "_part_sum"}
    assert all(state == _full() for _, state in seen), seen
    assert _state() == user_precision  # the user's setting is back after the step


def test_the_relational_ghost_norms_and_sums_run_in_full_float32(monkeypatch, user_precision):
    from dpspec.relational.ghost import GhostClipper

    seen = []
    inner = torch.einsum

    def einsum(*a, **k):
        seen.append(_state())
        return inner(*a, **k)

    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 4))
    x = torch.randn(5, 3, 6)  # 5 tuples of 3 rows
    gc = GhostClipper(enc)
    assert gc.supports
    monkeypatch.setattr(torch, "einsum", einsum)
    out, norms, _ = gc.run(lambda: enc(x).pow(2).sum(dim=(1, 2)), 5, lambda n: (1.0 / n).clamp(max=1.0))
    assert len(seen) == 6 and all(state == _full() for state in seen), seen  # 2 Linear + 1 LayerNorm, w and b
    assert _state() == user_precision


@pytest.mark.parametrize("method", ["ghost", "vmap", "loop"])
def test_the_other_paths_clip_and_sum_in_full_float32(monkeypatch, user_precision, method):
    import dpspec.torch.clipping.kernels as kernels

    seen = []
    inner = kernels.weighted_sum

    def probe():
        seen.append(_state())

    if method == "ghost":  # its sums are matrix products of the masked activations: probe the stack of norms
        inner_stack = torch.stack

        def stack(*a, **k):
            probe()
            return inner_stack(*a, **k)

        monkeypatch.setattr(torch, "stack", stack)
        model = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3))
    else:

        def ws(*a, **k):
            probe()
            return inner(*a, **k)

        monkeypatch.setattr(kernels, "weighted_sum", ws)  # the vmap and loop paths' sums
        model = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3))
    torch.manual_seed(0)
    x, y = torch.randn(4, 5), torch.randint(0, 3, (4,))
    cs = clipped_grad_sum(model, F.cross_entropy, x, y, clip=1.0, method=method)
    assert cs.method == method
    assert seen and all(state == _full() for state in seen), seen
    assert _state() == user_precision
