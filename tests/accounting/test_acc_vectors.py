"""Digest test vectors TV-A ... TV-G (shared/digests/group-amplification.md §6.1) and
the anchors.md reference table."""

import numpy as np
import pytest

from dpspec import accounting as acc
from dpspec.accounting import _quadrature as Q
from dpspec.accounting._exact import log_bounds_from_abs, rdp_from_log_psi_m1
from dpspec.accounting.group import baseline_curve, group_log_weights
from dpspec.accounting.rr import wang_thm9_rr_rdp

# --- TV-A: RR, WOR + substitution, N = 1e4 (Thm 3.7), abs 1e-10 / rel 1e-6 ---
TV_A = [
    (0.6, 1000, [0.00166527932693, 0.00335451470242, 0.00845248817804, 0.0400314147214, 0.0479217952322]),
    (0.75, 5000, [0.287682072446, 0.474220668428, 0.61613647205, 0.686145693888, 0.692453339538]),
    (0.75, 1000, [0.0132452267576, 0.0279684412114, 0.0727200733964, 0.170160215334, 0.18111637881]),
    (0.75, 100, [0.000133324443464, 0.000268942339452, 0.000689218746188, 0.00794291604735, 0.0184347677029]),
    (0.9, 1000, [0.0686965312924, 0.170932118497, 0.398352106202, 0.570465468653, 0.586070149953]),
    (0.9, 100, [0.000710858389643, 0.00148768852607, 0.00425287317247, 0.0544968985158, 0.0747331892329]),
]


@pytest.mark.parametrize("theta,q,expected", TV_A)
def test_tv_a_wor_rr(theta, q, expected):
    got = acc.wor_rr_rdp(np.array([2, 4, 10, 100, 1000.0]), theta, q, 10_000)
    exp = np.array(expected)
    assert np.all(np.abs(got - exp) <= np.maximum(1e-10, 1e-6 * exp))


# --- TV-B: Wang et al. 2019 Thm 9 baseline for RR, rel 2e-9 ---
TV_B = [
    (0.6, 1000, [0.00291242144703, 0.00603742134157, 0.0162265484411, 0.0639933144026]),
    (0.75, 1000, [0.0456105112521, 0.09712692645, 0.198620383607, 0.258012921882]),
    (0.9, 100, [0.00162090784104, 0.00342555959883, 0.00993892734377, 0.0707821950939]),
]


@pytest.mark.parametrize("theta,q,expected", TV_B)
def test_tv_b_wang_baseline_rr(theta, q, expected):
    got = wang_thm9_rr_rdp(np.array([2, 4, 10, 100]), theta, q / 10_000)
    np.testing.assert_allclose(got, expected, rtol=2e-9)
    # the tight bound beats the baseline (headline of Fig. 3)
    assert np.all(acc.wor_rr_rdp(np.array([2, 4, 10, 100.0]), theta, q, 10_000) < got)


# --- TV-C: Gaussian, Poisson group (Thm 4.2) ---
# (sigma, r, K, alpha, eps_rem, eps_ins, baseline without envelope)
TV_C = [
    (1, 0.01, 2, 2, 0.0006992273353, 0.0006119237617, 0.000809368648),
    (1, 0.01, 2, 4, 0.001593875176, 0.001139864367, 0.001756231014),
    (1, 0.01, 2, 8, 5.47408506, 0.002025525889, 5.874388926),
    (1, 0.01, 4, 2, 0.002902287549, 0.002261305405, 0.003832386449),
    (1, 0.01, 4, 4, 7.442356159, 0.004027481206, 10.57607883),
    (1, 0.01, 8, 2, 0.01281114146, 0.007968383606, 17.80460145),
    (1, 0.001, 4, 4, 5.671260536e-05, 5.256193682e-05, 0.9251733052),
    (1, 0.001, 8, 2, 0.0001113192992, 0.0001048104665, 1.387804429),
    (2, 0.01, 4, 8, 0.001987281932, 0.001655457251, 0.002012203059),
    (2, 0.01, 8, 4, 0.003912823311, 0.003308394596, 0.004086011482),
    (2, 0.1, 2, 4, 0.02639671816, 0.01846055362, 0.02759079312),
    (2, 0.1, 4, 4, 0.1374694618, 0.06409310642, 0.1648293992),
    (5, 0.01, 8, 32, 2.971350812, 0.003792656915, 3.499002099),
    (5, 0.1, 8, 16, 1.599553009, 0.1458442554, 2.032225146),
    (5, 0.001, 8, 64, 25.78079675, 8.185734962e-05, 26.1712257),
    (1, 0.1, 8, 2, 27.20790712, 0.3312261557, 45.7234867),
]
TV_C_FRAC = [
    (1, 0.01, 2, 2.5, 0.00089834607, 0.00075068099),
    (2, 0.1, 4, 3.5, 0.1080845284, 0.05792312174),
    (5, 0.01, 8, 1.5, 0.00019612489, 0.00019484905),
]


def _direction(sigma, r, k, alpha, direction):
    al = np.array([float(alpha)])
    q = Q.mixture_psi_m1(al, group_log_weights(r, k), sigma, direction,
                         np.floor(al) == al)
    return rdp_from_log_psi_m1(al, *log_bounds_from_abs(q.log_value, q.log_err))[0][0]


@pytest.mark.parametrize("sigma,r,k,alpha,rem,ins,base", TV_C)
def test_tv_c_group_gaussian(sigma, r, k, alpha, rem, ins, base):
    assert acc.poisson_gaussian_rdp(alpha, sigma, r, k) == pytest.approx(rem, rel=1e-9)
    assert _direction(sigma, r, k, alpha, "removal") == pytest.approx(rem, rel=1e-9)
    assert _direction(sigma, r, k, alpha, "insertion") == pytest.approx(ins, rel=1e-9)
    b = baseline_curve(np.array([float(alpha)]), sigma, r, k, envelope=False).rdp[0]
    assert b == pytest.approx(base, rel=1e-9)


@pytest.mark.parametrize("sigma,r,k,alpha,rem,ins", TV_C_FRAC)
def test_tv_c_fractional(sigma, r, k, alpha, rem, ins):
    # the table has 8-10 significant digits
    assert acc.poisson_gaussian_rdp(alpha, sigma, r, k) == pytest.approx(rem, rel=5e-8)
    assert _direction(sigma, r, k, alpha, "insertion") == pytest.approx(ins, rel=5e-8)


# --- TV-D: K = 1 Poisson SGM, integer alpha ---
TV_D = [((1, 0.01, 2), 0.000171813422075), ((1, 0.01, 8), 0.000893643907606),
        ((1, 0.01, 16), 3.0878507837), ((2, 0.001, 32), 4.58731489855e-06),
        ((5, 0.1, 64), 0.0174715734891)]


@pytest.mark.parametrize("args,expected", TV_D)
def test_tv_d_single_element(args, expected):
    sigma, r, alpha = args
    assert acc.poisson_gaussian_rdp(alpha, sigma, r) == pytest.approx(expected, rel=1e-11)
    assert acc.poisson_gaussian_rdp(alpha, sigma, r, 1) == acc.poisson_gaussian_rdp(alpha, sigma, r)


# --- TV-E: (eps, delta) after T steps, delta = 1e-8, on the digest's grid ---
TV_E_GRID = np.array(list(range(2, 65)) + [72, 80, 96, 112, 128, 160, 192, 224, 256], float)
TV_E = [(2, 0.01, 1, 1000, 0.951982, 30, 0.951982, 30),
        (2, 0.001, 4, 1000, 1.172187, 14, 1.271322, 13),
        (1, 0.001, 4, 10000, 5.957573, 4, 8.700285, 3),
        (2, 0.01, 8, 100, 4.483189, 5, 5.799048, 4),
        (1, 0.01, 2, 100, 4.288386, 5, 5.566070, 4),
        (2, 0.01, 4, 1000, 4.179217, 9, 4.213134, 8),
        (5, 0.01, 8, 100, 0.920780, 29, 0.925616, 28)]


@pytest.mark.parametrize("sigma,r,k,steps,eps,alpha,b_eps,b_alpha", TV_E)
def test_tv_e_epsilon_after_steps(sigma, r, k, steps, eps, alpha, b_eps, b_alpha):
    curve = acc.dpsgd_rdp_curve(sigma, r, steps, group_size=k, alphas=TV_E_GRID)
    res = acc.dp_from_curve(curve, 1e-8)
    assert res.epsilon == pytest.approx(eps, abs=1e-6)
    assert res.best_alpha == alpha
    base = baseline_curve(TV_E_GRID, sigma, r, k, envelope=True)
    b, ba = acc.rdp_to_dp(TV_E_GRID, base.rdp * steps, 1e-8)
    assert b == pytest.approx(b_eps, abs=1e-6)
    assert ba == b_alpha
    assert res.epsilon <= b + 1e-12


# --- TV-F: RR, Poisson group (Thm G.1 = F9) ---
TV_F = [((0.75, 0.1, 2, 2), 0.04701080427), ((0.75, 0.1, 4, 4), 0.276675884),
        ((0.75, 0.1, 8, 8), 0.6709726254), ((0.9, 0.2, 8, 2), 1.779210754),
        ((0.6, 0.01, 8, 16), 0.008075492573), ((0.9, 0.01, 4, 64), 0.2418134587)]


@pytest.mark.parametrize("args,expected", TV_F)
def test_tv_f_poisson_rr_group(args, expected):
    theta, r, k, alpha = args
    assert acc.poisson_rr_rdp(alpha, theta, r, k) == pytest.approx(expected, rel=1e-9)


def test_tv_g_wor_add_remove():
    # q/N = 0.01, noise multiplier 2 -> Poisson SGM at r = 0.01 with sigma/Delta = 2/2 = 1
    got = acc.wor_gaussian_rdp(4, 2.0, 100, 10_000, relation="add_remove")
    assert got == pytest.approx(0.000363154048911, rel=1e-11)
    assert got == pytest.approx(acc.poisson_gaussian_rdp(4, 1.0, 0.01), rel=1e-15)


# --- anchors.md §3 table, op_rdp column (Opacus grid, delta = 1e-5) ---
OPACUS_ALPHAS = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), float)
ANCHORS = [(0.01, 1.0, 1000, 2.1014), (0.01, 0.5, 1000, 15.4643), (0.001, 1.1, 10000, 0.6321),
           (0.1, 2.0, 100, 2.5806), (0.004, 1.1, 10000, 2.0131), (0.256, 1.1, 60, 13.4123),
           (0.01, 4.0, 10000, 1.0355), (0.02, 0.8, 5000, 16.6124), (1.0, 5.0, 100, 10.7255)]


@pytest.mark.parametrize("q,sigma,steps,op_rdp", ANCHORS)
def test_anchor_table(q, sigma, steps, op_rdp):
    curve = acc.dpsgd_rdp_curve(sigma, q, steps, alphas=OPACUS_ALPHAS)
    eps, _ = acc.rdp_to_dp(curve.alphas, curve.rdp, 1e-5)
    assert eps == pytest.approx(op_rdp, abs=6e-5)
    # the finer default grid can only help
    assert acc.dpsgd_epsilon(sigma, q, steps, 1e-5) <= eps + 1e-12
