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
  profile is CKS20 Thm 7, and a single release's (ε, δ) points are those of μ-GDP where δ_Z(ε) ≤
  δ_{G_μ}(ε) is checked on a grid (``dpspec.mechanisms.secure_noise``: proved wherever δ_{G_μ}(ε) ≥
  ``DG_PROFILE_FLOOR``); it is exactly Δ²/(2σ²)-zCDP (CKS20 Thm 4). In compositions it enters by its own
  exact pair (``dpspec.accounting._pld_discrete_gaussian``) and by zCDP, never as μ-GDP.

Composition (``compose … split``): the basic bound adds the pure parts' ε (Dwork & Roth 2014, Thm 3.16),
composes the Gaussian parts to √(Σ μ_i²)-GDP (Dong, Roth & Su 2022, Cor. 3.3) — or, with discrete Gaussian
parts, all of them in zCDP (ρ = Σ μ_i²/2 + Σ Δ_j²/(2σ_j²): Bun & Steinke 2016 Lemma 2.3; CKS20 Thm 4) converted
to (ε, δ) (CKS20 Prop. 12 = Balle et al. 2020 Thm 21) — and composes that with the pure ε by Thm 3.16. Every
ε returned is rounded up. A second, usually tighter bound composes every part's dominating pair by PLD
(``pld_pairs``, ``pld_compose``; Zhu, Dong & Wang 2022 Thm 10), partition selections included by the
four-output pair of an (ε, δ)-DP mechanism; the composition certifies the smaller (PROOF.md §3.5).

Accuracy: each release's 95 % bound is the smallest a with P(|noise| > a) ≤ 0.05 for one coordinate
(OpenDP's ``summarize(alpha = 0.05)`` reports the same quantity): Laplace b·ln(20); discrete Laplace
the least integer k with P(|X| > k) = 2r^{k+1}/(1 + r) ≤ 0.05 (r = e^{−1/t}); Gaussian
σ·Φ⁻¹(0.975); discrete Gaussian the least integer k with P(|X| > k) ≤ 0.05 (the tail enclosure of
``secure_noise``, upper end).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
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


#: the discrete Gaussian's μ-GDP profile check (``secure_noise._verify_dominance``) stops where the Gaussian
#: profile is below 1e-30 (up to its 1e-9 round-down): a single release's (ε, δ) points read off μ-GDP are
#: proved for δ at least this; below it the release's ε is its zCDP bound (``discrete_gaussian_epsilon``)
DG_PROFILE_FLOOR = 1e-29

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


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε at δ of ρ-zCDP (the RDP curve α ρ for every α > 1; Bun & Steinke 2016 Def. 1.1) by the conversion
    ε = α ρ + log((α − 1)/α) − (log δ + log α)/(α − 1), valid at every α > 1 (Canonne, Kamath & Steinke
    2020 Prop. 12; Balle et al. 2020 Thm 21), minimised over a fine grid of α around its optimum 1 + √(log(1/δ)/ρ)
    (``dpspec.accounting.conversion``; rounded up)."""
    from dpspec.accounting.conversion import convert

    if rho <= 0:
        return 0.0
    a0 = 1.0 + math.sqrt(math.log(1.0 / delta) / rho)
    alphas = np.unique(np.concatenate([1.0 + (a0 - 1.0) * np.exp(np.linspace(-3.0, 3.0, 1201)), [a0]]))
    alphas = alphas[alphas > 1.0]
    eps, _, _ = convert(alphas, alphas * rho * (1 + 1e-15), delta)
    return math.nextafter(eps, math.inf)


def discrete_gaussian_rho(sigma: float, sensitivity: float) -> float:
    """ρ = Δ²/(2σ²): the discrete Gaussian with integer shift Δ is ρ-zCDP (CKS20 Thm 4), rounded up."""
    return math.nextafter(float(sensitivity) ** 2 / (2.0 * float(sigma) ** 2) * (1 + 4e-16), math.inf)


def discrete_gaussian_epsilon(sigma: float, sensitivity: int, mu: float, delta: float) -> float:
    """Certified ε at δ of one discrete Gaussian release: the μ-GDP ε(δ) where its profile check proves it
    (δ ≥ ``DG_PROFILE_FLOOR``), else its zCDP bound."""
    if delta >= DG_PROFILE_FLOOR:
        return gdp_epsilon(mu, delta)
    return zcdp_epsilon(discrete_gaussian_rho(sigma, sensitivity), delta)


def pld_pairs(
    noise: str,
    scale: float,
    sensitivity: float,
    count_scale=None,
    count_sensitivity=None,
    pure_eps=0.0,
    approx_delta=0.0,
):
    """The dominating pairs (kind, parameter, shift) of one release for PLD composition: the Laplace pair
    (Lap(0, b), Lap(Δ, b)), the discrete Laplace pair with integer Δ, randomized response with ε (the
    discrete Laplace pair with Δ = 1, t ≤ 1/ε) for the exponential mechanism (any ε-DP mechanism: Kairouz, Oh
    & Viswanath 2015, Thm 2.4), the discrete Gaussian pair (N_ℤ(0, σ²), N_ℤ(Δ, σ²)) with integer Δ, and for a
    partition selection (an (ε, δ)-DP release, PROOF.md §3.3) the four-output pair ("approx_dp", ε, δ); a
    noisy-denominator mean adds its count's pair. Gaussian (continuous) parts have none here: they enter
    as one μ-GDP pair (``pld_compose``)."""
    if approx_delta > 0:
        return [("approx_dp", float(pure_eps), float(approx_delta))]
    if noise == "discrete_gaussian":
        out = [("discrete_gaussian", float(scale), float(sensitivity))]
        if count_scale is not None:
            out.append(("discrete_gaussian", float(count_scale), float(count_sensitivity or 1.0)))
        return out
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


def pld_steps(pairs: list[tuple[str, float, float]], mus: list[float]) -> tuple:
    """The PLD steps of ``pld_compose``: each pair once (kind, parameter, shift as in ``pld_pairs``; the
    "approx_dp" pair carries ε and δ) and the μ-GDP parts as one Gaussian pair with μ = √Σμ_i²."""
    from dpspec.accounting.pld import PldStep

    steps = [PldStep(kind, b, 1, 1.0, sens, 1) for kind, b, sens in pairs]
    if mus:
        mu = math.sqrt(math.fsum(m * m for m in mus)) * (1 + 1e-15)
        steps.append(PldStep("gaussian", 1.0, 1, 1.0, mu, 1))
    return tuple(steps)


def pld_compose(pairs: list[tuple[str, float, float]], mus: list[float], delta: float) -> float:
    """Certified ε at δ of the pairs and the μ-GDP parts (one Gaussian pair with μ = √Σμ_i², Dong, Roth
    & Su 2022 Cor. 3.3) composed adaptively by PLD accounting: dominating pairs compose (Zhu, Dong & Wang
    2022 Thm 10); each pair is discretised pessimistically (losses rounded up for the Laplace, discrete
    Gaussian and (ε, δ) pairs, connect-the-dots for the Gaussian one; the discrete Gaussian's truncated
    outputs and the (ε, δ) pairs' δ on the loss +∞) and the FFT, window and float errors are added to δ
    (``dpspec.accounting.pld``). inf where the accountant cannot certify."""
    from dpspec.accounting.pld import Pld

    steps = pld_steps(pairs, mus)
    if not steps or not delta > 0:
        return math.inf
    try:
        return float(Pld(steps=steps, relation="add_remove").epsilon(delta).epsilon)
    except (ArithmeticError, ValueError, RuntimeError):
        return math.inf


def pld_truncations(pairs: list[tuple[str, float, float]], mus: list[float], delta: float) -> list[tuple]:
    """(σ, K, B) of each discrete Gaussian pair as ``pld_compose`` truncates it at δ: the kept support
    −K..K and the bound B ≥ P(Y ≤ −K − 1) put on the loss +∞ (``_pld_discrete_gaussian``)."""
    from dpspec.accounting._pld_discrete_gaussian import tail_upper, truncation
    from dpspec.accounting.pld import Pld

    steps = pld_steps(pairs, mus)
    if not steps or not delta > 0:
        return []
    tail = Pld(steps=steps, relation="add_remove").truncation_tail(delta)
    out = []
    for kind, s, _ in pairs:
        if kind == "discrete_gaussian":
            k = truncation(s, tail)
            out.append((s, k, float(tail_upper(k + 1, s))))
    return out


def compose(pure_eps: list[float], mus: list[float], delta: float, rhos: Sequence[float] = ()) -> float:
    """Certified ε at δ of pure ε_i-DP parts, μ_j-GDP parts and ρ_k-zCDP parts composed adaptively (module
    doc): without zCDP parts, Σ ε_i + ε_GDP(√Σμ_j², δ); with them, Σ ε_i + ε_zCDP(Σμ_j²/2 + Σρ_k, δ)."""
    total = math.fsum(pure_eps)
    if rhos:
        rho = math.fsum([*rhos, *(m * m / 2 for m in mus)]) * (1 + 1e-15)
        total += zcdp_epsilon(rho, delta)
    elif mus:
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
        if scale > 1e5:
            # Euler–Maclaurin on Σ_j |j| e^{−j²/(2σ²)} (the kink at 0 gives −1/12 per side) over Z = √(2π)σ(1 +
            # O(e^{−2π²σ²})): E|Y| = σ√(2/π) − 1/(6√(2π)σ) + O(σ⁻³); the sum below would hold 12σ terms
            return scale * math.sqrt(2 / math.pi) - 1 / (6 * math.sqrt(2 * math.pi) * scale)
        j = np.arange(0, int(scale * 12) + 11, dtype=float)
        w = np.exp(-j * j / (2 * scale * scale))
        z = w[0] + 2 * math.fsum(w[1:])
        return 2 * math.fsum(j[1:] * w[1:]) / z
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
