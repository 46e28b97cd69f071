"""The public surface a mechanism family's compile step builds its certificate entry with.

A family's ``compile.py`` (``dpspec/families/<family>/``) imports from here and from
``dpspec.certificate.model`` only; both are stable and documented (docs/extending.md). The names
here are the shared compile helpers under their public names, so that the helpers can be
reorganised without breaking a family.

- :func:`protected_record` — the certificate's ``protected`` record for a target (and the unit's
  definition and its IR unit);
- :func:`notion_record`, :func:`target_record` — the certified notion and the target as the spec
  states it;
- :func:`alpha_grid`, :func:`grid_text` — the Rényi orders every part of a spec shares, and how the
  certificate describes them;
- :func:`rdp_to_dp` — the RDP → (ε, δ) conversion every certificate uses (Balle et al. 2020, Thm 21);
- :func:`reported_deltas` — the δ values a certificate reports ε at;
- :func:`certified_epsilon` — the certified ε floor (never 0 for a nonzero sensitivity);
- :func:`smallest_noise` — the smallest noise for which a decreasing bound meets a target;
- :class:`CompiledTarget` — what a compile function returns;
- :class:`CompileError`, :func:`fail` — refusing a target with a located diagnostic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpspec.certificate.model import Notion, Protected
from dpspec.compiler import common as _common
from dpspec.compiler.common import (
    EXTRA_DELTAS,
    MAGNITUDE_RANGE,
    CompiledTarget,
    certified_epsilon,
    composed_protected,
)
from dpspec.compiler.errors import CompileError, fail

if TYPE_CHECKING:
    from dpspec.check.framework import Context
    from dpspec.ir import models as ir

__all__ = [
    "EXTRA_DELTAS",
    "MAGNITUDE_RANGE",
    "CompileError",
    "CompiledTarget",
    "alpha_grid",
    "certified_epsilon",
    "composed_protected",
    "fail",
    "grid_text",
    "notion_record",
    "protected_record",
    "rdp_at",
    "rdp_to_dp",
    "reported_deltas",
    "smallest_noise",
    "target_record",
]


def protected_record(ctx: Context, target: Any) -> tuple[Protected, Any, Any]:
    """``(protected, definition, unit)``: the certificate's record of what ``target`` protects."""
    return _common._protected(ctx, target)


def notion_record(guarantee: Any) -> Notion:
    """The certified notion of a guarantee (``approximate_dp``, ``renyi_dp``, the SRPP flavours)."""
    return _common._notion(guarantee)


def target_record(guarantee: Any) -> dict:
    """The target as the spec states it: ``{"notion": …, "epsilon": …, "delta": …, "alpha": …}``."""
    return _common._target(guarantee)


def alpha_grid(spec: ir.SpecIR | None = None) -> np.ndarray:
    """The default Rényi orders plus every order a guarantee of ``spec`` names (shared by all parts)."""
    return _common._alpha_grid(spec)


def grid_text(alphas: np.ndarray) -> str:
    """How a certificate's ``numerics.alpha_grid`` describes the orders."""
    return _common._grid_text(alphas)


def rdp_at(alphas: Any, rdp: Any, alpha: float) -> float:
    """ε(α) at an order that is on the grid."""
    return _common._rdp_at(alphas, rdp, alpha)


def rdp_to_dp(alphas: Any, rdp: Any, delta: float) -> tuple[float, float]:
    """``(ε, α*)``: the (ε, δ) guarantee an RDP curve implies at ``delta`` (Balle et al. 2020, Thm 21),
    and the order that attains it."""
    return _common._conversion(alphas, rdp, delta)


def reported_deltas(guarantee: Any) -> list[float]:
    """The δ values a certificate reports ε at: the target's δ first, then the standard ones."""
    return _common._deltas(guarantee)


def smallest_noise(bound: Callable[[float], float], target: float, what: str) -> float:
    """The smallest noise multiplier σ (relative tolerance 1e-6) with ``bound(σ) ≤ target``, for a
    bound decreasing in σ; the returned σ always meets the target."""
    return _common._smallest_sigma(bound, target, what)
