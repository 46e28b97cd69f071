"""Graph validation, degree capping (stability properties), splits and samplers."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpspec.accounting.relational import RelationalSoundnessError
from dpspec.relational import (PoissonEdgeSampler, RelationalGraph, cap_degrees, capping_change,
                               make_negative_sampler, make_positive_sampler, max_degree,
                               neg_sample_wor, node_disjoint_split, validate_edges)


def _rule(exc):
    return exc.value.rule


def test_validate_edges_errors_and_clean():
    with pytest.raises(RelationalSoundnessError) as e:
        validate_edges([[0, 0], [0, 1]], 3)
    assert _rule(e) == "DPS608"
    with pytest.raises(RelationalSoundnessError) as e:
        validate_edges([[0, 1], [1, 0]], 3)
    assert _rule(e) == "DPS608" and "duplicate" in str(e.value)
    with pytest.raises(RelationalSoundnessError) as e:
        validate_edges([[0, 5]], 3)
    assert _rule(e) == "DPS608" and "dangling" in str(e.value)
    e2, rep = validate_edges([[0, 0], [0, 1], [1, 0], [2, 7]], 3, clean=True)
    assert e2.tolist() == [[0, 1]] and rep == {"self_loops": 1, "duplicates": 1, "dangling": 1}


def test_graph_build_attributes():
    X = np.eye(4)
    g = RelationalGraph.build(4, [[0, 1]], features=X)
    assert g.report["isolated_nodes"] == 2 and g.num_nodes == 4      # isolated nodes kept
    with pytest.raises(RelationalSoundnessError) as e:
        RelationalGraph.build(3, [[0, 1]], texts=["a", "", "c"])
    assert _rule(e) == "DPS609"
    g = RelationalGraph.build(3, [[0, 1]], texts=["a", None, "c"], missing_text="empty")
    assert g.texts[1] == "" and g.report["missing_text"] == 1
    with pytest.raises(RelationalSoundnessError) as e:
        RelationalGraph.build(3, [[0, 1]])
    assert _rule(e) == "DPS609"
    with pytest.raises(RelationalSoundnessError) as e:
        RelationalGraph.build(3, [[0, 1]], features=np.eye(2))
    assert _rule(e) == "DPS609"


def test_node_disjoint_split():
    rng = np.random.default_rng(0)
    E = np.unique(np.sort(rng.integers(0, 50, (200, 2)), axis=1), axis=0)
    E = E[E[:, 0] != E[:, 1]]
    g = RelationalGraph.build(50, E, features=np.eye(50))
    sp = node_disjoint_split(g, 0.3, seed=1)
    assert np.intersect1d(sp.train_nodes, sp.test_nodes).size == 0
    assert sp.train.num_edges + sp.test.num_edges + sp.dropped_cross_edges == g.num_edges
    # every train edge maps back to an original edge between train nodes
    orig = {tuple(x) for x in E.tolist()}
    for a, b in sp.train.edges.tolist():
        x, y = sorted((sp.train_nodes[a], sp.train_nodes[b]))
        assert (x, y) in orig
    np.testing.assert_array_equal(sp.test.features, g.features[sp.test_nodes])


def _graph(draw):
    n = draw(st.integers(3, 25))
    m = draw(st.integers(0, 80))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                          min_size=m, max_size=m))
    E = np.array([sorted(p) for p in pairs if p[0] != p[1]], dtype=np.int64).reshape(-1, 2)
    E = np.unique(E, axis=0) if E.size else E
    return n, E


@settings(max_examples=60, deadline=None)
@given(data=st.data(), K=st.integers(1, 4), seed=st.integers(0, 1000),
       method=st.sampled_from(["greedy", "mutual_topk"]))
def test_capping_degree_and_subset(data, K, seed, method):
    n, E = _graph(data.draw)
    H = cap_degrees(E, n, K, seed, method)
    assert max_degree(H, n) <= K
    assert {tuple(x) for x in H.tolist()} <= {tuple(x) for x in E.tolist()}
    # the accountant's relation on the capped graph: removing a node changes <= K edges
    for u in range(n):
        assert int(np.sum((H[:, 0] == u) | (H[:, 1] == u))) <= K


@settings(max_examples=60, deadline=None)
@given(data=st.data(), K=st.integers(1, 4), seed=st.integers(0, 1000))
def test_mutual_topk_removal_monotone(data, K, seed):
    n, E = _graph(data.draw)
    for u in range(n):
        ch = capping_change(E, n, K, u, seed, "mutual_topk")
        assert ch["removed_other"] == 0            # only u's own edges disappear
        assert ch["removed_incident"] <= K
        assert ch["added"] <= ch["added_bound"]


def test_greedy_capping_can_cascade():
    """Why the guarantee is stated on the capped graph: a removal can add edges elsewhere."""
    found = False
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = 12
        E = np.unique(np.sort(rng.integers(0, n, (40, 2)), axis=1), axis=0)
        E = E[E[:, 0] != E[:, 1]]
        for u in range(n):
            ch = capping_change(E, n, 2, u, 0, "greedy")
            if ch["added"] > 0 or ch["removed_other"] > 0:
                found = True
                break
        if found:
            break
    assert found


def test_cap_zero_rejected():
    with pytest.raises(RelationalSoundnessError) as e:
        cap_degrees([[0, 1]], 2, 0)
    assert _rule(e) == "DPS607"


def test_neg_sample_wor_properties():
    rng = np.random.default_rng(0)
    pos = np.array([[0, 1], [2, 3], [4, 5], [1, 2]])
    b = neg_sample_wor(pos, 3, 30, rng)
    assert b.neg.shape == (4, 3) and len(np.unique(b.neg)) == 12      # |B-(u)| <= 1
    assert set(np.unique(b.side)) <= {0, 1}
    with pytest.raises(RelationalSoundnessError) as e:
        neg_sample_wor(pos, 8, 30, rng)
    assert _rule(e) == "DPS606"
    # the negatives depend on the positives only through their number
    r1 = neg_sample_wor(pos, 3, 30, np.random.default_rng(5)).neg
    r2 = neg_sample_wor(pos[::-1] + 10, 3, 30, np.random.default_rng(5)).neg
    np.testing.assert_array_equal(r1, r2)


def test_poisson_sampler_rate():
    rng = np.random.default_rng(0)
    E = np.stack([np.arange(1000), np.arange(1000) + 1], 1)
    s = PoissonEdgeSampler(E, 0.05, rng)
    sizes = [s().shape[0] for _ in range(400)]
    assert abs(np.mean(sizes) - 50) < 2 and min(sizes) < 50 < max(sizes)


@pytest.mark.parametrize("kind,rule", [("with_replacement", "DPS602"), ("in_batch", "DPS603"),
                                       ("content_dependent", "DPS604")])
def test_bad_negative_samplers(kind, rule):
    with pytest.raises(RelationalSoundnessError) as e:
        make_negative_sampler(kind)
    assert _rule(e) == rule and e.value.hint


@pytest.mark.parametrize("kind", ["shuffle", "fixed_size"])
def test_bad_positive_samplers(kind):
    with pytest.raises(RelationalSoundnessError) as e:
        make_positive_sampler(kind, np.zeros((3, 2), int), 0.1, np.random.default_rng(0))
    assert _rule(e) == "DPS605"
