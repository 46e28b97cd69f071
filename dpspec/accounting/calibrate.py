"""Noise calibration: the smallest noise multiplier meeting an (epsilon, delta) target.

The certified epsilon is non-increasing in sigma, so the answer is found by a
bracketing root search on log sigma.  Contract of :func:`calibrate_dpsgd_sigma`:

* the returned sigma is the upper end ``hi`` of a final bracket [lo, hi] with
  hi / lo - 1 <= ``SIGMA_RTOL`` (1e-4), where
  ``dpsgd_epsilon(hi) <= target`` and ``dpsgd_epsilon(lo) > target`` -- both
  checked on the full :data:`DEFAULT_ALPHAS` grid -- so the result is never above
  the target and at most 0.01 % larger than the smallest admissible sigma;
* sigma is searched in [``SIGMA_MIN``, ``SIGMA_MAX``] = [1e-2, 1e6]; a target
  that is unreachable (needs sigma > 1e6) or trivial (met by sigma = 1e-2)
  raises ValueError.

Speed: most probes evaluate only a window of orders around the current optimal
order.  Dropping orders can only increase epsilon (the conversion minimises over
the grid), so a probe that meets the target on the window meets it on the full
grid; probes that fail are re-checked on the full grid at the end.
"""

from __future__ import annotations

import math

from . import _validate as V
from .curve import DEFAULT_ALPHAS
from .dpsgd import StepSpec, epsilon_on

SIGMA_RTOL = 1e-4
SIGMA_MIN = 1e-2
SIGMA_MAX = 1e6
_WINDOW = 12  # orders kept on each side of the current optimal order
_MAX_PROBES = 200


class _Objective:
    """f(u) = log eps(e^u) - log target on a moving window of orders."""

    def __init__(self, spec, steps, delta, target):
        self.spec, self.steps, self.delta = spec, steps, delta
        self.target = target
        self.log_target = math.log(target)
        self.grid = DEFAULT_ALPHAS
        self.center = None
        self.calls = 0
        # cleared once the window has hidden the optimal order (e.g. eps = 0 exactly from an
        # order far from the centre): every later probe then looks at all orders
        self.use_window = True

    def _f(self, eps: float) -> float:
        f = math.log(max(eps, 1e-300)) - self.log_target
        # the sign must agree with eps > target exactly, whatever the log rounding does
        return max(f, 1e-300) if eps > self.target else min(f, 0.0)

    def full(self, u: float) -> float:
        self.calls += 1
        eps, idx = epsilon_on(self.spec, math.exp(u), self.steps, self.delta, self.grid)
        self.center = idx
        return self._f(eps)

    def fast(self, u: float) -> float:
        if self.center is None or not self.use_window:
            return self.full(u)
        n = self.grid.size
        lo, hi = max(0, self.center - _WINDOW), min(n, self.center + _WINDOW + 1)
        self.calls += 1
        eps, i = epsilon_on(self.spec, math.exp(u), self.steps, self.delta, self.grid[lo:hi])
        if (i == 0 and lo > 0) or (i == hi - lo - 1 and hi < n):
            return self.full(u)  # optimum at the window edge: look at every order
        self.center = lo + i
        return self._f(eps)


def _initial_guess(spec: StepSpec, steps: int, delta: float, target: float) -> float:
    """Small-rate Gaussian approximation eps ~ q sqrt(2 T (e^{1/s^2} - 1) log(1/delta))."""
    q = min(1.0, spec.rate * spec.group_size)
    scale = 2.0 if spec.sampling != "poisson" else 1.0
    x = target * target / (2.0 * steps * q * q * math.log(1.0 / delta))
    return min(max(scale / math.sqrt(math.log1p(x)), 2 * SIGMA_MIN), SIGMA_MAX / 2)


def calibrate_dpsgd_sigma(
    target_epsilon, delta, rate, steps, sampling="poisson", group_size=1, dataset_size=None
) -> float:
    """Smallest noise multiplier (within relative 1e-4) whose certified epsilon
    (:func:`dpsgd_epsilon`) is <= ``target_epsilon``; never above the target.

    Raises ValueError for invalid inputs, for rate = 0 or steps = 0 (no noise is
    needed), and when the target cannot be met with sigma <= 1e6 or is already
    met with sigma = 1e-2.
    """
    target = V.real("target_epsilon", target_epsilon, lo=0.0, lo_open=True)
    d = V.real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    t = V.integer("steps", steps, lo=0)
    spec = StepSpec(rate, sampling, group_size, dataset_size)
    if spec.rate == 0.0 or t == 0:
        raise ValueError("rate = 0 or steps = 0: epsilon is 0 for every sigma, there is no smallest sigma to calibrate")
    obj = _Objective(spec, t, d, target)
    u_min, u_max = math.log(SIGMA_MIN), math.log(SIGMA_MAX)

    # --- phase 1: bracket [lo, hi] with f(lo) > 0 >= f(hi), secant steps in log-log ---
    u = math.log(_initial_guess(spec, t, d, target))
    f = obj.full(u)
    lo = hi = None
    (lo, hi) = ((u, f), None) if f > 0 else (None, (u, f))
    slope, prev = -1.5, (u, f)
    while lo is None or hi is None:
        step = min(max(-prev[1] / slope * 1.1, -3.0), 3.0)
        step = step if abs(step) >= 0.01 else math.copysign(0.01, step if step else 1.0)
        u_new = min(max(prev[0] + step, u_min), u_max)
        if u_new == prev[0]:
            if u_new >= u_max:
                raise ValueError(
                    f"target_epsilon={target:g} is unreachable: even sigma={SIGMA_MAX:g} gives "
                    f"epsilon > target (delta={d:g}, rate={spec.rate:g}, steps={t})"
                )
            raise ValueError(
                f"target_epsilon={target:g} is met already by sigma={SIGMA_MIN:g}; "
                "calibration below that noise level is not supported"
            )
        f_new = obj.fast(u_new)
        if math.isfinite(f_new) and math.isfinite(prev[1]) and f_new != prev[1]:
            s = (f_new - prev[1]) / (u_new - prev[0])
            slope = s if s < -0.05 else slope
        prev = (u_new, f_new)
        if f_new > 0:
            lo = prev if lo is None or prev[0] > lo[0] else lo
        else:
            hi = prev if hi is None or prev[0] < hi[0] else hi

    # --- phase 2: shrink to hi/lo <= 1 + rtol; probes straddle the secant estimate ---
    tol = math.log1p(SIGMA_RTOL)
    last_side, streak = None, 0  # the same end moving again and again: the secant stalls
    for _ in range(_MAX_PROBES):
        width = hi[0] - lo[0]
        if width <= tol:
            # the window may have hidden the optimum at lo: confirm on all orders
            f_lo = obj.full(lo[0])
            if f_lo > 0:
                break
            obj.use_window = False
            hi, lo = (lo[0], f_lo), _extend_down(obj, lo[0], u_min, target, d)
            last_side, streak = None, 0
            continue
        # Secant on (log sigma, log eps) unless it is uninformative: eps = 0 at hi gives
        # f(hi) ~ -690, which pins the secant to lo and shrinks the bracket by only ~tol per
        # probe; likewise when one end has moved twice in a row.  Bisect then.
        informative = abs(lo[1]) < 50.0 and abs(hi[1]) < 50.0 and streak < 2
        if width > 8 * tol and informative and math.isfinite(lo[1]) and math.isfinite(hi[1]) and lo[1] != hi[1]:
            u_s = lo[0] + lo[1] * width / (lo[1] - hi[1])
        else:
            u_s = lo[0] + 0.5 * width
        u1 = min(max(u_s + 0.45 * tol, lo[0] + 0.05 * tol), hi[0] - 0.05 * tol)
        f1 = obj.fast(u1)
        if f1 > 0:
            lo = (u1, f1)
            streak, last_side = (streak + 1 if last_side == "lo" else 1), "lo"
            continue
        hi = (u1, f1)
        streak, last_side = (streak + 1 if last_side == "hi" else 1), "hi"
        u2 = u1 - 0.9 * tol
        if u2 > lo[0]:
            f2 = obj.fast(u2)
            if f2 > 0:
                lo = (u2, f2)
                streak, last_side = 0, None  # the probes straddled the root
            else:
                hi = (u2, f2)
    else:  # pragma: no cover - the bracket shrinks geometrically
        raise RuntimeError("calibrate_dpsgd_sigma did not converge")
    # hi was accepted on a sub-grid (an upper bound on the full-grid epsilon), so it is safe.
    return float(math.exp(hi[0]))


def _extend_down(obj: _Objective, u: float, u_min: float, target: float, d: float):
    """Find lo < u with f(lo) > 0 on the full grid (rarely needed)."""
    step = 0.01
    while True:
        u_new = max(u - step, u_min)
        f_new = obj.full(u_new)
        if f_new > 0:
            return (u_new, f_new)
        if u_new <= u_min:
            raise ValueError(
                f"target_epsilon={target:g} is met already by sigma={SIGMA_MIN:g}; "
                "calibration below that noise level is not supported"
            )
        u, step = u_new, step * 2
