"""Properties of the 1-D W∞, its DKW upper bound and the exact unsliced W∞."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from dpspec import pufferfish as pf
from dpspec.pufferfish.wasserstein import w_inf_dkw_upper_sorted_rows, w_inf_sorted_rows

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)
# small integer-valued samples make ties and equal multisets likely
ints = st.integers(min_value=-5, max_value=5).map(float)
sample = st.lists(st.one_of(finite, ints), min_size=1, max_size=12)

SETTINGS = settings(max_examples=150, deadline=None)


def weighted_w_inf(xa, wa, xb, wb):
    """Exact W∞ between two weighted 1-D discrete measures via their quantile functions."""
    oa, ob = np.argsort(xa, kind="stable"), np.argsort(xb, kind="stable")
    xa, wa, xb, wb = np.asarray(xa)[oa], np.asarray(wa)[oa], np.asarray(xb)[ob], np.asarray(wb)[ob]
    ca, cb = np.cumsum(wa), np.cumsum(wb)
    ca /= ca[-1]
    cb /= cb[-1]
    grid = np.unique(np.concatenate([ca, cb]))
    grid = grid[grid > 0]
    ia = np.minimum(np.searchsorted(ca, grid - 1e-12), len(xa) - 1)
    ib = np.minimum(np.searchsorted(cb, grid - 1e-12), len(xb) - 1)
    return float(np.max(np.abs(xa[ia] - xb[ib])))


@SETTINGS
@given(sample, sample)
def test_symmetric_and_nonnegative(a, b):
    assert pf.w_inf_1d(a, b) == pf.w_inf_1d(b, a) >= 0


@SETTINGS
@given(sample, sample, sample)
def test_triangle_inequality(a, b, c):
    ab, bc, ac = pf.w_inf_1d(a, b), pf.w_inf_1d(b, c), pf.w_inf_1d(a, c)
    assert ac <= ab + bc + 1e-9 * (1 + ab + bc)


@SETTINGS
@given(sample, st.randoms(use_true_random=False))
def test_zero_for_permutations(a, rnd):
    b = list(a)
    rnd.shuffle(b)
    assert pf.w_inf_1d(a, b) == 0.0


@SETTINGS
@given(sample, st.integers(min_value=1, max_value=4))
def test_replication_invariance(a, k):
    # the uniform empirical measure of a k-fold replicated sample is the same measure
    assert pf.w_inf_1d(a, list(a) * k) == 0.0


@SETTINGS
@given(sample, sample)
def test_zero_iff_equal_multisets(a, b):
    d = pf.w_inf_1d(a, b)
    if len(a) == len(b):
        assert (d == 0.0) == (sorted(a) == sorted(b))
    if d == 0.0:
        # equal measures: every value has the same relative frequency
        va, ca = np.unique(a, return_counts=True)
        vb, cb = np.unique(b, return_counts=True)
        assert np.array_equal(va, vb)
        assert np.allclose(ca / len(a), cb / len(b))


@SETTINGS
@given(sample, sample)
def test_unequal_sizes_match_weighted_quantile_reference(a, b):
    ref = weighted_w_inf(a, np.ones(len(a)), b, np.ones(len(b)))
    assert pf.w_inf_1d(a, b) == pytest.approx(ref, abs=1e-9)


@SETTINGS
@given(sample, finite)
def test_shift(a, c):
    assert pf.w_inf_1d(a, np.asarray(a) + c) == pytest.approx(abs(c), abs=1e-9 * (1 + abs(c)))


def test_unequal_sizes_against_exact_flow():
    rng = np.random.default_rng(3)
    for _ in range(40):
        na, nb = rng.integers(1, 9, size=2)
        a, b = rng.normal(size=na), rng.normal(size=nb)
        assert pf.w_inf_1d(a, b) == pytest.approx(pf.w_inf_exact(a[:, None], b[:, None]), abs=1e-12)


def test_bad_inputs():
    with pytest.raises(ValueError, match="empty"):
        pf.w_inf_1d([], [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        pf.w_inf_1d([np.nan], [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        pf.w_inf_1d([1.0], [np.inf])


def test_exact_unsliced_matching_and_flow():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 3)), rng.normal(size=(30, 3)) + 0.5
    d = pf.w_inf_exact(X, Y)
    # brute force over permutations is infeasible; check against the flow formulation and bounds
    d_flow = pf.w_inf_exact(np.repeat(X, 2, axis=0), Y)  # 60 vs 30: same measure as X, via max-flow
    assert d == pytest.approx(d_flow)
    U = pf.sphere_profile(300, 3, seed=1).directions
    sliced = pf.slice_sensitivities({("w", 0): X, ("w", 1): Y}, [(0, 1)], U)
    assert sliced.max() <= d + 1e-12  # Ψ^u is 1-Lipschitz (§3.1)


def test_exact_unsliced_small_bruteforce():
    import itertools

    rng = np.random.default_rng(5)
    for _ in range(10):
        X, Y = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
        D = np.linalg.norm(X[:, None] - Y[None], axis=-1)
        brute = min(max(D[i, p[i]] for i in range(5)) for p in itertools.permutations(range(5)))
        assert pf.w_inf_exact(X, Y) == pytest.approx(brute)


# ------------------------------- DKW upper bound --------------------------------------------


def test_dkw_zero_radius_is_plugin():
    rng = np.random.default_rng(1)
    A = np.sort(rng.random((4, 7)), 1)
    B = np.sort(rng.random((4, 5)), 1)
    assert np.allclose(w_inf_dkw_upper_sorted_rows(A, B, 0.0, 0.0, 0.0, 1.0), w_inf_sorted_rows(A, B))


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=2, max_size=9),
    st.lists(st.floats(0, 1), min_size=2, max_size=9),
    st.floats(0.0, 0.6),
    st.floats(0.0, 0.6),
    st.integers(0, 2**31 - 1),
)
def test_dkw_bound_dominates_every_law_in_the_bands(a, b, ea, eb, seed):
    """Any law within sup-distance e of the empirical CDF and inside the support [0, 1] has W∞ ≤ bound."""
    rng = np.random.default_rng(seed)
    A, B = np.sort(a)[None], np.sort(b)[None]
    bound = w_inf_dkw_upper_sorted_rows(A, B, ea, eb, np.array([0.0]), np.array([1.0]))[0]
    assert bound >= pf.w_inf_1d(a, b) - 1e-12

    def perturb(x, e):
        # move up to mass e (total) to the support ends and to new random points: CDF moves ≤ e
        n = len(x)
        w = np.full(n, 1.0 / n)
        budget = e * rng.random()
        xs = list(x)
        ws = list(w)
        take = budget
        for i in rng.permutation(n):
            t = min(ws[i], take)
            ws[i] -= t
            take -= t
            if take <= 0:
                break
        moved = budget - take
        k = rng.integers(1, 4)
        for _ in range(k):
            xs.append(rng.choice([0.0, 1.0, rng.random()]))
            ws.append(moved / k)
        xs, ws = np.array(xs), np.array(ws)
        keep = ws > 0
        return xs[keep], ws[keep]

    for _ in range(5):
        xa, wa = perturb(a, ea)
        xb, wb = perturb(b, eb)
        # confirm the perturbation respects the band
        grid = np.linspace(-0.01, 1.01, 300)
        Fa_hat = (np.asarray(a)[None] <= grid[:, None]).mean(1)
        Fa = ((xa[None] <= grid[:, None]) * wa).sum(1) / wa.sum()
        assert np.max(np.abs(Fa - Fa_hat)) <= ea + 1e-9
        assert weighted_w_inf(xa, wa, xb, wb) <= bound + 1e-9


def test_dkw_bound_covers_true_laws_at_stated_level():
    """Uniform[0,1] vs Uniform[0.2, 1.2] restricted to support [0, 1.2]: true W∞ = 0.2."""
    rng = np.random.default_rng(7)
    n, rho = 4000, 1e-3
    e = pf.dkw_radius(n, rho)
    misses = 0
    for _ in range(20):
        A = np.sort(rng.random(n))[None]
        B = np.sort(rng.random(n) + 0.2)[None]
        ub = w_inf_dkw_upper_sorted_rows(A, B, e, e, np.array([0.0]), np.array([1.2]))[0]
        misses += ub < 0.2
        assert ub < 1.2  # non-trivial
    assert misses == 0


def test_exact_unsliced_weighted_atoms_and_exceeds():
    rng = np.random.default_rng(11)
    X = np.round(rng.normal(size=(40, 2)), 0)  # many duplicate rows
    Y = np.round(rng.normal(size=(17, 2)) + 0.3, 0)
    d = pf.w_inf_exact(X, Y)
    # reference without merging duplicates: jitter-free flow on the raw rows
    from dpspec.pufferfish.wasserstein import _feasible_flow
    from scipy.spatial.distance import cdist

    D = cdist(X, Y)
    cand = np.unique(D)
    ref = min(t for t in cand if _feasible_flow(D, t))
    assert d == pytest.approx(ref)
    assert pf.w_inf_exceeds(X, Y, d * 0.999) and not pf.w_inf_exceeds(X, Y, d)
    assert pf.w_inf_exact(X, Y, lower=d) == pytest.approx(d)
