"""Group privacy with PLD: Poisson group-K amplification by dominating pairs.

Relation: a group g of K elements is inserted into or removed from the dataset
(x' = x u g or x = x' u g, |g| = K; "a user owning at most K records"), Poisson rate q,
Gaussian noise multiplier sigma, per-element sensitivity 1.

Theorem (Schuchardt, Stoian, Kosmala & Guennemann, NeurIPS 2024, "Unified mechanism-specific
amplification by subsampling and group privacy amplification", the dominating-pair /
approximate-DP version of Thm 4.2 of the ICML-era text, seed 002; see
``dpspec/families/dpsgd/PROOF.md`` §4.3 and §5):

    remove:  P = sum_{k=0}^K Bin(k | K, q) N(k, sigma^2),   Q = N(0, sigma^2)
    insert:  (Q, P)

is a dominating pair of one DP-SGD step for every alpha >= 0.

Proof sketch.  (1) Condition the Poisson batch on the number k of group members sampled
(probability Bin(k|K,q)); couple all conditional batch laws by drawing a clean batch of
x' and inserting the members of g in a uniformly random order, so the k-th batch differs
from the clean one by k insertions (d(y_k, y_l) <= |k - l|).  (2) The hockey-stick
divergence is jointly convex, so H_alpha(M(x) || M(x')) <= E_coupling H_alpha(sum_k w_k
N(f(y_k), s^2 I) || N(f(y_0), s^2 I)) (conditional optimal transport, their Thm 3.4, with
H_alpha in place of the Renyi moment).  (3) Under ||f(y_k) - f(y_l)|| <= |k - l| the worst
case of this mixture-vs-Gaussian divergence has collinear, equally spaced means f(y_k) =
k e_1 (their App. H), which leaves the one-dimensional pair above.  Composition over steps:
Zhu, Dong & Wang 2022 Thm 10.  K = 1 gives the single-element pair exactly (w = (1-q, q)).

Only pure insertions or pure removals of the group are covered (mixed insert/remove
splits are not).  The authors account with dp_accounting's MixtureGaussianPrivacyLoss; here
the same pair goes through the pessimistic CTD + tilted-FFT machinery of :mod:`.pld`
(``pld_dpsgd(..., sampling="poisson", group_size=K)``; relation "add_remove_group_K").

Comparison point: :func:`pld_group_lemma_epsilon` -- PLD accounting of one element, then
the group-privacy lemma for (eps, delta)-DP: a mechanism that is (e, d)-DP is
(K e, d sum_{i<K} e^{i e})-DP for datasets K insertions/removals apart (Vadhan 2017
Lemma 2.2 / Dwork & Roth 2014 Thm 2.2, by chaining neighbours).
"""

from __future__ import annotations

import math

import numpy as np

from . import _validate as V
from ._pld_fft import saddle_point
from .pld import PldResult, _quantize, pld_dpsgd

THEOREM_GROUP_LEMMA = (
    "group-privacy lemma for (eps, delta)-DP: (e, d) -> (K e, d sum_{i<K} e^{i e}) (Vadhan 2017 Lemma 2.2)"
)


def pld_group_lemma_epsilon(sigma, rate, steps, delta, group_size, discretization=None) -> PldResult:
    """PLD epsilon of one element, then the group lemma (a looser comparison point).

    The smallest e' on the loss grid with max_direction delta_1(e') * sum_{i<K} e^{i e'} <=
    delta, where delta_1 is the certified single-element PLD delta; returns epsilon = K e'.
    Since the sum is >= K, e' >= eps_1(delta / K).  Infinite (no certificate) when the
    lemma needs delta_1 below ~1e-120 or beyond the tilts tried (e.g. sigma = 0.5, q = 1e-4,
    T = 2, delta = 1e-10, K = 8, where the tight group epsilon is ~7 and the lemma's would be
    several hundred); this function is a comparison point, not a certificate path."""
    k = V.integer("group_size", group_size, lo=1)
    dl = V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    pld = pld_dpsgd(sigma, rate, steps, "poisson", 1, discretization=discretization)
    if k == 1:
        return pld.epsilon(dl)
    lo = pld.epsilon(dl / k).epsilon
    if not math.isfinite(lo):
        return _result(math.inf, dl, k, pld)

    def log_factor(e):
        """log sum_{i<K} e^{i e} = log(expm1(K e) / expm1(e)) (vectorised, stable)."""
        e = np.atleast_1d(np.asarray(e, float))
        out = np.full(e.shape, math.log(k))
        big = e > 30.0
        mid = (e > 0.0) & ~big
        out[big] = (k - 1) * e[big] + np.log1p(-np.exp(-k * e[big])) - np.log1p(-np.exp(-e[big]))
        out[mid] = np.log(np.expm1(k * e[mid]) / np.expm1(e[mid]))
        return out

    # one tilted pass per direction, at the saddle point of the lower bracket.  The lemma
    # multiplies delta_1 by up to e^{(K-1) e'}, so the single-step grids and the FFT window
    # must keep far less than delta of mass outside: tails 1e-30, then (if the answer lies
    # beyond those grids) 1e-120.

    def search(d, tail):
        """The smallest grid loss e' >= lo with max_direction delta_1(e') * sum e^{i e'} <=
        delta, where delta_1(e') is the certified delta at the largest grid point <= e'
        (delta_1 is non-increasing, so that is an upper bound).  Each direction's delta_1
        is the pointwise minimum over passes tilted at the saddle points of lo, 4 lo, 16 lo
        (the answer can lie far above lo, where a pass tilted at lo is too noisy)."""
        per_dir = []
        for dr in pld._directions():
            comps = pld._components(dr, d, tail)
            lams = sorted({_quantize(saddle_point(comps, f * lo, d)) for f in (1, 4, 16)})
            per_dir.append([pld._pass(dr, d, lam, tail, tail).deltas_on_grid(None)[1:3] for lam in lams])
        cand = np.unique(np.concatenate([c[0] for cs in per_dir for c in cs] + [np.array([lo])]))
        cand = cand[cand >= lo]
        worst = np.zeros(cand.size)
        for cs in per_dir:
            best = np.full(cand.size, np.inf)
            for l, dg in cs:
                idx = np.searchsorted(l, cand, side="right") - 1
                best = np.minimum(best, np.where(idx >= 0, dg[np.maximum(idx, 0)], np.inf))
            worst = np.maximum(worst, best)
        with np.errstate(divide="ignore"):
            good = np.log(worst) + log_factor(cand) <= math.log(dl)
        hit = np.nonzero(good)[0]
        return float(cand[hit[0]]) if hit.size else math.inf

    # every certified delta_1 includes UNDERFLOW = 1e-300: no e' >= lo can then pass
    if math.log(1e-300) + float(log_factor(lo)[0]) > math.log(dl):
        return _result(math.inf, dl, k, pld)
    for tail in (1e-30, 1e-120):
        hi, d = pld._with_grid(lambda d: search(d, tail))  # noqa: B023 - called in this iteration
        if math.isfinite(hi):
            break
    return _result(k * hi * (1 + 1e-15), dl, k, pld, d)


def _result(eps, delta, k, pld, d=None):
    return PldResult(
        epsilon=float(eps),
        delta=delta,
        by_direction=(("group_lemma", eps),),
        delta_error=0.0,
        discretization=pld.grid if d is None else d,
        fft_length=0,
        tilts=(),
        relation=f"add_remove_group_{k}",
        theorem=f"{THEOREM_GROUP_LEMMA} applied to [{pld.theorem}]",
        method="bisection on e' with the certified single-element delta(e')",
        gdp_mu=None,
    )
