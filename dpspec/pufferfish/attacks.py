"""Bayesian inference attacks on the secret from SWM releases (empirical auditing, ZV25 App. W.1).

* :func:`map_attack` — the paper's prior-aware Gaussian MAP attack:
  ŝ(y) = argmax_s { log π(s) + log φ(y; μ_s, σ² I_d) }, μ_s = E[f(X) | S = s]. It ignores the
  within-secret spread of f(X).
* :func:`bayes_attack` — the Bayes-optimal attack for a finite world: the likelihood of y under
  secret s is the Gaussian mixture (1/n_s) Σ_k φ(y; z_k^{(s)}, σ² I_d) over the exact conditional
  outputs z^{(s)}; ŝ(y) = argmax_s log π(s) + log p(y | s). Its accuracy is the best any attacker
  can reach against the release under that world (an empirical lower bound on leakage).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = ["map_attack", "bayes_attack", "bayes_log_posterior", "prior_baseline", "attack_accuracy"]


def _prior_vector(prior, secrets):
    p = np.array([float(prior[s]) for s in secrets])
    if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError("prior must be non-negative and sum to 1")
    with np.errstate(divide="ignore"):
        return np.log(p)


def prior_baseline(prior) -> float:
    """Accuracy of guessing the most likely secret without looking at the release: max_s π(s)."""
    return float(max(prior.values()))


def map_attack(Y, means: dict, prior: dict, sigma2: float) -> np.ndarray:
    """Prior-aware Gaussian MAP attack (ZV25 App. W.1); returns the index into list(means) per row of Y."""
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    secrets = list(means)
    M = np.vstack([np.asarray(means[s], dtype=float) for s in secrets])
    lp = _prior_vector(prior, secrets)
    if sigma2 <= 0:
        d2 = ((Y[:, None, :] - M[None]) ** 2).sum(-1)
        return np.argmin(d2, axis=1)
    d2 = (Y**2).sum(1)[:, None] - 2 * Y @ M.T + (M**2).sum(1)[None, :]
    return np.argmax(lp[None, :] - d2 / (2.0 * sigma2), axis=1)


def bayes_log_posterior(Y, conditionals: dict, prior: dict, sigma2: float, *, block: int = 512) -> np.ndarray:
    """Unnormalised log posterior log π(s) + log p(y | s) for each row of Y (n, d) and secret (columns)."""
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    if sigma2 <= 0:
        raise ValueError("sigma2 must be > 0 for the Bayes attack")
    secrets = list(conditionals)
    lp = _prior_vector(prior, secrets)
    out = np.empty((Y.shape[0], len(secrets)))
    for j, s in enumerate(secrets):
        Z = np.atleast_2d(np.asarray(conditionals[s], dtype=float))
        zz = (Z**2).sum(1)
        for r0 in range(0, Y.shape[0], block):
            y = Y[r0:r0 + block]
            d2 = (y**2).sum(1)[:, None] - 2 * y @ Z.T + zz[None, :]
            out[r0:r0 + block, j] = lp[j] + logsumexp(-d2 / (2.0 * sigma2), axis=1) - np.log(Z.shape[0])
    return out


def bayes_attack(Y, conditionals: dict, prior: dict, sigma2: float) -> np.ndarray:
    """Bayes-optimal attack under a finite world; returns the index into list(conditionals) per row."""
    return np.argmax(bayes_log_posterior(Y, conditionals, prior, sigma2), axis=1)


def attack_accuracy(predicted, truth) -> float:
    predicted, truth = np.asarray(predicted), np.asarray(truth)
    if predicted.shape != truth.shape or predicted.size == 0:
        raise ValueError("predicted and truth must be non-empty and of equal shape")
    return float(np.mean(predicted == truth))
