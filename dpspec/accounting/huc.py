"""SRPP-SGD accounting: History-Uniform Caps (HUC, sa-HUC) and the noise calibration of Thms 5.6–5.8.

Source: T. Zhang, Y. Vorobeychik, "Sliced Rényi Pufferfish Privacy: Tractable Privatization
Mechanism and Private Learning with Gradient Clipping" (arXiv 2512.01115, 2025), "ZV25" below.
Equation, proposition and theorem numbers are the paper's; [D] marks results derived for dpspec
(``dpspec/families/srpp_sgd/PROOF.md``), each with its argument in the docstring.

Pure numpy/scipy (no torch). Discrepancy models, Lipschitz constants of optimizers and the
trainer live in :mod:`dpspec.srpp`; this module turns per-step, per-slice caps h_{t,ℓ} into a
noise variance σ² and a certificate-ready :class:`SRPPSGDCalibration`.

Conventions
-----------
* ``caps`` is an array (T, m): h_{t,ℓ} for step t and slice u_ℓ of a finite profile with weights
  ω (uniform by default). A vector (T,) is read as (T, 1): a slice-independent cap.
* Units. A cap is a bound on the squared directional shift of the per-step *query* f_t whose
  output receives the noise N_t ~ 𝒩(0, σ² I) (Lemma 5.1). With the paper's choice — the query is
  the parameter update ξ_{t−1} − η_t ḡ_t, so L_t = η_t (App. C, W.2) — σ is a **parameter-space**
  standard deviation; the gradient noise that realises it at step t is σ / L_t. With L_t ≡ 1 the
  query is the noisy mean gradient itself and σ is a gradient-space standard deviation (the
  optimizer is then post-processing). ``noise_units`` records which reading a calibration uses;
  digest §10 step 6 and §13.1 (the paper's "Opacus nm = σ·L/C" mixes the two and under-noises by
  1/η — see :func:`paper_noise_multiplier`).
* Flavours: ``"ave"`` (Thm 5.6(i)/5.7(i)), ``"joint"`` (Thm 5.6(ii)/5.7(ii): Σ_t max_ℓ h_{t,ℓ}),
  ``"joint_exact"`` (HUC only: the exact log-moment over slices of the per-slice trajectory bound,
  App. T Step 4 before its last inequality [D]; never larger than "joint").
* ε(α) is linear in α for "ave"/"joint" (ε_α = α H/(2σ²)), so one calibration certifies the
  whole curve; :meth:`SRPPSGDCalibration.rdp_curve` reports it.

Accountants
-----------
* HUC (Prop 5.1, Thm 5.6): :func:`srpp_sgd_sigma2` / :func:`calibrate_srpp_sgd` with worst-case caps.
* sa-HUC (Prop 5.2, Thm 5.7): the same with second-moment caps and ``subsampling_aware=True``.
* "amplified" (App. J, Lemma J.1, eqs. 51–52): :func:`amplified_sigma2` /
  :func:`calibrate_srpp_sgd_amplified` — a worst-case (plain SRPP) certificate that still uses the
  law of the discrepancy over subsampling, via the shared-mixture bound; between HUC and sa-HUC.

What a compiler calls: :func:`dpspec.srpp.calibrate` (plan + discrepancy model → a
:class:`SRPPSGDCalibration`), or :func:`calibrate_srpp_sgd` for raw caps; ``.to_dict()`` is the
certificate payload, ``SRPPSGDCalibration.from_dict(...).verify()`` re-checks it;
:func:`compose_srpp_sgd` composes runs (Thm 5.8).

Soundness notes [D]
-------------------
* sa-SRPP (Defs 5.4/5.5) bounds E_η[divergence | η], an *on-average* notion over the subsampling
  pattern; it does not bound the divergence of the released mixture (digest §3.3 ⚠). Every object
  here labels it "sa-…-SRPP (on average over subsampling)", never plain SRPP; sa results refuse
  the conversion to sliced (ε, δ)-Pufferfish (DPS505) and composition with worst-case results
  (DPS504).
* Slice-dependent caps (per-layer clipping, App. F) rest on the per-slice composition of App. T,
  which conditions on the *projected* history while f_t depends on the full history (digest
  §13.8). Such caps are certified only with ``slice_policy="caveat"`` (the caveat is recorded) or
  replaced by a global ℓ2 cap (``slice_policy="global"``, sound: full-dimensional composition gives
  an RPP bound, hence every sliced notion by Prop B.1); otherwise DPS503.
* Every σ² is rounded up and every ε rounded up by 8 ulps.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import SoundnessError, register_rules
from .swm import Assumption, slice_weights, swm_epsilon, swm_sigma2

__all__ = [
    "PAPER",
    "FLAVOURS",
    "SRPP_RULES",
    "SrppSoundnessError",
    "Assumption",
    "huc",
    "sa_huc",
    "layer_huc",
    "hypergeometric_k2",
    "binomial_k2",
    "hoeffding_tail_cap",
    "localized_caps",
    "poisson_realized_kappa2",
    "total_cap",
    "srpp_sgd_sigma2",
    "srpp_sgd_epsilon",
    "srpp_sgd_epsilon_from_variances",
    "paper_noise_multiplier",
    "gradient_noise_multiplier",
    "srpp_spp_epsilon",
    "mixture_step_epsilon",
    "amplified_epsilon",
    "amplified_sigma2",
    "calibrate_srpp_sgd_amplified",
    "caps_sha256",
    "SRPPSGDCalibration",
    "SRPPSGDComposition",
    "calibrate_srpp_sgd",
    "compose_srpp_sgd",
    "notion_label",
    "notion_id",
]

PAPER = "Zhang–Vorobeychik 2025"
FLAVOURS = ("ave", "joint", "joint_exact")

#: Rule catalogue of the SRPP-SGD soundness errors (ids in the DPS5xx block, dpspec/check/rules.py).
SRPP_RULES: dict[str, str] = {
    "DPS501": "HUC with sampling with replacement: the worst-case discrepancy cap collapses to the batch size (App. "
    "I, Prop I.1)",
    "DPS502": "Poisson sampling needs a declared normalisation and empty-batch handling (B_t ≥ 1 or a deterministic "
    "update; App. E)",
    "DPS503": "slice-dependent caps certify only with the per-slice composition caveat or a global ℓ2 fallback "
    "(§5.3, App. T)",
    "DPS504": "SRPP-SGD runs compose only under the same α, slice profile and flavour, with independent randomness "
    "(Thm 5.8)",
    "DPS505": "sa-SRPP is an on-average notion over subsampling: it is not SRPP and does not convert to sliced (ε, "
    "δ)-Pufferfish",
    "DPS506": "Monte-Carlo discrepancy cap: the finite-sample slack dominates or the tail level is below the DKW "
    "radius (App. D.2)",
    "DPS507": "sa cap averaged over a random coupling draw: eq. (30) needs an ess sup over (X, X′) of E_R[K²] "
    "(digest §13.6)",
    "DPS508": "the injected noise does not match the certified noise (units, schedule or optimizer changed)",
    "DPS509": "the update map has no certified Lipschitz constant (unsupported optimizer or a zero step size with "
    "momentum)",
    "DPS510": "training departs from the certified plan (more steps, a batch not drawn as certified)",
}


register_rules(SRPP_RULES)


class SrppSoundnessError(SoundnessError):
    """A configuration whose SRPP-SGD guarantee would not be provable (rule ids ``DPS5xx``)."""


# ----------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------

_ULP_PAD = 1.0 + 8.0 * 2.0**-52


def _up(x: float) -> float:
    return float(x) * _ULP_PAD


def _num(
    name: str, x, *, lo: float | None = None, lo_open: bool = False, hi: float | None = None, hi_open: bool = False
) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {x!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '≥'} {lo:g}, got {x!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '≤'} {hi:g}, got {x!r}")
    return v


def _int(name: str, x, *, lo: int | None = None) -> int:
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {x!r}")
    if isinstance(x, (int, np.integer)):
        v = int(x)
    elif isinstance(x, (float, np.floating)) and math.isfinite(float(x)) and float(x).is_integer():
        v = int(x)
    else:
        raise ValueError(f"{name} must be an integer, got {x!r}")
    if lo is not None and v < lo:
        raise ValueError(f"{name} must be ≥ {lo}, got {x!r}")
    return v


def _arr_nonneg(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    if np.any(a < 0):
        raise ValueError(f"{name} must be ≥ 0")
    return a


def _check_alpha(alpha) -> float:
    return _num("alpha", alpha, lo=1.0, lo_open=True)


def _check_epsilon(epsilon) -> float:
    return _num("epsilon", epsilon, lo=0.0, lo_open=True)


def _check_flavour(flavour: str) -> str:
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
    return flavour


def _check_caps(caps, weights=None) -> tuple[np.ndarray, np.ndarray]:
    h = np.asarray(caps, dtype=float)
    if h.ndim == 1:
        h = h[:, None]
    if h.ndim != 2:
        raise ValueError(f"caps must be an array (T, m) of per-step, per-slice caps; got shape {h.shape}")
    if h.shape[0] == 0:
        raise ValueError("caps has zero steps (T = 0)")
    if h.shape[1] == 0:
        raise ValueError("caps has zero slices (m = 0)")
    if not np.all(np.isfinite(h)):
        raise ValueError("caps must be finite")
    if np.any(h < 0):
        raise ValueError("caps must be ≥ 0 (they bound squared shifts)")
    w = slice_weights(weights, h.shape[1], "caps has {m} slices")
    return h, w


# ----------------------------------------------------------------------------------------------
# caps (Props 5.1, 5.2; App. F) and discrepancy moments (App. D, W.3)
# ----------------------------------------------------------------------------------------------


def huc(K, lipschitz, clip, batch_size):
    """HUC cap h = (2·K·L·C/B)²: ZV25 Prop 5.1, eq. (16).

    K: discrepancy cap (eq. 15; number of differing records a batch can contain), L: Lipschitz
    constant of the update map in its gradient argument (Assumption 5.2, App. C), C: ℓ2 clip norm,
    B: the batch-size normaliser of the clipped mean (deterministic B_t ≥ 1; for Poisson sampling
    pass the normaliser and a cap on K for it, App. E). Arrays broadcast; returns float or array.
    Each differing record moves its clipped gradient by ≤ 2C (replace model), so
    ‖ḡ(X) − ḡ(X′)‖₂ ≤ 2CK/B, and the update map multiplies by ≤ L.
    """
    K = _arr_nonneg("K", K)
    L = _arr_nonneg("lipschitz", lipschitz)
    C = np.asarray(clip, dtype=float)
    if not np.all(np.isfinite(C)) or np.any(C <= 0):
        raise ValueError(f"clip must be a finite number > 0, got {clip!r}")
    B = np.asarray(batch_size, dtype=float)
    if not np.all(np.isfinite(B)) or np.any(B <= 0):
        raise ValueError(f"batch_size must be > 0 (B_t ≥ 1; App. E for Poisson), got {batch_size!r}")
    out = (2.0 * K * L * C / B) ** 2
    return float(out) if out.ndim == 0 else out


def sa_huc(k2, lipschitz, clip, batch_size):
    """sa-HUC cap h^sa = (2·L·C/B)²·K̄²: ZV25 Prop 5.2 (Def 5.3), with K̄² ≥ E_R[K²] (eq. 17)."""
    k2 = _arr_nonneg("k2", k2)
    return huc(np.sqrt(k2), lipschitz, clip, batch_size)


def layer_huc(K, clips, lipschitz, block_norms, batch_size):
    """Per-layer clipping cap (ZV25 App. F.3, Assumption F.1):

        h_{t,i} = (2K/B)² · (Σ_e C_e · L_{t,e} · ‖P_e u_i‖₂)²

    ``clips`` (E,), ``lipschitz`` (E,) or scalar, ``block_norms`` (m, E) with ‖P_e u_i‖; returns (m,).
    The supremum over all unit u is (2K/B)²·Σ_e (C_e L_e)² (Cauchy–Schwarz, Σ_e ‖P_e u‖² = 1): the
    global ℓ2 cap used by ``slice_policy="global"`` [D].
    """
    C = np.asarray(clips, dtype=float).reshape(-1)
    if C.size == 0 or not np.all(np.isfinite(C)) or np.any(C <= 0):
        raise ValueError("clips must be finite numbers > 0 (one per block)")
    L = np.broadcast_to(_arr_nonneg("lipschitz", lipschitz), C.shape)
    P = _arr_nonneg("block_norms", block_norms)
    if P.ndim != 2 or P.shape[1] != C.size:
        raise ValueError(f"block_norms must be (m, E) with E = {C.size} blocks, got shape {P.shape}")
    s = P @ (C * L)
    return huc(K, 1.0, 1.0, batch_size) * s**2


def hypergeometric_k2(dataset_size, differing, batch_size) -> float:
    """E[K²] for K ~ Hypergeometric(N, Δ, B): a uniform batch of B of N records drawn without
    replacement, Δ of which differ (ZV25 App. W.3; App. D.3 WOR; digest F20):

        E[K] = BΔ/N,  Var[K] = B(Δ/N)(1 − Δ/N)(N − B)/(N − 1),  E[K²] = Var[K] + E[K]²,

    evaluated as the equal factorial-moment form BΔ/N + B(B−1)Δ(Δ−1)/(N(N−1)) (no cancellation).
    It is increasing in Δ, so with |A| ≤ Δ differing records it is also a valid sa cap [D].
    """
    N = _int("dataset_size", dataset_size, lo=1)
    D = _int("differing", differing, lo=0)
    B = _int("batch_size", batch_size, lo=1)
    if D > N:
        raise ValueError(f"differing (Δ = {D}) is larger than dataset_size (N = {N})")
    if B > N:
        raise ValueError(f"batch_size (B = {B}) is larger than dataset_size (N = {N})")
    first = B * D / N
    second = 0.0 if (B < 2 or D < 2) else (B * (B - 1)) * (D * (D - 1)) / (N * (N - 1.0))
    return _up(first + second)


def binomial_k2(batch_size, tv) -> float:
    """E[K²] = Bτ(1 − τ) + (Bτ)² for K ~ Bin(B, τ): ZV25 eq. (39) and the sa cap G(B, τ) of eq. (40).

    B independent draws each hitting a mismatch with probability τ (record-wise maximal coupling of
    i.i.d. records, τ = TV of the per-record conditionals, eq. 36; also WR with τ = k/n, Prop I.1).
    ``batch_size`` may be any count ≥ 0 (e.g. Δ for Poisson inclusion of Δ differing records).
    """
    B = _num("batch_size", batch_size, lo=0.0)
    t = _num("tv", tv, lo=0.0, hi=1.0)
    return _up(B * t * (1.0 - t) + (B * t) ** 2)


def hoeffding_tail_cap(batch_size, tv, delta) -> float:
    """Tail cap K_t(δ) = Bτ + √((B/2)·log(1/δ)) with Pr(K_t ≤ K_t(δ)) ≥ 1 − δ: ZV25 eq. (41)
    (Hoeffding for Bin(B, τ); conservative for WOR). A probabilistic, not almost-sure, cap: the
    failure δ per step must be reported (eq. 34). Clamped to B."""
    B = _num("batch_size", batch_size, lo=1.0)
    t = _num("tv", tv, lo=0.0, hi=1.0)
    d = _num("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    return _up(min(B, B * t + math.sqrt(0.5 * B * math.log(1.0 / d))))


def localized_caps(batch_size, d_max) -> tuple[float, float]:
    """(K_t, K̄_t²) = (min{B, D_max}, min{B², D_max²}): ZV25 App. D.4, eq. (42)."""
    B = _num("batch_size", batch_size, lo=1.0)
    D = _num("d_max", d_max, lo=0.0)
    k = min(B, D)
    return float(k), float(k * k)


def poisson_realized_kappa2(dataset_size, differing, rate, empty_batch: str = "skip") -> float:
    """sup E[κ²] for Poisson sampling normalised by the realised batch size (ZV25 App. E):

        κ = (K / B_t) 𝟏{B_t ≥ 1},  K ~ Bin(Δ, q) differing records sampled, B_t = K + M,
        M ~ Bin(N − Δ, q) independent.

    ``empty_batch="skip"``: the update is deterministic when B_t = 0 (App. E (ii)), E[κ²] as above.
    ``"resample"``: batches are redrawn until B_t ≥ 1 (App. E (i)): E[κ² | B_t ≥ 1].
    Evaluated exactly over the binomial pmfs (terms below 1e-300 dropped, their mass ≤ 1e-250 added
    as an upper bound). Increasing in Δ, so Δ may be a bound D_max [D].
    """
    from scipy.stats import binom

    N = _int("dataset_size", dataset_size, lo=1)
    D = _int("differing", differing, lo=0)
    q = _num("rate", rate, lo=0.0, hi=1.0, lo_open=True)
    if D > N:
        raise ValueError(f"differing (Δ = {D}) is larger than dataset_size (N = {N})")
    if empty_batch not in ("skip", "resample"):
        raise ValueError(f"empty_batch must be 'skip' or 'resample', got {empty_batch!r}")
    if D == 0:
        return 0.0
    k = np.arange(1, D + 1)
    pk = binom.pmf(k, D, q)
    M = N - D
    mm = np.arange(0, M + 1)
    pm = binom.pmf(mm, M, q)
    keep = pm > 1e-300
    mm, pm = mm[keep], pm[keep]
    # E[k²/(k+M)²] for each k
    inner = (k[:, None] ** 2 / (k[:, None] + mm[None, :]) ** 2) @ pm
    val = float(pk @ inner) + 1e-250
    if empty_batch == "resample":
        p_nonempty = -math.expm1(N * math.log1p(-q)) if q < 1 else 1.0
        val /= p_nonempty
    return _up(min(1.0, val))


# ----------------------------------------------------------------------------------------------
# the accountant (Thms 5.6, 5.7)
# ----------------------------------------------------------------------------------------------


def total_cap(caps, flavour: str = "ave", weights=None) -> float:
    """H_total: Σ_t Σ_ℓ ω_ℓ h_{t,ℓ} (Ave, Thm 5.6(i)/5.7(i)) or Σ_t max_ℓ h_{t,ℓ} (Joint,
    Thm 5.6(ii)/5.7(ii); the max over slices in supp ω). For "joint_exact" the Joint value is
    returned (an upper bound on the effective total)."""
    flavour = _check_flavour(flavour)
    h, w = _check_caps(caps, weights)
    if flavour == "ave":
        return float(np.sum(h @ w))
    return float(np.sum(np.max(h[:, w > 0], axis=1)))


def _slice_totals(h: np.ndarray) -> np.ndarray:
    return np.sum(h, axis=0)


def srpp_sgd_sigma2(
    caps, alpha, epsilon, flavour: str = "ave", weights=None, *, subsampling_aware: bool = False
) -> float:
    """Smallest isotropic noise variance σ² certifying (α, ε, ω)-{Ave, Joint}-SRPP of SRPP-SGD.

    * ave   (Thm 5.6(i), Thm 5.7(i) for sa caps):  σ² = (α/2ε) Σ_t Σ_ℓ ω_ℓ h_{t,ℓ}
    * joint (Thm 5.6(ii), Thm 5.7(ii)):            σ² = (α/2ε) Σ_t max_ℓ h_{t,ℓ}
    * joint_exact (HUC only; App. T Step 4 without its final max [D]): smallest σ² with
          (1/(α−1)) log Σ_ℓ ω_ℓ exp((α−1)·α H_ℓ/(2σ²)) ≤ ε,  H_ℓ = Σ_t h_{t,ℓ}
      (bisection; the Joint-SRD of the per-slice trajectory bounds of eq. (71)).

    ``caps``: (T, m) per-step, per-slice caps h_{t,ℓ} (Prop 5.1 / 5.2); σ² is in the units of the
    caps (module docstring). Returns 0.0 when every cap is 0.
    """
    alpha = _check_alpha(alpha)
    epsilon = _check_epsilon(epsilon)
    flavour = _check_flavour(flavour)
    h, w = _check_caps(caps, weights)
    if flavour == "joint_exact":
        if subsampling_aware:
            raise SrppSoundnessError(
                "the exact log-moment Joint calibration is not available for sa-HUC caps: the sa "
                "accountant bounds E_R[K²], and the log-moment is convex in K² (Jensen goes the wrong way)",
                rule="DPS505",
                hint="use flavour='joint' (Thm 5.7(ii)) for sa-Joint-SRPP",
            )
        H = _slice_totals(h)
        Hmax = float(np.max(H[w > 0]))
        if Hmax == 0.0:
            return 0.0
        if Hmax < 1e-250:  # denormal range: the closed-form Joint value is a valid upper bound
            return _up(alpha * total_cap(h, "joint", w) / (2.0 * epsilon))
        # σ² is homogeneous of degree 1 in the caps: solve on the normalised caps
        return _up(Hmax * swm_sigma2(np.sqrt(H / Hmax), w, alpha, epsilon, "joint_exact"))
    H = total_cap(h, flavour, w)  # type: ignore[assignment]  # a float on this path
    return _up(alpha * H / (2.0 * epsilon))


def srpp_sgd_epsilon(sigma2, caps, alpha, flavour: str = "ave", weights=None) -> float:
    """The certified ε of SRPP-SGD with isotropic noise variance σ² (inverse of
    :func:`srpp_sgd_sigma2`): α H_total/(2σ²) (Thms 5.6/5.7), or for "joint_exact" the log-moment
    (1/(α−1)) log Σ_ℓ ω_ℓ exp((α−1) α H_ℓ/(2σ²)) (App. T Step 4 [D]). σ² = 0 gives 0 if every
    cap is 0 and ∞ otherwise."""
    alpha = _check_alpha(alpha)
    flavour = _check_flavour(flavour)
    s2 = _num("sigma2", sigma2, lo=0.0)
    h, w = _check_caps(caps, weights)
    if s2 == 0.0:
        return 0.0 if not np.any(h[:, w > 0] > 0) else math.inf
    if flavour == "joint_exact":
        H = _slice_totals(h)
        Hmax = float(np.max(H[w > 0]))
        if Hmax == 0.0:
            return 0.0
        if Hmax < 1e-250 or not math.isfinite(s2 / Hmax):
            return _up(alpha * total_cap(h, "joint", w) / (2.0 * s2))
        return _up(swm_epsilon(s2 / Hmax, np.sqrt(H / Hmax), w, alpha, "joint_exact"))
    return _up(alpha * total_cap(h, flavour, w) / (2.0 * s2))


def srpp_sgd_epsilon_from_variances(caps, variances, alpha, flavour: str = "ave", weights=None) -> float:
    """ε for per-step (and optionally per-slice) noise variances v_{t,ℓ} = u_ℓᵀ Σ_t u_ℓ:
    Lemma 5.1 gives the per-step cost α h_{t,ℓ}/(2 v_{t,ℓ}); Lemma T.1 sums it over t per slice, then

    * ave:   Σ_ℓ ω_ℓ Σ_t α h_{t,ℓ}/(2 v_{t,ℓ})                 (Thm 5.6(i) argument)
    * joint: Σ_t max_ℓ α h_{t,ℓ}/(2 v_{t,ℓ})                     (Thm 5.6(ii) argument)
    * joint_exact: (1/(α−1)) log Σ_ℓ ω_ℓ exp((α−1) D_ℓ),  D_ℓ = Σ_t α h_{t,ℓ}/(2 v_{t,ℓ})

    ``variances``: (T,) or (T, m), in the units of the caps. Used to certify what a run *actually*
    injected (e.g. the realised parameter-space noise), independent of how σ was chosen.
    """
    alpha = _check_alpha(alpha)
    flavour = _check_flavour(flavour)
    h, w = _check_caps(caps, weights)
    v = np.asarray(variances, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    try:
        v = np.broadcast_to(v, h.shape)
    except ValueError:
        raise ValueError(f"variances of shape {np.shape(variances)} do not match caps {h.shape}") from None
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError("variances must be finite and ≥ 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = np.where(h > 0, alpha * h / (2.0 * v), 0.0)
    if flavour == "ave":
        return _up(float(np.sum(cost @ w)))
    if flavour == "joint":
        return _up(float(np.sum(np.max(cost[:, w > 0], axis=1))))
    D = np.sum(cost, axis=0)
    if not np.all(np.isfinite(D[w > 0])):
        return math.inf
    from scipy.special import logsumexp

    with np.errstate(divide="ignore"):
        lw = np.log(w)
    return _up(max(0.0, float(logsumexp(lw + (alpha - 1.0) * D)) / (alpha - 1.0)))


def paper_noise_multiplier(sigma_param, batch_size, clip) -> float:
    """The paper's Opacus recipe nm = σ(ε)·L/C (ZV25 App. W.3, "L" = batch size) — ⚠ kept only to
    demonstrate the unit error (digest §13.1): Opacus adds std nm·C to the clipped *sum*, i.e.
    σ to the mean *gradient*, whereas σ(ε) from caps containing η_t² is a *parameter-space* std.
    The realised parameter-space std is η·σ, so the realised ε is ε/η² (×25 at η = 0.2)."""
    return (
        _num("sigma_param", sigma_param, lo=0.0)
        * _num("batch_size", batch_size, lo=0.0, lo_open=True)
        / _num("clip", clip, lo=0.0, lo_open=True)
    )


def gradient_noise_multiplier(sigma_grad, batch_size, clip) -> float:
    """Noise multiplier (std on the clipped sum / C) realising a gradient-space std σ_g on the mean
    clipped gradient ḡ = (1/B) Σ g̃_i: nm = σ_g·B/C (digest §10 step 6). With gradient-space caps
    (L ≡ 1) and constant B this is 2·√(α Σ_t K_t²/(2ε)) (HUC)."""
    return (
        _num("sigma_grad", sigma_grad, lo=0.0)
        * _num("batch_size", batch_size, lo=0.0, lo_open=True)
        / _num("clip", clip, lo=0.0, lo_open=True)
    )


def srpp_spp_epsilon(rho_or_eps, delta, *, alpha: float | None = None, linear: bool = True) -> tuple[float, float]:
    """Conversion to sliced (ε′, δ)-Pufferfish (ZV25 Thms B.3/B.4, Lemma B.1; digest F23).

    ``linear=True``: ``rho_or_eps`` is ρ with ε_α = α ρ for every α (Ave/Joint closed forms); the
    optimum over α is α* = 1 + √(log(1/δ)/ρ), ε′ = ρ + 2√(ρ log(1/δ)) (§B.4.3 [D]) unless ``alpha``
    is given. ``linear=False``: ``rho_or_eps`` is ε at the given ``alpha``: ε′ = ε + log(1/δ)/(α−1).
    Returns (ε′, α).
    """
    d = _num("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    x = _num("rho_or_eps", rho_or_eps, lo=0.0)
    lg = math.log(1.0 / d)
    if not linear:
        if alpha is None:
            raise ValueError("alpha is required when linear=False")
        a = _check_alpha(alpha)
        return _up(x + lg / (a - 1.0)), a
    if alpha is not None:
        a = _check_alpha(alpha)
        return _up(a * x + lg / (a - 1.0)), a
    if x == 0.0:
        return 0.0, math.inf
    a = 1.0 + math.sqrt(lg / x)
    return _up(x + 2.0 * math.sqrt(x * lg)), a


# ----------------------------------------------------------------------------------------------
# the subsampling-amplified worst-case accountant (App. J, Lemma J.1, eqs. 49–52) [D ordering]
# ----------------------------------------------------------------------------------------------


def _check_law(kappas, log_pmf) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(kappas, dtype=float).reshape(-1)
    lp = np.asarray(log_pmf, dtype=float).reshape(-1)
    if k.size == 0 or k.shape != lp.shape:
        raise ValueError("kappas and log_pmf must be non-empty vectors of equal length")
    if not np.all(np.isfinite(k)) or np.any(k < 0):
        raise ValueError("kappas must be finite and ≥ 0")
    if np.any(np.isnan(lp)) or np.any(lp > 1e-12):
        raise ValueError("log_pmf must be log-probabilities (≤ 0)")
    from scipy.special import logsumexp

    tot = float(logsumexp(lp))
    if abs(tot) > 1e-9:
        raise ValueError(f"the law of κ must sum to 1, got exp(logsumexp) = {math.exp(tot)!r}")
    return k, lp


def mixture_step_epsilon(sigma2, a, kappas, log_pmf, alpha) -> np.ndarray:
    """Per-step shared-mixture envelope (ZV25 Lemma J.1 applied as in App. J eq. (51)/(52)):

        ε_t(σ²) = (1/(α−1)) log E_{κ} exp((α−1) · α a_t κ² / (2σ²)),

    for a step whose squared shift is ≤ a_t κ² when the (normalised) discrepancy is κ, with κ drawn
    from the given law (the subsampling). ``a``: (T,) per-unit caps a_t = (2 L_t C)²; returns (T,)."""
    from scipy.special import logsumexp

    alpha = _check_alpha(alpha)
    s2 = _num("sigma2", sigma2, lo=0.0, lo_open=True)
    A = _arr_nonneg("a", a).reshape(-1)
    k, lp = _check_law(kappas, log_pmf)
    ua, inv = np.unique(A, return_inverse=True)
    c = (alpha - 1.0) * alpha / (2.0 * s2)
    vals = logsumexp(lp[None, :] + c * ua[:, None] * (k**2)[None, :], axis=1) / (alpha - 1.0)
    return np.maximum(vals, 0.0)[inv]


def amplified_epsilon(sigma2, a, kappas, log_pmf, alpha) -> float:
    """ε(α) = Σ_t ε_t(σ²) of :func:`mixture_step_epsilon` (Lemma T.1 composition), rounded up."""
    return _up(float(math.fsum(mixture_step_epsilon(sigma2, a, kappas, log_pmf, alpha))))


def amplified_sigma2(a, kappas, log_pmf, alpha, epsilon, *, rtol: float = 1e-10) -> float:
    """Smallest σ² (upper end of a verified bracket, relative width ``rtol``) with
    :func:`amplified_epsilon` ≤ ε. Never above the worst-case (HUC) σ² = α Σ_t a_t κ_max²/(2ε)
    (Lemma J.2)."""
    alpha = _check_alpha(alpha)
    epsilon = _check_epsilon(epsilon)
    A = _arr_nonneg("a", a).reshape(-1)
    k, lp = _check_law(kappas, log_pmf)
    kmax2 = float(np.max(k[lp > -np.inf] ** 2)) if np.any(lp > -np.inf) else 0.0
    hi = _up(alpha * float(np.sum(A)) * kmax2 / (2.0 * epsilon))
    if hi == 0.0:
        return 0.0
    if amplified_epsilon(hi, A, k, lp, alpha) > epsilon:  # rounding safety
        hi *= 1.0 + 1e-9
    lo = hi
    while amplified_epsilon(lo, A, k, lp, alpha) <= epsilon:
        hi = lo
        lo = lo / 2.0
        if lo < 1e-300:
            return hi
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo * hi)
        if amplified_epsilon(mid, A, k, lp, alpha) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


def caps_sha256(caps) -> str:
    """sha256 of the caps as contiguous little-endian float64 bytes (shape not included)."""
    a = np.ascontiguousarray(np.asarray(caps, dtype="<f8"))
    return hashlib.sha256(a.tobytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# notion labels
# ----------------------------------------------------------------------------------------------


def notion_id(flavour: str, subsampling_aware: bool) -> str:
    """Certificate notion id: "ave_srpp", "joint_srpp", "sa_ave_srpp", "sa_joint_srpp"."""
    base = "ave" if flavour == "ave" else "joint"
    return ("sa_" if subsampling_aware else "") + base + "_srpp"


def notion_label(flavour: str, subsampling_aware: bool) -> str:
    """Human label. sa notions always carry "(on average over subsampling)" (digest §3.3 ⚠)."""
    base = "Ave-SRPP" if flavour == "ave" else "Joint-SRPP"
    if subsampling_aware:
        return f"sa-{base} (on average over subsampling; not {base})"
    return base


# ----------------------------------------------------------------------------------------------
# the calibration result
# ----------------------------------------------------------------------------------------------

_CAPS_INLINE_MAX = 20000


def _theorems(flavour: str, sa: bool, slice_policy: str) -> tuple[str, ...]:
    if sa:
        main = {"ave": f"{PAPER} Thm 5.7(i)", "joint": f"{PAPER} Thm 5.7(ii)"}[flavour]
        out: tuple[str, ...] = (main, f"{PAPER} Prop 5.2 (sa-HUC, eq. 17)", f"{PAPER} Lemma U.1", f"{PAPER} Lemma 5.1")
    else:
        main = {
            "ave": f"{PAPER} Thm 5.6(i)",
            "joint": f"{PAPER} Thm 5.6(ii)",
            "joint_exact": f"{PAPER} Thm 5.6 (App. T Step 4, exact log-moment over slices) [D]",
        }[flavour]
        out = (main, f"{PAPER} Prop 5.1 (HUC, eq. 16)", f"{PAPER} Lemma 5.1", f"{PAPER} Lemma T.1")
    if slice_policy == "global":
        out += (
            "dpspec [D] global ℓ2 cap: full-dimensional adaptive composition ⇒ RPP ⇒ every sliced notion (Prop B.1), "
            "digest §5.3",
        )
    elif slice_policy == "slice_independent":
        out += ("dpspec [D] slice-independent cap: the bound holds for every slice profile (digest §12)",)
    return out


@dataclass(frozen=True, eq=False)
class SRPPSGDCalibration:
    """A calibrated SRPP-SGD run: everything a certificate needs, re-computable by :meth:`verify`.

    * ``sigma2``: the accountant's isotropic noise variance, in ``noise_units`` ("parameter": std
      of the fresh noise in the parameter update — the paper's convention; "gradient": std of the
      noise on the mean clipped gradient). ``injected`` records what the runtime adds (gradient
      std per step, noise multiplier) so that a verifier can check it.
    * ``caps``: the (T, m) caps (inline when T·m ≤ 20,000, else ``None``) with ``caps_sha256`` and
      ``caps_summary``; ``h_total`` is the aggregate the flavour uses.
    * ``subsampling_aware``: True for sa-HUC; the notion is then sa-Ave/sa-Joint-SRPP, an
      on-average notion, never labelled SRPP (see :attr:`notion`).
    * ``slice_policy``: "slice_independent" (caps equal on every slice: valid for every profile),
      "global" (slice-dependent caps replaced by a global ℓ2 cap) or "caveat" (per-slice caps,
      certified with the App. T caveat, see ``warnings``).
    * ``failure_probability``: additive failure probability of the caps (tail caps Σδ_t, Monte
      Carlo γ, high-probability world bounds; eq. 34); 0 for almost-sure caps.
    """

    sigma2: float
    alpha: float
    epsilon: float
    flavour: str
    subsampling_aware: bool
    steps: int
    h_total: float
    weights: np.ndarray
    caps_sha256: str
    caps_summary: dict
    caps: np.ndarray | None = None
    slice_policy: str = "slice_independent"
    profile: dict = field(default_factory=dict)
    noise_units: str = "parameter"
    injected: dict = field(default_factory=dict)
    discrepancy: dict = field(default_factory=dict)
    sampling: dict = field(default_factory=dict)
    lipschitz: dict = field(default_factory=dict)
    clipping: dict = field(default_factory=dict)
    failure_probability: float = 0.0
    failure_breakdown: dict = field(default_factory=dict)
    theorems: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = ()
    amplification: dict | None = None  # accountant "amplified": {"a": [...], "kappas": [...], "log_pmf": [...]}

    # --- derived ------------------------------------------------------------------------------

    @property
    def sigma(self) -> float:
        return math.sqrt(self.sigma2)

    @property
    def notion(self) -> str:
        """ "Ave-SRPP", "Joint-SRPP", or "sa-Ave-SRPP (on average over subsampling; not Ave-SRPP)" …"""
        return notion_label(self.flavour, self.subsampling_aware)

    @property
    def notion_id(self) -> str:
        return notion_id(self.flavour, self.subsampling_aware)

    @property
    def accountant(self) -> str:
        if self.amplification is not None:
            return "amplified"
        return "sa_huc" if self.subsampling_aware else "huc"

    def _amp(self):
        amp = self.amplification
        return (
            np.asarray(amp["a"], dtype=float),
            np.asarray(amp["kappas"], dtype=float),
            np.asarray(amp["log_pmf"], dtype=float),
        )

    def epsilon_at(self, alpha: float) -> float:
        """Certified ε at Rényi order α for this σ² (the caps do not depend on α)."""
        a = _check_alpha(alpha)
        if self.sigma2 == 0.0:
            return 0.0 if self.h_total == 0.0 else math.inf
        if self.amplification is not None:
            A, k, lp = self._amp()
            return amplified_epsilon(self.sigma2, A, k, lp, a)
        if self.flavour == "joint_exact":
            if self.caps is None:
                raise ValueError("joint_exact ε at another α needs the inline caps")
            return srpp_sgd_epsilon(self.sigma2, self.caps, a, "joint_exact", self.weights)
        return _up(a * self.h_total / (2.0 * self.sigma2))

    def rdp_curve(self, alphas: Iterable[float] = (1.5, 2, 3, 4, 8, 16, 32, 64)) -> list[tuple[float, float]]:
        """[(α, ε_α)] — for Ave/Joint ε_α = α·H_total/(2σ²) (Thms 5.6/5.7 hold for every α)."""
        return [(float(a), self.epsilon_at(a)) for a in alphas]

    def spp_epsilon(self, delta: float, alpha: float | None = None) -> tuple[float, float]:
        """(ε′, α) for sliced (ε′, δ)-Pufferfish (Thms B.3/B.4), optimised over α unless given.

        Raises DPS505 for sa results: an on-average bound E_η[D] ≤ ε does not bound the divergence
        of the released mixture, so Lemma B.1 does not apply.
        """
        if self.subsampling_aware:
            raise SrppSoundnessError(
                "sa-SRPP bounds the divergence only on average over subsampling patterns; it does not "
                "convert to sliced (ε, δ)-Pufferfish privacy",
                rule="DPS505",
                hint="use the worst-case HUC accountant for an (ε′, δ) statement",
            )
        if self.sigma2 == 0.0:
            return (0.0, math.inf) if self.h_total == 0.0 else (math.inf, float("nan"))
        if self.amplification is not None:
            if alpha is not None:
                return srpp_spp_epsilon(self.epsilon_at(alpha), delta, alpha=alpha, linear=False)
            grid = np.concatenate([np.linspace(1.05, 2, 20), np.linspace(2.1, 16, 60), np.geomspace(16.5, 1024, 60)])
            best = min(
                (srpp_spp_epsilon(self.epsilon_at(a), delta, alpha=a, linear=False) for a in grid), key=lambda x: x[0]
            )
            return best
        if self.flavour == "joint_exact":
            a = self.alpha if alpha is None else alpha
            return srpp_spp_epsilon(self.epsilon_at(a), delta, alpha=a, linear=False)
        rho = self.h_total / (2.0 * self.sigma2)
        return srpp_spp_epsilon(rho, delta, alpha=alpha, linear=True)

    def verify(self, caps=None) -> bool:
        """Recompute the caps hash and the privacy level; True iff both match."""
        if self.amplification is not None:
            A, k, lp = self._amp()
            if caps_sha256(A) != self.amplification.get("a_sha256") or A.size != self.steps:
                return False
            if self.sigma2 == 0.0:
                return float(np.max(A)) == 0.0 or float(np.max(k[lp > -np.inf])) == 0.0
            return amplified_epsilon(self.sigma2, A, k, lp, self.alpha) <= self.epsilon * (1.0 + 1e-9)
        c = self.caps if caps is None else np.asarray(caps, dtype=float)
        if c is None:
            return False
        c2 = c[:, None] if c.ndim == 1 else c
        if caps_sha256(c2) != self.caps_sha256:
            return False
        if c2.shape[0] != self.steps:
            return False
        if self.sigma2 == 0.0:
            return not np.any(c2 > 0)
        ok_h = abs(total_cap(c2, self.flavour, self.weights) - self.h_total) <= 1e-9 * max(1.0, self.h_total)
        return ok_h and srpp_sgd_epsilon(self.sigma2, c2, self.alpha, self.flavour, self.weights) <= self.epsilon * (
            1.0 + 1e-9
        )

    def to_dict(self) -> dict:
        return {
            "mechanism": "srpp_sgd",
            "notion": self.notion,
            "notion_id": self.notion_id,
            "accountant": self.accountant,
            "flavour": self.flavour,
            "subsampling_aware": self.subsampling_aware,
            "alpha": self.alpha,
            "epsilon": self.epsilon,
            "sigma2": self.sigma2,
            "sigma": self.sigma,
            "noise_units": self.noise_units,
            "injected": _jsonable(self.injected),
            "steps": self.steps,
            "h_total": self.h_total,
            "weights": [float(x) for x in self.weights],
            "caps": None if self.caps is None else [[float(x) for x in row] for row in self.caps],
            "caps_sha256": self.caps_sha256,
            "caps_summary": _jsonable(self.caps_summary),
            "slice_policy": self.slice_policy,
            "profile": _jsonable(self.profile),
            "discrepancy": _jsonable(self.discrepancy),
            "sampling": _jsonable(self.sampling),
            "lipschitz": _jsonable(self.lipschitz),
            "clipping": _jsonable(self.clipping),
            "failure_probability": self.failure_probability,
            "failure_breakdown": _jsonable(self.failure_breakdown),
            "theorems": list(self.theorems),
            "assumptions": [a.to_dict() for a in self.assumptions],
            "warnings": list(self.warnings),
            "amplification": _jsonable(self.amplification),
        }

    @classmethod
    def from_dict(cls, doc: dict) -> SRPPSGDCalibration:
        caps = doc.get("caps")
        return cls(
            sigma2=float(doc["sigma2"]),
            alpha=float(doc["alpha"]),
            epsilon=float(doc["epsilon"]),
            flavour=doc["flavour"],
            subsampling_aware=bool(doc["subsampling_aware"]),
            steps=int(doc["steps"]),
            h_total=float(doc["h_total"]),
            weights=np.asarray(doc["weights"], dtype=float),
            caps_sha256=doc["caps_sha256"],
            caps_summary=dict(doc.get("caps_summary", {})),
            caps=None if caps is None else np.asarray(caps, dtype=float),
            slice_policy=doc.get("slice_policy", "slice_independent"),
            profile=dict(doc.get("profile", {})),
            noise_units=doc.get("noise_units", "parameter"),
            injected=dict(doc.get("injected", {})),
            discrepancy=dict(doc.get("discrepancy", {})),
            sampling=dict(doc.get("sampling", {})),
            lipschitz=dict(doc.get("lipschitz", {})),
            clipping=dict(doc.get("clipping", {})),
            failure_probability=float(doc.get("failure_probability", 0.0)),
            failure_breakdown=dict(doc.get("failure_breakdown", {})),
            theorems=tuple(doc.get("theorems", ())),
            assumptions=tuple(Assumption(a["statement"], a["source"]) for a in doc.get("assumptions", ())),
            warnings=tuple(doc.get("warnings", ())),
            amplification=None if doc.get("amplification") is None else dict(doc["amplification"]),
        )


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    return x


_BASE_ASSUMPTIONS = (
    Assumption(
        "Per-example gradients are ℓ2-clipped to C before averaging; each differing record moves its "
        "clipped gradient by at most 2C (replace model)",
        f"{PAPER}, Prop 5.1 / eq. (16), App. Q",
    ),
    Assumption(
        "The update map T_t is L_t-Lipschitz in its gradient argument for every history (slice-wise: "
        "Assumption 5.2); constants derived from the optimizer",
        f"{PAPER}, Sec. 5.1, Assumption 5.2, App. C, W.2",
    ),
    Assumption(
        "The discrepancy caps hold under one declared coupling of the secret-conditional datasets "
        "(Def 5.1 read as 'there exists a coupling', digest §13.7)",
        f"{PAPER}, eqs. (14)–(15), App. D",
    ),
    Assumption(
        "Noise N_t ~ 𝒩(0, σ² I_d) i.i.d. over steps, independent of the data, the secret and the sampling",
        f"{PAPER}, Lemma 5.1, Thm 5.6",
    ),
    Assumption(
        "Minibatch randomness is independent of the secret and drawn exactly as accounted "
        "(scheme, batch size, number of steps)",
        f"{PAPER}, Sec. 5.1, Algorithm 1, App. I",
    ),
    Assumption(
        "The guarantee is the sliced Pufferfish notion for the recorded slice profile and worlds; it is "
        "not DP or group DP",
        f"{PAPER}, Defs 4.2/4.4, Props G.1/G.2",
    ),
)


def _summary(h: np.ndarray) -> dict:
    per_step = np.max(h, axis=1)
    return {
        "shape": list(h.shape),
        "min": float(h.min()),
        "max": float(h.max()),
        "first_step_max": float(per_step[0]),
        "last_step_max": float(per_step[-1]),
        "sum_max_over_slices": float(per_step.sum()),
        "slice_independent": bool(np.all(h == h[:, :1])),
    }


def calibrate_srpp_sgd(
    caps,
    alpha: float,
    epsilon: float,
    flavour: str = "ave",
    *,
    subsampling_aware: bool = False,
    weights=None,
    slice_policy: str | None = None,
    global_caps=None,
    profile: dict | None = None,
    noise_units: str = "parameter",
    injected: dict | None = None,
    discrepancy: dict | None = None,
    sampling: dict | None = None,
    lipschitz: dict | None = None,
    clipping: dict | None = None,
    failure_probability: float = 0.0,
    failure_breakdown: dict | None = None,
    assumptions: Sequence[Assumption] = (),
    warnings: Sequence[str] = (),
) -> SRPPSGDCalibration:
    """Calibrate σ² (:func:`srpp_sgd_sigma2`) for caps h_{t,ℓ} and package the provenance.

    ``subsampling_aware``: the caps are sa-HUC caps (Prop 5.2) and the notion is sa-Ave/sa-Joint.
    ``slice_policy`` (needed only when caps differ across slices, else DPS503):
      * "caveat": certify the per-slice caps (Thm 5.6 as stated), recording the App. T caveat;
      * "global": replace them by ``global_caps`` (T,), a global ℓ2 bound ≥ every slice cap
        (e.g. :func:`layer_huc`'s Cauchy–Schwarz supremum), which is sound for every profile.
    """
    alpha = _check_alpha(alpha)
    epsilon = _check_epsilon(epsilon)
    flavour = _check_flavour(flavour)
    if noise_units not in ("parameter", "gradient"):
        raise ValueError(f"noise_units must be 'parameter' or 'gradient', got {noise_units!r}")
    h, w = _check_caps(caps, weights)
    fp = _num("failure_probability", failure_probability, lo=0.0, hi=1.0, hi_open=True)
    warns = list(warnings)
    assum = list(_BASE_ASSUMPTIONS)
    slice_dep = not bool(np.all(h[:, w > 0] == h[:, w > 0][:, :1]))
    prof = dict(profile or {})
    if not slice_dep:
        policy = "slice_independent"
        h = h[:, :1]
        w = np.ones(1)
        prof = {"kind": "any", **{k: v for k, v in prof.items() if k != "kind"}}
        assum.append(
            Assumption(
                "The caps are equal on every slice (global ℓ2 clipping and a global Lipschitz "
                "constant): the same σ² certifies every slice profile, and Ave/Joint coincide",
                f"{PAPER}, App. W.2; digest §12 [D]",
            )
        )
    else:
        if slice_policy not in ("caveat", "global"):
            raise SrppSoundnessError(
                "the caps differ across slices (e.g. per-layer clipping); the per-slice composition of App. T "
                "conditions on the projected history while the updates depend on the full history",
                rule="DPS503",
                hint="pass slice_policy='global' with a global ℓ2 cap (sound for every profile), or "
                "slice_policy='caveat' to certify the per-slice caps with the caveat recorded",
            )
        policy = slice_policy
        if policy == "global":
            if global_caps is None:
                raise ValueError("slice_policy='global' needs global_caps (T,): a global ℓ2 bound on the squared shift")
            g = _arr_nonneg("global_caps", global_caps).reshape(-1)
            if g.shape[0] != h.shape[0]:
                raise ValueError(f"global_caps has {g.shape[0]} steps but caps has {h.shape[0]}")
            if np.any(g < np.max(h[:, w > 0], axis=1) * (1 - 1e-12)):
                raise ValueError("global_caps must be ≥ every per-slice cap (it bounds the shift in every direction)")
            h = g[:, None]
            w = np.ones(1)
            prof = {"kind": "any", "replaced": prof}
            assum.append(
                Assumption(
                    "Slice-dependent caps replaced by a global ℓ2 cap; full-dimensional adaptive "
                    "composition gives RPP, hence every sliced notion",
                    f"{PAPER}, Prop B.1; digest §5.3 [D]",
                )
            )
        else:
            prof.setdefault("kind", "finite")
            prof["weights_sha256"] = caps_sha256(w)
            warns.append(
                "per-slice caps certified with the App. T caveat: Lemma T.1 is applied to the projected "
                "trajectory, conditioning on the projected history while the updates depend on the full "
                "history (digest §13.8); a global ℓ2 cap (slice_policy='global') avoids it"
            )
            assum.append(
                Assumption(
                    "Per-slice adaptive composition along the projected trajectory (App. T, Lemma T.1) "
                    "— caveat: the conditioning is on the projected history",
                    f"{PAPER}, App. T; digest §13.8",
                )
            )
    if subsampling_aware:
        assum.append(
            Assumption(
                "K̄_t² ≥ E_R[K_t²] for a.e. coupled pair (X, X′): a second-moment cap over the "
                "subsampling randomness only",
                f"{PAPER}, eq. (17), eq. (30), Prop 5.2",
            )
        )
        assum.append(
            Assumption(
                "The certified notion is on average over the subsampling pattern (E_η of the divergence "
                "given η); it does not bound the divergence of the released mixture",
                f"{PAPER}, Defs 5.4/5.5; digest §3.3",
            )
        )
    sigma2 = srpp_sgd_sigma2(h, alpha, epsilon, flavour, w, subsampling_aware=subsampling_aware)
    H = total_cap(h, flavour, w)
    if sigma2 == 0.0:
        warns.append("every cap is 0: the secret cannot move the updates; σ² = 0")
    if policy != "caveat" and flavour == "joint_exact":
        warns.append("caps are slice-independent: joint_exact equals joint")
    assum.extend(assumptions)
    return SRPPSGDCalibration(
        sigma2=float(sigma2),
        alpha=alpha,
        epsilon=epsilon,
        flavour=flavour,
        subsampling_aware=bool(subsampling_aware),
        steps=int(h.shape[0]),
        h_total=float(H),
        weights=w.copy(),
        caps_sha256=caps_sha256(h),
        caps_summary=_summary(h),
        caps=h.copy() if h.size <= _CAPS_INLINE_MAX else None,
        slice_policy=policy,
        profile=prof,
        noise_units=noise_units,
        injected=dict(injected or {}),
        discrepancy=dict(discrepancy or {}),
        sampling=dict(sampling or {}),
        lipschitz=dict(lipschitz or {}),
        clipping=dict(clipping or {}),
        failure_probability=fp,
        failure_breakdown=dict(failure_breakdown or {}),
        theorems=_theorems(flavour, bool(subsampling_aware), policy),
        assumptions=tuple(assum),
        warnings=tuple(warns),
    )


def calibrate_srpp_sgd_amplified(
    a,
    kappas,
    log_pmf,
    alpha: float,
    epsilon: float,
    flavour: str = "ave",
    *,
    noise_units: str = "parameter",
    injected: dict | None = None,
    discrepancy: dict | None = None,
    sampling: dict | None = None,
    lipschitz: dict | None = None,
    clipping: dict | None = None,
    failure_probability: float = 0.0,
    failure_breakdown: dict | None = None,
    assumptions: Sequence[Assumption] = (),
    warnings: Sequence[str] = (),
) -> SRPPSGDCalibration:
    """Worst-case (not on-average) SRPP-SGD calibration that still profits from subsampling:
    the shared-mixture envelopes of ZV25 App. J (Lemma J.1, eqs. 51/52, Prop J.1), evaluated with
    the order [D] "fix a coupled pair (X, X′), compose over steps, then take the ess sup over the
    coupling" (quasi-convexity), which avoids the sup/E problem of eq. (17) (digest §13.6).

    ``a``: (T,) slice-independent per-unit caps, the squared shift of step t being ≤ a_t κ_t²
    (a_t = (2 L_t C)² for a global ℓ2 bound); ``kappas``/``log_pmf``: the law of the normalised
    discrepancy κ_t of the worst coupled pair (e.g. K/B with K ~ Hypergeometric(N, D_max, B) for
    WOR; the law is stochastically increasing in the number of differing records). The result
    bounds the Rényi divergence of the *released* trajectory — with a global ℓ2 cap a full RPP bound,
    hence Ave- and Joint-SRPP for every profile (Prop B.1) — so it is labelled plain SRPP.
    """
    alpha = _check_alpha(alpha)
    epsilon = _check_epsilon(epsilon)
    flavour = _check_flavour(flavour)
    if noise_units not in ("parameter", "gradient"):
        raise ValueError(f"noise_units must be 'parameter' or 'gradient', got {noise_units!r}")
    A = _arr_nonneg("a", a).reshape(-1)
    if A.size == 0:
        raise ValueError("a has zero steps")
    k, lp = _check_law(kappas, log_pmf)
    fp = _num("failure_probability", failure_probability, lo=0.0, hi=1.0, hi_open=True)
    sigma2 = amplified_sigma2(A, k, lp, alpha, epsilon)
    kmax2 = float(np.max(k[lp > -np.inf] ** 2))
    h = (A * kmax2)[:, None]
    assum = (
        list(_BASE_ASSUMPTIONS)
        + [
            Assumption(
                "Per step, conditional on the history and on a fixed coupled pair (X, X′), the two output laws are "
                "mixtures over the same subsampling draw R_t; the Rényi divergence of shared mixtures is at most "
                "(1/(α−1)) log E_R exp((α−1) D_R)",
                f"{PAPER}, Lemma J.1, App. J eqs. (51)–(52)",
            ),
            Assumption(
                "The coupled pair is fixed first, the steps composed (Lemma T.1), and the ess sup over the coupling "
                "taken last (quasi-convexity of D_α); exchangeable sampling makes the law of K_t depend only on the "
                "number of differing records, and it is stochastically increasing in it",
                "dpspec [D], digest §13.6",
            ),
            Assumption(
                "A global ℓ2 cap on the per-step shift: the bound is a full-dimensional RPP bound, hence every "
                "sliced notion (Ave = Joint)",
                f"{PAPER}, Prop B.1; digest §5.3 [D]",
            ),
        ]
        + list(assumptions)
    )
    theorems = (
        f"{PAPER} Lemma J.1 (shared-mixture Rényi bound)",
        f"{PAPER} App. J eqs. (51)–(52), Prop J.1",
        f"{PAPER} Lemma T.1",
        f"{PAPER} Prop 5.1 (HUC per unit discrepancy)",
        "dpspec [D] pair-first order of sup and composition; global ℓ2 cap ⇒ RPP ⇒ every sliced notion",
    )
    amp = {
        "a": A.tolist() if A.size <= _CAPS_INLINE_MAX else None,
        "a_sha256": caps_sha256(A),
        "kappas": k.tolist(),
        "log_pmf": lp.tolist(),
        "kappa_max": math.sqrt(kmax2),
        "mean_kappa2": float(np.sum(np.exp(lp) * k**2)),
    }
    if amp["a"] is None:
        raise ValueError("more than 20,000 steps are not supported by the amplified accountant")
    return SRPPSGDCalibration(
        sigma2=float(sigma2),
        alpha=alpha,
        epsilon=epsilon,
        flavour=flavour,
        subsampling_aware=False,
        steps=int(A.size),
        h_total=float(np.sum(h)),
        weights=np.ones(1),
        caps_sha256=caps_sha256(h),
        caps_summary=_summary(h),
        caps=h.copy() if h.size <= _CAPS_INLINE_MAX else None,
        slice_policy="slice_independent",
        profile={"kind": "any"},
        noise_units=noise_units,
        injected=dict(injected or {}),
        discrepancy=dict(discrepancy or {}),
        sampling=dict(sampling or {}),
        lipschitz=dict(lipschitz or {}),
        clipping=dict(clipping or {}),
        failure_probability=fp,
        failure_breakdown=dict(failure_breakdown or {}),
        theorems=theorems,
        assumptions=tuple(assum),
        warnings=tuple(warnings),
        amplification=amp,
    )


# ----------------------------------------------------------------------------------------------
# composition (Thm 5.8)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SRPPSGDComposition:
    """J independently randomised SRPP-SGD runs on the same dataset: (α, Σ_j ε_j, ω)-Ξ-SRPP (Thm 5.8)."""

    alpha: float
    epsilon: float
    flavour: str
    subsampling_aware: bool
    profile: dict
    components: tuple[SRPPSGDCalibration, ...]
    failure_probability: float
    theorems: tuple[str, ...]
    assumptions: tuple[Assumption, ...]
    warnings: tuple[str, ...] = ()

    @property
    def notion(self) -> str:
        return notion_label(self.flavour, self.subsampling_aware)

    @property
    def notion_id(self) -> str:
        return notion_id(self.flavour, self.subsampling_aware)

    def to_dict(self) -> dict:
        return {
            "mechanism": "srpp_sgd_composition",
            "notion": self.notion,
            "notion_id": self.notion_id,
            "alpha": self.alpha,
            "epsilon": self.epsilon,
            "flavour": self.flavour,
            "subsampling_aware": self.subsampling_aware,
            "profile": _jsonable(self.profile),
            "components": [c.to_dict() for c in self.components],
            "failure_probability": self.failure_probability,
            "theorems": list(self.theorems),
            "assumptions": [a.to_dict() for a in self.assumptions],
            "warnings": list(self.warnings),
        }


def _profile_key(p: dict):
    return tuple(sorted((k, repr(v)) for k, v in p.items()))


def compose_srpp_sgd(results: Sequence[SRPPSGDCalibration]) -> SRPPSGDComposition:
    """Additive composition of HUC/sa-HUC-certified SRPP-SGD runs: ZV25 Thm 5.8 (App. V).

    Conditions (else DPS504): the same α, the same notion family (Ave vs Joint — "joint" and
    "joint_exact" are both Joint-SRPP), the same subsampling awareness (sa costs never mix with
    worst-case ones), and the same slice profile. A slice-independent result (profile kind "any")
    is valid for every profile, so it composes with any one finite profile. The runs' randomness
    (noise and minibatch draws) must be independent given the dataset — recorded as an assumption;
    for Joint the composed output is sliced per component with independent directions (App. V).
    """
    results = list(results)
    if not results:
        raise ValueError("no SRPP-SGD results to compose")
    for r in results:
        if not isinstance(r, SRPPSGDCalibration):
            raise SrppSoundnessError(
                f"only SRPP-SGD (HUC/sa-HUC) results compose by Thm 5.8, got {type(r).__name__}",
                rule="DPS504",
                hint="static SWM releases do not compose additively (DPS405)",
            )
    a0 = results[0].alpha
    fam = {("ave" if r.flavour == "ave" else "joint") for r in results}
    sa = {r.subsampling_aware for r in results}
    if any(r.alpha != a0 for r in results):
        raise SrppSoundnessError(
            "SRPP-SGD runs with different Rényi orders α do not compose (Thm 5.8 needs one α)",
            rule="DPS504",
            hint="re-evaluate every run at a common α with .epsilon_at(alpha) and recalibrate",
        )
    if len(fam) > 1:
        raise SrppSoundnessError(
            "Ave- and Joint-SRPP costs cannot be added (Thm 5.8 needs one flavour)",
            rule="DPS504",
            hint="calibrate every run with the same flavour",
        )
    if len(sa) > 1:
        raise SrppSoundnessError(
            "sa-SRPP (on-average) costs cannot be added to worst-case SRPP costs",
            rule="DPS504",
            hint="use the same accountant (huc or sa_huc) for every run",
        )
    finite = [r.profile for r in results if r.profile.get("kind") != "any"]
    if finite and len({_profile_key(p) for p in finite}) > 1:
        raise SrppSoundnessError(
            "SRPP-SGD runs with different slice profiles do not compose (Thm 5.8 needs one (𝒰, ω))",
            rule="DPS504",
            hint="use one slice profile, or a global ℓ2 cap (slice_policy='global')",
        )
    profile = finite[0] if finite else {"kind": "any"}
    flavour = "ave" if "ave" in fam else "joint"
    eps = _up(math.fsum(r.epsilon for r in results))
    fail = min(1.0, math.fsum(r.failure_probability for r in results))
    warns: list[str] = []
    for j, r in enumerate(results):
        warns.extend(f"run {j}: {w}" for w in r.warnings)
    assum = (
        Assumption(
            "The runs' primitive randomness (noise, minibatch draws) is independent across runs given the "
            "dataset; shared noise or shared batches are not covered",
            f"{PAPER}, Thm 5.8, App. V",
        ),
        Assumption(
            "For Joint, the composed output is sliced per component with independent directions U_j ~ ω",
            f"{PAPER}, App. V",
        ),
    )
    return SRPPSGDComposition(
        alpha=a0,
        epsilon=eps,
        flavour=flavour,
        subsampling_aware=sa.pop(),
        profile=profile,
        components=tuple(results),
        failure_probability=fail,
        theorems=(f"{PAPER} Thm 5.8",),
        assumptions=assum,
        warnings=tuple(warns),
    )
