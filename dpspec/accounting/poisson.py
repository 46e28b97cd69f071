"""Poisson-subsampled Gaussian mechanism (SGM), single element and groups.

Public entry points: :func:`poisson_gaussian_rdp` (tight; group_size > 1 uses
Schuchardt et al. 2024 Thm 4.2) and :func:`poisson_gaussian_rdp_baseline`
("amplify, then group property", Mironov 2017 Prop 11 recursion).

Single element (K = 1, Mironov-Talwar-Zhang 2019 §3.3): with
mu_0 = N(0, s^2), mu = (1 - q) N(0, s^2) + q N(1, s^2), s = sigma / Delta,

    eps(alpha) = log E_{mu_0}[(mu/mu_0)^alpha] / (alpha - 1),

and the removal direction dominates the insertion direction (MTZ 2019, §3.3), so
it is the RDP of the add/remove-one relation.

* integer alpha: Psi - 1 = sum_{j>=2} C(alpha,j) (1-q)^{alpha-j} q^j expm1(j(j-1)/(2 s^2)),
  a sum of positive terms (``_exact``), exact up to float rounding;
* real alpha: Psi - 1 = E[g_alpha(L - 1)] by trapezoid quadrature with a stated
  error (``_quadrature``).  Unlike the signed series of Opacus / dp_accounting
  (MTZ 2019 §3.3 two-sided expansion), no cancellation occurs, so values of
  1e-12 ... 1e-20 keep ~1e-13 relative accuracy (tests compare with mpmath).

Invariants: values are upper bounds (rounded up by their error bound); never NaN;
0 for rate = 0; alpha * K^2 / (2 s^2) (no amplification) for rate = 1, which is
also used as a cap for every rate.
"""

from __future__ import annotations

import numpy as np

from . import _validate as V

# the SGM core lives in the leaf module ``_sgm`` (shared with ``group``); re-exported here
from ._sgm import METHOD_SGM as METHOD_SGM  # noqa: F401
from ._sgm import THEOREM_SGM as THEOREM_SGM
from ._sgm import Evaluated, sgm_curve  # noqa: F401
from ._sgm import cap as cap
from ._sgm import is_integer_order as is_integer_order
from ._sgm import no_amplification as no_amplification  # noqa: F401
from .group import baseline_curve, group_curve


def _check(alpha, sigma, rate, group_size):
    a = V.alphas("alpha", alpha)
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    r = V.real("rate", rate, lo=0.0, hi=1.0)
    k = V.integer("group_size", group_size, lo=1)
    return a, s, r, k


def _out(alpha, values: np.ndarray):
    return float(values[0]) if np.ndim(alpha) == 0 else values


def poisson_gaussian_curve(alphas: np.ndarray, sigma: float, rate: float, group_size: int = 1) -> Evaluated:
    """Validated-input core shared by the public functions and dpsgd."""
    if group_size == 1:
        return sgm_curve(alphas, sigma, rate)
    return group_curve(alphas, sigma, rate, group_size)


def poisson_gaussian_rdp(alpha, sigma, rate, group_size=1):
    """RDP of the Poisson-subsampled Gaussian mechanism (one step).

    ``sigma`` is the noise multiplier (noise std / l2-sensitivity of one element,
    Delta = 1), ``rate`` the Poisson sampling rate.  The neighbouring relation is
    insertion/removal of one element (``group_size=1``: Mironov-Talwar-Zhang 2019
    §3.3) or of a group of ``group_size`` elements (Schuchardt et al. 2024 Thm 4.2:
    the max of the removal and insertion terms for the mixture
    sum_k Bin(k|K, rate) N(k, sigma^2) against N(0, sigma^2); tight).

    Returns a certified upper bound (float for a scalar alpha, array otherwise).
    Raises ValueError for alpha <= 1, sigma <= 0, rate outside [0, 1] or
    group_size < 1.
    """
    a, s, r, k = _check(alpha, sigma, rate, group_size)
    return _out(alpha, poisson_gaussian_curve(a, s, r, k).rdp)


def poisson_gaussian_rdp_baseline(alpha, sigma, rate, group_size):
    """The classic group bound: amplify (Poisson SGM, K = 1), then apply the
    group property by the Hoelder recursion of Mironov 2017 Prop 11 / Cor 4 with
    p = 2 (digest F10):

        eps_{2K}(alpha) <= (alpha - 1/2)/(alpha - 1) * eps_K(2 alpha) + eps_K(2 alpha - 1),

    applied ceil(log2 K) times (a group of K <= 2^c is within distance 2^c), then
    the monotone envelope eps(alpha) <- min_{alpha' >= alpha} eps(alpha') over
    {alpha} and the default orders in (alpha, 2 alpha] (valid because RDP is
    non-decreasing in alpha).  For comparison with the tight bound; always
    >= it up to rounding.
    """
    a, s, r, k = _check(alpha, sigma, rate, group_size)
    from .curve import DEFAULT_ALPHAS

    out = np.empty(a.size)
    for i, ai in enumerate(a):
        extra = DEFAULT_ALPHAS[(DEFAULT_ALPHAS > ai) & (DEFAULT_ALPHAS <= 2 * ai)]
        grid = np.concatenate([[ai], extra])
        out[i] = baseline_curve(grid, s, r, k, envelope=True).rdp[0]
    return _out(alpha, out)
