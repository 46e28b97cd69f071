"""The Wasserstein family's re-check for ``dpspec verify`` (``Family.reverify``): from the recorded numbers
only (nothing evaluated), with exact rational arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any


def reverify(r: Any, problem: Callable[[str], None], bound: Callable[..., None], rel_tol: float) -> None:
    """ε = max_k W / (scale_k / range_k) — each coordinate's Laplace scale must be at least (W / ε)·range_k
    (Theorem W of PROOF.md); the recorded W must be the aggregate factor times the recorded per-record W∞ and
    at least every recorded per-instance value (times the factor)."""
    p = r.mechanism.parameters
    q = r.query
    sv = r.sensitivity
    if q is None or sv is None:
        problem(f"{r.name}: a Wasserstein certificate needs its query and sensitivity records")
        return
    W = Fraction(p["w_inf"])
    c = Fraction(p.get("aggregate_factor", 1.0))
    inst = [Fraction(row[0]) for row in sv.instance_deltas]
    if inst and W < c * max(inst) * (1 - Fraction(1, 10**12)):
        problem(f"{r.name}: recorded W∞ {float(W):.6g} is below the aggregate factor times the per-instance maximum")
    if "w_inf_conditional" in p:
        # Lemma D: a proportion secret's instance (p, p′) is m(n, p, p′) · w, m recomputed in exact arithmetic
        from dpspec.pufferfish.share import binomial_w_inf

        w = Fraction(p["w_inf_conditional"])
        pairs = list(sv.pairs or [])
        if not pairs or len(inst) % len(pairs):
            problem(f"{r.name}: the instances do not match the proportion secret's pairs")
            return
        for i, v in enumerate(inst):
            a, b = pairs[i % len(pairs)]
            m = binomial_w_inf(int(sv.records), str(a), str(b))
            if v < m * w * (1 - Fraction(1, 10**12)):
                problem(f"{r.name}: instance ({a}, {b}) is below m(n, p, p′) = {m} times the conditional W∞")
    if "mean_shift_weight" in p:
        # Lemma E: a mean secret's instance (μ, μ′) is n·|μ − μ′|·Σ w_k, recomputed in exact arithmetic
        w = Fraction(p["mean_shift_weight"])
        pairs = list(sv.pairs or [])
        if not pairs or len(inst) % len(pairs):
            problem(f"{r.name}: the instances do not match the mean secret's pairs")
            return
        for i, v in enumerate(inst):
            a, b = pairs[i % len(pairs)]
            shift = int(sv.records) * abs(Fraction(str(a)) - Fraction(str(b)))
            if v < shift * w * (1 - Fraction(1, 10**12)):
                problem(f"{r.name}: instance ({a}, {b}) is below n·|μ − μ′| = {float(shift):g} times the weight")
        col = p.get("mean_of")
        cols, bnds = list(q.columns or []), list(q.bounds or [])
        if col not in cols or len(bnds) != len(cols):
            problem(f"{r.name}: a mean secret's column {col!r} is not among the query's bounded columns")
        else:
            # the weight of a unit shift: Σ 1/range_k over the query's coordinates on the secret's column
            need = sum((1 / (Fraction(hi) - Fraction(lo)) for c, (lo, hi) in zip(cols, bnds) if c == col), Fraction(0))
            if w < need * (1 - Fraction(1, 10**12)):
                problem(f"{r.name}: the recorded shift weight {float(w):.6g} is below Σ 1/range = {float(need):.6g}")
    if q.function == "histogram":
        ranges = [Fraction(1)] * int(p["dimension"])
    else:
        ranges = [Fraction(hi) - Fraction(lo) for lo, hi in q.bounds]
    if len(ranges) != int(p["dimension"]):
        problem(f"{r.name}: {len(ranges)} ranges for dimension {p['dimension']}")
        return
    worst = Fraction(0)
    for k, rk in enumerate(ranges):
        b = Fraction(p[f"scale_{k}"])
        if b <= 0:
            if W > 0:
                problem(f"{r.name}: coordinate {k} has no noise but W∞ = {float(W):.6g} > 0")
            continue
        worst = max(worst, W * rk / b)
    bound(
        r.name,
        "ε of the Laplace scales for the recorded W∞ (exact rationals)",
        "pure ε",
        r.guarantee.epsilon,
        float(worst),
        rel_tol * max(1.0, float(worst)),
    )
