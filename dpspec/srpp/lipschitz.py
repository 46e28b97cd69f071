"""Step-size schedules and the Lipschitz constants of SGD-type update maps (ZV25 §5.1, App. C, F.2, W.2).

The HUC of Prop 5.1 needs L_t with |u_iᵀ(T_t(z; y) − T_t(z′; y))| ≤ L_{t,i}·|u_iᵀ(z − z′)| for the
update map T_t of step t in its gradient argument z, uniformly over histories (Assumption 5.2):

* plain SGD, T_t(z) = ξ_{t−1} − η_t z: L_t = η_t (App. C (i), A_t = η_t I);
* heavy-ball momentum (torch semantics, buf_t = μ buf_{t−1} + z, ξ_t = ξ_{t−1} − η_t buf_t):
  T_t(z) = ξ_{t−1} − η_t(μ v_{t−1} + z), L_t = η_t (App. W.2) — *provided* the history determines
  v_{t−1}; with the noise entering the gradient (the runtime here), buf_{t−1} = (ξ_{t−2} − ξ_{t−1})/η_{t−1},
  which needs η_{t−1} > 0 [D];
* Nesterov (torch): ξ_t = ξ_{t−1} − η_t((1 + μ) z + μ² v_{t−1}): L_t = η_t (1 + μ) [D, App. C (i)];
* coupled weight decay adds λ ξ_{t−1} (a function of the history): L unchanged;
* a proximal step or a projection after the update: L unchanged (1-Lipschitz maps, App. C (ii));
* per-block step sizes η_{t,e} = s_e η_t: L_{t,e} = s_e η_t (App. F.2, Assumption F.1).

Adaptive methods (Adam, RMSprop, …) have data-dependent preconditioners with sup ‖A_t‖_op = η/ε_adam
in the worst case; they are refused here (DPS509). With gradient-space noise units the optimizer
is post-processing of the noisy gradients and no Lipschitz constant is needed (L ≡ 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpspec.accounting.huc import PAPER, SrppSoundnessError

__all__ = ["LrSchedule", "OptimizerSpec", "optimizer_spec_from_torch"]


@dataclass(frozen=True)
class LrSchedule:
    """Step sizes η_t, t = 0..steps−1.

    ``kind="constant"``: η_t = base_lr. ``kind="cosine"``: linear warm-up η_t = base_lr·(t+1)/W for
    t < W = round(warmup_frac·steps), then η_t = final_lr + (base_lr − final_lr)·½(1 + cos(π (t−W)/(steps−W)))
    — every η_t > 0 (the last step stays above final_lr), as momentum in parameter units requires.
    """

    base_lr: float
    steps: int
    kind: str = "constant"
    warmup_frac: float = 0.0
    final_lr: float = 0.0

    def __post_init__(self):
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 1:
            raise ValueError(f"steps must be an integer ≥ 1, got {self.steps!r}")
        object.__setattr__(self, "steps", int(self.steps))
        b = float(self.base_lr)
        if not math.isfinite(b) or b <= 0:
            raise ValueError(f"base_lr (learning rate) must be a finite number > 0, got {self.base_lr!r}")
        if self.kind not in ("constant", "cosine"):
            raise ValueError(f"kind must be 'constant' or 'cosine', got {self.kind!r}")
        if not (0.0 <= float(self.warmup_frac) < 1.0):
            raise ValueError(f"warmup_frac must lie in [0, 1), got {self.warmup_frac!r}")
        if not (0.0 <= float(self.final_lr) <= b):
            raise ValueError(f"final_lr must lie in [0, base_lr], got {self.final_lr!r}")

    @property
    def warmup_steps(self) -> int:
        return int(round(self.warmup_frac * self.steps)) if self.kind == "cosine" else 0

    def array(self) -> np.ndarray:
        T = self.steps
        t = np.arange(T, dtype=float)
        if self.kind == "constant":
            return np.full(T, float(self.base_lr))
        W = self.warmup_steps
        out = np.empty(T)
        if W > 0:
            out[:W] = self.base_lr * (t[:W] + 1.0) / W
        rest = t[W:] - W
        span = max(T - W, 1)
        out[W:] = self.final_lr + (self.base_lr - self.final_lr) * 0.5 * (1.0 + np.cos(math.pi * rest / span))
        return out

    def lr(self, t: int) -> float:
        return float(self.array()[int(t)])

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "base_lr": float(self.base_lr),
            "steps": self.steps,
            "warmup_frac": float(self.warmup_frac),
            "final_lr": float(self.final_lr),
        }


@dataclass(frozen=True)
class OptimizerSpec:
    """SGD (torch.optim.SGD semantics) with optional momentum, Nesterov, coupled weight decay and
    per-block step-size scales; ``schedule`` gives η_t."""

    schedule: LrSchedule
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    block_lr_scales: tuple[float, ...] | None = None
    kind: str = "sgd"

    def __post_init__(self):
        if self.kind != "sgd":
            raise SrppSoundnessError(
                f"optimizer {self.kind!r} has no certified Lipschitz constant for the parameter-space HUC",
                rule="DPS509",
                hint="use SGD (with momentum), or noise_units='gradient' (the optimizer is then "
                "post-processing of the noisy gradients)",
            )
        if not (0.0 <= float(self.momentum) < 1.0):
            raise ValueError(f"momentum must lie in [0, 1), got {self.momentum!r}")
        if self.nesterov and self.momentum == 0.0:
            raise ValueError("nesterov requires momentum > 0")
        if not (0.0 <= float(self.weight_decay)) or not math.isfinite(float(self.weight_decay)):
            raise ValueError(f"weight_decay must be a finite number ≥ 0, got {self.weight_decay!r}")
        if self.block_lr_scales is not None:
            s = np.asarray(self.block_lr_scales, dtype=float)
            if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)) or np.any(s <= 0):
                raise ValueError("block_lr_scales must be positive finite numbers, one per parameter block")
            object.__setattr__(self, "block_lr_scales", tuple(float(x) for x in s))

    @property
    def steps(self) -> int:
        return self.schedule.steps

    def gain(self) -> float:
        """Factor multiplying η_t z in the update: 1 (SGD, heavy ball) or 1 + μ (Nesterov)."""
        return 1.0 + float(self.momentum) if self.nesterov else 1.0

    def lipschitz(self) -> np.ndarray:
        """L_t (T,) or L_{t,e} (T, E) for per-block step sizes — App. C (i), W.2, F.2."""
        eta = self.schedule.array() * self.gain()
        if self.momentum > 0 and np.any(eta <= 0):
            raise SrppSoundnessError(
                "a zero step size with momentum: the history no longer determines the momentum buffer, so the "
                "per-step query is not a function of the released trajectory",
                rule="DPS509",
                hint="use a schedule with η_t > 0 for every step, or noise_units='gradient'",
            )
        if self.block_lr_scales is None:
            return eta
        return eta[:, None] * np.asarray(self.block_lr_scales)[None, :]

    def theorem(self) -> str:
        if self.nesterov:
            return f"{PAPER} App. C (i) with A_t = η_t(1+μ) I (Nesterov momentum) [D]"
        if self.momentum > 0:
            return f"{PAPER} App. W.2 (SGD with momentum: L_t = η_t)"
        if self.block_lr_scales is not None:
            return f"{PAPER} App. F.2 (per-block step sizes, Assumption F.1)"
        return f"{PAPER} App. C (i) (SGD: L_t = η_t)"

    def describe(self) -> dict:
        L = self.lipschitz()
        return {
            "optimizer": "sgd",
            "momentum": float(self.momentum),
            "nesterov": bool(self.nesterov),
            "weight_decay": float(self.weight_decay),
            "block_lr_scales": self.block_lr_scales,
            "schedule": self.schedule.describe(),
            "L_max": float(np.max(L)),
            "L_min": float(np.min(L)),
            "theorem": self.theorem(),
        }


def optimizer_spec_from_torch(optimizer, schedule: LrSchedule) -> OptimizerSpec:
    """Read a ``torch.optim.SGD`` (single param group or identical groups) into an :class:`OptimizerSpec`.

    Anything else raises DPS509; dampening must be 0 (torch's default).
    """
    name = type(optimizer).__name__
    if name != "SGD":
        raise SrppSoundnessError(
            f"optimizer {name} has no certified Lipschitz constant",
            rule="DPS509",
            hint="use torch.optim.SGD, or noise_units='gradient'",
        )
    groups = optimizer.param_groups
    keys = ("momentum", "nesterov", "weight_decay", "dampening")
    first = {k: groups[0].get(k, 0) for k in keys}
    for g in groups[1:]:
        if any(g.get(k, 0) != first[k] for k in keys):
            raise ValueError("param groups with different momentum/nesterov/weight_decay are not supported")
    if first["dampening"]:
        raise SrppSoundnessError("SGD dampening ≠ 0 is not supported", rule="DPS509", hint="set dampening=0")
    if groups[0].get("maximize", False):
        raise ValueError("maximize=True is not supported")
    return OptimizerSpec(
        schedule=schedule,
        momentum=float(first["momentum"]),
        nesterov=bool(first["nesterov"]),
        weight_decay=float(first["weight_decay"]),
    )
