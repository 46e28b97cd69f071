"""Sampling without replacement (fixed batch size q from a dataset of size N).

Units: ``sigma`` is the noise multiplier relative to the per-element clip norm C
(noise std = sigma C), as in DP-SGD.  A change *inside* a fixed-size batch is a
substitution, which moves a sum of clipped terms by up to 2C, so the base
mechanism's sensitivity is Delta = 2 (in units of C) for both relations below.
(dp_accounting's ``SampledWithoutReplacementDpEvent(GaussianDpEvent(s))`` takes
s relative to the replace-one sensitivity, i.e. s = sigma / 2 here.)

Relations:

* ``"add_remove"`` -- datasets differ by inserting/removing one element, every
  dataset has >= N elements (N = ``dataset_size`` is the minimum size).
  Schuchardt et al. 2024 Thm F.3: the removal term of the Poisson SGM with rate
  w = q/N and batch sensitivity 2 (digest F11), i.e. the Poisson SGM with noise
  multiplier sigma/2; the insertion term is dominated (MTZ 2019 §3.3).  Using
  q/N (not q/(N+1)) is the conservative indexing.
* ``"substitution"`` -- datasets of size N differ in one element.  The minimum of
  two valid upper bounds, per order:
    - Wang-Balle-Kasiviswanathan 2019 Thm 9 (integer alpha; for real alpha the
      log-moment is interpolated linearly between floor and ceil, valid because
      log Psi_alpha is convex in alpha: digest F13, WBK19 Cor 10);
    - Schuchardt et al. 2024 Thm 3.6 with the d(y2, y3) <= 1 constraint relaxed to
      the triangle-inequality bound 2, whose worst case for the Gaussian is the
      diametral pair of App. H (Thm H.9/H.12):
      Psi_alpha((1-w) N(0) + w N(Delta) || (1-w) N(0) + w N(-Delta)), by quadrature.
  The curve's ``sources`` record which bound won at each order.
"""

from __future__ import annotations

import math

import numpy as np

from . import _validate as V
from ._exact import log_bounds_from_abs, log_bounds_from_rel, rdp_from_log_psi_m1
from ._logmath import LOG_FACTORIAL, ULP, log_expm1, segment_logsumexp
from ._quadrature import two_mixture_psi_m1
from .poisson import Evaluated, cap, no_amplification, sgm_curve

BATCH_SENSITIVITY = 2.0
THEOREM_WOR_ADD_REMOVE = (
    "Schuchardt et al. 2024 Thm F.3 (WOR, insertion/removal, fixed "
    "batch) via Mironov-Talwar-Zhang 2019 §3.3 (Poisson SGM at rate q/N, "
    "sensitivity 2)"
)
THEOREM_WOR_SUBSTITUTION = (
    "min of Wang-Balle-Kasiviswanathan 2019 Thm 9 and Schuchardt et "
    "al. 2024 Thm 3.6 + Thm H.12 (relaxed two-mixture), WOR "
    "substitution"
)
RELATIONS = ("substitution", "add_remove")


def wang_thm9_log_psi_m1(alphas: np.ndarray, log_w: float, log_moment: np.ndarray, eps2: float, log_em1_inf: float):
    """log of the Wang et al. 2019 Thm 9 bound on Psi_alpha - 1 (integer alpha >= 2).

        Psi - 1 <= w^2 C(a,2) min{4 (e^{eps(2)} - 1), e^{eps(2)} min{2, (e^{eps(inf)} - 1)^2}}
                   + sum_{j=3}^{a} w^j C(a,j) e^{(j-1) eps(j)} min{2, (e^{eps(inf)} - 1)^j}

    log_moment[j] = (j - 1) eps(j) of the base mechanism; log_em1_inf = log(e^{eps(inf)} - 1)
    (+inf for the Gaussian).  Returns (log bound, relative error bound).
    """
    al = np.asarray(alphas, dtype=np.int64)
    lf = LOG_FACTORIAL.get(int(al.max()))
    counts = al - 1
    starts = np.zeros(al.size, dtype=np.int64)
    starts[1:] = np.cumsum(counts)[:-1]
    seg = np.repeat(np.arange(al.size), counts)
    j = np.arange(seg.size) - starts[seg] + 2
    a_of = al[seg]
    log2 = math.log(2.0)
    cap_j = np.minimum(log2, j * log_em1_inf)
    factor = np.where(
        j == 2,
        min(math.log(4.0) + float(log_expm1(eps2)), eps2 + min(log2, 2.0 * log_em1_inf)),  # type: ignore[arg-type]
        log_moment[j] + cap_j,
    )
    logt = lf[a_of] - lf[j] - lf[a_of - j] + j * log_w + factor
    log_i = segment_logsumexp(logt, starts, seg)
    mag = np.maximum.accumulate(np.abs(log_moment))[al]
    rel = 8.0 * ULP * (3.0 * lf[al] + al * abs(log_w) + mag + np.log2(al) + 4.0)
    return log_i, rel


def _convex_interpolation(alphas: np.ndarray, fn_int):
    """Upper bounds on log Psi at real orders from upper bounds at integer orders
    (log Psi_alpha is convex in alpha and log Psi_1 = 0): digest F13.

    fn_int(int orders >= 2) -> (log Psi upper, abs error of log Psi).
    """
    lo_o = np.floor(alphas).astype(np.int64)
    hi_o = np.ceil(alphas).astype(np.int64)
    need = np.unique(np.concatenate([lo_o, hi_o]))
    need = need[need >= 2]
    vals, errs = fn_int(need)
    table = {1: (0.0, 0.0)}
    table.update({int(o): (float(v), float(e)) for o, v, e in zip(need, vals, errs)})
    t = alphas - lo_o
    v_lo = np.array([table[int(o)][0] for o in lo_o])
    v_hi = np.array([table[int(o)][0] for o in hi_o])
    e_lo = np.array([table[int(o)][1] for o in lo_o])
    e_hi = np.array([table[int(o)][1] for o in hi_o])
    return (1 - t) * v_lo + t * v_hi, (1 - t) * e_lo + t * e_hi


def _wang_gaussian(alphas: np.ndarray, sigma: float, w: float) -> Evaluated:
    """WBK19 Thm 9 for the Gaussian with sensitivity 2 (eps(inf) = inf)."""
    s2 = (sigma / BATCH_SENSITIVITY) ** 2

    def fn_int(orders):
        jmax = int(orders.max())
        jj = np.arange(jmax + 1, dtype=float)
        log_moment = jj * (jj - 1.0) / (2.0 * s2)  # (j-1) eps(j), eps(j) = j/(2 s2)
        log_i, rel = wang_thm9_log_psi_m1(orders, math.log(w), log_moment, 1.0 / s2, math.inf)
        lo, hi = log_bounds_from_rel(log_i, rel)
        up = np.logaddexp(0.0, hi)
        return up, up - np.logaddexp(0.0, lo)

    log_psi, log_err = _convex_interpolation(alphas, fn_int)
    rdp = log_psi / (alphas - 1.0) * (1 + 8 * ULP)
    err = log_err / (alphas - 1.0) + 16 * ULP * rdp
    return Evaluated(rdp, err, ["wang2019_thm9"] * alphas.size)


def _two_mixture_gaussian(alphas: np.ndarray, sigma: float, w: float) -> Evaluated:
    q = two_mixture_psi_m1(alphas, w, sigma / BATCH_SENSITIVITY)
    up, err = rdp_from_log_psi_m1(alphas, *log_bounds_from_abs(q.log_value, q.log_err))
    return Evaluated(up, err, ["two_mixture"] * alphas.size)


def wor_gaussian_curve(alphas: np.ndarray, sigma: float, w: float, relation: str) -> Evaluated:
    """Validated-input core: w = batch_size / dataset_size."""
    alphas = np.asarray(alphas, float)
    if relation == "add_remove":
        return sgm_curve(alphas, sigma / BATCH_SENSITIVITY, w)
    trivial = no_amplification(alphas, sigma / BATCH_SENSITIVITY)
    if w >= 1.0:
        return trivial
    best = cap(_wang_gaussian(alphas, sigma, w), _two_mixture_gaussian(alphas, sigma, w))
    return cap(best, trivial)


def check_wor(batch_size, dataset_size, relation) -> float:
    relation = V.choice("relation", relation, RELATIONS)
    n = V.integer("dataset_size", dataset_size, lo=2)
    if relation == "add_remove":
        b = V.integer("batch_size", batch_size, lo=1, hi=n - 1)
    else:
        b = V.integer("batch_size", batch_size, lo=1, hi=n)
    return b / n


def wor_gaussian_rdp(alpha, sigma, batch_size, dataset_size, relation="substitution"):
    """RDP of the Gaussian mechanism on a batch sampled without replacement.

    ``sigma`` is the noise multiplier relative to the per-element clip norm (the
    batch sensitivity under both relations is 2, see the module docstring);
    ``batch_size`` q and ``dataset_size`` N (for ``"add_remove"``: the minimum
    dataset size) give the sampling fraction w = q/N.

    relation="substitution": min(Wang et al. 2019 Thm 9, Schuchardt et al. 2024
    Thm 3.6/H.12 relaxed two-mixture bound).  relation="add_remove": Schuchardt
    et al. 2024 Thm F.3 = Poisson SGM at rate q/N with sensitivity 2.

    Raises ValueError for alpha <= 1, sigma <= 0, batch_size outside [1, N]
    ([1, N-1] for add_remove), dataset_size < 2 or an unknown relation.
    """
    a = V.alphas("alpha", alpha)
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    w = check_wor(batch_size, dataset_size, relation)
    out = wor_gaussian_curve(a, s, w, relation).rdp
    return float(out[0]) if np.ndim(alpha) == 0 else out
