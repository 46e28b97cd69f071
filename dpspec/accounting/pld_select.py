"""The PLD of a DP-SGD run as the compiler certifies it (automatic grid), for the compiler, the ledger,
the audits and the plots alike, so that every consumer re-evaluates the same construction.

``sampling`` uses the RDP accountants' names ("poisson", "wor", "wor_substitution"); a full batch is
"poisson" at rate 1 (exact μ-GDP). Returns None where no PLD pair is implemented.
"""

from __future__ import annotations

import math

SAMPLINGS = ("poisson", "wor", "wor_substitution")


def dpsgd_pld(
    sigma: float, rate: float, steps: int, sampling: str, group_size: int = 1, dataset_size: int | None = None
):
    from .pld import pld_dpsgd

    if sampling not in SAMPLINGS:
        return None
    try:
        return pld_dpsgd(
            sigma,
            rate,
            steps,
            sampling=sampling,
            group_size=group_size,
            dataset_size=dataset_size if sampling != "poisson" else None,
        )
    except (ValueError, KeyError):
        return None


def dpsgd_pld_epsilon(
    sigma: float,
    rate: float,
    steps: int,
    delta: float,
    sampling: str,
    group_size: int = 1,
    dataset_size: int | None = None,
) -> float:
    """Certified PLD ε at ``delta`` (∞ where PLD does not apply or cannot evaluate it)."""
    pld = dpsgd_pld(sigma, rate, steps, sampling, group_size, dataset_size)
    if pld is None:
        return math.inf
    try:
        e = float(pld.epsilon(delta).epsilon)
    except (ValueError, OverflowError, ArithmeticError, MemoryError):
        return math.inf
    return e if math.isfinite(e) else math.inf
