"""Empirical auditing of trained models: the loss-threshold membership-inference attack
(Yeom et al. 2018), as in ZV25 App. W.3 ("Overfitted regime and membership inference attacks").

Score = −loss (members tend to have lower loss); the attack's ROC AUC over members vs non-members
is computed exactly by the Mann–Whitney rank statistic (ties get half credit).
"""

from __future__ import annotations

import numpy as np

__all__ = ["roc_auc", "per_example_losses", "loss_threshold_auc"]


def roc_auc(scores_pos, scores_neg) -> float:
    """P(score_pos > score_neg) + ½ P(equal): the ROC AUC of a score separating pos from neg."""
    from scipy.stats import rankdata

    a = np.asarray(scores_pos, dtype=float)
    b = np.asarray(scores_neg, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("both groups must be non-empty")
    r = rankdata(np.concatenate([a, b]))
    return float((r[: a.size].sum() - a.size * (a.size + 1) / 2.0) / (a.size * b.size))


def per_example_losses(model, X, y, loss_fn=None, batch: int = 4096) -> np.ndarray:
    import torch

    if loss_fn is None:
        loss_fn = torch.nn.functional.cross_entropy
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(X), batch):
            out.append(loss_fn(model(X[i : i + batch]), y[i : i + batch], reduction="none").numpy())
    model.train()
    return np.concatenate(out)


def loss_threshold_auc(model, X_members, y_members, X_non, y_non) -> float:
    """ROC AUC of the loss-threshold attack (score −loss): 0.5 = no membership signal."""
    lm = per_example_losses(model, X_members, y_members)
    ln = per_example_losses(model, X_non, y_non)
    return roc_auc(-lm, -ln)
