"""Subsampled randomized response (RR).

Base mechanism: B_y = Bernoulli(theta) if f(y) = 1 else Bernoulli(1 - theta), for an
arbitrary f; theta is the probability of answering truthfully.

* Poisson sampling, group of K inserted/removed (Schuchardt et al. 2024 Thm G.1,
  tight by Thm G.2).  Closed form (digest F9): the maximum over labellings is
  the single-element bound at the effective rate r_K = 1 - (1 - r)^K, i.e. with
  pi = (1 - theta) + r_K (2 theta - 1),
      eps = max(D_alpha(Ber pi || Ber(1-theta)), D_alpha(Ber(1-theta) || Ber pi)).
* Sampling without replacement, substitution (Schuchardt et al. 2024 Thm 3.7,
  tight by Thm F.1, digest F8): w = q/N and
      Psi = max_{f in {0,1}^3} sum_z [(1-w) B_f1(z) + w B_f2(z)]^alpha
                                     [(1-w) B_f1(z) + w B_f3(z)]^{1-alpha};
  all 8 labellings are evaluated (no reliance on the derived maximiser).

Every divergence is evaluated as Psi - 1 = sum_z Q(z) g_alpha(P(z)/Q(z) - 1), whose
terms are >= 0, with the differences P - Q formed exactly (no 1 - 1 cancellation).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from . import _validate as V
from ._exact import log_bounds_from_rel, rdp_from_log_psi_m1
from ._logmath import ULP, log_g, log_g_rel_error

THEOREM_RR_POISSON = "Schuchardt et al. 2024 Thm G.1 (tight RR group amplification, closed form F9)"
THEOREM_RR_WOR = "Schuchardt et al. 2024 Thm 3.7 (tight WOR substitution RR)"


def _log_psi_m1_binary(alphas: np.ndarray, p1: float, q1: float, d1: float):
    """log(Psi_alpha(Ber p1 || Ber q1) - 1) with d1 = p1 - q1 given exactly.

    Psi - 1 = q1 g(d1/q1) + q0 g(-d1/q0), q0 = 1 - q1 (both terms >= 0).
    """
    q0 = 1.0 - q1
    if d1 == 0.0:
        return np.full(alphas.shape, -np.inf)
    terms = []
    for q, d in ((q1, d1), (q0, -d1)):
        v = d / q
        terms.append(math.log(q) + log_g(alphas, np.full(alphas.shape, v), np.full(alphas.shape, math.log1p(v))))
    return np.logaddexp(terms[0], terms[1])


def _rr_curve(alphas: np.ndarray, pairs) -> tuple[np.ndarray, np.ndarray, list]:
    """Max over (label, p1, q1, d1) pairs of D_alpha(Ber p1 || Ber q1)."""
    best_lo = np.full(alphas.shape, -np.inf)
    best_hi = np.full(alphas.shape, -np.inf)
    labels = [""] * alphas.size
    rel = log_g_rel_error(alphas) + 16.0 * ULP * (1.0 + alphas * 50.0)
    for label, p1, q1, d1 in pairs:
        log_i = _log_psi_m1_binary(alphas, p1, q1, d1)
        lo, hi = log_bounds_from_rel(log_i, rel)
        for i in np.nonzero(hi > best_hi)[0]:
            labels[i] = label
        best_hi = np.maximum(best_hi, hi)
        best_lo = np.maximum(best_lo, lo)
    up, err = rdp_from_log_psi_m1(alphas, best_lo, best_hi)
    return up, err, labels


def poisson_rr_curve(alphas: np.ndarray, theta: float, rate: float, group_size: int):
    r_k = -math.expm1(group_size * math.log1p(-rate)) if rate < 1.0 else 1.0
    d = r_k * (2.0 * theta - 1.0)  # pi - (1 - theta), exact
    pi = (1.0 - theta) + d
    pairs = [("removal", pi, 1.0 - theta, d), ("insertion", 1.0 - theta, pi, -d)]
    return _rr_curve(np.asarray(alphas, float), pairs)


def wor_rr_curve(alphas: np.ndarray, theta: float, w: float):
    def ber(f, z):  # P(output = z) under B_f
        p1 = theta if f == 1 else 1.0 - theta
        return p1 if z == 1 else 1.0 - p1

    pairs = []
    for f1, f2, f3 in itertools.product((0, 1), repeat=3):
        p1 = (1 - w) * ber(f1, 1) + w * ber(f2, 1)
        q1 = (1 - w) * ber(f1, 1) + w * ber(f3, 1)
        d1 = w * (ber(f2, 1) - ber(f3, 1))  # exact: 0 or +-(2 theta - 1) w
        pairs.append((f"f={f1}{f2}{f3}", p1, q1, d1))
    return _rr_curve(np.asarray(alphas, float), pairs)


def poisson_rr_rdp(alpha, theta, rate, group_size=1):
    """RDP of Poisson-subsampled randomized response for a group of ``group_size``
    elements inserted or removed (Schuchardt et al. 2024 Thm G.1; tight).

    theta in (0, 1) is the probability of a truthful answer (theta = 1/2 gives 0).
    Raises ValueError for alpha <= 1, theta outside (0, 1), rate outside [0, 1]
    or group_size < 1.
    """
    a = V.alphas("alpha", alpha)
    th = V.real("theta", theta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    r = V.real("rate", rate, lo=0.0, hi=1.0)
    k = V.integer("group_size", group_size, lo=1)
    up, _, _ = poisson_rr_curve(a, th, r, k)
    return float(up[0]) if np.ndim(alpha) == 0 else up


def wor_rr_rdp(alpha, theta, batch_size, dataset_size):
    """RDP of randomized response on a batch of ``batch_size`` sampled without
    replacement from ``dataset_size`` elements, substitution relation
    (Schuchardt et al. 2024 Thm 3.7; tight).

    Raises ValueError for alpha <= 1, theta outside (0, 1), dataset_size < 1 or
    batch_size outside [1, dataset_size].
    """
    a = V.alphas("alpha", alpha)
    th = V.real("theta", theta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    n = V.integer("dataset_size", dataset_size, lo=1)
    b = V.integer("batch_size", batch_size, lo=1, hi=n)
    up, _, _ = wor_rr_curve(a, th, b / n)
    return float(up[0]) if np.ndim(alpha) == 0 else up


def wang_thm9_rr_rdp(alphas, theta: float, w: float) -> np.ndarray:
    """Baseline for tests: Wang et al. 2019 Thm 9 applied to RR (digest TV-B)."""
    from .wor import wang_thm9_log_psi_m1

    al = np.asarray(alphas, dtype=np.int64)
    jmax = int(al.max())
    j = np.arange(jmax + 1, dtype=float)
    lt, l1t = math.log(theta), math.log1p(-theta)
    # (j-1) eps(j) = log(theta^j (1-theta)^{1-j} + (1-theta)^j theta^{1-j})
    log_moment = np.logaddexp(j * lt + (1 - j) * l1t, j * l1t + (1 - j) * lt)
    eps2 = float(log_moment[2])
    log_em1_inf = math.log((2 * theta - 1) / (1 - theta))
    log_i, rel = wang_thm9_log_psi_m1(al, math.log(w), log_moment, eps2, log_em1_inf)
    lo, hi = log_bounds_from_rel(log_i, rel)
    return rdp_from_log_psi_m1(al.astype(float), lo, hi)[0]
