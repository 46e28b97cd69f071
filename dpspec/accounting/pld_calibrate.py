"""Noise calibration with PLD accounting: the smallest sigma whose certified epsilon meets
an (epsilon, delta) target.

Contract of :func:`calibrate_pld_sigma` (the same shape as
:func:`dpspec.accounting.calibrate_dpsgd_sigma`):

* the returned sigma is the upper end ``hi`` of a final bracket [lo, hi] with
  hi / lo - 1 <= ``SIGMA_RTOL`` (1e-3) where the certified PLD epsilon (on the requested
  grid, or the automatic one: :meth:`dpspec.accounting.pld.Pld.epsilon`) is <= the target
  at ``hi`` and > the target at ``lo``; so the result never exceeds the target and is at
  most 0.1 % above the smallest sigma certifiable that way;
* sigma is searched in [``SIGMA_MIN``, ``SIGMA_MAX``] = [1e-2, 1e6]; an unreachable target
  (sigma > 1e6 needed), a trivial one (met at sigma = 1e-2), rate = 0 or steps = 0 raise
  ValueError.

Speed: a secant search in (log sigma, log eps) on a grid 8x coarser (each probe is a
certified upper bound, so the coarse root is already admissible), then a few probes on the
requested grid near it.  The starting point is the central-limit (GDP) approximation
mu = q sqrt(T (e^{1/sigma^2} - 1)), which is only used to start the search.
"""

from __future__ import annotations

import math

from . import _validate as V
from .pld import COARSE, DEFAULT_DISCRETIZATION, _disc, _gauss_log_delta, dpsgd_step, pld_dpsgd

SIGMA_RTOL = 1e-3
SIGMA_MIN = 1e-2
SIGMA_MAX = 1e6
_COARSE_RTOL = 1e-2
_MAX_PROBES = 120


def _gdp_mu_for(target: float, delta: float) -> float:
    """mu with the mu-GDP epsilon at ``delta`` equal to ``target`` (bisection)."""
    lo, hi = 1e-6, 1.0
    while _gauss_log_delta(hi, target) < math.log(delta) and hi < 1e6:
        hi *= 2.0
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if _gauss_log_delta(mid, target) < math.log(delta):
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.0001:
            break
    return math.sqrt(lo * hi)


def _initial_sigma(step, steps: int, delta: float, target: float) -> float:
    mu = _gdp_mu_for(target, delta)
    q = min(1.0, step.rate * step.group_size)
    shift = step.shift
    if q >= 1.0:
        s = shift * step.group_size * math.sqrt(steps) / mu
    else:
        x = mu * mu / (q * q * steps)
        s = shift / math.sqrt(math.log1p(x))
    return min(max(s, 2 * SIGMA_MIN), SIGMA_MAX / 2)


class _Probe:
    def __init__(self, rate, steps, delta, target, sampling, group_size, dataset_size):
        self.args = (rate, steps, sampling, group_size, dataset_size)
        self.delta, self.target = delta, target
        self.log_target = math.log(target)
        self.calls = 0

    def f(self, u: float, d: float) -> float:
        """log eps(e^u) - log target on grid d; the sign is exact (eps > target)."""
        self.calls += 1
        rate, steps, sampling, k, n = self.args
        eps = pld_dpsgd(math.exp(u), rate, steps, sampling, k, n, d).epsilon(self.delta).epsilon
        if not math.isfinite(eps):
            return math.inf
        f = math.log(max(eps, 1e-300)) - self.log_target
        return max(f, 1e-300) if eps > self.target else min(f, 0.0)


def _bracket(probe: _Probe, u0: float, d: float, u_min: float, u_max: float, target, dl):
    """(lo, hi) with f(lo) > 0 >= f(hi) by secant steps in log-log from u0."""
    f0 = probe.f(u0, d)
    lo = (u0, f0) if f0 > 0 else None
    hi = None if f0 > 0 else (u0, f0)
    prev, slope = (u0, f0), -1.5
    while lo is None or hi is None:
        if math.isfinite(prev[1]) and prev[1] > -50:
            step = min(max(-prev[1] / slope * 1.1, -3.0), 3.0)
        else:
            step = -1.0 if prev[1] <= 0 else 1.0
        if abs(step) < 0.005:
            step = math.copysign(0.005, step if step else 1.0)
        u = min(max(prev[0] + step, u_min), u_max)
        if u == prev[0]:
            if u >= u_max:
                raise ValueError(
                    f"target_epsilon={target:g} is unreachable: even "
                    f"sigma={SIGMA_MAX:g} gives epsilon > target (delta={dl:g})"
                )
            raise ValueError(
                f"target_epsilon={target:g} is met already by sigma={SIGMA_MIN:g}; "
                "calibration below that noise level is not supported"
            )
        fu = probe.f(u, d)
        if math.isfinite(fu) and math.isfinite(prev[1]) and fu != prev[1] and fu > -50 and prev[1] > -50:
            s = (fu - prev[1]) / (u - prev[0])
            slope = s if s < -0.05 else slope
        prev = (u, fu)
        if fu > 0:
            lo = prev if lo is None or u > lo[0] else lo
        else:
            hi = prev if hi is None or u < hi[0] else hi
    return lo, hi


def _shrink(probe: _Probe, lo, hi, d: float, tol: float):
    """Illinois regula falsi on [lo, hi] until hi - lo <= tol (log sigma): when the same
    end moves twice in a row, the other end's value is halved."""
    moved, streak = None, 0
    for _ in range(_MAX_PROBES):
        width = hi[0] - lo[0]
        if width <= tol:
            return lo, hi
        flo, fhi = lo[1], hi[1]
        if streak >= 2:
            if moved == "lo":
                fhi *= 0.5 ** (streak - 1)
            else:
                flo *= 0.5 ** (streak - 1)
        if width >= 4 * tol and math.isfinite(flo) and math.isfinite(fhi) and flo - fhi > 0 and fhi > -50:
            u = lo[0] + flo * width / (flo - fhi)
            u = min(max(u, lo[0] + 0.05 * width), hi[0] - 0.05 * width)
        else:
            u = lo[0] + 0.5 * width
        fu = probe.f(u, d)
        side = "lo" if fu > 0 else "hi"
        streak = streak + 1 if side == moved else 1
        moved = side
        if fu > 0:
            lo = (u, fu)
        else:
            hi = (u, fu)
    raise RuntimeError("calibrate_pld_sigma did not converge")  # pragma: no cover


def calibrate_pld_sigma(
    target_epsilon, delta, rate, steps, sampling="poisson", group_size=1, dataset_size=None, discretization=None
) -> float:
    """Smallest noise multiplier (within relative 1e-3) whose certified PLD epsilon is
    <= ``target_epsilon`` at ``delta``; never above the target (see the module docstring)."""
    target = V.real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    dl = V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    t = V.integer("steps", steps, lo=0)
    step, _ = dpsgd_step(1.0, rate, t, sampling, group_size, dataset_size)
    if step.rate == 0.0 or t == 0:
        raise ValueError("rate = 0 or steps = 0: epsilon is 0 for every sigma, there is no smallest sigma to calibrate")
    d = _disc(discretization)
    probe = _Probe(rate, t, dl, target, sampling, group_size, dataset_size)
    u_min, u_max = math.log(SIGMA_MIN), math.log(SIGMA_MAX)
    u0 = math.log(_initial_sigma(step, t, dl, target))
    # phase 1: coarse grid, to 1 % in sigma (d = None: the automatic grid in phase 2)
    dc = min((d if d is not None else DEFAULT_DISCRETIZATION) * COARSE, 1.0)
    lo, hi = _bracket(probe, u0, dc, u_min, u_max, target, dl)
    lo, hi = _shrink(probe, lo, hi, dc, math.log1p(_COARSE_RTOL))
    # phase 2: the requested grid.  eps_fine <= eps_coarse, so the fine root is <= hi.
    tol = math.log1p(SIGMA_RTOL)
    fh = probe.f(hi[0], d)
    hi_f = (hi[0], fh)
    if fh > 0:  # not expected (fine is tighter); search upwards
        lo_f, hi_f = _bracket(probe, hi[0], d, u_min, u_max, target, dl)
    else:
        # secant estimate of the fine root from the coarse slope, landing just below it
        slope = (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] > lo[0] and lo[1] - hi[1] > 0 and hi[1] > -50 else -1.5
        slope = min(slope, -0.05)
        u = hi[0] + (fh / slope if fh > -50 else -0.05) - 0.5 * tol
        lo_f = None
        for _ in range(8):
            u = max(u, u_min)
            fu = probe.f(u, d)
            if fu > 0:
                lo_f = (u, fu)
                break
            hi_f = (u, fu)
            u = u - max(2 * (hi[0] - u), 4 * tol)
        if lo_f is None:
            lo_f, hi_f = _bracket(probe, hi_f[0], d, u_min, u_max, target, dl)
    lo_f, hi_f = _shrink(probe, lo_f, hi_f, d, tol)
    return float(math.exp(hi_f[0]))
