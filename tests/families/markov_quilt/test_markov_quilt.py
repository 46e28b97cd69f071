"""The Markov Quilt Mechanism: the closed-form max-influence against a brute-force enumeration of every
state sequence, the reversible-class bound against the exact influence, and the error against group DP."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpspec.families.markov_quilt import (
    MarkovChain,
    calibrate_mqm,
    calibrate_mqm_reversible,
    group_dp_scale,
    max_influence,
    reversible_influence_bound,
)


def brute_influence(P, q, T, i, quilt):
    """max over x ≠ x′ and x_Q of log P(X_Q = x_Q | X_i = x) / P(X_Q = x_Q | X_i = x′), by summing the
    probability of every one of the k^T sequences (an independent re-implementation)."""
    k = P.shape[0]
    joint: dict = {}
    marg = np.zeros(k)
    for seq in itertools.product(range(k), repeat=T):
        pr = q[seq[0]]
        for t in range(1, T):
            pr *= P[seq[t - 1], seq[t]]
        key = (seq[i], tuple(seq[j] for j in quilt))
        joint[key] = joint.get(key, 0.0) + pr
        marg[seq[i]] += pr
    best = -math.inf
    xq_all = {key[1] for key in joint}
    for x in range(k):
        for y in range(k):
            if x == y or marg[x] == 0 or marg[y] == 0:
                continue
            for xq in xq_all:
                num, den = joint.get((x, xq), 0.0) / marg[x], joint.get((y, xq), 0.0) / marg[y]
                if num > 0 and den == 0:
                    return math.inf
                if num > 0:
                    best = max(best, math.log(num / den))
    return best


def random_chain(rng, k, stationary=True):
    P = rng.uniform(0.05, 1.0, (k, k))
    P /= P.sum(1, keepdims=True)
    q = None if stationary else rng.dirichlet(np.ones(k))
    return MarkovChain(P, q)


@pytest.mark.parametrize("seed", range(4))
def test_max_influence_agrees_with_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    ch = random_chain(rng, 2 + seed % 2, stationary=bool(seed % 2))
    T = 7
    for i, a, b in [(3, 1, 1), (3, 2, 3), (4, None, 2), (2, 2, None), (5, 3, None), (1, None, 4), (0, None, 1)]:
        quilt = ([i - a] if a is not None else []) + ([i + b] if b is not None else [])
        exact = max_influence(ch, T, i, a, b)
        ref = brute_influence(ch.transition, ch.initial, T, i, quilt)
        assert exact == pytest.approx(ref, rel=1e-8, abs=2e-9), (i, a, b)  # the slack: 1e-9 · max(1, e)
        assert exact >= ref  # rounded up (INFLUENCE_SLACK), never below the enumerated value


def test_max_influence_over_a_class_is_the_largest_member():
    rng = np.random.default_rng(9)
    chains = [random_chain(rng, 2) for _ in range(3)]
    vals = [max_influence(c, 8, 4, 2, 2) for c in chains]
    assert max_influence(chains, 8, 4, 2, 2) == max(vals)


@pytest.mark.parametrize("seed", range(5))
def test_reversible_bound_covers_the_exact_influence(seed):
    rng = np.random.default_rng(seed)
    k = 3
    W = rng.uniform(0.2, 1.0, (k, k))
    W = W + W.T  # symmetric weights: a reversible random walk
    P = W / W.sum(1, keepdims=True)
    ch = MarkovChain(P)
    pi = ch.initial
    lam = sorted(np.abs(np.linalg.eigvals(P)))[-2]
    T = 40
    for a, b in [(1, 1), (2, 3), (4, 4), (None, 3), (5, None)]:
        bound = reversible_influence_bound(float(pi.min()), float(lam), a, b)
        if math.isfinite(bound):
            assert max_influence(ch, T, 20, a, b) <= bound * (1 + 1e-12) + 1e-12


def test_mqm_exact_is_the_minimum_over_all_quilts():
    """The pruned search returns the same σ as trying every quilt of every node (T = 9)."""
    rng = np.random.default_rng(4)
    ch = random_chain(rng, 2)
    T, eps = 9, 1.0
    cal = calibrate_mqm(ch, T, eps)
    for i in range(T):
        best = T / eps
        cands = [(a, b) for a in range(1, i + 1) for b in range(1, T - i)]
        cands += [(None, b) for b in range(1, T - i)] + [(a, None) for a in range(1, i + 1)]
        for a, b in cands:
            card = (a + b - 1) if a and b else (i + b if a is None else T - 1 - i + a)
            e = max_influence(ch, T, i, a, b)
            if e < eps:
                best = min(best, card / (eps - e))
        assert cal.sigma[i] == pytest.approx(best, rel=1e-12)


def test_mqm_on_a_long_chain_is_ten_times_better_than_group_dp():
    """Chain of length 1000, 2 states, class: reversible stationary chains with π_min ≥ 0.3 and λ* ≤ 0.5
    (e.g. P = [[0.75, 0.25], [0.25, 0.75]]); the frequency of a state (L = 1/T), ε = 1."""
    T, eps = 1000, 1.0
    cal = calibrate_mqm_reversible(0.3, 0.5, T, eps)
    assert cal.scale * 10 <= group_dp_scale(T, eps)
    ch = MarkovChain(np.array([[0.75, 0.25], [0.25, 0.75]]))
    assert ch.initial.min() >= 0.3 and sorted(np.abs(np.linalg.eigvals(ch.transition)))[-2] <= 0.5 + 1e-12
    # the class bound is sound for this member: the exact MQM of the member alone is at most as noisy
    exact = calibrate_mqm(ch, 60, eps)
    approx = calibrate_mqm_reversible(0.3, 0.5, 60, eps)
    assert exact.scale <= approx.scale * (1 + 1e-12)


def _count_law(P, q, T, i, x):
    """P(count of state 1 = c | X_i = x), c = 0..T, by a forward pass over (state, count)."""
    k = P.shape[0]
    f = np.zeros((k, T + 1))
    for s in range(k):
        f[s, int(s == 1)] = q[s]
    if i == 0:
        f[[s for s in range(k) if s != x]] = 0.0
    for t in range(1, T):
        g = np.zeros_like(f)
        for s in range(k):
            for r in range(k):
                g[s, int(s == 1) :] += P[r, s] * f[r, : T + 1 - int(s == 1)]
        if t == i:
            g[[s for s in range(k) if s != x]] = 0.0
        f = g
    w = f.sum(0)
    return w / w.sum()


def _exact_epsilon(wa, wb, T, b):
    """sup_y log p(y | a) / p(y | b) for y = count/T + Laplace(b): the log-ratio of two Laplace mixtures
    is piecewise monotone between the atoms c/T and constant beyond them, so its sup is at an atom or
    at ±∞ (the limits are evaluated in closed form)."""
    from scipy.special import logsumexp

    c = np.arange(T + 1) / T
    with np.errstate(divide="ignore"):
        la, lb = np.log(wa), np.log(wb)
    ys = c
    d = -np.abs(ys[:, None] - c[None, :]) / b
    vals = logsumexp(la[None, :] + d, axis=1) - logsumexp(lb[None, :] + d, axis=1)
    top = logsumexp(la + c / b) - logsumexp(lb + c / b)  # y → +∞
    bottom = logsumexp(la - c / b) - logsumexp(lb - c / b)  # y → −∞
    return float(max(vals.max(), top, bottom))


def test_mqm_release_meets_its_epsilon_exactly_and_a_fifth_of_the_noise_does_not():
    """The released frequency's exact privacy loss for every secret pair of every node of a chain of 24
    states, and a distinguishing test on simulated releases of the worst node."""
    from dpspec.pufferfish.attacks import distinguishing_epsilon

    P = np.array([[0.8, 0.2], [0.3, 0.7]])
    ch = MarkovChain(P)
    T, eps = 24, 1.0
    cal = calibrate_mqm(ch, T, eps)
    worst, worst_i = 0.0, 0
    for i in range(T):
        w0, w1 = _count_law(P, ch.initial, T, i, 0), _count_law(P, ch.initial, T, i, 1)
        e = max(_exact_epsilon(w0, w1, T, cal.scale), _exact_epsilon(w1, w0, T, cal.scale))
        if e > worst:
            worst, worst_i = e, i
    assert worst <= eps * (1 + 1e-9)
    w0, w1 = _count_law(P, ch.initial, T, worst_i, 0), _count_law(P, ch.initial, T, worst_i, 1)
    assert max(_exact_epsilon(w0, w1, T, cal.scale / 5), _exact_epsilon(w1, w0, T, cal.scale / 5)) > eps
    rng = np.random.default_rng(5)
    n = 20000
    ya = rng.choice(T + 1, n, p=w0) / T + rng.laplace(0, cal.scale, n)
    yb = rng.choice(T + 1, n, p=w1) / T + rng.laplace(0, cal.scale, n)
    assert distinguishing_epsilon(-ya, -yb) <= eps and distinguishing_epsilon(ya, yb) <= eps


# --- the language: `prior markov(...)`, `mechanism markov_quilt` ------------------------------------------

_SPEC = """
scenario a {{
  data   synthetic(generator = markov_chain, size = {T}, seed = 2)
  secret state in {{0, 1}}
  prior  {prior}
}}
release r {{
  protect   a
  mechanism {mech}
  output    aggregate
  query     mean(state, bounds = [0, 1])
  guarantee pufferfish(epsilon = 1)
}}
"""


def _compile(prior, mech="markov_quilt", T=80):
    import dpspec

    return dpspec.compile(dpspec.loads(_SPEC.format(prior=prior, mech=mech, T=T), name="t.dps"))


def test_markov_quilt_release_takes_the_larger_scale_of_its_priors_and_refuses_other_lengths():
    from dpspec.mechanisms.ledger import DataMismatchError

    P1, P2 = [[0.8, 0.2], [0.3, 0.7]], [[0.7, 0.3], [0.3, 0.7]]
    c = _compile(
        f"[markov(states = [0, 1], transitions in [{P1}, {P2}]), "
        "markov(states = [0, 1], min_stationary = 0.3, max_eigenvalue = 0.5)]"
    )
    p = c.certificate.results[0].mechanism.parameters
    explicit = calibrate_mqm([MarkovChain(np.array(P1)), MarkovChain(np.array(P2))], 80, 1.0)
    reversible = calibrate_mqm_reversible(0.3, 0.5, 80, 1.0)
    assert p["scale_0"] == max(explicit.scale, reversible.scale)
    assert p["scale_0"] < p["group_dp_scale"]
    mech = c.mechanisms["r"]
    X = np.zeros((80, 1))
    with pytest.raises(DataMismatchError):
        mech.release(X[:40])
    assert np.isfinite(mech.release(X, rng=0).value).all()
    import dpspec

    dpspec.verify(c.certificate.to_json())


@pytest.mark.parametrize(
    "prior, mech",
    [
        ("markov(states = [0, 1], transitions in [[[0.8, 0.2], [0.3, 0.7]]])", "wasserstein"),
        ("markov(states = [0, 1], transitions in [[[0.8, 0.3], [0.3, 0.7]]])", "markov_quilt"),  # not stochastic
        ("markov(states = [0], transitions in [[[1.0]]])", "markov_quilt"),  # the data has state 1 too
        ("markov(states = [0, 1], min_stationary = 0.3)", "markov_quilt"),
        ("empirical", "markov_quilt"),
    ],
)
def test_bad_markov_specs_are_refused_with_dps436(prior, mech):
    import dpspec

    with pytest.raises(dpspec.SpecError) as e:
        _compile(prior, mech)
    assert "DPS436" in {d.rule for d in e.value.diagnostics}


def test_a_statistic_of_another_column_than_the_states_is_refused():
    """The max-influence bounds a statistic of the states only: a column holding, say, a copy of one step's
    state would be released with the states' noise (privacy loss ~1/b instead of ε). Refused (DPS432)."""
    import dpspec

    text = _SPEC.format(prior="markov(states = [0, 1], transitions in [[[0.8, 0.2], [0.3, 0.7]]])",
                        mech="markov_quilt", T=80).replace("mean(state, bounds = [0, 1])", "mean(t, bounds = [0, 80])")
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(dpspec.loads(text, name="t.dps"))
    assert [d.rule for d in e.value.diagnostics] == ["DPS432"]
    assert "not the secret's attribute `state`" in e.value.diagnostics[0].message
