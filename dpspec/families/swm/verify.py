"""The SWM family's own re-check for ``dpspec verify`` (``Family.reverify`` in :mod:`dpspec.families`).

Read as data only: the numbers come from a certificate result that recompiled equal; nothing in it
is evaluated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def reverify(r: Any, problem: Callable[[str], None], bound: Callable[..., None], rel_tol: float) -> None:
    """Re-evaluate the SWM guarantee from the recorded Δ with mpmath, independently of the accountant:
    Ave (Thm 4.5 / eq. 10), Joint exact (eq. 11), and their Monte-Carlo forms (Thms 4.7/4.8)."""
    import mpmath as mp

    sv = r.sensitivity
    if sv is None:
        return
    p = r.mechanism.parameters
    alpha, sigma2 = mp.mpf(r.guarantee.alpha), mp.mpf(p["sigma2"])
    rows = sv.instance_deltas or [sv.deltas]
    w = [mp.mpf(x) for x in sv.weights]
    flavour = p["flavour"]
    with mp.workdps(40):
        if sigma2 == 0:
            if any(d != 0 for row in rows for d in row):
                problem(f"{r.name}: σ² = 0 (no noise) with a nonzero sensitivity")
            return
        c = alpha * (alpha - 1) / (2 * sigma2)
        if flavour == "ave":
            vals = [alpha * mp.fsum(wi * mp.mpf(d) ** 2 for wi, d in zip(w, row)) / (2 * sigma2) for row in rows]
        else:
            vals = [
                mp.log(mp.fsum(wi * mp.exp(c * mp.mpf(d) ** 2) for wi, d in zip(w, row))) / (alpha - 1) for row in rows
            ]
        if "gamma" in p:
            gamma, d0 = mp.mpf(p["gamma"]), mp.mpf(p["delta0"])
            t = mp.sqrt(mp.log(4 * len(rows) / gamma) / (2 * len(w)))
            if flavour == "ave":
                vals = [v + alpha * d0**2 * t / (2 * sigma2) for v in vals]
            else:
                vals = [mp.log(mp.exp(v * (alpha - 1)) + mp.expm1(c * d0**2) * t) / (alpha - 1) for v in vals]
            vals = [min(v, alpha * d0**2 / (2 * sigma2)) for v in vals]
        exact = max(vals)
        bound(
            r.name,
            f"{flavour} SRPP level from the recorded Δ (mpmath)",
            f"α = {float(alpha):g}",
            r.guarantee.epsilon,
            exact,
            rel_tol * max(1.0, float(exact)),
        )
