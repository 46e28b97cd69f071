"""Resource limits: every size a spec or a data file can make dpspec read, allocate or loop over.

A spec is input from a stranger as often as from a colleague (a certificate embeds one, and
`dpspec verify` recompiles it), so every number that drives memory or work is checked against a
limit *before* anything is allocated, and an input over a limit is a located error that names the
limit and how to raise it. The limits live here, in one table, so that the docs
(`docs/language.md`, generated from :data:`LIMITS`) and the checks cannot drift apart.

Each limit can be raised (or lowered) for one run with an environment variable, e.g.
``DPSPEC_MAX_RECORDS=50000000 dpspec compile big.dps``. A value that is not a positive whole
number is ignored (the default applies), so a typo can never switch a limit off.

Two kinds of check use the table:

* :func:`over` — a single size against its limit (``dataset_size``, ``sphere(m = …)``, …);
* :func:`over_work` — a product of sizes (records × slices, steps × batch, …) against the
  ``work`` budget, an estimate of the number of elementary operations a compile step would need;
* :func:`memory_budget` — around the whole compile, a cap on the memory it may allocate
  (``memory_mb``), for the computations whose memory no simple formula predicts (an
  accountant's quadrature grid, say): past the cap, an allocation fails cleanly.

Runtime code (data loaders, compile steps) raises :class:`LimitExceeded`, which the compiler turns
into a located ``DPS009`` diagnostic.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

from dpspec.errors import DpspecError

__all__ = [
    "Limit",
    "LIMITS",
    "LimitExceeded",
    "limit",
    "over",
    "over_work",
    "hint",
    "require",
    "require_work",
    "memory_budget",
]


@dataclass(frozen=True)
class Limit:
    name: str
    default: int
    what: str  # what is counted, as a noun phrase ("records in a dataset")

    @property
    def env(self) -> str:
        return "DPSPEC_MAX_" + self.name.upper()


_TABLE = (
    # the spec text
    Limit("source_bytes", 1_000_000, "characters in one spec file (and in an included file)"),
    Limit("nesting", 32, "levels of nested brackets in a spec"),
    Limit("number_chars", 64, "characters in one number literal"),
    Limit("tokens", 250_000, "tokens (names, numbers, strings, brackets) in one spec file"),
    Limit("blocks", 20_000, "blocks in one spec file"),
    Limit("includes", 64, "files in a spec, the root file and every file it includes"),
    Limit("list_items", 100_000, "items in one list, set or tuple of a spec"),
    Limit("diagnostics", 200, "diagnostics reported for one spec (the rest are counted, not shown)"),
    # data read from disk
    Limit("data_file_bytes", 256 * 2**20, "bytes of one data file read from the data root"),
    Limit("records", 20_000_000, "records (rows) in a dataset: `dataset_size`, synthetic sizes, rows read"),
    Limit("nodes", 5_000_000, "nodes in a graph (read or generated)"),
    Limit("columns", 100_000, "columns or features of a dataset, or the dimension of a query"),
    # sizes of the computation
    Limit("slices", 100_000, "slice directions of an SRPP profile (`sphere(m = …)`, `directions`)"),
    Limit("steps", 10_000_000, "training steps (given, or epochs × dataset_size / batch)"),
    Limit("epochs", 1_000_000, "training epochs (of a model or an encoder)"),
    Limit("batch", 10_000_000, "records in one batch or one sampling draw"),
    Limit("orders", 100_000, "Rényi orders, propagation depths or histogram bins"),
    Limit(
        "secret_values",
        1_000,
        "values of a Pufferfish secret (declared, quantile bins, or read from the data); "
        "the discriminative pairs grow with its square",
    ),
    Limit(
        "degree_cap",
        64,
        "edges kept per node (`degree_cap`, `per_positive`); the relational accountant's "
        "time grows steeply with it (about 2 minutes at 60, over 25 at 200)",
    ),
    Limit("draws", 10_000_000, "Monte-Carlo draws or sampled worlds"),
    Limit("hidden", 1_000_000, "hidden units, encoder outputs or token lengths of a model"),
    Limit("workers", 4096, "distributed workers"),
    Limit("group_size", 1_000, "records in a protected group (the group accountant's cost grows with its cube)"),
    Limit("work", 20_000_000_000, "elementary operations of one compile step (an estimate; about minutes)"),
    Limit("memory_mb", 4096, "megabytes of memory one compile may allocate beyond what dpspec itself holds"),
)

LIMITS: dict[str, Limit] = {x.name: x for x in _TABLE}


class LimitExceeded(DpspecError):
    """A size is above its limit; ``message`` and ``hint`` are ready for a diagnostic.

    Not a ValueError on purpose: the compile stages catch ValueError for their own reasons, and a
    limit must reach the compiler's top level, which reports it as DPS009."""

    def __init__(self, name: str, value: float, what: str | None = None):
        self.name = name
        self.value = value
        self.limit = limit(name)
        self.message = _message(name, value, what)
        self.hint = hint(name)
        super().__init__(self.message)


def limit(name: str) -> int:
    """The limit in force: the environment's ``DPSPEC_MAX_<NAME>`` if it is a positive whole number."""
    lim = LIMITS[name]
    raw = os.environ.get(lim.env)
    if raw:
        value = _parse_whole(raw)
        if value is not None:
            return value
    return lim.default


def _parse_whole(raw: str) -> int | None:
    raw = raw.strip().replace("_", "")
    if not re.fullmatch(r"\d+(?:\.\d+)?(?:[eE]\+?\d+)?", raw):
        return None
    try:
        value = float(raw) if re.search(r"[.eE]", raw) else int(raw)
    except (ValueError, OverflowError):
        return None
    if value != value or value < 1 or value > 2**62 or value != int(value):
        return None
    return int(value)


def _fmt(x: float) -> str:
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e16):
        return f"{int(x):,}"
    return f"{x:.4g}"


def _message(name: str, value: float, what: str | None) -> str:
    lim = LIMITS[name]
    return f"{what or lim.what} is {_fmt(value)}, above the limit of {_fmt(limit(name))}"


def hint(name: str) -> str:
    lim = LIMITS[name]
    return (
        f"the limit bounds memory and run time; if this size is intended, raise it for this run with "
        f"{lim.env}=<n> (see docs/language.md, Limits)"
    )


def over(name: str, value: float | int | None) -> bool:
    """True when ``value`` is above the limit ``name`` (None and non-numbers are never over)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value > limit(name)


def over_work(*factors: float | int | None) -> float | None:
    """The product of the factors when it is above the ``work`` limit, else None."""
    prod = 1.0
    for f in factors:
        if f is None:
            continue
        prod *= max(float(f), 1.0)
    return prod if prod > limit("work") else None


def require(name: str, value: float | int | None, what: str | None = None) -> None:
    """Raise :class:`LimitExceeded` when ``value`` is above the limit ``name``."""
    if value is not None and over(name, value):
        raise LimitExceeded(name, value, what)


@contextlib.contextmanager
def memory_budget():
    """Cap the memory of the block at ``memory_mb`` more than the process holds when it starts
    (``RLIMIT_AS``, on systems that have it): an allocation beyond the cap raises MemoryError,
    which the compiler reports as DPS009, instead of the machine swapping or the process being
    killed. The previous cap is restored afterwards; a tighter cap already in force is kept."""
    try:
        import resource
    except ImportError:  # (not on Windows)
        yield
        return
    budget = limit("memory_mb") * 2**20
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    new = _address_space() + budget
    if hard != resource.RLIM_INFINITY:
        new = min(new, hard)
    if soft != resource.RLIM_INFINITY and soft <= new:
        yield
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (new, hard))
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int:
    """The process's current virtual memory size in bytes (0 when unknown)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def require_work(what: str, *factors: float | int | None) -> None:
    """Raise :class:`LimitExceeded` when the product of ``factors`` is above the ``work`` limit."""
    w = over_work(*factors)
    if w is not None:
        raise LimitExceeded("work", w, what)
