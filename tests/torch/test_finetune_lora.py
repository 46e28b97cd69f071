"""Private fine-tuning: a pretrained (here: briefly trained) transformer encoder, frozen, with low-rank
adapters and a new head trained under make_private. The frozen weights never move, the adapters do,
the per-layer clipping rules cover the model, and the fine-tuned model fits the new task."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.mechanisms.per_example import clipped_grad_sum
from dpspec.torch.lora import LoRALinear, add_lora, lora_parameters

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::dpspec.torch.SamplingOverrideWarning")

N, T, V, D = 256, 8, 12, 16

SPEC = f"""
privacy people {{ unit record  dataset_size {N} }}
train finetune {{
  protect   people
  mechanism dpsgd
  sampling  poisson(rate = 0.125)
  clipping  flat(C = 1.0)
  steps     40
  guarantee dp(epsilon = 20, delta = 1e-5)
}}
"""


class Block(nn.Module):
    """A post-norm encoder block: nn.MultiheadAttention as shipped, a feed-forward pair of nn.Linear."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.ff1, self.ff2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, x):
        x = self.n1(x + self.attn(x, x, x, need_weights=False)[0])
        return self.n2(x + self.ff2(torch.relu(self.ff1(x))))


class Encoder(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(D, classes)

    def forward(self, x):
        return self.head(self.blocks(self.emb(x)).mean(dim=1))


def task(which):
    g = torch.Generator().manual_seed(which)
    x = torch.randint(0, V, (N, T), generator=g)
    y = (x == 3).any(dim=1).long()
    if which == 1:  # the new task: a new head over the pretrained feature and a new one
        y = y + (x == 7).any(dim=1).long()
    return x, y


def pretrained():
    torch.manual_seed(0)
    m = Encoder(2)
    x, y = task(0)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(40):  # public pre-training, non-private
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return m


def loss(m, x, y):
    with torch.no_grad():
        return float(nn.functional.cross_entropy(m(x), y))


def test_private_lora_finetuning_of_a_frozen_encoder():
    m = pretrained()
    m.head = nn.Linear(D, 3)  # the new task's head, trained with the adapters
    add_lora(m, rank=2, include=lambda name: name.startswith("blocks"))
    m.head.requires_grad_(True)
    frozen = {k: p.detach().clone() for k, p in m.named_parameters() if not p.requires_grad}
    trainable = [k for k, p in m.named_parameters() if p.requires_grad]
    assert sum(isinstance(x, LoRALinear) for x in m.modules()) == 4
    assert len(trainable) == 2 * 4 + 2 and all(".A." in k or ".B." in k or k.startswith("head") for k in trainable)
    assert len(lora_parameters(m)) == 8
    x, y = task(1)
    assert clipped_grad_sum(m, nn.functional.cross_entropy, x[:8], y[:8], clip=1.0).method == "rules"

    before = loss(m, x, y)
    c = dpspec.compile(SPEC)
    opt_params = [p for p in m.parameters() if p.requires_grad]
    model, opt, loader = dt.make_private(
        c, m, torch.optim.SGD(opt_params, lr=0.2, momentum=0.5), TensorDataset(x, y), seed=0, max_physical_batch_size=16
    )
    while opt.steps_remaining:
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    assert opt.steps_taken == 40 and opt.get_epsilon(1e-5) <= 20 * (1 + 1e-9)
    for k, p in m.named_parameters():
        if k in frozen:
            assert torch.equal(p, frozen[k]), k  # the pretrained weights never move
    assert all(float(p.detach().abs().sum()) > 0 for p in lora_parameters(m) if p.shape[1] == 2)  # B moved off 0
    assert loss(m, x, y) < 0.8 * before
