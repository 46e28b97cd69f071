"""dpspec.torch.make_private: the ordinary PyTorch loop runs the certified private step.

Each model's step is compared with the runtime's own `private_gradients` path (same seed: the same
batch and the same noise), the MLP's and the GRU's also with a gradient computed by hand (per-example
clip, sum, the generator's noise, divided by the certificate's normaliser)."""

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import dpspec
import dpspec.torch as dt
from dpspec.mechanisms.ledger import BudgetExceededError, CapExceededError, DataMismatchError

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::dpspec.torch.SamplingOverrideWarning",
                                        "ignore:There is a performance drop")

SPEC = """
privacy people {{ unit record  dataset_size {n} }}
train model {{
  protect   people
  mechanism dpsgd
  sampling  {sampling}
  clipping  flat(C = {clip})
  steps     {steps}
  guarantee dp(epsilon = 2, delta = 1e-5)
}}
"""


def compile_dpsgd(n=32, sampling="poisson(rate = 0.25)", steps=6, clip=1.0):
    return dpspec.compile(SPEC.format(n=n, sampling=sampling, steps=steps, clip=clip))


def ce(out, y):
    return nn.functional.cross_entropy(out, y)


# --- the models ---------------------------------------------------------------------------------------


def mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.norm(self.conv(x))).flatten(1))


class Recurrent(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = cell(8, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.fc(out[:, -1])


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc(self.enc(self.emb(x)).mean(dim=1))


def tokens(n, gen):
    return torch.randint(0, 20, (n, 5), generator=gen)


MODELS = {
    "mlp": (mlp, lambda n, g: torch.randn(n, 6, generator=g)),
    "cnn_groupnorm": (CNN, lambda n, g: torch.randn(n, 1, 6, 6, generator=g)),
    "lstm": (lambda: Recurrent(nn.LSTM), tokens),
    "gru": (lambda: Recurrent(nn.GRU), tokens),
    "transformer": (Transformer, tokens),
}


def dataset(kind, n=32):
    g = torch.Generator().manual_seed(1)
    return TensorDataset(MODELS[kind][1](n, g), torch.randint(0, 3, (n,), generator=g))


def build(kind):
    torch.manual_seed(0)
    return MODELS[kind][0]()


def reference_step(mech, model, ds, seed):
    """The runtime's own path with make_private's seeding: the same batch, the same noise."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    X, y = ds.tensors
    idx = next(mech.batches(len(X), rng, 1))
    ii = torch.as_tensor(idx, dtype=torch.long)
    return idx, mech.private_gradients(model, ce, X[ii], y[ii], len(X), generator=gen, idx=idx)


def by_hand(model, xb, yb, clip, std, normaliser, gen):
    """Σ_i clip(∇ℓ_i) + N(0, std²) (the generator's draws, parameter order), / normaliser."""
    params = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    total = {k: torch.zeros_like(p) for k, p in params}
    for i in range(len(xb)):
        model.zero_grad()
        ce(model(xb[i:i + 1]), yb[i:i + 1]).backward()
        g = {k: p.grad.detach().clone() for k, p in params}
        norm = torch.sqrt(sum((v ** 2).sum() for v in g.values()))
        s = min(1.0, clip / (float(norm) + 1e-12))
        for k in total:
            total[k] += s * g[k]
    return {k: (v + torch.normal(0.0, std, size=v.shape, generator=gen, dtype=v.dtype)) / normaliser
            for k, v in total.items()}


def one_step(kind, seed=3):
    ds = dataset(kind)
    c = compile_dpsgd()
    m = build(kind)
    ref_model = copy.deepcopy(m)
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.0), DataLoader(ds, batch_size=5),
                                         seed=seed)
    it = iter(loader)
    xb, yb = next(it)
    opt.zero_grad()
    out = model(xb)
    with torch.no_grad():  # the forward's output is the model's (computed example by example)
        torch.testing.assert_close(out, ref_model(xb), rtol=1e-4, atol=1e-5)
    ce(out, yb).backward()
    opt.step()
    got = {k: p.grad.detach().clone() for k, p in m.named_parameters()}
    return c, ds, m, ref_model, xb, yb, got, opt


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_the_step_is_the_runtimes_private_gradient(kind):
    c, ds, m, ref_model, xb, yb, got, opt = one_step(kind)
    other = compile_dpsgd().mechanism  # a fresh ledger, the same certified numbers
    idx, want = reference_step(other, ref_model, ds, seed=3)
    assert len(xb) == len(idx) > 0
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6)
    assert opt.steps_taken == 1 and c.mechanism.ledger.steps_taken == 1
    # the noise is there: the step is not the plain clipped mean
    assert opt.privacy_spent().steps == 1


@pytest.mark.parametrize("kind", ["mlp", "gru"])
def test_the_step_equals_a_gradient_computed_by_hand(kind):
    c, ds, m, ref_model, xb, yb, got, _ = one_step(kind)
    mech = c.mechanism
    rng = np.random.default_rng(3)
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    want = by_hand(ref_model, xb, yb, mech.clip_norm, mech.noise_std, mech.normalizer, gen)
    assert mech.normalizer == 0.25 * 32  # q·N from the certificate, not len(xb)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-5)


def test_a_hugging_face_style_model():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=8, num_labels=3,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.hf = transformers.BertForSequenceClassification(cfg)

        def forward(self, x):
            return self.hf(input_ids=x).logits

    ds = dataset("lstm")
    m = Wrapped()
    ref_model = copy.deepcopy(m)
    c = compile_dpsgd()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.0), ds, seed=3)
    xb, yb = next(iter(loader))
    ce(model(xb), yb).backward()
    opt.step()
    _, want = reference_step(compile_dpsgd().mechanism, ref_model, ds, seed=3)
    for k, p in m.named_parameters():
        torch.testing.assert_close(p.grad, want[k], rtol=1e-4, atol=1e-5)


# --- budget, ledger, sampling -------------------------------------------------------------------------


def loop(model, opt, loader, loss=ce):
    sizes = []
    for xb, yb in loader:
        opt.zero_grad()
        loss(model(xb), yb).backward()
        opt.step()
        sizes.append(len(xb))
    return sizes


def test_the_ledger_is_charged_per_step_and_the_budget_is_enforced():
    c = compile_dpsgd(steps=6)
    m = mlp()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp"), seed=0)
    assert len(loader) == 4  # one epoch: 1/q steps
    eps = []
    for _epoch in range(2):
        for xb, yb in loader:
            ce(model(xb), yb).backward()
            opt.step()
            eps.append(opt.get_epsilon())
    assert opt.steps_taken == 6 and opt.steps_remaining == 0
    assert np.all(np.diff(eps) > 0)
    assert eps[-1] == pytest.approx(c.certificate.results[0].guarantee.epsilon, rel=1e-3) or eps[-1] <= 2.0
    with pytest.raises(BudgetExceededError):
        for _ in loader:
            pass
    with pytest.raises(BudgetExceededError):
        opt.step()
    assert c.mechanism.ledger.steps_taken == 6
    # a second wrapper on the same mechanism continues the same ledger: nothing left
    m2 = mlp()
    _, opt2, loader2 = dt.make_private(c, m2, torch.optim.SGD(m2.parameters(), lr=0.1), dataset("mlp"))
    with pytest.raises(BudgetExceededError):
        next(iter(loader2))


def test_empty_poisson_batches_are_steps_with_noise_only():
    c = compile_dpsgd(n=20, sampling="poisson(rate = 0.05)", steps=12)
    m = mlp()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp", n=20), seed=0)
    sizes = []
    while opt.steps_remaining:
        sizes += loop(model, opt, loader)
    assert len(sizes) == 12 and 0 in sizes
    assert opt.steps_taken == 12
    assert all(torch.isfinite(p).all() for p in m.parameters())


def test_without_replacement_batches_and_the_dataset_size():
    c = compile_dpsgd(sampling="without_replacement(batch_size = 4)")
    m = mlp()
    with pytest.raises(DataMismatchError):
        dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp", n=31))
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp"), seed=0)
    assert loop(model, opt, loader) == [4] * 6


def test_the_user_loader_settings_are_ignored_with_a_warning():
    c = compile_dpsgd()
    m = mlp()
    with pytest.warns(dt.SamplingOverrideWarning, match="batch_size=7"):
        dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1),
                        DataLoader(dataset("mlp"), batch_size=7, shuffle=True))


def test_batches_from_elsewhere_and_skipped_batches_are_refused():
    c = compile_dpsgd(steps=8)
    m = mlp()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp"), seed=1)
    with pytest.raises(CapExceededError):  # no batch drawn
        opt.step()
    it = iter(loader)
    xb, yb = next(it)
    with pytest.raises(CapExceededError):  # a forward on other data
        model(torch.randn(len(xb) + 1, 6))
    with pytest.raises(CapExceededError):  # the drawn batch skipped
        next(it)
    model.eval()
    model(torch.randn(3, 6))  # evaluation on other data is fine
    model.train()
    ce(model(xb), yb).backward()
    opt.step()
    assert opt.steps_taken == 1


def test_the_loop_loss_must_be_the_per_example_criterion():
    c = compile_dpsgd(steps=6)
    m = mlp()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp"), seed=2)
    it = iter(loader)
    xb, yb = next(it)
    nn.functional.cross_entropy(model(xb), yb, reduction="sum").backward()  # sum: accepted
    opt.step()
    xb, yb = next(it)
    nn.functional.cross_entropy(model(xb), yb, label_smoothing=0.3).backward()
    # after the first step the check is read a step late (no host read of this step's device values): the
    # step is taken — with the private gradient of the criterion, which is all the certificate covers —
    # and the next one is refused, naming it
    opt.step()
    assert opt.steps_taken == 2
    xb, yb = next(it)
    nn.functional.cross_entropy(model(xb), yb).backward()
    with pytest.raises(dt.CriterionMismatchError, match="at step 2") as e:
        opt.step()
    assert e.value.rule == "DPS165" and opt.steps_taken == 2
    # the last step's check is read when the loader's pass ends
    c5 = compile_dpsgd(steps=2)
    m5 = mlp()
    model, opt, loader = dt.make_private(c5, m5, torch.optim.SGD(m5.parameters(), lr=0.1), dataset("mlp"), seed=2)
    with pytest.raises(dt.CriterionMismatchError, match="at step 2"):
        for i, (xb, yb) in enumerate(loader):
            nn.functional.cross_entropy(model(xb), yb, label_smoothing=0.3 * i).backward()
            opt.step()
    assert opt.steps_taken == 2
    c2 = compile_dpsgd(steps=6)
    m2 = mlp()
    model, opt, loader = dt.make_private(c2, m2, torch.optim.SGD(m2.parameters(), lr=0.1), dataset("mlp"), seed=2)
    xb, yb = next(iter(loader))
    (ce(model(xb), yb) + 0.1 * sum((p ** 2).sum() for p in m2.parameters())).backward()  # a regulariser
    with pytest.raises(dt.CriterionMismatchError):
        opt.step()
    # a criterion that couples the examples of a batch is not what the private step computes
    c4 = compile_dpsgd(steps=2)
    m4 = mlp()

    def centred(out, t):
        return ce(out - out.mean(dim=0), t)

    model, opt, loader = dt.make_private(c4, m4, torch.optim.SGD(m4.parameters(), lr=0.1), dataset("mlp"),
                                         criterion=centred, seed=0)
    xb, yb = next(iter(loader))
    centred(model(xb), yb).backward()
    with pytest.raises(dt.CriterionMismatchError, match="per-example"):
        opt.step()
    # the loss the model is trained with can be given
    c3 = compile_dpsgd(steps=2)
    m3 = mlp()
    def mse(out, t):
        return ((out.softmax(-1) - (t[:, None] == torch.arange(3)).float()) ** 2).mean()

    model, opt, loader = dt.make_private(c3, m3, torch.optim.SGD(m3.parameters(), lr=0.1), dataset("mlp"),
                                         criterion=mse, seed=0)
    assert len(loop(model, opt, loader, loss=mse)) == 2


def test_checkpoint_resumes_the_same_budget():
    c = compile_dpsgd(steps=6)
    m = mlp()
    model, opt, loader = dt.make_private(c, m, torch.optim.Adam(m.parameters(), lr=0.01), dataset("mlp"), seed=0)
    loop(model, opt, loader)
    state = opt.state_dict()
    assert state["dpspec"]["ledger"]["steps_taken"] == 4
    c2 = compile_dpsgd(steps=6)
    m2 = mlp()
    model2, opt2, loader2 = dt.make_private(c2, m2, torch.optim.Adam(m2.parameters(), lr=0.01), dataset("mlp"))
    opt2.load_state_dict(state)
    assert opt2.steps_taken == 4 and len(loader2) == 2
    other = compile_dpsgd(steps=7)
    m3 = mlp()
    _, opt3, _ = dt.make_private(other, m3, torch.optim.Adam(m3.parameters(), lr=0.01), dataset("mlp"))
    with pytest.raises(DataMismatchError):
        opt3.load_state_dict(state)


def test_lr_schedulers_work_on_the_private_optimizer():
    c = compile_dpsgd(steps=4)
    m = mlp()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp"), seed=0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for xb, yb in loader:
        ce(model(xb), yb).backward()
        opt.step()
        sched.step()
    assert opt.original_optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 4)


# --- the other trainings ---------------------------------------------------------------------------------

SRPP = """scenario prevalence { secret share in {low, high} }
train model {
  protect       prevalence
  mechanism     srpp_sgd
  dataset_size  60
  discrepancy   label_flip(differing = 3)
  sampling      without_replacement(batch_size = 10)
  clipping      flat(C = 1.0)
  steps         6
  learning_rate 0.2
  noise_units   gradient
  guarantee     ave_srpp(alpha = 8, epsilon = 2)
}
"""


def test_srpp_sgd_runs_its_own_optimizer_step():
    c = dpspec.compile(SRPP)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(60, 5, generator=g), torch.randint(0, 2, (60,), generator=g))
    torch.manual_seed(0)
    m = nn.Linear(5, 2)
    with pytest.raises(DataMismatchError):
        dt.make_private(c, m, None, TensorDataset(*(t[:59] for t in ds.tensors)))
    with pytest.warns(dt.SamplingOverrideWarning, match="SRPP-SGD"):
        model, opt, loader = dt.make_private(c, m, torch.optim.Adam(m.parameters()), ds, seed=0)
    sizes = loop(model, opt, loader)
    assert sizes == [10] * 6 and opt.steps_taken == 6
    assert opt.get_epsilon() == pytest.approx(c.mechanism.privacy_spent().epsilon)
    with pytest.raises(BudgetExceededError):
        next(iter(loader))


def test_relational_and_release_targets_point_at_their_own_runtime():
    from dpspec.families.relational_dpsgd.rules import spec

    c = dpspec.compile(spec().replace("steps      20", "steps      2"))
    m = mlp()
    with pytest.raises(dt.UnsupportedTrainingError, match="trainer"):
        dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp"))


def test_a_loss_check_not_yet_on_the_host_is_read_later_never_skipped(monkeypatch):
    """On a GPU a later step's loss check is read only once its copy has reached the host (an event's query,
    which does not wait): a check still on its way stays pending — read at a later step, or at the loader's
    end, which waits — and is never dropped. Here the copies are held back."""
    from dpspec.torch import private

    queries = {"n": 0, "late": 2}

    def ready(self):  # the first queries find the copy still on its way
        queries["n"] += 1
        return queries["n"] > queries["late"]

    monkeypatch.setattr(private._DeferredVerdict, "ready", ready)
    c = compile_dpsgd(steps=6)
    m = mlp()
    model, opt, loader = dt.make_private(c, m, torch.optim.SGD(m.parameters(), lr=0.1), dataset("mlp"), seed=2)
    it = iter(loader)
    with pytest.raises(dt.CriterionMismatchError, match="at step 2"):
        for smoothing in [0.0, 0.3, 0.0, 0.0, 0.0]:  # step 2's loss is not the criterion
            xb, yb = next(it)
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb, label_smoothing=smoothing).backward()
            opt.step()
    # not arrived at steps 3 and 4's queries (both taken); read at the next query or at the pass's end
    assert opt.steps_taken == 4 and queries["n"] >= 2
    assert not model._session._verdicts  # nothing left pending after the refusal
    # never arrived during the pass: the loader's end waits for it
    queries.update(n=0, late=10**9)
    c2 = compile_dpsgd(steps=3)
    m2 = mlp()
    model, opt, loader = dt.make_private(c2, m2, torch.optim.SGD(m2.parameters(), lr=0.1), dataset("mlp"), seed=2)
    with pytest.raises(dt.CriterionMismatchError, match="at step 3"):
        for i, (xb, yb) in enumerate(loader):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb, label_smoothing=0.3 if i == 2 else 0.0).backward()
            opt.step()
    assert opt.steps_taken == 3
