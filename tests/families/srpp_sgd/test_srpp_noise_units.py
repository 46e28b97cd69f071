"""Noise units (digest §8/§10 step 6, §13.1): the noise the runtime injects equals the noise the
accountant certifies. These tests measure the *parameter-space* noise of a real optimizer step and
would catch the paper's 1/η under-noising (Opacus nm = σ·L/C with σ in parameter units)."""

import math

import numpy as np
import pytest

from dpspec.mechanisms.ledger import BudgetExceededError, CapExceededError

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # 2 cores shared by 2 xdist workers: avoid oversubscription

from dpspec.accounting.huc import SrppSoundnessError, paper_noise_multiplier  # noqa: E402
from dpspec.srpp import (  # noqa: E402
    FixedPairWorlds,
    LrSchedule,
    OptimizerSpec,
    Sampling,
    SrppSgdOptimizer,
    SrppSgdPlan,
    calibrate,
    realized_epsilon,
)

N, B, T = 200, 20, 12
WORLDS = FixedPairWorlds(N, 3)


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(40, 96), torch.nn.Tanh(), torch.nn.Linear(96, 10))


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(N, 40, generator=g), torch.randint(0, 10, (N,), generator=g)


def _plan(units, momentum=0.0, nesterov=False, kind="constant"):
    sched = LrSchedule(0.2, T, kind, warmup_frac=0.25 if kind == "cosine" else 0.0)
    return SrppSgdPlan(sampling=Sampling("wor", dataset_size=N, batch_size=B),
                       optimizer=OptimizerSpec(sched, momentum=momentum, nesterov=nesterov, weight_decay=1e-3),
                       clip=1.0, noise_units=units)


def _flat(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def measured_parameter_noise(plan, cal, at_step):
    """Two runs from the same state and batches that differ only in the noise of step ``at_step``:
    the parameter difference is L_t·(N_A − N_B), so its std/√2 is the parameter-space noise std."""
    X, y = _data()
    m_a, m_b = _model(), _model()
    a = SrppSgdOptimizer(m_a, plan, cal, seed=0)
    b = SrppSgdOptimizer(m_b, plan, cal, seed=0)
    xb, yb, idx = X[:B], y[:B], np.arange(B)
    for _ in range(at_step):
        a.step(xb, yb, idx)
        b.step(xb, yb, idx)
    assert torch.equal(_flat(m_a), _flat(m_b))
    b.gen.manual_seed(987654321)
    a.step(xb, yb, idx)
    b.step(xb, yb, idx)
    d = (_flat(m_a) - _flat(m_b)).numpy()
    return float(np.std(d) / math.sqrt(2.0)), d.size


@pytest.mark.parametrize("momentum,nesterov,kind,at", [(0.0, False, "constant", 0), (0.9, False, "cosine", 5),
                                                       (0.9, True, "cosine", 7)])
def test_parameter_units_inject_the_certified_sigma(momentum, nesterov, kind, at):
    plan = _plan("parameter", momentum, nesterov, kind)
    cal = calibrate(plan, WORLDS, alpha=8, epsilon=2, accountant="huc")
    got, d = measured_parameter_noise(plan, cal, at)
    # parameter units: the fresh parameter-space noise of every step is exactly σ (Lemma 5.1)
    assert got == pytest.approx(cal.sigma, rel=5 / math.sqrt(2 * d))
    # the paper's recipe would give η·σ (= 0.2 σ here) — far outside the tolerance
    eta = plan.optimizer.schedule.lr(at) * plan.optimizer.gain()
    assert abs(got - eta * cal.sigma) > 0.5 * cal.sigma


@pytest.mark.parametrize("kind", ["constant", "cosine"])
def test_gradient_units_inject_sigma_on_the_gradient(kind):
    plan = _plan("gradient", 0.9, False, kind)
    cal = calibrate(plan, WORLDS, alpha=8, epsilon=2, accountant="sa_huc")
    at = 4
    got, d = measured_parameter_noise(plan, cal, at)
    eta = plan.optimizer.schedule.lr(at)
    assert got == pytest.approx(eta * cal.sigma, rel=5 / math.sqrt(2 * d))


@pytest.mark.parametrize("units", ["gradient", "parameter"])
@pytest.mark.parametrize("accountant", ["huc", "sa_huc", "amplified"])
def test_realized_epsilon_of_the_injected_noise_is_the_target(units, accountant):
    plan = _plan(units, 0.9, False, "cosine")
    cal = calibrate(plan, WORLDS, alpha=8, epsilon=2, accountant=accountant)
    opt = SrppSgdOptimizer(_model(), plan, cal, seed=0)
    eps = realized_epsilon(plan, WORLDS, opt.noise_std, alpha=8, accountant=accountant)
    assert eps == pytest.approx(2.0, rel=1e-9)
    assert eps <= 2.0 * (1 + 1e-9)


def test_paper_recipe_under_noises_by_one_over_eta_squared():
    plan = _plan("parameter", 0.0, False, "constant")  # η = 0.2 throughout
    cal = calibrate(plan, WORLDS, alpha=8, epsilon=2, accountant="huc")
    nm = paper_noise_multiplier(cal.sigma, B, 1.0)
    grad_std = np.full(T, nm * 1.0 / B)  # Opacus: nm·C on the sum, divided by B
    eps = realized_epsilon(plan, WORLDS, grad_std, alpha=8, accountant="huc")
    assert eps == pytest.approx(2.0 / 0.2**2, rel=1e-9)  # ×25
    ours = realized_epsilon(plan, WORLDS, plan.gradient_noise_std(cal), alpha=8, accountant="huc")
    assert ours == pytest.approx(2.0, rel=1e-9)


def test_runtime_refuses_changed_optimizer_extra_steps_and_wrong_batches():
    plan = _plan("parameter", 0.9)
    cal = calibrate(plan, WORLDS, alpha=8, epsilon=2, accountant="huc")
    X, y = _data()
    opt = SrppSgdOptimizer(_model(), plan, cal, seed=0)
    with pytest.raises(CapExceededError, match=f"exactly {B}"):
        opt.step(X[:B + 1], y[:B + 1], np.arange(B + 1))
    opt.opt.param_groups[0]["momentum"] = 0.5
    with pytest.raises(SrppSoundnessError) as e:
        opt.step(X[:B], y[:B], np.arange(B))
    assert e.value.rule == "DPS508"
    opt.opt.param_groups[0]["momentum"] = 0.9
    assert opt.t == 0  # refused steps charge nothing
    for idx in opt.batches():
        opt.step(X[idx], y[idx])
    assert opt.t == T
    with pytest.raises(BudgetExceededError):
        opt.step(X[:B], y[:B], np.arange(B))
    other = _plan("gradient", 0.9)
    with pytest.raises(SrppSoundnessError) as e:
        SrppSgdOptimizer(_model(), other, cal)
    assert e.value.rule == "DPS508"
