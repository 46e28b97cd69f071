"""Numbers of the statistics releases: noise scales, guarantees and accuracy (pure numerics).

Every query of this family changes by a *scalar* when one record is inserted or removed: a count or
a sum moves one coordinate (the record's group, when grouped over declared keys) by at most Δ; every
other coordinate is unchanged. Each release is therefore a one-dimensional additive-noise mechanism
with shift Δ, and its privacy is that of the pair (M(0), M(Δ)):

* ``laplace``: Lap(b), b = Δ/ε, is ε-DP (δ = 0) (Dwork, McSherry, Nissim & Smith 2006, Prop. 1;
  Dwork & Roth 2014, Thm 3.6). Rényi DP: Mironov 2017, Prop. 6. Floating point: numpy's inverse-CDF
  sampler is treated as exact real sampling (Mironov 2012 shows why this is an assumption).
* ``discrete_laplace``: P(x) ∝ exp(−|x|/t) on ℤ, t = Δ/ε, Δ an integer, is ε-DP on integer-valued
  queries (Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020, Def. 3 / Alg. 2 —
  the exact sampler).
* ``gaussian``: N(0, σ²) with μ = Δ/σ is exactly μ-GDP (Dong, Roth & Su 2022, Cor. 2.13; Balle & Wang
  2018, Thm 8 for δ(ε)).
* ``discrete_gaussian``: N_ℤ(0, σ²) on integer-valued queries with integer shift Δ: its exact privacy
  profile is CKS20 Thm 7; where δ_Z(ε) ≤ δ_{G_μ}(ε) for every ε ≥ 0 (checked on a grid by
  ``dpspec.mechanisms.secure_noise``), it is μ-GDP (Dong, Roth & Su 2022, Cor. 2.13: μ-GDP ⇔ the
  Gaussian privacy profile).

Composition (``compose … split``): the pure parts add (Dwork & Roth 2014, Thm 3.16), the μ-GDP parts
compose to √(Σ μ_i²)-GDP (Dong, Roth & Su 2022, Cor. 3.3), and a pure ε_P part composed with an (ε_G,
δ)-DP part is (ε_P + ε_G, δ)-DP (Dwork & Roth Thm 3.16 again). Every ε returned is rounded up. A second,
usually tighter bound composes the parts' dominating pairs by PLD (``pld_pairs``, ``pld_compose``; Zhu, Dong
& Wang 2022 Thm 10); the composition certifies the smaller (PROOF.md §3.5).

Accuracy: each release's 95 % bound is the smallest a with P(|noise| > a) ≤ 0.05 for one coordinate
(OpenDP's ``summarize(alpha = 0.05)`` reports the same quantity): Laplace b·ln(20); discrete Laplace
the least integer k with P(|X| > k) = 2r^{k+1}/(1 + r) ≤ 0.05 (r = e^{−1/t}); Gaussian
σ·Φ⁻¹(0.975); discrete Gaussian the least integer k with P(|X| > k) ≤ 0.05 (the tail enclosure of
``secure_noise``, upper end).
"""

from __future__ import annotations

import math

from scipy import special

from dpspec.accounting import analytic_gaussian as GR

#: the noises this family draws
NOISES = ("laplace", "discrete_laplace", "gaussian", "discrete_gaussian")
PURE = ("laplace", "discrete_laplace")
ALPHA = 0.05  # the accuracy level: a 95 % bound
#: relative round-up of a noise scale so that Δ/scale ≤ ε holds in floating point
_UP = 1 + 4e-16 * 8


def pure_scale(sensitivity: float, epsilon: float) -> float:
    """b = Δ/ε rounded up (then Δ/b ≤ ε in floating point)."""
    return math.nextafter(sensitivity / epsilon * _UP, math.inf)


def pure_epsilon(sensitivity: float, scale: float) -> float:
    """ε = Δ/b, rounded up."""
    return math.nextafter(sensitivity / scale, math.inf)


def laplace_rdp(alpha: float, eps: float) -> float:
    """Rényi DP of the Laplace mechanism with Δ/b = ε at order α > 1 (Mironov 2017, Prop. 6), in log
    space, rounded up; min'ed with the pure bound ε (any ε-DP mechanism)."""
    if alpha <= 1:
        return eps
    a = alpha
    t1 = math.log(a / (2 * a - 1)) + (a - 1) * eps
    t2 = math.log((a - 1) / (2 * a - 1)) - a * eps
    v = (max(t1, t2) + math.log1p(math.exp(min(t1, t2) - max(t1, t2)))) / (a - 1)
    return min(eps, v * (1 + 1e-12) + 1e-15)


def pure_rdp(alpha: float, eps: float) -> float:
    """Any ε-DP mechanism is (α, min(ε, α ε²/2))-RDP (Bun & Steinke 2016, Prop. 3.3: ε²/2-zCDP)."""
    return min(eps, alpha * eps * eps / 2)


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ of the analytic Gaussian mechanism for (ε, δ) (Balle & Wang 2018, Thm 8; rounded up)."""
    return GR.sigma_for_target(epsilon, delta, sensitivity)


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-GDP (Balle & Wang 2018, Thm 8; dpspec.accounting.analytic_gaussian, conservative)."""
    return GR.epsilon_of_delta(mu, delta)


#: relative margins tried, in order, between the discrete Gaussian's μ and Δ/σ (a small σ needs more: the
#: profile's tail enclosure is looser, and P(Y = 0) exceeds the continuous TV distance by ~1/(24σ²))
DG_MARGINS = (1e-3, 3e-3, 1e-2, 2e-2, 3e-2, 5e-2, 0.1, 0.2, 0.3)


def discrete_gaussian(sigma_cont: float, sensitivity: int) -> tuple[float, float]:
    """(σ, μ): the discrete Gaussian N_ℤ(0, σ²) for integer shift Δ certified μ-GDP with μ ≤ Δ/σ_cont (the
    continuous calibration), after checking δ_Z(ε) ≤ δ_{G_μ}(ε) on an adaptive ε grid (CKS20 Thm 7 with
    rigorous tail enclosures, ``secure_noise._verify_dominance``); the first margin of ``DG_MARGINS`` that
    verifies is used (σ = σ_cont (1 + 2m), μ = Δ/σ · (1 + m)). Raises ArithmeticError when none does."""
    from fractions import Fraction

    from dpspec.mechanisms.secure_noise import _verify_dominance

    for m in DG_MARGINS:
        sigma = sigma_cont * (1 + 2 * m)
        mu = sensitivity / sigma * (1 + m)
        try:
            _verify_dominance(Fraction(sigma * sigma), int(sensitivity), mu)
        except ArithmeticError:
            continue
        return sigma, mu
    raise ArithmeticError(f"the discrete Gaussian with σ ≈ {sigma_cont:.3g} could not be certified μ-GDP")


def pld_pairs(noise: str, scale: float, sensitivity: float, count_scale=None, count_sensitivity=None, pure_eps=0.0):
    """The dominating pairs (kind, scale, shift) of one release's pure noise for PLD composition: the Laplace
    pair (Lap(0, b), Lap(Δ, b)), the discrete Laplace pair with integer Δ, and randomized response with ε
    (the discrete Laplace pair with Δ = 1, t ≤ 1/ε) for the exponential mechanism (any ε-DP mechanism:
    Kairouz, Oh & Viswanath 2015, Thm 2.4); a noisy-denominator mean adds its count's pair."""
    if noise in PURE:
        out = [(noise, float(scale), float(sensitivity))]
        if count_scale is not None:
            out.append((noise, float(count_scale), float(count_sensitivity or 1.0)))
        if noise == "discrete_laplace" and not all(float(s).is_integer() for _, _, s in out):
            return [("discrete_laplace", 1.0 / math.nextafter(pure_eps, math.inf) * (1 - 1e-15), 1.0)]
        return out
    if pure_eps > 0:
        return [("discrete_laplace", 1.0 / math.nextafter(pure_eps, math.inf) * (1 - 1e-15), 1.0)]
    return []


def pld_compose(pairs: list[tuple[str, float, float]], mus: list[float], delta: float) -> float:
    """Certified ε at δ of the pure pairs and the μ-GDP parts (one Gaussian pair with μ = √Σμ_i², Dong, Roth
    & Su 2022 Cor. 3.3) composed adaptively by PLD accounting: dominating pairs compose (Zhu, Dong & Wang
    2022 Thm 10); each pair is discretised pessimistically (losses rounded up for the Laplace pairs,
    connect-the-dots for the Gaussian one) and the FFT, window and float errors are added to δ
    (``dpspec.accounting.pld``). inf where the accountant cannot certify."""
    from dpspec.accounting.pld import Pld, PldStep

    steps = [PldStep(kind, b, 1, 1.0, sens, 1) for kind, b, sens in pairs]
    if mus:
        mu = math.sqrt(math.fsum(m * m for m in mus)) * (1 + 1e-15)
        steps.append(PldStep("gaussian", 1.0, 1, 1.0, mu, 1))
    if not steps or not delta > 0:
        return math.inf
    try:
        return float(Pld(steps=tuple(steps), relation="add_remove").epsilon(delta).epsilon)
    except (ArithmeticError, ValueError, RuntimeError):
        return math.inf


def compose(pure_eps: list[float], mus: list[float], delta: float) -> float:
    """Certified ε at δ of pure ε_i-DP parts and μ_j-GDP parts composed adaptively (module doc)."""
    total = math.fsum(pure_eps)
    if mus:
        mu = math.sqrt(math.fsum(m * m for m in mus)) * (1 + 1e-15)
        total += gdp_epsilon(mu, delta)
    return math.nextafter(total, math.inf) if total > 0 else 0.0


# --- accuracy ---------------------------------------------------------------------------------------


def error_bound(noise: str, scale: float, alpha: float = ALPHA) -> float:
    """The smallest a with P(|noise| > a) ≤ alpha, one coordinate (module doc)."""
    if noise == "laplace":
        return scale * math.log(1 / alpha)
    if noise == "gaussian":
        return scale * float(special.ndtri(1 - alpha / 2))
    if noise == "discrete_laplace":
        r = math.exp(-1 / scale)
        # P(|X| > k) = 2 r^{k+1} / (1 + r) ≤ alpha  ⇔  k ≥ ln(alpha (1 + r) / 2) / ln r − 1
        k = max(0, math.ceil(math.log(alpha * (1 + r) / 2) / math.log(r) - 1 - 1e-12))
        while 2 * r ** (k + 1) / (1 + r) > alpha:
            k += 1
        return float(k)
    if noise == "discrete_gaussian":
        from dpspec.mechanisms.secure_noise import _tail_float

        k = max(0, math.floor(scale * float(special.ndtri(1 - alpha / 2))) - 2)
        while 2 * _tail_float(k + 1, scale)[1] > alpha:
            k += 1
        return float(k)
    raise ValueError(noise)


def expected_abs_error(noise: str, scale: float) -> float:
    """E|noise| for one coordinate."""
    if noise == "laplace":
        return scale
    if noise == "gaussian":
        return scale * math.sqrt(2 / math.pi)
    if noise == "discrete_laplace":
        r = math.exp(-1 / scale)
        return 2 * r / (1 - r * r)
    if noise == "discrete_gaussian":
        k = int(scale * 12) + 10
        w = [math.exp(-j * j / (2 * scale * scale)) for j in range(0, k + 1)]
        z = w[0] + 2 * math.fsum(w[1:])
        return 2 * math.fsum(j * w[j] for j in range(1, k + 1)) / z
    raise ValueError(noise)


def variance(noise: str, scale: float) -> float:
    """Var(noise) for one coordinate (the discrete Gaussian's is at most σ², CKS20 Prop. 19)."""
    if noise == "laplace":
        return 2 * scale * scale
    if noise == "gaussian":
        return scale * scale
    if noise == "discrete_laplace":
        r = math.exp(-1 / scale)
        return 2 * r / (1 - r) ** 2
    if noise == "discrete_gaussian":
        return scale * scale
    raise ValueError(noise)
