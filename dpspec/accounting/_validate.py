"""Private input validation: every public function raises ValueError naming the
parameter and its valid range instead of returning NaN or a meaningless value."""

from __future__ import annotations

import math
import numbers

import numpy as np


def real(
    name: str, x, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False
) -> float:
    """A finite real in the given range."""
    if isinstance(x, bool) or not isinstance(x, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a real number, got {x!r}")
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    bad = (lo is not None and (v < lo or (lo_open and v == lo))) or (
        hi is not None and (v > hi or (hi_open and v == hi))
    )
    if bad:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf" if hi is None else f"{hi:g}"
        raise ValueError(f"{name} must be in {left}{lo_s}, {hi_s}{right}, got {v}")
    return v


def integer(name: str, x, *, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (int, numpy integer, or a float with an integral value)."""
    if isinstance(x, bool):
        raise ValueError(f"{name} must be an integer, got {x!r}")
    if isinstance(x, (numbers.Integral, np.integer)):
        v = int(x)
    elif isinstance(x, (numbers.Real, np.floating)) and math.isfinite(float(x)) and float(x).is_integer():
        v = int(float(x))
    else:
        raise ValueError(f"{name} must be an integer, got {x!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        lo_s = "-inf" if lo is None else str(lo)
        hi_s = "inf" if hi is None else str(hi)
        raise ValueError(f"{name} must be an integer in [{lo_s}, {hi_s}], got {v}")
    return v


def alphas(name: str, x) -> np.ndarray:
    """Orders: finite reals > 1 (scalar or 1-D array)."""
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number > 1 or an array of them") from exc
    if a.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {a.shape}")
    a = np.atleast_1d(a)
    if a.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(a)) or np.any(a <= 1.0):
        bad = a[~np.isfinite(a) | (a <= 1.0)][0]
        raise ValueError(f"{name} must be finite reals > 1 (RDP orders), got {bad}")
    return a


def choice(name: str, x, options: tuple[str, ...]) -> str:
    if x not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}, got {x!r}")
    return x
