"""Per-example gradients and clipping (torch.func), non-finite handling, and a tiny training run
on sklearn digits that learns with a certified ε."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # 2 cores shared by 2 xdist workers: avoid oversubscription

from dpspec.mechanisms.per_example import (  # noqa: E402
    clipped_grad_sum,
    ghost_supported,
    per_example_grads,
    trainable_parameters,
)
from dpspec.srpp import (  # noqa: E402
    FixedPairWorlds,
    LrSchedule,
    OptimizerSpec,
    Sampling,
    SrppSgdOptimizer,
    SrppSgdPlan,
    calibrate,
    calibrate_group_dpsgd,
    evaluate_accuracy,
    prevalence_worlds,
    train_srpp_sgd,
)

CE = torch.nn.functional.cross_entropy


def _mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 16), torch.nn.ReLU(),
                               torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh()), torch.nn.Linear(8, 3))


class Custom(torch.nn.Module):  # not a Sequential: the vmap path must be used
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(12, 6)
        self.b = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x.flatten(1))))


def _batch(B=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, 3, 4, generator=g) * 3, torch.randint(0, 3, (B,), generator=g)


@pytest.mark.parametrize("kw", [dict(clip=0.7), dict(per_layer_clips=[0.3, 0.1, 0.2, 0.1, 0.4, 0.05])])
def test_ghost_equals_vmap(kw):
    m = _mlp()
    x, y = _batch()
    assert ghost_supported(m) and not ghost_supported(Custom())
    a = clipped_grad_sum(m, CE, x, y, method="vmap", **kw)
    b = clipped_grad_sum(m, CE, x, y, method="ghost", **kw)
    assert (a.method, b.method) == ("vmap", "ghost")
    for k in a.sums:
        assert torch.allclose(a.sums[k], b.sums[k], atol=1e-5, rtol=1e-4)
    assert torch.allclose(a.norms, b.norms, atol=1e-4, rtol=1e-4)


def test_clipping_matches_a_manual_loop_and_bounds_each_example():
    m = _mlp()
    x, y = _batch(8)
    C = 0.5
    g = per_example_grads(m, CE, x, y)
    want = {k: torch.zeros_like(v) for k, v in trainable_parameters(m).items()}
    for i in range(8):
        m.zero_grad()
        CE(m(x[i:i + 1]), y[i:i + 1]).backward()
        gi = {k: p.grad.clone() for k, p in m.named_parameters()}
        for k in gi:
            assert torch.allclose(gi[k], g[k][i], atol=1e-6)
        n = torch.sqrt(sum(v.pow(2).sum() for v in gi.values()))
        s = min(1.0, C / float(n))
        for k in gi:
            want[k] += s * gi[k]
    got = clipped_grad_sum(m, CE, x, y, clip=C, method="auto")
    for k in want:
        assert torch.allclose(got.sums[k], want[k], atol=1e-5)
    one = clipped_grad_sum(m, CE, x[:1], y[:1], clip=C)
    assert float(torch.sqrt(sum(v.pow(2).sum() for v in one.sums.values()))) <= C * (1 + 1e-6)


def test_nonfinite_examples_are_zeroed_and_counted():
    for model in (_mlp(), Custom()):
        x, y = _batch(10)
        x[4, 0, 0] = float("nan")
        x[7, 1, 1] = float("inf")
        cs = clipped_grad_sum(model, CE, x, y, clip=1.0)
        assert cs.nonfinite == 2 and cs.nonfinite_index == [4, 7]
        assert all(bool(torch.isfinite(v).all()) for v in cs.sums.values())
        keep = torch.tensor([i not in (4, 7) for i in range(10)])
        ref = clipped_grad_sum(model, CE, x[keep], y[keep], clip=1.0)
        for k in cs.sums:
            assert torch.allclose(cs.sums[k], ref.sums[k], atol=1e-5)
    assert Custom and clipped_grad_sum(Custom(), CE, *_batch(4), clip=1.0).method in ("vmap", "rules")


def test_bad_models_and_clips():
    frozen = _mlp()
    for p in frozen.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="model has no trainable parameters"):
        clipped_grad_sum(frozen, CE, *_batch(4), clip=1.0)
    with pytest.raises(ValueError, match="clip"):
        clipped_grad_sum(_mlp(), CE, *_batch(4), clip=0.0)
    with pytest.raises(ValueError, match="per-layer clipping gives 2 norms"):
        clipped_grad_sum(_mlp(), CE, *_batch(4), per_layer_clips=[1.0, 1.0])
    plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=50, batch_size=5),
                       optimizer=OptimizerSpec(LrSchedule(0.1, 3)), clip=1.0)
    cal = calibrate(plan, FixedPairWorlds(50, 1), alpha=4, epsilon=1)
    with pytest.raises(ValueError, match="model has no trainable parameters"):
        SrppSgdOptimizer(frozen, plan, cal)
    empty = clipped_grad_sum(_mlp(), CE, torch.zeros(0, 3, 4), torch.zeros(0, dtype=torch.long), clip=1.0)
    assert empty.batch == 0 and all(float(v.abs().sum()) == 0 for v in empty.sums.values())


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    X = (d.data / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(X))
    tr, te = perm[:1400], perm[1400:]
    y0, y1, delta = prevalence_worlds(d.target[tr], 3, 0.10, 0.1036, seed=0)  # Δ = 5 label flips
    return (torch.tensor(X[tr]), torch.tensor(y0), torch.tensor(X[te]), torch.tensor(d.target[te]), delta)


def _digits_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


@pytest.mark.parametrize("accountant,eps,units,B,epochs", [("sa_huc", 64.0, "gradient", 100, 15),
                                                        ("huc", 1024.0, "parameter", 200, 10)])
def test_tiny_digits_run_learns_with_a_certified_epsilon(digits, accountant, eps, units, B, epochs):
    Xtr, ytr, Xte, yte, delta = digits
    assert delta == 5
    N = len(Xtr)
    T = epochs * N // B
    plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=N, batch_size=B),
                       optimizer=OptimizerSpec(LrSchedule(0.5, T, "cosine", 0.05), momentum=0.9),
                       clip=1.0, noise_units=units)
    worlds = FixedPairWorlds(N, delta)
    cal = calibrate(plan, worlds, alpha=16, epsilon=eps, accountant=accountant)
    model = _digits_model()
    rep = train_srpp_sgd(model, Xtr, ytr, plan, cal, seed=0)
    acc = evaluate_accuracy(model, Xte, yte)
    assert rep.steps_taken == T and not rep.nonfinite_events
    assert cal.epsilon == eps and cal.verify()
    assert acc > 0.35, acc  # chance is 0.10


def test_training_with_nonfinite_records_is_recorded(digits):
    Xtr, ytr, Xte, yte, delta = digits
    X = Xtr.clone()
    X[:40, 0] = float("nan")
    N, B, T = len(X), 200, 20
    plan = SrppSgdPlan(sampling=Sampling("poisson", dataset_size=N, rate=B / N, normalization="expected"),
                       optimizer=OptimizerSpec(LrSchedule(0.5, T), momentum=0.5), clip=1.0)
    cal = calibrate(plan, FixedPairWorlds(N, delta), alpha=16, epsilon=256, accountant="sa_huc")
    model = _digits_model()
    rep = train_srpp_sgd(model, X, ytr, plan, cal, seed=1)
    assert rep.steps_taken == T
    assert rep.nonfinite_events and sum(n for _, n in rep.nonfinite_events) > 0
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_group_dp_baseline_trains_with_the_same_engine(digits):
    from dpspec.srpp import PrivateSgdEngine

    Xtr, ytr, Xte, yte, delta = digits
    N, T = len(Xtr), 30
    q = 100 / N
    base = calibrate_group_dpsgd(16, 64, rate=q, steps=T, group_size=delta, delta=None)
    plan = SrppSgdPlan(sampling=Sampling("poisson", dataset_size=N, rate=q, normalization="expected"),
                       optimizer=OptimizerSpec(LrSchedule(0.5, T), momentum=0.9), clip=1.0)
    eng = PrivateSgdEngine(_digits_model(), plan, np.full(T, base.gradient_noise_std(1.0, q * N)), seed=0)
    for idx in eng.batches():
        eng.step(Xtr[idx], ytr[idx])
    assert eng.t == T and eng.noise_std[0] == pytest.approx(base.noise_multiplier / (q * N))


def test_per_layer_training_and_torch_optimizer_spec(digits):
    from dpspec.accounting.huc import SrppSoundnessError
    from dpspec.srpp import BlockProfile, optimizer_spec_from_torch

    Xtr, ytr, Xte, yte, delta = digits
    model = _digits_model()
    sizes = [p.numel() for p in model.parameters()]
    clips = tuple(float(c) for c in np.sqrt(np.array(sizes) / sum(sizes)))  # App. F.4 √dim rule, C_base = 1
    N, B, T = len(Xtr), 100, 20
    spec = optimizer_spec_from_torch(torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9),
                                     LrSchedule(0.3, T, "cosine", 0.1))
    assert spec.momentum == 0.9 and not spec.nesterov
    with pytest.raises(SrppSoundnessError) as e:
        optimizer_spec_from_torch(torch.optim.Adam(model.parameters()), LrSchedule(0.3, T))
    assert e.value.rule == "DPS509"
    for policy in ("global", "caveat"):
        plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=N, batch_size=B), optimizer=spec,
                           per_layer_clips=clips, noise_units="parameter", slice_policy=policy,
                           profile=BlockProfile.sphere(sizes, 32, seed=0))
        cal = calibrate(plan, FixedPairWorlds(N, delta), alpha=16, epsilon=256, accountant="huc")
        assert cal.slice_policy == ("slice_independent" if policy == "global" else "caveat")
        m = _digits_model()
        rep = train_srpp_sgd(m, Xtr, ytr, plan, cal, seed=0)
        assert rep.steps_taken == T and rep.method == "ghost"
    with pytest.raises(ValueError, match="per_layer_clips has 2 entries"):
        bad = SrppSgdPlan(sampling=Sampling("wor", dataset_size=N, batch_size=B), optimizer=spec, per_layer_clips=(1.0, 1.0))
        SrppSgdOptimizer(_digits_model(), bad, calibrate(bad, FixedPairWorlds(N, delta), alpha=4, epsilon=1))


def test_sampling_draws_as_accounted():
    rng = np.random.default_rng(0)
    wr = Sampling("wr", dataset_size=5, batch_size=50)
    idx = wr.draw(rng)
    assert idx.size == 50 and np.unique(idx).size <= 5  # a multiset
    wor = Sampling("wor", dataset_size=50, batch_size=10)
    assert np.unique(wor.draw(rng)).size == 10
    res = Sampling("poisson", dataset_size=20, rate=0.01, normalization="realized", empty_batch="resample")
    assert all(res.draw(rng).size >= 1 for _ in range(200))
    skip = Sampling("poisson", dataset_size=20, rate=0.01, normalization="realized", empty_batch="skip")
    assert any(skip.draw(rng).size == 0 for _ in range(200))
    with pytest.raises(ValueError, match="dataset_size"):
        next(wor.batches(49, rng, 1))
