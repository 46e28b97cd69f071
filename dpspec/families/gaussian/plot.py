"""The Gaussian release's part in ``dpspec plot`` (``Family.curve`` in :mod:`dpspec.families`)."""

from __future__ import annotations

from dpspec.plot import Series


def curve(r, grid, deltas) -> Series | None:
    """The analytic Gaussian δ(ε) from the release's recorded μ = Δ/σ (None when none is recorded)."""
    params = r.mechanism.parameters
    if not isinstance(params.get("mu"), (int, float)):
        return None
    from dpspec.accounting.analytic_gaussian import epsilon_of_delta

    eps = [epsilon_of_delta(float(params["mu"]), float(d)) for d in grid]
    return Series("analytic Gaussian (Balle & Wang 2018, Thm 8)", tuple(grid), tuple(eps), False)
