"""Adversarial checks of the privacy-profile bound for best-of-K (dpspec.accounting.selection_profile).

Run-count distributions at the edge of what a double holds: the bound must stay an upper bound (or fail closed at
δ = 1), never turn into a NaN that every comparison with a target δ silently accepts."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpspec.accounting.curve import RdpCurve
from dpspec.accounting.selection import RunCount, selection_dp
from dpspec.accounting.selection_profile import (
    _psi_down,
    _psi_up,
    profile_from_dp,
    profile_from_pair,
    profile_selection_delta,
    profile_selection_epsilon,
)

mp.mp.dps = 50


def _mp_pgf_tail(runs: RunCount, u):
    """φ(1 - u) = E[(1 - u)^K] at 50 digits (closed forms: Papernot & Steinke 2022 §2), written in u so that
    1 - (1-γ)(1-u) = γ + (1-γ)u keeps its digits for tiny γ."""
    u = mp.mpf(u)
    if runs.kind == "poisson":
        return mp.e ** (-mp.mpf(runs.mu) * u)
    eta, gamma = mp.mpf(runs.eta), mp.mpf(runs.gamma)
    b = gamma + (1 - gamma) * u
    if eta == 0:
        return mp.log(b) / mp.log(gamma)
    return (b ** (-eta) - 1) / (gamma ** (-eta) - 1)


def _atom_on_top(runs: RunCount, delta0: float) -> float:
    """A lower bound on δ(ε), every ε, of best-of-K over (ε₀, δ₀)-DP runs: the (ε₀, δ₀) randomized-response pair's
    atom of mass δ₀ that only X can output, ranked first: the best run is that atom with probability
    φ(1) - φ(1 - δ₀) under X and never under X'."""
    return float(1 - _mp_pgf_tail(runs, delta0))


EXTREME_RUNS = [
    RunCount.tnb(300.0, 0.094),  # E[K] ≈ 2891: γ^{-(η+1)} overflows a double, the normaliser does not
    RunCount.tnb(100.0, 8.5e-4),
    RunCount.tnb(1.0, 1e-160),  # geometric with mean 1e160
    RunCount.tnb(30.0, 1e-10),
]


@pytest.mark.parametrize("runs", EXTREME_RUNS, ids=lambda r: r.describe())
def test_a_non_finite_bound_fails_closed(runs):
    prof = profile_from_dp([(1.0, 1e-6)])
    floor = _atom_on_top(runs, 1e-6)
    assert floor > 1e-3
    for eps in (0.0, 1.0, 3.0, 50.0):
        d = profile_selection_delta(prof, runs, eps)
        assert d >= floor, (eps, d, floor)
    # no ε meets δ = 1e-3 (the atom alone exceeds it at every ε)
    assert profile_selection_epsilon(prof, runs, 1e-3).epsilon == math.inf


def test_an_extreme_run_count_is_refused_not_certified():
    """The same through the compiler: GCON runs certified (0.55, 1e-4) each, K ~ D_{300, 0.094} (E[K] ≈ 2891). The
    atom alone gives δ ≈ 0.29 at every ε; the NaN bound certified ε = 1 at δ = 1e-4. Now: no finite ε (DPS959)."""
    import dpspec
    from dpspec.diagnostics import SpecError

    text = GCON_SPEC.replace("RUNS", "runs truncated_negative_binomial(eta = 300, gamma = 0.094)")
    with pytest.raises(SpecError) as e:
        dpspec.compile(dpspec.loads(text))
    assert "DPS959" in str(e.value)


GCON_SPEC = """privacy links { unit edge  data synthetic(generator = sbm_graph, size = 400, seed = 1) }
train g { mechanism gcon  propagation appr(restart = 0.6, steps = [2, inf])  loss pseudo_huber(delta = 0.5)
          regularization 0.2  encoder mlp(hidden = 16, epochs = 20, seed = 0)  pseudo_labels true
          guarantee dp(epsilon = 0.5, delta = 1e-4) }
tune search { train g  candidates { regularization [0.1, 0.5] }  RUNS  select best(score = f1, on = public)
              guarantee dp(delta = 1e-4) }
"""


# ------------------------------------------------------------------ Ψ̄ and its rounding margin at the extremes


def _mp_psi_bar(runs: RunCount, v):
    """φ'(1 - v) at 50 digits from the closed forms."""
    v = mp.mpf(v)
    if runs.kind == "poisson":
        mu = mp.mpf(runs.mu)
        return mu * mp.e ** (-mu * v)
    eta, gamma = mp.mpf(runs.eta), mp.mpf(runs.gamma)
    a = (1 - gamma) / mp.log(1 / gamma) if eta == 0 else eta * (1 - gamma) / (gamma ** (-eta) - 1)
    return a * (gamma + (1 - gamma) * v) ** (-(eta + 1))


@pytest.mark.parametrize(
    "runs",
    [
        RunCount.tnb(300.0, 0.094),
        RunCount.tnb(2000.0, 0.5),
        RunCount.tnb(-0.99, 1e-8),
        RunCount.tnb(0.0, 1e-300),
        RunCount.tnb(1.0, 0.1),
        RunCount.tnb(20.0, 0.3),
        RunCount.poisson(300.0),  # exp(-μv) is off by up to μv/2 ulps: 64 ulps were not enough
        RunCount.poisson(3.0),
    ],
    ids=lambda r: r.describe(),
)
def test_psi_bar_within_its_rounding_margin(runs):
    """Ψ̄ rounded up (down) by its stated margin is at (below) the 50-digit value, wherever it is a normal double."""
    v = np.concatenate([[0.0, 1e-12, 1e-6, 1e-3], np.linspace(0.05, 1.0, 96)])
    up, down = _psi_up(runs, v), _psi_down(runs, v)
    for x, u, d in zip(v, up, down):
        ref = _mp_psi_bar(runs, float(x))
        if not (mp.mpf("1e-300") < ref < mp.mpf("1e300")):
            continue
        assert mp.mpf(float(u)) >= ref and mp.mpf(float(d)) <= ref, (x, u, d, ref)
        assert abs(mp.mpf(float(u)) / ref - 1) < 1e-9


# ------------------------------------------------------------------ arrangements beyond the strict orders of atoms


def _mp_best(runs: RunCount, p) -> list:
    """P[best = piece i] = φ(F_i) - φ(F_{i-1}) with the pieces in ascending order (K = 0's ⊥ has the same
    probability under both neighbours and is left out), at 50 digits."""
    cdf = [mp.mpf(0)]
    for x in p:
        cdf.append(cdf[-1] + mp.mpf(float(x)))
    g = [_mp_pgf_tail(runs, 1 - f) for f in cdf]
    return [g[i + 1] - g[i] for i in range(len(p))]


def _mp_exact(runs: RunCount, p, q, eps: float) -> float:
    """δ(ε) of best-of-K, both orders of the neighbours, the released output being the selected piece."""
    a, b = _mp_best(runs, p), _mp_best(runs, q)
    t = mp.e ** mp.mpf(eps)
    return float(
        max(mp.fsum(max(x - t * y, 0) for x, y in zip(a, b)), mp.fsum(max(y - t * x, 0) for x, y in zip(a, b)))
    )


def _pieces(P, Q, types, m: int):
    """Each atom of the pair (P, Q) split in m equal pieces (the same likelihood ratio, so the same run profile),
    ranked in the order ``types`` (a sequence of atom indices, each m times): what a score with ties, or the
    score's own noise, can do that no strict order of the atoms does."""
    types = np.asarray(types, int)
    return np.asarray(P, float)[types] / m, np.asarray(Q, float)[types] / m


def _rr(eps0: float, k: int = 2):
    p = np.ones(k)
    p[0] = math.exp(eps0)
    p = p / p.sum()
    return p, np.roll(p, 1)


def _float_exact(runs: RunCount, p, q, eps: float) -> float:
    """:func:`_mp_exact` in double precision (for the search only; what it finds is re-evaluated at 50 digits)."""

    def best(x):
        z = np.minimum(np.concatenate([[0.0], np.cumsum(x)]), 1.0)
        if runs.kind == "poisson":
            g = np.exp(runs.mu * (z - 1.0))
        elif runs.eta == 0.0:
            g = np.log1p(-(1 - runs.gamma) * z) / math.log(runs.gamma)
        else:
            g = np.expm1(-runs.eta * np.log1p(-(1 - runs.gamma) * z)) / math.expm1(-runs.eta * math.log(runs.gamma))
        return np.diff(g)

    a, b = best(p), best(q)
    t = math.exp(eps)
    return max(float(np.maximum(a - t * b, 0).sum()), float(np.maximum(b - t * a, 0).sum()))


def _search(runs: RunCount, P, Q, eps: float, rng, m: int = 6, restarts: int = 4, sweeps: int = 25):
    """Local search over the orders of the pieces (adjacent swaps and block rotations, from the two orders sorted by
    likelihood ratio and from random ones), maximising the exact δ(ε); the best order found."""
    P, Q = np.asarray(P, float), np.asarray(Q, float)
    ratio = np.where(Q > 0, P / np.maximum(Q, 1e-300), np.inf)
    by_ratio = np.repeat(np.argsort(ratio, kind="stable"), m)
    starts = [by_ratio, by_ratio[::-1]]
    for _ in range(restarts):
        s = np.repeat(np.arange(P.size), m)
        rng.shuffle(s)
        starts.append(s)
    best, best_t = -1.0, None
    for t in starts:
        t = t.copy()
        v = _float_exact(runs, *_pieces(P, Q, t, m), eps)
        for _ in range(sweeps):
            improved = False
            for i in range(t.size - 1):
                if t[i] == t[i + 1]:
                    continue
                t[i], t[i + 1] = t[i + 1], t[i]
                w = _float_exact(runs, *_pieces(P, Q, t, m), eps)
                if w > v * (1 + 1e-12):
                    v, improved = w, True
                else:
                    t[i], t[i + 1] = t[i + 1], t[i]
            i, j = sorted(int(x) for x in rng.integers(0, t.size, 2))
            if j > i:
                t2 = t.copy()
                t2[i : j + 1] = np.roll(t2[i : j + 1], 1)
                w = _float_exact(runs, *_pieces(P, Q, t2, m), eps)
                if w > v:
                    v, t, improved = w, t2, True
            if not improved:
                break
        if v > best:
            best, best_t = v, t.copy()
    return best_t


def test_interleaved_pieces_beat_every_strict_order_and_stay_below_the_bound():
    """Randomized response (ε₀ = 0.3), K ~ D_{-0.9, 0.02}: ranking the two answers' pieces interleaved (a score with
    ties broken at random, or noisy) has a larger δ than either strict order of the two answers — enumerating the
    orders of the atoms does not find the worst case — and the bound is above it."""
    P, Q = _rr(0.3)
    runs = RunCount.tnb(-0.9, 0.02)
    eps = 0.1636
    strict = max(_mp_exact(runs, P[list(o)], Q[list(o)], eps) for o in ((0, 1), (1, 0)))
    top = "1" * 22 + "0010" * 10 + "00"  # the order local search found (m = 32 pieces per answer), lowest first
    types = [int(c) for c in top]
    assert len(types) == 64 and types.count(0) == 32
    split = _mp_exact(runs, *_pieces(P, Q, types, 32), eps)
    assert split > strict * 1.005
    bound = profile_selection_delta(profile_from_pair(P, Q), runs, eps)
    assert bound >= split


KOV = [(1.0, 1e-3), (0.3, 1e-2)]


def _kov_pair(eps0: float, delta0: float):
    a = (1 - delta0) * math.exp(eps0) / (1 + math.exp(eps0))
    b = (1 - delta0) / (1 + math.exp(eps0))
    return np.array([delta0, a, b, 0.0]), np.array([0.0, b, a, delta0])


ADVERSARIAL = [
    ("rr 1", _rr(1.0), RunCount.tnb(1.0, 0.1)),
    ("rr 3", _rr(3.0), RunCount.poisson(20.0)),
    ("3-ary rr 2", _rr(2.0, 3), RunCount.tnb(0.0, 0.02)),
    ("asymmetric", (np.array([0.9, 0.1]), np.array([0.6, 0.4])), RunCount.tnb(-0.5, 0.05)),
    ("small atom", (np.array([0.7, 0.299, 0.001]), np.array([0.75, 0.2, 0.05])), RunCount.poisson(50.0)),
    ("kov (1, 1e-3)", _kov_pair(*KOV[0]), RunCount.tnb(1.0, 0.02)),
    ("kov (0.3, 1e-2)", _kov_pair(*KOV[1]), RunCount.tnb(2.0, 0.3)),
    ("one-sided atom", (np.array([0.01, 0.99]), np.array([0.0, 1.0])), RunCount.poisson(5.0)),
]


@pytest.mark.parametrize("name,pair,runs", ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
def test_searched_orders_of_split_pieces_never_exceed_the_bound(name, pair, runs):
    """Where the exact δ is positive (ε from 0.25 to 3), the worst order of split pieces that a local search finds
    (re-evaluated at 50 digits) is at most the bound; and at the ε the bound certifies for δ (0.2, 0.05, twice the
    atom's δ where the pair has one), and at the ε of Papernot & Steinke's RDP bound (from the pair's exact Rényi
    divergences, both orders) where that is finite, it is at most δ."""
    P, Q = pair
    prof = profile_from_pair(P, Q)
    rng = np.random.default_rng(sum(map(ord, name)))
    for eps in (0.25, 0.75, 1.5, 3.0):
        t = _search(runs, P, Q, eps, rng)
        assert profile_selection_delta(prof, runs, eps) >= _mp_exact(runs, *_pieces(P, Q, t, 6), eps), eps
    alphas = np.concatenate([np.linspace(1.1, 3.0, 12), np.geomspace(3.5, 256.0, 24)])
    rdp = []
    for a in alphas:
        worst = 0.0
        for x, y in ((P, Q), (Q, P)):
            if np.any((y == 0) & (x > 0)):
                worst = math.inf
                break
            keep = x > 0
            terms = [
                a * mp.log(mp.mpf(float(u))) + (1 - a) * mp.log(mp.mpf(float(w))) for u, w in zip(x[keep], y[keep])
            ]
            worst = max(worst, float(mp.log(mp.fsum(mp.e**z for z in terms))) / (a - 1))
        rdp.append(worst * (1 + 1e-12))
    rdp = np.array(rdp)
    ok = np.isfinite(rdp)
    curve = (
        RdpCurve(alphas=alphas[ok], rdp=rdp[ok], theorem="exact", method="exact", abs_error=0.0) if ok.any() else None
    )
    atom = float(max(P[Q == 0].sum(), Q[P == 0].sum()))
    for delta in (0.2, 0.05) if atom == 0.0 else (2 * _atom_on_top(runs, atom),):
        certified = [profile_selection_epsilon(prof, runs, delta).epsilon]
        if curve is not None:
            certified.append(selection_dp(curve, runs, delta).epsilon)
        assert math.isfinite(certified[0])
        for eps in certified:
            t = _search(runs, P, Q, eps, rng)
            got = _mp_exact(runs, *_pieces(P, Q, t, 6), eps)
            assert got <= delta, (eps, got, delta, t.tolist())


@pytest.mark.parametrize("eps0,delta0", KOV)
@pytest.mark.parametrize(
    "runs", [RunCount.poisson(1.0), RunCount.poisson(30.0), RunCount.tnb(1.0, 0.5), RunCount.tnb(-0.9, 0.01)]
)
def test_an_atom_at_infinity_is_charged_in_full(eps0, delta0, runs):
    """The (ε₀, δ₀) pair's atom that only X outputs, ranked first, gives δ(ε) >= φ(1) - φ(1 - δ₀) at every ε: the
    bound is never below it; for few runs and ε well beyond ε₀ it is within 2 % of it (where the bound is tightest,
    so its rounding must be on the safe side)."""
    prof = profile_from_dp([(eps0, delta0)], step=0.05)
    atom = _atom_on_top(runs, delta0)
    for eps in (eps0 + 1.0, eps0 + 5.0, eps0 + 20.0):
        d = profile_selection_delta(prof, runs, eps)
        assert atom <= d, (eps, d, atom)
    if runs.mean() < 2.5 and delta0 <= 1e-3:
        assert profile_selection_delta(prof, runs, eps0 + 5.0) <= atom * 1.02


# ------------------------------------------------------------------ the run profile from a PLD: both directions


def _hs_gauss(mu, s):
    """H_s(N(μ, 1) || N(0, 1)), s > 0 (either order: the pair is symmetric)."""
    ls = mp.log(s)
    return mp.ncdf(-ls / mu + mu / 2) - s * mp.ncdf(-ls / mu - mu / 2)


def _exact_sampled_gaussian(sigma, q, eps, score_mu=None):
    """H_{e^ε} in both orders for one Poisson-sampled Gaussian step, P = (1-q)N(0, σ²) + qN(1, σ²) against
    P' = N(0, σ²), whose likelihood ratio L(x) = (1-q) + q e^{(2x-1)/(2σ²)} is increasing: alone in closed form
    (the set {L > t} is a half-line), composed with a Gaussian score release of μ = Δ/z by quadrature of the score's
    Gaussian profile against L (a smooth integrand); 30 digits. Returns (max, P‖P', P'‖P)."""
    with mp.workdps(30):
        s, q, t = mp.mpf(sigma), mp.mpf(q), mp.e ** mp.mpf(eps)
        if score_mu is None:

            def cut(r):  # L(x) = r
                return s**2 * mp.log((r - (1 - q)) / q) + mp.mpf(1) / 2

            fwd = 1 - t if t <= 1 - q else (1 - q - t) * mp.ncdf(-cut(t) / s) + q * mp.ncdf(-(cut(t) - 1) / s)
            rev = mp.mpf(0)
            if 1 / t > 1 - q:
                x = cut(1 / t)
                rev = mp.ncdf(x / s) - t * ((1 - q) * mp.ncdf(x / s) + q * mp.ncdf((x - 1) / s))
        else:
            mu = mp.mpf(score_mu)

            def L(x):
                return (1 - q) + q * mp.e ** ((2 * x - 1) / (2 * s**2))

            def p(x):
                return (1 - q) * mp.npdf(x, 0, s) + q * mp.npdf(x, 1, s)

            fwd = mp.quad(lambda x: p(x) * _hs_gauss(mu, t / L(x)), [-mp.inf, -2, 0, 1, 3, mp.inf])
            rev = mp.quad(lambda x: mp.npdf(x, 0, s) * _hs_gauss(mu, t * L(x)), [-mp.inf, -2, 0, 1, 3, mp.inf])
        return float(max(fwd, rev)), float(fwd), float(rev)


@pytest.mark.parametrize("score_z", [None, 2.0])
def test_pld_profile_bounds_both_orders_of_a_sampled_gaussian(score_z):
    """A run's profile must bound H_{e^ε} for both orders of the neighbours (the proof's step 3 uses the reversed
    one): a Poisson-sampled Gaussian step (q = 0.3, σ = 0.8), whose two orders differ, alone and composed with a
    Gaussian score (as a tuning run is), against exact quadrature."""
    from dpspec.accounting.pld import pld_compose, pld_dpsgd, pld_gaussian
    from dpspec.accounting.selection_profile import profile_from_pld

    pld = pld_dpsgd(0.8, 0.3, 1)
    if score_z is not None:
        pld = pld_compose(pld, pld_gaussian(score_z, sensitivity=1.0, relation=pld.relation))
    prof = profile_from_pld(pld, delta_floor=1e-10)
    differ = False
    for eps in (0.0, 0.2, 0.6, 1.0, 2.0, 3.0):
        worst, fwd, rev = _exact_sampled_gaussian(0.8, 0.3, eps, None if score_z is None else 1.0 / score_z)
        differ |= abs(fwd - rev) > 0.1 * worst
        got = float(prof.at(eps)[0])
        assert got >= worst, (eps, got, fwd, rev)
        assert got <= worst + 0.02  # the grid's slack, not a different mechanism
    assert differ  # the two orders really differ here


def test_a_huge_epsilon_is_bounded_not_an_overflow():
    """e^ε overflows a double beyond ε ≈ 709; δ(ε) is nonincreasing, so the bound there is the bound at 700 (still
    above the atom's exact value)."""
    runs = RunCount.tnb(1.0, 0.1)
    prof = profile_from_dp([(1.0, 1e-6)])
    d = profile_selection_delta(prof, runs, 1000.0)
    assert _atom_on_top(runs, 1e-6) <= d == profile_selection_delta(prof, runs, 700.0)
