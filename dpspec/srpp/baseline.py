"""The group-DP-SGD baseline of ZV25 §6.2 / App. W.3, accounted with the tight group amplification.

Group size: the number of records the secret can touch under the discrepancy model (K = Δ for the
fixed label-flip worlds, D_max for localized influence) — not the paper's ⌈√E[K²]⌉, which is 1 in
every setting of the paper (digest §11) and would make the "group" baseline plain DP-SGD.

Accounting: Poisson sampling at rate q, insertion/removal of a group of K records (the paper's
"add-remove adjacency"), Schuchardt et al. 2024 Thm 4.2 via
:func:`dpspec.accounting.poisson_gaussian_rdp` with ``group_size=K``. To compare on the same axis as
SRPP at order α, the noise multiplier is calibrated so that the group-RDP at the *same* α satisfies
T·ε_K(α) ≤ ε; the (ε, δ) group-DP value is reported alongside (:func:`dpspec.accounting.dpsgd_epsilon`).

⚠ A comparison, not a certificate for the secret: group DP does not imply SRPP (ZV25 Props G.1,
G.2), and a substitution of K records is two group steps in the insertion/removal relation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["GroupDpBaseline", "calibrate_group_dpsgd"]

THEOREM = "Schuchardt et al. 2024 Thm 4.2 (tight group amplification, Poisson), RDP composition (Mironov 2017)"


@dataclass(frozen=True)
class GroupDpBaseline:
    noise_multiplier: float  # std of the noise on the clipped sum / C
    group_size: int
    alpha: float
    rdp_epsilon: float  # T · ε_K(α) ≤ target
    target_epsilon: float
    rate: float
    steps: int
    delta: float | None
    dp_epsilon: float | None  # (ε, δ) group DP, Balle et al. 2020 conversion
    theorem: str = THEOREM

    def gradient_noise_std(self, clip: float, normalizer: float) -> float:
        """Std of the noise on the mean clipped gradient (sum / normalizer)."""
        return self.noise_multiplier * clip / normalizer

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def calibrate_group_dpsgd(
    alpha: float,
    epsilon: float,
    *,
    rate: float,
    steps: int,
    group_size: int,
    delta: float | None = 1e-5,
    rtol: float = 1e-4,
) -> GroupDpBaseline:
    """Smallest noise multiplier (within ``rtol``) with steps·RDP_K(α) ≤ ε (bisection on log σ)."""
    from dpspec.accounting import dpsgd_epsilon, poisson_gaussian_rdp

    alpha = float(alpha)
    epsilon = float(epsilon)
    if not alpha > 1:
        raise ValueError(f"alpha must be > 1, got {alpha!r}")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    if not (0 < float(rate) <= 1):
        raise ValueError(f"rate must lie in (0, 1], got {rate!r}")
    if int(steps) < 1 or int(group_size) < 1:
        raise ValueError("steps and group_size must be ≥ 1")
    T, K = int(steps), int(group_size)

    def eps(s):
        return T * float(poisson_gaussian_rdp(alpha, s, rate, group_size=K))

    lo, hi = 1e-2, 1.0
    while eps(hi) > epsilon:
        lo, hi = hi, hi * 4
        if hi > 1e7:
            raise ValueError("the target is unreachable with noise multiplier ≤ 1e7")
    if eps(lo) <= epsilon:
        lo = 1e-3
        if eps(lo) <= epsilon:
            hi = lo
    while hi / lo - 1 > rtol:
        mid = math.sqrt(lo * hi)
        if eps(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    dp = None
    if delta is not None:
        try:
            dp = float(dpsgd_epsilon(hi, rate, T, delta, sampling="poisson", group_size=K))
        except ValueError:
            dp = None
    return GroupDpBaseline(
        noise_multiplier=hi,
        group_size=K,
        alpha=alpha,
        rdp_epsilon=eps(hi),
        target_epsilon=epsilon,
        rate=float(rate),
        steps=T,
        delta=delta,
        dp_epsilon=dp,
    )
