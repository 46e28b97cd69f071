"""From counts of errors to a statistically valid lower bound on ε.

The hypothesis-testing view of (ε, δ)-DP (Wasserman & Zhou 2010; Kairouz, Oh & Viswanath 2015):
for neighbouring inputs D₀, D₁ and *any* rejection region S (decide "D₁" when the output falls in
S), with false-positive rate α = P₀(S) and false-negative rate β = P₁(Sᶜ),

    (I)   1 − β ≤ e^ε α + δ          (the guarantee applied to S for the pair (D₁, D₀))
    (II)  1 − α ≤ e^ε β + δ          (the guarantee applied to Sᶜ for the pair (D₀, D₁))

so ε ≥ log((1 − δ − β)/α) and ε ≥ log((1 − δ − α)/β). (II) needs the relation to be symmetric,
which it is for add/remove, substitution and edge flips; a Pufferfish pair list may be one-sided.

With α, β unknown we use one-sided Clopper–Pearson upper bounds ᾱ, β̄, each at level γ/2 (and
γ/(2k) when k tests are combined): on the event that both hold — probability ≥ 1 − γ — the bound
ε_lower = max(0, log((1 − δ − β̄)/ᾱ), log((1 − δ − ᾱ)/β̄)) is ≤ the true ε of any mechanism that
satisfies the guarantee, because the right-hand sides decrease in α and β. The rejection region
(statistic, orientation, threshold) is chosen on a *separate* selection split, so the evaluation
split sees one fixed test and the confidence statement needs no multiple-comparison correction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as _beta

__all__ = [
    "cp_upper",
    "cp_lower",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "Threshold",
    "select_threshold",
    "error_counts",
]


def cp_upper(k, n, gamma: float):
    """One-sided Clopper–Pearson upper bound: P(p ≤ bound) ≥ 1 − γ for k successes in n trials.

    Vectorised over ``k`` (real ``k`` is accepted and used for projected counts). 1 when k ≥ n."""
    k = np.asarray(k, dtype=float)
    n = float(n)
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"gamma must be in (0, 1), got {gamma}")
    with np.errstate(invalid="ignore"):
        out = np.where(k >= n, 1.0, _beta.ppf(1.0 - gamma, np.clip(k, 0.0, n) + 1.0, np.maximum(n - k, 1e-12)))
    return float(out) if out.ndim == 0 else out


def cp_lower(k, n, gamma: float):
    """One-sided Clopper–Pearson lower bound: P(p ≥ bound) ≥ 1 − γ. 0 when k ≤ 0."""
    k = np.asarray(k, dtype=float)
    n = float(n)
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    with np.errstate(invalid="ignore"):
        out = np.where(k <= 0, 0.0, _beta.ppf(gamma, np.maximum(k, 1.0), np.maximum(n - k, 0.0) + 1.0))
    return float(out) if out.ndim == 0 else out


def epsilon_from_rates(fpr, fnr, delta: float, symmetric: bool = True):
    """max(0, log((1−δ−β)/α), log((1−δ−α)/β)) — the ε implied by (α, β) at δ (vectorised).

    With ``symmetric=False`` only inequality (I) (rejection region S, pair (D₁, D₀)) is used."""
    a = np.asarray(fpr, dtype=float)
    b = np.asarray(fnr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.where((1.0 - delta - b > 0) & (a > 0), np.log(np.maximum(1.0 - delta - b, 1e-300) / a), 0.0)
        e1 = np.where((a == 0) & (1.0 - delta - b > 0), np.inf, e1)
        if symmetric:
            e2 = np.where((1.0 - delta - a > 0) & (b > 0), np.log(np.maximum(1.0 - delta - a, 1e-300) / b), 0.0)
            e2 = np.where((b == 0) & (1.0 - delta - a > 0), np.inf, e2)
            e1 = np.maximum(e1, e2)
    out = np.maximum(e1, 0.0)
    return float(out) if out.ndim == 0 else out


def epsilon_lower_bound(
    fp, n0: int, fn, n1: int, delta: float, *, confidence: float = 0.95, symmetric: bool = True, tests: int = 1
):
    """ε lower bound holding with probability ≥ ``confidence`` (jointly for ``tests`` tests).

    ``fp`` of ``n0`` outputs on D₀ fell in the rejection region; ``fn`` of ``n1`` outputs on D₁ did
    not. Each of the 2·tests Clopper–Pearson bounds is at level (1 − confidence)/(2·tests)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    g = (1.0 - confidence) / (2.0 * max(1, int(tests)))
    return epsilon_from_rates(cp_upper(fp, n0, g), cp_upper(fn, n1, g), delta, symmetric)


def error_counts(s0: np.ndarray, s1: np.ndarray, threshold: float, orientation: int) -> tuple[int, int]:
    """(false positives among D₀ scores, false negatives among D₁ scores) for the region
    S = {score ≥ t} (orientation +1) or S = {score ≤ t} (orientation −1)."""
    s0, s1 = np.asarray(s0, float), np.asarray(s1, float)
    if orientation > 0:
        return int(np.sum(s0 >= threshold)), int(np.sum(s1 < threshold))
    return int(np.sum(s0 <= threshold)), int(np.sum(s1 > threshold))


@dataclass(frozen=True)
class Threshold:
    """A rejection region chosen on the selection split and its projected bound."""

    statistic: str
    threshold: float
    orientation: int  # +1: decide D₁ when score ≥ threshold; −1: when score ≤ threshold
    projected_epsilon: float  # the bound the selection split predicts for the evaluation split
    selection_fpr: float
    selection_fnr: float


def _candidates(s0: np.ndarray, s1: np.ndarray, max_candidates: int) -> np.ndarray:
    allv = np.unique(np.concatenate([s0, s1]))
    allv = allv[np.isfinite(allv)]
    if allv.size > max_candidates:
        allv = np.quantile(allv, np.linspace(0.0, 1.0, max_candidates))
    return allv


def select_threshold(
    scores0: dict[str, np.ndarray],
    scores1: dict[str, np.ndarray],
    *,
    delta: float,
    n_eval0: int,
    n_eval1: int,
    confidence: float,
    symmetric: bool = True,
    tests: int = 1,
    max_candidates: int = 4000,
) -> Threshold:
    """Choose (statistic, orientation, threshold) on the selection split.

    For every candidate the selection-split error *rates* are projected to the evaluation sizes
    (counts scaled by n_eval/n_sel, real-valued) and scored with the same Clopper–Pearson bound the
    evaluation will use, so the choice maximises the bound expected on the evaluation split rather
    than the raw point estimate (which favours thresholds in the far tail with a handful of
    events)."""
    best: Threshold | None = None
    g = (1.0 - confidence) / (2.0 * max(1, int(tests)))
    for name in scores0:
        s0 = np.sort(np.asarray(scores0[name], float))
        s1 = np.sort(np.asarray(scores1[name], float))
        n0, n1 = s0.size, s1.size
        if n0 == 0 or n1 == 0:
            continue
        # non-finite scores (a statistic that overflowed) are mapped to the ends, never dropped
        s0 = np.nan_to_num(s0, nan=-np.inf)
        s1 = np.nan_to_num(s1, nan=-np.inf)
        ts = _candidates(s0, s1, max_candidates)
        if ts.size == 0:
            continue
        # with a symmetric relation inequality (II) on S covers the reversed region S^c (and the
        # swapped roles), so one orientation suffices; otherwise try both with (I) alone
        for orient in (1,) if symmetric else (1, -1):
            if orient > 0:
                fp = n0 - np.searchsorted(s0, ts, side="left")  # s0 ≥ t
                fn = np.searchsorted(s1, ts, side="left")  # s1 < t
            else:
                fp = np.searchsorted(s0, ts, side="right")  # s0 ≤ t
                fn = n1 - np.searchsorted(s1, ts, side="right")  # s1 > t
            a = cp_upper(fp * (n_eval0 / n0), n_eval0, g)
            b = cp_upper(fn * (n_eval1 / n1), n_eval1, g)
            eps = np.atleast_1d(epsilon_from_rates(a, b, delta, symmetric))
            i = int(np.argmax(eps))
            cand = Threshold(name, float(ts[i]), orient, float(eps[i]), float(fp[i] / n0), float(fn[i] / n1))
            if best is None or cand.projected_epsilon > best.projected_epsilon:
                best = cand
    if best is None:
        raise ValueError("no statistic produced usable scores on the selection split")
    return best


def max_certifiable_epsilon(n: int, delta: float = 0.0, confidence: float = 0.95, tests: int = 1) -> float:
    """The largest ε_lower an audit with n evaluation outputs per side can ever report (perfect
    separation): a mutation is only detectable when its true ε is below this ceiling."""
    g = (1.0 - confidence) / (2.0 * max(1, int(tests)))
    a = cp_upper(0, n, g)
    return math.log((1.0 - delta - a) / a) if 1.0 - delta - a > 0 else 0.0
