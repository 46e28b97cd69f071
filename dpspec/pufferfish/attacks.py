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

__all__ = [
    "map_attack",
    "bayes_attack",
    "bayes_log_posterior",
    "prior_baseline",
    "attack_accuracy",
    "laplace_log_likelihood",
    "distinguishing_epsilon",
]


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
            y = Y[r0 : r0 + block]
            d2 = (y**2).sum(1)[:, None] - 2 * y @ Z.T + zz[None, :]
            out[r0 : r0 + block, j] = lp[j] + logsumexp(-d2 / (2.0 * sigma2), axis=1) - np.log(Z.shape[0])
    return out


def bayes_attack(Y, conditionals: dict, prior: dict, sigma2: float) -> np.ndarray:
    """Bayes-optimal attack under a finite world; returns the index into list(conditionals) per row."""
    return np.argmax(bayes_log_posterior(Y, conditionals, prior, sigma2), axis=1)


def attack_accuracy(predicted, truth) -> float:
    predicted, truth = np.asarray(predicted), np.asarray(truth)
    if predicted.shape != truth.shape or predicted.size == 0:
        raise ValueError("predicted and truth must be non-empty and of equal shape")
    return float(np.mean(predicted == truth))


# ----------------------------------------------------------------------------------------------
# Pufferfish distinguishing test (pure ε): Laplace releases (the Wasserstein mechanism, MQM)
# ----------------------------------------------------------------------------------------------


def laplace_log_likelihood(Y, conditional, scales, *, block: int = 256) -> np.ndarray:
    """log p(y | s) of Y (n, d) when the release is z + Laplace(scales), z uniform on the rows of
    ``conditional`` (the exact conditional law of the answer given s)."""
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    Z = np.atleast_2d(np.asarray(conditional, dtype=float))
    b = np.broadcast_to(np.asarray(scales, dtype=float), (Y.shape[1],))
    const = -np.sum(np.log(2.0 * b)) - np.log(Z.shape[0])
    out = np.empty(Y.shape[0])
    for r0 in range(0, Y.shape[0], block):
        y = Y[r0 : r0 + block]
        d = np.abs(y[:, None, :] - Z[None, :, :]) / b
        out[r0 : r0 + block] = logsumexp(-d.sum(-1), axis=1) + const
    return out


def distinguishing_epsilon(score_a, score_b, *, confidence: float = 0.95, thresholds: int = 20) -> float:
    """A lower bound on ε from a distinguishing test between outputs drawn under secret a (scores
    ``score_a``) and under secret b (``score_b``), valid with probability ≥ ``confidence``.

    For each threshold t (quantiles of the pooled scores), the event {score > t} has probability P_a
    under a and P_b under b, and ε-Pufferfish privacy implies P_a ≤ e^ε P_b (and, for the complements,
    1 − P_b ≤ e^ε (1 − P_a)). With Clopper–Pearson bounds (Bonferroni over the 2 × ``thresholds``
    events) the largest log(lower(P_a) / upper(P_b)) is a lower bound on ε: a certificate claiming less
    is refuted."""
    from scipy.stats import beta

    a = np.asarray(score_a, dtype=float)
    b = np.asarray(score_b, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("both samples must be non-empty")
    k = 2 * int(thresholds)
    level = (1.0 - confidence) / (2 * k)  # two one-sided bounds per event

    def lower(x, n):
        return 0.0 if x == 0 else float(beta.ppf(level, x, n - x + 1))

    def upper(x, n):
        return 1.0 if x == n else float(beta.ppf(1 - level, x + 1, n - x))

    pooled = np.concatenate([a, b])
    best = 0.0
    for t in np.quantile(pooled, np.linspace(0.02, 0.98, int(thresholds))):
        events = (
            (int(np.sum(a > t)), a.size, int(np.sum(b > t)), b.size),  # P_a ≤ e^ε P_b
            (int(np.sum(b <= t)), b.size, int(np.sum(a <= t)), a.size),
        )  # 1 − P_b ≤ e^ε (1 − P_a)
        for xa, na, xb, nb in events:
            lo, hi = lower(xa, na), upper(xb, nb)
            if lo > 0 and hi > 0:
                best = max(best, float(np.log(lo / hi)))
    return best
