"""SRPP-SGD's runtime stays inside its certificate: one step budget per mechanism, per-batch caps on
the batches a user's loop passes, non-finite gradients zeroed per example, a ledger reporting ε(α)
after the steps taken, and checkpoints that continue the same ledger."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

import dpspec
from dpspec.mechanisms.ledger import BudgetExceededError, CapExceededError, DataMismatchError

torch.set_num_threads(1)
SPECS = Path(__file__).resolve().parents[3] / "specs"

SPEC = """scenario prevalence {{ secret share in {{low, high}} }}
train model {{
  protect       prevalence
  mechanism     srpp_sgd
  dataset_size  60
  discrepancy   label_flip(differing = 3)
  sampling      {sampling}
  clipping      flat(C = 1.0)
  steps         {steps}
  learning_rate 0.2
  noise_units   {units}
  guarantee     {g}
}}
"""


def compile_srpp(sampling="without_replacement(batch_size = 10)", steps=6, units="gradient",
                 g="ave_srpp(alpha = 8, epsilon = 2)"):
    return dpspec.compile(SPEC.format(sampling=sampling, steps=steps, units=units, g=g))


def data(n=60, d=5):
    gen = torch.Generator().manual_seed(0)
    return torch.randn(n, d, generator=gen), torch.randint(0, 2, (n,), generator=gen)


def model(d=5, bias=True):
    torch.manual_seed(0)
    return torch.nn.Linear(d, 2, bias=bias)


def test_copies_of_one_affected_record_are_refused_against_the_cap():
    """The hole (digits_srpp.dps, Δ = 5 label flips, B = 200): a batch of 200 copies of one affected
    record was accepted — 200 affected examples in a step whose cap assumes at most 5."""
    c = dpspec.compile(dpspec.load(str(SPECS / "digits_srpp.dps")))
    mech = c.mechanism["classifier"]
    opt = mech.optimizer(torch.nn.Linear(64, 10), seed=0)
    X, y = torch.randn(1400, 64), torch.randint(0, 10, (1400,))
    copies = np.zeros(200, dtype=np.int64)
    with pytest.raises(CapExceededError, match="appears 200 times"):
        opt.step(X[copies], y[copies], copies)
    with pytest.raises(CapExceededError, match="not drawn by the object's own sampler"):
        opt.step(X[copies], y[copies])  # no indices and no batch drawn: the caps cannot be checked
    assert mech.ledger.steps_taken == 0
    idx = next(opt.batches())
    opt.step(X[idx], y[idx])  # the drawn batch is the step's batch
    assert mech.ledger.steps_taken == 1


def test_one_budget_per_mechanism():
    """The hole: every optimizer built from the mechanism had its own T steps."""
    mech = compile_srpp(steps=6).mechanism
    X, y = data()
    mech.train(model(), X, y, seed=0, steps=4)
    with pytest.raises(BudgetExceededError):
        mech.train(model(), X, y, seed=1, steps=3)
    opt = mech.optimizer(model(), seed=2)
    assert opt.t == 4 and opt.remaining == 2  # the schedule continues where the ledger is
    for idx in opt.batches():
        opt.step(X[idx], y[idx])
    with pytest.raises(BudgetExceededError):
        mech.train(model(), X, y, seed=3)
    with pytest.raises(BudgetExceededError):
        opt.step(X[:10], y[:10], np.arange(10))
    assert mech.ledger.steps_taken == 6


def test_another_dataset_size_is_refused():
    mech = compile_srpp().mechanism
    X, y = data(61)
    with pytest.raises(DataMismatchError, match="dataset_size = 60"):
        mech.train(model(), X, y, seed=0)


def test_a_nonfinite_example_is_zeroed_not_dropped_from_the_step():
    """A non-finite example contributes exactly what a zero-gradient example contributes: the same
    step, the same public normaliser (a zero input has a zero gradient in a linear model without bias)."""
    mech = compile_srpp().mechanism
    X, y = data()
    bad, zero = X.clone(), X.clone()
    bad[3], zero[3] = float("inf"), 0.0
    idx = np.arange(10)
    m_bad, m_zero = model(bias=False), model(bias=False)
    a = mech.optimizer(m_bad, seed=0)
    b = dataclasses.replace(mech).optimizer(m_zero, seed=0)
    a.step(bad[idx], y[idx], idx)
    b.step(zero[idx], y[idx], idx)
    assert a.report.nonfinite_events == [(0, 1)] and not b.report.nonfinite_events
    torch.testing.assert_close(m_bad.weight, m_zero.weight)
    assert torch.isfinite(m_bad.weight).all() and a.t == 1


def test_privacy_spent_is_the_prefix_of_the_certificates_caps():
    for units, g in [("gradient", "ave_srpp(alpha = 8, epsilon = 2)"), ("parameter", "joint_srpp(alpha = 4, epsilon = 3)"),
                     ("gradient", "sa_ave_srpp(alpha = 8, epsilon = 2)")]:
        c = compile_srpp(units=units, g=g, steps=6)
        mech, rec = c.mechanism, c.certificate.results[0]
        X, y = data()
        assert mech.privacy_spent().epsilon == 0.0
        mech.train(model(), X, y, seed=0, steps=3)
        half = mech.privacy_spent()
        assert 0 < half.epsilon < rec.guarantee.epsilon and half.alpha == rec.guarantee.alpha
        mech.train(model(), X, y, seed=0)
        full = mech.privacy_spent()
        assert full.epsilon == rec.guarantee.epsilon and full.steps == 6 and full.notion == rec.notion.name
        if units == "gradient":  # constant caps: ε is linear in the steps
            assert half.epsilon == pytest.approx(full.epsilon / 2, rel=1e-12)
    with pytest.raises(ValueError, match="not an \\(ε, δ\\) pair"):
        mech.privacy_spent(1e-5)


def test_checkpoint_resumes_the_ledger_and_refuses_another_certificate():
    mech = compile_srpp(steps=6).mechanism
    X, y = data()
    m = model()
    opt = mech.optimizer(m, seed=0)
    for idx in list(opt.batches())[:4]:
        opt.step(X[idx], y[idx], idx)
    state = opt.state_dict()
    resumed_mech = compile_srpp(steps=6).mechanism
    resumed = resumed_mech.optimizer(m, seed=5)
    resumed.load_state_dict(state)
    assert resumed.t == 4 and resumed_mech.ledger.remaining == 2
    for idx in resumed.batches():
        resumed.step(X[idx], y[idx])
    assert resumed_mech.privacy_spent().epsilon == resumed_mech.calibration.epsilon_at(8)
    other = compile_srpp(steps=6, g="ave_srpp(alpha = 8, epsilon = 3)").mechanism.optimizer(model(), seed=0)
    with pytest.raises(DataMismatchError):
        other.load_state_dict(state)
