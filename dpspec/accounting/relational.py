"""Relational DP-SGD with entity-level (node) privacy: coupled-sampling accountants.

Source: Y. Huang, H. Yin, E. Chien, R. Wei, P. Li, "Differentially Private Relational Learning
with Entity-level Privacy Guarantees" (arXiv 2506.08347), cited as "Huang et al. 2025"; equation
and theorem numbers are the paper's (``dpspec/families/relational_dpsgd/PROOF.md``).  [D] marks
results derived for dpspec.

Mechanism (Alg. 3): positives are Poisson(``rate``) samples of the ``num_edges`` = m edges of the
degree-capped training graph (max degree ``degree_cap`` = K); negatives are k_neg·|B+| nodes drawn
without replacement from the ``num_nodes`` = n nodes (Alg. 2, NEG-SAMPLE-WOR), so every node is a
sampled negative at most once per batch; noise N(0, sigma^2 C^2 I) on the clipped batch gradient.
The protected unit is a node of the capped graph with all its (<= K) edges.

Accountants (per step; RDP adds over steps, Mironov 2017 Prop 1)
-------------------------------------------------------------------
* **Eq. (3)** (Thm 3 / Cor 4.1, constant sensitivity Delta):

      eps(alpha) = log E_{l~Bin(m,rate)} Psi_alpha((1-G_l) N(0,s^2) + G_l N(1,s^2) || N(0,s^2)) / (alpha-1),
      G_l = min(1, 1 - (1-rate)^K (1 - l k_neg / n)),    s = sigma C / Delta.

  :func:`coupled_sampling_rdp`, :func:`coupled_sampling_rdp_curve`.
* **Thm C.1 / Eq. (47)** (standard clipping at a per-tuple threshold c; a node change shifts the
  sum by at most (i + 2j) c for i removed positives and j in {0, 1} replaced negatives):

      eps(alpha) = max(log E_l Psi_alpha(P_l || N(0,s^2)), log E_l Psi_alpha(N(0,s^2) || P_l)) / (alpha-1),
      P_l = sum_{i<=K, j<=1} Bin(i|K,rate) [(1-p_l), p_l]_j N(i+2j, s^2),  p_l = min(1, l k_neg / n),
      s = sigma C / c.

  :func:`coupled_sampling_rdp_standard_clipping`, :func:`coupled_sampling_standard_clipping_rdp_curve`.
* the tight group bound (Schuchardt et al. 2024 Thm 4.2) where a node change *is* a group of
  <= K pure removals of independently Poisson-sampled tuples (no private negatives), and the naive
  bound alpha Delta^2 / (2 sigma^2 C^2).  :func:`relational_accountants` evaluates every valid one.

Evaluation of the binomial mixture over l [D]
---------------------------------------------
The summand f(l) = Psi_l - 1 >= 0 is **non-decreasing** in l and **convex** on the integers
0 .. floor(n/k_neg) and constant beyond (G_l, p_l are affine in l up to the clamp):

* Eq. (3): Psi_alpha((1-q)Q + q P || Q) = E_Q[(1 + q(P/Q - 1))^alpha] is convex in q and
  minimal (= 1) at q = 0, hence non-decreasing;
* Eq. (47): Psi is jointly convex, P_l is affine in p_l; the derivative at p = 0 of either
  direction is >= 0 because P^(1) (all means + 2) stochastically dominates P^(0) and the
  likelihood ratio L^(0) = P^(0)/Q is increasing (removal: E_{P1}[L0^(a-1)] >= E_{P0}[L0^(a-1)];
  insertion: E_{P1}[L0^(-a)] <= E_{P0}[L0^(-a)]).

Moreover g = Psi^(1/alpha) is **convex** in the mixing weight [D]: with W = P/Q (affine in
the weight, W >= 0), Psi = E_Q[W^alpha] and Cauchy-Schwarz gives
E[V W^(a-1)]^2 <= E[V^2 W^(a-2)] E[W^a], i.e. Psi Psi'' >= (1 - 1/alpha) Psi'^2, which is
(Psi^(1/alpha))'' >= 0; the insertion moment E_Q[W^(1-alpha)] is even log-convex.

So the sum E_l f(l) = sum_l Bin(l) f(l) is bracketed, with f evaluated at a set of nodes only:
between consecutive nodes a < b, g(l) <= the chord of g (a power-mean bound on f, much tighter
than the chord of f when f grows by large factors per unit l, as at large orders) and
g(l) >= max(g(a), the neighbouring blocks' secants extended) (convexity + monotonicity); beyond
the last node L, f <= f_max (the no-amplification value) and P(l > L) is bounded by the Chernoff
bound exp(-m KL((L+1)/m || rate)); L grows while that tail matters.  Nodes are refined (interval
halving) until the gap upper - lower is <= ``rtol`` x the RDP value (relative) for every order
whose value is not within 0.1 % of the no-amplification bound.  Nothing is truncated: this is
the "certified tail" of digest §3.7, and the returned value is an upper bound on the exact
Eq. (3)/(47) value with the gap as its stated error (``RdpCurve.abs_errors``).  The binomial
weights use Loader's saddle-point log pmf (relative error ~1e-15 even at m ~ 1e7, where the
lgamma difference loses ~8 digits), and Psi - 1 at each node comes from the accounting core
(``poisson.sgm_curve`` for Eq. (3): exact positive-term sums at integer orders, quadrature with
error bounds at real orders; ``group._removal_poly`` / ``_quadrature.mixture_psi_m1`` for
Eq. (47)), each as log-bounds, so no "1 + tiny - 1" cancellation occurs (tiny per-step RDPs
keep their relative accuracy).  Orders are refined in three groups (real orders, integers
<= 64, larger integers) with their own l-nodes.

Speed (same floats) [D]: the removal polynomials of all l-nodes of a refinement round are one
batched recursion (``group.DChain``), continued in j from the integer orders <= 64 to the larger
ones; each order group's bracket is memoised per configuration and noise ratio (``_MEMO``), so the
certificate's evaluation after a calibration reuses the search's; the search evaluates only the
order groups that can attain epsilon (:func:`_search_epsilon`).  :func:`certify_relational` is the
one evaluation a certificate records (no search).

Paper looseness kept (conservative): l ~ Bin(m, rate) although only m - K edges remain
(Bin(m, rate) stochastically dominates Bin(m-K, rate) and f is non-decreasing); G_l clamped at 1
for l k_neg > n (Alg. 2 is infeasible there; see DPS606 for how the sampler handles it).

Soundness rules (``RelationalSoundnessError``, a ValueError with ``.rule`` / ``.hint``): see
:data:`RULES`.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from . import _validate as V
from ._exact import log_bounds_from_abs, rdp_from_log_psi_m1
from ._logmath import ULP, log_binom_pmf, log_expm1, logsumexp_rows
from .conversion import convert, dp_from_curve
from .curve import DEFAULT_ALPHAS, DpResult, RdpCurve, _make
from .errors import SoundnessError, register_rules
from .poisson import is_integer_order, sgm_curve

__all__ = [
    "RULES",
    "RelationalSoundnessError",
    "THEOREM_EQ3",
    "THEOREM_C1",
    "THEOREM_GROUP_REL",
    "THEOREM_NAIVE",
    "CLIPPINGS",
    "NEGATIVE_SAMPLERS",
    "POSITIVE_SAMPLERS",
    "RelationalConfig",
    "AccountantResult",
    "RelationalAccounting",
    "coupled_sampling_rdp",
    "coupled_sampling_rdp_standard_clipping",
    "coupled_sampling_rdp_curve",
    "coupled_sampling_standard_clipping_rdp_curve",
    "naive_rdp_curve",
    "freq_clip_sensitivity",
    "node_sensitivity",
    "relational_accountants",
    "relational_epsilon",
    "calibrate_relational_sigma",
    "certify_relational",
    "clear_memo",
    "overflow_probability",
    "check_sampler",
    "tuple_threshold",
    "consistency_notes",
    "ASSUMPTIONS",
    "CALIBRATION_ALPHAS",
    "SEARCH_ALPHAS",
]

THEOREM_EQ3 = (
    "Huang et al. 2025 Thm 3 / Eq. (3) (cardinality-dependent coupled sampling: "
    "Poisson positives + NEG-SAMPLE-WOR negatives, constant sensitivity)"
)
THEOREM_C1 = (
    "Huang et al. 2025 Thm C.1 / Eq. (47) (coupled sampling, standard per-tuple clipping, max of both directions)"
)
THEOREM_GROUP_REL = (
    "Schuchardt et al. 2024 Thm 4.2 (tight group amplification: node change = <= K removals of Poisson-sampled tuples)"
)
THEOREM_NAIVE = "Mironov 2017 Prop 7 (Gaussian mechanism, no amplification; Huang et al. §5.1 naive bound)"
METHOD_MIX = (
    "E_l over Bin(m, rate): certified bracket from f at refined nodes (chord upper / "
    "left-value lower bounds on convex non-decreasing f, Chernoff tail x no-amplification "
    "value), node values from the accounting core as log-bounds; capped by the "
    "no-amplification bound"
)

#: Soundness-rule catalogue (stable ids for the checker / certificates).
RULES: dict[str, str] = {
    "DPS601": "FREQ-CLIP (Alg. 1) does not have the sensitivity C claimed by Prop 4.1 "
    "(counterexample 1.75 C); it is certifiable only with the corrected bound",
    "DPS602": "negatives sampled with replacement: a node can be a negative in many tuples (|B-(u)| unbounded)",
    "DPS603": "in-batch negatives: a node's encoding enters every tuple of the batch",
    "DPS604": "negatives that depend on the contents of the positives (not cardinality-dependent "
    "sampling; e.g. corrupting a given endpoint's neighbourhood, degree- or hard-negatives)",
    "DPS605": "positives not Poisson-sampled (shuffling / fixed-size batches): no amplification "
    "theorem for coupled sampling covers it",
    "DPS606": "k_neg x batch size exceeds the number of nodes: NEG-SAMPLE-WOR is infeasible",
    "DPS607": "degree cap invalid (K < 1) or the training graph is not capped (max degree > K)",
    "DPS608": "graph input invalid (self-loop, duplicate or dangling edge, bad node index)",
    "DPS609": "node attribute (text / features) missing for some nodes",
    "DPS610": "train/test split is not node-disjoint",
    "DPS611": "unknown or inconsistent relational DP-SGD configuration",
}


register_rules(RULES)


class RelationalSoundnessError(SoundnessError):
    """A relational DP-SGD configuration whose guarantee would not be provable (``DPS6xx``)."""


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------


def _check_graph(num_edges, num_nodes, rate, degree_cap, negatives_per_positive):
    m = V.integer("num_edges", num_edges, lo=1)
    n = V.integer("num_nodes", num_nodes, lo=2)
    r = V.real("rate", rate, lo=0.0, hi=1.0)
    K = V.integer("degree_cap", degree_cap, lo=0)
    if K < 1:
        raise RelationalSoundnessError(
            f"degree_cap must be >= 1, got {K}",
            rule="DPS607",
            hint="a degree cap of 0 removes every edge; use K >= 1 (the paper uses K = 5)",
        )
    k = V.integer("negatives_per_positive", negatives_per_positive, lo=0)
    if k > n:
        raise RelationalSoundnessError(
            f"negatives_per_positive = {k} exceeds num_nodes = {n}",
            rule="DPS606",
            hint="NEG-SAMPLE-WOR draws k_neg distinct nodes per positive",
        )
    return m, n, r, K, k


def consistency_notes(num_edges: int, num_nodes: int, degree_cap: int) -> list[str]:
    """Notes on graph counts that cannot come from a capped graph (not errors: a larger m is
    conservative, Eq. (3) being non-decreasing in m; the paper's §5.1 defaults n = 1e6,
    m = 5e6, K = 5 are such a case: max degree 5 allows at most n K / 2 = 2.5e6 edges)."""
    if 2 * num_edges > num_nodes * degree_cap:
        return [
            f"num_edges = {num_edges} > num_nodes * degree_cap / 2 = "
            f"{num_nodes * degree_cap / 2:g}: no graph with max degree <= K has that many "
            "edges (pass the capped graph's counts)"
        ]
    return []


def _alphas(alphas):
    return DEFAULT_ALPHAS if alphas is None else np.sort(V.alphas("alphas", alphas))


# ------------------------------------------------------------------------------------------------
# certified E_{l ~ Bin(m, rate)}[f(l)] for f >= 0 non-decreasing, convex up to the kink [D]
# ------------------------------------------------------------------------------------------------

_DEAD = 0.999  # see _eq3_evaluated / _c1_evaluated
_TAIL_LOG = 2000.0  # nodes cover l with log P(l >= .) >= log p_mode - _TAIL_LOG
_MAX_ROUNDS = 40


def _stirlerr(x: np.ndarray) -> np.ndarray:
    """log(x!) - log(sqrt(2 pi x) (x/e)^x) (Loader 2000), accurate to ~1e-16 absolute."""
    x = np.asarray(x, float)
    out = np.empty_like(x)
    small = x <= 15
    if np.any(small):
        xs = x[small]
        with np.errstate(divide="ignore", invalid="ignore"):
            v = (
                special.gammaln(xs + 1.0)
                - (xs + 0.5) * np.log(np.where(xs > 0, xs, 1.0))
                + xs
                - 0.5 * math.log(2 * math.pi)
            )
        out[small] = np.where(xs > 0, v, 0.0)
    big = ~small
    if np.any(big):
        xb = x[big]
        x2 = xb * xb
        out[big] = (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - 1.0 / (1188 * x2)) / x2) / x2) / x2) / xb
    return out


def _bd0(x: np.ndarray, np_: np.ndarray) -> np.ndarray:
    """x log(x/np) + np - x without cancellation (Loader 2000)."""
    x = np.asarray(x, float)
    np_ = np.broadcast_to(np.asarray(np_, float), x.shape)
    out = np.empty_like(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        near = np.abs(x - np_) < 0.1 * (x + np_)
        direct = x * np.log(np.where(x > 0, x / np_, 1.0)) + np_ - x
        out[:] = direct
        if np.any(near):
            xn, pn = x[near], np_[near]
            v = (xn - pn) / (xn + pn)
            s = (xn - pn) * v
            ej = 2 * xn * v
            v2 = v * v
            for j in range(1, 200):
                ej = ej * v2
                s1 = s + ej / (2 * j + 1)
                if np.all(s1 == s):
                    break
                s = s1
            out[near] = s
    return out


def _log_pmf(ls: np.ndarray, m: int, rate: float) -> np.ndarray:
    """log Bin(l | m, rate) by Loader's saddle-point form (R's dbinom): relative error of the
    pmf ~1e-15 even for m ~ 1e7 (the lgamma difference loses ~8 digits there)."""
    ls = np.asarray(ls, float)
    q = 1.0 - rate
    out = np.empty_like(ls)
    e0 = ls == 0
    em = ls == m
    mid = ~(e0 | em)
    out[e0] = m * math.log1p(-rate)
    out[em] = m * math.log(rate)
    if np.any(mid):
        x = ls[mid]
        lc = (
            _stirlerr(np.array([float(m)]))[0]
            - _stirlerr(x)
            - _stirlerr(m - x)
            - _bd0(x, m * rate)  # type: ignore[arg-type]  # broadcasts a scalar
            - _bd0(m - x, m * q)  # type: ignore[arg-type]
        )
        out[mid] = lc + 0.5 * (math.log(m) - np.log(x) - np.log(m - x) - math.log(2 * math.pi))
    return out


def _log_upper_tail(L: int, m: int, rate: float) -> float:
    """Upper bound on log P(l > L), l ~ Bin(m, rate) (Chernoff: exp(-m KL(x || rate)), x=(L+1)/m)."""
    if L >= m:
        return -math.inf
    x = (L + 1) / m
    if x <= rate:
        return 0.0
    kl = x * math.log(x / rate) + ((1 - x) * math.log((1 - x) / (1 - rate)) if x < 1 else 0.0)
    return -m * kl * (1 - 4 * ULP)


def _support_end(m: int, rate: float, log_target: float | None = None) -> int:
    """Smallest L (>= the mode) whose Chernoff tail bound log P(l > L) is <= ``log_target``
    (default: log p_mode - _TAIL_LOG); m if none is."""
    mode = min(m, int(math.floor((m + 1) * rate)))
    if log_target is None:
        log_target = float(_log_pmf(np.array([mode]), m, rate)[0]) - _TAIL_LOG
    lo, hi = mode, m
    if _log_upper_tail(lo, m, rate) <= log_target:
        return lo
    while hi - lo > 1:  # _log_upper_tail is non-increasing in L beyond the mean
        mid = (lo + hi) // 2
        if _log_upper_tail(mid, m, rate) <= log_target:
            hi = mid
        else:
            lo = mid
    return hi


class _Memo:
    """Bounded memo (least recently used first out) of the expensive per-noise work: the
    certified bracket of each order group and the polynomial recursion of each l-node, per
    accountant, configuration and noise ratio.  A calibration search evaluates each noise level
    with several accountant subsets and the certificate evaluates its final sigma again; the
    memo makes those repeats free.  Entries are pure functions of their key (results are
    identical with or without the memo); nothing else is kept between calls."""

    def __init__(self, size: int):
        self.size = size
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def context(self, key: tuple) -> dict:
        with self._lock:
            ctx = self._d.get(key)
            if ctx is None:
                ctx = self._d[key] = {}
                while len(self._d) > self.size:
                    self._d.popitem(last=False)
            else:
                self._d.move_to_end(key)
            return ctx

    def clear(self) -> None:
        with self._lock:
            self._d.clear()


#: per-(accountant, configuration, noise ratio) memo of _eq3_evaluated / _c1_evaluated
_MEMO = _Memo(16)


def clear_memo() -> None:
    """Forget the memoised accountant evaluations (they are recomputed identically)."""
    _MEMO.clear()


def _memo_group(memo: dict, alphas: np.ndarray, rtol: float, run: Callable) -> _MixResult:
    """``run()`` (the bracket of one order group) memoised in ``memo`` by orders and rtol."""
    key = ("group", np.asarray(alphas, float).tobytes(), float(rtol))
    res = memo.get(key)
    if res is None:
        res = run()
        res = memo[key] = _MixResult(res.log_lo.copy(), res.log_hi.copy(), res.nodes, res.rounds)
    return res


@dataclass
class _MixResult:
    log_lo: np.ndarray  # log lower bound of E_l f, per column
    log_hi: np.ndarray  # log upper bound
    nodes: int
    rounds: int


_MAX_POINT_WORK = 3e7  # interior points x columns per round with per-point bounds
_CHUNK = 2e6  # points x columns per vectorised chunk


def _binomial_mixture(
    m: int,
    rate: float,
    kink: float,
    eval_fn: Callable,
    kappa: np.ndarray,
    log_fmax: np.ndarray,
    log_cap: np.ndarray,
    rtol: float,
    max_nodes: int = 600,
) -> _MixResult:
    """Certified bracket of S = E_{l~Bin(m,rate)} f(l) (vector-valued f, one column per order).

    ``eval_fn(ls)`` returns (log f_lo, log f_hi) of shape (len(ls), c), f = Psi - 1 >= 0.
    Requirements (module docstring): f non-decreasing in l; g = (1 + f)^kappa convex on the
    integers 0..floor(kink) (kappa = 1/alpha: Psi^(1/alpha) is convex in the mixing weight, by
    Cauchy-Schwarz, Psi Psi'' >= (1 - 1/alpha) Psi'^2); f constant for l >= kink.
    Bounds inside a block (a, b) of consecutive nodes:

    * upper: g(l) <= (1-t) g(a) + t g(b) (convexity), t = (l-a)/(b-a);
    * lower: g(l) >= max(g(a), secant of the left block extended, secant of the right block
      extended backwards) (convexity + monotonicity);
    * if the per-point work of a round exceeds _MAX_POINT_WORK, the widest blocks get the
      monotone bounds f(a) <= f(l) <= f(b) instead.

    Beyond the last node L: P(l > L) <= Chernoff, times f <= f_max, or times f(L) when L >= kink
    (f is constant there; L is always a node).  ``log_fmax`` bounds log f
    everywhere; columns with log S_lo >= ``log_cap`` are not refined further."""
    L = _support_end(m, rate)

    def pmf_arrays(L):
        logp = _log_pmf(np.arange(L + 1), m, rate)
        # float error of the saddle-point log pmf: ulps of the magnitudes of the terms
        pmf_err = 64 * ULP * (np.abs(logp) + math.log(m) + 10.0)
        return logp + pmf_err, logp - pmf_err, _log_upper_tail(L, m, rate)

    logp_hi, logp_lo, log_tail = pmf_arrays(L)
    mu = m * rate
    sd = math.sqrt(max(mu * (1 - rate), 1e-300))
    kfloor = math.floor(kink) if math.isfinite(kink) else L + 1
    init = {0, L, int(min(L, max(0, round(mu))))}
    for kk in (math.floor(kink), math.ceil(kink)) if math.isfinite(kink) else ():
        if 0 <= kk <= L:
            init.add(int(kk))
    for t in np.linspace(-4, 4, 17):
        init.add(int(min(L, max(0, round(mu + t * sd)))))
    step = max(1.0, sd)
    x = mu + 4 * sd
    while x < L:
        init.add(int(x))
        x += step
        step *= 2
    nodes = np.array(sorted(init), dtype=np.int64)
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    bcache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    inv_k = 1.0 / kappa
    kceil = math.ceil(kink) if math.isfinite(kink) else None

    def evaluate(new):
        new = [int(v) for v in new if int(v) not in cache]
        if new:
            lo, hi = eval_fn(np.array(new, dtype=np.int64))
            for i, v in enumerate(new):
                cache[v] = (lo[i], hi[i])

    rounds = 0
    while True:
        rounds += 1
        evaluate(nodes)
        flo = np.stack([cache[int(v)][0] for v in nodes])
        fhi = np.stack([cache[int(v)][1] for v in nodes])
        glo = kappa * np.logaddexp(0.0, flo)  # log g = kappa log Psi
        ghi = kappa * np.logaddexp(0.0, fhi)
        J = nodes.size
        terms_up = [logp_hi[nodes][:, None] + fhi]
        terms_lo = [logp_lo[nodes][:, None] + flo]
        blk = np.nonzero(np.diff(nodes) >= 2)[0]  # block j lies between node j and j+1
        nb = blk.size
        blk_up = np.full((nb, kappa.size), -np.inf)
        blk_lo = np.full((nb, kappa.size), -np.inf)
        width = nodes[blk + 1] - nodes[blk]
        # per-point convexity bounds for all blocks unless the work is excessive; then the
        # widest blocks get the monotone bounds f(a) <= f(l) <= f(b)
        narrow = np.ones(nb, dtype=bool)
        order = np.argsort(width)
        cum = np.cumsum(width[order] - 1) * kappa.size
        narrow[order[cum > _MAX_POINT_WORK]] = False
        wide = np.nonzero(~narrow)[0]
        for w in wide:
            j = blk[w]
            a, b = nodes[j], nodes[j + 1]
            lp_hi = float(logsumexp_rows(logp_hi[a + 1 : b], axis=0))
            lp_lo = float(logsumexp_rows(logp_lo[a + 1 : b], axis=0))
            blk_up[w] = lp_hi + fhi[j + 1]
            blk_lo[w] = lp_lo + flo[j]
        nw_all = np.nonzero(narrow)[0]
        # block bounds depend on (previous node, a, b, next node): cache them across rounds
        keys = []
        todo = []
        for w in nw_all:
            j = blk[w]
            key = (
                int(nodes[j - 1]) if j >= 1 else -1,
                int(nodes[j]),
                int(nodes[j + 1]),
                int(nodes[j + 2]) if j + 2 < J else -1,
            )
            keys.append(key)
            if key in bcache:
                blk_up[w], blk_lo[w] = bcache[key]
            else:
                todo.append((w, key))
        # chunks of blocks with <= _CHUNK points x columns each
        chunks: list = []
        cur: list = []
        acc_pts = 0
        for w, key in todo:
            pts = int(width[w] - 1) * kappa.size
            if cur and acc_pts + pts > _CHUNK:
                chunks.append(cur)
                cur, acc_pts = [], 0
            cur.append((w, key))
            acc_pts += pts
        if cur:
            chunks.append(cur)
        for ch in chunks:
            ws = np.array([w for w, _ in ch])
            u, lo_ = _block_bounds(nodes, blk[ws], glo, ghi, logp_hi, logp_lo, inv_k, kfloor)
            blk_up[ws], blk_lo[ws] = u, lo_
            for i, (_, key) in enumerate(ch):
                bcache[key] = (u[i], lo_[i])
        # beyond the last node L: f <= f_max, and f = f(L) exactly once L >= ceil(kink) (f is constant
        # there).  Without the second case the Chernoff tail times f_max dominated large orders: at
        # alpha = 128 (cora, T = 1500) P(l > 990) ~ e^-2005 times f_max ~ e^5395 gave log S_up = 3389
        # against log S_lo = 2873, an error of 6.1e3 in the T-step RDP, where f(990) ~ e^3081.
        # (+1e-6: the nodes' mixing weight min(1, ...) is computed in float; it is 1 up to rounding there)
        log_ftail = log_fmax if kceil is None or L < kceil else np.minimum(log_fmax, fhi[-1] + 1e-6)
        log_up = logsumexp_rows(np.vstack(terms_up + [blk_up, (log_tail + log_ftail)[None, :]]), axis=0)
        log_lo = logsumexp_rows(np.vstack(terms_lo + [blk_lo]), axis=0)
        if rounds >= _MAX_ROUNDS or J >= max_nodes or nb == 0:
            break
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            gap = blk_up + np.log1p(-np.exp(np.minimum(blk_lo - blk_up, 0.0)))
            gap = np.where(blk_lo >= blk_up, -np.inf, gap)
        live = (log_lo < log_cap) & np.isfinite(log_up)
        if not np.any(live):
            break
        # target: log1p(S_up) - log1p(S_lo) <= rtol log1p(S_lo) (relative error of the RDP);
        # log1p(S_up) - log1p(S_lo) <= (S_up - S_lo)/(1 + S_lo), so each block's gap may be
        # rtol log1p(S_lo) (1 + S_lo) / #blocks
        with np.errstate(divide="ignore"):
            small = np.log(np.log1p(np.exp(np.minimum(log_lo, 30.0))))
            l1p = np.where(log_lo > 30, np.log(np.maximum(log_lo, 1e-300)), small)
            budget = l1p + np.logaddexp(0.0, log_lo)
        thr = (budget + math.log(rtol) - math.log(max(1, nb) + 1))[None, :]
        bad = np.any((gap > thr) & live[None, :], axis=1)
        if kceil is not None:  # f is constant from ceil(kink) on: refining cannot help
            bad &= nodes[blk] < kceil
        # tail beyond L: extend the support while it matters for a live column
        tail_need = float(np.min(np.where(live, thr[0] - log_fmax, np.inf)))
        L_max = m if kceil is None else min(m, max(kceil, 1))
        extend = L < L_max and log_tail > tail_need
        if not np.any(bad) and not extend:
            break
        new_nodes = [nodes]
        if extend:
            L_new = min(L_max, max(L + 1, _support_end(m, rate, tail_need - 1.0)))
            if L_new > L:
                L = L_new
                logp_hi, logp_lo, log_tail = pmf_arrays(L)
                new_nodes.append(np.array([L]))
        if np.any(bad):
            new_nodes.append((nodes[blk[bad]] + nodes[blk[bad] + 1]) // 2)
        nodes = np.unique(np.concatenate(new_nodes))
    return _MixResult(log_lo, log_up, int(nodes.size), rounds)


def _block_bounds(nodes, jj, glo, ghi, logp_hi, logp_lo, inv_k, kfloor):
    """log upper / lower bounds of sum_{a<l<b} p_l f(l) for the blocks starting at node
    indices ``jj`` (see :func:`_binomial_mixture`)."""
    J = nodes.size
    a = nodes[jj]
    b = nodes[jj + 1]
    cnt = b - a - 1
    seg = np.repeat(np.arange(jj.size), cnt)
    starts = np.zeros(jj.size, dtype=np.int64)
    starts[1:] = np.cumsum(cnt)[:-1]
    ell = a[seg] + (np.arange(seg.size) - starts[seg]) + 1
    t = ((ell - a[seg]) / (b - a)[seg])[:, None]
    ja, jb = jj[seg], jj[seg] + 1
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        # upper: log g <= log g_a + log1p(t expm1(log g_b - log g_a))
        dg = np.maximum(ghi[jb] - ghi[ja], 0.0)
        lg_up = ghi[ja] + np.where(
            dg > 30, np.log(t) + dg + np.log1p((1 - t) / t * np.exp(-dg)), np.log1p(t * np.expm1(dg))
        )
        y_up = inv_k * lg_up
        f_up = np.where(y_up > 0, log_expm1(np.maximum(y_up, 1e-300)), -np.inf)
        # lower: g_a, left secant extended, right secant extended backwards
        lg_lo = glo[ja].copy()
        has_left = ja >= 1
        if np.any(has_left):
            jl = np.maximum(ja - 1, 0)
            span = (a[seg] - nodes[jl]).astype(float)[:, None]
            frac = (ell - a[seg])[:, None] / np.where(span > 0, span, 1.0)
            # g(l)/g_a >= 1 + frac (1 - g_{a'}/g_a)
            r = -np.expm1(np.minimum(ghi[jl] - glo[ja], 0.0))
            cand = glo[ja] + np.log1p(frac * r)
            lg_lo = np.where(has_left[:, None] & (span > 0), np.maximum(lg_lo, cand), lg_lo)
        jr = jb + 1
        has_right = jr <= J - 1
        if np.any(has_right):
            jr_c = np.minimum(jr, J - 1)
            ok = has_right & (nodes[jr_c] <= kfloor)
            span = (nodes[jr_c] - b[seg]).astype(float)[:, None]
            frac = (b[seg] - ell)[:, None] / np.where(span > 0, span, 1.0)
            # g(l)/g_b >= 1 - frac (g_{b'}/g_b - 1)
            r = np.expm1(np.maximum(ghi[jr_c] - glo[jb], 0.0))
            inner = 1.0 - frac * r
            cand = np.where(inner > 0, glo[jb] + np.log(np.where(inner > 0, inner, 1.0)), -np.inf)
            lg_lo = np.where(ok[:, None] & (span > 0), np.maximum(lg_lo, cand), lg_lo)
        y_lo = inv_k * np.minimum(lg_lo, lg_up)
        f_lo = np.where(y_lo > 0, log_expm1(np.maximum(y_lo, 1e-300)), -np.inf)
    u = logp_hi[ell][:, None] + f_up
    lw = logp_lo[ell][:, None] + f_lo
    return _seg_lse(u, starts), _seg_lse(lw, starts)


def _seg_lse(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Row-segment log-sum-exp of a 2-D array (segments start at ``starts``, all non-empty)."""
    mx = np.maximum.reduceat(x, starts, axis=0)
    ms = np.where(np.isfinite(mx), mx, 0.0)
    seg = np.repeat(np.arange(starts.size), np.diff(np.append(starts, x.shape[0])))
    with np.errstate(under="ignore", divide="ignore"):
        sm = np.add.reduceat(np.exp(x - ms[seg]), starts, axis=0)
        out = np.log(sm) + ms
    return np.where(np.isneginf(mx), -np.inf, out)


# ------------------------------------------------------------------------------------------------
# Eq. (3)
# ------------------------------------------------------------------------------------------------


def _gamma_params(rate: float, K: int):
    log_c = K * math.log1p(-rate)  # log (1-rate)^K
    one_minus_c = -math.expm1(log_c)
    return math.exp(log_c), one_minus_c


def _sgm_log_bounds(alphas: np.ndarray, s: float, q: float):
    """log-bounds (lo, hi) of Psi_alpha - 1 for the Poisson SGM at rate q (noise s)."""
    ev = sgm_curve(alphas, s, q)
    am1 = alphas - 1.0
    up = ev.rdp * am1
    lo = np.maximum(ev.rdp - ev.err, 0.0) * am1
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lo = np.where(lo > 0, log_expm1(np.where(lo > 0, lo, 1.0)), -np.inf)
        log_hi = np.where(up > 0, log_expm1(np.where(up > 0, up, 1.0)), -np.inf)
    return log_lo, log_hi


def _eq3_evaluated(alphas, s, m, n, rate, K, k, rtol, groups=None):
    """Per-step Eq. (3) RDP (upper, error) at orders ``alphas`` with noise ratio s.

    ``groups``: indices into :func:`_order_groups` to evaluate (None: all); the orders of the
    other groups are NaN (for the calibration search, :func:`_search_epsilon`).  Each order
    group's bracket is memoised per configuration and noise ratio (:data:`_MEMO`)."""
    noamp = alphas / (2.0 * s * s)
    if rate == 0.0:
        z = np.zeros(alphas.size)
        return z, z, "rate=0"
    if rate == 1.0:
        ev = sgm_curve(alphas, s, 1.0)
        return ev.rdp, ev.err, "rate=1"
    c, one_minus_c = _gamma_params(rate, K)
    if k == 0:
        q = 1.0 if rate == 1.0 else one_minus_c
        ev = sgm_curve(alphas, s, q)
        return ev.rdp, ev.err, "k_neg=0: Poisson SGM at rate 1-(1-rate)^K" if k == 0 else "rate=1"
    b = c * k / n
    kink = n / k

    def gamma_of(l):
        return min(1.0, one_minus_c + b * float(l))

    log_lo = np.empty(alphas.size)
    log_hi = np.empty(alphas.size)
    info = []
    memo = _MEMO.context(("eq3", s, m, n, rate, K, k))
    for gi, sel in enumerate(_order_groups(alphas)):
        al = alphas[sel]
        if groups is not None and gi not in groups:
            log_lo[sel], log_hi[sel] = np.nan, np.nan
            info.append("-")
            continue

        def eval_fn(ls, al=al):
            lo = np.empty((ls.size, al.size))
            hi = np.empty((ls.size, al.size))
            for i, l in enumerate(ls):
                lo[i], hi[i] = _sgm_log_bounds(al, s, gamma_of(l))
            return lo, hi

        def run(al=al, eval_fn=eval_fn):
            log_fmax = log_expm1(al * (al - 1) / (2 * s * s)) + 1e-12
            # orders whose lower bound is within 0.1 % of the no-amplification bound are not
            # refined further (amplification is worthless there; the bound stays valid)
            log_cap = log_expm1(_DEAD * al * (al - 1) / (2 * s * s))
            return _binomial_mixture(m, rate, kink, eval_fn, 1.0 / al, log_fmax, log_cap, rtol)

        res = _memo_group(memo, al, rtol, run)
        log_lo[sel], log_hi[sel] = res.log_lo, res.log_hi
        info.append(f"{res.nodes}")
    with np.errstate(invalid="ignore"):
        up, err = rdp_from_log_psi_m1(alphas, log_lo, log_hi)
    take = noamp * (1 + 4 * ULP) < up
    up = np.where(take, noamp * (1 + 4 * ULP), up)
    err = np.where(take, noamp * 8 * ULP, err)
    return up, err, f"eq3 (nodes per order group: {'/'.join(info)})"


def _order_groups(alphas: np.ndarray) -> list[np.ndarray]:
    """Order groups refined with their own l-nodes: real orders (quadrature, expensive per
    node, summand peaked near the bulk), integer orders <= 64, and larger ones (summand peaked
    far in the right tail)."""
    ints = is_integer_order(alphas)
    groups = [~ints, ints & (alphas <= 64), ints & (alphas > 64)]
    return [g for g in groups if np.any(g)]


def coupled_sampling_rdp(alpha, sigma, num_edges, num_nodes, rate, degree_cap, negatives_per_positive, rtol=1e-10):
    """Per-step RDP of relational DP-SGD by Huang et al. 2025 Eq. (3) (Thm 3, Cor 4.1).

    Poisson(``rate``) positives over the ``num_edges`` degree-capped edges (max degree
    ``degree_cap``), ``negatives_per_positive`` negatives per positive drawn without replacement
    from the ``num_nodes`` nodes (Alg. 2), constant node-level sensitivity C, noise sigma C.
    The binomial sum is evaluated with a certified bracket (no truncated window; module
    docstring); the returned value is an upper bound within ``rtol`` (relative, on Psi - 1) of
    the exact Eq. (3).  Float for scalar ``alpha``, array otherwise.
    """
    a = V.alphas("alpha", alpha)
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    m, n, r, K, k = _check_graph(num_edges, num_nodes, rate, degree_cap, negatives_per_positive)
    up, _, _ = _eq3_evaluated(a, s, m, n, r, K, k, rtol)
    return float(up[0]) if np.ndim(alpha) == 0 else up


def coupled_sampling_rdp_curve(
    sigma,
    num_edges,
    num_nodes,
    rate,
    degree_cap,
    negatives_per_positive,
    steps=1,
    alphas=None,
    sensitivity=1.0,
    rtol=1e-10,
) -> RdpCurve:
    """Certified Eq. (3) RDP curve of ``steps`` steps.

    ``sensitivity`` = Delta / C: the node-level sensitivity of the clipped batch gradient in
    units of the noise scale C (noise std sigma C).  1 for the sound static clipping
    (:func:`dpspec.relational.clipping.static_threshold`), K + 2 for standard clipping at C,
    :func:`freq_clip_sensitivity` for FREQ-CLIP.  Eq. (3) is evaluated at noise ratio
    sigma / sensitivity.
    """
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    d = V.real("sensitivity", sensitivity, lo=0.0, lo_open=True)
    t = V.integer("steps", steps, lo=0)
    m, n, r, K, k = _check_graph(num_edges, num_nodes, rate, degree_cap, negatives_per_positive)
    a = _alphas(alphas)
    up, err, src = _eq3_evaluated(a, s / d, m, n, r, K, k, rtol)
    theorem = f"{THEOREM_EQ3}; m={m}, n={n}, rate={r:.6g}, K={K}, k_neg={k}, noise/sensitivity={s / d:.6g}"
    return _scale(a, up, err, t, theorem, METHOD_MIX + "; node values: " + _sgm_method(), src)


def _sgm_method():
    from .poisson import METHOD_SGM

    return METHOD_SGM


def _scaled(up, err, t):
    """T-step values and errors from per-step ones (RDP composition; rounding included)."""
    rdp = up * t * (1 + 4e-16)
    return rdp, err * t + 8e-16 * rdp


def _scale(a, up, err, t, theorem, method, src) -> RdpCurve:
    rdp, errs = _scaled(up, err, t)
    if t != 1:
        theorem = f"{t} x [{theorem}] (RDP composition, Mironov 2017 Prop 1)"
    return _make(a, rdp, errs, theorem, method, [src] * a.size)


# ------------------------------------------------------------------------------------------------
# Thm C.1 / Eq. (47)
# ------------------------------------------------------------------------------------------------


def _c1_log_weights(rate: float, K: int, p: float) -> np.ndarray:
    """log weights of the means 0..K+2 of P_l = sum_{i,j} Bin(i|K,rate)[(1-p), p]_j N(i + 2j)."""
    i = np.arange(K + 1, dtype=float)
    lb = log_binom_pmf(i, K, math.log(rate), math.log1p(-rate))
    out = np.full(K + 3, -np.inf)
    with np.errstate(divide="ignore"):
        l0 = math.log1p(-p) if p < 1 else -np.inf
        l1 = math.log(p) if p > 0 else -np.inf
    out[: K + 1] = np.logaddexp(out[: K + 1], lb + l0)
    out[2:] = np.logaddexp(out[2:], lb + l1)
    return out


def _mixture_log_bounds(alphas: np.ndarray, lw: np.ndarray, s: float, d=None, quad=None):
    """log-bounds of Psi - 1 for removal (P=L || Q) and insertion (Q || P=L) of the mixture
    sum_mu w_mu N(mu, s^2) against N(0, s^2); lw[0] must be finite.  ``d``: the (log D_j,
    rel_d) of ``lw`` for the exact polynomial (:func:`_poly_d`), computed here if None;
    ``quad``: its quadratures (:func:`_mixture_quads`), likewise."""
    from .group import _removal_poly

    poly = _poly_mask(alphas, lw)
    rem_q, ins_q = _mixture_quads(alphas, [lw], s)[0] if quad is None else quad
    n = alphas.size
    rem_lo, rem_hi = np.empty(n), np.empty(n)
    if np.any(poly):
        rem_lo[poly], rem_hi[poly] = _removal_poly(alphas[poly].astype(np.int64), lw, s, d)
    if np.any(~poly):
        rem_lo[~poly], rem_hi[~poly] = log_bounds_from_abs(rem_q.log_value, rem_q.log_err)
    ins_lo, ins_hi = log_bounds_from_abs(ins_q.log_value, ins_q.log_err)
    return rem_lo, rem_hi, ins_lo, ins_hi


def _mixture_quads(alphas: np.ndarray, lws: list, s: float) -> list:
    """(removal quadrature at the orders outside :func:`_poly_mask`, or None; insertion
    quadrature) of each mixture, the mixtures with the same orders computed together
    (``_quadrature.mixture_psi_m1_batch``: the same floats as one mixture at a time)."""
    from ._quadrature import mixture_psi_m1_batch

    ints = is_integer_order(alphas)
    rem: list = [None] * len(lws)
    same: dict[bytes, list[int]] = {}
    for i, lw in enumerate(lws):
        quad = ~_poly_mask(alphas, lw)
        if np.any(quad):
            same.setdefault(quad.tobytes(), []).append(i)
    for idx in same.values():
        quad = ~_poly_mask(alphas, lws[idx[0]])
        qs = mixture_psi_m1_batch(alphas[quad], [lws[i] for i in idx], s, "removal", ints[quad])
        for i, q in zip(idx, qs):
            rem[i] = q
    return list(zip(rem, mixture_psi_m1_batch(alphas, lws, s, "insertion", ints)))


def _poly_mask(alphas: np.ndarray, lw: np.ndarray) -> np.ndarray:
    """Orders whose removal term uses the exact polynomial: integers <= max_poly_order.  It
    needs a finite weight at mean 0 (p_l = 1 has none: quadrature, which handles L(z) -> 0 as
    z -> -inf; checked against mpmath in the tests)."""
    from .group import max_poly_order

    return is_integer_order(alphas) & (alphas <= max_poly_order(lw.size - 1)) & bool(np.isfinite(lw[0]))


def _quiet(fn):
    """np.errstate around the core's quadrature: with a zero weight (log -inf) its zero-free
    strip estimate is NaN and it falls back to its conservative floor pi/K (by design)."""

    def wrapped(*a, **kw):
        with np.errstate(invalid="ignore"):
            return fn(*a, **kw)

    return wrapped


_mixture_log_bounds = _quiet(_mixture_log_bounds)


def _c1_node_weights(l, rate, K, k, n) -> np.ndarray:
    """log weights of P_l (Eq. (47)) with empty top means dropped."""
    p = min(1.0, float(l) * k / n) if k > 0 else 0.0
    lw = _c1_log_weights(rate, K, p)
    if k == 0:
        lw = lw[: K + 1]
    return lw[: int(np.nonzero(np.isfinite(lw))[0].max()) + 1]  # drop empty top means


def _poly_d(ls, lws, alphas, s, chains: dict | None) -> dict:
    """(log D_j, rel_d) of the exact removal polynomial for every node that needs it.

    All nodes of one weight length are computed as one batch (:class:`group.DChain`: the same
    float operations as one node at a time).  ``chains`` (l -> one-row DChain, for one noise
    ratio and configuration) keeps each node's recursion, so a later order group with larger
    integer orders continues from the last j instead of starting again."""
    from .group import DChain

    chains = {} if chains is None else chains
    need: dict[int, int] = {}
    for i, lw in enumerate(lws):
        if lw.size > 1:
            poly = _poly_mask(alphas, lw)
            if np.any(poly):
                need[i] = int(alphas[poly].max())
    batches: dict[tuple, list[int]] = {}
    for i, jmax in need.items():
        l = int(ls[i])
        have = chains.get(l)
        if have is None or have.j < jmax:
            batches.setdefault((lws[i].size, have.j if have is not None else 0, jmax), []).append(i)
    for (_, j0, jmax), idx in batches.items():
        if j0 == 0:
            batch = DChain(np.stack([lws[i] for i in idx]), s)
        else:
            batch = DChain.stack([chains[int(ls[i])] for i in idx])
        with np.errstate(invalid="ignore"):
            batch.extend(jmax)
        for r, i in enumerate(idx):
            chains[int(ls[i])] = batch.take([r])
    return {i: (chains[int(ls[i])].log_d[0], chains[int(ls[i])].rel_d[0]) for i in need}


def _c1_eval(ls, alphas, s, rate, K, k, n, chains: dict | None = None):
    """log-bounds of Psi - 1 (removal columns, then insertion columns) of P_l at each l."""
    shift = K + 2 if k > 0 else K
    am1 = alphas - 1.0
    log_fmax1 = log_expm1(alphas * am1 * shift * shift / (2.0 * s * s)) + 1e-12
    log_fmax = np.concatenate([log_fmax1, log_fmax1])
    lo = np.empty((ls.size, 2 * alphas.size))
    hi = np.empty((ls.size, 2 * alphas.size))
    lws = [_c1_node_weights(l, rate, K, k, n) for l in ls]
    d = _poly_d(ls, lws, alphas, s, chains)
    mixed = [i for i, lw in enumerate(lws) if lw.size > 1]
    with np.errstate(invalid="ignore"):  # as in _mixture_log_bounds (_quiet)
        quads = dict(zip(mixed, _mixture_quads(alphas, [lws[i] for i in mixed], s)))
    for i, lw in enumerate(lws):
        if lw.size == 1:  # rate so small that only N(0) has weight: Psi - 1 = 0
            lo[i], hi[i] = -np.inf, -np.inf
            continue
        r_lo, r_hi, i_lo, i_hi = _mixture_log_bounds(alphas, lw, s, d.get(i), quads[i])
        lo[i] = np.concatenate([r_lo, i_lo])
        hi[i] = np.minimum(np.concatenate([r_hi, i_hi]), log_fmax)
    return lo, hi


def _c1_evaluated(alphas, s, m, n, rate, K, k, rtol, max_order=256.0, groups=None):
    """Thm C.1 at orders <= max_order; above it the no-amplification bound (valid, cheap: the
    quadrature of both directions at orders in the thousands costs ~0.2 s per l-node).

    ``groups``: indices into :func:`_order_groups` of the orders <= max_order to evaluate
    (None: all; only with k > 0); the orders of the other groups are NaN.  Each order group's
    bracket and each l-node's polynomial recursion are memoised per configuration and noise
    ratio (:data:`_MEMO`)."""
    big = alphas > max_order
    if np.any(big):
        shift = K + 2 if k > 0 else K
        na = alphas.size
        up = alphas * shift * shift / (2.0 * s * s) * (1 + 4 * ULP)
        err = up * 8 * ULP
        srcs = [f"order > {max_order:g}: no-amplification"] * na
        if np.any(~big):
            u, e, sr = _c1_evaluated(alphas[~big], s, m, n, rate, K, k, rtol, max_order, groups)
            up[~big], err[~big] = u, e
            sr = [sr] * int((~big).sum()) if isinstance(sr, str) else sr
            for i, v in zip(np.nonzero(~big)[0], sr):
                srcs[i] = v
        return up, err, srcs
    am1 = alphas - 1.0
    shift = K + 2 if k > 0 else K
    noamp = alphas * shift * shift / (2.0 * s * s)
    if rate == 0.0:
        z = np.zeros(alphas.size)
        return z, z, "rate=0"
    if rate == 1.0:
        return noamp * (1 + 4 * ULP), noamp * 8 * ULP, "rate=1"
    log_fmax1 = log_expm1(noamp * am1) + 1e-12
    log_fmax = np.concatenate([log_fmax1, log_fmax1])
    log_cap = np.concatenate([log_expm1(_DEAD * noamp * am1)] * 2)
    kink = n / k if k > 0 else math.inf

    memo = _MEMO.context(("c1", s, m, n, rate, K, k))
    chains = memo.setdefault("chains", {})  # l -> D_j recursion of the removal polynomial

    def eval_fn(ls):
        return _c1_eval(ls, alphas, s, rate, K, k, n, chains)

    if k == 0:
        if groups is not None:
            raise ValueError("order groups are evaluated separately only with k_neg > 0")
        lo, hi = eval_fn(np.array([0]))
        log_lo, log_hi = lo[0], hi[0]
        nodes = "k_neg=0: Schuchardt Thm 4.2 mixture"
    else:
        na0 = alphas.size
        log_lo = np.empty(2 * na0)
        log_hi = np.empty(2 * na0)
        info = []
        for gi, sel in enumerate(_order_groups(alphas)):
            sub = alphas[sel]
            cols = np.concatenate([np.nonzero(sel)[0], na0 + np.nonzero(sel)[0]])
            if groups is not None and gi not in groups:
                log_lo[cols], log_hi[cols] = np.nan, np.nan
                info.append("-")
                continue

            def eval_sub(ls, sub=sub):
                return _c1_eval(ls, sub, s, rate, K, k, n, chains)

            def run(sub=sub, cols=cols, eval_sub=eval_sub):
                return _binomial_mixture(
                    m, rate, kink, eval_sub, np.concatenate([1.0 / sub] * 2), log_fmax[cols], log_cap[cols], rtol
                )

            res = _memo_group(memo, sub, rtol, run)
            log_lo[cols], log_hi[cols] = res.log_lo, res.log_hi
            info.append(str(res.nodes))
        nodes = f"thm C.1 (nodes per order group: {'/'.join(info)})"
    na = alphas.size
    with np.errstate(invalid="ignore"):
        up, err = rdp_from_log_psi_m1(
            alphas, np.maximum(log_lo[:na], log_lo[na:]), np.maximum(log_hi[:na], log_hi[na:])
        )
    direction = np.where(log_hi[:na] >= log_hi[na:], "removal", "insertion")
    take = noamp * (1 + 4 * ULP) < up
    up = np.where(take, noamp * (1 + 4 * ULP), up)
    err = np.where(take, noamp * 8 * ULP, err)
    srcs = [f"{nodes}; {d}" if not t else "no-amplification" for d, t in zip(direction, take)]
    return up, err, srcs


def coupled_sampling_rdp_standard_clipping(
    alpha, sigma, num_edges, num_nodes, rate, degree_cap, negatives_per_positive, rtol=1e-8
):
    """Per-step RDP of relational DP-SGD with standard per-tuple clipping at C (noise sigma C),
    by Huang et al. 2025 Thm C.1 / Eq. (47): the max of both directions, each E_l of a Renyi
    moment of the mixture sum_{i,j} w_ij(l) N(i + 2j, sigma^2) against N(0, sigma^2), computed by
    exact sums (integer orders) or quadrature with stated error bounds, and the certified binomial
    bracket (module docstring).  Float for scalar ``alpha``, array otherwise."""
    a = V.alphas("alpha", alpha)
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    m, n, r, K, k = _check_graph(num_edges, num_nodes, rate, degree_cap, negatives_per_positive)
    up, _, _ = _c1_evaluated(a, s, m, n, r, K, k, rtol)
    return float(up[0]) if np.ndim(alpha) == 0 else up


def coupled_sampling_standard_clipping_rdp_curve(
    sigma,
    num_edges,
    num_nodes,
    rate,
    degree_cap,
    negatives_per_positive,
    steps=1,
    alphas=None,
    tuple_threshold=1.0,
    rtol=1e-8,
    max_order=256.0,
) -> RdpCurve:
    """Certified Thm C.1 RDP curve of ``steps`` steps.

    ``tuple_threshold`` = c / C: the per-tuple clipping threshold in units of the noise scale C
    (noise std sigma C).  1 for standard clipping at C; 1/(K+2) for the static clipping of
    :mod:`dpspec.relational.clipping` (which satisfies (45)-(46) with c = C/(K+2)).  Thm C.1 is
    evaluated at noise ratio sigma / tuple_threshold.  With ``negatives_per_positive = 0`` the
    mixture is Schuchardt et al.'s group mixture (Thm 4.2).  Orders above ``max_order`` get the
    no-amplification bound alpha (K+2)^2 / (2 s^2) (their quadrature is slow and they matter only
    for very private settings)."""
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    c = V.real("tuple_threshold", tuple_threshold, lo=0.0, lo_open=True)
    t = V.integer("steps", steps, lo=0)
    m, n, r, K, k = _check_graph(num_edges, num_nodes, rate, degree_cap, negatives_per_positive)
    a = _alphas(alphas)
    up, err, srcs = _c1_evaluated(a, s / c, m, n, r, K, k, rtol, max_order)
    theorem = (
        f"{THEOREM_C1 if k else THEOREM_GROUP_REL}; m={m}, n={n}, rate={r:.6g}, K={K}, "
        f"k_neg={k}, noise/threshold={s / c:.6g}"
    )
    method = METHOD_MIX + (
        "; node values: removal exact polynomial (integer orders <= "
        "max_poly_order) or quadrature, insertion quadrature, error bounds"
    )
    if isinstance(srcs, str):
        srcs = [srcs] * a.size
    rdp, errs = _scaled(up, err, t)
    if t != 1:
        theorem = f"{t} x [{theorem}] (RDP composition, Mironov 2017 Prop 1)"
    return _make(a, rdp, errs, theorem, method, srcs)


def naive_rdp_curve(sigma, sensitivity=1.0, steps=1, alphas=None) -> RdpCurve:
    """No amplification: T alpha (Delta/C)^2 / (2 sigma^2) (the naive bound of §5.1 for
    sensitivity 1)."""
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    d = V.real("sensitivity", sensitivity, lo=0.0, lo_open=True)
    t = V.integer("steps", steps, lo=0)
    a = _alphas(alphas)
    val = a * d * d / (2 * s * s) * (1 + 4 * ULP)
    return _scale(a, val, val * 8 * ULP, t, f"{THEOREM_NAIVE}; sensitivity/C={d:g}", "closed form", "naive")


# ------------------------------------------------------------------------------------------------
# sensitivities of the clipping rules
# ------------------------------------------------------------------------------------------------

CLIPPINGS = ("static", "standard", "freq", "freq_paper")
NEGATIVE_SAMPLERS = ("wor", "none", "public", "with_replacement", "in_batch", "content_dependent")
POSITIVE_SAMPLERS = ("poisson", "shuffle", "fixed_size")


def freq_clip_sensitivity(degree_cap: int, negatives_per_positive: int, private_negatives: bool = True) -> float:
    """Corrected node-level sensitivity of FREQ-CLIP (Alg. 1), in units of C  [D].

    Alg. 1 clips tuple T to C / (2 maxfreq(T)), maxfreq(T) = max_{v in T} freq(v), freq(v) = number
    of tuples containing v.  With NEG-SAMPLE-WOR (|B-(u)| <= 1), for i <= K removed positive tuples
    and j in {0, 1} replaced negative tuples of the removed node u*:

        ||gbar(B) - gbar(B')|| <= C/2 * (1[i+j>0] + j + i (k_neg + 1) / 2).

    Proof.  (1) The tuples containing u* have maxfreq >= freq(u*) = i + j, so together they weigh
    <= (i+j) C/(2(i+j)) = C/2.  (2)+(3b) The replaced tuple T' (u* -> r) and the replacement node
    r: with f_r = freq_B(r), T' has maxfreq >= f_r + 1, so ||gbar(T')|| <= C/(2(f_r+1)), and the
    N_r <= f_r other tuples of r see their threshold move by C/2 (1/f_r - 1/(f_r+1)), in total
    <= C/(2(f_r+1)); together <= C/(f_r + 1) <= C/2 (f_r = 0: only T', <= C/2).  (3) Every other
    tuple T of B0 has the same gradient g in B and B'; only its threshold t = C/(2 maxfreq) moves,
    ||clip_t(g) - clip_t'(g)|| <= |t - t'| <= C/2 max_{v in T} |1/f_v - 1/f'_v|
    <= C/2 sum_{v in T} |1/f_v - 1/f'_v|.  Summing over B0 and exchanging the sums, node v
    contributes N_v |1/f_v - 1/f'_v|, N_v <= min(f_v, f'_v) its number of B0 tuples.  A node w of
    u*'s removed positive tuples loses c_w >= 1 occurrences: N_w (1/f'_w - 1/f_w) <= c_w/f_w
    <= c_w/(c_w + 1) (N_w >= 1 needs f_w >= c_w + 1) <= c_w/2.  (If r is such a w, its combined
    terms stay within C/2 + C/2 c_r/(c_r+1).)  Nodes of the replaced tuple other than u* keep
    their count.  Each removed tuple has <= k_neg + 1 nodes besides u*, so
    sum_w c_w <= i (k_neg + 1).  Adding (1), (2)+(3b), (3) gives the bound.  It is attained
    (tests/families/relational_dpsgd/test_rel_sensitivity.py builds both cases); the digest's counterexample
    (K = 5, k_neg = 1, only the w_t have other tuples) gives 1.75 C.

    Returns the max over i <= K, j <= 1 (j = 0 only without private negatives):
    1 + K (k_neg + 1)/4 with private negatives, 1/2 + K (k_neg + 1)/4 without.
    """
    K = V.integer("degree_cap", degree_cap, lo=1)
    k = V.integer("negatives_per_positive", negatives_per_positive, lo=0)
    j = 1 if (private_negatives and k > 0) else 0
    return 0.5 * (1.0 + j + K * (k + 1) / 2.0)


def node_sensitivity(clipping: str, degree_cap: int, negatives_per_positive: int, negatives: str = "wor") -> float:
    """Node-level sensitivity Delta/C of the clipped batch gradient (noise std sigma C).

    * ``static``: per-tuple threshold C/(K + 2) (C/K without private negatives) -> 1.
    * ``standard``: per-tuple threshold C -> K + 2 (K without private negatives).
    * ``freq``: FREQ-CLIP with the corrected bound :func:`freq_clip_sensitivity`.
    * ``freq_paper``: raises DPS601 (Prop 4.1's claimed C is not a bound).
    """
    V.choice("clipping", clipping, CLIPPINGS)
    K = V.integer("degree_cap", degree_cap, lo=1)
    k = V.integer("negatives_per_positive", negatives_per_positive, lo=0)
    priv = negatives == "wor" and k > 0
    if clipping == "static":
        return 1.0
    if clipping == "standard":
        return float(K + 2 if priv else K)
    if clipping == "freq":
        return freq_clip_sensitivity(K, k, priv)
    raise RelationalSoundnessError(
        "FREQ-CLIP at the sensitivity C claimed by Prop 4.1 is not certifiable: thresholds of "
        "tuples not containing the removed node change too (counterexample: 1.75 C at K=5, "
        "k_neg=1; worst case C (1 + K (k_neg+1)/4))",
        rule="DPS601",
        hint="use clipping='static' (per-tuple C/(K+2), Eq. (3) with sensitivity C), "
        "clipping='standard' (Thm C.1), or clipping='freq' (FREQ-CLIP with the corrected "
        "sensitivity freq_clip_sensitivity(K, k_neg))",
    )


def tuple_threshold(
    clipping: str, degree_cap: int, negatives_per_positive: int, negatives: str = "wor"
) -> float | None:
    """Per-tuple clipping threshold / C for the per-tuple-additive rules (None for FREQ-CLIP)."""
    K = V.integer("degree_cap", degree_cap, lo=1)
    priv = negatives == "wor" and negatives_per_positive > 0
    if clipping == "static":
        return 1.0 / (K + 2 if priv else K)
    if clipping == "standard":
        return 1.0
    return None


# ------------------------------------------------------------------------------------------------
# every valid accountant for a declared configuration
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RelationalConfig:
    """A declared relational DP-SGD configuration (graph statistics after degree capping).

    ``clipping``: one of :data:`CLIPPINGS`; ``negatives``: :data:`NEGATIVE_SAMPLERS`
    (``"wor"`` = Alg. 2 from the private node set; ``"public"`` = negatives drawn from a public
    node pool independent of the private graph; ``"none"`` = no negatives); ``positives``:
    :data:`POSITIVE_SAMPLERS`.  ``rate`` = expected batch size / num_edges.
    """

    num_edges: int
    num_nodes: int
    rate: float
    degree_cap: int
    negatives_per_positive: int
    clipping: str = "static"
    negatives: str = "wor"
    positives: str = "poisson"

    def validate(self) -> None:
        V.choice("clipping", self.clipping, CLIPPINGS)
        V.choice("negatives", self.negatives, NEGATIVE_SAMPLERS)
        V.choice("positives", self.positives, POSITIVE_SAMPLERS)
        _check_graph(self.num_edges, self.num_nodes, self.rate, self.degree_cap, self.negatives_per_positive)
        check_sampler(self.positives, self.negatives, self.negatives_per_positive)
        if self.negatives == "wor" and self.negatives_per_positive > 0:
            b = self.rate * self.num_edges
            if b * self.negatives_per_positive > self.num_nodes:
                raise RelationalSoundnessError(
                    f"k_neg x expected batch = {self.negatives_per_positive} x {b:g} exceeds "
                    f"num_nodes = {self.num_nodes}",
                    rule="DPS606",
                    hint="lower the batch size or k_neg: NEG-SAMPLE-WOR needs b k_neg <= n",
                )
        if self.negatives in ("none", "public") and self.negatives_per_positive > 0 and self.negatives == "none":
            raise RelationalSoundnessError("negatives='none' needs negatives_per_positive = 0", rule="DPS611")

    @property
    def private_negatives(self) -> bool:
        return self.negatives == "wor" and self.negatives_per_positive > 0

    @property
    def k_eff(self) -> int:
        """k_neg as seen by the accountant (0 when negatives are not private nodes)."""
        return self.negatives_per_positive if self.private_negatives else 0


def check_sampler(positives: str, negatives: str, negatives_per_positive: int = 1) -> None:
    """Raise the named error for samplers that break the coupled-sampling analysis."""
    if positives != "poisson":
        raise RelationalSoundnessError(
            f"positives sampled by {positives!r}: Thm 3 / Thm C.1 need Poisson-sampled positives",
            rule="DPS605",
            hint="use PoissonEdgeSampler (each capped edge independently with "
            "probability rate; the batch size is random, empty batches add noise)",
        )
    if negatives == "with_replacement":
        raise RelationalSoundnessError(
            "negatives drawn with replacement: a node can be the negative of many tuples, so "
            "|B-(u)| and the sensitivity are unbounded",
            rule="DPS602",
            hint="use NEG-SAMPLE-WOR (negatives='wor'): k_neg |B+| distinct nodes per batch",
        )
    if negatives == "in_batch":
        raise RelationalSoundnessError(
            "in-batch negatives: every positive endpoint is a negative of every other tuple, so "
            "one node touches the whole batch",
            rule="DPS603",
            hint="use NEG-SAMPLE-WOR (negatives='wor')",
        )
    if negatives == "content_dependent":
        raise RelationalSoundnessError(
            "negatives that depend on the sampled positives' contents are not "
            "cardinality-dependent sampling (Def. 4.1 subclass); Thm 3 does not apply",
            rule="DPS604",
            hint="draw negatives as a uniform WOR node sample whose size depends "
            "only on |B+| (negatives='wor'), then pair them with the positives",
        )


@dataclass(frozen=True)
class AccountantResult:
    """One accountant evaluated for a configuration: its T-step curve and (eps, delta)."""

    name: str
    curve: RdpCurve
    dp: DpResult
    why: str

    @property
    def epsilon(self) -> float:
        return self.dp.epsilon


@dataclass(frozen=True)
class RelationalAccounting:
    """Every valid accountant of a configuration and the tightest guarantee.

    Attributes:
        config, sigma, steps, delta: the inputs.
        accountants: name -> AccountantResult for each valid accountant
            (``"eq3"``, ``"thm_c1"``, ``"group"``, ``"naive"``).
        rejected: name -> reason for each accountant that does not apply.
        best: name of the single accountant with the smallest epsilon.
        curve: pointwise minimum of the valid curves (each is an upper bound on the same
            mechanism's RDP, so the minimum is too); ``curve.sources`` names the accountant per
            order; abs_errors = rdp - max(0, min over accountants of (rdp - abs_errors)).
        dp: (epsilon, delta) of ``curve`` (<= every single accountant's epsilon).
        statement: which accountant attains the guarantee and why the others do not apply.
        sensitivity: node-level sensitivity Delta / C used by eq3 / naive.
    """

    config: RelationalConfig
    sigma: float
    steps: int
    delta: float
    accountants: dict
    rejected: dict
    best: str
    curve: RdpCurve
    dp: DpResult
    statement: str
    sensitivity: float
    assumptions: tuple = field(default_factory=tuple)

    @property
    def epsilon(self) -> float:
        return self.dp.epsilon


ASSUMPTIONS = (
    "the protected unit is one node of the degree-capped training graph with all its (<= K) edges "
    "(Def 3.1 on the capped graph; num_edges and num_nodes are the capped graph's counts)",
    "positives: each capped edge independently with probability rate (Poisson); empty batches "
    "still add noise; no gradient accumulation across batches",
    "negatives (Alg. 2): k_neg |B+| distinct nodes uniformly without replacement from all n "
    "nodes, paired with a random endpoint; they depend on the positives only through |B+|",
    "per-tuple gradients: every encoder evaluation of the tuple's 2 + k_neg node slots is inside "
    "the tuple's gradient (no batch statistics such as batch-norm across tuples)",
    "Huang et al. Eq. (3) is used with l ~ Bin(m, rate) (conservative: only m - K edges remain) and "
    "G_l clamped to 1 for l k_neg > n",
)


def _applicable(config: RelationalConfig, include: Sequence[str] | None):
    """([(name, why)] of the valid accountants among ``include`` (default: all) in the order
    eq3, thm_c1, group, naive; {name: reason} of the rejected ones; Delta / C; c / C or None)
    (validity: :func:`relational_accountants`)."""
    K, k = config.degree_cap, config.k_eff
    neg = config.negatives
    Delta = node_sensitivity(config.clipping, K, config.negatives_per_positive, neg)
    c = tuple_threshold(config.clipping, K, config.negatives_per_positive, neg)
    want = set(include) if include is not None else {"eq3", "thm_c1", "group", "naive"}
    valid: list[tuple[str, str]] = []
    rejected: dict[str, str] = {}
    if "eq3" in want:
        valid.append(
            (
                "eq3",
                f"constant node sensitivity {Delta:g} C ({config.clipping} clipping) "
                f"with Poisson positives and {'WOR private' if k else 'no private'} "
                "negatives",
            )
        )
    if "thm_c1" in want:
        if c is None:
            rejected["thm_c1"] = (
                "FREQ-CLIP is not per-tuple additive: thresholds of tuples not "
                "containing the node change, so (45)-(46) fail"
            )
        elif k == 0:
            rejected["thm_c1"] = "no private negatives: Thm C.1 reduces to the group bound"
        else:
            valid.append(("thm_c1", f"per-tuple threshold {c:g} C: shifts (i + 2j) x {c:g} C, assumptions (45)-(46)"))
    if "group" in want:
        if c is None:
            rejected["group"] = "FREQ-CLIP: a node change also moves other tuples' thresholds"
        elif k > 0:
            rejected["group"] = (
                "private WOR negatives: a node change also replaces a negative and "
                "the negative sample size depends on |B+| - not a group of <= K "
                "pure removals"
            )
        else:
            valid.append(
                (
                    "group",
                    f"no private negatives: node change = removal of <= {K} "
                    f"Poisson-sampled tuples of norm <= {c:g} C each",
                )
            )
    if "naive" in want:
        valid.append(("naive", f"per-step sensitivity {Delta:g} C"))
    return valid, rejected, Delta, c


def _accountant_curve(
    config: RelationalConfig, name: str, s: float, T: int, a: np.ndarray, rtol_eq3: float, rtol_c1: float
) -> RdpCurve:
    """The T-step curve of one valid accountant (``name`` from :func:`_applicable`)."""
    K, k = config.degree_cap, config.k_eff
    m, n, r = config.num_edges, config.num_nodes, config.rate
    _, _, Delta, c = _applicable(config, ())
    if name == "eq3":
        return coupled_sampling_rdp_curve(s, m, n, r, K, k, T, a, Delta, rtol_eq3)
    if name == "thm_c1":
        return coupled_sampling_standard_clipping_rdp_curve(s, m, n, r, K, k, T, a, c, rtol_c1)
    if name == "group":
        return coupled_sampling_standard_clipping_rdp_curve(s, m, n, r, K, 0, T, a, c, rtol_c1)
    if name == "naive":
        return naive_rdp_curve(s, Delta, T, a)
    raise ValueError(f"unknown accountant {name!r}")


def relational_accountants(
    config: RelationalConfig,
    sigma,
    steps,
    delta,
    alphas=None,
    rtol_eq3=1e-10,
    rtol_c1=1e-8,
    include: Sequence[str] | None = None,
) -> RelationalAccounting:
    """Evaluate every valid accountant for ``config`` at noise multiplier ``sigma`` (noise std
    sigma C) over ``steps`` steps and return the tightest guarantee at ``delta``.

    Validity (node removal/insertion in the capped graph):

    * ``eq3`` (Huang et al. Eq. (3)): Poisson positives and negatives that are WOR private
      nodes, none, or public; the node-level sensitivity is a constant Delta (every clipping
      rule here has one: static 1, standard K+2, freq :func:`freq_clip_sensitivity`), evaluated
      at sigma / Delta.  Without private negatives it is the k_neg = 0 case (G = 1-(1-rate)^K).
    * ``thm_c1`` (Eq. (47)): per-tuple-additive clipping (static or standard) with WOR private
      negatives: a change moves the sum by <= (i + 2j) c, c the per-tuple threshold; evaluated
      at sigma C / c.
    * ``group`` (Schuchardt et al. Thm 4.2 via the same mixture with k_neg = 0): per-tuple-
      additive clipping and *no private negatives*: then a node change is exactly the removal of
      its i <= K Poisson-sampled tuples, each contributing <= c, and nothing else changes.  With
      private negatives it does not apply (the node also replaces one negative, and the negatives
      are a WOR sample whose size depends on |B+|: not a group of independent insertions/removals).
      Not for FREQ-CLIP (thresholds of other tuples move).
    * ``naive``: any of the above samplers, alpha Delta^2/(2 sigma^2) per step.

    Raises RelationalSoundnessError for samplers that break the analysis (DPS602-605), for
    ``clipping="freq_paper"`` (DPS601) and for infeasible WOR sizes (DPS606).
    """
    if not isinstance(config, RelationalConfig):
        raise ValueError("config must be a RelationalConfig")
    config.validate()
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    T = V.integer("steps", steps, lo=0)
    d = V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    a = _alphas(alphas)
    K = config.degree_cap
    m, n = config.num_edges, config.num_nodes
    valid, rejected, Delta, _ = _applicable(config, include)
    acc: dict[str, AccountantResult] = {}
    for name, why in valid:
        curve = _accountant_curve(config, name, s, T, a, rtol_eq3, rtol_c1)
        acc[name] = AccountantResult(name, curve, dp_from_curve(curve, d), why)
    if not acc:
        raise ValueError("include selects no accountant")
    best = min(acc, key=lambda nm: acc[nm].epsilon)
    names = list(acc)
    R = np.stack([acc[nm].curve.rdp for nm in names])
    E = np.stack([acc[nm].curve.abs_errors for nm in names])
    arg = np.argmin(R, axis=0)
    rdp = R[arg, np.arange(a.size)]
    lower = np.min(np.maximum(R - E, 0.0), axis=0)
    errs = np.where(np.isfinite(rdp), rdp - np.minimum(lower, rdp), np.inf)
    theorem = "pointwise minimum of valid bounds: " + "; ".join(f"{nm}: [{acc[nm].curve.theorem}]" for nm in names)
    combined = _make(
        a, rdp, errs, theorem, " | ".join(sorted({acc[nm].curve.method for nm in names})), [names[i] for i in arg]
    )
    dp = dp_from_curve(combined, d)
    at = combined.sources[int(np.argmin(np.abs(a - dp.best_alpha)))]
    eps_list = ", ".join(f"{nm} {acc[nm].epsilon:.6g}" for nm in names)
    rej = "; ".join(f"{nm}: {why}" for nm, why in rejected.items())
    notes = consistency_notes(m, n, K)
    statement = (
        f"epsilon = {dp.epsilon:.6g} at delta = {d:g} from the pointwise minimum of the "
        f"valid RDP curves, attained at alpha = {dp.best_alpha:g} by '{at}' "
        f"({acc[at].why}). Single accountants: {eps_list}; tightest single: '{best}'."
        + (f" Not applicable: {rej}." if rej else "")
        + (f" Note: {' '.join(notes)}" if notes else "")
    )
    return RelationalAccounting(config, s, T, d, acc, rejected, best, combined, dp, statement, Delta, ASSUMPTIONS)


def relational_epsilon(config: RelationalConfig, sigma, steps, delta, alphas=None) -> float:
    """Certified epsilon of :func:`relational_accountants` (pointwise-min curve)."""
    return relational_accountants(config, sigma, steps, delta, alphas).epsilon


def _lazy_groups(config: RelationalConfig, name: str, a: np.ndarray) -> list[np.ndarray]:
    """Masks (over ``a``) of the order groups that ``name``'s evaluation computes separately
    (``groups`` of :func:`_eq3_evaluated` / :func:`_c1_evaluated`); [] if it has none."""
    r, k = config.rate, config.k_eff
    if not (0.0 < r < 1.0 and k > 0) or name not in ("eq3", "thm_c1"):
        return []
    if name == "eq3":
        return _order_groups(a)
    small = ~(a > 256.0)  # _c1_evaluated: orders > max_order are closed form
    out = []
    for g in _order_groups(a[small]):
        full = np.zeros(a.size, dtype=bool)
        full[np.nonzero(small)[0][g]] = True
        out.append(full)
    return out


def _node0_lower(config: RelationalConfig, name: str, a: np.ndarray, sel: np.ndarray, s: float) -> np.ndarray:
    """Per-step lower bound of the certified eq3 / thm_c1 value at the orders ``a[sel]`` (0
    elsewhere) from the l = 0 term: the summand f(l) = Psi_l - 1 is non-decreasing in l (module
    docstring), so E_l f(l) >= f(0) >= its certified lower bound."""
    m, n, r, K, k = _check_graph(config.num_edges, config.num_nodes, config.rate, config.degree_cap, config.k_eff)
    al = a[sel]
    if name == "eq3":
        _, one_minus_c = _gamma_params(r, K)
        log_lo, _ = _sgm_log_bounds(al, s, min(1.0, one_minus_c))
    else:
        chains = _MEMO.context(("c1", s, m, n, r, K, k)).setdefault("chains", {})
        lo, _ = _c1_eval(np.array([0]), al, s, r, K, k, n, chains)
        log_lo = np.maximum(lo[0, : al.size], lo[0, al.size :])
    out = np.zeros(a.size)
    with np.errstate(invalid="ignore"):
        v = np.logaddexp(0.0, log_lo) / (al - 1.0)
    out[sel] = np.where(np.isfinite(v) & (v > 0), v, 0.0)
    return out


def _epsilon_lower(a: np.ndarray, rdp: np.ndarray, log_delta: float) -> np.ndarray:
    """Balle et al. 2020 Thm 21 at each order (as :func:`conversion.convert`, without the
    rounding-up term): a lower bound of the converted epsilon of any rdp' >= rdp."""
    with np.errstate(invalid="ignore", over="ignore"):
        return rdp + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)


def _search_epsilon(
    config: RelationalConfig,
    sigma,
    steps,
    delta,
    alphas=None,
    rtol_eq3=1e-10,
    rtol_c1=1e-8,
    include: Sequence[str] | None = None,
) -> float:
    """``relational_accountants(...).epsilon`` with the same arguments, the same float, computing
    only the order groups that can attain the minimum of the conversion [D].

    The integer orders <= 64 of eq3 and thm_c1 are evaluated first (the other accountants are
    cheap and evaluated fully).  An order group not evaluated yet cannot change epsilon if at
    each of its orders a lower bound of the combined certified value converts to more than the
    epsilon of the evaluated orders (and excludes the conversion's total-variation shortcut);
    otherwise it is evaluated.  Lower bounds of the certified value v(alpha) = min(M+(alpha),
    N(alpha)), M+ the bracket's upper end of the exact mixture value M, N the no-amplification
    cap (which also bounds M):

    * M is a Renyi divergence of a fixed pair (the joint law of (l, output); the average over
      l is a Psi average), non-decreasing in alpha (van Erven & Harremoes 2014 Thm 3), and so
      is N; at an evaluated order alpha' <= alpha that is not capped, v - abs_error is the
      bracket's lower end M-(alpha') <= M(alpha'), hence v(alpha) >= M-(alpha');
    * the summand f(l) = Psi_l - 1 is non-decreasing in l (module docstring), so M(alpha) >=
      log1p(f(0)) / (alpha - 1) >= the same from f's certified lower bound at l = 0.

    If a bound were violated the result could only be larger (a minimum over fewer orders)."""
    if not isinstance(config, RelationalConfig):
        raise ValueError("config must be a RelationalConfig")
    config.validate()
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    T = V.integer("steps", steps, lo=0)
    d = V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    a = _alphas(alphas)
    valid, _, Delta, c = _applicable(config, include)
    if not valid:
        raise ValueError("include selects no accountant")
    m, n, r, K, k = _check_graph(config.num_edges, config.num_nodes, config.rate, config.degree_cap, config.k_eff)
    names = [nm for nm, _ in valid]
    na = a.size
    rdp = {nm: np.full(na, np.nan) for nm in names}
    chain = {nm: np.zeros(na) for nm in names}  # lower bounds usable for larger orders
    groups = {nm: _lazy_groups(config, nm, a) for nm in names}
    ratio = {"eq3": s / Delta, "thm_c1": s / c if c is not None else None}
    done: dict[str, set] = {nm: set() for nm in names}
    first = is_integer_order(a) & (a <= 64)
    todo = {
        nm: {gi for gi, g in enumerate(groups[nm]) if np.any(g & first)} or set(range(len(groups[nm]))) for nm in names
    }
    node0: dict[tuple, np.ndarray] = {}
    log_d = math.log(d)
    while True:
        for nm in names:
            gs = groups[nm]
            if not gs:
                if not done[nm]:
                    rdp[nm] = np.array(_accountant_curve(config, nm, s, T, a, rtol_eq3, rtol_c1).rdp)
                    done[nm].add(0)
                continue
            new = todo[nm] - done[nm]
            if not new:
                continue
            sr = ratio[nm]
            if nm == "eq3":
                up, e, _ = _eq3_evaluated(a, sr, m, n, r, K, k, rtol_eq3, new)
                noamp = a / (2.0 * sr * sr)
            else:
                up, e, _ = _c1_evaluated(a, sr, m, n, r, K, k, rtol_c1, 256.0, new)
                noamp = a * (K + 2) * (K + 2) / (2.0 * sr * sr)
            with np.errstate(invalid="ignore"):
                up_t, e_t = _scaled(up, e, T)
                capped = up >= noamp * (1 + 4 * ULP)
                lo_t = np.maximum(up_t - e_t, 0.0) * (1.0 - 1e-9)
            sel = np.any(np.stack([gs[gi] for gi in new]), axis=0)
            sel |= ~np.any(np.stack(gs), axis=0)  # closed-form orders (> max_order)
            rdp[nm][sel] = up_t[sel]
            use = sel & ~capped & np.isfinite(lo_t)
            chain[nm][use] = lo_t[use]
            done[nm] |= new
        vals = np.stack([rdp[nm] for nm in names])
        full = np.all(~np.isnan(vals), axis=0)
        eps_k = convert(a[full], np.min(vals[:, full], axis=0), d)[0] if np.any(full) else math.inf
        if eps_k == 0.0 or np.all(full):
            return eps_k
        margin = 1e-9 * (1.0 + abs(eps_k)) if math.isfinite(eps_k) else math.inf
        # lower bounds of each accountant's certified value at the orders not evaluated yet
        lbs = {nm: np.where(np.isnan(rdp[nm]), np.maximum.accumulate(chain[nm]), rdp[nm]) for nm in names}

        def needed():
            comb_lb = np.min(np.stack([lbs[nm] for nm in names]), axis=0)  # noqa: B023 - called in this iteration
            with np.errstate(invalid="ignore", over="ignore"):
                tv_safe = d * d + np.expm1(-comb_lb) < -1e-9
                eps_lb = _epsilon_lower(a, comb_lb, log_d)
            return ~full & ~(tv_safe & (eps_lb > eps_k + margin))  # noqa: B023 - called in this iteration

        need = needed()
        if np.any(need):  # second chance: the bound from the l = 0 term
            for nm in names:
                for gi, g in enumerate(groups[nm]):
                    if gi not in done[nm] and np.any(g & need):
                        if (nm, gi) not in node0:
                            node0[(nm, gi)] = T * (1.0 - 1e-9) * _node0_lower(config, nm, a, g, ratio[nm])
                        lbs[nm] = np.where(g, np.maximum(lbs[nm], node0[(nm, gi)]), lbs[nm])
            need = needed()
        if not np.any(need):
            return eps_k
        for nm in names:
            todo[nm] |= {gi for gi, g in enumerate(groups[nm]) if np.any(g & need)}


def certify_relational(config: RelationalConfig, sigma, steps, delta) -> RelationalAccounting:
    """The accounting a relational DP-SGD certificate records at noise multiplier ``sigma``:
    :func:`relational_accountants` on :data:`SEARCH_ALPHAS` with its default tolerances (one
    evaluation of every valid accountant; no search).  ``dpspec compile`` records it for the
    calibrated or the given sigma, so a verifier can recompute the certificate's numbers from
    its recorded sigma (``noise_multiplier``) and ``delta_accounted`` with this call alone."""
    return relational_accountants(config, sigma, steps, delta, SEARCH_ALPHAS)


#: Orders used while bisecting sigma (a sub-grid: dropping orders can only raise epsilon, so a
#: sigma meeting the target on it meets it on any super-grid).
CALIBRATION_ALPHAS = np.concatenate(
    [
        np.arange(1.25, 3.0, 0.25),
        np.arange(3.0, 11.0, 0.5),
        np.arange(11.0, 33.0),
        np.arange(34.0, 65.0, 2.0),
        np.array([80.0, 96.0, 128.0, 192.0, 256.0]),
    ]
)


#: Coarse orders for the calibration search: ~10x fewer quadratures than the certification grid.
#: Dropping orders only raises epsilon, so a sigma meeting the target here meets it on any grid;
#: the cost is a slightly larger sigma (about 1 % in epsilon at the paper's settings).
SEARCH_ALPHAS = np.array([1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0, 128.0])


def calibrate_relational_sigma(
    target_epsilon,
    delta,
    config: RelationalConfig,
    steps,
    accountants: Sequence[str] | None = None,
    alphas=None,
    rel_tol=2e-3,
    on_eval=None,
) -> float:
    """Smallest sigma (up to ``rel_tol``) whose pointwise-min epsilon over ``accountants`` (default:
    every valid one, as :func:`relational_accountants`) is <= ``target_epsilon`` on ``alphas``
    (default :data:`SEARCH_ALPHAS`).  Returns the upper end of the final bracket, where the target
    was verified; any super-grid of ``alphas`` certifies it too.

    Search: the cheap accountants (all but Thm C.1's quadrature) give an upper bracket, then
    regula falsi with the Illinois modification on (log sigma, log epsilon), which is nearly
    linear, so a handful of expensive evaluations suffice. ``on_eval()`` is called before each
    evaluation (a progress bar's update; it changes nothing).
    """
    target = V.real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    a = SEARCH_ALPHAS if alphas is None else np.sort(V.alphas("alphas", alphas))
    chosen = tuple(accountants) if accountants is not None else ("eq3", "thm_c1", "group", "naive")
    log_target = math.log(target)

    memo: dict = {}

    def f(u, include):
        key = (u, tuple(include))
        if key not in memo:  # = relational_accountants(...).epsilon, lazily (same float)
            if on_eval is not None:
                on_eval()
            memo[key] = _search_epsilon(config, math.exp(u), steps, delta, a, rtol_eq3=1e-8, include=include)
        e = memo[key]
        if e <= 0.0:
            return -50.0  # epsilon = 0: far below any target
        return (
            min(max(math.log(e) - log_target, -50.0), 50.0)
            if e <= target
            else max(min(math.log(e) - log_target, 50.0), 1e-300)
        )

    def bracket(include, u_hi_start):
        u = u_hi_start
        fu = f(u, include)
        step = 1.0 if fu > 0 else -1.0
        # first move: a secant guess with log-log slope -1 (epsilon ~ 1/sigma), overshot by 10 %,
        # usually crosses the target at once; then doubling steps
        first = min(max(1.1 * abs(fu), 0.05), math.log(2.0) * 4) / math.log(2.0)
        while True:
            u2 = u + step * math.log(2.0) * first
            first = 1.0
            if u2 > math.log(1e5):
                raise ValueError(f"target epsilon {target} needs sigma > 1e5")
            if u2 < math.log(1e-3):
                return u  # met already at the last (verified) sigma >= 1e-3
            f2 = f(u2, include)
            if (f2 > 0) != (fu > 0):
                return ((u2, f2), (u, fu)) if f2 > 0 else ((u, fu), (u2, f2))
            u, fu = u2, f2

    def solve(include, u_start):
        br = bracket(include, u_start)
        if not isinstance(br, tuple):
            return br  # the target is met by every sigma down to 1e-3
        (ul, fl), (uh, fh) = br  # fl > 0 >= fh
        tol = math.log1p(rel_tol)
        side = 0
        while uh - ul > tol:
            um = (ul * fh - uh * fl) / (fh - fl) if fl != fh else 0.5 * (ul + uh)
            # keep the probe strictly inside, away from the ends by a fraction of the tolerance
            um = min(max(um, ul + 0.25 * tol), uh - 0.25 * tol)
            if uh - ul <= 2 * tol:
                um = 0.5 * (ul + uh)
            fm = f(um, include)
            if fm > 0:
                ul, fl = um, fm
                fh = fh / 2 if side == 1 else fh  # Illinois: halve the stale end
                side = 1
            else:
                uh, fh = um, fm
                fl = fl / 2 if side == -1 else fl
                side = -1
        return uh

    cheap = tuple(x for x in chosen if x != "thm_c1")
    u0 = 0.0
    if cheap and cheap != chosen:
        try:
            u0 = solve(cheap, 0.0)  # min over fewer accountants: an upper bound
        except ValueError:
            u0 = 0.0
    u = solve(chosen, u0)
    sigma = math.exp(u)
    if f(u, chosen) > 0:  # pragma: no cover - the bracket end was verified
        raise RuntimeError("calibrate_relational_sigma: final sigma does not meet the target")
    return float(sigma)


def overflow_probability(config: RelationalConfig, steps: int) -> float:
    """Upper bound on P(some step has |B+| k_neg > n) over ``steps`` steps (union bound,
    Chernoff).  NEG-SAMPLE-WOR cannot run then; the sampler raises DPS606 instead of changing
    the analysis, so the certificate holds conditionally on no overflow (report it with delta)."""
    k = config.k_eff
    if k == 0:
        return 0.0
    L = config.num_nodes // k
    lt = _log_upper_tail(L, config.num_edges, config.rate)
    return float(min(1.0, steps * math.exp(lt))) if lt > -745 else 0.0
