"""Gaussian Sliced Wasserstein Mechanism (SWM): noise calibration and certified ε(α) curves.

Source: T. Zhang, Y. Vorobeychik, "Sliced Rényi Pufferfish Privacy: Tractable Privatization
Mechanism and Private Learning with Gradient Clipping" (arXiv 2512.01115, 2025), cited below as
"ZV25". Equation and theorem numbers are the paper's; [D] marks results derived for dpspec (see
``dpspec/families/swm/PROOF.md``), each with its argument in the docstring.

This module is pure and self-contained (numpy/scipy only; no other ``dpspec.accounting`` module).
Inputs are the per-slice ∞-Wasserstein sensitivities Δ^{u_ℓ} (eq. 6) of a slice profile
(𝒰, ω) = ({u_ℓ}, {ω_ℓ}); computing them from samples is :mod:`dpspec.pufferfish`'s job.

Conventions
-----------
* ``deltas`` is either a vector (m,) of Δ^{u_ℓ} = max over (θ, pair) (the paper's eq. 6), or a
  matrix (M, m) with one row per instance (θ, s_i, s_j) holding z^{u_ℓ}_∞(θ, s_i, s_j) (Lemma 4.1).
  With a matrix, the maximum over instances is taken *outside* the slice aggregation
  ("per-instance" calibration, digest §4.1 [D]); this is never looser and is valid because the
  proofs of Thms 4.5/4.6/4.8 bound each (θ, pair) separately and the SRPP definitions
  (Defs 4.2/4.4) quantify over (θ, pair) outside the divergence.
* ``weights`` ω_ℓ ≥ 0 summing to 1.
* Flavours: ``"ave"`` (Thm 4.5), ``"joint"`` (Thm 4.6 closed form), ``"joint_exact"`` (the exact
  log-moment of eq. 11 for a finite profile, i.e. Thm 4.8 with finite ω; F11).
* ``monte_carlo=(gamma, delta0)`` switches to the PAC reading (ω continuous, the m directions are
  i.i.d. draws): Thm 4.7 for Ave, Thm 4.8 for both Joint flavours. Because a sampled maximum is
  not sup_{u∈supp ω}, the closed form of Thm 4.6 is not available there; every PAC calibration is
  additionally capped by the deterministic bound σ² = αΔ0²/(2ε) (Thm 4.5/4.6 with Δ^u ≤ Δ0), which
  holds with probability one and can be smaller than the PAC value.

Soundness notes [D]
-------------------
* Data-dependent σ in the PAC reading: Thms 4.7/4.8 apply Hoeffding's inequality at a fixed σ,
  but σ is then chosen from the same draws. The term √(log(4/γ)/(2m)) is also the two-sided DKW
  radius at level γ/2 for the law of W = (Δ^U)² ∈ [0, Δ0²]; on that event
  E g(W) ≤ Ê g(W) + (sup g − inf g)·√(log(4/γ)/(2m)) for *every* monotone g, in particular
  g(w) = w (Thm 4.7) and g(w) = exp(c w) for all c ≥ 0 (Thm 4.8) simultaneously. So the
  paper's constants remain valid for data-dependent σ and for the whole ε(α) curve at once.
  With a per-instance matrix the instances are different random variables and a union bound over
  the M rows is used: log(4M/γ).
* All bisections return the upper end of a bracket whose privacy condition was verified, and every
  returned σ² and ε is rounded up by 8 ulps, so the returned σ² satisfies the bound it certifies
  despite floating-point rounding of the closed forms.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from .concentration import dkw_radius  # re-exported: the DKW band of the sampled worlds (F14)
from .errors import SoundnessError, register_rules

__all__ = [
    "PAPER",
    "FLAVOURS",
    "RULES",
    "SoundnessError",
    "Assumption",
    "SWMCalibration",
    "gaussian_renyi_shift",
    "ave_srd",
    "joint_srd",
    "profile_aggregates",
    "hoeffding_radius",
    "dkw_radius",
    "swm_sigma2",
    "swm_epsilon",
    "swm_rdp_curve",
    "spp_epsilon",
    "swm_spp_epsilon",
    "gwm_sigma2",
    "compose_static_releases",
    "deltas_sha256",
    "calibrate_swm",
]

PAPER = "Zhang–Vorobeychik 2025"
FLAVOURS = ("ave", "joint", "joint_exact")

#: Rule catalogue for the soundness errors raised by the SWM / Pufferfish code.
RULES: dict[str, str] = {
    "DPS401": "plug-in W∞ on sampled (non-exhaustive) conditionals is not an upper bound on Δ^u",
    "DPS402": "the DKW sensitivity estimator needs declared support bounds of the query output",
    "DPS403": "Monte-Carlo slice profile (PAC reading) needs gamma and a bound Δ0 ≥ Δ^u for all u",
    "DPS404": "observed data or sensitivities contradict a declared support bound / Δ0",
    "DPS405": "static SWM releases do not compose additively",
    "DPS406": "an SRPP certificate does not imply RPP, DP or group DP",
    "DPS407": "Monte-Carlo (PAC) reading needs i.i.d. directions with uniform weights",
}


register_rules(RULES)


@dataclass(frozen=True)
class Assumption:
    """One assumption a certificate rests on, with where it comes from."""

    statement: str
    source: str  # e.g. "Zhang–Vorobeychik 2025, eq. (6)"

    def to_dict(self) -> dict:
        return {"statement": self.statement, "source": self.source}


# ----------------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------------


def _check_alpha(alpha: float) -> float:
    try:
        alpha = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"alpha must be a number > 1, got {alpha!r}") from None
    if not math.isfinite(alpha) or alpha <= 1.0:
        raise ValueError(f"alpha must be a finite number > 1, got {alpha!r}")
    return alpha


def _check_epsilon(epsilon: float) -> float:
    try:
        epsilon = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a number > 0, got {epsilon!r}") from None
    if not math.isfinite(epsilon) or epsilon <= 0.0:
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    return epsilon


def _check_sigma2(sigma2: float) -> float:
    sigma2 = float(sigma2)
    if not math.isfinite(sigma2) or sigma2 <= 0.0:
        raise ValueError(f"sigma2 must be a finite number > 0, got {sigma2!r}")
    return sigma2


def _check_flavour(flavour: str) -> str:
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
    return flavour


def _check_deltas_weights(deltas, weights) -> tuple[np.ndarray, np.ndarray]:
    d = np.asarray(deltas, dtype=float)
    if d.ndim == 1:
        d = d[None, :]
    elif d.ndim != 2:
        raise ValueError(f"deltas must be a vector (m,) or an instance matrix (M, m); got shape {d.shape}")
    if d.shape[1] == 0:
        raise ValueError("deltas is empty: the slice profile has zero directions")
    if d.shape[0] == 0:
        raise ValueError("deltas has zero instances (no (world, pair) was evaluated)")
    if not np.all(np.isfinite(d)):
        raise ValueError("deltas must be finite (an infinite W∞ means the query output is unbounded)")
    if np.any(d < 0):
        raise ValueError("deltas must be non-negative (they are Wasserstein distances)")
    return d, slice_weights(weights, d.shape[1], "deltas has {m} directions")


def slice_weights(weights, m: int, what: str) -> np.ndarray:
    """The slice profile's probability weights ω (uniform when None), validated against m slices;
    ``what`` completes the size-mismatch message, e.g. "deltas has {m} directions"."""
    if weights is None:
        return np.full(m, 1.0 / m)
    w = np.asarray(weights, dtype=float).reshape(-1)
    if w.shape[0] != m:
        raise ValueError(f"weights has {w.shape[0]} entries but " + what.format(m=m))
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and ≥ 0")
    s = float(w.sum())
    if not abs(s - 1.0) <= 1e-9:
        raise ValueError(f"weights must sum to 1 (a probability measure ω), got sum {s!r}")
    return w / s


def _check_monte_carlo(monte_carlo, d: np.ndarray) -> tuple[float, float] | None:
    if monte_carlo is None:
        return None
    try:
        gamma, delta0 = monte_carlo
        gamma, delta0 = float(gamma), float(delta0)
    except (TypeError, ValueError):
        raise ValueError(f"monte_carlo must be a pair (gamma, delta0), got {monte_carlo!r}") from None
    if not (0.0 < gamma < 1.0):
        raise ValueError(f"monte_carlo gamma must lie in (0, 1), got {gamma!r}")
    if not math.isfinite(delta0) or delta0 <= 0:
        raise SoundnessError(
            f"monte_carlo delta0 must be a finite bound > 0 on Δ^u over all directions, got {delta0!r}",
            rule="DPS403",
            hint="declare support bounds of the query output; Δ0 = diameter of the support",
        )
    return gamma, delta0


# ----------------------------------------------------------------------------------------------
# divergence helpers (F2, F4, F5, F8)
# ----------------------------------------------------------------------------------------------


def gaussian_renyi_shift(shift: float, sigma2: float, alpha: float) -> float:
    """D_α(𝒩(a, σ²) ‖ 𝒩(0, σ²)) = α a² / (2σ²): the 1-D Gaussian Rényi envelope R_α(ζ, a).

    ZV25 App. L (envelope eq. 9 for Gaussian noise); digest F2. ``shift`` may be a vector (its
    ℓ2 norm is used, the d-dimensional isotropic case).
    """
    alpha = _check_alpha(alpha)
    sigma2 = _check_sigma2(sigma2)
    a2 = float(np.sum(np.asarray(shift, dtype=float) ** 2))
    return alpha * a2 / (2.0 * sigma2)


def ave_srd(slice_divergences, weights=None) -> float:
    """Ave-SRD for a finite profile: Σ_ℓ ω_ℓ D_α(Ψ^{u_ℓ}_#P ‖ Ψ^{u_ℓ}_#Q). ZV25 Def. 4.1, eq. (7)."""
    d, w = _check_deltas_weights(slice_divergences, weights)
    return float(np.max(d @ w))


def joint_srd(slice_divergences, weights=None, *, alpha: float) -> float:
    """Joint-SRD: (1/(α−1)) log Σ_ℓ ω_ℓ exp((α−1) D_ℓ). ZV25 Def. 4.3, eq. (8)."""
    alpha = _check_alpha(alpha)
    d, w = _check_deltas_weights(slice_divergences, weights)
    with np.errstate(divide="ignore"):
        lw = np.log(w)
    return float(np.max(logsumexp(lw[None, :] + (alpha - 1.0) * d, axis=1)) / (alpha - 1.0))


def profile_aggregates(deltas, weights=None) -> tuple[float, float]:
    """(Δ̄², Δ★²) = (Σ_ℓ ω_ℓ (Δ^{u_ℓ})², max_ℓ (Δ^{u_ℓ})²). ZV25 §4.3.1 (definitions before Thm 4.5).

    For an instance matrix, Δ̄² is the per-instance maximum max_i Σ_ℓ ω_ℓ z_{iℓ}² (digest §4.1 [D]).
    Directions with ω_ℓ = 0 are outside 𝒰 = supp ω and do not enter Δ★².
    """
    d, w = _check_deltas_weights(deltas, weights)
    bar = float(np.max((d**2) @ w))
    star = float(np.max(d[:, w > 0] ** 2))
    return bar, star


def hoeffding_radius(m: int, gamma: float, instances: int = 1) -> float:
    """√(log(4·M/γ)/(2m)): the PAC slack of Thms 4.7/4.8 (M = 1 in the paper; M instances [D])."""
    if int(m) < 1:
        raise ValueError(f"m (number of directions) must be ≥ 1, got {m!r}")
    if not (0.0 < float(gamma) < 1.0):
        raise ValueError(f"gamma must lie in (0, 1), got {gamma!r}")
    return math.sqrt(math.log(4.0 * int(instances) / float(gamma)) / (2.0 * int(m)))


# ----------------------------------------------------------------------------------------------
# ε at a given σ² (the envelope bounds); σ² by inversion
# ----------------------------------------------------------------------------------------------


def _log_moment(d2: np.ndarray, lw: np.ndarray, c: float) -> np.ndarray:
    """log Σ_ℓ ω_ℓ exp(c d2_ℓ) per instance row."""
    return logsumexp(lw[None, :] + c * d2, axis=1)


_ULP_PAD = 1.0 + 8.0 * 2.0**-52


def _up(x: float) -> float:
    """Round a non-negative bound up by a few ulps (covers the rounding of the closed forms)."""
    return float(x) * _ULP_PAD


def _log_expm1(x: float) -> float:
    if x > 30:
        return x + math.log1p(-math.exp(-x))
    return math.log(math.expm1(x)) if x > 0 else -math.inf


def swm_epsilon(
    sigma2: float,
    deltas,
    weights=None,
    alpha: float = 4.0,
    flavour: str = "ave",
    *,
    monte_carlo: tuple[float, float] | None = None,
) -> float:
    """The certified (α, ε, ω)-Ave/Joint-SRPP level ε of the Gaussian SWM with variance σ².

    Finite profile (no ``monte_carlo``):
      * ave:         ε = α Δ̄² / (2σ²)                                   (Thm 4.5; eq. 10 with F2)
      * joint:       ε = α Δ★² / (2σ²)                                   (Thm 4.6)
      * joint_exact: ε = (1/(α−1)) log Σ_ℓ ω_ℓ exp(c (Δ^{u_ℓ})²),  c = α(α−1)/(2σ²)
                                                                          (eq. 11; Thm 4.8, finite ω)
    Monte-Carlo profile, ``monte_carlo=(γ, Δ0)``, holding with probability ≥ 1−γ:
      * ave:   ε = α/(2σ²) · [ (1/m) Σ Δ̂_ℓ² + Δ0² t ]                   (Thm 4.7)
      * joint, joint_exact: ε = (1/(α−1)) log( μ̂_m + (e^{cΔ0²} − 1) t )  (Thm 4.8, eq. 12)
      with t = √(log(4M/γ)/(2m)), then ε ← min(ε, αΔ0²/(2σ²)) (deterministic, Δ^u ≤ Δ0).
    With an instance matrix the maximum over instances is taken of the per-instance value.
    """
    sigma2 = _check_sigma2(sigma2)
    alpha = _check_alpha(alpha)
    flavour = _check_flavour(flavour)
    d, w = _check_deltas_weights(deltas, weights)
    mc = _check_monte_carlo(monte_carlo, d)
    d2 = d**2
    with np.errstate(divide="ignore"):
        lw = np.log(w)
    c = alpha * (alpha - 1.0) / (2.0 * sigma2)
    if mc is None:
        if flavour == "ave":
            return _up(alpha * np.max(d2 @ w) / (2.0 * sigma2))
        if flavour == "joint":
            return _up(alpha * np.max(d2[:, w > 0]) / (2.0 * sigma2))
        return _up(max(0.0, float(np.max(_log_moment(d2, lw, c)) / (alpha - 1.0))))
    gamma, delta0 = mc
    m = d.shape[1]
    t = hoeffding_radius(m, gamma, d.shape[0])
    cap = alpha * delta0**2 / (2.0 * sigma2)
    if flavour == "ave":
        eps = alpha * (np.max(d2 @ w) + delta0**2 * t) / (2.0 * sigma2)
    else:
        lm = _log_moment(d2, lw, c)
        extra = _log_expm1(c * delta0**2) + math.log(t)
        eps = np.max(np.logaddexp(lm, extra)) / (alpha - 1.0)
    return _up(max(0.0, float(min(eps, cap))))


def swm_sigma2(
    deltas,
    weights=None,
    alpha: float = 4.0,
    epsilon: float = 1.0,
    flavour: str = "ave",
    *,
    monte_carlo: tuple[float, float] | None = None,
    rtol: float = 1e-12,
) -> float:
    """Smallest (calibrated) Gaussian SWM variance σ² certifying (α, ε, ω)-{Ave,Joint}-SRPP.

    * ave (Thm 4.5):         σ² = α Δ̄² / (2ε),  Δ̄² = Σ_ℓ ω_ℓ (Δ^{u_ℓ})²            [F9]
    * joint (Thm 4.6):       σ² = α Δ★² / (2ε),  Δ★² = max_ℓ (Δ^{u_ℓ})²              [F10]
    * joint_exact (eq. 11, Thm 4.8 with finite ω): smallest σ² with
      (1/(α−1)) log Σ_ℓ ω_ℓ exp(c (Δ^{u_ℓ})²) ≤ ε, c = α(α−1)/(2σ²); by bisection.    [F11]
    * ``monte_carlo=(γ, Δ0)``: Thm 4.7 (ave, closed form) / Thm 4.8 eq. (12) (joint flavours,
      bisection), each capped by αΔ0²/(2ε).                                             [F12, F13]

    ``deltas`` may be a (M, m) instance matrix for the per-instance ("max outside") calibration
    (digest §4.1 [D]). Returns 0.0 when every Δ is 0 on a finite profile (no noise is needed).
    Ordering for the same inputs: ave ≤ joint_exact ≤ joint (Jensen; each term ≤ max).
    """
    alpha = _check_alpha(alpha)
    epsilon = _check_epsilon(epsilon)
    flavour = _check_flavour(flavour)
    d, w = _check_deltas_weights(deltas, weights)
    mc = _check_monte_carlo(monte_carlo, d)
    d2 = d**2
    if np.any((d2 == 0) & (d > 0)) or not np.all(np.isfinite(d2)):
        raise ValueError("deltas under/overflow when squared; rescale the query output")
    bar = float(np.max(d2 @ w))
    star = float(np.max(d2[:, w > 0]))
    if mc is None:
        if flavour == "ave":
            return _up(alpha * bar / (2.0 * epsilon))
        if flavour == "joint":
            return _up(alpha * star / (2.0 * epsilon))
        if star == 0.0:
            return 0.0
        lo, hi = alpha * bar / (2.0 * epsilon), alpha * star / (2.0 * epsilon)
        if lo <= 0.0:
            lo = hi * 1e-300
        return _up(_bisect_sigma2(lambda s2: swm_epsilon(s2, d, w, alpha, "joint_exact"), epsilon, lo, hi, rtol))
    gamma, delta0 = mc
    cap = alpha * delta0**2 / (2.0 * epsilon)
    if flavour == "ave":
        t = hoeffding_radius(d.shape[1], gamma, d.shape[0])
        return _up(min(alpha * (bar + delta0**2 * t) / (2.0 * epsilon), cap))
    # Thm 4.8: Φ(σ²) is decreasing; bracket [ave-PAC lower bound, cap] (Jensen: Φ ≥ α·mean/(2σ²)).
    phi = lambda s2: swm_epsilon(s2, d, w, alpha, "joint_exact", monte_carlo=(gamma, delta0))
    lo = max(alpha * bar / (2.0 * epsilon), cap * 1e-12)
    if phi(lo) <= epsilon:
        return _up(lo)
    return _up(_bisect_sigma2(phi, epsilon, lo, cap, rtol))


def _bisect_sigma2(phi, epsilon: float, lo: float, hi: float, rtol: float) -> float:
    """Smallest σ² in [lo, hi] with phi(σ²) ≤ ε for decreasing phi; returns a verified upper end."""
    if not phi(hi) <= epsilon * (1 + 1e-12):
        # Should not happen for a valid bracket; widen defensively.
        for _ in range(200):
            hi *= 2.0
            if phi(hi) <= epsilon:
                break
        else:  # pragma: no cover
            raise RuntimeError("could not bracket the σ² calibration")
    if phi(lo) <= epsilon:
        return lo
    for _ in range(400):
        if hi - lo <= rtol * hi:
            break
        mid = 0.5 * (lo + hi)
        if phi(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


def swm_rdp_curve(
    sigma2: float,
    deltas,
    weights=None,
    alphas: Iterable[float] = (1.5, 2, 3, 4, 8, 16, 32, 64),
    flavour: str = "ave",
    *,
    monte_carlo: tuple[float, float] | None = None,
) -> np.ndarray:
    """ε(α) for a *static* release with fixed σ², for every α in ``alphas``.

    The Δ^u do not depend on α, so one calibrated release satisfies (α, ε_α, ω)-SRPP for every
    α > 1 simultaneously (ZV25 §B.4.3): for ave/joint ε_α = αρ with ρ = Δ̄²/(2σ²) resp. Δ★²/(2σ²);
    for joint_exact and the PAC reading the per-α expression of :func:`swm_epsilon`. In the PAC
    reading all α hold on the same event (see the module docstring [D]).
    """
    return np.array([swm_epsilon(sigma2, deltas, weights, a, flavour, monte_carlo=monte_carlo) for a in alphas])


def spp_epsilon(eps_alpha: float, alpha: float, delta: float) -> float:
    """ε′ = ε_α + log(1/δ)/(α−1): (α, ε_α)-Ave/Joint-SRPP ⇒ (ε′, δ)-Ave/Joint-SPP.

    ZV25 Lemma B.1, Thms B.3/B.4 (digest F23). Not a DP/RPP statement (Props G.1/G.2).
    """
    alpha = _check_alpha(alpha)
    if not (0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if not math.isfinite(float(eps_alpha)) or float(eps_alpha) < 0:
        raise ValueError(f"eps_alpha must be finite and ≥ 0, got {eps_alpha!r}")
    return float(eps_alpha) + math.log(1.0 / float(delta)) / (alpha - 1.0)


def swm_spp_epsilon(
    sigma2: float,
    deltas,
    weights=None,
    delta: float = 1e-5,
    flavour: str = "ave",
    *,
    monte_carlo: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """inf_{α>1} { ε_α + log(1/δ)/(α−1) } for the static Gaussian SWM; returns (ε′, α*). ZV25 §B.4.3.

    For ave/joint (finite profile), ε_α = αρ and the optimum is closed form [D]:
    α* = 1 + √(log(1/δ)/ρ), ε′ = ρ + 2√(ρ log(1/δ)). Otherwise a bounded scalar minimisation over
    α; any α is a valid bound, so a numerically sub-optimal α* is still sound.
    """
    sigma2 = _check_sigma2(sigma2)
    flavour = _check_flavour(flavour)
    if not (0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    L = math.log(1.0 / float(delta))
    d, w = _check_deltas_weights(deltas, weights)
    if monte_carlo is None and flavour in ("ave", "joint"):
        rho = swm_epsilon(sigma2, d, w, 2.0, flavour) / 2.0
        if rho == 0.0:
            return 0.0, math.inf
        a_star = 1.0 + math.sqrt(L / rho)
        return rho + 2.0 * math.sqrt(rho * L), a_star
    from scipy.optimize import minimize_scalar

    f = lambda la: spp_epsilon(
        swm_epsilon(sigma2, d, w, 1.0 + math.exp(la), flavour, monte_carlo=monte_carlo), 1.0 + math.exp(la), delta
    )
    res = minimize_scalar(f, bounds=(-12.0, 9.0), method="bounded", options={"xatol": 1e-10})
    a_star = 1.0 + math.exp(res.x)
    return float(f(res.x)), a_star


def gwm_sigma2(delta_inf: float, alpha: float, epsilon: float) -> float:
    """Unsliced General Wasserstein Mechanism (Pierquin et al. 2024): σ² = α Δ∞² / (2ε), ℓ2 W∞.

    Certifies full (α, ε)-RPP (ZV25 §2, eq. 2). Baseline for comparisons.
    """
    alpha = _check_alpha(alpha)
    epsilon = _check_epsilon(epsilon)
    if not math.isfinite(float(delta_inf)) or float(delta_inf) < 0:
        raise ValueError(f"delta_inf must be finite and ≥ 0, got {delta_inf!r}")
    return alpha * float(delta_inf) ** 2 / (2.0 * epsilon)


def compose_static_releases(calibrations: Sequence[SWMCalibration]) -> SWMCalibration:
    """Composition check for static SWM releases: a single release passes through; two or more
    raise DPS405.

    RPP — and SRPP with it — has no general composition theorem: conditioning on the secret through
    the prior makes otherwise independent releases dependent (ZV25 §2; Thm 5.8 covers only
    HUC/sa-HUC-certified SGD). Summing ε's of static releases is therefore not a valid bound.
    """
    calibrations = list(calibrations)
    if len(calibrations) == 1:
        return calibrations[0]
    if not calibrations:
        raise ValueError("no releases to compose")
    raise SoundnessError(
        f"{len(calibrations)} static SWM releases cannot be composed by adding their ε (no composition "
        "theorem for static Pufferfish releases)",
        rule="DPS405",
        hint="release the concatenated query once and calibrate that single SWM",
    )


def deltas_sha256(deltas) -> str:
    """sha256 of the Δ array as contiguous little-endian float64 bytes (shape not included)."""
    a = np.ascontiguousarray(np.asarray(deltas, dtype="<f8"))
    return hashlib.sha256(a.tobytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# result object
# ----------------------------------------------------------------------------------------------

_THEOREMS = {
    ("ave", False): (f"{PAPER} Thm 4.5", f"{PAPER} Lemma 4.1", f"{PAPER} Cor 4.1"),
    ("joint", False): (f"{PAPER} Thm 4.6", f"{PAPER} Lemma 4.1", f"{PAPER} Cor 4.1"),
    ("joint_exact", False): (f"{PAPER} Thm 4.8 (finite ω, eq. 11)", f"{PAPER} Lemma 4.1", f"{PAPER} Cor 4.1"),
    ("ave", True): (f"{PAPER} Thm 4.7", f"{PAPER} Lemma 4.1", f"{PAPER} Cor 4.1"),
    ("joint", True): (f"{PAPER} Thm 4.8 (eq. 12)", f"{PAPER} Lemma 4.1", f"{PAPER} Cor 4.1"),
    ("joint_exact", True): (f"{PAPER} Thm 4.8 (eq. 12)", f"{PAPER} Lemma 4.1", f"{PAPER} Cor 4.1"),
}

_NOTION = {"ave": "Ave-SRPP", "joint": "Joint-SRPP", "joint_exact": "Joint-SRPP"}


@dataclass(frozen=True, eq=False)
class SWMCalibration:
    """A calibrated Gaussian SWM: everything a certificate needs, re-computable by ``verify``.

    ``deltas`` are the per-direction Δ^{u_ℓ} (eq. 6); ``instance_deltas`` (optional) the (M, m)
    matrix z^{u_ℓ}(θ, s_i, s_j) with labels ``instances``; ``aggregation`` says which one the
    calibration used. ``reading`` is "exact for the finite profile" or "PAC with failure
    probability γ=…". ``sigma2`` satisfies ``swm_epsilon(sigma2, …) ≤ epsilon`` (see
    :meth:`verify`).
    """

    sigma2: float
    alpha: float
    epsilon: float
    flavour: str
    deltas: np.ndarray
    weights: np.ndarray
    deltas_sha256: str
    delta_bar2: float
    delta_star2: float
    aggregation: str = "per_direction"
    instance_deltas: np.ndarray | None = None
    instances: tuple = ()
    profile: dict = field(default_factory=dict)
    reading: str = "exact for the finite profile"
    failure_probability: float = 0.0
    monte_carlo: tuple[float, float] | None = None
    binding: str = "pac"  # in the PAC reading: "pac" or "delta0_cap" (deterministic)
    theorems: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    estimator: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def sigma(self) -> float:
        return math.sqrt(self.sigma2)

    @property
    def notion(self) -> str:
        return _NOTION[self.flavour]

    @property
    def calibration_deltas(self) -> np.ndarray:
        """The Δ input actually used: the vector, or the instance matrix (per-instance)."""
        if self.aggregation == "per_instance" and self.instance_deltas is not None:
            return self.instance_deltas
        return self.deltas

    def epsilon_at(self, alpha: float) -> float:
        """Certified ε at Rényi order α for this fixed σ² (static release)."""
        if self.sigma2 == 0.0:
            return 0.0
        return swm_epsilon(
            self.sigma2, self.calibration_deltas, self.weights, alpha, self.flavour, monte_carlo=self.monte_carlo
        )

    def rdp_curve(self, alphas: Iterable[float] = (1.5, 2, 3, 4, 8, 16, 32, 64)) -> list[tuple[float, float]]:
        """[(α, ε_α)] of the static release (ZV25 §B.4.3)."""
        alphas = [float(a) for a in alphas]
        return [(a, self.epsilon_at(a)) for a in alphas]

    def spp_epsilon(self, delta: float, alpha: float | None = None) -> tuple[float, float]:
        """(ε′, α) for (ε′, δ)-Ave/Joint-SPP: at the given α, else optimised over α (Thms B.3/B.4)."""
        if alpha is not None:
            return spp_epsilon(self.epsilon_at(alpha), alpha, delta), float(alpha)
        if self.sigma2 == 0.0:
            return 0.0, math.inf
        return swm_spp_epsilon(
            self.sigma2, self.calibration_deltas, self.weights, delta, self.flavour, monte_carlo=self.monte_carlo
        )

    def verify(self) -> bool:
        """Recompute Δ hash and the privacy level; True iff both match the stored numbers."""
        if deltas_sha256(self.deltas) != self.deltas_sha256:
            return False
        if self.instance_deltas is not None and not np.array_equal(self.instance_deltas.max(axis=0), self.deltas):
            return False
        if self.aggregation == "per_instance" and self.instance_deltas is None:
            return False
        if self.sigma2 == 0.0:
            return float(np.max(self.calibration_deltas)) == 0.0 and self.monte_carlo is None
        return self.epsilon_at(self.alpha) <= self.epsilon * (1.0 + 1e-9)

    def to_dict(self) -> dict:
        out = {
            "mechanism": "gaussian_swm",
            "notion": self.notion,
            "flavour": self.flavour,
            "alpha": self.alpha,
            "epsilon": self.epsilon,
            "sigma2": self.sigma2,
            "sigma": self.sigma,
            "deltas": [float(x) for x in self.deltas],
            "deltas_sha256": self.deltas_sha256,
            "weights": [float(x) for x in self.weights],
            "delta_bar2": self.delta_bar2,
            "delta_star2": self.delta_star2,
            "aggregation": self.aggregation,
            "instances": [list(map(str, i)) for i in self.instances],
            "profile": self.profile,
            "reading": self.reading,
            "failure_probability": self.failure_probability,
            "monte_carlo": None
            if self.monte_carlo is None
            else {"gamma": self.monte_carlo[0], "delta0": self.monte_carlo[1]},
            "binding": self.binding,
            "theorems": list(self.theorems),
            "assumptions": [a.to_dict() for a in self.assumptions],
            "estimator": self.estimator,
            "notes": list(self.notes),
        }
        if self.instance_deltas is not None:
            out["instance_deltas_sha256"] = deltas_sha256(self.instance_deltas)
            if self.aggregation == "per_instance":
                out["instance_deltas"] = [[float(x) for x in row] for row in self.instance_deltas]
        return out

    @classmethod
    def from_dict(cls, doc: dict) -> SWMCalibration:
        """Rebuild from :meth:`to_dict` output (for ``verify``: then call :meth:`verify`)."""
        mc = doc.get("monte_carlo")
        inst = doc.get("instance_deltas")
        return cls(
            sigma2=float(doc["sigma2"]),
            alpha=float(doc["alpha"]),
            epsilon=float(doc["epsilon"]),
            flavour=doc["flavour"],
            deltas=np.asarray(doc["deltas"], dtype=float),
            weights=np.asarray(doc["weights"], dtype=float),
            deltas_sha256=doc["deltas_sha256"],
            delta_bar2=float(doc["delta_bar2"]),
            delta_star2=float(doc["delta_star2"]),
            aggregation=doc.get("aggregation", "per_direction"),
            instance_deltas=None if inst is None else np.asarray(inst, dtype=float),
            instances=tuple(tuple(i) for i in doc.get("instances", ())),
            profile=dict(doc.get("profile", {})),
            reading=doc.get("reading", ""),
            failure_probability=float(doc.get("failure_probability", 0.0)),
            monte_carlo=None if mc is None else (float(mc["gamma"]), float(mc["delta0"])),
            binding=doc.get("binding", "exact"),
            theorems=tuple(doc.get("theorems", ())),
            assumptions=tuple(Assumption(a["statement"], a["source"]) for a in doc.get("assumptions", ())),
            estimator=dict(doc.get("estimator", {})),
            notes=tuple(doc.get("notes", ())),
        )


_BASE_ASSUMPTIONS = (
    Assumption(
        "Noise N ~ 𝒩(0, σ² I_d) is drawn independently of the data X and of the secret", f"{PAPER}, Lemma 4.1 / eq. (9)"
    ),
    Assumption(
        "Δ^u is the per-slice ∞-Wasserstein sensitivity, maximised over every declared world θ "
        "and every discriminative pair with positive prior mass; the declared worlds are the whole "
        "family Θ (the guarantee says nothing about other priors)",
        f"{PAPER}, eq. (6), Defs 4.2/4.4",
    ),
    Assumption(
        "The guarantee is the sliced notion for the recorded slice profile (𝒰, ω); it is not (α, ε)-RPP, "
        "DP or group DP",
        f"{PAPER}, §4, Prop B.1, Props G.1/G.2",
    ),
    Assumption("A static SWM release does not compose additively with other releases", f"{PAPER}, §5 (Thm 5.8 scope)"),
)


def calibrate_swm(
    deltas,
    weights=None,
    alpha: float = 4.0,
    epsilon: float = 1.0,
    flavour: str = "ave",
    *,
    monte_carlo: tuple[float, float] | None = None,
    instance_deltas=None,
    instances: Sequence = (),
    aggregation: str = "per_direction",
    profile: dict | None = None,
    estimation_failure: float = 0.0,
    assumptions: Sequence[Assumption] = (),
    estimator: dict | None = None,
    notes: Sequence[str] = (),
) -> SWMCalibration:
    """Calibrate σ² (:func:`swm_sigma2`) and package the result with its provenance.

    ``deltas``: (m,) per-direction sensitivities. ``instance_deltas``: optional (M, m) matrix
    (rows = ``instances``); with ``aggregation="per_instance"`` the calibration uses it (tighter,
    digest §4.1 [D]). ``estimation_failure``: probability that a Δ̂ is not an upper bound (0 for
    exact conditionals); in the PAC reading it is part of γ (Thms 4.7/4.8 reserve γ/2 for it).
    """
    alpha = _check_alpha(alpha)
    epsilon = _check_epsilon(epsilon)
    flavour = _check_flavour(flavour)
    dvec = np.asarray(deltas, dtype=float)
    if dvec.ndim != 1:
        raise ValueError("deltas must be the per-direction vector (m,); pass instance_deltas for the matrix")
    dvec, w = _check_deltas_weights(dvec, weights)
    dvec = dvec[0]
    if aggregation not in ("per_direction", "per_instance"):
        raise ValueError(f"aggregation must be 'per_direction' or 'per_instance', got {aggregation!r}")
    inst = None
    if instance_deltas is not None:
        inst, _ = _check_deltas_weights(instance_deltas, w)
        if not np.allclose(inst.max(axis=0), dvec, rtol=0, atol=0):
            raise ValueError("deltas must equal the column-wise maximum of instance_deltas")
    if aggregation == "per_instance" and inst is None:
        raise ValueError("aggregation='per_instance' needs instance_deltas")
    used = inst if aggregation == "per_instance" else dvec
    mc = _check_monte_carlo(monte_carlo, np.atleast_2d(used))  # type: ignore[arg-type]  # set on both paths
    if not (0.0 <= float(estimation_failure) < 1.0):
        raise ValueError(f"estimation_failure must lie in [0, 1), got {estimation_failure!r}")
    sigma2 = swm_sigma2(used, w, alpha, epsilon, flavour, monte_carlo=mc)
    bar, star = profile_aggregates(used, w)
    binding = "exact"
    notes = list(notes)
    if mc is not None:
        gamma, delta0 = mc
        cap = alpha * delta0**2 / (2.0 * epsilon)
        binding = "delta0_cap" if sigma2 >= cap * (1 - 1e-12) else "pac"
        if float(estimation_failure) > gamma / 2.0 * (1 + 1e-12):
            raise SoundnessError(
                f"estimation failure {estimation_failure:g} exceeds γ/2 = {gamma / 2:g}",
                rule="DPS403",
                hint="Thms 4.7/4.8 reserve γ/2 for the estimation layer; allot at most γ/2 to the DKW bands",
            )
        if binding == "delta0_cap":
            fail = 0.0  # Δ^u ≤ Δ0 (declared support) holds deterministically
            reading = "exact for every direction (Δ^u ≤ Δ0 bound binds; Thms 4.5/4.6 with Δ0)"
        else:
            fail = float(gamma)
            reading = f"PAC with failure probability γ={gamma:g} (Monte-Carlo directions and estimation)"
        if estimation_failure > 0 and binding == "delta0_cap":
            notes.append("the Δ0 cap binds; Δ0 comes from declared support bounds, so no estimation failure applies")
    else:
        fail = float(estimation_failure)
        if fail > 0:
            reading = (
                f"PAC with failure probability γ={fail:g} (DKW estimation of sampled conditionals; finite profile)"
            )
        else:
            reading = "exact for the finite profile"
    if sigma2 == 0.0:
        notes.append(
            "all sensitivities are 0: the released value carries no secret information along the profile; σ² = 0"
        )
    theorems: tuple[str, ...] = _THEOREMS[(flavour, mc is not None)]
    if aggregation == "per_instance":
        theorems = theorems + ("dpspec [D] per-instance (max outside) aggregation, digest §4.1",)
    if mc is not None:
        theorems = theorems + ("dpspec [D] DKW-uniform validity of the Hoeffding slack for data-dependent σ",)
    assumptions = tuple(_BASE_ASSUMPTIONS) + tuple(assumptions)
    if mc is not None:
        assumptions += (
            Assumption(
                f"Directions U_1..U_m are i.i.d. from the continuous profile ω; Δ^u ≤ Δ0 = {mc[1]:.6g} for all u",
                f"{PAPER}, Thms 4.7/4.8",
            ),
        )
    return SWMCalibration(
        sigma2=float(sigma2),
        alpha=alpha,
        epsilon=epsilon,
        flavour=flavour,
        deltas=dvec.copy(),
        weights=w.copy(),
        deltas_sha256=deltas_sha256(dvec),
        delta_bar2=bar,
        delta_star2=star,
        aggregation=aggregation,
        instance_deltas=None if inst is None else inst.copy(),
        instances=tuple(tuple(i) for i in instances),
        profile=dict(profile or {}),
        reading=reading,
        failure_probability=fail,
        monte_carlo=mc,
        binding=binding,
        theorems=theorems,
        assumptions=assumptions,
        estimator=dict(estimator or {"name": "given"}),
        notes=tuple(notes),
    )
