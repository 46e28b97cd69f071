"""Private: the pessimistic connect-the-dots PMF of one Gaussian-mixture dominating pair.

Every pair accounted for in PLD form here is, after standardising the noise to N(0, 1),
a *mixture against a Gaussian*:

    remove:  P = sum_k w_k N(k mu, 1),   Q = N(0, 1)
    add:     P = N(0, 1),                Q = sum_k w_k N(k mu, 1)      (k = 0..K)

(K = 1, w = (1-q, q): the Poisson-subsampled Gaussian; w = (0, 1): the plain Gaussian;
w = Bin(.|K, q): group-K amplification.)  The privacy loss L = log p/q is monotone in
the output, so in the coordinate y (y = x for remove, y = -x for add) it is increasing:

    L(y) = s g(y),   g(y) = log sum_k w_k exp(t_k y - t_k^2/2),
    remove: s = +1, t_k = k mu;        add: s = -1, t_k = -k mu.

Connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, Alg. 1) on the loss
grid e_i = i d: the P-mass of every cell {L in (e_i, e_{i+1}]} is split between e_i and
e_{i+1} preserving its P-mass and its Q-mass,

    b_i = (P_i - e^{e_i} Q_i) / (1 - e^{-d})  -> e_{i+1},     a_i = P_i - b_i -> e_i,

mass below the grid is rounded up to its first point, and the mass above the last point
e_top is split between e_top (e^{e_top} Q_above) and +inf (the hockey-stick divergence
H_{e^{e_top}}(P||Q)).  The hockey-stick curve of the resulting PMF interpolates the exact
curve alpha -> H_alpha(P||Q) linearly in alpha between grid points and equals it at them
(and on [0, e^{e_lo}] it is the chord from (0, 1)); the exact curve is convex, so the PMF
dominates the pair for every alpha >= 0 (Doroshenko et al. 2022 Thm 3.3 / Lemma 3.1): it is
a *dominating pair* in the sense of Zhu, Dong & Wang 2022 Def. 7, so it may be composed.

Floating point.  Write S_j = sum_{i >= j} p_i + p_inf for the tail sums (the +inf atom
included).  If the float PMF p' satisfies S'_j >= (1 - eta) S_j for every j, then every
hockey-stick divergence of its T-fold composition is >= (1 - eta)^T times that of the exact
PMF (convolution of non-negative measures preserves tail-sum dominance and
delta(eps) = int (1 - e^{eps - l})_+ is a non-decreasing function of l).  The builder
therefore computes each exact tail sum S_j = P(L > e_j) + b_{j-1} together with an
absolute error bound E_j (from the conditioning of every log-CDF difference, the
split formula, and the residual of the inverse loss), rounds it up to U_j >= S_j + E_j,
makes U non-increasing, and returns p'_j = U_j - U_{j+1}; the float subtraction leaves
eta = 2u (u = 2^-53).  The PMF is thus rounded *up* by at most max_j E_j in tail mass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from ._logmath import logsumexp_rows

U = 2.0**-53  # unit round-off of float64
LOG_HALF = math.log(0.5)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
TAIL = 1e-28  # P-mass left outside the grid (rounded pessimistically)
_NEWTON_MAX = 400
GRID_MAX = 1 << 22  # largest single-step grid (the caller coarsens d beyond it)


@dataclass(frozen=True, eq=False)
class StepPmf:
    """A pessimistic CTD PMF of one mechanism step on the loss grid i*d.

    Attributes:
        d: grid spacing (loss units).
        offset: grid index of ``probs[0]`` (its loss is ``offset * d``).
        probs: non-negative masses (float64), read-only.
        inf_mass: mass of the +inf loss atom (already rounded up).
        rel_err: eta with tail sums >= (1 - eta) x the exact CTD tail sums (2u here).
        build_error: the largest absolute tail-mass round-up applied (max_j E_j).
        lower_mass: P-mass below the grid, rounded up to its first point.
        upper_mass: P-mass above the grid (split between the top point and +inf).
        symmetric: True if the PMF is that of a symmetric pair (add = remove).
    """

    d: float
    offset: int
    probs: np.ndarray
    inf_mass: float
    rel_err: float
    build_error: float
    lower_mass: float
    upper_mass: float
    symmetric: bool = False

    @property
    def size(self) -> int:
        return int(self.probs.size)

    @property
    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(self.probs.size)) * self.d


# ----------------------------------------------------------------------------- the loss g(y)


def _lse(terms: list) -> np.ndarray:
    """Elementwise log-sum-exp of a short list of equally shaped arrays (-inf safe): the shared kernel
    over the stacked terms (summed one after another, as before)."""
    if len(terms) == 1:
        return terms[0]
    return logsumexp_rows(np.stack(terms), axis=0)


def _g(y: np.ndarray, log_c: np.ndarray, t: np.ndarray) -> np.ndarray:
    """g(y) = log sum_k c_k exp(t_k y - t_k^2/2)  (sum c_k = 1, t_0 = 0 when c_0 > 0)."""
    return _g_with_err(y, log_c, t)[0]


def _g_with_err(y: np.ndarray, log_c: np.ndarray, t: np.ndarray):
    """g(y) and a bound on its absolute evaluation error.

    Near g = 0 (|sum c_k expm1(e_k)| < 1/2, e_k = t_k y - t_k^2/2) g = log1p(sum c_k
    expm1(e_k)), whose error is ~u |g| plus the propagated rounding of the e_k; elsewhere
    a log-sum-exp, accurate to ~u (|g| + max|e_k|).
    """
    y = np.asarray(y, float)
    es = [y * tk - 0.5 * tk * tk for tk in t]
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        lse = _lse([e + lc for e, lc in zip(es, log_c)])
        c = np.exp(log_c)
        s = np.zeros(y.shape)
        es_err = np.zeros(y.shape)
        for ck, tk, e in zip(c, t, es):
            em = np.expm1(np.minimum(e, 700.0))
            s = s + ck * em
            es_err = es_err + ck * (
                np.exp(np.minimum(e, 700.0)) * 2 * U * (np.abs(tk * y) + tk * tk) + 2 * U * np.abs(em)
            )
        near = np.isfinite(s) & (np.abs(s) < 0.5)
        out = np.where(near, np.log1p(np.where(near, s, 0.0)), lse)
        emax = np.maximum.reduce([np.abs(e) for e in es])
        err = np.where(near, 2.5 * es_err + 4 * U * np.abs(out), 4 * U * (np.abs(out) + emax + math.log2(len(t) + 1.0)))
    tmax, tmin = float(np.max(t)), float(np.min(t))
    inf_out = (np.isposinf(y) & (tmax > 0)) | (np.isneginf(y) & (tmin < 0))
    return np.where(inf_out, np.inf, out), np.where(np.isfinite(err), err, np.inf)


def _g_prime(y: np.ndarray, log_c: np.ndarray, t: np.ndarray) -> np.ndarray:
    """g'(y): the softmax-weighted mean of t."""
    es = [y * tk - 0.5 * tk * tk + lc for tk, lc in zip(t, log_c)]
    m = np.maximum.reduce(es)
    with np.errstate(under="ignore", invalid="ignore"):
        ws = [np.exp(e - m) for e in es]
        return sum(w * tk for w, tk in zip(ws, t)) / sum(ws)


def _g_inverse(v: np.ndarray, log_c: np.ndarray, t: np.ndarray, unit: float) -> np.ndarray:
    """y with g(y) = v, where t_k = k * unit (k integer >= 0) and v lies in the range of g.

    With w = unit * y and a_k = c_k e^{-t_k^2/2}, e^{g} = c_0 + sum_{k>=1} a_k e^{k w}, so
    w solves F(w) = log sum_{k>=1} a_k e^{k w} = log r, r = e^v - c_0 = c_0 expm1(v - log c_0)
    (no cancellation).  F is convex with slopes in [k_min, k_max], so Newton started at
    w_0 = min_k (log r - log a_k) / k >= root (each term alone gives such a bound) moves
    monotonically to the root and shrinks the distance by >= 1 - k_min/k_max per step.
    One mixture component with k >= 1 (the Poisson case): w = log r - log a_1 exactly."""
    v = np.asarray(v, float)
    kk = np.rint(t / unit).astype(int)
    pos = kk >= 1
    k_pos = kk[pos].astype(float)
    la = log_c[pos] - 0.5 * t[pos] ** 2
    has0 = np.any(kk == 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if has0:
            lc0 = float(log_c[kk == 0][0])
            log_r = lc0 + np.log(np.expm1(v - lc0))
        else:
            log_r = v.copy()
        w = np.min((log_r[:, None] - la[None, :]) / k_pos[None, :], axis=1)
    if k_pos.size > 1:
        active = np.isfinite(w)
        for _ in range(_NEWTON_MAX):
            idx = np.nonzero(active)[0]
            if idx.size == 0:
                break
            x = la[None, :] + k_pos[None, :] * w[idx, None]
            m = np.max(x, axis=1)
            e = np.exp(x - m[:, None])
            se = e.sum(axis=1)
            F = m + np.log(se) - log_r[idx]
            Fp = (e * k_pos[None, :]).sum(axis=1) / se
            step = F / Fp
            w[idx] = w[idx] - step
            # converged: at (or, by rounding, just past) the root, or a step of ~ulps
            active[idx] = (F > 4 * U * (1.0 + np.abs(log_r[idx]))) & (np.abs(step) > 4 * U * (1.0 + np.abs(w[idx])))
    return w / unit


# ------------------------------------------------------------------- mixture CDFs in logs


def _log_cdf_both(y: np.ndarray, log_a: np.ndarray, m: np.ndarray):
    """(log P(Y <= y), log P(Y > y)) for Y ~ sum_j a_j N(m_j, 1).

    Per component one log_ndtr on the small side, the other side as log1p(-e^{small})."""
    lF_terms, lS_terms = [], []
    for la, mj in zip(log_a, m):
        z = y - mj
        with np.errstate(divide="ignore", invalid="ignore"):
            small = special.log_ndtr(-np.abs(z))  # log Phi(-|z|) <= log 1/2
            big = np.log1p(-np.exp(small))
        neg = z < 0
        lF_terms.append(np.where(neg, small, big) + la)
        lS_terms.append(np.where(neg, big, small) + la)
    return _lse(lF_terms), _lse(lS_terms)


def _log_pdf_mix(y: np.ndarray, log_a: np.ndarray, m: np.ndarray) -> np.ndarray:
    return _lse([-0.5 * (y - mj) ** 2 + la for la, mj in zip(log_a, m)]) - LOG_SQRT_2PI


def _log_abs_err(y: np.ndarray, lv: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Bound on the absolute error of a computed log-CDF value ``lv`` at ``y``.

    log_ndtr is accurate to a few ulps of its value (8u(1 + |l|)); the argument y - m
    carries a rounding error u(|y| + |m|), amplified by d/dz log Phi(z) <= |z| + 1; the
    log-sum over the mixture adds 4u log2(J + 1).
    """
    mm = float(np.max(np.abs(m)))
    ay = np.where(np.isfinite(y), np.abs(y), 0.0)
    arg = 2.0 * U * (ay + mm) * (ay + mm + 1.0)
    err = 8.0 * U * (1.0 + np.abs(np.where(np.isfinite(lv), lv, 0.0))) + arg + 4.0 * U * math.log2(m.size + 2.0)
    return np.where(np.isfinite(y), err, 0.0)


class _Dist:
    """A Gaussian mixture sum_j a_j N(m_j, 1) evaluated at the grid points ``y``."""

    def __init__(self, log_a, m, y):
        self.log_a = np.asarray(log_a, float)
        self.m = np.asarray(m, float)
        self.lF, self.lS = _log_cdf_both(y, self.log_a, self.m)
        self.aF = _log_abs_err(y, self.lF, self.m)
        self.aS = _log_abs_err(y, self.lS, self.m)

    def cells(self):
        """Masses of the cells (y_i, y_{i+1}] and absolute error bounds."""
        lF, lS, aF, aS = self.lF, self.lS, self.aF, self.aS
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            # upper side: P = S_i (1 - e^{-D}),  D = lS_i - lS_{i+1}
            dS = lS[:-1] - lS[1:]
            mS = np.exp(lS[:-1]) * -np.expm1(-dS)
            eS = np.exp(lS[:-1]) * (aS[:-1] * -np.expm1(-dS) + np.exp(-dS) * (aS[:-1] + aS[1:]) + 4 * U)
            # lower side: P = F_{i+1} (1 - e^{-D}),  D = lF_{i+1} - lF_i
            dF = lF[1:] - lF[:-1]
            mF = np.exp(lF[1:]) * -np.expm1(-dF)
            eF = np.exp(lF[1:]) * (aF[1:] * -np.expm1(-dF) + np.exp(-dF) * (aF[:-1] + aF[1:]) + 4 * U)
            # straddling the median: P = 1 - F_i - S_{i+1}
            mM = 1.0 - np.exp(lF[:-1]) - np.exp(lS[1:])
            eM = 4 * U + aF[:-1] * np.exp(lF[:-1]) + aS[1:] * np.exp(lS[1:])
        upper = lS[:-1] <= LOG_HALF
        lower = (~upper) & (lF[1:] <= LOG_HALF)
        mass = np.where(upper, mS, np.where(lower, mF, mM))
        err = np.where(upper, eS, np.where(lower, eF, eM))
        mass = np.where(np.isfinite(mass), np.maximum(mass, 0.0), 0.0)
        err = np.where(np.isfinite(err), err, 0.0)
        return mass, err

    def below(self):
        return math.exp(self.lF[0]), math.exp(self.lF[0]) * self.aF[0]

    def above(self):
        return math.exp(self.lS[-1]), math.exp(self.lS[-1]) * self.aS[-1]


# -------------------------------------------------------------------------------- the builder


def _ctd_parts(log_w, mu: float, direction: str, d: float, tail: float):
    """The exact CTD tail sums of one pair on its grid, with absolute error bounds."""
    log_w = np.asarray(log_w, float)
    kk = np.arange(log_w.size, dtype=float)
    keep = np.isfinite(log_w)
    s = 1.0 if direction == "remove" else -1.0
    t = (s * mu * kk)[keep]
    log_c = log_w[keep]
    if direction == "remove":
        P = (log_c, t)
        Q = (np.array([0.0]), np.array([0.0]))
    else:
        P = (np.array([0.0]), np.array([0.0]))
        Q = (log_c, t)
    log_c0 = float(log_w[0]) if keep[0] else -math.inf  # g -> log c_0 at the flat end
    # y-range holding all but ~tail of P: every component j with a_j > tail / J contributes
    # a_j Phi(-(y - m_j)) <= tail / J above y_hi (the mass outside is handled exactly anyway,
    # so this only trades accuracy for grid size)
    z = float(-special.ndtri(tail))
    J = P[0].size
    heavy = P[0] > math.log(tail / J)
    y_lo = float(np.min(P[1])) - z
    zj = -special.ndtri(np.minimum(tail / (J * np.exp(P[0][heavy])), 0.5))
    y_hi = float(np.max(P[1][heavy] + zj)) if np.any(heavy) else float(np.max(P[1]))
    l_lo = s * float(_g(np.array([y_lo]), log_c, t)[0])  # L is increasing in y
    l_hi = s * float(_g(np.array([y_hi]), log_c, t)[0])
    i_lo = int(math.floor(l_lo / d))
    i_hi = int(math.ceil(l_hi / d))
    # natural loss bounds: remove L > log c_0, add L < -log c_0
    if direction == "add" and math.isfinite(log_c0):
        i_hi = min(i_hi, int(math.ceil(-log_c0 / d)))
    if direction == "remove" and math.isfinite(log_c0):
        i_lo = max(i_lo, int(math.floor(log_c0 / d)))
    if i_hi <= i_lo:
        i_hi = i_lo + 1
    if i_hi - i_lo + 1 > GRID_MAX:
        from ._pld_fft import WindowTooLarge

        raise WindowTooLarge(i_hi - i_lo + 1)
    idx = np.arange(i_lo, i_hi + 1)
    eps = idx * d
    v = s * eps  # g(y) = s * eps
    # grid points in y; outside the range of g they are -inf (remove) / +inf (add)
    inside = v > log_c0 if math.isfinite(log_c0) else np.ones(v.shape, bool)
    y = np.full(v.shape, -np.inf if direction == "remove" else np.inf)
    if np.any(inside):
        y[inside] = _g_inverse(v[inside], log_c, t, s * mu)
    # residual |L(y_i) - e_i| (with its evaluation error) and the loss density at e_i: the
    # computed y_i misplace at most ~2 resid x density of mass across e_i
    resid = np.zeros(v.shape)
    dens = np.zeros(v.shape)
    fin = np.isfinite(y)
    if np.any(fin):
        gy, gerr = _g_with_err(y[fin], log_c, t)
        resid[fin] = np.abs(gy - v[fin]) + gerr + 2 * U * np.abs(v[fin])
        gp = np.abs(_g_prime(y[fin], log_c, t))
        with np.errstate(divide="ignore", over="ignore", under="ignore"):
            dens[fin] = np.exp(_log_pdf_mix(y[fin], P[0], P[1])) / gp
        dens = np.where(np.isfinite(dens), dens, np.inf)
    Pd = _Dist(P[0], P[1], y)
    Qd = _Dist(Q[0], Q[1], y)
    Pc, ePc = Pd.cells()
    Qc, eQc = Qd.cells()
    P_below, eP_below = Pd.below()
    P_above, eP_above = Pd.above()
    Q_above, eQ_above = Qd.above()
    one_m = -math.expm1(-d)
    ecell = np.exp(eps[:-1])
    with np.errstate(over="ignore", invalid="ignore"):
        b = (Pc - ecell * Qc) / one_m
        b = np.clip(np.where(np.isfinite(b), b, 0.0), 0.0, Pc)
        err_b = (ePc + ecell * eQc + 4 * U * (Pc + ecell * Qc)) / one_m
        err_b = np.minimum(np.where(np.isfinite(err_b), err_b, np.inf), Pc + ePc)
    e_top = math.exp(eps[-1]) if eps[-1] < 700 else math.inf
    top_part = min(P_above, e_top * Q_above) if Q_above > 0 else 0.0
    inf_mass = max(P_above - top_part, 0.0)
    err_inf = eP_above + (e_top * eQ_above if Q_above > 0 else 0.0) + 4 * U * P_above
    # exact tail sums S_j = b_{j-1} + P(L > e_j)  (b_{lo-1} := P_below), with P(L > e_j) =
    # P(Y > y_j) read off the log-CDFs directly (no accumulation of per-cell errors)
    with np.errstate(under="ignore"):
        up = Pd.lS <= LOG_HALF
        surv = np.where(up, np.exp(Pd.lS), -np.expm1(Pd.lF))
        esurv = np.where(up, np.exp(Pd.lS) * Pd.aS, np.exp(Pd.lF) * Pd.aF + 2 * U)
        upq = Qd.lS <= LOG_HALF
        qsurv = np.where(upq, np.exp(Qd.lS), -np.expm1(Qd.lF))
        eqsurv = np.where(upq, np.exp(Qd.lS) * Qd.aS, np.exp(Qd.lF) * Qd.aF + 2 * U)
    S = np.concatenate([[P_below], b]) + surv
    boundary = 4.0 * resid * dens
    E = np.concatenate([[eP_below], err_b]) + esurv + boundary + 4 * U * S
    return dict(
        i_lo=i_lo,
        eps=eps,
        S=S,
        E=E,
        inf=inf_mass,
        err_inf=err_inf,
        b=b,
        err_b=err_b,
        qsurv=qsurv,
        eqsurv=eqsurv + boundary,
        P_below=P_below,
        P_above=P_above,
    )


def _from_tail_sums(Uj: np.ndarray, inf_up: float) -> np.ndarray:
    """PMF with tail sums >= (1 - u) Uj (after making Uj non-increasing and >= inf_up)."""
    Uj = np.minimum(np.where(np.isfinite(Uj), Uj, 1.0), 1.0)  # exact tail sums are <= 1
    Uj = np.maximum.accumulate(np.maximum(Uj, inf_up)[::-1])[::-1]
    probs = np.maximum(Uj - np.concatenate([Uj[1:], [inf_up]]), 0.0)
    probs.setflags(write=False)
    return probs


def mixture_pmf(log_w, mu: float, direction: str, d: float, tail: float = TAIL) -> StepPmf:
    """Pessimistic CTD PMF of the pair (sum_k w_k N(k mu, 1), N(0, 1)) ("remove") or of
    (N(0, 1), sum_k w_k N(k mu, 1)) ("add") on the grid i*d.  ``log_w`` = log weights of
    k = 0..K (summing to 1; -inf allowed), ``mu`` > 0 the shift per unit."""
    c = _ctd_parts(log_w, mu, direction, d, tail)
    inf_up = c["inf"] + c["err_inf"]
    probs = _from_tail_sums(c["S"] + c["E"], inf_up)
    return StepPmf(
        d=d,
        offset=int(c["i_lo"]),
        probs=probs,
        inf_mass=float(inf_up),
        rel_err=2 * U,
        build_error=float(max(np.max(c["E"]), c["err_inf"])),
        lower_mass=float(c["P_below"]),
        upper_mass=float(c["P_above"]),
    )


def symmetrized_pmf(log_w, mu: float, d: float, tail: float = TAIL) -> StepPmf:
    """Pessimistic CTD PMF of the symmetrisation of the remove pair
    (P, Q) = (sum_k w_k N(k mu, 1), N(0, 1)): the pair whose hockey-stick curve is
    H(a) = H_a(P||Q) for a >= 1 and 1 - a + a H_{1/a}(P||Q) for a < 1.

    On the grid: p(i) = p_rem(i) for i >= 1, p(-i) = e^{-i d} p_rem(i) (the dual of a CTD PMF
    is the CTD PMF of the dual pair: both cell constraints are kept), and p(0) takes the
    rest.  Tail sums: S(j) = S_rem(j) for j >= 1 and, for j >= 0,
    S(-j) = 1 - sum_{i > j} e^{-i d} p_rem(i) = 1 - Q(L > e_{j+1}) - e^{-e_{j+1}} b_j
    (the CTD split keeps each cell's Q-mass), rounded up from lower bounds of Q and b."""
    c = _ctd_parts(log_w, mu, "remove", d, tail)
    i_lo, eps = c["i_lo"], c["eps"]
    n = eps.size
    i_hi = i_lo + n - 1
    if i_lo > 0 or i_hi < 1:
        raise ValueError("the symmetrised grid must contain 0 and 1")
    inf_up = c["inf"] + c["err_inf"]
    pos = np.arange(1 - i_lo, n)  # grid indices 1..i_hi
    U_pos = (c["S"] + c["E"])[pos]
    # thresholds -j, j = i_hi..0: need b_j (cell j -> j+1) and Q(L > e_{j+1}), j + 1 <= i_hi
    jj = np.arange(i_hi - 1, -1, -1)  # j = i_hi-1 .. 0
    pj = jj - i_lo  # position of grid j (cell j)
    b_lo = np.maximum(c["b"][pj] - c["err_b"][pj], 0.0)
    q_lo = np.maximum(c["qsurv"][pj + 1] - c["eqsurv"][pj + 1], 0.0)
    with np.errstate(under="ignore"):
        low = q_lo + np.exp(-eps[pj + 1]) * b_lo
    U_neg = np.minimum(1.0, 1.0 - low * (1 - 4 * U) + 4 * U)
    # index -i_hi: nothing lies below it -> tail sum 1
    Uj = np.concatenate([[1.0], U_neg, U_pos])  # thresholds -i_hi .. i_hi
    probs = _from_tail_sums(Uj, inf_up)
    err = float(max(np.max(c["E"][pos]), c["err_inf"], float(np.max(U_neg - (1 - low)))))
    return StepPmf(
        d=d,
        offset=-int(i_hi),
        probs=probs,
        inf_mass=float(inf_up),
        rel_err=2 * U,
        build_error=err,
        lower_mass=0.0,
        upper_mass=float(c["P_above"]),
        symmetric=True,
    )
