"""Sliced sensitivity Δ^u (eq. 6): correctness, streaming, validation, reduction to global sensitivity."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpspec import pufferfish as pf
from dpspec.accounting.swm import SoundnessError


def brute_deltas(samples, pairs, U):
    out = np.zeros(U.shape[0])
    worlds = {w for (w, _) in samples}
    for w in worlds:
        for (a, b) in pairs:
            if (w, a) in samples and (w, b) in samples:
                for l, u in enumerate(U):
                    out[l] = max(out[l], pf.w_inf_1d(samples[(w, a)] @ u, samples[(w, b)] @ u))
    return out


def make_samples(rng, sizes, d=3, worlds=("w1", "w2")):
    return {(w, s): rng.normal(size=(n, d)) + i for w in worlds for i, (s, n) in enumerate(sizes.items())}


def test_matches_bruteforce_with_unequal_sizes_and_several_worlds():
    rng = np.random.default_rng(0)
    samples = make_samples(rng, {"a": 17, "b": 9, "c": 31})
    del samples[("w2", "c")]  # secret c has zero prior mass in w2
    pairs = pf.all_distinct_pairs(["a", "b", "c"])
    U = pf.sphere_profile(25, 3, seed=4).directions
    rep = pf.sliced_sensitivity_report(samples, pairs, U)
    assert np.allclose(rep.deltas, brute_deltas(samples, pairs, U))
    assert rep.instance_deltas.shape == (len(rep.instances), 25)
    assert ("w2", "a", "c") not in rep.instances and ("w1", "a", "c") in rep.instances
    assert np.allclose(rep.instance_deltas.max(0), rep.deltas)


@pytest.mark.parametrize("chunk", [1, 3, 7, 25])
def test_chunking_does_not_change_the_result(chunk):
    rng = np.random.default_rng(1)
    samples = make_samples(rng, {"a": 50, "b": 40}, worlds=("w",))
    U = pf.sphere_profile(25, 3, seed=2).directions
    ref = pf.slice_sensitivities(samples, [("a", "b")], U, chunk_size=25)
    got = pf.slice_sensitivities(samples, [("a", "b")], U, chunk_size=chunk)
    assert np.allclose(ref, got, rtol=1e-13, atol=0)  # BLAS kernels differ only in rounding
    ref0 = pf.slice_sensitivities(samples, [("a", "b")], U, chunk_size=25, fp_margin=False)
    assert np.all(ref >= ref0) and np.allclose(ref, ref0, rtol=1e-12)


def test_memory_limit_picks_small_chunks_and_memmap_input(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(5000, 4))
    mm = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=float, shape=X.shape)
    mm[:] = X
    mm.flush()
    Y = rng.normal(size=(3000, 4)) * 1.1
    U = pf.sphere_profile(16, 4, seed=0).directions
    rep = pf.sliced_sensitivity_report({("w", 0): mm, ("w", 1): Y}, [(0, 1)], U, memory_limit=300_000)
    assert rep.chunk_size < 16
    assert rep.buffer_bytes <= 300_000
    assert np.allclose(rep.deltas, brute_deltas({("w", 0): X, ("w", 1): Y}, [(0, 1)], U))


def test_progress_callback():
    rng = np.random.default_rng(3)
    seen = []
    pf.slice_sensitivities(make_samples(rng, {"a": 5, "b": 5}, worlds=("w",)), [("a", "b")],
                           pf.sphere_profile(10, 3, 0).directions, chunk_size=4, progress=lambda k, m: seen.append((k, m)))
    assert seen == [(4, 10), (8, 10), (10, 10)]


def test_validation_errors():
    rng = np.random.default_rng(4)
    good = {("w", "a"): rng.normal(size=(4, 2)), ("w", "b"): rng.normal(size=(3, 2))}
    U = np.eye(2)
    with pytest.raises(ValueError, match="empty"):
        pf.slice_sensitivities({("w", "a"): np.zeros((0, 2)), ("w", "b"): np.ones((2, 2))}, [("a", "b")], U)
    with pytest.raises(ValueError, match="dimension"):
        pf.slice_sensitivities({("w", "a"): np.zeros((2, 3)), ("w", "b"): np.ones((2, 2))}, [("a", "b")], U)
    with pytest.raises(ValueError, match="non-finite"):
        pf.slice_sensitivities({("w", "a"): np.array([[np.nan, 0.0]]), ("w", "b"): np.ones((2, 2))}, [("a", "b")], U)
    with pytest.raises(ValueError, match="at least one direction"):
        pf.slice_sensitivities(good, [("a", "b")], np.zeros((0, 2)))
    with pytest.raises(ValueError, match="unit vectors"):
        pf.slice_sensitivities(good, [("a", "b")], np.array([[1.0, 1.0]]))
    with pytest.raises(ValueError, match="itself"):
        pf.slice_sensitivities(good, [("a", "a")], U)
    with pytest.raises(ValueError, match="no world"):
        pf.slice_sensitivities(good, [("a", "zzz")], U)
    with pytest.raises(ValueError, match="pairs is empty"):
        pf.slice_sensitivities(good, [], U)
    with pytest.raises(ValueError, match=r"\(world, secret\)"):
        pf.slice_sensitivities({"a": np.ones((2, 2)), "b": np.ones((2, 2))}, [("a", "b")], U)
    with pytest.raises(SoundnessError) as ei:
        pf.slice_sensitivities(good, [("a", "b")], U, estimator="dkw", rho=0.01)
    assert ei.value.rule == "DPS402"


def test_dkw_estimator_rejects_samples_outside_support():
    sup = pf.BoxSupport([0, 0], [1, 1])
    s = {("w", "a"): np.array([[0.5, 0.5], [2.0, 0.1]]), ("w", "b"): np.array([[0.2, 0.2]])}
    with pytest.raises(SoundnessError) as ei:
        pf.slice_sensitivities(s, [("a", "b")], np.eye(2), estimator="dkw", support=sup, rho=0.01)
    assert ei.value.rule == "DPS404"


def test_dkw_estimator_dominates_plugin():
    rng = np.random.default_rng(5)
    s = {("w", "a"): rng.random((200, 3)), ("w", "b"): rng.random((150, 3)) * 0.9}
    U = pf.sphere_profile(20, 3, seed=3).directions
    sup = pf.BoxSupport(np.zeros(3), np.ones(3))
    plug = pf.slice_sensitivities(s, [("a", "b")], U)
    dkw = pf.slice_sensitivities(s, [("a", "b")], U, estimator="dkw", support=sup, rho=1e-3)
    lo, hi = sup.project(U)
    assert np.all(dkw >= plug - 1e-12) and np.all(dkw <= hi - lo + 1e-12)


# ------------------- reduction: single-record secrets with a product prior -------------------


def _enumerate_sum_law(values_per_record, probs_per_record, fixed_value):
    """Exact law of Σ_k x_k with x_0 = fixed_value and independent x_k (k ≥ 1) as an equally
    weighted multiset (probabilities are multiples of 1/q)."""
    outs = []
    for combo in itertools.product(*[list(zip(v, p)) for v, p in zip(values_per_record, probs_per_record)]):
        w = np.prod([c[1] for c in combo])
        reps = int(round(w * 4 ** len(combo)))
        outs += [fixed_value + sum(c[0] for c in combo)] * reps
    return np.array(outs, dtype=float)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), min_size=2, max_size=2), min_size=1, max_size=3),
    st.lists(st.sampled_from([0.25, 0.5, 0.75]), min_size=3, max_size=3),
    st.lists(st.sampled_from([0.0, 0.3, 0.6, 1.0]), min_size=2, max_size=4, unique=True),
)
def test_single_record_secret_product_prior_reduces_to_global_sensitivity(vals, ps, secret_values):
    """Secret = the value of record 0 (in [0, 1]); other records independent (product prior);
    f = sum of records. Conditional laws are shifts, so W∞ = |v − v′| and Δ = max|v − v′| = the
    global (replace-one) sensitivity of the sum restricted to the secret's domain."""
    probs = [[p, 1 - p] for p in ps[: len(vals)]]
    samples = {("θ", v): _enumerate_sum_law(vals, probs, v)[:, None] for v in secret_values}
    pairs = pf.all_distinct_pairs(secret_values)
    delta = pf.slice_sensitivities(samples, pairs, np.array([[1.0]]))
    gs = max(secret_values) - min(secret_values)
    assert delta[0] == pytest.approx(gs, abs=1e-12)


def test_single_record_secret_vector_query_matches_l2_global_sensitivity():
    # d = 2 mean of records; secret = record 0 ∈ {v, v'}; others fixed (point-mass product prior)
    rng = np.random.default_rng(0)
    others = rng.random((9, 2))
    v, vp = np.array([0.0, 0.0]), np.array([1.0, 0.5])
    f = lambda x0: np.vstack([x0, others]).mean(0)[None]
    samples = {("θ", "v"): f(v), ("θ", "vp"): f(vp)}
    gs = np.linalg.norm(v - vp) / 10
    U = pf.sphere_profile(200, 2, seed=1).directions
    delta = pf.slice_sensitivities(samples, [("v", "vp")], U)
    assert delta.max() <= gs + 1e-12
    u_star = (vp - v) / np.linalg.norm(vp - v)
    assert pf.slice_sensitivities(samples, [("v", "vp")], u_star[None])[0] == pytest.approx(gs)
    assert pf.w_inf_exact(samples[("θ", "v")], samples[("θ", "vp")]) == pytest.approx(gs)
