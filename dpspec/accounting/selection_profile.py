"""Privacy-profile bounds for best-of-K selection (hyper-parameter tuning with a random number of runs).

The RDP bounds of :mod:`dpspec.accounting.selection` (Papernot & Steinke 2022 Thms 2 and 6) are lossy once
(ε, δ) is what is certified; Koskela, Redberg & Wang (2024, ICML, "Privacy profiles for private selection")
bound the selection's privacy profile δ(ε) from the base mechanism's profile instead. This module implements
a privacy-profile bound of that kind, proved here from Papernot & Steinke's generating-function identity
(the statement and the proof are in ``docs/tuning.md``, "The privacy-profile bound"); it is not a
transcription of the paper's own theorems.

Setting. One run Q outputs y (its model, its candidate, its noisy score) with a total order on outputs (the
noisy score, ties broken by a fresh uniform tie-breaker, which changes no run's privacy: adding independent
noise and dropping it are post-processing). K ~ 𝒟 independent of the data, with generating function
φ(z) = E[z^K] (K = 0: a fixed output ⊥). The procedure A outputs the best of K independent runs. With F(y),
F'(y) the run's CDFs in that order on neighbours X, X' and q, q' its densities,

    A(X) has density  a(y) = q(y) φ'(F(y))          (Papernot & Steinke 2022 §3, the output CDF is φ(F)).

Theorem (privacy-profile bound). Let D(ε) >= sup over ordered neighbours of H_{e^ε}(Q(X) || Q(X')) for ε >= 0
(the run's symmetric profile; for ε < 0 the identity H_t(P||P') = 1 - t + t H_{1/t}(P'||P) extends it). Let
Ψ̄(v) = φ'(1 - v), Ḡ(v) a lower bound on 1 - F given 1 - F' = v:

    Ḡ(v) = max(0, max_{ε >= 0} e^{-ε}(v - D(ε)), max_{ε >= 0} e^{ε} v - (e^{ε} - 1) - D(ε)),

0 = v_0 < v_1 < ... < v_J = 1 bins of the upper-tail mass V' = 1 - F'(Y') (uniform under X'), and on bin j
W_j = Ψ̄(Ḡ(v_j)) >= φ'(F), W'_j = Ψ̄(v_{j+1}) <= φ'(F'), S_j(ℓ) = (W_j ℓ - e^ε W'_j)_+. Then for every
c ∈ R^J and every convex nondecreasing piecewise-linear g̃ >= max_j (S_j - c_j) with slope s∞ >= φ'(1) beyond
its last kink,

    H_{e^ε}(A(X) || A(X')) <= g̃(0) + g̃'(0+) + Σ_kinks t (jump of g̃' at t) D(log t) + Σ_j c_j (v_{j+1} - v_j).

Proof sketch (the full proof is in docs/tuning.md): H = E_{X'}[(ℓ φ'(F) - e^ε φ'(F'))_+] + P_X(q' = 0) φ'(1)
with ℓ = q/q'; bound φ'(F) <= W_j, φ'(F') >= W'_j on bin j; S_j(ℓ) <= g̃(ℓ) + c_j (Lagrangian duality for
the unknown placement of ℓ along the order); E_{X'}[g̃(ℓ)] = g̃(0) + g̃'(0+) E[ℓ] + ∫ E[(ℓ - t)_+] dg̃'(t)
and E_{X'}[(ℓ - t)_+] = H_t - P_X(q' = 0); the atoms where q' = 0 cancel because s∞ >= φ'(1). Every term
is monotone in D, so upper bounds on D (a pessimistic PLD, RDP, an (ε, δ) point) give upper bounds.

The implementation chooses c from the comonotone placement (the highest privacy loss at the top of the
order, which is the worst case when the cost is supermodular) and g̃ as the lower convex hull of
max_j (S_j - c_j) evaluated at the profile's nodes (rounded up; the hull of upper bounds on a convex
function bounds it). Any c is valid, so this choice affects tightness only. Floating-point: node locations
t are rounded up, D values up, Ḡ down, W up, W' down (Ψ̄ is evaluated as exp of its logarithm, so that no
intermediate overflows, within (64 + 8M) ulps relative where M bounds the magnitudes its logarithm sums), and
the final sum is raised by its rounding. A bound that is not a finite number (Ψ̄ or e^ε Ψ̄ beyond a double, at
absurd run counts) is δ = 1: a NaN passes no test "<= δ" and fails none.

Profiles (:class:`Profile`): from a PLD (:func:`profile_from_pld`: the certified δ of the pessimistic PLD at
every grid loss, max over the neighbouring directions), from an RDP curve (:func:`profile_from_rdp`: Balle
et al. 2020 Thm 21 and the total-variation bound per ε), from (ε, δ)-DP points (:func:`profile_from_dp`:
the (ε, δ) randomized-response pair of Kairouz, Oh & Viswanath 2015 Thm 2.4, which every (ε, δ)-DP mechanism
is a post-processing of), from an explicit discrete pair (:func:`profile_from_pair`, exact), and mixtures
(:func:`Profile.mixture`: a run that draws its candidate is the mixture, whose profile is the weighted sum,
the candidate being part of the output).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import _validate as V
from ._logmath import ULP
from .selection import RunCount

THEOREM_PROFILE = (
    "privacy-profile bound for best-of-K (dpspec's own theorem, proved in docs/tuning.md, the privacy-profile bound, "
    "from the output density q·φ'(F) of Papernot & Steinke 2022 §3; a bound of the kind Koskela, Redberg & Wang 2024 "
    "introduced, not a theorem of theirs)"
)
THEOREM_KOV = (
    "Kairouz, Oh & Viswanath 2015 Thm 2.4 (the (ε, δ) randomized-response pair dominates every (ε, δ)-DP mechanism)"
)
THEOREM_RDP_PROFILE = "RDP → profile: Balle et al. 2020 Thm 21 per ε, and the total-variation bound"

#: the ε spacing of the profiles built here
STEP = 0.02
#: a profile stops where its δ falls below this (or at EPS_MAX)
DELTA_FLOOR = 1e-30
EPS_MAX = 200.0
#: the bins of the upper-tail mass: the largest ratio of consecutive edges and the smallest edge
BIN_RATIO = 1.5
V_MIN = 1e-18
#: the bins are refined until φ' moves by at most this factor inside one (or the bin count reaches MAX_BINS)
PSI_RATIO = 1.01
MAX_BINS = 1500
#: the loss grid of the PLD profiles built here (unless the PLD fixes its own)
PLD_GRID = 1e-3


# ------------------------------------------------------------------------------ the run count


def pgf(runs: RunCount, z) -> np.ndarray:
    """φ(z) = E[z^K] for z ∈ [0, 1] (Poisson: e^{μ(z-1)}; truncated negative binomial D_{η,γ}:
    ((1-(1-γ)z)^{-η} - 1)/(γ^{-η} - 1), η = 0: log(1-(1-γ)z)/log γ; fixed k: z^k)."""
    z = np.asarray(z, float)
    if runs.kind == "fixed":
        return z**runs.count
    if runs.kind == "poisson":
        return np.exp(runs.mu * (z - 1.0))
    eta, gamma = runs.eta, runs.gamma
    l1 = np.log1p(-(1.0 - gamma) * z)
    if eta == 0.0:
        return l1 / math.log(gamma)
    return np.expm1(-eta * l1) / math.expm1(-eta * math.log(gamma))


def _log_psi(runs: RunCount, v) -> tuple[np.ndarray, np.ndarray]:
    """log Ψ̄(v) and a bound M(v) on the magnitudes its terms sum from (each computed within a few ulps relative of
    itself, so log Ψ̄ within ~M ulps absolute). In log space so that no intermediate overflows where Ψ̄ itself is a
    double: the truncated negative binomial's γ^{-(η+1)} overflows at E[K] ≈ 2900 for η = 300, where Ψ̄(0) = E[K]
    does not."""
    v = np.asarray(v, float)
    with np.errstate(divide="ignore"):
        if runs.kind == "fixed":
            k = runs.count
            if k == 1:
                return np.zeros_like(v), np.ones_like(v)
            lg = math.log(k) + (k - 1) * np.log1p(-v)
            return lg, math.log(k) + np.abs(lg) + 1.0
        if runs.kind == "poisson":
            mv = runs.mu * v
            return math.log(runs.mu) - mv, abs(math.log(runs.mu)) + mv + 1.0
        eta, gamma = runs.eta, runs.gamma
        beta = 1.0 - gamma
        if eta == 0.0:
            # A = (1-γ)/log(1/γ)
            log_a = math.log(beta) - math.log(-math.log(gamma))
            mag_a = abs(math.log(beta)) + abs(math.log(-math.log(gamma)))
        else:
            # A = η(1-γ)/(γ^{-η} - 1) = η(1-γ)/expm1(x), x = -η log γ (same sign as η): log|expm1(x)| without overflow
            x = -eta * math.log(gamma)
            log_em1 = x + math.log(-math.expm1(-x)) if x > 0 else math.log(-math.expm1(x))
            log_a = math.log(abs(eta) * beta) - log_em1
            mag_a = abs(math.log(abs(eta) * beta)) + abs(x) + abs(log_em1) + 1.0
        lb = (eta + 1.0) * np.log(gamma + beta * v)
        return log_a - lb, mag_a + np.abs(lb) + 1.0


def pgf_prime_tail(runs: RunCount, v) -> np.ndarray:
    """Ψ̄(v) = φ'(1 - v), v ∈ [0, 1]: nonincreasing, Ψ̄(0) = E[K]. Truncated negative binomial:
    A (γ + (1-γ) v)^{-(η+1)} with A = η(1-γ)/(γ^{-η} - 1) (η = 0: (1-γ)/log(1/γ)); Poisson: μ e^{-μ v};
    fixed k: k (1-v)^{k-1}. Evaluated as exp of its logarithm (:func:`_log_psi`); inf only where Ψ̄ exceeds a
    double."""
    lg, _ = _log_psi(runs, v)
    with np.errstate(over="ignore"):
        return np.exp(lg)


def _psi_rel_err(runs: RunCount, v) -> np.ndarray:
    """A bound on the relative rounding error of :func:`pgf_prime_tail`: exp of a logarithm summed from terms of
    total magnitude M is within (M + 1) ulps relative (each term within 2 ulps of itself, exp within 1), taken 8x
    with 64 ulps on top."""
    lg, mag = _log_psi(runs, v)
    # Ψ̄ = 0 exactly where its logarithm is -inf (fixed k at v = 1)
    return (64.0 + 8.0 * np.where(np.isfinite(lg), mag, 0.0)) * ULP


def _psi_up(runs: RunCount, v) -> np.ndarray:
    return pgf_prime_tail(runs, v) * (1.0 + _psi_rel_err(runs, v))


def _psi_down(runs: RunCount, v) -> np.ndarray:
    return pgf_prime_tail(runs, v) * np.maximum(1.0 - _psi_rel_err(runs, v), 0.0)


def selection_bins(runs: RunCount) -> np.ndarray:
    """Edges 0 = v_0 < ... < v_J = 1 of the upper-tail mass: consecutive edges at most BIN_RATIO apart (from
    V_MIN), and Ψ̄ moving by at most a factor PSI_RATIO (relaxed so that there are at most MAX_BINS bins)
    inside one bin."""
    fine = np.concatenate([[0.0], np.geomspace(V_MIN, 1.0, 6000)])
    psi = pgf_prime_tail(runs, fine)
    top = float(psi[0])
    bottom = float(psi[-1])
    span = math.log(top / bottom) if bottom > 0 else 60.0
    ratio = max(PSI_RATIO, math.exp(span / (MAX_BINS - 300)))
    keep = [0, 1]
    for i in range(2, fine.size):
        j = keep[-1]
        if fine[i] / fine[j] > BIN_RATIO or psi[j] > ratio * psi[i]:
            keep.append(i - 1 if i - 1 > j else i)
    keep.append(fine.size - 1)
    edges = np.unique(fine[keep])
    if edges[-1] != 1.0:
        edges = np.append(edges, 1.0)
    return edges


# ---------------------------------------------------------------------------------- profiles


@dataclass(frozen=True, eq=False)
class Profile:
    """A certified symmetric privacy profile on a grid: ``delta[i]`` >= H_{e^{eps[i]}}(Q(X) || Q(X')) for every
    ordered pair of neighbours, ``eps`` ascending from 0. Between grid points δ is bounded by the chord in
    t = e^ε (δ is convex in t) and by monotonicity."""

    eps: np.ndarray
    delta: np.ndarray
    theorem: str
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        e = np.asarray(self.eps, float)
        d = np.asarray(self.delta, float)
        if e.ndim != 1 or e.shape != d.shape or e.size == 0:
            raise ValueError("a profile needs equally long 1-d eps and delta arrays")
        if e[0] != 0.0 or not np.all(np.diff(e) > 0) or not np.all(np.isfinite(e)):
            raise ValueError("a profile's eps must be finite, ascending and start at 0")
        if not np.all((d >= 0) & (d <= 1)):
            raise ValueError("a profile's delta must lie in [0, 1]")
        # δ is nonincreasing in ε: a bound at a smaller ε holds at every larger one
        d = np.minimum.accumulate(d)
        object.__setattr__(self, "eps", e)
        object.__setattr__(self, "delta", d)

    def at(self, eps) -> np.ndarray:
        """Upper bounds on δ at ``eps`` >= 0 (the value at the largest grid point at or below)."""
        x = np.atleast_1d(np.asarray(eps, float))
        i = np.searchsorted(self.eps, x, side="right") - 1
        return np.where(i >= 0, self.delta[np.maximum(i, 0)], 1.0)

    def selection_epsilon(self, runs: RunCount, delta: float, try_epsilons: Sequence[float] = ()) -> ProfileSelection:
        """The privacy-profile bound's ε at ``delta`` for best-of-K runs of this profile
        (:func:`profile_selection_epsilon`)."""
        return profile_selection_epsilon(self, runs, delta, try_epsilons=try_epsilons)

    def epsilon(self, delta: float) -> float:
        """The smallest ε this profile certifies at ``delta``: on the chord (in t = e^ε) between the last grid
        point above ``delta`` and the first at or below it (δ is convex in t, so the chord bounds it); inf when
        no grid point is at or below ``delta``."""
        dl = V.real("delta", delta, lo=0.0, hi=1.0)
        ok = np.nonzero(self.delta <= dl)[0]
        if ok.size == 0:
            return math.inf
        i = int(ok[0])
        if i == 0:
            return 0.0
        t0, t1 = math.exp(self.eps[i - 1]), math.exp(self.eps[i])
        d0, d1 = float(self.delta[i - 1]), float(self.delta[i])
        t = t0 + (t1 - t0) * (d0 - dl) / (d0 - d1)
        return float(min(math.log(t) * (1 + 8 * ULP) + 8 * ULP, self.eps[i]))

    @staticmethod
    def minimum(*profiles: Profile) -> Profile:
        """The pointwise minimum of several certified profiles of one mechanism (each is an upper bound)."""
        if len(profiles) == 1:
            return profiles[0]
        grid = np.unique(np.concatenate([p.eps for p in profiles]))
        d = np.min(np.stack([p.at(grid) for p in profiles]), axis=0)
        return Profile(grid, d, "the smaller of: " + "; ".join(f"[{p.theorem}]" for p in profiles))

    @staticmethod
    def mixture(profiles: Sequence[Profile], weights=None) -> Profile:
        """The profile of "draw candidate i with probability w_i, run it" with the candidate in the output:
        Σ w_i δ_i (the outputs of different candidates are disjoint), on the union of the grids."""
        if not profiles:
            raise ValueError("a mixture needs at least one profile")
        w = np.full(len(profiles), 1.0 / len(profiles)) if weights is None else np.asarray(weights, float)
        if w.shape != (len(profiles),) or np.any(w < 0) or not w.sum() > 0:
            raise ValueError("mixture weights must be nonnegative, one per profile")
        w = w / w.sum()
        if len(profiles) == 1:
            return profiles[0]
        grid = np.unique(np.concatenate([p.eps for p in profiles]))
        d = sum(wi * p.at(grid) for wi, p in zip(w, profiles))
        d = np.minimum(np.asarray(d) * (1 + 8 * len(profiles) * ULP), 1.0)
        names = sorted({p.theorem for p in profiles})
        return Profile(grid, d, f"mixture over {len(profiles)} candidates of: " + "; ".join(names))


def _grid(eps_max: float, step: float = STEP) -> np.ndarray:
    return np.arange(0.0, eps_max + step / 2, step)


def profile_from_pair(p, q, theorem: str = "exact discrete pair") -> Profile:
    """The exact symmetric profile of a discrete pair (p, q) (max of both orders), with grid points at every
    privacy loss |log(p_i/q_i)|, where its chord interpolation in e^ε is exact."""
    p = np.asarray(p, float)
    q = np.asarray(q, float)
    if p.shape != q.shape or np.any(p < 0) or np.any(q < 0):
        raise ValueError("p and q must be nonnegative arrays of one shape")
    both = (p > 0) & (q > 0)
    losses = np.abs(np.log(p[both]) - np.log(q[both]))
    grid = np.unique(np.concatenate([[0.0], losses]))

    def hs(a, b, e):
        return float(np.sum(np.maximum(a - math.exp(e) * b, 0.0)))

    d = np.array([max(hs(p, q, e), hs(q, p, e)) for e in grid])
    d = np.minimum(d * (1 + 64 * ULP) + 1e-300, 1.0)
    return Profile(grid, d, theorem)


def kov_delta(eps, eps0: float, delta0: float) -> np.ndarray:
    """δ(ε), ε >= 0, of the (ε₀, δ₀) randomized-response pair (Kairouz, Oh & Viswanath 2015):
    δ₀ + (1 - δ₀)(e^{ε₀} - e^{ε})_+ / (1 + e^{ε₀})."""
    e = np.asarray(eps, float)
    with np.errstate(over="ignore"):
        core = (1.0 - delta0) * np.maximum(-np.expm1(e - eps0), 0.0) / (1.0 + math.exp(-eps0))
    return np.minimum(delta0 + core, 1.0)


def profile_from_dp(points: Sequence[tuple[float, float]], step: float = STEP) -> Profile:
    """The profile of a mechanism that is (ε_k, δ_k)-DP for every given point: the minimum over the points of
    the (ε_k, δ_k) randomized-response pair's profile (Kairouz, Oh & Viswanath 2015 Thm 2.4), on a grid that
    holds every ε_k (the pairs' kinks)."""
    pts = [(V.real("epsilon", e, lo=0.0), V.real("delta", d, lo=0.0, hi=1.0)) for e, d in points]
    if not pts:
        raise ValueError("profile_from_dp needs at least one (epsilon, delta) point")
    emax = max(e for e, _ in pts)
    grid = np.unique(np.concatenate([_grid(emax + step, step), [e for e, _ in pts]]))
    d = np.min(np.stack([kov_delta(grid, e, dl) for e, dl in pts]), axis=0)
    d = np.minimum(d * (1 + 64 * ULP) + 1e-300, 1.0)
    text = ", ".join(f"({e:.6g}, {dl:.3g})" for e, dl in pts)
    return Profile(grid, d, f"{THEOREM_KOV} at {text}")


def profile_from_rdp(curve, step: float = STEP, delta_floor: float = DELTA_FLOOR) -> Profile:
    """The profile implied by an RDP curve valid for both orders of the neighbours: at each ε the minimum over
    the orders of Balle et al. 2020 Thm 21 solved for δ, and the total-variation bound (``selection.delta_at``)."""
    from .selection import delta_at

    grid = _grid(EPS_MAX, step)
    d = delta_at(curve, grid)
    stop = np.nonzero(d <= delta_floor)[0]
    if stop.size:
        grid, d = grid[: stop[0] + 1], d[: stop[0] + 1]
    return Profile(grid, np.minimum(d, 1.0), THEOREM_RDP_PROFILE)


def profile_from_pld(pld, delta_floor: float = 1e-14, step: float = STEP) -> Profile:
    """The profile of a pessimistic PLD (:class:`dpspec.accounting.pld.Pld`) on an ε grid: exact μ-GDP where
    the PLD is a composition of Gaussians (40-digit evaluation, rounded up); otherwise, per neighbouring
    direction, the certified δ of tilted FFT passes at every grid loss (``Pass.deltas_on_grid``: each value
    is an upper bound with its numerical error included), the minimum over the passes, at each ε the value at
    the largest grid loss at or below it, and the maximum over the directions."""
    from .pld import _gaussian_delta_upper

    mu = pld.gdp_mu
    theorem = "PLD (pessimistic dominating pairs, Zhu, Dong & Wang 2022 Thm 10)"
    if mu is not None:
        pts: list[float] = []
        vals: list[float] = []
        e = 0.0
        while e <= EPS_MAX:
            dl = _gaussian_delta_upper(mu, e)
            pts.append(e)
            vals.append(dl)
            if dl <= delta_floor:
                break
            e += step
        return Profile(np.array(pts), np.array(vals), theorem + " (exact μ-GDP profile)")
    if pld.total_steps == 0:
        return Profile(np.array([0.0]), np.array([0.0]), theorem)
    if pld.discretization is None and pld.grid < PLD_GRID:
        # a coarser loss grid than the accountant's (every grid is sound: the connect-the-dots pair dominates at
        # every spacing); the selection bound moves by < 1e-3 at 1e-3 for DP-SGD runs and costs 1/10 of the FFT
        from .pld import Pld

        pld = Pld(steps=pld.steps, relation=pld.relation, discretization=PLD_GRID)
    from ._pld_fft import saddle_for_delta

    def run(d):
        tail = pld._tail(delta_floor)
        per_dir = []
        for dr in pld._directions():
            comps = pld._components(dr, d, tail)
            tilts = {0.0}
            for target in (delta_floor, math.sqrt(delta_floor * 1e-3), 1e-4):
                tilts.add(_quantize_tilt(saddle_for_delta(comps, target, d)))
            rows = []
            for lam in sorted(tilts):
                ps = pld._pass(dr, d, lam, min(1e-10, 1e-6 * delta_floor), tail)
                _j, losses, dl, _ = ps.deltas_on_grid(None)
                rows.append((np.asarray(losses, float), np.asarray(dl, float)))
            per_dir.append(rows)
        return per_dir

    per_dir, d = pld._with_grid(run)
    hi = 0.0
    for rows in per_dir:
        for losses, dl in rows:
            ok = np.nonzero(dl <= delta_floor)[0]
            hi = max(hi, float(losses[ok[0]]) if ok.size else float(losses[-1]))
    grid = _grid(min(max(hi, step), EPS_MAX), step)
    out = np.zeros_like(grid)
    for rows in per_dir:
        best = np.ones_like(grid)
        for losses, dl in rows:
            i = np.searchsorted(losses, grid, side="right") - 1
            val = np.where(i >= 0, dl[np.maximum(i, 0)], 1.0)
            best = np.minimum(best, np.where(np.isfinite(val), val, 1.0))
        out = np.maximum(out, best)
    return Profile(grid, np.minimum(out, 1.0), theorem + f" (loss grid {d:g})")


def _quantize_tilt(lam: float) -> float:
    from .pld import _quantize

    return _quantize(lam)


# -------------------------------------------------------------------------------- the bound


def _nodes(profile: Profile) -> tuple[np.ndarray, np.ndarray]:
    """Points (t, f) with f >= H_t(Q(X) || Q(X')) for every ordered pair of neighbours, t ascending (> 0):
    t = e^{ε} (rounded up: δ is nonincreasing in t) with f = D(ε), and t = e^{-ε} with
    f = 1 - e^{-ε} + e^{-ε} D(ε) (the reversed order's profile), rounded up."""
    e, d = profile.eps, profile.delta
    with np.errstate(over="ignore"):
        tp = np.exp(e) * (1 + 4 * ULP)
    en = e[1:][::-1]
    tn = np.exp(-en) * (1 + 4 * ULP)
    fn = (-np.expm1(-en) + np.exp(-en) * d[1:][::-1]) * (1 + 8 * ULP) + 1e-300
    t = np.concatenate([tn, tp])
    f = np.minimum(np.concatenate([fn, d]), 1.0)
    ok = np.isfinite(t)
    t, f = t[ok], f[ok]
    # nodes that rounded to one t keep the largest f (each is a valid bound there)
    tu, inv = np.unique(t, return_inverse=True)
    fu = np.zeros_like(tu)
    np.maximum.at(fu, inv, f)
    return tu, fu


def _g_bar(profile: Profile, v: np.ndarray) -> np.ndarray:
    """Ḡ(v): a lower bound on P_X(upper tail) given P_{X'}(upper tail) = v (the set {y' > y} and the profile in
    both orders), rounded down: e^{-ε}(v - D(ε)) and 1 - D(ε) - e^{ε}(1 - v) (the second written so that it has no
    cancellation where it is positive), each lowered by a bound on its rounding."""
    e, d = profile.eps, profile.delta
    v = np.asarray(v, float)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        ee = np.exp(-e)[None, :]
        a = ee * (v - d[None, :])
        a = a - 8 * ULP * ee * (v + d[None, :])
        w = np.exp(e)[None, :] * (1.0 - v)
        b = 1.0 - d[None, :] - w
        b = b - 8 * ULP * (2.0 + w)
        b = np.where(np.isfinite(b), b, -np.inf)
    best = np.maximum(np.max(a, axis=1), np.max(b, axis=1))
    return np.clip(best, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class _Prepared:
    runs: RunCount
    edges: np.ndarray  # v edges, ascending
    W: np.ndarray  # per bin, in ascending-u order (bin 0 = the bottom of the order)
    Wp: np.ndarray
    du: np.ndarray
    t: np.ndarray  # profile nodes
    f: np.ndarray
    law_l: np.ndarray  # P'-law of the likelihood ratio implied by the nodes (for choosing c only)
    law_m: np.ndarray
    inf_mass: float
    psi1: float


def prepare(profile: Profile, runs: RunCount, edges: np.ndarray | None = None) -> _Prepared:
    """The bins, weights and nodes of the bound for ``profile`` and ``runs`` (independent of ε)."""
    if edges is None:
        edges = selection_bins(runs)
    v_lo, v_hi = edges[:-1], edges[1:]
    W = _psi_up(runs, _g_bar(profile, v_lo))  # sup of φ'(F) over the bin
    Wp = _psi_down(runs, v_hi)  # inf of φ'(F') over the bin
    du = v_hi - v_lo
    t, f = _nodes(profile)
    # the P'-law of ℓ of the pair whose profile is the chord interpolation through (0, 1) and the nodes
    tt = np.concatenate([[0.0], t])
    ff = np.concatenate([[1.0], f])
    slopes = np.diff(ff) / np.diff(tt)
    slopes = np.maximum.accumulate(np.concatenate([slopes, [0.0]]))
    jumps = np.diff(np.concatenate([[-1.0], slopes]))
    law_l = tt
    law_m = np.maximum(jumps, 0.0)
    law_m = law_m / law_m.sum()
    psi1 = float(_psi_up(runs, np.array([0.0]))[0])
    # ascending-u order: bin 0 is v ∈ [v_{J-1}, 1], the last bin is v ∈ [0, v_1]
    return _Prepared(runs, edges, W[::-1], Wp[::-1], du[::-1], t, f, law_l, law_m, float(f[-1]), psi1)


def _potentials(pr: _Prepared, thr: np.ndarray) -> np.ndarray:
    """c from the comonotone placement: bins ascending in u get the P'-law of ℓ ascending; at the boundary atom
    b_k between bins k and k+1, c_{k+1} - c_k = S_{k+1}(b_k) - S_k(b_k)."""
    cum_bins = np.cumsum(pr.du)[:-1]
    cum_law = np.cumsum(pr.law_m)
    idx = np.minimum(np.searchsorted(cum_law, cum_bins * (1 - 1e-12), side="left"), pr.law_l.size - 1)
    b = pr.law_l[idx]
    s_next = np.maximum(pr.W[1:] * b - thr[1:], 0.0)
    s_here = np.maximum(pr.W[:-1] * b - thr[:-1], 0.0)
    return np.concatenate([[0.0], np.cumsum(s_next - s_here)])


def _lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull of points (x ascending)."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # drop b if it lies on or above the segment a -> i
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return np.asarray(hull, int)


def _dual(pr: _Prepared, eps: float) -> tuple[float, np.ndarray]:
    """The bound at ε (see the module docstring), and the potentials used.

    g is evaluated at the profile's nodes and rounded up; g̃ is the polyline through a subset of those points
    (their lower convex hull): a chord between upper bounds on a convex function bounds it, whichever points
    are kept, and a slope increment rounded below 0 is raised to 0 (which only raises g̃ beyond it). The sum
    g̃(0) + g̃'(0+) + Σ jumps·D + Σ c·Δu is raised by the rounding of the slopes (each within 4 ulps relative,
    each jump's error weighted by the D it multiplies) and of the sum."""
    # δ(ε) is nonincreasing in ε, so the bound at 700 holds beyond (where e^ε would overflow)
    thr = math.exp(min(eps, 700.0)) * pr.Wp  # S_k(ℓ) = (W_k ℓ - thr_k)_+
    if not (np.all(np.isfinite(pr.W)) and np.all(np.isfinite(thr)) and math.isfinite(pr.psi1)):
        return 1.0, np.zeros(pr.du.size)  # Ψ̄ or e^ε Ψ̄ beyond a double: no bound (fail closed)
    c = _potentials(pr, thr)
    ac = np.abs(c)
    g = np.empty(pr.t.size)
    for a in range(0, pr.t.size, 256):
        tt = pr.t[a : a + 256][:, None]
        wt = pr.W[None, :] * tt
        s_up = np.maximum(wt - thr[None, :] + 2 * ULP * (wt + thr[None, :]), 0.0)
        vals = s_up - c[None, :] + 2 * ULP * (s_up + ac[None, :])
        g[a : a + 256] = np.max(vals, axis=1)
    g0 = float(np.max(-c + 2 * ULP * ac))
    x = np.concatenate([[0.0], pr.t])
    y = np.concatenate([[g0], g])
    h = _lower_hull(x, y)
    hx, hy = x[h], y[h]
    seg = np.diff(hy) / np.diff(hx)
    s0 = float(seg[0]) if seg.size else 0.0
    s_inf = max(pr.psi1, float(np.max(pr.W)), float(seg[-1]) if seg.size else 0.0)
    slopes = np.concatenate([seg, [s_inf]])
    jumps = np.maximum(np.diff(slopes), 0.0)  # at the hull's vertices after 0
    f_at = pr.f[h[1:] - 1]
    terms = np.concatenate([[hy[0], s0], jumps * f_at, c * pr.du])
    if not np.all(np.isfinite(terms)):
        return 1.0, c  # fail closed (math.fsum would return NaN or raise)
    total = math.fsum(terms.tolist())
    slope_err = 8 * ULP * (np.abs(slopes[:-1]) + np.abs(slopes[1:]))
    err = 8 * ULP * abs(s0) + math.fsum((slope_err * f_at).tolist()) + 8 * ULP * math.fsum(np.abs(terms).tolist())
    out = total + err
    if not math.isfinite(out):
        # an overflow (Ψ̄ beyond a double) or a NaN: no bound, so δ = 1 (a NaN would pass no test "<= δ" and fail
        # none, and the bisection would certify whatever it started from)
        return 1.0, c
    return max(out, 0.0), c


def _primal(pr: _Prepared, eps: float) -> float:
    """The comonotone placement's value (what the dual equals when that placement is optimal): each bin gets its
    share of the P'-law of ℓ in ascending order, plus φ'(1) P_X(q' = 0). Diagnostics and tests only."""
    thr = math.exp(eps) * pr.Wp
    cb = np.concatenate([[0.0], np.cumsum(pr.du)])
    cl = np.concatenate([[0.0], np.cumsum(pr.law_m)])
    total = 0.0
    for k in range(pr.du.size):
        lo, hi = cb[k], cb[k + 1]
        a = max(int(np.searchsorted(cl, lo, side="right")) - 1, 0)
        b = min(int(np.searchsorted(cl, hi, side="left")), pr.law_l.size)
        for i in range(a, b):
            m = min(hi, cl[i + 1]) - max(lo, cl[i])
            if m > 0:
                total += m * max(pr.W[k] * pr.law_l[i] - thr[k], 0.0)
    return total + pr.psi1 * pr.inf_mass


def prepared(profile: Profile, runs: RunCount) -> _Prepared:
    """:func:`prepare`, cached on the profile per run-count distribution."""
    key = (runs.kind, runs.count, runs.mu, runs.eta, runs.gamma)
    if key not in profile._cache:
        profile._cache[key] = prepare(profile, runs)
    return profile._cache[key]


def profile_selection_delta(profile: Profile, runs: RunCount, eps: float) -> float:
    """An upper bound on δ(ε) of best-of-K runs whose one-run profile is ``profile`` (module docstring)."""
    e = V.real("epsilon", eps, lo=0.0)
    return min(_dual(prepared(profile, runs), e)[0], 1.0)


@dataclass(frozen=True, eq=False)
class ProfileSelection:
    """ε at δ of best-of-K from a run profile: ``epsilon`` certified (``delta_bound`` <= ``delta`` there)."""

    epsilon: float
    delta: float
    delta_bound: float
    theorem: str


def profile_selection_epsilon(
    profile: Profile,
    runs: RunCount,
    delta: float,
    *,
    rel_tol: float = 1e-5,
    try_epsilons: Sequence[float] = (),
) -> ProfileSelection:
    """The smallest ε (to ``rel_tol``, the upper end of the final bracket, whose bound is evaluated) with the
    privacy-profile bound at most ``delta``, or the smallest of ``try_epsilons`` whose bound is at most
    ``delta`` if smaller; ε = inf when none up to the profile's range does."""
    dl = V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    pr = prepared(profile, runs)
    theorem = f"{THEOREM_PROFILE}, K ~ {runs.describe()}, over [{profile.theorem}]"

    def bound(x: float) -> float:
        return _dual(pr, x)[0]

    b0 = bound(0.0)
    if b0 <= dl:
        return ProfileSelection(0.0, dl, b0, theorem)
    hi = 1.0
    top = float(profile.eps[-1]) + math.log(min(max(pr.psi1, 1.0), 1e308)) + 60.0  # finite: the doubling stops
    bh = bound(hi)
    while bh > dl:
        if hi > top:
            return ProfileSelection(math.inf, dl, 1.0, theorem)
        hi *= 2.0
        bh = bound(hi)
    lo = hi / 2.0 if hi > 1.0 else 0.0
    best = (hi, bh)
    while hi - lo > rel_tol * max(hi, 1e-3):
        m = 0.5 * (lo + hi)
        bm = bound(m)
        if bm <= dl:
            hi, best = m, (m, bm)
        else:
            lo = m
    for x in sorted(float(v) for v in try_epsilons if 0.0 <= v < best[0]):
        bx = bound(x)
        if bx <= dl:
            best = (x, bx)
            break
    return ProfileSelection(float(best[0]), dl, float(best[1]), theorem)
