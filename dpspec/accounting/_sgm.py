"""Private leaf: the per-order result type and the Poisson SGM core (K = 1).

Shared by :mod:`.poisson` (public API, group dispatch) and :mod:`.group` (the baseline
recursion evaluates the K = 1 curve), so neither imports the other's module at run time
(``poisson`` imports ``group``; ``group`` imports only this module).  The mathematics is
described in the :mod:`.poisson` docstring (Mironov-Talwar-Zhang 2019 §3.3).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._exact import binomial_mixture_log_psi_m1, log_bounds_from_abs, log_bounds_from_rel, rdp_from_log_psi_m1
from ._logmath import ULP, log_expm1
from ._quadrature import mixture_psi_m1

THEOREM_SGM = "Mironov-Talwar-Zhang 2019 §3.3 (Poisson SGM)"
METHOD_SGM = (
    "integer alpha: exact positive-term binomial sum of Psi-1 (float64, error "
    "~ulp x log-magnitudes); real alpha: trapezoid quadrature of E[g_alpha(L-1)] "
    "with step-halving error estimate x10 and closed-form tail bounds"
)


class Evaluated(NamedTuple):
    """Per-order certified values, error bounds and the attaining bound."""

    rdp: np.ndarray
    err: np.ndarray
    sources: list


def is_integer_order(alphas: np.ndarray) -> np.ndarray:
    return np.floor(alphas) == alphas


def no_amplification(alphas: np.ndarray, sigma: float, k: int = 1) -> Evaluated:
    """alpha (K Delta)^2 / (2 sigma^2): the Gaussian mechanism with sensitivity K.
    It bounds the subsampled mechanism for every rate (quasi-convexity of R_alpha)."""
    val = alphas * (k * k) / (2.0 * sigma * sigma)
    return Evaluated(val * (1 + 4 * ULP), val * 8 * ULP, ["no-amplification"] * alphas.size)


def cap(ev: Evaluated, bound: Evaluated) -> Evaluated:
    """Pointwise min of two certified upper bounds of the same quantity."""
    take = bound.rdp < ev.rdp
    return Evaluated(
        np.where(take, bound.rdp, ev.rdp),
        np.where(take, bound.err, ev.err),
        [b if t else s for t, s, b in zip(take, ev.sources, bound.sources)],
    )


def sgm_curve(alphas: np.ndarray, sigma: float, rate: float) -> Evaluated:
    """RDP of the Poisson SGM (add/remove one, sensitivity 1, noise std sigma)."""
    alphas = np.asarray(alphas, float)
    n = alphas.size
    if rate == 0.0:
        return Evaluated(np.zeros(n), np.zeros(n), ["rate=0"] * n)
    if rate == 1.0:
        return no_amplification(alphas, sigma)
    rdp = np.empty(n)
    err = np.empty(n)
    ints = is_integer_order(alphas)
    if np.any(ints):
        a_int = alphas[ints].astype(np.int64)
        jmax = int(a_int.max())
        j = np.arange(jmax + 1, dtype=float)
        t = j * (j - 1.0) / (2.0 * sigma * sigma)
        with np.errstate(divide="ignore"):
            log_d = log_expm1(np.where(j >= 2, t, 1.0))
        log_d[:2] = -np.inf
        rel_d = 4.0 * ULP * (1.0 + t)  # expm1 and its rounded argument
        log_i, rel = binomial_mixture_log_psi_m1(a_int, math.log1p(-rate), math.log(rate), log_d, rel_d)
        lo, hi = log_bounds_from_rel(log_i, rel)
        rdp[ints], err[ints] = rdp_from_log_psi_m1(alphas[ints], lo, hi)
    if np.any(~ints):
        lw = np.array([math.log1p(-rate), math.log(rate)])
        q = mixture_psi_m1(alphas[~ints], lw, sigma, "removal", np.zeros((~ints).sum(), bool))
        lo, hi = log_bounds_from_abs(q.log_value, q.log_err)
        rdp[~ints], err[~ints] = rdp_from_log_psi_m1(alphas[~ints], lo, hi)
    ev = Evaluated(rdp, err, ["removal"] * n)
    return cap(ev, no_amplification(alphas, sigma))
