"""Relational DP-SGD's runtime stays inside its certificate: one step budget per mechanism, the degree
cap and NEG-SAMPLE-WOR caps on any batch a user passes, non-finite per-tuple gradients zeroed, and a
ledger reporting ε after the steps taken."""

import numpy as np
import pytest
import torch

import dpspec
from dpspec.families.relational_dpsgd.rules import spec
from dpspec.mechanisms.ledger import BudgetExceededError, CapExceededError, DataMismatchError
from dpspec.relational import RelationalGraph, cap_degrees
from dpspec.relational.encoders import MLPEncoder
from dpspec.relational.samplers import TupleBatch
from dpspec.relational.trainer import RelationalTrainer, TrainConfig

torch.set_num_threads(1)


def ten_steps():
    return dpspec.compile(spec().replace("steps      20", "steps      10"))


@pytest.fixture(scope="module")
def compiled():
    return ten_steps()


def test_train_50_on_a_10_step_certificate_is_refused():
    c = ten_steps()
    mech = c.mechanism
    with pytest.raises(BudgetExceededError, match="covers 10 step"):
        mech.trainer(seed=0).train(50)
    assert mech.ledger.steps_taken == 0
    tr = mech.trainer(seed=0)
    tr.train(6)
    second = mech.trainer(seed=1)  # a second trainer of the same mechanism continues the same ledger
    with pytest.raises(BudgetExceededError):
        second.train(5)
    second.train()
    with pytest.raises(BudgetExceededError):
        second.step()
    assert mech.ledger.steps_taken == 10
    assert mech.privacy_spent().epsilon == c.certificate.results[0].guarantee.epsilon
    mech.trainer(seed=2, private=False).train(3)  # the non-private baseline has no budget


def _batch(pos, neg):
    pos = np.asarray(pos, dtype=np.int64).reshape(-1, 2)
    neg = np.asarray(neg, dtype=np.int64).reshape(len(pos), -1)
    return TupleBatch(pos, neg, np.zeros_like(neg))


def test_user_batches_keep_the_degree_cap(compiled):
    tr = ten_steps().mechanism.trainer(seed=0)
    edges = tr.graph.edges
    deg = np.bincount(edges.ravel(), minlength=tr.graph.num_nodes)
    u = int(np.argmax(deg))
    mine = edges[(edges == u).any(axis=1)]
    def negs(b):  # 4 distinct negatives per tuple, none repeated across the batch
        return np.arange(100, 100 + 4 * b) % tr.graph.num_nodes
    # the same edge K + 1 times: node u would be in K + 1 positive tuples of one step
    rep = np.repeat(mine[:1], tr.cfg.degree_cap + 1, axis=0)
    with pytest.raises(CapExceededError, match="appears twice"):
        tr.step(_batch(rep, negs(len(rep))))
    non_edge = np.array([[u, u]])
    with pytest.raises(CapExceededError, match="not an edge of the degree-capped training graph"):
        tr.step(_batch(non_edge, negs(1)))
    two = edges[:2]
    with pytest.raises(CapExceededError, match="negative of 2 tuples"):
        tr.step(_batch(two, [[5, 6, 7, 8], [5, 9, 10, 11]]))
    assert tr.ledger.steps_taken == 0
    tr.step(_batch(mine, negs(len(mine))))  # u's own (≤ K) edges are a valid batch
    assert tr.ledger.steps_taken == 1


def test_the_cap_check_counts_tuples_per_node():
    """A direct trainer on a graph whose cap the configuration states: K + 1 distinct edges at one node
    in one batch break the degree cap even though each is an edge."""
    n = 12
    star = np.array([[0, i] for i in range(1, 5)])
    g = RelationalGraph.build(n, star, features=np.eye(n))
    tr = RelationalTrainer(g, MLPEncoder(g.features, hidden=4, out=3), TrainConfig(batch_size=2, k_neg=0,
                                                                                   degree_cap=4, steps=3))
    tr.cfg.degree_cap = 3  # as if the graph had been capped at 4 but the certificate said 3
    with pytest.raises(CapExceededError, match="above the degree cap"):
        tr.step(_batch(star, np.zeros((4, 0))))


@pytest.mark.parametrize("ghost", [True, False])
def test_a_nonfinite_tuple_gradient_is_zeroed(ghost):
    rng = np.random.default_rng(0)
    n = 40
    edges = np.array(sorted({tuple(sorted(rng.choice(n, 2, replace=False))) for _ in range(60)}))
    g = RelationalGraph.build(n, edges, features=(rng.random((n, 8)) < 0.3).astype(float))
    g = g.with_edges(cap_degrees(g.edges, n, 3, 0))

    def trainer():
        enc = MLPEncoder(g.features, hidden=6, out=4, seed=0)
        return RelationalTrainer(g, enc, TrainConfig(batch_size=4, k_neg=1, degree_cap=3, steps=2, optimizer="sgd",
                                                     lr=0.5, sigma=0.5), use_ghost=ghost)

    a, b = trainer(), trainer()
    bad_node = int(g.edges[0, 0])
    others = g.edges[(g.edges != bad_node).all(axis=1)][:2]
    pos = np.concatenate([g.edges[:1], others])
    negs = [v for v in range(n) if v != bad_node and v not in pos][:3]
    a.encoder.X[bad_node] = float("nan")
    batch = _batch(pos, [[v] for v in negs])
    keep = _batch(pos[1:], [[v] for v in negs[1:]])
    torch.manual_seed(7)
    a.step(batch)
    torch.manual_seed(7)
    b.step(keep)
    assert a.result.nonfinite_events == [(0, 1)]
    for k in a.params:
        assert torch.isfinite(a.params[k]).all()
        torch.testing.assert_close(a.params[k], b.params[k])


def test_privacy_spent_and_resume(compiled):
    c = ten_steps()
    mech, rec = c.mechanism, c.certificate.results[0]
    tr = mech.trainer(seed=0)
    tr.train(4)
    part = mech.privacy_spent()
    assert 0 < part.epsilon < rec.guarantee.epsilon and part.delta == rec.guarantee.delta and part.steps == 4
    state = tr.state_dict()
    again = ten_steps().mechanism
    t2 = again.trainer(seed=0)
    t2.load_state_dict(state)
    assert again.ledger.steps_taken == 4 and again.privacy_spent().epsilon == part.epsilon
    other = dpspec.compile(spec()).mechanism.trainer(seed=0)  # 20 steps: another certificate
    with pytest.raises(DataMismatchError):
        other.load_state_dict(state)
