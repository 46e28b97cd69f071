"""Node-level sensitivity of the clipping rules on adversarial NEG-SAMPLE-WOR batches."""

import numpy as np
import pytest

from dpspec.accounting.relational import RelationalSoundnessError, freq_clip_sensitivity
from dpspec.relational import TupleBatch, clipped_sum, neighbouring_batch, neg_sample_wor
from dpspec.relational.capping import cap_degrees


def _diff(batch, grads, mode, node, repl, repl_grad, K, k, C=1.0):
    b2, g2 = neighbouring_batch(batch, grads, node, repl, repl_grad)
    return np.linalg.norm(clipped_sum(grads, batch, mode, C, K, k) -
                          clipped_sum(g2, b2, mode, C, K, k))


def _random_batch(rng, n, K, k, m_target, rate):
    E = rng.integers(0, n, size=(m_target, 2))
    E = E[E[:, 0] != E[:, 1]]
    E = np.unique(np.sort(E, axis=1), axis=0)
    E = cap_degrees(E, n, K, seed=int(rng.integers(1 << 30)))
    pos = E[rng.random(E.shape[0]) < rate]
    if pos.shape[0] * k > n:
        pos = pos[: n // max(k, 1)]
    return neg_sample_wor(pos, k, n, rng)


def _adversarial_grads(rng, batch, node, d, big=1e6):
    """Huge norms (every tuple is clipped), u*'s tuples along -e, the others along +e, plus
    random perturbations: the worst case for a sum of clipped vectors."""
    e = np.zeros(d)
    e[0] = 1.0
    has = np.any(batch.pos == node, axis=1) | np.any(batch.neg == node, axis=1)
    g = np.where(has[:, None], -e, e) + 0.3 * rng.normal(size=(batch.size, d))
    return g * big


@pytest.mark.parametrize("mode", ["static", "standard", "freq"])
def test_sensitivity_bounds_random_adversarial(mode):
    rng = np.random.default_rng(1)
    worst = 0.0
    for trial in range(60):
        K, k = int(rng.integers(1, 5)), int(rng.integers(0, 4))
        n = int(rng.integers(20, 80))
        batch = _random_batch(rng, n, K, k, 4 * n, rate=float(rng.uniform(0.2, 0.9)))
        if batch.size == 0:
            continue
        nodes = np.unique(batch.node_slots())
        for node in rng.choice(nodes, size=min(5, nodes.size), replace=False):
            repl = int(rng.integers(0, n))
            grads = _adversarial_grads(rng, batch, node, 3)
            rg = rng.normal(size=3) * 1e6 * rng.choice([-1, 1])
            i = int(np.sum(np.any(batch.pos == node, axis=1)))
            j = int(np.sum(np.any(batch.neg == node, axis=1) & ~np.any(batch.pos == node, axis=1)))
            assert i <= K and j <= 1
            d = _diff(batch, grads, mode, int(node), repl, rg, K, k)
            if mode == "static":
                bound = 1.0
            elif mode == "standard":
                bound = i + 2 * j
            else:
                bound = 0.5 * ((i + j > 0) + j + i * (k + 1) / 2)
                assert bound <= freq_clip_sensitivity(K, k) + 1e-12
            assert d <= bound * (1 + 1e-9) + 1e-9, (mode, trial, d, bound)
            worst = max(worst, d / max(bound, 1e-12))
    assert worst > 0.5            # the search does reach the bound's scale


def test_static_bound_is_attained():
    """K positive tuples of u* and one tuple with u* as a negative, all aligned: exactly C."""
    K, k = 3, 2
    pos = np.array([[0, 1], [0, 2], [0, 3], [4, 5]])
    neg = np.array([[10, 11], [12, 13], [14, 15], [0, 16]])
    batch = TupleBatch(pos, neg, np.zeros_like(neg))
    g = np.tile([1e6, 0.0], (4, 1))
    d = _diff(batch, g, "static", 0, 99, np.array([-1e6, 0.0]), K, k)
    assert d == pytest.approx(1.0)


def test_freqclip_digest_counterexample():
    """Digest §8.1: Prop 4.1 claims sensitivity C; FREQ-CLIP gives 1.75 C here."""
    K = 5
    pos, neg, grads = [], [], []
    for t in range(K):
        pos.append([0, 1 + t])            # (u*, w_t); u* = 0
        neg.append([100 + t])             # negative a_t paired with w_t (side 1)
        grads.append([-1e6])
    for t in range(K):
        pos.append([1 + t, 200 + t])      # (w_t, x_t)
        neg.append([300 + t])             # fresh b_t
        grads.append([1e6])
    batch = TupleBatch(np.array(pos), np.array(neg), np.ones((2 * K, 1), np.int64))
    d = _diff(batch, np.array(grads, float), "freq", 0, 999, None, K, 1)
    assert d == pytest.approx(1.75)       # > C: Prop 4.1's claim fails
    assert d <= 0.5 * (1 + K * 2 / 2)     # corrected bound for (i=5, j=0)


@pytest.mark.parametrize("j", [0, 1])
def test_freqclip_corrected_bound_is_tight(j):
    """Every other node of u*'s positive tuples has one more tuple of its own: the corrected
    bound C/2 (1 + 3j/2 + i (k+1)/2) is attained."""
    K, k = 3, 2
    u = 0
    pos, neg, side, grads = [], [], [], []
    nxt = [1000]

    def fresh():
        nxt[0] += 1
        return nxt[0]
    others = []
    for t in range(K):
        w = fresh()
        negs = [fresh() for _ in range(k)]
        pos.append([u, w]); neg.append(negs); side.append([1] * k); grads.append([-1e6])
        others += [w] + negs
    for v in others:                       # each co-occurring node in one B0 tuple
        pos.append([v, fresh()]); neg.append([fresh() for _ in range(k)]); side.append([0] * k)
        grads.append([1e6])
    repl = None
    if j:
        pos.append([fresh(), fresh()]); neg.append([u] + [fresh() for _ in range(k - 1)])
        side.append([0] * k); grads.append([-1e6])
        repl = fresh()
        pos.append([repl, fresh()]); neg.append([fresh() for _ in range(k)]); side.append([0] * k)
        grads.append([-1e6])
    batch = TupleBatch(np.array(pos), np.array(neg), np.array(side))
    g = np.array(grads, float)
    d = _diff(batch, g, "freq", u, repl if j else 5, np.array([1e6]) if j else None, K, k)
    want = 0.5 * (1 + j + K * (k + 1) / 2)
    assert d == pytest.approx(want, rel=1e-9)
    assert freq_clip_sensitivity(K, k) == pytest.approx(1 + K * (k + 1) / 4)


def test_with_replacement_batch_rejected():
    batch = TupleBatch(np.array([[1, 2], [3, 4]]), np.array([[0], [0]]), np.zeros((2, 1), int))
    with pytest.raises(RelationalSoundnessError) as e:
        neighbouring_batch(batch, np.ones((2, 2)), 0, 9)
    assert e.value.rule == "DPS602"
