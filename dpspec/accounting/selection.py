"""Private selection over repeated runs: the privacy of hyper-parameter tuning.

A tuning procedure draws a number of runs K, draws a candidate setting for each run, runs the
candidate's mechanism Q_i on the private data, and outputs the best run (its output and, if
released, its score). Its privacy follows from the runs' RDP curves:

* **candidates differ** — one run is the mixture Q = "draw i from the stated distribution, run Q_i".
  Rényi divergence is jointly quasi-convex (van Erven & Harremoës 2014, Thm 13), so at every order
  D_λ(Q(x) || Q(x')) <= max_i D_λ(Q_i(x) || Q_i(x')): the *envelope* (per-order maximum) of the
  candidates' certified curves is a certified curve of one run (:func:`candidate_envelope`).
* **truncated negative binomial K** (Papernot & Steinke 2022, ICLR, Thm 2): K ~ D_{η,γ} with
  η > -1, γ ∈ (0, 1), P[K = k] = (1-γ)^k / (γ^{-η} - 1) · Π_{l<k} (l+η)/(l+1) for k >= 1
  (η = 0: the logarithmic distribution (1-γ)^k / (k log(1/γ)); η = 1: the geometric γ(1-γ)^{k-1}).
  If Q is (λ, ε)-RDP and (λ̂, ε̂)-RDP (λ > 1, λ̂ >= 1), best-of-K is (λ, ε')-RDP with

      ε' = ε + (1+η)(1 - 1/λ̂) ε̂ + (1+η) log(1/γ) / λ̂ + log E[K] / (λ - 1),
      E[K] = η(1-γ) / (γ(1 - γ^η))   (η ≠ 0),   (1/γ - 1) / log(1/γ)   (η = 0).

  Every λ̂ of the grid, and λ̂ = 1 (where the ε̂ term vanishes), gives a valid bound: the minimum
  over them is taken per order (:func:`tnb_selection_curve`).
* **Poisson K** (Papernot & Steinke 2022, Thm 6): K ~ Poisson(μ), nothing output when K = 0. If Q
  is (λ, ε)-RDP and (ε̂, δ̂)-DP with e^{ε̂} <= 1 + 1/(λ-1), best-of-K is (λ, ε')-RDP with

      ε' = ε + μ δ̂ + log(μ) / (λ - 1).

  ε̂ = log(1 + 1/(λ-1)) (the largest allowed, rounded down: :func:`poisson_eps_hat`) and δ̂ = δ_Q(ε̂) from Q's
  own curve: the minimum over
  orders α of exp((α-1)(ρ(α) - ε̂)) (1-1/α)^{α-1} / α (Balle et al. 2020 Thm 21 solved for δ), and
  of the total-variation bound sqrt(1 - exp(-ρ(α))) (Bretagnolle–Huber; KL <= ρ(α)), capped at 1
  (:func:`poisson_selection_curve`).
* **a fixed number k of runs** — the k outputs together are k adaptive compositions (Mironov 2017
  Prop 1): k·ρ(λ); the selected run is post-processing of them (:func:`fixed_selection_curve`).
* **pure ε-DP runs** (Liu & Talwar 2019, STOC; Papernot & Steinke 2022 Thm 2 with λ, λ̂ → ∞):
  best-of-K for K ~ D_{η,γ} is (2+η)ε-DP (the geometric case η = 1: 3ε, Liu & Talwar's random
  stopping); a fixed k: kε (basic composition). No pure bound is claimed for Poisson K
  (:func:`pure_selection_epsilon`).

Rényi divergence is non-decreasing in its order (van Erven & Harremoës 2014 Thm 3): each order's bound is
the minimum of the theorem's bound over the orders at or above it (the log E[K]/(λ-1) and log(μ)/(λ-1)
terms fall with λ, so this tightens small orders).

The certified (ε, δ) of the procedure is the minimum over the valid bounds
(:func:`selection_dp`). Outputs are rounded *up* by a few ulps of the magnitudes involved, and the
per-order error bound of the input curve is carried (the bounds are monotone in ρ with slope at
most 1 + (1+η) in the TNB case and 1 + μ·(δ̂'s slope) in the Poisson case, accounted for below).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import _validate as V
from ._logmath import ULP
from .conversion import CONVERSIONS, convert
from .curve import RdpCurve, _make

THEOREM_ENVELOPE = "van Erven & Harremoës 2014 Thm 13 (quasi-convexity: envelope of the candidates' curves)"
THEOREM_TNB = "Papernot & Steinke 2022 Thm 2 (best of K runs, K truncated negative binomial)"
THEOREM_POISSON = "Papernot & Steinke 2022 Thm 6 (best of K runs, K Poisson)"
THEOREM_FIXED = "Mironov 2017 Prop 1 (k runs compose; selection is post-processing)"
THEOREM_PURE_TNB = "Liu & Talwar 2019; Papernot & Steinke 2022 Thm 2 as λ, λ̂ → ∞: (2 + η)ε-DP"
THEOREM_PURE_FIXED = "basic composition (Dwork et al. 2006): kε-DP for k runs"

RUN_KINDS = ("fixed", "poisson", "truncated_negative_binomial")


@dataclass(frozen=True)
class RunCount:
    """The distribution of the number of runs K.

    ``kind`` is ``"fixed"`` (K = ``count``), ``"poisson"`` (K ~ Poisson(``mu``)) or
    ``"truncated_negative_binomial"`` (K ~ D_{``eta``, ``gamma``}, Papernot & Steinke 2022 §2:
    ``eta`` > -1, 0 < ``gamma`` < 1; ``eta`` = 1 is the geometric distribution, 0 the logarithmic).
    """

    kind: str
    count: int = 0
    mu: float = 0.0
    eta: float = 0.0
    gamma: float = 0.0

    def __post_init__(self) -> None:
        V.choice("kind", self.kind, RUN_KINDS)
        if self.kind == "fixed":
            V.integer("count", self.count, lo=1)
        elif self.kind == "poisson":
            V.real("mu", self.mu, lo=0.0, lo_open=True)
        else:
            V.real("eta", self.eta, lo=-1.0, lo_open=True)
            V.real("gamma", self.gamma, lo=0.0, hi=1.0, lo_open=True, hi_open=True)

    @staticmethod
    def fixed(count: int) -> RunCount:
        return RunCount("fixed", count=int(count))

    @staticmethod
    def poisson(mu: float) -> RunCount:
        return RunCount("poisson", mu=float(mu))

    @staticmethod
    def tnb(eta: float, gamma: float) -> RunCount:
        return RunCount("truncated_negative_binomial", eta=float(eta), gamma=float(gamma))

    def mean(self) -> float:
        """E[K]."""
        if self.kind == "fixed":
            return float(self.count)
        if self.kind == "poisson":
            return self.mu
        lm = tnb_log_mean(self.eta, self.gamma)
        return math.exp(lm) if lm < _LOG_DBL_MAX else math.inf  # E[K] above a double: no exception

    def log_mean(self) -> float:
        """log E[K] (finite for every valid distribution, where E[K] itself may exceed a double)."""
        if self.kind == "fixed":
            return math.log(self.count)
        if self.kind == "poisson":
            return math.log(self.mu)
        return tnb_log_mean(self.eta, self.gamma)

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"fixed({self.count})"
        if self.kind == "poisson":
            return f"poisson(mean = {self.mu:g})"
        lm = self.log_mean()
        if lm < _LOG_DBL_MAX:
            mean = f"{math.exp(lm):.6g}"
        else:  # written as a power of ten from its logarithm: E[K] is beyond a double
            e10 = lm / math.log(10.0)
            exp10, mant = math.floor(e10), f"{10.0 ** (e10 - math.floor(e10)):.6g}"
            if float(mant) >= 10.0:  # the mantissa rounded up to 10
                exp10, mant = exp10 + 1, "1"
            mean = f"{mant}e+{exp10}"
        return f"truncated_negative_binomial(eta = {self.eta:g}, gamma = {self.gamma:g}), mean {mean}"

    def pmf(self, k: int) -> float:
        """P[K = k]."""
        if self.kind == "fixed":
            return 1.0 if k == self.count else 0.0
        if self.kind == "poisson":
            return math.exp(-self.mu + k * math.log(self.mu) - math.lgamma(k + 1)) if k >= 0 else 0.0
        return tnb_pmf(k, self.eta, self.gamma)

    def sample(self, rng: np.random.Generator) -> int:
        """One draw of K from exactly the stated distribution (:func:`tnb_sample` for the truncated negative
        binomial; numpy's Poisson sampler for Poisson K)."""
        if self.kind == "fixed":
            return self.count
        if self.kind == "poisson":
            return _poisson(rng, self.mu)
        return tnb_sample(rng, self.eta, self.gamma)


_LOG_DBL_MAX = 709.0  # below log(DBL_MAX) ≈ 709.78: exp of anything smaller is finite

#: numpy's Poisson sampler is used up to this mean (its own limit is about 9.2e18, an int64); above it the
#: exact reduction of :func:`_poisson` takes over
POISSON_DIRECT_MAX = 2.0**60


def _poisson(rng: np.random.Generator, lam: float, direct_max: float = POISSON_DIRECT_MAX) -> int:
    """One Poisson(``lam``) draw, any finite ``lam`` >= 0, as a Python int.

    Up to ``direct_max``, numpy's sampler (PTRS, Hörmann 1993, for means >= 10; multiplication of uniforms
    below). Above it, the exact reduction of Ahrens & Dieter 1974 (Devroye 1986 §X.3.3): with n < λ, the time X
    of the n-th arrival of a unit-rate Poisson process is Gamma(n); if X < λ the count is n plus a Poisson(λ - X)
    count on the rest, else it is Binomial(n - 1, λ/X) (the first n - 1 arrivals are uniform on [0, X]), a
    binomial reduced the same way by :func:`_binomial` while its count exceeds an int64. In exact arithmetic every
    step is exact; reached only with probability at most E[K] / 2^60 under the compile-time bound on E[K]."""
    k = 0
    while lam > direct_max:
        n = float(math.floor(0.875 * lam))  # a double that is an integer: Gamma(n) has exactly this shape
        x = float(rng.standard_gamma(n))
        if x < lam:
            k += int(n)
            lam -= x
        else:
            return k + _binomial(rng, int(n) - 1, lam / x)
    return k + int(rng.poisson(lam))


def _binomial(rng: np.random.Generator, n: int, p: float) -> int:
    """One Binomial(``n``, ``p``) draw for any integer n >= 0 (numpy's sampler below 2^62). Above, the order
    statistic reduction (Devroye 1986 §X.4.3): the i-th smallest of n uniforms is Beta(i, n + 1 - i); at or below
    p, the count is i plus Binomial(n - i, (p - Y)/(1 - Y)), else Binomial(i - 1, p / Y)."""
    k = 0
    while n >= 2**62:
        i = n // 2
        y = float(rng.beta(float(i), float(n + 1 - i)))
        if y <= p:
            k += i
            n, p = n - i, min(1.0, max(0.0, (p - y) / (1.0 - y)))
        else:
            n, p = i - 1, min(1.0, p / y)
    return k + int(rng.binomial(n, p))


def tnb_sample(rng: np.random.Generator, eta: float, gamma: float) -> int:
    """One draw of K ~ D_{η,γ} (Papernot & Steinke 2022 §2), exact in exact arithmetic, for every η > -1.

    The Gamma–Poisson mixture: Σ_{k>=1} P[Poisson(Y) = k] with Y of density ∝ y^{η-1} e^{-y/θ}, θ = (1-γ)/γ,
    gives ∫ y^{η-1} e^{-y/θ} e^{-y} y^k / k! dy = Γ(k+η)/k! · (1-γ)^{k+η}, i.e. P[K = k] ∝ (1-γ)^k Γ(k+η)/Γ(k+1):
    the law of :func:`tnb_pmf`, for every k >= 1 and every η > -1 (for η <= 0 the y-measure is not finite but
    its restriction to k >= 1 is). Conditioning on K >= 1 tilts Y by P[Poisson(Y) >= 1] = 1 - e^{-y}
    = ∫_0^1 y e^{-yt} dt, so with b = 1/θ = γ/(1-γ):

    1. T on [0, 1] with density ∝ (b + t)^{-(η+1)} (the t-marginal of y^η e^{-y(b+t)}), by inversion:
       b + T = b (1 - U (1 - γ^η))^{-1/η} (η ≠ 0), b γ^{-U} (η = 0);
    2. Y | T ~ Gamma(η + 1, rate b + T);
    3. K | Y ~ Poisson(Y) conditioned on K >= 1: the first arrival S of a rate-Y process on [0, 1] given one
       arrives there (S = -log(1 - U'(1 - e^{-Y}))/Y) and K = 1 + Poisson(Y (1 - S)), Y (1 - S) =
       Y + log1p(U' expm1(-Y)).

    No rejection, no truncation, the same cost for every (η, γ) (rejecting K = 0 from NB(η, γ) costs 1/(1-γ^η)
    draws, unbounded as η → 0; numpy's logseries(1 - γ) would lose γ to the rounding of 1 - γ).

    Floating point, as with the project's other continuous samplers: the draws are exact up to the rounding of
    double arithmetic — U, U' are 53-bit uniforms, the inversions use log1p/expm1 (a few ulps relative), and
    numpy's Gamma (Marsaglia & Tsang 2000) and Poisson (:func:`_poisson`) samplers are exact in exact
    arithmetic; the sampled law is the certified one up to these few-ulp perturbations of its continuous
    intermediates, and for the event Y >= e^709 (probability at most E[K] e^{-709}), drawn as Y = e^709. A Y
    below the smallest double gives K = 1, its conditional probability being 1 - O(Y)."""
    eta = V.real("eta", eta, lo=-1.0, lo_open=True)
    gamma = V.real("gamma", gamma, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    lg = math.log(gamma)
    log_b = lg - math.log1p(-gamma)
    u = float(rng.random())
    if eta == 0.0:
        log_rate = log_b - u * lg
    else:
        if eta > 0.0:
            c = -math.expm1(eta * lg)  # 1 - γ^η in (0, 1)
            log_rate = log_b - math.log1p(-u * c) / eta
        else:  # log(1 + u (γ^η - 1)) with γ^η - 1 = e^{η lg} - 1 possibly beyond a double
            x = eta * lg  # > 0
            log_gm1 = x + math.log1p(-math.exp(-x)) if x > 1.0 else math.log(math.expm1(x))
            t = math.log(u) + log_gm1 if u > 0.0 else -math.inf
            log_one_plus = t + math.log1p(math.exp(-t)) if t > 0.0 else math.log1p(math.exp(t))
            log_rate = log_b - log_one_plus / eta
    # Y = G / rate with G ~ Gamma(η + 1, 1); in logs, as the rate can be subnormal for tiny γ
    g = float(rng.standard_gamma(eta + 1.0))
    if g == 0.0:
        y = 0.0
    else:
        ly = math.log(g) - log_rate
        y = math.exp(ly) if ly < _LOG_DBL_MAX else math.inf
    u2 = float(rng.random())
    if y == math.inf:
        # Y beyond a double: P[Y >= e^709] <= E[Y] e^{-709} <= E[K] e^{-709} (E[K | Y] = Y/(1 - e^{-Y}) >= Y), below
        # 1e-301 under the compile-time bound E[K] <= 1e6; K is then drawn as 1 + Poisson(e^709)
        return 1 + _poisson(rng, math.exp(_LOG_DBL_MAX))
    rest = max(0.0, y + math.log1p(u2 * math.expm1(-y)))
    return 1 + _poisson(rng, rest)


def tnb_log_mean(eta: float, gamma: float) -> float:
    """log E[K] for K ~ D_{η,γ} (Papernot & Steinke 2022 §2): η(1-γ)/(γ(1-γ^η)), η ≠ 0;
    (1/γ - 1)/log(1/γ), η = 0."""
    eta = V.real("eta", eta, lo=-1.0, lo_open=True)
    gamma = V.real("gamma", gamma, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    lg = math.log(gamma)
    if eta == 0.0:
        return math.log1p(-gamma) - lg - math.log(-lg)
    # 1 - γ^η = -expm1(η log γ): same sign as η, so the ratio η / (1 - γ^η) is positive
    if eta > 0.0:
        return math.log(eta / -math.expm1(eta * lg)) + math.log1p(-gamma) - lg
    # η < 0: γ^η - 1 = expm1(x), x = η log γ > 0, may exceed a double (η near -1, γ subnormal): log(expm1(x))
    x = eta * lg
    log_em1 = x + math.log1p(-math.exp(-x)) if x > 1.0 else math.log(math.expm1(x))
    return math.log(-eta) - log_em1 + math.log1p(-gamma) - lg


def tnb_pmf(k: int, eta: float, gamma: float) -> float:
    """P[K = k] for K ~ D_{η,γ}, k >= 1 (0 otherwise)."""
    if k < 1:
        return 0.0
    lt = math.log1p(-gamma)
    if eta == 0.0:
        return math.exp(k * lt - math.log(k) - math.log(-math.log(gamma)))
    # Π_{l<k} (l+η)/(l+1) = Γ(k+η) / (Γ(η) Γ(k+1)), signed for η < 0
    log_prod = math.lgamma(k + eta) - math.lgamma(eta) - math.lgamma(k + 1)
    sign = -1.0 if eta < 0 else 1.0
    norm = math.expm1(-eta * math.log(gamma))  # γ^{-η} - 1, same sign as η
    return sign * math.exp(k * lt + log_prod) / norm


def candidate_envelope(curves: Sequence[RdpCurve]) -> RdpCurve:
    """The per-order maximum of the candidates' certified curves: a certified curve of one run of
    "draw a candidate, run it" (quasi-convexity of Rényi divergence, van Erven & Harremoës 2014
    Thm 13). All curves must share one order grid."""
    if not curves:
        raise ValueError("candidate_envelope needs at least one curve")
    alphas = curves[0].alphas
    for c in curves:
        if not isinstance(c, RdpCurve):
            raise ValueError(f"candidate_envelope takes RdpCurve arguments, got {type(c).__name__}")
        if c.alphas.shape != alphas.shape or not np.array_equal(c.alphas, alphas):
            raise ValueError("candidate_envelope: all curves must use the same alphas grid")
    if len(curves) == 1:
        return curves[0]
    stack = np.stack([c.rdp for c in curves])
    rdp = np.max(stack, axis=0)
    errs = np.max(np.stack([c.abs_errors for c in curves]), axis=0)
    theorem = f"{THEOREM_ENVELOPE} of: " + "; ".join(f"[{c.theorem}]" for c in curves)
    return _make(alphas, rdp, errs, theorem, " | ".join(sorted({c.method for c in curves})))


def _monotone(out: np.ndarray, errs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ε''(λ) = min over λ' >= λ of ε'(λ'): Rényi divergence is non-decreasing in its order (van Erven &
    Harremoës 2014 Thm 3), so a bound at a larger order bounds every smaller one. The error bound taken is the
    largest over the suffix (conservative)."""
    mono = np.minimum.accumulate(out[::-1])[::-1]
    err = np.maximum.accumulate(errs[::-1])[::-1]
    return mono, err


def _round_up(value: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    return value + 16.0 * ULP * magnitude


def tnb_hat(curve: RdpCurve, eta: float, gamma: float) -> tuple[float, float]:
    """The order λ̂ (1 or one of the grid) and ρ(λ̂) that :func:`tnb_selection_curve` uses (ρ(1) reported 0)."""
    a, rho = curve.alphas, curve.rdp
    c = 1.0 + eta
    with np.errstate(invalid="ignore", over="ignore"):
        terms = c * (1.0 - 1.0 / a) * rho + c * -math.log(gamma) / a
    terms = np.where(np.isfinite(rho), terms, np.inf)
    j = int(np.argmin(terms))
    return (float(a[j]), float(rho[j])) if terms[j] < c * -math.log(gamma) else (1.0, 0.0)


def tnb_selection_curve(curve: RdpCurve, eta: float, gamma: float, monotone: bool = True) -> RdpCurve:
    """Papernot & Steinke 2022 Thm 2 at every order of ``curve`` (the curve of one run), with
    λ̂ minimised over {1} ∪ the grid; ``monotone``: then the minimum over larger orders (:func:`_monotone`)."""
    if not isinstance(curve, RdpCurve):
        raise ValueError(f"curve must be an RdpCurve, got {type(curve).__name__}")
    eta = V.real("eta", eta, lo=-1.0, lo_open=True)
    gamma = V.real("gamma", gamma, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    a, rho, err = curve.alphas, curve.rdp, curve.abs_errors
    c = 1.0 + eta
    log_inv_gamma = -math.log(gamma)
    with np.errstate(invalid="ignore", over="ignore"):
        hat_terms = c * (1.0 - 1.0 / a) * rho + c * log_inv_gamma / a
    hat_terms = np.where(np.isfinite(rho), hat_terms, np.inf)
    lam1 = c * log_inv_gamma  # λ̂ = 1: the ε̂ term vanishes
    j = int(np.argmin(hat_terms))
    if hat_terms[j] < lam1:
        hat, hat_err = float(hat_terms[j]), float(c * np.max(err[np.isfinite(rho)]))
    else:
        hat, hat_err = lam1, 0.0
    log_mean = tnb_log_mean(eta, gamma)
    tail = log_mean / (a - 1.0)
    out = rho + hat + tail
    out = _round_up(out, np.abs(rho) + abs(hat) + np.abs(tail) + 1.0 * ULP)
    out = np.where(np.isfinite(rho), np.maximum(out, 0.0), np.inf)
    errs = err + hat_err + 16.0 * ULP * (np.abs(rho) + abs(hat) + np.abs(tail))
    if monotone:
        out, errs = _monotone(out, errs)
    theorem = f"{THEOREM_TNB}, eta = {eta:g}, gamma = {gamma:g}, over [{curve.theorem}]"
    return _make(a, out, errs, theorem, curve.method)


def delta_at(curve: RdpCurve, eps_hat: np.ndarray) -> np.ndarray:
    """δ_Q(ε̂) for each ε̂: an upper bound on the hockey-stick divergence of one run at e^{ε̂},
    from its RDP curve (Balle et al. 2020 Thm 21 solved for δ, minimised over the orders; the
    total-variation bound sqrt(1 - exp(-ρ(α))); 1)."""
    a = curve.alphas[:, None]
    rho = curve.rdp[:, None]
    e = np.atleast_1d(np.asarray(eps_hat, float))[None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        log_d = (a - 1.0) * (rho - e) + (a - 1.0) * np.log1p(-1.0 / a) - np.log(a)
        log_d = log_d + 16.0 * ULP * ((a - 1.0) * (np.abs(rho) + np.abs(e)) + np.log(a) + 1.0)
    log_d = np.where(np.isfinite(rho), log_d, np.inf)
    best = np.min(log_d, axis=0)
    finite_rho = curve.rdp[np.isfinite(curve.rdp)]
    tv = math.sqrt(-math.expm1(-float(np.min(finite_rho)))) * (1 + 8 * ULP) if finite_rho.size else 1.0
    with np.errstate(over="ignore"):
        d = np.exp(best) * (1 + 8 * ULP)
    return np.minimum(np.minimum(d, tv), 1.0)


def poisson_eps_hat(alphas: np.ndarray) -> np.ndarray:
    """ε̂ = log(1 + 1/(λ-1)), rounded down so that the condition of Papernot & Steinke 2022 Thm 6,
    e^{ε̂} <= 1 + 1/(λ-1), holds in exact arithmetic. ``log1p`` of 1/(λ-1) is within a few ulps relative; the
    naive ``log(λ/(λ-1))`` is not (λ/(λ-1) rounds to within an ulp of 1, i.e. a relative error up to
    (λ-1)·2^-53 of the logarithm: at 27 orders of the default grid it exceeded the allowed ε̂)."""
    a = np.asarray(alphas, float)
    return np.log1p(1.0 / (a - 1.0)) * (1.0 - 8.0 * ULP)


def poisson_selection_curve(curve: RdpCurve, mu: float, monotone: bool = True) -> RdpCurve:
    """Papernot & Steinke 2022 Thm 6 at every order λ of ``curve``: ε̂ = log(1 + 1/(λ-1)) (:func:`poisson_eps_hat`),
    δ̂ = :func:`delta_at` (ε̂); ``monotone``: then the minimum over larger orders (:func:`_monotone`)."""
    if not isinstance(curve, RdpCurve):
        raise ValueError(f"curve must be an RdpCurve, got {type(curve).__name__}")
    mu = V.real("mu", mu, lo=0.0, lo_open=True)
    a, rho = curve.alphas, curve.rdp
    eps_hat = poisson_eps_hat(a)
    d_hat = delta_at(curve, eps_hat)
    tail = math.log(mu) / (a - 1.0)
    out = rho + mu * d_hat + tail
    out = _round_up(out, np.abs(rho) + mu * d_hat + np.abs(tail) + 1.0 * ULP)
    out = np.where(np.isfinite(rho), np.maximum(out, 0.0), np.inf)
    # the error of the bound (the curve's values are upper bounds already, so this is no soundness
    # margin): δ̂ moves by at most a factor e^{(α-1)·err} <= 1 + (α_max - 1)·err_max·e^{...}; bounded
    # by δ̂ (α_max - 1) err_max where that is below 1, else by δ̂
    err_max = float(np.max(curve.abs_errors[np.isfinite(curve.abs_errors)], initial=0.0))
    d_err = d_hat * min(1.0, (float(np.max(a)) - 1.0) * err_max * math.e)
    errs = curve.abs_errors + mu * d_err + 16.0 * ULP * out
    if monotone:
        out, errs = _monotone(out, errs)
    theorem = f"{THEOREM_POISSON}, mean {mu:g}, over [{curve.theorem}]"
    return _make(a, out, errs, theorem, curve.method)


def fixed_selection_curve(curve: RdpCurve, count: int) -> RdpCurve:
    """``count`` runs compose (Mironov 2017 Prop 1); the selected run is post-processing."""
    count = V.integer("count", count, lo=1)
    scaled = curve.scaled(count)
    return _make(
        scaled.alphas,
        scaled.rdp,
        scaled.abs_errors,
        f"{THEOREM_FIXED}, {count} runs, over [{curve.theorem}]",
        scaled.method,
    )


def selection_curve(curve: RdpCurve, runs: RunCount, monotone: bool = True) -> RdpCurve:
    """The RDP curve of the whole procedure (best of K runs) for the number of runs ``runs`` (``monotone``:
    each order's bound is the minimum of the theorem's bound over the larger orders)."""
    if runs.kind == "fixed":
        return fixed_selection_curve(curve, runs.count)
    if runs.kind == "poisson":
        return poisson_selection_curve(curve, runs.mu, monotone)
    return tnb_selection_curve(curve, runs.eta, runs.gamma, monotone)


def pure_selection_epsilon(epsilon: float, runs: RunCount) -> float | None:
    """Pure ε-DP of the whole procedure when each run is ε-DP, or None where no pure bound is
    claimed (Poisson K). Truncated negative binomial: (2+η)ε (Liu & Talwar 2019: 3ε for the
    geometric η = 1; Papernot & Steinke 2022 Thm 2 in the limit λ, λ̂ → ∞); fixed k: kε."""
    eps = V.real("epsilon", epsilon, lo=0.0)
    if runs.kind == "fixed":
        return eps * runs.count * (1 + 4 * ULP)
    if runs.kind == "poisson":
        return None
    return (2.0 + runs.eta) * eps * (1 + 4 * ULP)


@dataclass(frozen=True, eq=False)
class SelectionResult:
    """The certified guarantee of a tuning procedure.

    Attributes:
        epsilon: the certified ε (minimum over the valid bounds) at ``delta``.
        delta: δ.
        theorem: the bound that attained the minimum.
        bounds: every bound evaluated: (theorem, ε).
        curve: the procedure's RDP curve (None when the runs have no RDP curve).
        best_alpha: the order attaining the RDP → DP conversion (None for a pure or privacy-profile bound).
        accountant: which bound gave ``epsilon``: "rdp" (Papernot & Steinke 2022 with the conversion),
            "profile" (the privacy-profile bound, :mod:`dpspec.accounting.selection_profile`) or "pure".
        by_accountant: the ε of each bound evaluated, by accountant.
    """

    epsilon: float
    delta: float
    theorem: str
    bounds: tuple[tuple[str, float], ...]
    curve: RdpCurve | None
    best_alpha: float | None
    accountant: str = "rdp"
    by_accountant: tuple[tuple[str, float], ...] = ()


def selection_dp(
    run_curve: RdpCurve | None,
    runs: RunCount,
    delta: float,
    *,
    pure_epsilon: float | None = None,
    conversion: str = "balle2020",
    profile=None,
    try_epsilons: Sequence[float] = (),
) -> SelectionResult:
    """(ε, δ) of best-of-K runs: the minimum of the RDP bound (converted with ``conversion``), when every run
    is ``pure_epsilon``-DP the pure bound, and, for a random number of runs, when one run's privacy profile
    ``profile`` (:class:`dpspec.accounting.selection_profile.Profile`) is given, the privacy-profile bound
    (``try_epsilons``: values it also tries, e.g. a target, so that a target the bound meets is never missed by
    the bisection's tolerance). ``run_curve`` is one run's certified curve (the candidates' envelope)."""
    d = V.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    V.choice("conversion", conversion, tuple(CONVERSIONS))
    bounds: list[tuple[str, float, RdpCurve | None, float | None, str]] = []
    if run_curve is not None and d > 0.0:
        sel = selection_curve(run_curve, runs)
        eps, best, _ = convert(sel.alphas, sel.rdp, d, conversion)
        bounds.append((f"{sel.theorem.split(', over')[0]}; {CONVERSIONS[conversion]}", eps, sel, best, "rdp"))
    if profile is not None and d > 0.0 and runs.kind != "fixed":
        r = profile.selection_epsilon(runs, d, try_epsilons=try_epsilons)
        if math.isfinite(r.epsilon):
            bounds.append((r.theorem, r.epsilon, None, None, "profile"))
    if pure_epsilon is not None:
        pe = pure_selection_epsilon(pure_epsilon, runs)
        if pe is not None:
            theorem = THEOREM_PURE_FIXED if runs.kind == "fixed" else THEOREM_PURE_TNB
            bounds.append((theorem, pe, None, None, "pure"))
    if not bounds:
        raise ValueError("no valid selection bound: give an RDP curve with delta > 0, or a pure epsilon")
    best_bound = min(bounds, key=lambda b: b[1])
    curve = next((b[2] for b in bounds if b[2] is not None), None)
    return SelectionResult(
        epsilon=float(best_bound[1]),
        delta=d,
        theorem=best_bound[0],
        bounds=tuple((b[0], float(b[1])) for b in bounds),
        curve=curve,
        best_alpha=best_bound[3],
        accountant=best_bound[4],
        by_accountant=tuple((b[4], float(b[1])) for b in bounds),
    )


def calibrate_selection(
    run_curve_of: Callable[[float], RdpCurve],
    runs: RunCount,
    epsilon: float,
    delta: float,
    *,
    lo: float = 0.3,
    hi: float = 64.0,
    rel_tol: float = 1e-4,
) -> tuple[float, SelectionResult]:
    """The smallest noise multiplier z (to ``rel_tol``) in [lo, hi] whose procedure meets
    (``epsilon``, ``delta``): bisection on z, assuming ε is non-increasing in z (more noise per run).
    The returned z is the upper end of the final bracket, whose result is *evaluated* (never
    interpolated), so the returned result certifies z. Raises ValueError when even ``hi`` fails."""
    target = V.real("epsilon", epsilon, lo=0.0, lo_open=True)

    def ok(z: float) -> SelectionResult | None:
        res = selection_dp(run_curve_of(z), runs, delta)
        return res if res.epsilon <= target else None

    top = ok(hi)
    if top is None:
        raise ValueError(f"no noise multiplier up to {hi:g} meets epsilon = {target:g} for the whole procedure")
    if (bottom := ok(lo)) is not None:
        return lo, bottom
    best_z, best_res = hi, top
    a, b = lo, hi
    while (b - a) > rel_tol * b:
        m = math.sqrt(a * b)
        r = ok(m)
        if r is None:
            a = m
        else:
            b, best_z, best_res = m, m, r
    return best_z, best_res
