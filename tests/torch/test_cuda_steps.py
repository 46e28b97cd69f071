"""The private steps on a CUDA device (skipped without one): every trainer runs, its parameters stay on
the device, the per-layer rules agree with vmap there, and a seeded run is reproducible."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.mechanisms.per_example import clipped_grad_sum

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.filterwarnings("ignore::dpspec.torch.SamplingOverrideWarning"),
]

SPEC = """
privacy people { unit record  dataset_size 64 }
train model {
  protect   people
  mechanism dpsgd
  sampling  poisson(rate = 0.25)
  clipping  flat(C = 1.0)
  steps     3
  guarantee dp(epsilon = 2, delta = 1e-5)
}
"""


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc(self.enc(self.emb(x)).mean(dim=1))


def data(dev):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 11, (64, 6), generator=g).to(dev), torch.randint(0, 3, (64,), generator=g).to(dev)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_make_private_on_cuda(dtype):
    dev = torch.device("cuda")
    finals = []
    for _ in range(2):
        torch.manual_seed(0)
        m = Encoder().to(dev, dtype)
        X, y = data(dev)
        model, opt, loader = dt.make_private(
            dpspec.compile(SPEC),
            m,
            torch.optim.SGD(m.parameters(), lr=0.1),
            TensorDataset(X, y),
            seed=0,
            max_physical_batch_size=8,
        )
        while opt.steps_remaining:
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
        assert all(p.device.type == "cuda" and p.dtype == dtype for p in m.parameters())
        finals.append(torch.cat([p.detach().float().reshape(-1) for p in m.parameters()]))
    assert torch.equal(finals[0], finals[1])  # seeded: the same batches and the same noise


def test_dpsgd_train_and_rules_on_cuda():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    m = Encoder().to(dev, torch.float64)
    X, y = data(dev)
    rep = dpspec.compile(SPEC).mechanism.train(m, X, y, seed=1)
    assert rep.clipping == "rules"
    got = clipped_grad_sum(m, nn.functional.cross_entropy, X[:8], y[:8], clip=0.5, method="rules")
    ref = clipped_grad_sum(m, nn.functional.cross_entropy, X[:8], y[:8], clip=0.5, method="vmap")
    for k in ref.sums:
        assert torch.allclose(got.sums[k], ref.sums[k], rtol=1e-6, atol=1e-12), k
