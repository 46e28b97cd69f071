"""GCON's ``tune_score`` hook: how much one edge can change a ``tune`` block's private score."""

from __future__ import annotations

from dpspec.ir import models as ir

#: one edge (u, v) changes at most the two end nodes' private-inference features (eq. (16))
TUNE_SCORE_SENSITIVITY = 2.0


def tune_score(t: ir.Training) -> tuple[float, str] | None:
    """A ``tune`` block's private validation score for GCON (the family's ``tune_score`` hook).

    The score of a run is Σ_v s_v over validation nodes v, each s_v ∈ [0, 1] (e.g. 1 when v's prediction is
    correct). With private-graph inference (Wei et al. 2024 eq. (16), Alg. 4) node v's prediction reads the
    released Θ, the public features and labels, and v's own edges only (its row of ((1 − α_I) Ã + α_I I) X):
    adding or removing the edge (u, v) changes the rows of u and v and no other (Ã = D⁻¹(A + I) changes in rows
    u and v only). Given Θ, the sum therefore moves by at most 2 between edge-neighbouring graphs; the noisy sum
    is a Gaussian mechanism of sensitivity 2 composed with the run (adaptive composition, Dwork & Roth 2014
    Thm 3.16 / B.1). Public-graph inference propagates over the whole graph (a node's prediction can read any
    edge within m hops), so a score computed with it on the private graph is not covered: None."""
    st = t.settings
    if (getattr(st, "inference", None) or "private_graph") != "private_graph":
        return None
    return (
        TUNE_SCORE_SENSITIVITY,
        "each scored node's value in [0, 1] reads only the released model, the public features and labels and "
        "that node's own edges (private-graph inference, Wei et al. 2024 eq. (16)): one edge changes at most its "
        "two end nodes' values, so the summed score moves by at most 2",
    )
