"""SRPP-SGD's part in ``dpspec plot`` (``Family.steps_curve`` in :mod:`dpspec.families`)."""

from __future__ import annotations

from dpspec.plot import Panel, Series


def steps_panel(r, common: dict, certified: Series, steps: int, rdp_target: bool) -> Panel:
    """The certified ε at the last step only: the per-step caps are recorded as a hash."""
    return Panel(
        **common,
        series=(certified,),
        note=(
            "SRPP-SGD: the per-step caps behind ε(α) are recorded only as a hash (caps_sha256), so ε after "
            "fewer steps cannot be recomputed from the certificate"
        ),
    )
