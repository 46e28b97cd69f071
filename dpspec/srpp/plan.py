"""A training plan (sampling, optimizer, clipping, noise placement) and its calibration.

    plan = SrppSgdPlan(sampling=Sampling("wor", dataset_size=N, batch_size=B),
                       optimizer=OptimizerSpec(LrSchedule(0.2, T, "cosine", 0.05), momentum=0.9),
                       clip=4.0, noise_units="gradient")
    cal = calibrate(plan, FixedPairWorlds(N, 20), alpha=16, epsilon=8, flavour="ave",
                    accountant="sa_huc")
    plan.gradient_noise_std(cal)      # (T,) std of the noise added to the mean clipped gradient

Noise placement (digest §10 step 6, §13.1)
-----------------------------------------
The accountant of Thms 5.6/5.7 certifies noise N_t ~ 𝒩(0, σ² I) on the output of the per-step
query f_t. Two consistent placements are supported, and both inject the noise into the *gradient*
(before the momentum buffer) so that the released trajectory determines the optimizer state:

* ``noise_units="parameter"`` (the paper's convention): f_t is the parameter update, caps use
  L_t from the optimizer (App. C, W.2), σ is a parameter-space std, and the gradient noise at step t
  is σ / L_t (so the fresh parameter-space noise of step t is exactly σ).
* ``noise_units="gradient"`` (default): f_t is the mean clipped gradient ḡ_t (L ≡ 1); the update map
  is post-processing; the gradient noise is σ at every step. η_t cancels out of the guarantee.

Both give the same ε for the same realised noise (the per-step cost α h_t/(2 v_t) is unit-free);
the paper's "Opacus nm = σ·L/C" instead uses the parameter-space σ as a gradient-space std and
realises ε/η² (:func:`dpspec.accounting.huc.paper_noise_multiplier`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dpspec.accounting.huc import (
    PAPER,
    Assumption,
    SRPPSGDCalibration,
    SrppSoundnessError,
    amplified_epsilon,
    calibrate_srpp_sgd,
    calibrate_srpp_sgd_amplified,
    caps_sha256,
    srpp_sgd_epsilon_from_variances,
)

from .discrepancy import Cap, DiscrepancyModel
from .lipschitz import OptimizerSpec
from .sampling import Sampling

__all__ = ["SrppSgdPlan", "BlockProfile", "calibrate", "plan_caps", "unit_caps", "realized_epsilon"]

ACCOUNTANTS = ("huc", "sa_huc", "amplified")


@dataclass(frozen=True, eq=False)
class BlockProfile:
    """A finite slice profile in parameter space, stored through what the per-layer caps need: the
    block norms ‖P_e u_i‖ (m, E) of its m directions over the E parameter blocks (App. F.3).

    :meth:`sphere` draws u_i = g_i/‖g_i‖, g_i ~ 𝒩(0, I_d) (d = Σ d_e) with
    ``numpy.random.default_rng(seed)``, in row chunks; :meth:`explicit` takes given directions.
    """

    block_norms: np.ndarray
    weights: np.ndarray
    block_sizes: tuple[int, ...]
    seed: int | None = None
    kind: str = "sphere"

    @classmethod
    def sphere(cls, block_sizes, m: int, seed: int = 0) -> BlockProfile:
        sizes = tuple(int(x) for x in block_sizes)
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError("block_sizes must be positive integers")
        if int(m) < 1:
            raise ValueError(f"m (number of directions) must be ≥ 1, got {m!r}")
        rng = np.random.default_rng(seed)
        d = sum(sizes)
        edges = np.cumsum((0,) + sizes)
        out = np.empty((int(m), len(sizes)))
        chunk = max(1, int(4_000_000 // d))
        for r0 in range(0, int(m), chunk):
            g = rng.standard_normal((min(chunk, int(m) - r0), d))
            sq = np.add.reduceat(g * g, edges[:-1], axis=1)
            out[r0 : r0 + g.shape[0]] = np.sqrt(sq / sq.sum(axis=1, keepdims=True))
        return cls(out, np.full(int(m), 1.0 / int(m)), sizes, int(seed), "sphere")

    @classmethod
    def explicit(cls, directions, block_sizes, weights=None) -> BlockProfile:
        from dpspec.pufferfish.profiles import check_directions

        U = check_directions(directions)
        sizes = tuple(int(x) for x in block_sizes)
        if U.shape[1] != sum(sizes):
            raise ValueError(f"directions have dimension {U.shape[1]} but the blocks total {sum(sizes)}")
        edges = np.cumsum((0,) + sizes)
        norms = np.sqrt(np.add.reduceat(U * U, edges[:-1], axis=1))
        w = np.full(U.shape[0], 1.0 / U.shape[0]) if weights is None else np.asarray(weights, dtype=float)
        return cls(norms, w, sizes, None, "explicit")

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "m": int(self.block_norms.shape[0]),
            "blocks": len(self.block_sizes),
            "block_sizes_sha256": caps_sha256(np.asarray(self.block_sizes, dtype=float)),
            "block_norms_sha256": caps_sha256(self.block_norms),
            "weights_sha256": caps_sha256(self.weights),
            "seed": self.seed,
            "generator": "numpy.random.default_rng(seed).standard_normal, rows normalised, block norms",
        }


@dataclass(frozen=True, eq=False)
class SrppSgdPlan:
    """Everything about a training run the accountant depends on.

    ``clip``: flat ℓ2 clip norm C, or ``per_layer_clips`` (C_e, one per trainable parameter tensor in
    ``model.named_parameters()`` order; App. F). ``slice_policy`` for per-layer clipping: "global"
    (default; the Cauchy–Schwarz supremum Σ_e (C_e L_{t,e})², sound for every profile) or "caveat"
    (per-slice caps over ``profile``, App. T caveat recorded).
    """

    sampling: Sampling
    optimizer: OptimizerSpec
    clip: float | None = None
    per_layer_clips: tuple[float, ...] | None = None
    noise_units: str = "gradient"
    slice_policy: str = "global"
    profile: BlockProfile | None = None

    def __post_init__(self):
        if (self.clip is None) == (self.per_layer_clips is None):
            raise ValueError("give exactly one of clip (flat ℓ2 clipping) and per_layer_clips")
        if self.clip is not None:
            c = float(self.clip)
            if not math.isfinite(c) or c <= 0:
                raise ValueError(f"clip must be a finite number > 0, got {self.clip!r}")
            object.__setattr__(self, "clip", c)
        else:
            c = np.asarray(self.per_layer_clips, dtype=float)
            if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
                raise ValueError("per_layer_clips must be finite numbers > 0 (clip ≤ 0 is not allowed)")
            object.__setattr__(self, "per_layer_clips", tuple(float(x) for x in c))
            if self.optimizer.block_lr_scales is not None and len(self.optimizer.block_lr_scales) != c.size:
                raise ValueError("block_lr_scales and per_layer_clips must have one entry per parameter block")
        if self.noise_units not in ("parameter", "gradient"):
            raise ValueError(f"noise_units must be 'parameter' or 'gradient', got {self.noise_units!r}")
        if self.slice_policy not in ("global", "caveat"):
            raise ValueError(f"slice_policy must be 'global' or 'caveat', got {self.slice_policy!r}")
        if self.slice_policy == "caveat" and self.per_layer_clips is not None and self.profile is None:
            raise ValueError("slice_policy='caveat' with per-layer clipping needs a BlockProfile")
        if (
            self.profile is not None
            and self.per_layer_clips is not None
            and self.profile.block_norms.shape[1] != len(self.per_layer_clips)
        ):
            raise ValueError("the profile's blocks do not match per_layer_clips")
        if self.optimizer.block_lr_scales is not None and self.per_layer_clips is None:
            raise ValueError("block_lr_scales need per_layer_clips (one block structure)")

    @property
    def steps(self) -> int:
        return self.optimizer.steps

    @property
    def total_clip(self) -> float:
        """C for flat clipping, √Σ C_e² for per-layer clipping (the per-example ℓ2 bound)."""
        if self.clip is not None:
            return self.clip
        assert self.per_layer_clips is not None  # __post_init__: exactly one of clip and per_layer_clips
        return math.sqrt(sum(c * c for c in self.per_layer_clips))

    def lipschitz(self) -> np.ndarray:
        """L_t (T,) or L_{t,e} (T, E) in the units of the noise: from the optimizer (parameter units),
        or 1 (gradient units; App. C (i) with A = I)."""
        if self.noise_units == "gradient":
            if self.optimizer.block_lr_scales is not None:
                return np.ones((self.steps, len(self.optimizer.block_lr_scales)))
            return np.ones(self.steps)
        return self.optimizer.lipschitz()

    def gradient_noise_std(self, cal: SRPPSGDCalibration) -> np.ndarray:
        """Std of the Gaussian noise to add to the mean clipped gradient at each step: σ (gradient
        units) or σ / L_t (parameter units; (T, E) with per-block step sizes)."""
        if cal.noise_units != self.noise_units:
            raise SrppSoundnessError(
                f"the calibration is in {cal.noise_units} units but the plan places noise in {self.noise_units} units",
                rule="DPS508",
                hint="calibrate the plan you train with",
            )
        if cal.steps != self.steps:
            raise SrppSoundnessError(f"the calibration covers {cal.steps} steps, the plan {self.steps}", rule="DPS508")
        L = self.lipschitz()
        if self.noise_units == "gradient":
            return np.full(L.shape, cal.sigma)
        with np.errstate(divide="ignore"):
            return cal.sigma / L

    def gradient_noise_multiplier(self, cal: SRPPSGDCalibration) -> np.ndarray:
        """Opacus-style noise multiplier per step: std on the clipped *sum* divided by C = σ_g·B̄/C."""
        norm = self.sampling.normalizer
        if norm == 0.0:
            raise ValueError("no constant batch normaliser (Poisson with realised normalisation)")
        return self.gradient_noise_std(cal) * norm / self.total_clip

    def describe(self) -> dict:
        d = {
            "sampling": self.sampling.describe(),
            "optimizer": self.optimizer.describe(),
            "noise_units": self.noise_units,
            "slice_policy": self.slice_policy,
        }
        if self.clip is not None:
            d["clipping"] = {"kind": "flat_l2", "clip": self.clip}
        else:
            assert self.per_layer_clips is not None  # __post_init__: exactly one of clip and per_layer_clips
            d["clipping"] = {"kind": "per_layer", "clips": list(self.per_layer_clips), "total": self.total_clip}
        if self.profile is not None:
            d["profile"] = self.profile.describe()
        return d


def plan_caps(
    plan: SrppSgdPlan, model: DiscrepancyModel, accountant: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, Cap]:
    """(caps (T, m), weights (m,), global caps (T,) or None, the discrepancy Cap) for a plan.

    Flat clipping: h_t = (2 L_t C κ)² (Prop 5.1) or (2 L_t C)² κ̄² (Prop 5.2), slice-independent.
    Per-layer: h_{t,i} = (2κ)²(Σ_e C_e L_{t,e} ‖P_e u_i‖)² (App. F.3); global cap (2κ)² Σ_e (C_e L_{t,e})².
    """
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    if accountant == "amplified":
        raise ValueError("plan_caps is for the huc / sa_huc accountants; see unit_caps for 'amplified'")
    cap = model.huc_kappa(plan.sampling) if accountant == "huc" else model.sa_kappa2(plan.sampling)
    k2 = cap.value**2 if accountant == "huc" else cap.value  # sup κ² or sup E[κ²]
    L = plan.lipschitz()
    T = plan.steps
    if plan.clip is not None:
        h = 4.0 * k2 * (plan.clip * L) ** 2
        return h.reshape(T, 1), np.ones(1), None, cap
    C = np.asarray(plan.per_layer_clips)
    Lb = L if L.ndim == 2 else np.broadcast_to(L[:, None], (T, C.size))
    glob = 4.0 * k2 * np.sum((C[None, :] * Lb) ** 2, axis=1)
    if plan.slice_policy == "global" or plan.profile is None:
        return glob.reshape(T, 1), np.ones(1), glob, cap
    P = plan.profile.block_norms  # (m, E)
    s = (C[None, :] * Lb) @ P.T  # (T, m)
    return 4.0 * k2 * s**2, plan.profile.weights, glob, cap


def unit_caps(plan: SrppSgdPlan) -> np.ndarray:
    """a_t (T,): the global squared-shift cap per unit normalised discrepancy, (2 L_t C)² for flat
    clipping or 4 Σ_e (C_e L_{t,e})² for per-layer clipping (Cauchy–Schwarz)."""
    L = plan.lipschitz()
    if plan.clip is not None:
        return 4.0 * (plan.clip * L) ** 2
    C = np.asarray(plan.per_layer_clips)
    Lb = L if L.ndim == 2 else np.broadcast_to(L[:, None], (plan.steps, C.size))
    return 4.0 * np.sum((C[None, :] * Lb) ** 2, axis=1)


def _common_assumptions(plan: SrppSgdPlan) -> list:
    assum = []
    if plan.per_layer_clips is not None and plan.slice_policy == "global":
        assum.append(
            Assumption(
                "Per-layer clipping bounds the per-example ℓ2 shift by √Σ_e (C_e L_{t,e})² "
                "(Cauchy–Schwarz over blocks); used as a global cap",
                f"{PAPER}, App. F.3 [D]",
            )
        )
    if plan.noise_units == "gradient":
        assum.append(
            Assumption(
                "Gradient-space placement: the per-step query is the mean clipped gradient (L = 1) and "
                "the optimizer is post-processing of the noisy gradients",
                f"{PAPER}, App. C (i) with A = I; digest §10 step 6",
            )
        )
    else:
        assum.append(
            Assumption(
                "Parameter-space placement: gradient noise σ/L_t enters before the momentum buffer, so "
                "the fresh parameter-space noise of every step is 𝒩(0, σ² I)",
                f"{PAPER}, Lemma 5.1, App. W.2; digest §13.1",
            )
        )
    if plan.sampling.scheme == "poisson":
        assum.append(
            Assumption(
                f"Poisson sampling normalised by {plan.sampling.normalization} batch size"
                + (
                    "" if plan.sampling.normalization == "expected" else f", empty batches: {plan.sampling.empty_batch}"
                ),
                f"{PAPER}, App. E",
            )
        )
    return assum


def _with_injected(plan: SrppSgdPlan, cal: SRPPSGDCalibration) -> SRPPSGDCalibration:
    std = plan.gradient_noise_std(cal)
    inj = {
        "space": "mean clipped gradient",
        "std_first": float(np.ravel(std)[0]),
        "std_last": float(np.ravel(std)[-1]),
        "std_min": float(np.min(std)),
        "std_max": float(np.max(std)),
        "std_sha256": caps_sha256(std),
    }
    if plan.sampling.normalizer > 0:
        nm = plan.gradient_noise_multiplier(cal)
        inj.update(
            {
                "noise_multiplier_first": float(np.ravel(nm)[0]),
                "noise_multiplier_max": float(np.max(nm)),
                "normalizer": plan.sampling.normalizer,
            }
        )
    return dataclasses.replace(cal, injected=inj)


def calibrate(
    plan: SrppSgdPlan,
    model: DiscrepancyModel,
    *,
    alpha: float,
    epsilon: float,
    flavour: str = "ave",
    accountant: str = "sa_huc",
) -> SRPPSGDCalibration:
    """Calibrate σ² for a plan and a discrepancy model.

    ``accountant``: "huc" (Thm 5.6, worst case), "sa_huc" (Thm 5.7, the on-average sa notion) or
    "amplified" (worst-case SRPP with the App. J shared-mixture envelopes; global caps only).
    """
    if accountant == "amplified":
        return _calibrate_amplified(plan, model, alpha, epsilon, flavour)
    h, w, glob, cap = plan_caps(plan, model, accountant)
    T = plan.steps
    fail = cap.per_step_failure * T + cap.once_failure
    breakdown = {}
    if cap.per_step_failure:
        breakdown["tail_caps_sum_delta_t"] = cap.per_step_failure * T
    if cap.once_failure:
        breakdown["once"] = cap.once_failure
    if fail >= 1.0:
        raise ValueError(f"the caps' total failure probability {fail:g} is ≥ 1 (T·δ_t + γ); lower tail_delta")
    warns = list(cap.warnings)
    assum = list(cap.assumptions)
    per_layer = plan.per_layer_clips is not None
    policy = None
    if per_layer and plan.slice_policy == "caveat" and plan.profile is not None:
        policy = "caveat"
    assum += _common_assumptions(plan)
    cal = calibrate_srpp_sgd(
        h,
        alpha,
        epsilon,
        flavour,
        subsampling_aware=(accountant == "sa_huc"),
        weights=w,
        slice_policy=policy,
        global_caps=glob if policy == "global" else None,
        profile=plan.profile.describe() if (plan.profile is not None and policy == "caveat") else None,
        noise_units=plan.noise_units,
        discrepancy={
            **model.describe(),
            "cap": {"kind": cap.kind, "value": cap.value, "source": cap.source, "details": cap.details},
        },
        sampling=plan.sampling.describe(),
        lipschitz=plan.optimizer.describe()
        if plan.noise_units == "parameter"
        else {"units": "gradient", "L": 1.0, "optimizer": plan.optimizer.describe()},
        clipping=plan.describe()["clipping"],
        failure_probability=fail,
        failure_breakdown=breakdown,
        assumptions=assum,
        warnings=warns,
    )
    return _with_injected(plan, cal)


def _calibrate_amplified(plan, model, alpha, epsilon, flavour) -> SRPPSGDCalibration:
    if plan.per_layer_clips is not None and plan.slice_policy == "caveat":
        raise SrppSoundnessError(
            "the amplified accountant needs a global ℓ2 cap",
            rule="DPS503",
            hint="use slice_policy='global' with per-layer clipping",
        )
    k, lp, cap = model.kappa_law(plan.sampling)
    a = unit_caps(plan)
    fail = cap.once_failure
    cal = calibrate_srpp_sgd_amplified(
        a,
        k,
        lp,
        alpha,
        epsilon,
        flavour,
        noise_units=plan.noise_units,
        discrepancy={
            **model.describe(),
            "law": {"source": cap.source, "kappa_max": float(k.max()), "support": int(k.size), "details": cap.details},
        },
        sampling=plan.sampling.describe(),
        lipschitz=plan.optimizer.describe()
        if plan.noise_units == "parameter"
        else {"units": "gradient", "L": 1.0, "optimizer": plan.optimizer.describe()},
        clipping=plan.describe()["clipping"],
        failure_probability=fail,
        failure_breakdown={"once": fail} if fail else {},
        assumptions=list(cap.assumptions) + _common_assumptions(plan),
        warnings=list(cap.warnings),
    )
    return _with_injected(plan, cal)


def realized_epsilon(
    plan: SrppSgdPlan,
    model: DiscrepancyModel,
    gradient_noise_std,
    *,
    alpha: float,
    flavour: str = "ave",
    accountant: str = "sa_huc",
) -> float:
    """ε certified for noise that was *actually* injected: parameter-space caps (L_t from the
    optimizer) against parameter-space variances v_t = (L_t σ_{g,t})² (Lemma 5.1, Thm 5.6/5.7 proofs).

    Unit-independent: it must reproduce the target ε for either placement, and it exposes the
    paper's 1/η under-noising (ε/η²) when a parameter-space σ is injected as a gradient std.
    """
    p_plan = dataclasses.replace(plan, noise_units="parameter")
    L = p_plan.lipschitz()
    g = np.asarray(gradient_noise_std, dtype=float)
    if L.ndim == 2:
        # per-block step sizes: the per-slice variance Σ_e v_e ‖P_e u‖² is ≥ the smallest block variance
        gb = g[:, None] if g.ndim == 1 else g
        v = np.min((L * np.broadcast_to(gb, L.shape)) ** 2, axis=1)
    else:
        v = (L * np.broadcast_to(g, L.shape)) ** 2
    if accountant == "amplified":
        k, lp, _ = model.kappa_law(plan.sampling)
        return amplified_epsilon(1.0, unit_caps(p_plan) / v, k, lp, alpha)
    h, w, glob, cap = plan_caps(p_plan, model, accountant)
    if plan.per_layer_clips is not None and plan.slice_policy == "global":
        assert glob is not None  # plan_caps returns the global caps under per-layer clipping
        h = glob[:, None]
        w = np.ones(1)
    return srpp_sgd_epsilon_from_variances(h, v, alpha, flavour, w)
