"""Floating-point-safe Gaussian noise: the discrete Gaussian on a dyadic grid (secure mode).

Why
---
``GaussianRelease.release`` adds ``numpy.random.Generator.normal`` (PCG64 + ziggurat, float64) to
the answer. The output ``fl(a + n)`` of such a sampler is a float whose set of reachable values
depends on ``a``: low-order bits reveal information about the answer (Mironov 2012, "On
significance of the least significant bits for differential privacy", for the Laplace mechanism;
the same porosity affects Gaussian samplers — Opacus #616, diffprivlib #94, and Jin et al. 2022
for timing). PCG64 is also not a cryptographic generator. The continuous-noise certificate
therefore lists exact real-valued sampling as an assumption.

What this module does
---------------------
``y = g · (round(a / g) + Z)`` per coordinate, with g = 2^-k a power-of-two grid step and Z drawn
from the discrete Gaussian N_ℤ(0, s²) by the exact rejection sampler of Canonne, Kamath & Steinke
(2020, "The Discrete Gaussian for Differential Privacy", Algs. 1–3): rational arithmetic only
(``fractions.Fraction``), randomness only from ``secrets.randbelow`` (the OS CSPRNG). Every output
is an exact multiple of g (a dyadic rational, representable in float64), and the set of possible
outputs is g·ℤ for every input: there are no input-dependent low-order bits to read.

Privacy accounting consequence
------------------------------
Rounding the answer to the grid moves it by ≤ g/2 per coordinate, so the grid-unit query
round(a/g) ∈ ℤ^d has ℓ2 sensitivity Δ_Z ≤ Δ/g + √d (d = 1: ⌊Δ/g⌋ + 1). The grid-unit scale s is
chosen so that Δ_Z / s ≤ (1 − η)·Δ/σ = (1 − η)·μ with a margin η = 10⁻³, and s ≥ 2²⁰ grid units.

* RDP / concentrated DP: the discrete Gaussian with integer shift Δ_Z satisfies
  ½(Δ_Z/s)²-zCDP (CKS20 Thm 4), i.e. the same curve ε(α) = α μ_Z²/2 ≤ α μ²/2 as the continuous
  mechanism the certificate describes, for d = 1. For d > 1, CKS20's multivariate analysis gives
  the same bound up to an additive slack that decays like exp(−π² s²) — below 10⁻³⁰⁰ at s ≥ 2²⁰,
  i.e. zero in any floating-point ε.
* (ε, δ), d = 1: CKS20 Thm 7 gives the exact privacy profile of the discrete Gaussian,
  δ_Z(ε) = P[Z > εs²/Δ_Z − Δ_Z/2] − e^ε P[Z > εs²/Δ_Z + Δ_Z/2]. :func:`discrete_gaussian_delta`
  encloses the two tails (Euler–Maclaurin with its remainder bound near the centre, Hermite–Hadamard
  convexity bounds in the tail, Poisson summation for the normaliser; float64 with a relative margin
  of 1e-12, checked against mpmath at 40 digits in the tests), and :class:`SecureGaussian` verifies on an adaptive
  grid ε₀ = 0 < ε₁ < … that δ_Z(ε_i) ≤ δ_cont(ε_{i+1}; μ) — by monotonicity of both profiles this
  gives **δ_Z(ε) ≤ δ_cont(ε; μ) for every ε ≥ 0** down to δ = 10⁻³⁰: every (ε, δ) pair the
  certificate states for the continuous release (analytic Gaussian, Balle & Wang 2018 Thm 8) holds
  for the secure release. Construction fails loudly if the check does not pass.
* (ε, δ), d > 1: the exact profile of a weighted sum of discrete Gaussians has no closed form; the
  secure release satisfies the certificate's RDP curve, and :meth:`SecureGaussian.epsilon` gives
  its (ε, δ) by the RDP conversion (Balle et al. 2020 Thm 21), which is looser than the analytic
  Gaussian ε the certificate states for continuous noise.

Cost: a few hundred microseconds per coordinate (exact big-integer arithmetic). Timing: the
sampler's running time depends on its random draws, not on the answer (the answer only enters
through one exact addition), but it is not constant-time; see docs/threat-model.md.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np

__all__ = [
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_tail",
    "discrete_gaussian_delta",
    "SecureGaussian",
    "secure_gaussian",
    "MIN_GRID_SIGMA",
    "MARGIN",
]

RandBelow = Callable[[int], int]  # uniform integer in [0, n); secrets.randbelow unless testing

MIN_GRID_SIGMA = 2**20  # noise scale in grid units: the grid is ≥ a million times finer than σ
MARGIN = Fraction(1, 1000)  # μ_Z ≤ (1 − η) μ
DELTA_FLOOR = 1e-30  # the (ε, δ) dominance is verified for every δ ≥ this


def _rb(randbelow: RandBelow | None) -> RandBelow:
    return secrets.randbelow if randbelow is None else randbelow


def bernoulli(p: Fraction, randbelow: RandBelow | None = None) -> bool:
    """Exact Bernoulli(p) for a rational p ∈ [0, 1]."""
    p = Fraction(p)
    if not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got {p}")
    return _rb(randbelow)(p.denominator) < p.numerator


def bernoulli_exp(gamma: Fraction, randbelow: RandBelow | None = None) -> bool:
    """Exact Bernoulli(exp(−γ)) for a rational γ ≥ 0 (CKS20 Alg. 1)."""
    gamma = Fraction(gamma)
    if gamma < 0:
        raise ValueError(f"gamma must be ≥ 0, got {gamma}")
    rb = _rb(randbelow)
    while gamma > 1:  # exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋))
        if not bernoulli_exp(Fraction(1), rb):
            return False
        gamma -= 1
    k = 1
    while bernoulli(gamma / k, rb):
        k += 1
    return k % 2 == 1


def discrete_laplace(t: int, randbelow: RandBelow | None = None) -> int:
    """Exact discrete Laplace: P(x) ∝ exp(−|x|/t) on ℤ, integer t ≥ 1 (CKS20 Alg. 2, s = 1)."""
    t = int(t)
    if t < 1:
        raise ValueError(f"t must be a positive integer, got {t}")
    rb = _rb(randbelow)
    while True:
        u = rb(t)
        if not bernoulli_exp(Fraction(u, t), rb):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rb):
            v += 1
        x = u + t * v
        negative = rb(2) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


def discrete_gaussian(sigma2: Fraction, randbelow: RandBelow | None = None) -> int:
    """Exact N_ℤ(0, σ²): P(x) ∝ exp(−x²/(2σ²)) on ℤ, rational σ² > 0 (CKS20 Alg. 3)."""
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"sigma2 must be > 0, got {sigma2}")
    rb = _rb(randbelow)
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1  # ⌊σ⌋ + 1
    c = sigma2 / t
    while True:
        y = discrete_laplace(t, rb)
        if bernoulli_exp((abs(y) - c) ** 2 / (2 * sigma2), rb):
            return y


def discrete_gaussian_pmf(x: int, sigma2: float, terms: int | None = None) -> float:
    """P(Y = x) for Y ~ N_ℤ(0, σ²) (float; for tests)."""
    s = math.sqrt(sigma2)
    k = int(terms or (40 * s + 40))
    norm = math.fsum(math.exp(-j * j / (2 * sigma2)) for j in range(-k, k + 1))
    return math.exp(-x * x / (2 * sigma2)) / norm


# --- rigorous tails and the privacy profile (CKS20 Thm 7) ------------------------------------------


def discrete_gaussian_tail(m: int, s, dps: int = 40) -> tuple:
    """Enclosure [lo, hi] of P[Y ≥ m] for Y ~ N_ℤ(0, s²), integer m (mpmath numbers).

    With f(x) = exp(−x²/2s²) and T = Σ_{k≥m} f(k):
    * m − ½ ≥ s (f convex there; Hermite–Hadamard on each unit cell):
      ∫_m^∞ f + f(m)/2 ≤ T ≤ ∫_{m−½}^∞ f — relative width ~(m/s²)², negligible in the far tail;
    * otherwise Euler–Maclaurin: T = ∫_m^∞ f + f(m)/2 − f′(m)/12 + R, |R| ≤ (1/12)∫|f″| ≤ e^{−½}/(6s)
      (absolute error ~1/s², negligible where the tail is ≥ Φ̄(1)).
    The normaliser Σ_ℤ f = √(2π)s·(1 + 2Σ_j e^{−2π²s²j²}) ∈ √(2π)s·[1, 1 + 3e^{−2π²s²}] (Poisson
    summation). For m ≤ 0 the symmetric complement is used."""
    import mpmath as mp

    with mp.workdps(dps):
        s = mp.mpf(s)
        if m <= 0:
            lo, hi = discrete_gaussian_tail(1 - m, s, dps)  # P[Y ≥ m] = 1 − P[Y ≥ 1 − m]
            return 1 - hi, 1 - lo
        z_lo = mp.sqrt(2 * mp.pi) * s
        z_hi = z_lo * (1 + 3 * mp.exp(-2 * mp.pi**2 * s * s))

        def integral(a):
            return s * mp.sqrt(2 * mp.pi) * mp.erfc(a / (s * mp.sqrt(2))) / 2

        mm = mp.mpf(m)
        f = mp.exp(-mm * mm / (2 * s * s))
        if mm - mp.mpf(0.5) >= s:
            t_lo, t_hi = integral(mm) + f / 2, integral(mm - mp.mpf(0.5))
        else:
            fp = -mm / (s * s) * f
            core = integral(mm) + f / 2 - fp / 12
            err = mp.exp(mp.mpf(-0.5)) / (6 * s)
            t_lo, t_hi = core - err, core + err
        return max(mp.mpf(0), t_lo / z_hi), min(mp.mpf(1), t_hi / z_lo)


_REL = 1e-12  # relative safety margin of the float64 evaluation (erfc/exp are accurate to a few ulps)


def _tail_float(m: int, s: float) -> tuple[float, float]:
    """The enclosure of :func:`discrete_gaussian_tail` in float64, widened by a relative 1e-12."""
    from scipy.special import erfc

    if m <= 0:
        lo, hi = _tail_float(1 - m, s)
        return 1.0 - hi, 1.0 - lo
    r2 = math.sqrt(2.0)
    z_norm = math.sqrt(2 * math.pi) * s
    f = math.exp(-m * m / (2 * s * s))
    if m - 0.5 >= s:
        lo = (0.5 * erfc(m / (s * r2)) + f / (2 * z_norm)) / (1 + 3 * math.exp(-2 * math.pi**2 * s * s))
        hi = 0.5 * erfc((m - 0.5) / (s * r2))
    else:
        fp = -m / (s * s) * f
        core = 0.5 * erfc(m / (s * r2)) + f / (2 * z_norm) - fp / (12 * z_norm)
        err = math.exp(-0.5) / (6 * s * z_norm)
        lo = (core - err) / (1 + 3 * math.exp(-2 * math.pi**2 * s * s))
        hi = core + err
    return max(0.0, lo * (1 - _REL)), min(1.0, hi * (1 + _REL))


def discrete_gaussian_delta(epsilon: float, s, sensitivity: int, *, exact: bool = False) -> float:
    """Upper bound on δ(ε) of ℤ-valued queries with sensitivity Δ (integer) plus N_ℤ(0, s²) noise:
    P[Y > εs²/Δ − Δ/2] − e^ε P[Y > εs²/Δ + Δ/2] (CKS20 Thm 7), with the tails enclosed as in
    :func:`discrete_gaussian_tail` — in float64 with a relative margin of 1e-12 (default), or with
    mpmath at 40 digits (``exact=True``, slower; used by the tests to check the float path)."""
    d = int(sensitivity)
    if d < 1:
        raise ValueError("sensitivity must be a positive integer")
    if exact:
        import mpmath as mp

        with mp.workdps(40):
            sm, e = mp.mpf(s), mp.mpf(epsilon)
            a = e * sm * sm / d - mp.mpf(d) / 2
            b = e * sm * sm / d + mp.mpf(d) / 2
            hi_a = discrete_gaussian_tail(int(mp.floor(a)) + 1, sm)[1]
            lo_b = discrete_gaussian_tail(int(mp.floor(b)) + 1, sm)[0]
            return float(max(hi_a - mp.exp(e) * lo_b, mp.mpf(0)) * (1 + mp.mpf(10) ** -12))
    s = float(s)
    a = epsilon * s * s / d - d / 2
    b = epsilon * s * s / d + d / 2
    hi_a = _tail_float(math.floor(a) + 1, s)[1]
    lo_b = _tail_float(math.floor(b) + 1, s)[0]
    val = hi_a - math.exp(epsilon) * lo_b
    # absolute allowance for the rounding of the difference itself
    return max(0.0, val + 4e-16 * (hi_a + math.exp(epsilon) * lo_b))


def _delta_cont_lower(eps: float, mu: float) -> float:
    from dpspec.accounting.analytic_gaussian import delta_of_epsilon

    return delta_of_epsilon(eps, mu) * (1 - 1e-9)  # float evaluation error ~1e-15 relative, rounded down


def _grid_sigma(s2: Fraction) -> float:
    """s = √(s²) as a float rounded down (a smaller s only enlarges the δ bound: conservative)."""
    return math.sqrt(float(s2)) * (1 - 1e-15)


def _verify_dominance(s2: Fraction, dz: int, mu: float) -> int:
    """Check δ_Z(ε_i) ≤ δ_cont(ε_{i+1}; μ) on an adaptive grid from ε = 0 until δ_cont < DELTA_FLOOR.
    Returns the number of grid points; raises ArithmeticError if the check fails."""
    sf = _grid_sigma(s2)
    eps, h, count = 0.0, 1e-3, 0
    while True:
        dz_now = discrete_gaussian_delta(eps, sf, dz)
        if dz_now < DELTA_FLOOR * 1e-3:
            return count
        if _delta_cont_lower(eps, mu) < DELTA_FLOOR:
            return count
        h = min(h * 2.0, 0.5)
        while dz_now > _delta_cont_lower(eps + h, mu):
            h /= 2.0
            if h < 1e-9:
                raise ArithmeticError(f"discrete Gaussian profile not dominated by the continuous one at ε = {eps:g}")
        eps += h
        count += 1


@dataclass(frozen=True)
class SecureGaussian:
    """The secure-mode noise for a release with noise σ, ℓ2 sensitivity Δ and dimension d.

    ``k``: the grid is g = 2^-k; ``sigma2_grid``: s² in grid units (exact rational);
    ``sensitivity_grid``: the ℓ2 sensitivity of round(a/g) in grid units (d = 1: an integer)."""

    sigma: float
    sensitivity: float
    dimension: int
    k: int
    sigma2_grid: Fraction
    sensitivity_grid: float
    verified_points: int = field(default=0, compare=False)

    @property
    def granularity(self) -> float:
        return math.ldexp(1.0, -self.k)

    @property
    def mu(self) -> float:
        """Δ_Z / s: the grid-unit μ (≤ (1 − η) Δ/σ)."""
        return self.sensitivity_grid / math.sqrt(float(self.sigma2_grid))

    def rdp(self, alpha: float) -> float:
        """ε(α) = α μ_Z² / 2 (CKS20 Thm 4; d > 1 up to the exp(−π²s²) slack, zero in floats)."""
        return alpha * self.mu**2 / 2

    def delta(self, epsilon: float) -> float:
        """δ(ε): d = 1 by CKS20 Thm 7 (rigorous enclosure); d > 1 by the RDP conversion."""
        if self.dimension == 1:
            return discrete_gaussian_delta(epsilon, _grid_sigma(self.sigma2_grid), int(self.sensitivity_grid))
        from dpspec.accounting import DEFAULT_ALPHAS

        a = np.asarray(DEFAULT_ALPHAS, float)
        r = a * self.mu**2 / 2
        # Canonne–Kamath–Steinke 2020 Prop. 12 / Balle et al. 2020: δ = min over α of the conversion
        with np.errstate(over="ignore"):
            vals = np.exp((a - 1) * (r - epsilon)) / a * (1 - 1 / a) ** (a - 1)
        return float(min(1.0, np.min(vals)))

    def epsilon(self, delta: float) -> float:
        """ε at δ for the secure release (d = 1: Thm 7 by bisection; d > 1: RDP conversion)."""
        if self.dimension > 1:
            from dpspec import accounting as acc

            a = np.asarray(acc.DEFAULT_ALPHAS, float)
            return float(acc.rdp_to_dp(a, a * self.mu**2 / 2, delta)[0])
        lo, hi = 0.0, 1.0
        while self.delta(hi) > delta:
            lo, hi = hi, hi * 2
        for _ in range(60):
            mid = (lo + hi) / 2
            if self.delta(mid) > delta:
                lo = mid
            else:
                hi = mid
        return hi

    def sample_noise(self, size: int, randbelow: RandBelow | None = None) -> list[int]:
        return [discrete_gaussian(self.sigma2_grid, randbelow) for _ in range(size)]

    def release(self, answer, randbelow: RandBelow | None = None):
        """g·(round(a/g) + Z) per coordinate; exact dyadic outputs. ``randbelow`` is for tests only
        (default: ``secrets.randbelow``)."""
        a = np.asarray(answer, dtype=float)
        if not np.all(np.isfinite(a)):
            raise ValueError("the query answer contains NaN or infinite values; refusing to release it")
        flat = a.reshape(-1)
        out = np.empty(flat.shape, dtype=float)
        scale = 1 << self.k if self.k >= 0 else None
        limit = 2**53
        for i, x in enumerate(flat):
            q = Fraction(float(x)) * scale if scale is not None else Fraction(float(x)) / (1 << -self.k)
            n = round(q) + discrete_gaussian(self.sigma2_grid, randbelow)
            if abs(n) >= limit:
                raise ValueError(f"the answer {x!r} is too large for an exact grid of step 2^-{self.k} in float64")
            out[i] = math.ldexp(float(n), -self.k)
        shaped = out.reshape(a.shape)
        return float(shaped) if shaped.ndim == 0 else shaped


@lru_cache(maxsize=64)
def secure_gaussian(sigma: float, sensitivity: float, dimension: int = 1, *, verify: bool = True) -> SecureGaussian:
    """Plan the secure noise for (σ, Δ, d): grid g = 2^-k with σ/g ≥ 2²⁰, s = (Δ_Z/Δ)·σ/g/(1 − η)
    rounded up to a dyadic rational, and (d = 1, ``verify``) the check δ_Z(ε) ≤ δ_cont(ε; Δ/σ) for
    every ε down to δ = 10⁻³⁰ (see the module docstring)."""
    sigma, sensitivity, d = float(sigma), float(sensitivity), int(dimension)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be finite and > 0, got {sigma}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be finite and > 0, got {sensitivity}")
    if d < 1:
        raise ValueError(f"dimension must be ≥ 1, got {d}")
    k = math.ceil(math.log2(MIN_GRID_SIGMA / sigma))
    g = Fraction(2) ** -k
    dg = Fraction(sensitivity) / g
    if d == 1:
        dz = float(math.floor(dg) + 1)
    else:
        dz = float(dg) + math.sqrt(d)
    # s ≥ Δ_Z / ((1 − η) μ) = Δ_Z σ / ((1 − η) Δ); as a dyadic rational with 16 fractional bits, rounded up
    s_min = Fraction(dz) * Fraction(sigma) / ((1 - MARGIN) * Fraction(sensitivity))
    s2 = s_min * s_min
    s2 = Fraction(math.ceil(s2 * 2**16), 2**16)
    plan = SecureGaussian(sigma, sensitivity, d, k, s2, dz)
    assert plan.mu <= sensitivity / sigma
    if d == 1 and verify:
        n = _verify_dominance(s2, int(dz), sensitivity / sigma)
        plan = SecureGaussian(sigma, sensitivity, d, k, s2, dz, n)
    return plan
