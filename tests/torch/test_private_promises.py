"""make_private keeps the promises of docs/threat-model.md under ordinary PyTorch habits (issue 22).

Each promise has a distinguishing test: two neighbouring datasets (add/remove one record), many
seeds, a fixed threshold on what an adversary holding the optimizer sees. The certified step is a
full-batch Gaussian step with sensitivity C and noise σC (σ = 1, one step): by Neyman–Pearson (the
Gaussian trade-off function G_μ with μ = C/(σC) = 1, Dong, Roth & Su 2019, "Gaussian Differential
Privacy", Def. 2.7 and Thm. 2.10 for composition), no test tells the two datasets apart with balanced
accuracy above Φ(μ/2) = Φ(1/2) ≈ 0.69. A run that escapes its certificate (a budget rewound, a
parameter stepped on its exact gradient, a run that stops when it samples a record) does much better.

The seeds are fixed: each test is deterministic; the slack (3 binomial standard deviations) only
keeps the bound honest for the number of trials."""

import copy
import dataclasses
import math
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.stats import norm
from torch.utils.data import TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.mechanisms.ledger import BudgetExceededError

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::dpspec.torch.SamplingOverrideWarning")

FULL_BATCH = """
privacy people {{ unit record  dataset_size 8 }}
train model {{
  protect          people
  mechanism        dpsgd
  sampling         {sampling}
  clipping         flat(C = 1.0)
  steps            {steps}
  noise_multiplier 1.0
  guarantee        dp(delta = 1e-5)
}}
"""

SEEDS = 40  # per dataset


@pytest.fixture(scope="module")
def one_step():
    return dpspec.compile(FULL_BATCH.format(sampling="full_batch", steps=1))


@pytest.fixture(scope="module")
def poisson():
    return dpspec.compile(FULL_BATCH.format(sampling="poisson(rate = 0.25)", steps=8))


def fresh(compiled):
    """A fresh run of the compiled training (its own ledger), as a second compile would give."""
    return dataclasses.replace(compiled.mechanism)


def neighbours(special_x=1.0, special_y=-10.0):
    """D: eight records whose gradient is zero (x = 0 for a linear model without bias); D' = D plus
    one record whose clipped gradient is C in the weight's direction."""
    D = TensorDataset(torch.zeros(8, 1), torch.zeros(8, 1))
    D1 = TensorDataset(
        torch.cat([torch.zeros(8, 1), torch.full((1, 1), special_x)]),
        torch.cat([torch.zeros(8, 1), torch.full((1, 1), special_y)]),
    )
    return D, D1


def linear():
    m = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        m.weight.fill_(0.5)
    return m


def threshold_accuracy(stat_D, stat_D1, threshold):
    """Balanced accuracy of the test "D' when the statistic exceeds the threshold"."""
    return 0.5 * (np.mean(np.asarray(stat_D) <= threshold) + np.mean(np.asarray(stat_D1) > threshold))


def gaussian_bound(mu, trials):
    """Φ(μ/2) plus three binomial standard deviations of a balanced accuracy over ``trials`` runs."""
    p = float(norm.cdf(mu / 2))
    return p + 3 * math.sqrt(p * (1 - p) / trials)


def run_steps(model, opt, loader, loss=F.mse_loss):
    n = 0
    for x, y in loader:
        opt.zero_grad()
        loss(model(x), y).backward()
        opt.step()
        n += 1
    return n


# --- 1. the ledger's high-water mark -----------------------------------------------------------------------


def rewind_attack(mech, data, seed, rewinds=9):
    """Save the state before the first step, then train, reload (with another noise generator state),
    train again, … averaging every noisy gradient the wrapped optimizer is handed.
    Returns (mean noisy gradient, noisy steps seen)."""
    m = linear()
    model, opt, loader = dt.make_private(
        mech, m, torch.optim.SGD(m.parameters(), lr=0.0), data, criterion=F.mse_loss, seed=seed
    )
    ckpt = opt.state_dict()
    grads = []
    for r in range(rewinds):
        state = copy.deepcopy(ckpt)  # the checkpoint, with fresh noise each time
        state["dpspec"]["generator"] = torch.Generator().manual_seed(1000 * seed + r).get_state()
        try:
            opt.load_state_dict(state)
        except dt.LedgerRewindError:
            break
        for x, y in loader:
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
            grads.append(float(m.weight.grad))
    return float(np.mean(grads)), len(grads)


def test_a_checkpoint_rewind_cannot_buy_more_noisy_steps(one_step):
    D, D1 = neighbours()
    sD, sD1 = [], []
    for seed in range(SEEDS):
        for data, out in ((D, sD), (D1, sD1)):
            out.append(rewind_attack(fresh(one_step), data, seed))
    # the noisy gradient is (0 or C + N(0, σ²C²)) / N with N = 8: threshold at the midpoint
    acc = threshold_accuracy([g for g, _ in sD], [g for g, _ in sD1], 0.5 / 8)
    assert acc <= gaussian_bound(1.0, 2 * SEEDS), acc
    assert {seen for _, seen in sD + sD1} == {1}  # the certified number of noisy steps, whatever the reloads


def test_rewinds_copies_and_pickles_never_lower_the_ledger(one_step, tmp_path):
    c = dpspec.compile(FULL_BATCH.format(sampling="poisson(rate = 0.5)", steps=4))
    mech = c.mechanism
    D, _ = neighbours()
    m = linear()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), D, criterion=F.mse_loss, seed=0)
    at0 = opt.state_dict()
    pickled0 = pickle.dumps(mech)
    shallow, deep = copy.copy(mech), copy.deepcopy(mech)
    it = iter(loader)
    x, y = next(it)
    F.mse_loss(model(x), y).backward()
    opt.step()
    at1 = opt.state_dict()
    assert opt.steps_taken == 1
    # copies made before the step, and an unpickled copy, are the same run: they see the step
    for other in (shallow, deep, pickle.loads(pickled0), pickle.loads(pickle.dumps(mech)), copy.deepcopy(mech)):
        assert other.ledger.steps_taken == 1 and other.ledger.remaining == 3
    with pytest.raises(dt.LedgerRewindError) as e:
        opt.load_state_dict(at0)
    assert e.value.rule == "DPS167" and opt.steps_taken == 1
    with pytest.raises(dt.LedgerRewindError):
        mech.load_ledger_state(at0["dpspec"]["ledger"])
    # a second object (a second compile) cannot take the earlier state either
    m2 = linear()
    _, opt2, _ = dt.make_private(fresh(c), m2, torch.optim.SGD(m2.parameters(), lr=0.1), D, criterion=F.mse_loss)
    with pytest.raises(dt.LedgerRewindError):
        opt2.load_state_dict(at0)
    opt2.load_state_dict(at1)  # the latest state is the same run: one budget between the two
    assert opt2.steps_taken == 1
    # steps taken by a copy count for every holder of the run
    deep.ledger.charge(1)
    assert mech.ledger.steps_taken == 2 and opt2.steps_taken == 2
    # a ledger that has charged steps of its own cannot switch to another run
    m3 = linear()
    third = fresh(c)
    _, opt3, loader3 = dt.make_private(
        third, m3, torch.optim.SGD(m3.parameters(), lr=0.1), D, criterion=F.mse_loss, seed=1
    )
    third.ledger.charge(1)
    with pytest.raises(dt.LedgerRewindError):
        opt3.load_state_dict(at1)
    # the run certificate states the steps actually noised
    rc = mech.run_certificate()
    assert rc.steps_taken == 2


def test_the_legitimate_resume_in_a_new_process_continues_the_same_budget(tmp_path, monkeypatch):
    """Train, save the state, "exit" (the process's memory of the run is dropped), a new process
    loads the state and continues; with a journal, a state older than the run's high-water mark is
    refused there too."""
    from dpspec.mechanisms import ledger as ledger_module

    c = dpspec.compile(FULL_BATCH.format(sampling="poisson(rate = 0.5)", steps=4))
    D, _ = neighbours()
    journal = tmp_path / "run.ledger.json"

    def process(state=None, steps=0, seed=None):
        monkeypatch.setattr(ledger_module, "_RUNS", {})  # a new process: nothing remembered in memory
        m = linear()
        model, opt, loader = dt.make_private(
            fresh(c), m, torch.optim.SGD(m.parameters(), lr=0.1), D, criterion=F.mse_loss, seed=seed, journal=journal
        )
        if state is not None:
            opt.load_state_dict(state)
        it = iter(loader)
        for _ in range(steps):
            x, y = next(it)
            F.mse_loss(model(x), y).backward()
            opt.step()
        return opt

    first = process(steps=1, seed=0)
    early = first.state_dict()
    first = process(early, steps=1)
    late = first.state_dict()
    assert first.steps_taken == 2
    resumed = process(late, steps=2)  # the legitimate resume: the same run, two steps left
    assert resumed.steps_taken == 4 and resumed.steps_remaining == 0
    with pytest.raises(BudgetExceededError):
        resumed.step()
    with pytest.raises(dt.LedgerRewindError, match="journal"):
        process(late)  # an older state of the run, in a new process: the journal knows 4 steps
    with pytest.raises(dt.LedgerRewindError):
        process(early)


def test_a_private_optimizer_copy_is_refused_by_name():
    c = dpspec.compile(FULL_BATCH.format(sampling="full_batch", steps=1))
    D, _ = neighbours()
    m = linear()
    _, opt, _ = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), D, criterion=F.mse_loss)
    with pytest.raises(dt.PrivateCopyError, match="state_dict"):
        copy.deepcopy(opt)
    with pytest.raises(dt.PrivateCopyError):
        pickle.dumps(opt)


# --- 2. every parameter the optimizer steps is noised --------------------------------------------------------


def added_parameter_attack(mech, data, seed):
    m = linear()
    temp = nn.Parameter(torch.ones(()))
    model, opt, loader = dt.make_private(
        mech, m, torch.optim.SGD(m.parameters(), lr=1.0), data, criterion=F.mse_loss, seed=seed
    )
    try:
        opt.add_param_group({"params": [temp]})
        for x, y in loader:
            opt.zero_grad()
            (F.mse_loss(model(x), y) + temp * x.mean()).backward()
            opt.step()
    except dt.UnnoisedParameterError as e:
        assert e.rule == "DPS166"
        assert float(m.weight.detach()) == 0.5  # refused before anything moved
    return float(temp.detach())


def test_a_parameter_added_after_wrapping_is_never_stepped_on_its_exact_gradient(one_step):
    D, D1 = neighbours(special_x=50.0)
    sD = [-added_parameter_attack(fresh(one_step), D, s) for s in range(SEEDS)]
    sD1 = [-added_parameter_attack(fresh(one_step), D1, s) for s in range(SEEDS)]
    acc = threshold_accuracy(sD, sD1, -1.0 + 1e-6)
    assert acc <= gaussian_bound(1.0, 2 * SEEDS), acc


def test_parameters_the_optimizer_holds_must_be_the_models_noised_ones():
    c = dpspec.compile(FULL_BATCH.format(sampling="poisson(rate = 0.5)", steps=4))
    D, _ = neighbours()
    m = nn.Sequential(nn.Linear(1, 2), nn.Linear(2, 1))
    first, second = m[0], m[1]
    for p in second.parameters():
        p.requires_grad_(False)
    model, opt, loader = dt.make_private(
        c, m, torch.optim.SGD(first.parameters(), lr=0.1), D, criterion=F.mse_loss, seed=0
    )
    # unfreezing a layer of the model and adding it to the optimizer: its parameters are noised too
    for p in second.parameters():
        p.requires_grad_(True)
    opt.add_param_group({"params": second.parameters(), "lr": 0.05})  # a generator, as model.parameters() is
    assert len(opt.param_groups) == 2 and len(opt.param_groups[1]["params"]) == 2
    assert run_steps(model, opt, loader) == 2 and all(p.grad is not None for p in m.parameters())
    # a frozen parameter the optimizer holds, given a gradient by hand, would be stepped on it
    before = [p.detach().clone() for p in m.parameters()]
    second.bias.requires_grad_(False)
    x, y = next(iter(loader))
    F.mse_loss(model(x), y).backward()
    second.bias.grad = torch.full_like(second.bias, float(x.sum()))
    with pytest.raises(dt.UnnoisedParameterError, match="bias"):
        opt.step()
    assert opt.steps_taken == 2
    assert all(torch.equal(a, b) for a, b in zip(before, m.parameters()))


# --- 3. non-finite examples ------------------------------------------------------------------------------


def run_length(mech, data, seed):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(1, 4), nn.Tanh(), nn.Linear(4, 1))
    model, opt, loader = dt.make_private(
        mech, m, torch.optim.SGD(m.parameters(), lr=0.1), data, criterion=F.mse_loss, seed=seed
    )
    steps = 0
    try:
        while opt.steps_remaining:
            steps += run_steps(model, opt, loader)
    except dt.CriterionMismatchError:
        pass
    assert all(torch.isfinite(p).all() for p in m.parameters())
    return steps, opt


@pytest.mark.parametrize("where", ["input", "target"])
def test_a_non_finite_record_neither_stops_nor_shortens_the_run(poisson, where):
    D, D1 = neighbours(
        special_x=math.inf if where == "input" else 1.0, special_y=math.inf if where == "target" else -10.0
    )
    seeds = 12
    sD = [run_length(fresh(poisson), D, s)[0] for s in range(seeds)]
    lengths = [run_length(fresh(poisson), D1, s) for s in range(seeds)]
    sD1 = [-n for n, _ in lengths]
    # "D' when the run stopped early": the run's length must not depend on the data, so this test is
    # blind (balanced accuracy 1/2); the earlier wrapper stopped at the step that sampled the record
    acc = threshold_accuracy([-n for n in sD], sD1, -8 + 0.5)
    assert acc == 0.5, acc
    assert set(sD) == {8} and set(sD1) == {-8}  # every run takes the certified steps
    # counted, privately: the runs that sampled the record know it (never published)
    assert any(opt.nonfinite_examples > 0 for _, opt in lengths)
    assert all(opt.nonfinite_examples == 0 for opt in (run_length(fresh(poisson), D, 0)[1],))


def test_a_non_finite_example_is_zeroed_exactly_as_the_runtime_does(one_step):
    _, D1 = neighbours(special_x=math.nan)
    m = linear()
    ref = copy.deepcopy(m)
    model, opt, loader = dt.make_private(
        fresh(one_step), m, torch.optim.SGD(m.parameters(), lr=0.0), D1, criterion=F.mse_loss, seed=5
    )
    x, y = next(iter(loader))
    F.mse_loss(model(x), y).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
    got = m.weight.grad.clone()
    mech = fresh(one_step)
    rng = np.random.default_rng(5)
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    X, Y = D1.tensors
    idx = next(mech.batches(len(X), rng, 1))
    want = mech.private_gradients(ref, F.mse_loss, X[idx], Y[idx], len(X), generator=gen, idx=idx)
    torch.testing.assert_close(got, want["weight"])
    assert opt.nonfinite_examples == 1


RESUME = r"""
import sys, warnings
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.data import TensorDataset
import dpspec, dpspec.torch as dt

warnings.simplefilter("ignore")
spec, journal = sys.argv[1:3]
m = nn.Linear(1, 1, bias=False)
data = TensorDataset(torch.zeros(8, 1), torch.zeros(8, 1))
model, opt, loader = dt.make_private(dpspec.compile(open(spec).read()), m, torch.optim.SGD(m.parameters(), lr=0.1),
                                     data, criterion=F.mse_loss, journal=journal)
for path in sys.argv[3:]:
    try:
        opt.load_state_dict(torch.load(path, weights_only=False)["opt"])
        print(path, "loaded", opt.steps_taken)
    except dt.LedgerRewindError as e:
        print(path, "refused", e.rule)
while opt.steps_remaining:
    for x, y in loader:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
print("steps", opt.steps_taken, opt.mechanism.run_certificate().steps_taken)
"""


def test_a_resume_in_a_real_new_process(tmp_path):
    """Process 1 (this one) trains 2 of 4 steps, saves; process 2 loads the latest checkpoint and runs
    the 2 steps left, and refuses the step-1 checkpoint of the same run (the journal knows 2 steps)."""
    import subprocess
    import sys

    spec = tmp_path / "run.dps"
    spec.write_text(FULL_BATCH.format(sampling="poisson(rate = 0.5)", steps=4))
    journal = tmp_path / "run.ledger.json"
    D, _ = neighbours()
    m = linear()
    model, opt, loader = dt.make_private(
        dpspec.compile(spec.read_text()),
        m,
        torch.optim.SGD(m.parameters(), lr=0.1),
        D,
        criterion=F.mse_loss,
        journal=journal,
        seed=0,
    )
    paths = []
    it = iter(loader)
    for step in range(2):
        x, y = next(it)
        F.mse_loss(model(x), y).backward()
        opt.step()
        paths.append(tmp_path / f"ckpt{step + 1}.pt")
        torch.save({"opt": opt.state_dict()}, paths[-1])
    out = subprocess.run(
        [sys.executable, "-c", RESUME, str(spec), str(journal), str(paths[1]), str(paths[0])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines == [f"{paths[1]} loaded 2", f"{paths[0]} refused DPS167", "steps 4 4"], out.stdout


def test_srpp_sgd_through_the_wrapper_also_runs_past_a_non_finite_record():
    from tests.torch.test_make_private import SRPP

    c = dpspec.compile(SRPP)
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(60, 5, generator=g), torch.randint(0, 2, (60,), generator=g)
    X[7] = math.nan
    torch.manual_seed(0)
    m = nn.Linear(5, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dt.SamplingOverrideWarning)
        model, opt, loader = dt.make_private(c, m, None, TensorDataset(X, y), criterion=F.cross_entropy, seed=0)
    assert run_steps(model, opt, loader, loss=F.cross_entropy) == 6 and opt.steps_taken == 6
    assert opt.nonfinite_examples >= 1  # 10 of 60 per step for 6 steps: record 7 was drawn with this seed
    assert all(torch.isfinite(p).all() for p in m.parameters())


def test_an_unpickled_copy_in_another_process_cannot_charge_past_the_journal(tmp_path, monkeypatch):
    from dpspec.mechanisms import ledger as ledger_module

    c = dpspec.compile(FULL_BATCH.format(sampling="poisson(rate = 0.5)", steps=4))
    mech = fresh(c)
    mech.attach_journal(tmp_path / "j.json")
    blob = pickle.dumps(mech)  # shipped to another process at 0 steps
    mech.ledger.charge(2)
    monkeypatch.setattr(ledger_module, "_RUNS", {})  # the other process
    other = pickle.loads(blob)
    assert other.ledger.steps_taken == 0
    with pytest.raises(dt.LedgerRewindError, match="journal"):
        other.ledger.charge(1)  # step 1 was already noised by the original
    assert other.ledger.steps_taken == 0


def test_a_parameter_slipped_into_the_wrapped_optimizers_own_groups_is_refused():
    c = dpspec.compile(FULL_BATCH.format(sampling="full_batch", steps=2))
    D, _ = neighbours()
    m = linear()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), D, criterion=F.mse_loss)
    temp = nn.Parameter(torch.ones(()))
    opt.original_optimizer.param_groups = [*opt.original_optimizer.param_groups, {**opt.defaults, "params": [temp]}]
    x, y = next(iter(loader))
    (F.mse_loss(model(x), y) + temp * x.sum()).backward()
    with pytest.raises(dt.UnnoisedParameterError):
        opt.step()
    assert opt.steps_taken == 0 and float(temp.detach()) == 1.0


def test_an_optimizer_over_other_parameters_is_refused_when_wrapping():
    c = dpspec.compile(FULL_BATCH.format(sampling="full_batch", steps=1))
    D, _ = neighbours()
    m = linear()
    temp = nn.Parameter(torch.ones(()))
    with pytest.raises(dt.UnnoisedParameterError) as e:
        dt.make_private(c, m, torch.optim.SGD([*m.parameters(), temp], lr=0.1), D, criterion=F.mse_loss)
    assert e.value.rule == "DPS166" and c.mechanism.ledger.steps_taken == 0
