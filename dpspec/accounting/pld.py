"""Privacy-loss-distribution (PLD) accounting with a pessimistic, bounded error.

Every mechanism step is described by a *dominating pair* (P, Q) (Zhu, Dong & Wang 2022,
"Optimal accounting of differential privacy via characteristic function", Def. 7): for all
neighbouring D, D' and every alpha >= 0, H_alpha(M(D) || M(D')) <= H_alpha(P || Q), where
H_alpha(P || Q) = int (p - alpha q)_+ is the hockey-stick divergence, so that
delta(eps) = H_{e^eps}(P || Q).  Dominating pairs compose: the product pair dominates the
adaptive composition (Zhu et al. 2022 Thm 10), and the product pair's privacy loss is the
sum of the losses, so its distribution (the PLD) is the convolution of the steps' PLDs.

Pairs implemented (sigma = noise multiplier, per-element clip norm / sensitivity 1):

* Gaussian release, sensitivity Delta: (N(Delta, sigma^2), N(0, sigma^2)); it is mu-GDP with
  mu = Delta / sigma (Dong, Roth & Su 2022 Cor. 2.13; Balle & Wang 2018 Thm 8).
* Poisson rate q, add/remove one element: remove (P, Q) = ((1-q) N(0) + q N(1), N(0)) and
  add (Q, P) (Zhu et al. 2022 Thm 11 / Prop. 30; Koskela, Jaelkoe & Honkela 2020).  A pair of
  neighbours is either an insertion or a removal and keeps that orientation in every step,
  so each direction is composed separately and delta = max of the two.
* Fixed-size batches drawn without replacement (rate gamma = b / N), substitution:
  for alpha >= 1 the pair ((1-gamma) N(0) + gamma N(2), N(0)) (Balle, Barthe & Gaboardi 2018
  Thm 10, advanced joint convexity; a substitution moves the clipped sum by <= 2), and for
  alpha < 1 the identity H_alpha(A||B) = 1 - alpha + alpha H_{1/alpha}(B||A) applied to the
  reversed neighbours, which the same bound covers; together one symmetric pair
  (``_pld_pmf.symmetrized_pmf``).
* Fixed-size batches, add/remove with datasets of >= N elements: the Poisson pair at rate
  b/N with sensitivity 2 (Schuchardt et al. 2024 Thm F.3: the conditional-coupling argument
  uses only joint convexity, which H_alpha has).
* Poisson group of K elements: see :mod:`dpspec.accounting.pld_group`.
* Laplace (scale b, shift Delta) and discrete Laplace (scale t, integer shift Delta; Delta = 1:
  randomized response, which dominates every eps-DP mechanism): see ``_pld_laplace`` (their
  losses are rounded up to the grid, a dominating discretisation, instead of connect-the-dots).
* Discrete Gaussian (sigma, integer shift Delta): the pair (N_Z(0, sigma^2), N_Z(Delta, sigma^2)) with its
  exact loss Delta (Delta - 2k)/(2 sigma^2) on the integers, rounded up, the outputs beyond the kept support
  on the loss +inf with an analytic bound on their mass: see ``_pld_discrete_gaussian``.
* Any (eps, delta)-DP step: the four-output pair (loss +inf w.p. delta, +-eps otherwise; Kairouz, Oh &
  Viswanath 2015 Thm 2.4): ``_pld_laplace.approx_dp_pmf``.

Discretisation and error (see ``_pld_pmf`` and ``_pld_fft`` for the proofs):

1. each step's pair is discretised by pessimistic connect-the-dots (Doroshenko et al. 2022)
   on the loss grid i*d: the result dominates the pair for every alpha (no truncation
   error: mass below the grid is rounded up, mass above is split onto the top point and
   +inf exactly);
2. floating point in that construction is bounded per tail sum and rounded up into the PMF;
3. the composition is an exponentially tilted FFT whose error is bounded (normwise FFT
   bound) and added to delta, relative to delta when the tilt sits at the answer; the
   window's truncated tails are bounded by Chernoff and added to delta;
4. remaining relative float errors multiply delta by a stated factor.

The certified delta(eps) is an upper bound on the exact hockey-stick divergence of the
composed pairs, hence on the mechanism's; eps(delta) is the smallest eps whose certified
delta is <= delta.  Results record the grid, the error budget and the theorems.

The GDP mu (:attr:`Pld.gdp_mu`) is reported only for compositions of unsubsampled Gaussian
steps, where the mechanism is exactly mu-GDP; the central-limit mu of a subsampled
mechanism is not an upper bound and is never reported.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from . import _validate as V
from ._logmath import log_binom_pmf
from ._pld_fft import (
    N_MAX,
    WindowTooLarge,
    compose_pass,
    cumulants,
    make_component,
    saddle_for_delta,
    saddle_point,
)
from ._pld_pmf import TAIL, mixture_pmf, symmetrized_pmf

DEFAULT_DISCRETIZATION = 1e-4
COARSE = 8  # grid factor of the first, cheap certification of every direction
SCOUT = 64  # grid factor of the scout pass that sizes the automatic grid to the problem
GRID_SLACK = 1e-3  # the automatic grid may cost about this fraction of epsilon (estimate T * d)
GRID_MAX = 1.0  # coarsest grid the sizing picks
_KEEP_PASSES = 8  # FFT passes cached per Pld (each up to 2^22 floats)
SAMPLINGS = ("poisson", "wor", "wor_substitution")

THEOREM_COMPOSITION = "composition of dominating pairs (Zhu, Dong & Wang 2022 Thm 10)"
THEOREM_PLD_GROUP = (
    "Poisson group-K dominating pair (sum_k Bin(k|K,q) N(k,s^2), N(0,s^2)) "
    "and its reverse (Schuchardt et al. NeurIPS 2024, dominating-pair version "
    "of Thm 4.2)"
)
THEOREM_GAUSSIAN = (
    "Gaussian mechanism, pair (N(Delta,s^2), N(0,s^2)), mu-GDP with mu = "
    "Delta/s (Dong, Roth & Su 2022 Cor 2.13; Balle & Wang 2018 Thm 8)"
)
THEOREM_POISSON = (
    "Poisson-subsampled Gaussian, add/remove: remove pair ((1-q)N(0)+qN(1), "
    "N(0)) and add pair (N(0), (1-q)N(0)+qN(1)) (Zhu, Dong & Wang 2022 Thm 11; "
    "Koskela, Jaelkoe & Honkela 2020)"
)
THEOREM_WOR_SUB = (
    "WOR fixed batch, substitution: ((1-g)N(0)+gN(2), N(0)) for alpha >= 1 "
    "(Balle, Barthe & Gaboardi 2018 Thm 10), symmetrised for alpha < 1 by "
    "H_a(A||B) = 1 - a + a H_{1/a}(B||A) (dominating pairs: Zhu, Dong & Wang "
    "2022 §5)"
)
THEOREM_WOR_AR = (
    "WOR fixed batch, add/remove, datasets of >= N elements: Poisson pair at "
    "rate b/N, sensitivity 2 (Schuchardt et al. 2024 Thm F.3 with the "
    "hockey-stick divergence)"
)
THEOREM_LAPLACE = (
    "Laplace mechanism, pair (Lap(0,b), Lap(Delta,b)) (Dwork & Roth 2014 Thm 3.6; "
    "PLD: Koskela, Jaelkoe & Honkela 2020 §6), losses rounded up to the grid"
)
THEOREM_DLAPLACE = (
    "discrete Laplace pair (DLap(0,t), DLap(Delta,t)) on the integers (Ghosh, Roughgarden & "
    "Sundararajan 2009; Delta = 1: randomized response, dominating every (1/t)-DP mechanism, "
    "Kairouz, Oh & Viswanath 2015 Thm 2.4), losses rounded up to the grid"
)
THEOREM_DGAUSS = (
    "discrete Gaussian pair (N_Z(0,s^2), N_Z(Delta,s^2)) on the integers, integer shift Delta (Canonne, Kamath & "
    "Steinke 2020 Def. 1; it dominates every integer shift |t| <= Delta by the monotone likelihood ratio), exact "
    "loss Delta(Delta-2k)/(2s^2) rounded up to the grid, outputs k < -K on the loss +inf with "
    "P(Y <= -K-1) <= e^{-(K+1)^2/(2s^2)}/(sqrt(2 pi) s) + Phi(-(K+1)/s) (normaliser >= sqrt(2 pi) s by "
    "Poisson summation)"
)
THEOREM_APPROX_DP = (
    "(eps, delta)-DP step, pair with loss +inf w.p. delta, +-eps otherwise (Kairouz, Oh & Viswanath 2015 "
    "Thm 2.4; trade-off curve f_{eps,delta}, Dong, Roth & Su 2022 Prop. 2.5), losses rounded up to the grid"
)
PURE_KINDS = ("laplace", "discrete_laplace")
#: pairs built outside the Gaussian-mixture machinery (their own PMF builders; never exactly GDP)
OWN_PMF_KINDS = (*PURE_KINDS, "discrete_gaussian", "approx_dp")
METHOD_CTD = (
    "pessimistic connect-the-dots discretisation (Doroshenko et al. 2022 Alg. 1) "
    "on the loss grid i*d with float errors rounded up; composition by an "
    "exponentially tilted FFT with normwise error bound (Higham 2002 Thm 24.2, "
    "c = 8) and Chernoff-bounded window, both added to delta"
)
METHOD_ANALYTIC = (
    "analytic: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), "
    "solved in float and verified with mpmath at 40 digits"
)


# ------------------------------------------------------------------------------------ steps


@dataclass(frozen=True)
class PldStep:
    """One mechanism step composed ``count`` times (the math is in the module docstring).

    kind: "gaussian" (Delta = ``shift``), "poisson" (rate ``rate``, group ``group_size``,
    shift 1 per element), "wor_substitution" (rate gamma = b/N, shift 2),
    "wor" (add/remove, rate b/N, shift 2), "laplace" (scale b = ``sigma``, Delta = ``shift``),
    "discrete_laplace" (scale t = ``sigma``, integer Delta = ``shift``; Delta = 1 is randomized
    response, the dominating pair of any (1/t)-DP mechanism): see ``_pld_laplace``;
    "discrete_gaussian" (sigma = ``sigma``, integer Delta = ``shift``): see ``_pld_discrete_gaussian``;
    "approx_dp" (any (eps, delta)-DP step: eps = ``sigma``, delta = ``shift``): ``_pld_laplace.approx_dp_pmf``.
    """

    kind: str
    sigma: float
    count: int
    rate: float = 1.0
    shift: float = 1.0
    group_size: int = 1

    @property
    def symmetric(self) -> bool:
        return self.kind in ("gaussian", "wor_substitution", *OWN_PMF_KINDS) or (
            self.kind in ("poisson", "wor") and self.rate == 1.0
        )

    @property
    def gaussian_shift(self) -> float | None:
        """Delta/sigma if this step is an unsubsampled Gaussian (exactly GDP), else None."""
        if self.kind == "gaussian":
            return self.shift / self.sigma
        if self.kind in OWN_PMF_KINDS:
            return None
        if self.rate == 1.0:
            return self.shift * self.group_size / self.sigma
        return None

    @property
    def theorem(self) -> str:
        if self.kind in PURE_KINDS:
            return THEOREM_LAPLACE if self.kind == "laplace" else THEOREM_DLAPLACE
        if self.kind == "discrete_gaussian":
            return THEOREM_DGAUSS
        if self.kind == "approx_dp":
            return THEOREM_APPROX_DP
        if self.kind == "gaussian" or self.gaussian_shift is not None:
            return THEOREM_GAUSSIAN
        if self.kind == "poisson":
            if self.group_size > 1:
                return f"{THEOREM_PLD_GROUP}, group size {self.group_size}"
            return THEOREM_POISSON
        return THEOREM_WOR_SUB if self.kind == "wor_substitution" else THEOREM_WOR_AR

    def log_weights(self) -> np.ndarray:
        """log w_k, k = 0..K, of the mixture sum_k w_k N(k shift, sigma^2)."""
        if self.kind == "gaussian" or self.rate == 1.0:
            k = 1 if self.kind == "gaussian" else self.group_size
            w = np.full(k + 1, -np.inf)
            w[k] = 0.0
            return w
        k = self.group_size
        kk = np.arange(k + 1, dtype=float)
        return log_binom_pmf(kk, k, math.log(self.rate), math.log1p(-self.rate))

    def pmfs(self, d: float, tail: float = TAIL):
        """(remove PMF, add PMF) on the grid spacing d (the same object if symmetric); P-mass
        ~``tail`` outside the grid is rounded pessimistically (exact, only less tight)."""
        return _pmfs_cached(self.kind, self.sigma, self.rate, self.shift, self.group_size, d, tail)


@functools.lru_cache(maxsize=8)
def _pmfs_cached(kind, sigma, rate, shift, group_size, d, tail):
    if kind in PURE_KINDS:
        from ._pld_laplace import discrete_laplace_pmf, laplace_pmf

        p = laplace_pmf(shift / sigma, d) if kind == "laplace" else discrete_laplace_pmf(sigma, int(shift), d)
        return p, p
    if kind == "discrete_gaussian":
        from ._pld_discrete_gaussian import discrete_gaussian_pmf

        p = discrete_gaussian_pmf(sigma, int(shift), d, tail)
        return p, p
    if kind == "approx_dp":
        from ._pld_laplace import approx_dp_pmf

        p = approx_dp_pmf(sigma, shift, d)
        return p, p
    step = PldStep(kind, sigma, 1, rate, shift, group_size)
    lw = step.log_weights()
    mu = shift / sigma
    if kind == "wor_substitution" and rate < 1.0:
        p = symmetrized_pmf(lw, mu, d, tail)
        return p, p
    rem = mixture_pmf(lw, mu, "remove", d, tail)
    if step.symmetric:
        return rem, rem
    return rem, mixture_pmf(lw, mu, "add", d, tail)


# ---------------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class PldResult:
    """A certified (epsilon, delta) pair from a PLD.

    Attributes:
        epsilon, delta: the guarantee (delta is the certified upper bound at epsilon).
        by_direction: ((direction, epsilon or delta of that direction, grid d), ...):
            "remove" and "add" for add/remove relations, "symmetric" for symmetric pairs,
            "analytic" for the exact Gaussian path.  The guarantee is the worst direction;
            a direction that is not the worst may be certified on a coarser grid.
        delta_error: absolute numerical error budget included in ``delta`` (FFT, window
            truncation, summation; max over directions).
        discretization: loss-grid spacing d used (0 for the analytic path).
        fft_length: longest FFT used.
        tilts: exponential tilts lambda of the passes that certified each direction.
        relation, theorem, method: the neighbouring relation and what was evaluated how.
        gdp_mu: exact GDP parameter when the mechanism is exactly mu-GDP, else None.
    """

    epsilon: float
    delta: float
    by_direction: tuple
    delta_error: float
    discretization: float
    fft_length: int
    tilts: tuple
    relation: str
    theorem: str
    method: str
    gdp_mu: float | None = None


@dataclass(frozen=True, eq=False)
class PldCurve:
    """The certified eps(delta) curve: ``epsilons[i]`` certified at ``deltas[i]``."""

    deltas: np.ndarray
    epsilons: np.ndarray
    results: tuple
    relation: str
    theorem: str
    gdp_mu: float | None = None


# ------------------------------------------------------------------------------------- Pld


@dataclass(frozen=True, eq=False)
class Pld:
    """The (composed) dominating pair of a mechanism, discretised on demand.

    Build with :func:`pld_gaussian`, :func:`pld_dpsgd` or :func:`pld_compose`; query with
    :meth:`epsilon`, :meth:`delta`, :meth:`curve`.
    """

    steps: tuple
    relation: str
    discretization: float | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def grid(self) -> float:
        """The loss-grid spacing d: ``discretization`` if given, else automatic:
        min(1e-4, 0.5 sqrt(v)) with v the mean per-step variance of the privacy loss (the
        connect-the-dots split adds at most d^2/4 of variance per step, so the composed
        PLD's variance is inflated by at most ~6 %), and at least 1e-7."""
        if self.discretization is not None:
            return self.discretization
        if "grid" not in self._cache:
            self._cache["grid"] = _auto_grid(self.steps)
        return self._cache["grid"]

    # -------------------------------------------------------------------- description

    @property
    def gdp_mu(self) -> float | None:
        """mu with the composition exactly mu-GDP (all steps unsubsampled Gaussians), else
        None.  Gaussian mechanisms compose as mu = sqrt(sum_t mu_t^2) (Dong et al. 2022
        Cor 3.3)."""
        live = [s for s in self.steps if s.count > 0]
        shifts = [s.gaussian_shift for s in live]
        if any(m is None for m in shifts):
            return None
        return math.sqrt(math.fsum(s.count * m * m for s, m in zip(live, shifts)))

    @property
    def theorem(self) -> str:
        parts = []
        for s in self.steps:
            t = s.theorem if s.count == 1 else f"{s.count} x [{s.theorem}]"
            if t not in parts:
                parts.append(t)
        return f"{THEOREM_COMPOSITION} of: " + "; ".join(parts)

    @property
    def symmetric(self) -> bool:
        return all(s.symmetric for s in self.steps if s.count > 0)

    @property
    def total_steps(self) -> int:
        return sum(s.count for s in self.steps)

    def compose(self, *others: Pld) -> Pld:
        return pld_compose(self, *others)

    # --------------------------------------------------------------------- internals

    def _components(self, direction: str, d: float, tail: float = TAIL):
        key = ("comps", direction, d, tail)
        if key not in self._cache:
            comps = []
            for s in self.steps:
                if s.count == 0:
                    continue
                rem, add = s.pmfs(d, tail)
                comps.append(make_component(add if direction == "add" else rem, s.count))
            self._cache[key] = comps
        return self._cache[key]

    def _directions(self):
        return ("symmetric",) if self.symmetric else ("remove", "add")

    def _pass(self, direction, d, lam, tau, tail=TAIL):
        key = ("pass", direction, d, lam, tau, tail)
        if key not in self._cache:
            comps = self._components(direction, d, tail)
            passes = [k for k in self._cache if k[0] == "pass"]
            for k in passes[: max(0, len(passes) - _KEEP_PASSES + 1)]:
                del self._cache[k]  # keep memory bounded (oldest first)
            self._cache[key] = compose_pass(comps, d, lam, tau)
        return self._cache[key]

    def _tail(self, delta: float) -> float:
        """Per-step P-mass left outside the single-step grids for a query at ``delta``:
        ~1e-4 delta / T (a power of ten), so the +inf atoms it creates add <~ 1e-4 delta."""
        x = min(max(1e-4 * delta / max(self.total_steps, 1), 1e-30), 1e-12)
        return 10.0 ** math.floor(math.log10(x))

    def truncation_tail(self, delta: float) -> float:
        """The per-step P-mass a query at ``delta`` leaves outside each step's grid (on the loss +inf, or
        rounded up to the grid's first point): the discrete Gaussian's truncation is sized by it."""
        return self._tail(delta)

    def _with_grid(self, fn):
        """Run fn(d), coarsening the grid (x2 steps) when the FFT would be too long."""
        d = self.grid
        for _ in range(40):
            try:
                return fn(d), d
            except WindowTooLarge as e:
                d = d * 2.0 ** math.ceil(math.log2(e.needed / N_MAX) + 0.1)
        raise RuntimeError("PLD grid could not be coarsened enough")  # pragma: no cover

    def _eps_direction(self, direction, d, delta, lam=None, tail=TAIL):
        """Certified eps of one direction on grid d: (eps, error budget, tilt, FFT length).

        Up to three tilted passes: the first at ``lam`` (default: the saddle-point guess for
        ``delta``), then at the saddle point of the eps found; if the error budget is still
        above 1e-3 delta, steeper tilts while the eps improves. The smallest certified eps
        wins (each pass certifies on its own)."""
        comps = self._components(direction, d, tail)
        tau = min(1e-10, 1e-6 * delta)
        if lam is None:
            lam = saddle_for_delta(comps, delta, d)
        lam = _quantize(lam)
        best = (math.inf, math.inf, lam, 0)
        tried = set()

        def certify(lam):
            tried.add(lam)
            p = self._pass(direction, d, lam, tau, tail)
            return (*p.epsilon_for(delta), lam, p.n_fft), p

        def small_error(r):
            return math.isfinite(r[0]) and r[1] <= 1e-3 * delta

        for _ in range(3):
            if lam in tried:
                break
            r, p = certify(lam)
            if r[0] < best[0]:
                best = r
            if small_error(r):
                break
            if math.isfinite(r[0]):
                lam = _quantize(saddle_point(comps, r[0], d))
            else:
                est = p.epsilon_estimate(delta)
                lam = _quantize(saddle_point(comps, est, d)) if lam == 0.0 else 0.0
        if not small_error(best):
            # The saddle-point guess can be far too small when each step's loss spans only a few
            # grid cells (e.g. sigma 7, q 1e-3, T 3000, delta 1e-11: guess 50, the error budget then
            # takes 98 % of delta; a tilt of 400 certifies 21 % less).
            lam = best[2]
            for _ in range(6):
                lam = _quantize(max(lam, 1.0) * 2.0)
                if lam in tried:
                    continue
                r, _p = certify(lam)
                if not r[0] < best[0]:
                    break
                best = r
                if small_error(r):
                    break
        return best

    def _sized_grid(self, d: float, delta: float) -> float:
        """The automatic grid ``d``, coarsened by a power of two to the scale of the answer.

        Any grid is sound (the connect-the-dots pair dominates at every spacing, and the FFT and
        window errors are bounded and included in delta at every spacing); the spacing only sets
        how tight the certificate is and what it costs.  Rounding each step's losses up to the grid
        moves the composed loss by at most T d, so the grid costs at most about T d of epsilon
        (connect-the-dots is tighter still: measured ~1e-2 of that).  The saddle-point estimate
        of epsilon on the grid SCOUT * d (no FFT: the tilt for delta, then eps_s = K'(tilt), max
        over directions) sizes the grid: the coarsest d 2^k (<= GRID_MAX) with T d 2^k <=
        GRID_SLACK (eps_s - T SCOUT d).  The estimate only picks the spacing; the certificate is
        computed on it as on any grid.  Few steps with a large epsilon (a group of 9 at sigma 0.344: eps ~
        862 after 3 steps) thus get a grid of ~0.2 and an FFT of a few thousand points instead of
        3.5 million; DP-SGD runs of hundreds of steps (T d >> 1e-3 eps) keep the automatic grid.
        An explicit ``discretization`` is never changed."""
        if self.discretization is not None:
            return d
        T = self.total_steps
        ds = d * SCOUT
        tail = self._tail(delta)
        eps_s = 0.0
        for dr in self._directions():
            comps = self._components(dr, ds, tail)
            eps_s = max(eps_s, cumulants(comps, saddle_for_delta(comps, delta, ds), ds)[1])
        lower = eps_s - T * ds
        if not (math.isfinite(lower) and lower > 0.0):
            return d
        k = math.floor(math.log2(min(GRID_SLACK * lower / (T * d), GRID_MAX / d)))
        return d * 2.0**k if k > 0 else d

    def _eps_all(self, d, delta):
        """Per direction (name, eps, error, tilt, FFT length, grid).

        Every direction is first certified on the grid COARSE * d (cheap, pessimistic);
        the worst one is then certified on d with the tilt found; another direction needs
        the fine grid only if its coarse eps exceeds the fine eps of the worst (a certified
        delta at a smaller eps holds at every larger eps)."""
        dirs = self._directions()
        dc = d * COARSE
        tail = self._tail(delta)
        coarse = {}
        for dr in dirs:
            try:
                coarse[dr] = (*self._eps_direction(dr, dc, delta, None, tail), dc)
            except WindowTooLarge:
                coarse[dr] = (math.inf, math.inf, 0.0, 0, dc)
        n_coarse = max(c[3] for c in coarse.values())
        if n_coarse * COARSE > N_MAX:  # the fine grid cannot fit: coarsen now
            raise WindowTooLarge(n_coarse * COARSE)
        order = sorted(dirs, key=lambda dr: -coarse[dr][0])
        out = {}
        bar = -math.inf
        for dr in order:
            c = coarse[dr]
            if dr != order[0] and c[0] <= bar:
                out[dr] = c
                continue
            hint = None
            if math.isfinite(c[0]):
                hint = saddle_point(self._components(dr, d, tail), c[0], d)
            f = (*self._eps_direction(dr, d, delta, hint, tail), d)
            out[dr] = f if f[0] <= c[0] else c
            bar = max(bar, out[dr][0])
        return [(dr, *out[dr]) for dr in dirs]

    # ------------------------------------------------------------------------ queries

    def epsilon(self, delta) -> PldResult:
        """The smallest certified epsilon at ``delta`` (an upper bound on the exact one)."""
        dl = V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        mu = self.gdp_mu
        if mu is not None:
            return _gaussian_epsilon(mu, dl, self)
        if self.total_steps == 0:
            return self._trivial(0.0, 0.0)

        def run(d):
            ds = self._sized_grid(d, dl)
            return self._eps_all(ds, dl), ds

        (rows, d), _ = self._with_grid(run)
        eps = max(r[1] for r in rows)
        return PldResult(
            epsilon=float(eps),
            delta=dl,
            by_direction=tuple((r[0], float(r[1]), float(r[5])) for r in rows),
            delta_error=float(max(r[2] for r in rows)),
            discretization=d,
            fft_length=int(max(r[4] for r in rows)),
            tilts=tuple(float(r[3]) for r in rows),
            relation=self.relation,
            theorem=self.theorem,
            method=METHOD_CTD,
            gdp_mu=None,
        )

    def delta(self, epsilon) -> PldResult:
        """The certified delta at ``epsilon`` (an upper bound on the exact one)."""
        e = V.real("epsilon", epsilon, lo=0.0)
        mu = self.gdp_mu
        if mu is not None:
            dl = _gaussian_delta_upper(mu, e)
            return PldResult(
                epsilon=e,
                delta=dl,
                by_direction=(("analytic", dl),),
                delta_error=0.0,
                discretization=0.0,
                fft_length=0,
                tilts=(),
                relation=self.relation,
                theorem=self.theorem,
                method=METHOD_ANALYTIC,
                gdp_mu=mu,
            )
        if self.total_steps == 0:
            return self._trivial(e, 0.0)

        def run(d):
            rows = []
            for dr in self._directions():
                comps = self._components(dr, d)
                lam = _quantize(saddle_point(comps, e, d))
                best = None
                for lm in [lam, 0.0] if lam > 0 else [0.0]:
                    p = self._pass(dr, d, lm, 1e-30)
                    dlt, err = p.delta_at(e)
                    if best is None or dlt < best[1]:
                        best = (dr, dlt, err, lm, p.n_fft)
                    if math.isfinite(dlt):  # lam = 0 only if eps is below the window
                        break
                rows.append(best)
            return rows

        rows, d = self._with_grid(run)
        dl = min(1.0, max(r[1] for r in rows))
        return PldResult(
            epsilon=e,
            delta=float(dl),
            by_direction=tuple((r[0], float(min(r[1], 1.0))) for r in rows),
            delta_error=float(max(r[2] for r in rows)),
            discretization=d,
            fft_length=int(max(r[4] for r in rows)),
            tilts=tuple(float(r[3]) for r in rows),
            relation=self.relation,
            theorem=self.theorem,
            method=METHOD_CTD,
            gdp_mu=None,
        )

    def curve(self, deltas=None) -> PldCurve:
        """eps(delta) on ``deltas`` (default: 1e-1 ... 1e-12, one point per decade)."""
        ds = np.array([10.0**-k for k in range(1, 13)]) if deltas is None else np.atleast_1d(np.asarray(deltas, float))
        res = tuple(self.epsilon(float(x)) for x in ds)
        return PldCurve(
            deltas=ds,
            epsilons=np.array([r.epsilon for r in res]),
            results=res,
            relation=self.relation,
            theorem=self.theorem,
            gdp_mu=self.gdp_mu,
        )

    def _trivial(self, eps, delta):
        return PldResult(
            epsilon=eps,
            delta=delta,
            by_direction=(("none", eps),),
            delta_error=0.0,
            discretization=self.grid,
            fft_length=0,
            tilts=(),
            relation=self.relation,
            theorem=self.theorem,
            method="no steps",
            gdp_mu=self.gdp_mu,
        )


def _quantize(lam: float) -> float:
    """Tilts on a 2 % geometric grid (any tilt is valid; this lets queries share passes)."""
    if lam <= 1e-3:
        return 0.0
    return float(1.02 ** round(math.log(lam) / math.log(1.02)))


# ------------------------------------------------------------------- the analytic Gaussian


def _gauss_log_delta(mu: float, eps: float) -> float:
    """log of Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (float)."""
    a = -eps / mu + mu / 2.0
    la, lb = special.log_ndtr(a), special.log_ndtr(a - mu)
    r = eps + lb - la
    return float(la + np.log1p(-np.exp(min(r, 0.0)))) if r < 0 else -math.inf


def _gaussian_delta_mp(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP at 40 digits, rounded up to a float."""
    import mpmath as mp

    with mp.workdps(40):
        m, e = mp.mpf(mu), mp.mpf(eps)
        v = mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)
        v = max(v, mp.mpf(0))
        return float(v * (1 + mp.mpf(2) ** -50)) + 1e-320


def _gaussian_delta_upper(mu: float, eps: float) -> float:
    return min(1.0, _gaussian_delta_mp(mu, eps))


def _gaussian_epsilon(mu: float, delta: float, pld: Pld) -> PldResult:
    """The exact eps(delta) of mu-GDP (Dong et al. 2022 Cor 2.13), verified at 40 digits."""
    if mu == 0.0 or _gaussian_delta_mp(mu, 0.0) <= delta:
        eps = 0.0
    else:
        from scipy.optimize import brentq

        target = math.log(delta)
        hi = max(1.0, mu * mu)
        while _gauss_log_delta(mu, hi) > target:
            hi *= 2.0
        eps = brentq(lambda x: _gauss_log_delta(mu, x) - target, 0.0, hi, xtol=1e-14, rtol=1e-13)
        eps = eps * (1 + 1e-12) + 1e-12
        for _ in range(60):
            if _gaussian_delta_mp(mu, eps) <= delta:
                break
            eps = eps * (1 + 1e-9) + 1e-9
    dl = _gaussian_delta_mp(mu, eps)
    return PldResult(
        epsilon=float(eps),
        delta=delta,
        by_direction=(("analytic", float(eps)),),
        delta_error=0.0,
        discretization=0.0,
        fft_length=0,
        tilts=(),
        relation=pld.relation,
        theorem=pld.theorem,
        method=f"{METHOD_ANALYTIC}; delta(eps) = {dl:.6g}",
        gdp_mu=mu,
    )


# --------------------------------------------------------------------------- constructors


def _disc(discretization):
    if discretization is None:
        return None
    return V.real("discretization", discretization, lo=1e-7, hi=1.0)


_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(80)
_GH_W = _GH_W / _GH_W.sum()


def _loss_variance(step: PldStep, direction: str) -> float:
    """Var_P[L] of one step's pair (Gauss-Hermite, 80 nodes per mixture component)."""
    from ._pld_pmf import _g

    if step.kind in PURE_KINDS:
        from ._pld_laplace import laplace_loss_variance

        return laplace_loss_variance(step.shift / step.sigma)
    if step.kind == "discrete_gaussian":
        from ._pld_discrete_gaussian import loss_variance

        return loss_variance(step.sigma, step.shift)
    if step.kind == "approx_dp":
        return step.sigma * step.sigma  # the finite losses are +-eps

    lw = step.log_weights()
    keep = np.isfinite(lw)
    mu = step.shift / step.sigma
    k = np.arange(lw.size, dtype=float)[keep]
    if direction == "remove":
        t, pa, pm = mu * k, lw[keep], mu * k  # P = mixture, L = g(x)
        sign = 1.0
    else:
        t, pa, pm = -mu * k, np.array([0.0]), np.array([0.0])  # P = N(0), L = -g(-x)
        sign = -1.0
    m1 = m2 = 0.0
    for la, m in zip(pa, pm):
        x = m + _GH_X
        L = sign * _g(x, lw[keep], t)
        w = math.exp(la) * _GH_W
        m1 += float(np.sum(w * L))
        m2 += float(np.sum(w * L * L))
    return max(m2 - m1 * m1, 0.0)


def _auto_grid(steps) -> float:
    live = [s for s in steps if s.count > 0]
    if not live:
        return DEFAULT_DISCRETIZATION
    tot = sum(s.count for s in live)
    v = min(sum(s.count * _loss_variance(s, dr) for s in live) / tot for dr in ("remove", "add"))
    d = min(DEFAULT_DISCRETIZATION, 0.5 * math.sqrt(v)) if v > 0 else DEFAULT_DISCRETIZATION
    # a power-of-two fraction of 1e-4 (so nearby parameters share grids), >= 1e-7
    k = max(0, math.ceil(math.log2(DEFAULT_DISCRETIZATION / d))) if d > 0 else 0
    return max(DEFAULT_DISCRETIZATION * 2.0**-k, 1e-7)


def pld_gaussian(sigma, sensitivity=1.0, steps=1, relation="add_remove", discretization=None) -> Pld:
    """The Gaussian mechanism (noise std ``sigma``, L2 ``sensitivity`` under ``relation``)
    composed ``steps`` times."""
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    dl = V.real("sensitivity", sensitivity, lo=0.0, lo_open=True)
    t = V.integer("steps", steps, lo=0)
    if not isinstance(relation, str) or not relation:
        raise ValueError(f"relation must be a non-empty string, got {relation!r}")
    return Pld(steps=(PldStep("gaussian", s, t, 1.0, dl, 1),), relation=relation, discretization=_disc(discretization))


def pld_laplace(scale, sensitivity=1.0, steps=1, discrete=False, discretization=None) -> Pld:
    """The Laplace mechanism (scale b, sensitivity Delta: eps = Delta/b) composed ``steps`` times;
    ``discrete``: the discrete Laplace mechanism (scale t, integer Delta) on integer answers."""
    b = V.real("scale", scale, lo=0.0, lo_open=True)
    dl = V.real("sensitivity", sensitivity, lo=0.0, lo_open=True)
    t = V.integer("steps", steps, lo=0)
    if discrete and not float(dl).is_integer():
        raise ValueError(f"the discrete Laplace sensitivity must be an integer, got {sensitivity!r}")
    kind = "discrete_laplace" if discrete else "laplace"
    return Pld(steps=(PldStep(kind, b, t, 1.0, dl, 1),), relation="add_remove", discretization=_disc(discretization))


def pld_pure(epsilon, steps=1, discretization=None) -> Pld:
    """Any epsilon-DP mechanism, by its dominating pair randomized response (Kairouz, Oh &
    Viswanath 2015 Thm 2.4): the discrete Laplace pair with Delta = 1, t <= 1/epsilon."""
    e = V.real("epsilon", epsilon, lo=0.0, lo_open=True)
    t = 1.0 / math.nextafter(e, math.inf) * (1 - 1e-15)
    return pld_laplace(t, 1, steps, discrete=True, discretization=discretization)


def pld_discrete_gaussian(sigma, sensitivity=1, steps=1, discretization=None) -> Pld:
    """The discrete Gaussian mechanism N_Z(0, sigma^2) on integer answers with integer sensitivity Delta,
    composed ``steps`` times, by its exact pair (``_pld_discrete_gaussian``)."""
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    dl = V.real("sensitivity", sensitivity, lo=1.0)
    if not float(dl).is_integer():
        raise ValueError(f"the discrete Gaussian sensitivity must be an integer, got {sensitivity!r}")
    t = V.integer("steps", steps, lo=0)
    return Pld(
        steps=(PldStep("discrete_gaussian", s, t, 1.0, float(dl), 1),),
        relation="add_remove",
        discretization=_disc(discretization),
    )


def pld_approx_dp(epsilon, delta, steps=1, discretization=None) -> Pld:
    """Any (epsilon, delta)-DP mechanism composed ``steps`` times, by its tightest dominating pair
    (Kairouz, Oh & Viswanath 2015 Thm 2.4; ``_pld_laplace.approx_dp_pmf``)."""
    e = V.real("epsilon", epsilon, lo=0.0, lo_open=True)
    dl = V.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    t = V.integer("steps", steps, lo=0)
    return Pld(
        steps=(PldStep("approx_dp", e, t, 1.0, dl, 1),), relation="add_remove", discretization=_disc(discretization)
    )


def dpsgd_step(sigma, rate, steps, sampling="poisson", group_size=1, dataset_size=None):
    """Validated PldStep and relation of a DP-SGD phase (as :func:`dpspec.accounting.dpsgd_epsilon`)."""
    from .dpsgd import StepSpec

    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    t = V.integer("steps", steps, lo=0)
    spec = StepSpec(rate, sampling, group_size, dataset_size)
    if spec.sampling == "poisson":
        rel = "add_remove" if spec.group_size == 1 else f"add_remove_group_{spec.group_size}"
        step = PldStep("poisson", s, t, spec.rate, 1.0, spec.group_size)
    elif spec.sampling == "wor":
        rel = "add_remove"
        step = PldStep("wor", s, t, spec.rate, 2.0, 1)
    else:
        rel = "substitution"
        step = PldStep("wor_substitution", s, t, spec.rate, 2.0, 1)
    if spec.rate == 0.0:
        step = PldStep(step.kind, s, 0, spec.rate, step.shift, step.group_size)
    return step, rel


def pld_dpsgd(sigma, rate, steps, sampling="poisson", group_size=1, dataset_size=None, discretization=None) -> Pld:
    """DP-SGD with noise multiplier ``sigma``, sampling ``rate`` and ``steps`` steps.

    ``sampling``: "poisson" (add/remove; ``group_size`` K >= 1 for a group of K elements),
    "wor" (fixed batches rate * dataset_size, add/remove, datasets of >= dataset_size
    elements) or "wor_substitution" (fixed batches, substitution, datasets of dataset_size).
    """
    step, rel = dpsgd_step(sigma, rate, steps, sampling, group_size, dataset_size)
    return Pld(steps=(step,), relation=rel, discretization=_disc(discretization))


def pld_compose(*plds: Pld) -> Pld:
    """Adaptive composition (e.g. a ``compose`` block: a Gaussian release then a DP-SGD
    run).  All parts must use the same neighbouring relation; the finest grid is used."""
    if not plds:
        raise ValueError("pld_compose needs at least one Pld")
    for p in plds:
        if not isinstance(p, Pld):
            raise ValueError(f"pld_compose takes Pld arguments, got {type(p).__name__}")
    rels = {p.relation for p in plds}
    if len(rels) > 1:
        raise ValueError(
            "pld_compose: all parts must use the same neighbouring relation, got " + ", ".join(sorted(rels))
        )
    steps = tuple(s for p in plds for s in p.steps)
    given = [p.discretization for p in plds if p.discretization is not None]
    return Pld(steps=steps, relation=plds[0].relation, discretization=min(given) if given else None)


def pld_epsilon(
    sigma, rate, steps, delta, sampling="poisson", group_size=1, dataset_size=None, discretization=None
) -> float:
    """Certified epsilon of DP-SGD at ``delta`` by PLD accounting (see :func:`pld_dpsgd`)."""
    return pld_dpsgd(sigma, rate, steps, sampling, group_size, dataset_size, discretization).epsilon(delta).epsilon
