"""The data of a picture of a certificate (``dpspec.plot``): panels of series, without matplotlib.

Its own module so that the families' hook types (``dpspec.families.hooks``) can name it without
importing the plotting code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Series:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    certified: bool  # True: numbers copied from the certificate (markers); False: recomputed (a line)


@dataclass(frozen=True)
class Panel:
    target: str
    kind: str
    title: str
    xlabel: str
    ylabel: str
    series: tuple[Series, ...] = ()
    note: str | None = None  # why the panel is empty or partial
    xlog: bool = False
    ylog: bool = False
