"""Data bindings: locating and loading the datasets a spec refers to.

Real datasets are never copied into the repository. They are found under a data root:
``$DPSPEC_DATA_DIR`` if set, otherwise the workplace's shared folder ``../shared/data`` next to
the repository checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_root", "DataNotFoundError", "TABLE_GENERATORS", "GRAPH_GENERATORS"]

# The generators of dpspec.data.synthetic, named here without importing numpy (the checker reads them).
TABLE_GENERATORS = ("secret_groups", "two_blobs")
GRAPH_GENERATORS = ("sbm_graph",)


class DataNotFoundError(FileNotFoundError):
    """A dataset a spec or a loader asked for is not present under the data root."""


def data_root() -> Path:
    """Return the folder holding the real datasets (adult/, cora/, ...).

    Raises DataNotFoundError with a hint when no such folder exists.
    """
    env = os.environ.get("DPSPEC_DATA_DIR")
    if env:  # an explicit setting is used as given, never silently replaced
        if Path(env).is_dir():
            return Path(env)
        raise DataNotFoundError(f"DPSPEC_DATA_DIR={env} is not a folder")
    repo = Path(__file__).resolve().parents[2]
    candidates = [repo.parent / "shared" / "data", repo / "data"]
    for c in candidates:
        if c.is_dir():
            return c
    raise DataNotFoundError(
        "no data folder found; set DPSPEC_DATA_DIR to the folder that holds adult/, cora/, ... "
        f"(looked in: {', '.join(str(c) for c in candidates)})"
    )
