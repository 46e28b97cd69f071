"""What a one-shot release returns: the noised answer and the private report of what it read.

Shared by the release families' runtime classes (the Gaussian release, the sliced Wasserstein and
Wasserstein mechanisms)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class ReleaseReport:
    """What one release read: ``rows`` of the data, ``clamped`` values moved into their bounds,
    ``missing`` values replaced by a bound, and a sha256 ``data_fingerprint`` of the columns read.

    These are **private quantities**: the row count, the clamped and missing counts and the
    fingerprint are functions of the data that no noise covers (under add/remove the row count
    differs between neighbours). Keep the report with the data; publish only ``Released.value``."""

    target: str
    query: str
    rows: int
    clamped: int
    missing: int
    data_fingerprint: str
    data_source: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Released(NamedTuple):
    """The noised answer (the only thing the certificate covers) and the private run report."""

    value: Any
    report: ReleaseReport
