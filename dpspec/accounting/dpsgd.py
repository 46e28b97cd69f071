"""DP-SGD accounting: per-step RDP curve x steps, then conversion.

``sigma`` is the noise multiplier (noise std / per-example clip norm C) and
``rate`` the sampling fraction per step.  ``sampling``:

* ``"poisson"`` -- Poisson sampling with rate ``rate``; add/remove of one element
  (``group_size=1``, Mironov-Talwar-Zhang 2019 §3.3) or of a group of
  ``group_size`` elements (Schuchardt et al. 2024 Thm 4.2).
* ``"wor"`` -- fixed-size batches of rate * dataset_size drawn without replacement,
  add/remove relation, ``dataset_size`` = minimum dataset size (Schuchardt et al.
  2024 Thm F.3).
* ``"wor_substitution"`` -- as ``"wor"`` with the substitution (replace-one)
  relation on datasets of size ``dataset_size`` (see ``wor.py``).

The three differ in the neighbouring relation; a certificate must name it (the
curve's ``theorem`` does).
"""

from __future__ import annotations

import numpy as np

from . import _validate as V
from .conversion import convert, dp_from_curve
from .curve import DEFAULT_ALPHAS, RdpCurve, _make
from .group import METHOD_GROUP, THEOREM_GROUP
from .poisson import METHOD_SGM, THEOREM_SGM, Evaluated, poisson_gaussian_curve
from .wor import THEOREM_WOR_ADD_REMOVE, THEOREM_WOR_SUBSTITUTION, wor_gaussian_curve

SAMPLINGS = ("poisson", "wor", "wor_substitution")
METHOD_WOR_SUB = (
    "Wang Thm 9: exact positive-term sum (integer alpha), convex "
    "interpolation of log Psi (real alpha); two-mixture: trapezoid quadrature "
    "of E[Q g(P/Q-1)] with step-halving error estimate x10 and tail bounds"
)


class StepSpec:
    """Validated DP-SGD parameters (everything except sigma and steps)."""

    __slots__ = ("rate", "sampling", "group_size", "dataset_size")

    def __init__(self, rate, sampling, group_size, dataset_size):
        self.sampling = V.choice("sampling", sampling, SAMPLINGS)
        self.rate = V.real("rate", rate, lo=0.0, hi=1.0)
        self.group_size = V.integer("group_size", group_size, lo=1)
        self.dataset_size = None
        if self.sampling != "poisson":
            if self.group_size != 1:
                raise ValueError(
                    f"group_size > 1 is supported only with sampling='poisson' (got sampling={self.sampling!r})"
                )
            if dataset_size is None:
                raise ValueError(f"dataset_size is required for sampling={self.sampling!r}")
            n = V.integer("dataset_size", dataset_size, lo=2)
            batch = self.rate * n
            if abs(batch - round(batch)) > 1e-9 * max(1.0, batch) or round(batch) < 1:
                raise ValueError(
                    f"rate * dataset_size must be a positive integer batch size "
                    f"for sampling={self.sampling!r}, got {batch!r}"
                )
            hi = n - 1 if self.sampling == "wor" else n
            if round(batch) > hi:
                raise ValueError(
                    f"batch size rate * dataset_size must be <= {hi} for sampling={self.sampling!r}, got {round(batch)}"
                )
            self.dataset_size = n
            self.rate = round(batch) / n

    def theorem(self) -> str:
        if self.sampling == "poisson":
            return THEOREM_SGM if self.group_size == 1 else f"{THEOREM_GROUP}, group size {self.group_size}"
        return THEOREM_WOR_ADD_REMOVE if self.sampling == "wor" else THEOREM_WOR_SUBSTITUTION

    def method(self) -> str:
        if self.sampling == "wor_substitution":
            return METHOD_WOR_SUB
        return METHOD_GROUP if self.group_size > 1 else METHOD_SGM

    def evaluate(self, alphas: np.ndarray, sigma: float) -> Evaluated:
        """Certified per-step RDP on the given orders."""
        if self.sampling == "poisson":
            return poisson_gaussian_curve(alphas, sigma, self.rate, self.group_size)
        relation = "add_remove" if self.sampling == "wor" else "substitution"
        return wor_gaussian_curve(alphas, sigma, self.rate, relation)


def _check_common(sigma, steps):
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    t = V.integer("steps", steps, lo=0)
    return s, t


def dpsgd_rdp_curve(sigma, rate, steps, sampling="poisson", group_size=1, dataset_size=None, alphas=None) -> RdpCurve:
    """Certified RDP curve of ``steps`` DP-SGD steps (RDP adds over steps,
    Mironov 2017 Prop 1) on ``alphas`` (default :data:`DEFAULT_ALPHAS`)."""
    s, t = _check_common(sigma, steps)
    spec = StepSpec(rate, sampling, group_size, dataset_size)
    a = DEFAULT_ALPHAS if alphas is None else np.sort(V.alphas("alphas", alphas))
    ev = spec.evaluate(a, s)
    rdp = ev.rdp * t * (1 + 4e-16)
    err = ev.err * t + 8e-16 * rdp
    theorem = spec.theorem() if t == 1 else f"{t} x [{spec.theorem()}] (RDP composition, Mironov 2017 Prop 1)"
    return _make(a, rdp, err, theorem, spec.method(), ev.sources)


def dpsgd_epsilon(sigma, rate, steps, delta, sampling="poisson", group_size=1, dataset_size=None) -> float:
    """Certified epsilon of ``steps`` DP-SGD steps at ``delta`` (Balle et al. 2020
    Thm 21 over :data:`DEFAULT_ALPHAS`)."""
    return dp_from_curve(dpsgd_rdp_curve(sigma, rate, steps, sampling, group_size, dataset_size), delta).epsilon


def epsilon_on(spec: StepSpec, sigma: float, steps: int, delta: float, alphas: np.ndarray) -> tuple[float, int]:
    """Fast path for calibration: (epsilon, index of best order) on a sub-grid."""
    ev = spec.evaluate(alphas, sigma)
    eps, _, idx = convert(alphas, ev.rdp * steps * (1 + 4e-16), delta)
    return eps, idx
