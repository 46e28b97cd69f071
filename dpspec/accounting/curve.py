"""RDP curves, (epsilon, delta) results, the default order grid and composition.

An :class:`RdpCurve` is what a certificate records: the order grid, the certified
per-order RDP values, the theorem and evaluation method, and the numerical error.

Invariant (every constructor in this package maintains it): for every order,

    exact(alpha) <= rdp[alpha] <= exact(alpha) + abs_errors[alpha],

where exact(alpha) is the exact value of the cited bound.  Values are rounded *up*
by the numerical error bound, so a certified value is never below the bound it
claims to evaluate.  ``inf`` appears only where the bound is infinite or where no
finite bound could be certified.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _validate as V

#: Default RDP orders (225 points).  Fine near 1 (1.01 ... 1.09 in steps of 0.01,
#: then 0.05 up to 2.95 and 0.1 up to 10.9) because the optimal order for large
#: epsilon targets lies in (1, 3); every integer 11 ... 64; then 68 ... 128 (step 4),
#: 144 ... 256 (step 16) and 20 integer points spaced by 2^(1/4) from 304 to 8192,
#: for very private settings (sigma >= 5, small rates) whose optimal order is in the
#: hundreds or thousands.  Orders <= 10.9 that are not integers use quadrature.
DEFAULT_ALPHAS = np.concatenate(
    [
        1.0 + np.arange(1, 10) / 100.0,
        1.0 + np.arange(10, 200, 5) / 100.0,
        np.arange(30, 110) / 10.0,
        np.arange(11, 65, dtype=float),
        np.arange(68, 129, 4, dtype=float),
        np.arange(144, 257, 16, dtype=float),
        np.round(256.0 * 2.0 ** (np.arange(1, 21) / 4.0)),
    ]
)
DEFAULT_ALPHAS.setflags(write=False)


def _frozen(a) -> np.ndarray:
    out = np.array(a, dtype=float, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class RdpCurve:
    """Certified RDP upper bounds on an order grid.

    Attributes:
        alphas: the orders (> 1), increasing.
        rdp: certified upper bounds on the RDP at each order (total over all steps).
        theorem: the theorem(s) whose bound is evaluated, e.g.
            ``"Schuchardt et al. 2024 Thm 4.2 (tight group amplification)"``.
        method: how it was evaluated (exact sum / quadrature, with tolerances).
        abs_error: max over orders with finite rdp of ``abs_errors``.
        abs_errors: per order, 0 <= rdp - exact <= abs_errors.
        sources: per order, which bound or direction attained the value
            (e.g. ``"removal"``, ``"insertion"``, ``"wang2019_thm9"``).
    """

    alphas: np.ndarray
    rdp: np.ndarray
    theorem: str
    method: str
    abs_error: float
    abs_errors: np.ndarray = field(default=None)  # type: ignore[arg-type]
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "alphas", _frozen(self.alphas))
        object.__setattr__(self, "rdp", _frozen(self.rdp))
        errs = np.full(self.alphas.shape, self.abs_error) if self.abs_errors is None else self.abs_errors
        object.__setattr__(self, "abs_errors", _frozen(errs))
        if not (self.alphas.shape == self.rdp.shape == self.abs_errors.shape):
            raise ValueError("alphas, rdp and abs_errors must have the same shape")
        if self.sources and len(self.sources) != self.alphas.size:
            raise ValueError("sources must have one entry per order")
        if np.any(np.isnan(self.rdp)) or np.any(self.rdp < 0):
            raise ValueError("rdp values must be >= 0 (inf allowed, NaN not)")

    def scaled(self, steps: int) -> RdpCurve:
        """The curve of ``steps`` adaptive compositions (RDP adds, Mironov 2017 Prop 1)."""
        steps = V.integer("steps", steps, lo=0)
        return _make(
            self.alphas,
            self.rdp * steps,
            self.abs_errors * steps + 4e-16 * self.rdp * steps,
            self.theorem if steps == 1 else f"{steps} x [{self.theorem}] (RDP composition, Mironov 2017 Prop 1)",
            self.method,
            self.sources,
        )


@dataclass(frozen=True, eq=False)
class DpResult:
    """An (epsilon, delta)-DP guarantee obtained from an RDP curve.

    Attributes:
        epsilon: certified epsilon (>= 0).
        delta: the delta it holds for.
        best_alpha: the order attaining the minimum in the conversion.
        curve: the RDP curve converted.
        conversion: the conversion theorem, e.g. ``"Balle et al. 2020 Thm 21"``.
        at_grid_edge: True if best_alpha is the smallest or largest order of the
            grid (a wider grid might give a smaller epsilon).
    """

    epsilon: float
    delta: float
    best_alpha: float
    curve: RdpCurve
    conversion: str
    at_grid_edge: bool = False


def _make(alphas, rdp, errs, theorem, method, sources=()) -> RdpCurve:
    rdp = np.asarray(rdp, float)
    errs = np.asarray(errs, float)
    finite = np.isfinite(rdp)
    abs_error = float(np.max(errs[finite])) if np.any(finite) else float("inf")
    return RdpCurve(
        alphas=alphas,
        rdp=rdp,
        theorem=theorem,
        method=method,
        abs_error=abs_error,
        abs_errors=errs,
        sources=tuple(sources),
    )


def compose(*curves: RdpCurve) -> RdpCurve:
    """Adaptive composition of heterogeneous phases: RDP adds per order
    (Mironov 2017 Prop 1).  All curves must share the same order grid."""
    if not curves:
        raise ValueError("compose needs at least one curve")
    for c in curves:
        if not isinstance(c, RdpCurve):
            raise ValueError(f"compose takes RdpCurve arguments, got {type(c).__name__}")
    alphas = curves[0].alphas
    for c in curves[1:]:
        if c.alphas.shape != alphas.shape or not np.array_equal(c.alphas, alphas):
            raise ValueError("compose: all curves must use the same alphas grid")
    if len(curves) == 1:
        return curves[0]
    rdp = np.sum([c.rdp for c in curves], axis=0)
    # float addition of n non-negative terms: relative rounding <= n ulp
    errs = np.sum([c.abs_errors for c in curves], axis=0) + len(curves) * 2.3e-16 * rdp
    rdp = rdp + len(curves) * 2.3e-16 * rdp
    theorem = "RDP composition (Mironov 2017 Prop 1) of: " + "; ".join(f"[{c.theorem}]" for c in curves)
    methods = sorted({c.method for c in curves})
    return _make(alphas, rdp, errs, theorem, " | ".join(methods))
