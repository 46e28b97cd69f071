"""Private: composition of pessimistic PMFs by an exponentially tilted FFT, with error bounds.

Input: components (PMF p_c on the common grid l_i = i d, +inf atom m_c, count T_c).  The
composition of dominating pairs is the convolution of their privacy-loss distributions
(Zhu, Dong & Wang 2022 Thm 10; Koskela, Jaelkoe & Honkela 2020 §3), with +inf absorbing:

    finite part  F = *_c p_c^{*T_c},
    inf mass     M = prod_c (|p_c| + m_c)^{T_c} - prod_c |p_c|^{T_c},
    delta(eps)   = M + sum_{l > eps} F(l) (1 - e^{eps - l}).

Tilting.  For lam >= 0 let Z_c = sum_i p_c(i) e^{lam l_i} and r_c = p_c e^{lam l} / Z_c (a
probability vector).  Then F(l) = R(l) e^{C - lam l} with R = *_c r_c^{*T_c} and
C = sum_c T_c log Z_c.  The FFT computes R with an *absolute* error ||dR||_2 (bounded
below); untilted, the error of delta(eps) is at most (Cauchy-Schwarz, 0 <= weights <= 1)

    ||dR||_2 * sqrt( sum_{l > eps, l in window} e^{2 (C - lam l)} ).

With lam at the saddle point of eps (the tilted mean loss equals eps), e^{C - lam eps} is
the Chernoff bound on P(L > eps) ~ delta: the FFT error becomes *relative* to delta, so
delta = 1e-12 is certified after 1e6 steps.  lam = 0 is the plain FFT.

Window.  R is computed on [lo, hi] by a circular convolution of length N >= hi - lo + 1;
Chernoff bounds on R (exact log-MGFs of the r_c) give R(L < lo), R(L > hi) <= tau.  Mass
outside the window aliases into it: extra non-negative mass, so delta only grows.  The
upper tail adds at most tau e^{C - lam hi} to delta; below the window only lam = 0 answers
(adding tau).

FFT error.  Normwise bound ||fl(FFT x) - FFT x||_2 <= c u log2 N ||FFT x||_2 (Higham 2002,
Thm 24.2, Cooley-Tukey with accurate twiddle factors; c = ``C_FFT`` = 8, an order of
magnitude above the error measured for pocketfft in the tests).  With X_c = FFT(r_c),
|X_c| <= 1 and Y = prod X_c^{T_c}:

    ||dY||_2 <= sum_c T_c e_c prod_c (1 + e_c)^{T_c} + (power/product rounding),
    e_c = c u log2 N sqrt(N) ||r_c||_2,    ||dR||_2 <= ||dY||_2 / sqrt(N) + c u log2 N ||R||_2.

Relative errors (the PMFs' eta, tilting and untilting in float) are collected in one factor
1 / (1 - rho) >= 1 applied to delta; summation errors are added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import fft as sfft

from ._logmath import logsumexp_rows

U = 2.0**-53
C_FFT = 8.0
TAU = 1e-30  # tilted mass allowed outside the window (each side)
N_MAX = 1 << 22  # longest FFT
UNDERFLOW = 1e-300  # bound on all masses lost to float underflow in one pass


class WindowTooLarge(Exception):
    """The composition needs an FFT longer than N_MAX at this grid spacing."""

    def __init__(self, needed: int):
        super().__init__(f"FFT length {needed} > {N_MAX}")
        self.needed = needed


@dataclass(frozen=True, eq=False)
class Component:
    """A PMF (trimmed to its non-zero range) composed ``count`` times."""

    p: np.ndarray
    log_p: np.ndarray
    first: int
    inf_mass: float
    fin_mass: float
    rel_err: float
    count: int

    @property
    def idx(self) -> np.ndarray:
        return self.first + np.arange(self.p.size)


def make_component(pmf, count: int) -> Component:
    probs = np.asarray(pmf.probs, dtype=float)
    nz = np.nonzero(probs > 0)[0]
    if nz.size == 0:  # all mass at +inf
        p, first = np.array([0.0]), int(pmf.offset)
    else:
        p = np.array(probs[nz[0] : nz[-1] + 1])
        first = int(pmf.offset) + int(nz[0])
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    p.setflags(write=False)
    log_p.setflags(write=False)
    # the real sum of the float masses, to ~n 1e-19 relative (long-double accumulation)
    fin = float(np.sum(p, dtype=np.longdouble))
    return Component(
        p=p,
        log_p=log_p,
        first=first,
        inf_mass=float(pmf.inf_mass),
        fin_mass=fin,
        rel_err=float(pmf.rel_err) + 2e-19 * p.size,
        count=int(count),
    )


def _log_z(comp: Component, t, d: float):
    """log sum_i p(i) e^{t l_i} for a scalar or a 1-D array of t."""
    t = np.asarray(t, float)
    x = comp.log_p[None, :] + (np.atleast_1d(t) * d)[:, None] * comp.idx[None, :]
    out = logsumexp_rows(x)
    return float(out[0]) if t.ndim == 0 else out


def _moments(comp: Component, t: float, d: float):
    """(log Z, mean, variance) of the t-tilted PMF of one component."""
    l = comp.idx * d
    x = comp.log_p + t * l
    mx = float(np.max(x))
    w = np.exp(x - mx)
    sw = float(w.sum())
    m1 = float((w * l).sum()) / sw
    m2 = float((w * (l - m1) ** 2).sum()) / sw
    return mx + math.log(sw), m1, m2


def cumulant(comps, t, d: float):
    """K(t) = sum_c T_c log Z_c(t), the log-MGF of the composed finite part."""
    return sum(c.count * _log_z(c, t, d) for c in comps)


def cumulants(comps, t: float, d: float):
    """(K, K', K'') at t."""
    k0 = k1 = k2 = 0.0
    for c in comps:
        lz, m1, m2 = _moments(c, t, d)
        k0 += c.count * lz
        k1 += c.count * m1
        k2 += c.count * m2
    return k0, k1, k2


def saddle_point(comps, eps: float, d: float, lam_max: float = 50.0) -> float:
    """lam >= 0 with K'(lam) = eps (0 if eps <= K'(0)); K' increases (K is convex)."""
    if cumulants(comps, 0.0, d)[1] >= eps:
        return 0.0
    lo, hi = 0.0, lam_max
    lam = 1.0
    for _ in range(60):
        _, k1, k2 = cumulants(comps, lam, d)
        if k1 < eps:
            lo = lam
        else:
            hi = lam
        step = (eps - k1) / k2 if k2 > 0 else math.inf
        nxt = lam + step
        lam = nxt if lo < nxt < hi else (0.5 * (lo + hi) if hi < lam_max else 2 * lam + 1)
        lam = min(lam, lam_max)
        if abs(step) < 1e-5 * (1 + lam) or hi - lo < 1e-6:
            break
    return max(lam, 0.0)


def saddle_for_delta(comps, delta: float, d: float, lam_max: float = 50.0) -> float:
    """lam whose saddle-point approximation of the hockey-stick divergence,
    log delta(K'(lam)) ~ K - lam K' - log(lam (lam + 1)) - log(2 pi K'')/2,
    equals log ``delta``: a cheap guess of the tilt that makes the FFT error relative at the
    answer.  (Only the tilt is chosen with it; the certificate never uses it.)"""
    target = math.log(delta)

    def g(lam):
        k0, k1, k2 = cumulants(comps, lam, d)
        k2 = max(k2, d * d)
        return k0 - lam * k1 - math.log(lam * (lam + 1.0)) - 0.5 * math.log(2 * math.pi * k2)

    lo, hi = 1e-3, 1.0
    if g(lo) <= target:
        return 0.0
    while g(hi) > target and hi < lam_max:
        lo, hi = hi, 2.0 * hi
    if hi >= lam_max:
        return lam_max
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if g(mid) > target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.02:
            break
    return math.sqrt(lo * hi)


@dataclass(eq=False)
class Pass:
    """The composed finite part on a window, at tilt lam, with its error terms.

    delta_true(eps) <= rel_factor * (inf_mass + sum_{l > eps} y (1 - e^{eps - l})
                                     + summation + FFT + truncation errors).
    """

    d: float
    lam: float
    lo: int  # grid index of the window start
    log_y: np.ndarray  # log of the untilted composed masses on the window
    inf_mass: float
    rel_factor: float
    dR2: float  # bound on ||R_fft - R||_2 (tilted, normalised)
    log_C: float  # C = sum_c T_c log Z_c(lam)
    trunc_hi: float  # bound on the untilted mass above the window
    tau_lo: float  # bound on the mass below the window (inf unless lam = 0)
    n_fft: int
    _memo: dict = field(default_factory=dict, repr=False)

    @property
    def losses(self) -> np.ndarray:
        return (self.lo + np.arange(self.log_y.size)) * self.d

    def _fft_w(self, j: np.ndarray) -> np.ndarray:
        """Upper bounds on sqrt(sum_{i >= j} e^{2(C - lam l_i)}) at window indices j:
        sqrt(n - j) e^C for lam = 0, else e^{C - lam l_j} / sqrt(1 - e^{-2 lam d})."""
        n = self.log_y.size
        if self.lam == 0.0:
            return np.sqrt(n - j.astype(float)) * math.exp(self.log_C)
        l = (self.lo + j) * self.d
        with np.errstate(over="ignore", under="ignore"):
            return np.exp(self.log_C - self.lam * l) / math.sqrt(-math.expm1(-2 * self.lam * self.d))

    def _A(self):
        """Suffix sums A[j] = sum_{i >= j} y_i (linear, scaled by the largest term; entries
        that underflow are < 1e-300 in total, see UNDERFLOW)."""
        if "A" not in self._memo:
            ly = self.log_y
            my = float(np.max(ly))
            with np.errstate(under="ignore"):
                self._memo["A"] = np.cumsum(np.exp(ly - my)[::-1])[::-1] * math.exp(my)
        return self._memo["A"]

    def deltas_on_grid(self, delta: float | None = None):
        """(j, l_j, delta_j, (A, Bj, mz, err_j)) for window indices j in a range that must
        contain the first j with delta_j <= ``delta`` (all j if ``delta`` is None):
        delta_j is the certified delta at eps = l_j, A[j] = sum_{i >= j} y_i (full window),
        Bj[k] = e^{-mz} sum_{i >= j_k} y_i e^{-l_i} on the range.

        The range: delta_j <= rel (M + A_{j+1} + max err) gives an upper end; and since every
        mass at least K = ceil(1/d) bins above l_j contributes >= (1 - e^{-K d}),
        delta_j >= rel (M + (1 - e^{-Kd}) A_{j+K}) gives a lower end."""
        n = self.log_y.size
        A = self._A()
        A1 = np.concatenate([A[1:], [0.0]])
        err_max = 4.0 * n * U * A1[0] + self.dR2 * float(self._fft_w(np.array([0]))[0]) + self.trunc_hi + UNDERFLOW
        a, b = 0, n
        if delta is not None:
            up = self.rel_factor * (self.inf_mass + A1 + err_max)
            ok = np.nonzero(up <= delta)[0]
            if ok.size:
                b = int(ok[0]) + 1
            K = max(1, int(math.ceil(1.0 / self.d)))
            AK = np.concatenate([A[K:], np.zeros(min(K, n))])[:n]
            low = self.rel_factor * (self.inf_mass + -math.expm1(-K * self.d) * AK)
            bad = np.nonzero(low[:b] > delta)[0]
            if bad.size:
                a = int(bad[-1])
        j = np.arange(a, b)
        l = (self.lo + j) * self.d
        # B over [a, n): e^{-mz} sum_{i >= j} y_i e^{-l_i}
        lt = (self.lo + np.arange(a, n)) * self.d
        z = self.log_y[a:] - lt
        mz = float(np.max(z)) if z.size else 0.0
        with np.errstate(under="ignore", over="ignore", divide="ignore"):
            Bfull = np.cumsum(np.exp(z - mz)[::-1])[::-1]
            Bj = Bfull[: b - a]
            B1 = np.concatenate([Bfull[1:], [0.0]])[: b - a]
            EB1 = np.exp(np.log(B1) + mz + l)  # e^{l_j} B_{j+1} <= A_{j+1}
        A1r = A1[a:b]
        EB1 = np.minimum(np.where(np.isfinite(EB1), EB1, np.inf), A1r)
        W1 = self._fft_w(np.minimum(j + 1, n - 1))
        W1 = np.where(j + 1 < n, W1, 0.0)
        core = np.maximum(A1r - EB1, 0.0)
        err = 4.0 * n * U * A1r + self.dR2 * W1 + self.trunc_hi + UNDERFLOW
        dlt = self.rel_factor * (self.inf_mass + core + err)
        dlt = np.where(np.isnan(dlt), np.inf, dlt)
        return j, l, dlt, (A, Bj, mz, err)

    def delta_at(self, eps: float) -> tuple[float, float]:
        """Certified delta(eps) by a direct sum, and the absolute error budget in it."""
        l = self.losses
        if eps < l[0] and math.isinf(self.tau_lo):
            return math.inf, math.inf
        m = l > eps
        ly, lm = self.log_y[m], l[m]
        with np.errstate(under="ignore"):
            yy = np.exp(ly)
        core = float((yy * -np.expm1(eps - lm)).sum())
        e_sum = 2.0 * yy.size * U * float(np.sum(yy)) + UNDERFLOW
        w2 = float(np.exp(logsumexp_rows(2.0 * (self.log_C - self.lam * lm)))) if lm.size else 0.0
        e_fft = self.dR2 * math.sqrt(w2)
        extra = self.trunc_hi + (self.tau_lo if eps < l[0] else 0.0)
        err = e_sum + e_fft + extra
        return self.rel_factor * (self.inf_mass + core + err), self.rel_factor * err

    def epsilon_for(self, delta: float) -> tuple[float, float]:
        """Smallest certified eps >= 0 with delta(eps) <= delta (and the absolute error
        budget at that eps); (inf, inf) if this pass cannot certify it."""
        jj, l, dg, (A, Bj, mz, err) = self.deltas_on_grid(delta)
        ok = np.nonzero(dg <= delta)[0]
        if ok.size == 0:
            return math.inf, math.inf
        k = int(ok[0])
        j = int(jj[k])
        lj = float(l[k])
        if j == 0:
            if lj <= 0.0:
                cand = 0.0
            elif math.isinf(self.tau_lo):
                return math.inf, math.inf  # the answer is below this tilt's window
            else:
                # eps in [0, l_0]: all window mass lies above eps
                cand = self._solve(
                    delta, A[0], Bj[0], mz, err[k] + self.tau_lo + 4 * self.log_y.size * U * A[0], 0.0, lj
                )
        elif k == 0:
            cand = lj  # (not reached: the range starts lower)
        else:
            # eps in [l_{j-1}, l_j]: the mass above eps is indices >= j
            cand = self._solve(delta, A[j], Bj[k], mz, err[k - 1], float(l[k - 1]), lj)
        cand = max(cand, 0.0)
        cand = cand + 4.0 * U * abs(cand) + 1e-15 if cand > 0 else 0.0
        dlt, e = self.delta_at(cand)
        if dlt > delta:  # fall back to the grid point
            cand = max(lj, 0.0)
            dlt, e = self.delta_at(cand)
            if dlt > delta:
                return math.inf, math.inf
        return cand, e

    def epsilon_estimate(self, delta: float) -> float:
        """Uncertified eps(delta) of this pass without error terms (to choose a tilt)."""
        jj, l, dg, (A, Bj, mz, err) = self.deltas_on_grid()
        raw = dg / self.rel_factor - err
        ok = np.nonzero(raw <= delta)[0]
        return float(l[ok[0]]) if ok.size else float(l[-1])

    def _solve(self, delta, A, B, mz, err, a, b):
        """eps in [a, b] with rel (M + A - e^eps e^{mz} B + err) = delta (b if none)."""
        num = self.inf_mass + A + err - delta / self.rel_factor
        if num <= 0.0:
            return a
        if B <= 0.0:
            return b
        eps = math.log(num) - math.log(B) - mz
        return min(max(eps, a), b)


def _tilt(comp: Component, lam: float, d: float):
    """r = p e^{lam l - log Z} and the relative error of its entries."""
    l = comp.idx * d
    logz = _log_z(comp, lam, d)
    arg = lam * l - logz
    with np.errstate(under="ignore"):
        r = comp.p * np.exp(arg)
    rho = 4.0 * U * (1.0 + float(np.max(np.abs(arg)))) + 4.0 * U * (
        abs(logz) + math.log2(comp.p.size + 1.0)
    )  # the normalisation
    return r, logz, rho


def _window(comps, rs, lam, d, log_C, tau):
    base = sum(c.count * c.first for c in comps)
    top = sum(c.count * (c.first + c.p.size - 1) for c in comps)
    var = 0.0
    for c, r in zip(comps, rs):
        li = c.idx * d
        m1 = float((r * li).sum())
        var += c.count * float((r * (li - m1) ** 2).sum())
    sd = math.sqrt(max(var, d * d))
    thetas = np.array(sorted({*(4.0**k / sd for k in range(-1, 5)), *(4.0**k for k in range(-1, 4))}))
    log_tau = math.log(tau)
    kp = cumulant(comps, lam + thetas, d) - log_C
    hi_loss = min(top * d, float(np.min((kp - log_tau) / thetas)))
    tm = thetas[lam - thetas >= -60.0]
    km = cumulant(comps, lam - tm, d) - log_C
    lo_loss = max(base * d, float(np.max((log_tau - km) / tm))) if tm.size else base * d
    hi = min(top, int(math.ceil(hi_loss / d)) + 1)
    lo = max(base, int(math.floor(lo_loss / d)) - 1)
    return base, lo, max(hi, lo), top


def compose_pass(comps, d: float, lam: float, tau: float = TAU) -> Pass:
    """One tilted FFT composition of ``comps`` (a non-empty list of Component)."""
    tau = min(max(tau, 1e-300), 0.5)
    tilted = [_tilt(c, lam, d) for c in comps]
    rs = [t[0] for t in tilted]
    log_C = float(sum(c.count * t[1] for c, t in zip(comps, tilted)))
    base, lo, hi, top = _window(comps, rs, lam, d, log_C, tau)
    width = hi - lo + 1
    n = sfft.next_fast_len(width, real=True)
    if n > N_MAX:
        raise WindowTooLarge(n)
    log2n = math.log2(max(n, 2))
    Y = None
    sum_terms = growth = 0.0
    for c, r in zip(comps, rs):
        arr = np.zeros(n)
        if r.size > n:  # slot of absolute index first + i is i mod n
            np.add.at(arr, np.arange(r.size) % n, r)
        else:
            arr[: r.size] = r
        norm2 = float(np.sqrt((arr * arr).sum()))
        X = sfft.rfft(arr)
        del arr
        e_c = C_FFT * U * log2n * math.sqrt(n) * norm2
        sum_terms += c.count * C_FFT * U * log2n * norm2
        growth += c.count * math.log1p(e_c)
        # X^T in polar form: |X| clamped to the unit disk (a non-expansive projection)
        with np.errstate(divide="ignore", under="ignore"):
            mag = np.exp(c.count * np.log(np.minimum(np.abs(X), 1.0)))
            ph = np.mod(c.count * np.angle(X), 2.0 * math.pi)
            P = np.empty(X.shape, complex)
            P.real = mag * np.cos(ph)
            P.imag = mag * np.sin(ph)
        del X
        Y = P if Y is None else Y * P
    R = sfft.irfft(Y, n)
    del Y
    R = np.roll(R, -((lo - base) % n))[:width]  # slot j <-> absolute base + j (mod n)
    normR = float(np.sqrt((R * R).sum()))
    m = len(comps)
    tot_T = sum(c.count for c in comps)
    dR2 = (
        sum_terms * math.exp(growth)
        + C_FFT * U * log2n * normR
        + U * (tot_T * (4.0 + 2.0 * math.pi) + 4.0 * m) * normR
        + 2.0 * U * m / math.e
    )
    l = (lo + np.arange(width)) * d
    # true masses lie in [0, 1]: clipping the computed ones there only reduces their error
    # (FFT noise far below the tilted bulk is amplified by e^{C - lam l} when untilted)
    with np.errstate(divide="ignore"):
        log_y = np.minimum(np.log(np.maximum(R, 0.0)) + (log_C - lam * l), 0.0)
    # the +inf atom: prod (fin + inf)^T - prod fin^T, from a = sum T log1p(inf / fin)
    if any(c.fin_mass <= 0.0 for c in comps):
        inf_mass = 1.0
    else:
        a = sum(c.count * math.log1p(c.inf_mass / c.fin_mass) for c in comps)
        log_fin = sum(c.count * math.log(c.fin_mass) for c in comps)
        inf_mass = math.exp(log_fin + a) * -math.expm1(-a) if a > 0 else 0.0
        inf_mass = min(1.0, inf_mass * (1.0 + 8.0 * U * (2.0 + tot_T)))
    rel = sum(c.count * (c.rel_err + t[2]) for c, t in zip(comps, tilted))
    rel += 4.0 * U * (2.0 + abs(log_C) + float(np.max(np.abs(lam * l))))
    rel_factor = 1.0 / (1.0 - rel) if rel < 0.5 else math.inf
    # tails cut off by the window (nothing lies beyond the support [base, top]); x2 covers
    # the float error of the Chernoff exponents (relative ~1e-12)
    trunc_hi = 0.0 if hi >= top else 2.0 * tau * math.exp(min(log_C - lam * (hi + 1) * d, 700.0))
    tau_lo = 0.0 if lo <= base else (2.0 * tau if lam == 0.0 else math.inf)
    return Pass(
        d=d,
        lam=lam,
        lo=lo,
        log_y=log_y,
        inf_mass=inf_mass,
        rel_factor=rel_factor,
        dR2=dR2,
        log_C=log_C,
        trunc_hi=trunc_hi,
        tau_lo=tau_lo,
        n_fft=n,
    )
