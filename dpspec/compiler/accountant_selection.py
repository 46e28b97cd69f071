"""Accountant selection for stepped trainings and compositions: the certified ε is the minimum over every valid
accountant (RDP and PLD), each candidate listed in the certificate (``TargetCertificate.accounting``).

Why the minimum is sound: each candidate is an upper bound on the same mechanism's privacy profile
δ(ε) for the same neighbouring relation (RDP: Mironov 2017 Prop. 1 + Balle et al. 2020 Thm 21; PLD:
composition of dominating pairs, Zhu, Dong & Wang 2022 Thm 10, with the pessimistic discretisation and
stated numerical error included in δ, see docs/accounting-pld.md), so the smaller one is an upper bound
too. Each δ of the certificate takes its own minimum.

Where PLD applies (a family's compile builds its PLD, e.g. ``dpspec/families/dpsgd/compile.py``): DP-SGD with
Poisson sampling (add/remove; groups of K via the Poisson group-K dominating pair), fixed batches without
replacement (add/remove and substitution) and full batch (exact μ-GDP, μ = K√T/σ); compositions whose parts
all have a PLD under one relation (:func:`compose_pld`). Rényi-DP guarantees, SRPP-SGD, relational DP-SGD,
GCON and SWM stay on their own accountants. The analytic Gaussian release is exact (μ-GDP), so no other
accountant is added there.

Calibration (DP-SGD's ``calibrate_sigma``): σ from ``calibrate_pld_sigma`` (certified PLD ε ≤ target), then
the minimum of RDP and PLD at that σ is certified (≤ the PLD ε ≤ target).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from dpspec.certificate.model import AccountantCandidate, AccountingRecord, DpPoint, PldNumerics

#: δ at which the certified (ε, δ) curve is reported (plus the spec's δ), so results compare across papers
CURVE_DELTAS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)

MIN_RULE = (
    "certified ε = minimum over the valid accountants at each δ (each candidate is an upper bound on "
    "the same privacy profile under the same relation)"
)
GAUSSIAN_TIGHT = (
    "tight: the Gaussian mechanism is exactly μ-GDP (Dong, Roth & Su 2022 Cor. 2.13) and its "
    "privacy profile δ(ε) is exact (Balle & Wang 2018 Thm 8); no accountant can certify less"
)
FULL_BATCH_TIGHT = (
    "tight: an adaptive composition of Gaussian mechanisms (full-batch DP-SGD: T steps of "
    "sensitivity K, μ = K√T/σ; with Gaussian releases μ = √Σμᵢ²) is exactly μ-GDP (Dong, Roth & Su "
    "2022 Cor. 3.3); the PLD candidate evaluates its exact profile"
)


def compose_pld(parts: Iterable):
    """PLD of a composition when every part carries one under the same relation, else None."""
    from dpspec import accounting as acc

    found = [getattr(p, "pld", None) for p in parts]
    plds = [p for p in found if p is not None]
    if not found or len(plds) < len(found):
        return None
    try:
        return acc.pld_compose(*plds)
    except ValueError:
        return None


def gaussian_release_pld(sigma: float, sensitivity: float, relation: str | None, K: int = 1, kind: str = "record"):
    """The Gaussian release as a PLD part of a composition (exact μ-GDP pair), named by the relation
    its sensitivity was computed for (so that it composes only with parts of the same relation)."""
    from dpspec import accounting as acc

    return acc.pld_gaussian(sigma, sensitivity=sensitivity, relation=relation_name(relation, K, kind))


def relation_name(relation: str | None, K: int = 1, kind: str = "record") -> str:
    """The PLD relation name of a unit: DP-SGD's names for records and groups; any other unit (node, edge,
    secret) gets its own name, so it never composes with a record-level PLD."""
    if kind not in ("record", "group") or relation is None:
        return f"unit_{kind or 'unknown'}_{relation or 'none'}"
    rel = relation
    if rel == "add_remove" and K > 1:
        return f"add_remove_group_{K}"
    return rel


def _deltas(dp_deltas: list[float]) -> list[float]:
    return sorted(set(CURVE_DELTAS) | set(dp_deltas), reverse=True)


def select(rdp_eps_at, dp_deltas: list[float], pld, *, floor=lambda e: e) -> tuple[list[DpPoint], AccountingRecord]:
    """Certify min(RDP, PLD) at every δ.

    ``rdp_eps_at(δ)``: the RDP candidate's certified ε at δ (already floored as the certificate records it);
    ``pld``: a :class:`dpspec.accounting.Pld` or None; ``floor``: applied to PLD ε (never 0 for a nonzero
    sensitivity). Returns the ``guarantee.dp`` points (at ``dp_deltas``, in order) and the accounting record."""
    deltas = _deltas(dp_deltas)
    rdp = {d: float(rdp_eps_at(d)) for d in deltas}
    pres = {}
    if pld is not None:
        try:
            curve = pld.curve(deltas)
            pres = {float(d): r for d, r in zip(curve.deltas, curve.results)}
        except (ValueError, OverflowError, ArithmeticError, MemoryError):  # out of PLD's range: RDP certifies
            pld = None
    pl = {d: float(floor(r.epsilon)) for d, r in pres.items() if math.isfinite(r.epsilon)}

    def best(d):
        if d in pl and pl[d] < rdp[d]:
            return "pld", pl[d]
        return "rdp", rdp[d]

    points = [DpPoint(epsilon=best(d)[1], delta=d) for d in dp_deltas]
    cands = []
    for d in dp_deltas:
        cands.append(AccountantCandidate(accountant="rdp", delta=d, epsilon=rdp[d]))
        if d in pl:
            cands.append(AccountantCandidate(accountant="pld", delta=d, epsilon=pl[d]))
    numerics = None
    if pld is not None and dp_deltas and dp_deltas[0] in pres:
        r = pres[dp_deltas[0]]
        numerics = PldNumerics(
            relation=r.relation,
            discretization=float(r.discretization),
            delta_error=float(r.delta_error),
            fft_length=int(r.fft_length),
            by_direction=[(str(x[0]), float(x[1]), float(x[2]) if len(x) > 2 else 0.0) for x in r.by_direction],
            theorem=r.theorem,
            method=r.method + "; the error budget delta_error is included "
            "in the certified δ (no truncated mass is dropped: tails are rounded onto the grid "
            "ends and +∞)",
        )
    mu = pld.gdp_mu if pld is not None else None
    record = AccountingRecord(
        accountant=best(dp_deltas[0])[0] if dp_deltas else "rdp",
        rule=MIN_RULE if pld is not None else "RDP is the only valid accountant here",
        candidates=cands,
        curve=[DpPoint(epsilon=best(d)[1], delta=d) for d in deltas],
        gdp_mu=float(mu) if mu is not None else None,
        tight=FULL_BATCH_TIGHT if mu is not None else None,
        pld=numerics,
    )
    return points, record


def rdp_only(
    dp_points: list[DpPoint], curve_points: list[DpPoint] | None = None, note: str | None = None
) -> AccountingRecord:
    """The record of a result certified by RDP alone (Rényi guarantees, compositions without a common PLD)."""
    return AccountingRecord(
        accountant="rdp",
        rule=note or "RDP is the only valid accountant here",
        candidates=[AccountantCandidate(accountant="rdp", delta=p.delta, epsilon=p.epsilon) for p in dp_points],
        curve=list(curve_points or []),
    )


def gaussian_record(mu: float, eps_of_delta, dp_deltas: list[float]) -> AccountingRecord:
    """The analytic Gaussian (a release, or a composition of Gaussians): exact, μ-GDP."""
    deltas = _deltas(dp_deltas)
    return AccountingRecord(
        accountant="analytic_gaussian",
        rule=GAUSSIAN_TIGHT,
        candidates=[
            AccountantCandidate(accountant="analytic_gaussian", delta=d, epsilon=float(eps_of_delta(d)))
            for d in dp_deltas
        ],
        curve=[DpPoint(epsilon=float(eps_of_delta(d)), delta=d) for d in deltas],
        gdp_mu=float(mu),
        tight=GAUSSIAN_TIGHT,
    )
