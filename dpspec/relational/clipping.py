"""Per-tuple clipping rules and their node-level sensitivities.

Notation: a batch B of tuples T_i (one positive edge + k_neg negatives, NEG-SAMPLE-WOR so every
node is a sampled negative of at most one tuple); g(T) the per-tuple gradient; the released sum
is sum_i gbar(T_i) + N(0, sigma^2 C^2 I).  Removing node u* removes its i <= K positive tuples
(B+(u*)) and replaces u* in the j <= 1 tuple that has it as a negative (B-(u*) -> B'-(u*)).

* ``static`` [D] -- the sound constant-sensitivity rule: every tuple is clipped to the fixed,
  batch-independent threshold c = C / (K + 2) (C / K when there are no private negatives).
  **Sensitivity <= C.**  Proof: tuples of B0(u*) (without u*) are identical in B and B' and
  their clipped gradients do not depend on the rest of the batch, so they cancel;
  ||gbar(B) - gbar(B')|| <= sum_{B+} ||gbar|| + sum_{B-} ||gbar|| + sum_{B'-} ||gbar||
  <= (i + 2j) c <= (K + 2) c = C, using |B+(u*)| <= K (degree cap) and |B-(u*)| <= 1 (Alg. 2).
  Eq. (3) then applies with sensitivity C, and Thm C.1 applies with per-tuple threshold c
  (assumptions (45)-(46) hold with shifts (i + 2j) c).
* ``standard`` -- per-tuple threshold C; sensitivity (i + 2j) C <= (K + 2) C (Thm C.1; Eq. (3)
  with sensitivity (K + 2) C).
* ``freq`` -- FREQ-CLIP (Alg. 1): threshold C / (2 maxfreq(T)).  Prop 4.1's claimed sensitivity
  C is wrong (the thresholds of B0 tuples move); the corrected, tight bound is
  C (1 + K (k_neg + 1)/4) (:func:`dpspec.accounting.relational.freq_clip_sensitivity`).

:func:`clipped_sum` implements the three rules on a matrix of per-tuple gradients;
:func:`neighbouring_batch` builds B' from B for a removed node (used by the sensitivity tests).
"""

from __future__ import annotations

import numpy as np

from dpspec.accounting.relational import (
    RelationalSoundnessError,
    freq_clip_sensitivity,
    node_sensitivity,
    tuple_threshold,
)

from .samplers import TupleBatch

__all__ = [
    "static_threshold",
    "tuple_thresholds",
    "clip_factors",
    "clipped_sum",
    "freq_counts",
    "neighbouring_batch",
    "node_sensitivity",
    "freq_clip_sensitivity",
    "CLIP_MODES",
]

CLIP_MODES = ("static", "standard", "freq")


def static_threshold(C: float, K: int, k_neg: int) -> float:
    """C / (K + 2) with private negatives (k_neg > 0), C / K without."""
    t = tuple_threshold("static", K, k_neg, "wor" if k_neg > 0 else "none")
    assert t is not None  # the static rule has a per-tuple threshold (only FREQ-CLIP has none)
    return C * t


def freq_counts(batch: TupleBatch) -> tuple[dict, np.ndarray]:
    """freq(v) = number of tuples whose node set contains v; maxfreq(T_i) per tuple."""
    freq: dict[int, int] = {}
    sets = [batch.nodes_of(i) for i in range(batch.size)]
    for vs in sets:
        for v in vs:
            freq[v] = freq.get(v, 0) + 1
    mf = np.array([max(freq[v] for v in vs) for vs in sets], dtype=float) if sets else np.zeros(0)
    return freq, mf


def tuple_thresholds(batch: TupleBatch, mode: str, C: float, K: int, k_neg: int) -> np.ndarray:
    if mode == "static":
        return np.full(batch.size, static_threshold(C, K, k_neg))
    if mode == "standard":
        return np.full(batch.size, float(C))
    if mode == "freq":
        _, mf = freq_counts(batch)
        return C / (2.0 * mf)
    if mode == "freq_paper":
        node_sensitivity("freq_paper", K, k_neg)  # raises DPS601
    raise RelationalSoundnessError(f"unknown clipping mode {mode!r}", rule="DPS611")


def clip_factors(norms: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """min(1, t / ||g||) (the typo-fixed rule g / max(1, ||g||/t))."""
    norms = np.asarray(norms, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(norms > thresholds, thresholds / np.where(norms > 0, norms, 1.0), 1.0)
    return f


def clipped_sum(grads: np.ndarray, batch: TupleBatch, mode: str, C: float, K: int, k_neg: int) -> np.ndarray:
    """sum_i gbar(T_i) for per-tuple gradients ``grads`` (b, d)."""
    grads = np.asarray(grads, float)
    if grads.shape[0] == 0:
        return np.zeros(grads.shape[1:])
    t = tuple_thresholds(batch, mode, C, K, k_neg)
    f = clip_factors(np.linalg.norm(grads, axis=1), t)
    return (grads * f[:, None]).sum(axis=0)


def neighbouring_batch(
    batch: TupleBatch, grads: np.ndarray, node: int, replacement: int, replacement_grads: np.ndarray | None = None
):
    """B' for the removal of ``node``: its positive tuples are dropped; in the (<= 1) tuple
    where it is a negative it is replaced by ``replacement`` (that tuple's gradient becomes
    ``replacement_grads`` if given -- any vector: the adversary picks it).  Returns
    (batch', grads')."""
    keep = ~np.any(batch.pos == node, axis=1)
    pos, neg, side = batch.pos[keep], batch.neg[keep].copy(), batch.side[keep]
    g = np.asarray(grads, float)[keep].copy()
    rows = np.nonzero(np.any(neg == node, axis=1))[0]
    if rows.size > 1:
        raise RelationalSoundnessError(
            "node is a negative of several tuples: not a NEG-SAMPLE-WOR batch", rule="DPS602"
        )
    for r in rows:
        neg[r][neg[r] == node] = replacement
        if replacement_grads is not None:
            g[r] = replacement_grads
    return TupleBatch(pos, neg, side), g
