"""DP-SGD's runtime stays inside its certificate: public normaliser, step budget, per-batch caps,
non-finite gradients zeroed per example, and a ledger that reports ε after the steps taken."""

import numpy as np
import pytest
import torch

import dpspec
from dpspec import accounting as acc
from dpspec.diagnostics import SpecError, render
from dpspec.mechanisms.ledger import BudgetExceededError, CapExceededError, DataMismatchError

torch.set_num_threads(1)

SPEC = """
privacy people {{ unit record{size} }}
train model {{
  protect   people
  mechanism dpsgd
  sampling  {sampling}
  clipping  flat(C = 1.0)
  steps     {steps}
  guarantee dp(epsilon = 2, delta = 1e-5)
}}
"""


def compile_dpsgd(sampling="poisson(rate = 0.25)", size="  dataset_size 20", steps=6):
    return dpspec.compile(SPEC.format(sampling=sampling, size=size, steps=steps))


def zero_data(n, d=3):
    return torch.zeros(n, d), torch.zeros(n, dtype=torch.long)


def linear(d=3, out=2, bias=True):
    torch.manual_seed(0)
    return torch.nn.Linear(d, out, bias=bias)


@pytest.mark.parametrize("sampling", ["poisson(rate = 0.25)", "full_batch"])
def test_a_normaliser_read_from_the_data_is_a_located_error(sampling):
    with pytest.raises(SpecError) as e:
        compile_dpsgd(sampling, size="")
    d = [d for d in e.value.diagnostics if d.rule == "DPS160"]
    assert d and d[0].span is not None and "dataset_size" in d[0].hint
    text = render(d[0], e.value.sources)
    assert "^" in text and "error[DPS160]" in text


@pytest.mark.parametrize("sampling, want", [("poisson(rate = 0.25)", 5.0), ("full_batch", 20.0),
                                            ("poisson(expected_batch = 4)", 4.0),
                                            ("without_replacement(batch_size = 4)", 4.0)])
def test_the_normaliser_is_the_certificates_constant(sampling, want):
    c = compile_dpsgd(sampling)
    assert c.certificate.results[0].mechanism.parameters["normalizer"] == want
    assert c.mechanism.normalizer == want


@pytest.mark.parametrize("sampling", ["poisson(rate = 0.25)", "full_batch"])
def test_neighbouring_datasets_get_the_same_noise_scale(sampling):
    """The hole: q·len(X) as the normaliser made the released noise scale differ between a dataset and
    the same dataset with one (zero-gradient) record added. Now the outputs are bit for bit equal."""
    outs = []
    for n in (20, 21):
        mech = compile_dpsgd(sampling).mechanism
        X, y = zero_data(n)
        idx = next(mech.batches(n, np.random.default_rng(0), 1))
        g = mech.private_gradients(linear(bias=False), torch.nn.functional.cross_entropy, X[idx], y[idx], n,
                                   generator=torch.Generator().manual_seed(1), idx=idx)
        outs.append(torch.cat([v.flatten() for v in g.values()]))
    assert torch.equal(outs[0], outs[1])


def test_without_replacement_refuses_another_dataset_size():
    mech = compile_dpsgd("without_replacement(batch_size = 4)").mechanism
    with pytest.raises(DataMismatchError, match="dataset_size = 20"):
        mech.batches(21, np.random.default_rng(0))
    assert mech.ledger.steps_taken == 0


def test_step_budget_is_enforced_before_any_step():
    mech = compile_dpsgd(steps=6).mechanism
    X, y = zero_data(20)
    with pytest.raises(BudgetExceededError, match="covers 6 step"):
        mech.batches(20, np.random.default_rng(0), steps=1000)
    model = linear()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(BudgetExceededError):
        mech.train(model, X, y, seed=0, steps=7)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert mech.ledger.steps_taken == 0
    rep = mech.train(model, X, y, seed=0, steps=4)
    assert len(rep.batch_sizes) == 4 and mech.ledger.remaining == 2
    with pytest.raises(BudgetExceededError):
        mech.train(model, X, y, seed=0, steps=6)  # 6 more do not fit
    mech.train(model, X, y, seed=0)  # the remaining 2 do
    assert mech.ledger.steps_taken == 6
    with pytest.raises(BudgetExceededError):
        mech.train(model, X, y, seed=1)  # a second run on the same object


def test_a_step_beyond_the_budget_draws_no_noise():
    mech = compile_dpsgd(steps=2).mechanism
    X, y = zero_data(20)
    model = linear()
    gen = torch.Generator().manual_seed(3)
    for _ in range(2):
        mech.private_gradients(model, torch.nn.functional.cross_entropy, X[:3], y[:3], 20, generator=gen,
                               idx=np.arange(3))
    state = gen.get_state()
    with pytest.raises(BudgetExceededError):
        mech.private_gradients(model, torch.nn.functional.cross_entropy, X[:3], y[:3], 20, generator=gen,
                               idx=np.arange(3))
    assert torch.equal(state, gen.get_state())


def test_user_batches_must_respect_the_caps():
    mech = compile_dpsgd().mechanism
    X, y = zero_data(20)
    model, loss = linear(), torch.nn.functional.cross_entropy
    with pytest.raises(CapExceededError, match="appears 5 times"):
        idx = np.array([0, 0, 0, 0, 0, 1])
        mech.private_gradients(model, loss, X[idx], y[idx], 20, idx=idx)
    with pytest.raises(CapExceededError, match="not drawn by the object's own sampler"):
        mech.private_gradients(model, loss, X[:4], y[:4], 20)
    drawn = next(mech.batches(20, np.random.default_rng(0), 1))
    other = np.setdiff1d(np.arange(20), drawn)[:len(drawn)]
    with pytest.raises(CapExceededError, match="not the one `.batches\\(\\)` drew"):
        mech.private_gradients(model, loss, X[other], y[other], 20, idx=other)
    assert mech.ledger.steps_taken == 0  # nothing released, nothing charged
    wor = compile_dpsgd("without_replacement(batch_size = 4)").mechanism
    with pytest.raises(CapExceededError, match="exactly 4"):
        wor.private_gradients(model, loss, X[:5], y[:5], 20, idx=np.arange(5))


def test_a_nonfinite_example_is_zeroed_and_the_step_goes_on():
    """The hole: one non-finite example voided the whole step (the model froze exactly when it was
    sampled). Now its gradient is replaced by zero after clipping: the step equals the step without it."""
    mech = compile_dpsgd("full_batch").mechanism
    X, y = torch.randn(20, 3, generator=torch.Generator().manual_seed(0)), torch.zeros(20, dtype=torch.long)
    bad = X.clone()
    bad[7] = float("nan")
    loss = torch.nn.functional.cross_entropy
    keep = np.setdiff1d(np.arange(20), [7])
    g_bad = mech.private_gradients(linear(), loss, bad, y, 20, generator=torch.Generator().manual_seed(5),
                                   idx=np.arange(20))
    g_without = compile_dpsgd("full_batch").mechanism.private_gradients(
        linear(), loss, X[keep], y[keep], 20, generator=torch.Generator().manual_seed(5), idx=keep)
    for k in g_bad:
        assert torch.isfinite(g_bad[k]).all()
        torch.testing.assert_close(g_bad[k], g_without[k])
    rep = compile_dpsgd("full_batch").mechanism.train(linear(), bad, y, seed=0)
    assert rep.nonfinite_events == [(t, 1) for t in range(6)] and len(rep.batch_sizes) == 6


def test_privacy_spent_is_the_certificates_accountant_at_the_steps_taken():
    c = compile_dpsgd(steps=6)
    mech, rec = c.mechanism, c.certificate.results[0]
    assert mech.privacy_spent().epsilon == 0.0
    X, y = zero_data(20)
    mech.train(linear(), X, y, seed=0, steps=3)
    s = mech.privacy_spent(1e-5)
    assert s.steps == 3 and s.budget_steps == 6 and s.exact_for_run
    # the certificate's accountant (the minimum of RDP and PLD, PLD certifies here) after 3 steps
    assert rec.accounting.accountant == mech.accountant == "pld"
    rdp3 = acc.dpsgd_epsilon(mech.noise_multiplier, 0.25, 3, 1e-5)
    pld3 = acc.pld_epsilon(mech.noise_multiplier, 0.25, 3, 1e-5)
    assert s.epsilon == pytest.approx(min(rdp3, pld3), rel=1e-6) and s.epsilon <= rdp3
    mech.train(linear(), X, y, seed=0)
    for p in rec.guarantee.dp:  # all steps: exactly the certificate's numbers
        assert mech.privacy_spent(p.delta).epsilon == p.epsilon
    assert mech.privacy_spent().delta == 1e-5


def test_a_resumed_run_continues_the_same_ledger():
    c = compile_dpsgd(steps=6)
    X, y = zero_data(20)
    c.mechanism.train(linear(), X, y, seed=0, steps=4)
    state = c.mechanism.ledger_state()
    resumed = compile_dpsgd(steps=6).mechanism
    resumed.load_ledger_state(state)
    assert resumed.ledger.steps_taken == 4
    with pytest.raises(BudgetExceededError):
        resumed.train(linear(), X, y, seed=1, steps=3)
    other = compile_dpsgd(steps=7).mechanism  # another certificate
    with pytest.raises(DataMismatchError):
        other.load_ledger_state(state)
    noisier = compile_dpsgd("poisson(rate = 0.2)", steps=6).mechanism  # same budget, other numbers
    with pytest.raises(DataMismatchError):
        noisier.load_ledger_state(state)
