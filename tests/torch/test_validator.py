"""dpspec.torch.validate / fix: layers that mix examples or store batch statistics are refused (DPS164)
and replaced by per-example layers."""

import pytest
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.check import CATALOGUE

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::dpspec.torch.SamplingOverrideWarning")

SPEC = """
privacy people { unit record  dataset_size 32 }
train model { protect people  mechanism dpsgd  sampling poisson(rate = 0.25)  clipping flat(C = 1.0)  steps 4
  guarantee dp(epsilon = 2, delta = 1e-5) }
"""


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.inorm = nn.InstanceNorm2d(6, affine=True, track_running_stats=True)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(6 * 4 * 4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x):
        return self.head(self.inorm(self.bn(self.conv(x))))


def data(n=32):
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 1, 4, 4, generator=g), torch.randint(0, 2, (n,), generator=g))


def test_batchnorm_and_tracking_instancenorm_are_listed_with_a_replacement():
    issues = dt.validate(Net())
    assert [(i.name, i.layer) for i in issues] == [("bn", "BatchNorm2d"), ("inorm", "InstanceNorm2d"),
                                                   ("head.2", "BatchNorm1d")]
    assert all(i.rule == "DPS164" for i in issues)
    assert issues[0].replacement == "nn.GroupNorm(6, 6)" and issues[2].replacement == "nn.GroupNorm(1, 8)"
    with pytest.raises(dt.ModuleValidationError) as e:
        dt.validate(Net(), strict=True)
    assert e.value.rule == "DPS164" and "dpspec.torch.fix" in str(e.value) and len(e.value.issues) == 3
    assert dt.validate(nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.GroupNorm(2, 4))) == []


def test_make_private_refuses_batchnorm_and_trains_the_fixed_model():
    c = dpspec.compile(SPEC)
    m = Net()
    with pytest.raises(dt.ModuleValidationError):
        dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), data())
    assert c.mechanism.ledger.steps_taken == 0
    fixed = dt.fix(m)
    assert isinstance(m.bn, nn.BatchNorm2d)  # the original is untouched
    assert isinstance(fixed.bn, nn.GroupNorm) and isinstance(fixed.head[2], nn.GroupNorm)
    assert not fixed.inorm.track_running_stats
    torch.testing.assert_close(fixed.conv.weight, m.conv.weight)
    assert dt.validate(fixed) == []
    model, opt, loader = dt.make_private(c, fixed, torch.optim.SGD(fixed.parameters(), lr=0.1), data(), seed=0)
    for xb, yb in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    assert opt.steps_taken == 4


def test_an_optimizer_of_the_unfixed_model_is_refused():
    c = dpspec.compile(SPEC)
    m = Net()
    fixed = dt.fix(m)
    with pytest.raises(ValueError, match="build the optimizer on the returned model"):
        dt.make_private(c, fixed, torch.optim.SGD(m.parameters(), lr=0.1), data())


def test_the_rules_are_in_the_catalogue():
    for rid in ("DPS164", "DPS165", "DPS166", "DPS167"):
        info = CATALOGUE[rid]
        assert info.stage == "run" and info.explanation
        assert dpspec.loads(info.good).ok
