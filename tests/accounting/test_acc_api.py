"""Public API contract: names, signatures, curves, composition, conversion,
calibration and input validation."""

import inspect
import math
import warnings

import numpy as np
import pytest

from dpspec import accounting as acc


def test_public_signatures():
    sig = {name: list(inspect.signature(getattr(acc, name)).parameters) for name in acc.__all__
           if callable(getattr(acc, name)) and not isinstance(getattr(acc, name), type)}
    assert sig["gaussian_rdp"] == ["alpha", "sigma", "sensitivity"]
    assert sig["poisson_gaussian_rdp"] == ["alpha", "sigma", "rate", "group_size"]
    assert sig["poisson_gaussian_rdp_baseline"] == ["alpha", "sigma", "rate", "group_size"]
    assert sig["wor_gaussian_rdp"] == ["alpha", "sigma", "batch_size", "dataset_size", "relation"]
    assert sig["rdp_to_dp"][:3] == ["alphas", "rdp", "delta"]
    assert sig["dpsgd_epsilon"] == ["sigma", "rate", "steps", "delta", "sampling", "group_size",
                                    "dataset_size"]
    assert sig["calibrate_dpsgd_sigma"] == ["target_epsilon", "delta", "rate", "steps",
                                            "sampling", "group_size", "dataset_size"]
    assert sig["poisson_rr_rdp"] == ["alpha", "theta", "rate", "group_size"]
    assert sig["wor_rr_rdp"] == ["alpha", "theta", "batch_size", "dataset_size"]
    assert sig["dpsgd_rdp_curve"] == ["sigma", "rate", "steps", "sampling", "group_size",
                                      "dataset_size", "alphas"]


def test_default_alphas():
    a = acc.DEFAULT_ALPHAS
    assert a.min() <= 1.01 and a.max() >= 5000
    assert np.all(np.diff(a) > 0)
    assert not a.flags.writeable


def test_scalar_and_array_outputs():
    assert isinstance(acc.poisson_gaussian_rdp(2, 1.0, 0.01), float)
    out = acc.poisson_gaussian_rdp(np.array([2.0, 2.5]), 1.0, 0.01)
    assert isinstance(out, np.ndarray) and out.shape == (2,)
    assert acc.gaussian_rdp(3.0, 2.0, sensitivity=2.0) == pytest.approx(1.5, rel=1e-14)
    assert acc.gaussian_rdp(3.0, 2.0, 2.0) >= 1.5


def test_edge_rates():
    assert acc.poisson_gaussian_rdp(5.0, 1.0, 0.0) == 0.0
    assert acc.poisson_gaussian_rdp(5.0, 2.0, 1.0) == pytest.approx(5 / 8, rel=1e-14)
    assert acc.poisson_gaussian_rdp(5.0, 2.0, 1.0, 3) == pytest.approx(5 * 9 / 8, rel=1e-14)
    assert acc.poisson_rr_rdp(3.0, 0.5, 0.3, 2) == 0.0
    assert acc.dpsgd_epsilon(1.0, 0.0, 100, 1e-5) == 0.0


def test_curve_fields_and_theorems():
    c = acc.dpsgd_rdp_curve(1.1, 0.01, 1000)
    assert np.array_equal(c.alphas, acc.DEFAULT_ALPHAS)
    assert c.theorem.startswith("1000 x [Mironov-Talwar-Zhang 2019 §3.3 (Poisson SGM)]")
    assert "quadrature" in c.method
    assert c.abs_errors.shape == c.rdp.shape and np.all(c.abs_errors >= 0)
    assert c.abs_error == pytest.approx(np.max(c.abs_errors))
    assert len(c.sources) == c.alphas.size
    g = acc.dpsgd_rdp_curve(2.0, 0.01, 10, group_size=4, alphas=[2, 3.5, 8])
    assert "Schuchardt et al. 2024 Thm 4.2 (tight group amplification)" in g.theorem
    assert set(g.sources) <= {"removal", "insertion", "no-amplification"}
    w = acc.dpsgd_rdp_curve(1.0, 0.01, 10, sampling="wor_substitution", dataset_size=10_000,
                            alphas=[1.5, 2, 100, 1000])
    assert set(w.sources) == {"two_mixture", "wang2019_thm9"}
    with pytest.raises(ValueError):
        c.rdp[0] = 1.0  # read-only


def test_compose_sums_per_order():
    a = np.array([1.5, 2.0, 8.0, 32.0])
    c1 = acc.dpsgd_rdp_curve(1.0, 0.01, 100, alphas=a)
    c2 = acc.dpsgd_rdp_curve(2.0, 0.05, 50, alphas=a)
    c = acc.compose(c1, c2)
    np.testing.assert_allclose(c.rdp, c1.rdp + c2.rdp, rtol=1e-14)
    assert np.all(c.rdp >= c1.rdp + c2.rdp)
    assert "composition" in c.theorem and c1.theorem in c.theorem
    same = acc.compose(acc.dpsgd_rdp_curve(1.0, 0.01, 60, alphas=a),
                       acc.dpsgd_rdp_curve(1.0, 0.01, 40, alphas=a))
    np.testing.assert_allclose(same.rdp, c1.rdp, rtol=1e-13)
    with pytest.raises(ValueError, match="same alphas"):
        acc.compose(c1, acc.dpsgd_rdp_curve(1.0, 0.01, 100, alphas=[1.5, 2.0]))
    with pytest.raises(ValueError):
        acc.compose()
    per_step = acc.dpsgd_rdp_curve(1.0, 0.01, 1, alphas=a)
    np.testing.assert_allclose(per_step.scaled(100).rdp, c1.rdp, rtol=1e-14)
    assert np.all(per_step.scaled(100).abs_errors >= 100 * per_step.abs_errors)


def test_conversion_options_and_edge_flag():
    c = acc.dpsgd_rdp_curve(1.0, 0.01, 1000)
    r = acc.dp_from_curve(c, 1e-5)
    assert r.conversion == "Balle et al. 2020 Thm 21"
    assert not r.at_grid_edge and r.epsilon > 0
    classic = acc.dp_from_curve(c, 1e-5, conversion="classic")
    assert classic.epsilon > r.epsilon
    eps, best = acc.rdp_to_dp(c.alphas, c.rdp, 1e-5, conversion="classic")
    assert eps == classic.epsilon and best == classic.best_alpha
    small = acc.dpsgd_rdp_curve(1.0, 0.01, 1000, alphas=[2.0, 3.0])
    assert acc.dp_from_curve(small, 1e-5).at_grid_edge
    # clamp at 0 and never negative
    assert acc.rdp_to_dp([2.0, 3.0], [0.0, 0.0], 0.5)[0] == 0.0
    assert acc.rdp_to_dp([2.0], [math.inf], 1e-5)[0] == math.inf


def test_conversion_validation():
    with pytest.raises(ValueError, match="delta"):
        acc.rdp_to_dp([2.0], [0.1], 0.0)
    with pytest.raises(ValueError, match="same length"):
        acc.rdp_to_dp([2.0, 3.0], [0.1], 1e-5)
    with pytest.raises(ValueError, match="rdp"):
        acc.rdp_to_dp([2.0], [-0.1], 1e-5)
    with pytest.raises(ValueError, match="conversion"):
        acc.rdp_to_dp([2.0], [0.1], 1e-5, conversion="magic")
    with pytest.raises(ValueError, match="alphas"):
        acc.rdp_to_dp([1.0], [0.1], 1e-5)


def test_wor_api():
    with pytest.raises(ValueError, match="relation"):
        acc.wor_gaussian_rdp(2.0, 1.0, 10, 100, relation="swap")
    with pytest.raises(ValueError, match="batch_size"):
        acc.wor_gaussian_rdp(2.0, 1.0, 100, 100, relation="add_remove")
    with pytest.raises(ValueError, match="dataset_size"):
        acc.dpsgd_epsilon(1.0, 0.01, 10, 1e-5, sampling="wor")
    with pytest.raises(ValueError, match="integer batch"):
        acc.dpsgd_epsilon(1.0, 0.0123456, 10, 1e-5, sampling="wor", dataset_size=1000)
    with pytest.raises(ValueError, match="group_size"):
        acc.dpsgd_epsilon(1.0, 0.01, 10, 1e-5, sampling="wor", group_size=2, dataset_size=1000)
    with pytest.raises(ValueError, match="sampling"):
        acc.dpsgd_epsilon(1.0, 0.01, 10, 1e-5, sampling="shuffle")
    # fixed batches under add/remove cost more than Poisson at the same rate (sensitivity 2)
    e_wor = acc.dpsgd_epsilon(1.0, 0.01, 1000, 1e-5, sampling="wor", dataset_size=10_000)
    assert e_wor > acc.dpsgd_epsilon(1.0, 0.01, 1000, 1e-5)
    assert e_wor == pytest.approx(acc.dpsgd_epsilon(0.5, 0.01, 1000, 1e-5), rel=1e-12)
    sub = acc.dpsgd_epsilon(1.0, 0.01, 1000, 1e-5, sampling="wor_substitution", dataset_size=10_000)
    assert math.isfinite(sub) and sub > 0


def test_rr_api():
    with pytest.raises(ValueError, match="theta"):
        acc.poisson_rr_rdp(2.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="batch_size"):
        acc.wor_rr_rdp(2.0, 0.75, 0, 100)
    # group amplification equals the single-element bound at rate 1-(1-r)^K (F9)
    assert acc.poisson_rr_rdp(4.0, 0.8, 0.1, 3) == pytest.approx(
        acc.poisson_rr_rdp(4.0, 0.8, 1 - 0.9 ** 3), rel=1e-12)


def test_group_size_validation():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="group_size"):
            acc.poisson_gaussian_rdp(2.0, 1.0, 0.01, bad)


CALIB = [(1.0, 0.01, 1000), (3.0, 0.01, 1000), (8.0, 0.01, 1000), (0.5, 0.004, 10_000)]


@pytest.mark.parametrize("target,rate,steps", CALIB)
def test_calibration_vs_opacus(target, rate, steps):
    from opacus.accountants.utils import get_noise_multiplier
    ours = acc.calibrate_dpsgd_sigma(target, 1e-5, rate, steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = get_noise_multiplier(target_epsilon=target, target_delta=1e-5,
                                      sample_rate=rate, steps=steps, accountant="rdp")
    assert ours <= theirs
    assert acc.dpsgd_epsilon(ours, rate, steps, 1e-5) <= target
    assert acc.dpsgd_epsilon(ours / (1 + 1.01e-4), rate, steps, 1e-5) > target
    # the speed against Opacus is measured in benchmarks/bench_accounting.py (a ratio timed in one run)


def test_calibration_group_and_wor():
    s = acc.calibrate_dpsgd_sigma(2.0, 1e-6, 0.01, 500, group_size=4)
    assert acc.dpsgd_epsilon(s, 0.01, 500, 1e-6, group_size=4) <= 2.0
    assert acc.dpsgd_epsilon(s / 1.0002, 0.01, 500, 1e-6, group_size=4) > 2.0
    s1 = acc.calibrate_dpsgd_sigma(2.0, 1e-6, 0.01, 500)
    assert s > s1
    w = acc.calibrate_dpsgd_sigma(2.0, 1e-6, 0.01, 500, sampling="wor", dataset_size=5000)
    assert w == pytest.approx(2 * s1, rel=3e-4)


def test_calibration_errors():
    with pytest.raises(ValueError, match="unreachable"):
        acc.calibrate_dpsgd_sigma(1e-4, 1e-5, 0.5, 10_000)
    with pytest.raises(ValueError, match="target_epsilon"):
        acc.calibrate_dpsgd_sigma(-1.0, 1e-5, 0.01, 10)
    with pytest.raises(ValueError, match="rate = 0"):
        acc.calibrate_dpsgd_sigma(1.0, 1e-5, 0.0, 10)
    with pytest.raises(ValueError, match="delta"):
        acc.calibrate_dpsgd_sigma(1.0, 1.5, 0.01, 10)
