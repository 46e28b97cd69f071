"""Progress bars for long work (tqdm), on stderr only.

    from dpspec.progress import progress
    for t in progress(range(steps), desc="train model", unit="step"):
        ...
    with progress(total=n, desc="sensitivity") as bar:
        bar.update(k)

A bar is drawn only when stderr is a terminal, tqdm is installed, the CLI was not given
``-q``/``--quiet`` (:func:`set_quiet`) and the environment does not say ``DPSPEC_PROGRESS=0``;
otherwise :func:`progress` returns a silent stand-in with the same interface. It never writes to
stdout (which carries certificates and JSON), and it prints nothing a certificate depends on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

__all__ = ["progress", "enabled", "set_quiet"]

_quiet = False


def set_quiet(quiet: bool = True) -> None:
    """Silence every bar of this process (the CLI's ``--quiet``)."""
    global _quiet
    _quiet = bool(quiet)


def enabled() -> bool:
    """True iff a bar would be drawn now (see the module docstring)."""
    if _quiet or os.environ.get("DPSPEC_PROGRESS", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


class _Silent:
    """The interface of a tqdm bar that does nothing."""

    def __init__(self, iterable=None, total=None):
        self.iterable = iterable
        self.total = total
        self.n = 0

    def __iter__(self):
        return iter(self.iterable if self.iterable is not None else ())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, *a, **k) -> None:
        pass

    def set_postfix_str(self, *a, **k) -> None:
        pass

    def close(self) -> None:
        pass


def progress(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str | None = None,
    unit: str = "it",
    leave: bool = False,
):
    """A tqdm bar on stderr over ``iterable`` (or a manual one of ``total``), or a silent stand-in."""
    if not enabled():
        return _Silent(iterable, total)
    try:
        from tqdm import tqdm
    except ImportError:  # an optional nicety: never a reason to fail
        return _Silent(iterable, total)
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, file=sys.stderr, dynamic_ncols=True)
