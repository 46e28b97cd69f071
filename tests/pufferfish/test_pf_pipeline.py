"""End to end: worlds, queries, calibrate(), soundness errors, release, attacks."""

import math

import numpy as np
import pytest

from dpspec import pufferfish as pf
from dpspec.accounting.swm import SoundnessError, swm_sigma2


@pytest.fixture
def toy():
    rng = np.random.default_rng(0)
    n = 300
    S = rng.choice(["a", "b", "c"], size=n, p=[0.6, 0.3, 0.1])
    X = np.column_stack([rng.normal(40, 10, n) + (S == "b") * 5, rng.random(n), rng.integers(0, 2, n)])
    return X, S


def test_empirical_world_plugin_is_exact(toy):
    X, S = toy
    w = pf.EmpiricalWorld(X, S)
    q = pf.Mean([0, 1], lo=[0, 0], hi=[100, 1], normalize=True)
    prof = pf.sphere_profile(50, 2, seed=1)
    c, rep = pf.calibrate(pf.Scenario([w]), q, prof, alpha=4, epsilon=1, flavour="ave", return_report=True)
    assert c.reading == "exact for the finite profile" and rep.estimator == "plugin"
    assert c.profile["seed"] == 1 and c.profile["m"] == 50
    assert len(rep.instances) == 6
    # check against a direct computation
    Z = {s: q.per_record(X[S == s]) for s in "abc"}
    ref = np.zeros(50)
    for (a, b) in pf.all_distinct_pairs("abc"):
        for l, u in enumerate(prof.directions):
            ref[l] = max(ref[l], pf.w_inf_1d(Z[a] @ u, Z[b] @ u))
    assert np.allclose(c.deltas, ref, rtol=1e-12)
    assert c.sigma2 == pytest.approx(swm_sigma2(ref, None, 4, 1, "ave"), rel=1e-12)
    assert w.prior()["a"] == pytest.approx(np.mean(S == "a"))


def test_several_worlds_take_the_max(toy):
    X, S = toy
    w1 = pf.EmpiricalWorld(X, S, name="full")
    w2 = pf.BalancedSubsampleWorld(X, S, seed=3, name="bal")
    assert list(w2.prior().values()) == pytest.approx([1 / 3] * 3)
    assert len(w2.records) == 3 * min(np.sum(S == s) for s in "abc")
    q = pf.Mean([0], lo=0, hi=100)
    prof = pf.axes_profile(1)
    c_all = pf.calibrate(pf.Scenario([w1, w2]), q, prof, alpha=2, epsilon=1)
    c1 = pf.calibrate(pf.Scenario([w1]), q, prof, alpha=2, epsilon=1)
    c2 = pf.calibrate(pf.Scenario([w2]), q, prof, alpha=2, epsilon=1)
    assert c_all.deltas[0] == pytest.approx(max(c1.deltas[0], c2.deltas[0]))


def test_deterministic_world_point_masses(toy):
    X, S = toy
    w = pf.DeterministicWorld.from_groups(X, S)
    q = pf.Concat([pf.Mean([0], 0, 100, normalize=True), pf.Std([0], 0, 100, normalize=True), pf.Rate(2, ">", 0.5)])
    prof = pf.sphere_profile(30, 3, seed=0)
    c = pf.calibrate(pf.Scenario([w]), q, prof, alpha=4, epsilon=1, flavour="joint")
    F = {s: q(X[S == s]) for s in "abc"}
    want = max(abs((F[a] - F[b]) @ u) for a in "abc" for b in "abc" for u in prof.directions)
    assert math.sqrt(c.delta_star2) == pytest.approx(want, rel=1e-12)
    assert c.delta_star2 <= max(np.sum((F[a] - F[b]) ** 2) for a in "abc" for b in "abc") + 1e-12


def test_sampler_world_requires_dkw_and_support():
    def sampler(secret, n, rng):
        return rng.random((n, 2)) * (0.5 if secret == "x" else 1.0)

    w = pf.SamplerWorld(sampler, ["x", "y"], returns="outputs")
    q_nosupport = pf.CallableQuery(lambda d: d, 2)
    q = pf.CallableQuery(lambda d: d, 2, support=pf.BoxSupport([0, 0], [1, 1]))
    prof = pf.sphere_profile(20, 2, seed=0)
    sc = pf.Scenario([w])
    with pytest.raises(SoundnessError) as e1:
        pf.calibrate(sc, q, prof, alpha=4, epsilon=1, estimator="plugin", n_samples=500, gamma=0.05)
    assert e1.value.rule == "DPS401"
    with pytest.raises(SoundnessError) as e2:
        pf.calibrate(sc, q_nosupport, prof, alpha=4, epsilon=1, n_samples=500, gamma=0.05)
    assert e2.value.rule == "DPS402"
    with pytest.raises(SoundnessError) as e3:
        pf.calibrate(sc, q, prof, alpha=4, epsilon=1, n_samples=500)
    assert e3.value.rule == "DPS403"
    c = pf.calibrate(sc, q, prof, alpha=4, epsilon=1, n_samples=2000, gamma=0.05, seed=1)
    assert c.estimator["name"] == "dkw" and c.failure_probability == 0.05 and "PAC" in c.reading
    # the true per-slice W∞ of U[0,.5]² vs U[0,1]² along u is ≤ the DKW bound
    lo, hi = pf.BoxSupport([0, 0], [1, 1]).project(prof.directions)
    assert np.all(c.deltas <= hi - lo + 1e-9)
    # quantile coupling of ⟨V,u⟩ and ⟨V/2,u⟩: W∞ = ½ max|q(t)| = ½ max(Σ u_k⁺, Σ u_k⁻)
    true = np.array([0.5 * max(np.clip(u, 0, None).sum(), np.clip(-u, 0, None).sum()) for u in prof.directions])
    assert np.all(c.deltas >= true - 1e-9)


def test_callable_query_outside_support_is_refused():
    w = pf.SamplerWorld(lambda s, n, rng: np.full((3, 1), 2.0 if s == "a" else 0.0), ["a", "b"], returns="outputs",
                        exhaustive=True)
    q = pf.CallableQuery(lambda d: d, 1, support=pf.BoxSupport([0], [1]))
    with pytest.raises(SoundnessError) as e:
        pf.calibrate(pf.Scenario([w]), q, pf.axes_profile(1), alpha=4, epsilon=1)
    assert e.value.rule == "DPS404"


def test_monte_carlo_reading(toy):
    X, S = toy
    w = pf.EmpiricalWorld(X, S)
    q = pf.Mean([0, 1], lo=[0, 0], hi=[100, 1], normalize=True)
    prof = pf.sphere_profile(200, 2, seed=1, reading="monte_carlo")
    with pytest.raises(SoundnessError) as e:
        pf.calibrate(pf.Scenario([w]), q, prof, alpha=4, epsilon=1)
    assert e.value.rule == "DPS403"
    c = pf.calibrate(pf.Scenario([w]), q, prof, alpha=4, epsilon=1, gamma=0.05)
    fin = pf.calibrate(pf.Scenario([w]), q, pf.sphere_profile(200, 2, seed=1), alpha=4, epsilon=1)
    assert c.monte_carlo[1] <= math.sqrt(2) + 1e-12  # ≤ diameter of the unit box (data bound if smaller)
    assert c.monte_carlo[1] >= c.deltas.max()
    assert c.sigma2 > fin.sigma2
    assert any("Thm 4.7" in t for t in c.theorems)
    with pytest.raises(SoundnessError) as e2:
        pf.SliceProfile(np.eye(2), np.array([0.5, 0.5]), kind="axes", reading="monte_carlo")
    assert e2.value.rule == "DPS407"


def test_input_validation(toy):
    X, S = toy
    with pytest.raises(ValueError, match="empty secret class"):
        pf.EmpiricalWorld(X, S, secret_values=["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="single value"):
        pf.EmpiricalWorld(X[S == "a"], S[S == "a"])
    with pytest.raises(ValueError, match="non-finite"):
        Xn = X.copy()
        Xn[0, 0] = np.nan
        pf.EmpiricalWorld(Xn, S)
    with pytest.raises(ValueError, match="one value per record"):
        pf.EmpiricalWorld(X, S[:-1])
    w = pf.EmpiricalWorld(X, S)
    with pytest.raises(ValueError, match="dimension"):
        pf.calibrate(pf.Scenario([w]), pf.Mean([0], 0, 100), pf.axes_profile(2), alpha=4, epsilon=1)
    with pytest.raises(ValueError, match="alpha"):
        pf.calibrate(pf.Scenario([w]), pf.Mean([0], 0, 100), pf.axes_profile(1), alpha=0.5, epsilon=1)
    with pytest.raises(ValueError, match="epsilon"):
        pf.calibrate(pf.Scenario([w]), pf.Mean([0], 0, 100), pf.axes_profile(1), alpha=4, epsilon=0)
    with pytest.raises(ValueError, match="not declared"):
        pf.calibrate(pf.Scenario([w], pairs=[("a", "zz")]), pf.Mean([0], 0, 100), pf.axes_profile(1), alpha=4, epsilon=1)
    with pytest.raises(ValueError, match="at least one direction"):
        pf.explicit_profile(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="m \\(number of directions\\)"):
        pf.sphere_profile(0, 2, seed=0)
    with pytest.raises(ValueError, match="lo < hi"):
        pf.Mean([0], 1, 1)


def test_profiles():
    p = pf.explicit_profile([[3, 4], [0, 2]], weights=[0.25, 0.75], normalize=True)
    assert np.allclose(p.directions, [[0.6, 0.8], [0, 1]])
    d1 = pf.sphere_profile(10, 5, seed=9).describe()
    assert d1 == pf.sphere_profile(10, 5, seed=9).describe()
    assert d1["directions_sha256"] != pf.sphere_profile(10, 5, seed=8).describe()["directions_sha256"]
    U = pf.sphere_profile(2000, 3, seed=0).directions
    assert np.allclose(np.linalg.norm(U, axis=1), 1) and np.abs(U.mean(0)).max() < 0.05


def test_model_queries_respect_norm_bound():
    rng = np.random.default_rng(0)
    X = rng.random((200, 3))
    y = (X @ [2.0, -1.0, 0.5] + 0.1 * rng.normal(size=200) > 0.6).astype(float)
    D = np.column_stack([X, y])
    for cls, f0 in [(pf.LogisticRegressionQuery, math.log(2)), (pf.LinearSVMQuery, 1.0)]:
        for l2 in (1e-3, 1e-1, 10.0):
            q = cls([0, 1, 2], 3, l2=l2, feature_lo=0, feature_hi=1)
            w = q(D)
            assert w.shape == (4,)
            assert np.linalg.norm(w) <= math.sqrt(2 * f0 / l2) + 1e-9
            assert q.support.contains(w[None])
    # the fitted logistic regression separates reasonably
    w = pf.fit_logistic_regression(X, y, l2=1e-4)
    acc = np.mean(((np.column_stack([X, np.ones(200)]) @ w) > 0) == (y > 0.5))
    assert acc > 0.85


def test_queries_per_record_and_supports():
    X = np.array([[1.0, 10.0], [3.0, -5.0], [2.0, 0.0]])
    m = pf.Mean([0, 1], lo=[0, 0], hi=[4, 5])
    assert np.allclose(m(X), [2.0, 10 / 3 * 0.5])
    assert np.allclose(m.per_record(X).mean(0), m(X))
    sm = pf.SecondMoment([0], 0, 4, normalize=True)
    assert np.allclose(sm.per_record(X)[:, 0], [(1 - 2) ** 2 / 4, (3 - 2) ** 2 / 4, 0])
    h = pf.Histogram(0, [0, 1.5, 2.5, 4])
    assert np.allclose(h(X), [1 / 3, 1 / 3, 1 / 3])
    assert h.support.contains(h.per_record(X))
    s = pf.Sum([0], 0, 4, max_records=3)
    assert s(X)[0] == 6 and s.support.contains(s(X)[None])
    assert pf.Rate(1, ">", 0)(X)[0] == pytest.approx(1 / 3)
    assert pf.Std([0], 0, 4)(X)[0] == pytest.approx(np.std([1, 3, 2]))
    box = pf.BoxSupport([0, -1], [1, 1])
    lo, hi = box.project(np.array([[1.0, 0.0], [0.6, -0.8]]))
    assert np.allclose(lo, [0, -0.8]) and np.allclose(hi, [1, 0.6 + 0.8])
    assert box.diameter() == pytest.approx(math.sqrt(5))


def test_release_and_attacks(toy):
    X, S = toy
    w = pf.EmpiricalWorld(X, S)
    q = pf.Mean([0], 0, 100, normalize=True)
    c = pf.calibrate(pf.Scenario([w]), q, pf.axes_profile(1), alpha=4, epsilon=1)
    mech = pf.SWMMechanism(q, c)
    Y = mech.release_records(X, rng=0)
    assert Y.shape == (len(X), 1)
    assert np.var(Y - q.per_record(X)) == pytest.approx(c.sigma2, rel=0.2)
    with pytest.raises(ValueError, match="dimension"):
        pf.release(np.zeros(3), c)
    prior = w.prior()
    secrets = list(prior)
    truth = np.array([secrets.index(s) for s in S])
    cond = {s: q.per_record(w.records_of(s)) for s in secrets}
    means = {s: v.mean(0) for s, v in cond.items()}
    acc_map = pf.attack_accuracy(pf.map_attack(Y, means, prior, c.sigma2), truth)
    acc_bayes = pf.attack_accuracy(pf.bayes_attack(Y, cond, prior, c.sigma2), truth)
    base = pf.prior_baseline(prior)
    assert base == pytest.approx(max(np.mean(S == s) for s in secrets))
    # at heavy noise, neither attack should beat the prior by much
    assert acc_map <= base + 0.1 and acc_bayes <= base + 0.1
    # with tiny noise the Bayes attack is at least as good as MAP on average
    Y0 = q.per_record(X) + 1e-3 * np.random.default_rng(1).standard_normal((len(X), 1))
    assert pf.attack_accuracy(pf.bayes_attack(Y0, cond, prior, 1e-6), truth) >= \
        pf.attack_accuracy(pf.map_attack(Y0, means, prior, 1e-6), truth) - 0.02
