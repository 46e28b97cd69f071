"""What a distinguishing test on two neighbouring batches sees through the per-layer rules: removing one
example moves the clipped sum by at most C, replacing it by at most 2C (flat clipping), and by at most
C_j in each parameter j with per-layer clipping — for models on every rule (grouped convolutions with
padding modes, the normalisation layers, embeddings, attention, adapters), the example drawn
adversarially: huge, tiny, or non-finite. Float64, so the bound holds to rounding (1e-9 relative)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpspec.mechanisms.per_example import clipped_grad_sum

pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop")
F64 = torch.float64


class Image(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3, padding="same", groups=2, padding_mode="reflect")
        self.n1 = nn.GroupNorm(2, 4)
        self.c2 = nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4)
        self.n2 = nn.InstanceNorm2d(4, affine=True)
        self.fc = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x):
        h = torch.relu(self.n1(self.c1(x)))
        return self.fc(torch.tanh(self.n2(self.c2(h))).flatten(1))


class Text(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8, padding_idx=0)
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.rms = nn.RMSNorm(8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.rms(self.enc(self.emb(x), src_key_padding_mask=x == 0)).mean(dim=1))


def _image_batch(g, B):
    return torch.randn(B, 2, 5, 5, generator=g, dtype=F64)


def _text_batch(g, B):
    x = torch.randint(1, 20, (B, 6), generator=g)
    x[:, 4:] = 0  # padded tail
    return x


MODELS = {"image": (Image, _image_batch), "text": (Text, _text_batch)}


def _replace(name, x, i, how, g):
    """``x`` with example i replaced adversarially."""
    x = x.clone()
    if name == "text":
        x[i] = torch.randint(1, 20, x[i].shape, generator=g)  # any other sentence
        return x
    if how == "huge":
        x[i] = 1e6 * torch.randn(x[i].shape, generator=g, dtype=F64)
    elif how == "tiny":
        x[i] = 1e-8 * torch.randn(x[i].shape, generator=g, dtype=F64)
    elif how == "nan":
        x[i] = float("nan")
    else:
        x[i] = torch.randn(x[i].shape, generator=g, dtype=F64)
    return x


def _diff_norms(a, b, names):
    return {k: float((a.sums[k] - b.sums[k]).norm()) for k in names}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(MODELS)),
    seed=st.integers(0, 10_000),
    i=st.integers(0, 4),
    how=st.sampled_from(["huge", "tiny", "nan", "other"]),
    clip=st.sampled_from([1e-3, 0.1, 10.0]),
    per_layer=st.booleans(),
)
def test_neighbouring_batches_move_the_clipped_sum_by_at_most_the_clip(name, seed, i, how, clip, per_layer):
    build, make = MODELS[name]
    torch.manual_seed(seed)
    m = build().to(F64)
    g = torch.Generator().manual_seed(seed)
    x = make(g, 5)
    y = torch.randint(0, 3, (5,), generator=g)
    names = [k for k, p in m.named_parameters() if p.requires_grad]
    kw = {"per_layer_clips": [clip] * len(names)} if per_layer else {"clip": clip}
    base = clipped_grad_sum(m, F.cross_entropy, x, y, method="rules", **kw)
    assert base.method == "rules"
    replaced = clipped_grad_sum(m, F.cross_entropy, _replace(name, x, i, how, g), y, method="rules", **kw)
    keep = [j for j in range(5) if j != i]
    removed = clipped_grad_sum(m, F.cross_entropy, x[keep], y[keep], method="rules", **kw)
    tol = 1 + 1e-9
    for other, bound in ((removed, clip), (replaced, 2 * clip)):
        d = _diff_norms(base, other, names)
        if per_layer:  # each parameter's own clip
            assert all(v <= bound * tol for v in d.values()), d
        else:
            assert math.sqrt(sum(v * v for v in d.values())) <= bound * tol, d
