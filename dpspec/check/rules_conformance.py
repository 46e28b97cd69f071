"""Conformance rules (DPS140–DPS159): two settings of a spec that disagree.

A spec states some quantities twice — a declared sensitivity and the bounds that imply one, a
dataset size and the data itself, a discrepancy model per run of one scenario. Silently preferring
one side can certify a guarantee for a mechanism that is not the one that runs (a declared Δ = 1
next to bounds that imply Δ = 99 under-states the noise 99-fold). Each disagreement is a located
error naming both sides. The decision for every pair of settings that can disagree, including the
ones other rules already cover, is the table ``DECISIONS`` (printed in docs/language.md).

Rules that need the data (a column, a row count) are raised while compiling and registered with
``stage="compile"``; the run-time counterpart (data handed to a release) raises
``dpspec.mechanisms.ledger.DataMismatchError`` and is listed as DPS148.
"""

from __future__ import annotations

from dpspec.check.framework import Context, diag, register_front_end, rule, setting
from dpspec.ir import models as ir

_RELEASE = (
    "privacy respondents {{\n  unit         {unit}\n{extra}}}\n"
    "release total_hours {{\n  mechanism gaussian\n  query     {query}\n{sens}"
    "  guarantee dp(epsilon = 1.0, delta = 1e-6)\n}}\n"
)


def release_spec(query="sum(hours, bounds = [0, 99])", sens="", unit="record", extra="") -> str:
    return _RELEASE.format(query=query, sens=f"  sensitivity {sens}\n" if sens else "", unit=unit, extra=extra)


def _unit_of(ctx: Context, t):
    d = ctx.resolve_protects(t)
    return d, (d.unit if isinstance(d, ir.PrivacyUnitDecl) else None)


# (DPS140, a declared sensitivity below the one the query implies, is the Gaussian release's:
# dpspec/families/gaussian/rules.py)


# --- DPS141: bounds that do not match the columns ----------------------------------------------------


@rule(
    "DPS141",
    "bounds that do not match the columns",
    bad=release_spec(query="sum(age, hours, bounds = [[17, 90], [0, 99], [0, 1]])"),
    good=release_spec(query="sum(age, hours, bounds = [[17, 90], [0, 99]])"),
    explanation="A query takes one [lo, hi] for all its columns or one per column (per output coordinate for "
    "`callable`). Any other number leaves a column without bounds or a bound without a column; "
    "the values of each column are clamped to its own bounds.",
)
def check_bounds_columns(ctx: Context):
    from dpspec.check.rules import walk
    from dpspec.compiler.sensitivity import expected_bounds

    for q in walk(ctx.spec):
        if not isinstance(q, ir.BoundedQuery) or not q.bounds:
            continue
        k = expected_bounds(q)
        what = "output coordinates" if q.function == "callable" else "columns"
        if k is None:
            continue
        if len(q.bounds) not in (1, k):
            yield diag(
                "DPS141",
                f"{len(q.bounds)} bounds for {k} {what}",
                q,
                "bounds",
                hint=f"give one [lo, hi] for all {what}, or {k} pairs, one per "
                f"{'coordinate' if q.function == 'callable' else 'column'} in order",
            )


# --- DPS142: a dataset size that disagrees with another one -------------------------------------------


def _table_rows(binding) -> int | None:
    """Rows of a data binding known without reading data (a generated table)."""
    from dpspec.data import TABLE_GENERATORS

    if isinstance(binding, ir.SyntheticData) and binding.generator in TABLE_GENERATORS:
        return binding.size
    return None


@rule(
    "DPS142",
    "a dataset size that disagrees with another one",
    bad=release_spec(
        extra="  dataset_size 1000\n  data synthetic(generator = two_blobs, size = 600)\n",
        query="sum(x1, bounds = [-3, 3])",
    ),
    good=release_spec(
        extra="  dataset_size 600\n  data synthetic(generator = two_blobs, size = 600)\n",
        query="sum(x1, bounds = [-3, 3])",
    ),
    explanation="`dataset_size` is the public number of records: the mean divides by it, DP-SGD turns an "
    "expected batch into a rate with it, SRPP-SGD's discrepancy models count in it. It must equal "
    "the rows of the data the block binds (checked when the data is read: generated data at check "
    "time, files and bound datasets while compiling), and a training that restates it must agree "
    "with its privacy block.",
)
def check_dataset_sizes(ctx: Context):
    for d in ctx.spec.units:
        rows = _table_rows(d.data) if d.data is not None and d.unit.kind in ("record", "group") else None
        if d.dataset_size is not None and rows is not None and rows != d.dataset_size:
            assert isinstance(d.data, ir.SyntheticData)  # only a generated table's rows are known here
            yield diag(
                "DPS142",
                f"`{d.name}` declares dataset_size {d.dataset_size}, but its data "
                f"synthetic(generator = {d.data.generator}, size = {rows}) has {rows} rows",
                d,
                "dataset_size",
                hint=f"write dataset_size {rows}, or bind the data it describes",
            )
    for t in ctx.spec.trainings:
        n = setting(t, "dataset_size")  # (the families whose settings hold a dataset size)
        if n is None:
            continue
        decl = ctx.resolve_protects(t)
        if isinstance(decl, ir.PrivacyUnitDecl) and decl.dataset_size is not None and decl.dataset_size != n:
            yield diag(
                "DPS142",
                f"`{t.name}` declares dataset_size {n}, but the privacy block "
                f"`{decl.name}` it protects declares {decl.dataset_size}",
                t,
                "dataset_size",
                hint="state the size once, in the privacy block",
            )
        elif isinstance(decl, ir.PrivacyUnitDecl) and decl.data is not None and decl.unit.kind in ("record", "group"):
            rows = _table_rows(decl.data)
            if rows is not None and rows != n:
                yield diag(
                    "DPS142",
                    f"`{t.name}` declares dataset_size {n}, but the data of `{decl.name}` has {rows} rows",
                    t,
                    "dataset_size",
                    hint=f"write dataset_size {rows}, or remove it",
                )
        if isinstance(decl, ir.Scenario) and decl.data is not None:
            rows = _table_rows(decl.data)
            if rows is not None and rows != n:
                yield diag(
                    "DPS142",
                    f"`{t.name}` declares dataset_size {n}, but scenario `{decl.name}`'s data has {rows} rows",
                    t,
                    "dataset_size",
                    hint=f"write dataset_size {rows}, or remove it (the scenario's data gives it)",
                )


def size_mismatch(rows: int, declared: int, where: str) -> tuple[str, str]:
    """Message and hint for DPS142 raised while compiling, once the data's rows are known."""
    return (
        f"{where} declares dataset_size {declared}, but its data has {rows} rows",
        f"write dataset_size {rows}, or bind the data it describes",
    )


# (DPS143, SRPP-SGD runs of one scenario composed under different discrepancy models, is SRPP-SGD's:
# dpspec/families/srpp_sgd/rules.py; DPS144, both steps and epochs, is in dpspec/check/rules_schedule.py.)


# --- DPS145: a unit or query that does not fit its data -------------------------------------------------


def data_kind(binding) -> str | None:
    """``table``, ``graph`` or None (bound at run time by name: either)."""
    from dpspec.data import GRAPH_GENERATORS, TABLE_GENERATORS

    if isinstance(binding, ir.GraphData):
        return "graph"
    if isinstance(binding, ir.CsvData):
        return "table"
    if isinstance(binding, ir.SyntheticData):
        return (
            "table"
            if binding.generator in TABLE_GENERATORS
            else ("graph" if binding.generator in GRAPH_GENERATORS else None)
        )
    return None


@rule(
    "DPS145",
    "a unit or query that does not fit its data",
    bad="privacy authors {\n  unit record\n  graph cora\n}\n"
    "release papers {\n  mechanism gaussian\n  query     count()\n  guarantee dp(epsilon = 1, delta = 1e-6)\n}\n",
    good="privacy authors {\n  unit node\n  graph cora\n}\n"
    "release papers {\n  mechanism gaussian\n  query     vector(dimension = 1, sensitivity = 1)\n"
    "  guarantee dp(epsilon = 1, delta = 1e-6)\n}\n",
    explanation="Record and group units are rows of a table; node and edge units live in a graph. A record unit "
    "over a graph (or a node unit over a CSV file) names two different objects, and a column query "
    "(`sum`, `mean`, `count`, `histogram`) cannot be evaluated on a graph.",
)
def check_data_kind(ctx: Context):
    for d in ctx.spec.units:
        kind = data_kind(d.data) if d.data is not None else None
        want = "table" if d.unit.kind in ("record", "group") else "graph"
        if kind is not None and kind != want:
            yield diag(
                "DPS145",
                f"`{d.name}` protects a {d.unit.kind} unit, but its data is a {kind}",
                d,
                "data",
                hint="record and group units need a table (csv, dataset, a table generator); node and edge "
                "units need a graph (`graph cora`)",
            )
    from dpspec.compiler.sensitivity import DATA_QUERIES

    for r in ctx.spec.releases:
        d, u = _unit_of(ctx, r)
        if u is None or u.kind in ("record", "group") or r.query is None or r.query.function not in DATA_QUERIES:
            continue  # a record or group unit over a graph is reported above, at the privacy block
        if d.data is not None and data_kind(d.data) == "graph":
            yield diag(
                "DPS145",
                f"`{r.query.function}` reads columns of a table, but `{d.name}`'s data is a graph",
                r.query,
                "function",
                hint="release a `vector(dimension = ..., sensitivity = ...)` answer "
                "computed from the graph, with its declared sensitivity",
            )


# --- DPS146: a group larger than the dataset ---------------------------------------------------------------


@rule(
    "DPS146",
    "a group larger than the dataset",
    severity="warning",
    bad="privacy users {\n  unit group(size = 500)\n  dataset_size 100\n}\n"
    "release total {\n  mechanism gaussian\n  query     count()\n  guarantee dp(epsilon = 1, delta = 1e-6)\n}\n",
    good="privacy users {\n  unit group(size = 8)\n  dataset_size 100\n}\n"
    "release total {\n  mechanism gaussian\n  query     count()\n  guarantee dp(epsilon = 1, delta = 1e-6)\n}\n",
    explanation="A group unit of K records in a dataset of n < K records protects the whole dataset as one "
    "group. The certificate stays true, but the noise is sized for K and the two numbers probably "
    "do not describe the same data.",
)
def check_group_size(ctx: Context):
    for d in ctx.spec.units:
        if isinstance(d.unit, ir.GroupUnit) and d.dataset_size is not None and d.unit.size > d.dataset_size:
            yield diag(
                "DPS146",
                f"groups of up to {d.unit.size} records, but `{d.name}` has {d.dataset_size}",
                d.unit,
                "size",
                hint=f"use a group size of at most {d.dataset_size}",
            )


# --- raised while compiling or at run time ------------------------------------------------------------------

register_front_end(
    "DPS147",
    "a query column that is not numeric",
    "compile",
    bad=release_spec(
        extra="  data synthetic(generator = two_blobs, size = 600)\n", query="sum(label, bounds = [0, 1])"
    ),
    good=release_spec(extra="  data synthetic(generator = two_blobs, size = 600)\n", query="sum(x1, bounds = [-3, 3])"),
    explanation="`sum`, `mean` and `histogram` read numbers; a categorical column of the bound data "
    "has no bounds to clamp to. (A column the data does not have is DPS416; a data file "
    "that is missing is DPS419.)",
)
register_front_end(
    "DPS148",
    "the data handed to a release does not match its certificate",
    "run",
    bad="(see tests/families/gaussian/test_release_runtime.py)",
    good=release_spec(),
    explanation="`compiled.mechanism.release(data)` checks the data against the certificate before "
    "it reads a value: the query's columns must exist and be numeric, and under "
    "substitution the public dataset size must match. Otherwise it raises "
    "`DataMismatchError` naming the column or size, and nothing is released or charged.",
)


#: Every pair of settings that can disagree, and what dpspec does about it (docs/language.md).
DECISIONS: tuple[tuple[str, str, str], ...] = (
    (
        "declared `sensitivity` vs the Δ the query's bounds imply",
        "DPS140",
        "error when smaller; a larger one is used as declared (the noise is calibrated to max(declared, derived))",
    ),
    ("`sensitivity` vs `vector(sensitivity = …)`", "DPS129", "error when they differ"),
    ("number of `bounds` vs columns (or callable dimension)", "DPS141", "error"),
    ("`bounds` with lo ≥ hi", "DPS105", "error"),
    (
        "`dataset_size` vs the rows of the bound data",
        "DPS142",
        "error (generated data at check time, files and bound datasets while compiling)",
    ),
    ("train `dataset_size` vs its privacy block's, or its scenario's data", "DPS142", "error"),
    (
        "`dataset_size` vs the rows handed to `release(data)`",
        "DPS148",
        "refused under substitution (the size is public); never checked under add/remove, where refusing would "
        "reveal the private size — a mean divides by the certified n",
    ),
    (
        "query columns vs the bound data's columns",
        "DPS416 / DPS147 / DPS148",
        "compile error when the data is bound; `DataMismatchError` when it arrives at run time",
    ),
    ("discrepancy models of composed SRPP-SGD runs of one scenario", "DPS143", "error"),
    ("SRPP-SGD runs composed at different α, flavour or sa-ness", "DPS504", "error"),
    ("`rate` vs `expected_batch`", "DPS113", "error: exactly one of them"),
    ("`steps` vs `epochs`", "DPS128 / DPS144", "error: exactly one of them"),
    ("`noise` vs a target ε", "DPS124", "error: exactly one of them"),
    ("`noise` and `noise_multiplier`", "DPS103", "error"),
    ("`unit record(relation = …)` and a `relation` setting", "DPS103", "error when both are given"),
    ("`data` and `graph` in one privacy block", "DPS103", "error"),
    ("unit kind vs data kind (record on a graph, column query on a graph)", "DPS145", "error"),
    (
        "group size vs sampling",
        "DPS203",
        "error for fixed-size batches (no tight accountant); Poisson and full-batch are covered for any K",
    ),
    ("group size vs dataset size", "DPS146", "warning: the certificate stays true but protects the whole dataset"),
    ("batch size vs dataset size", "DPS126 / DPS606", "error"),
    ("slice directions or axis weights vs the query's dimension", "DPS411", "error"),
    (
        "a precomputed answer's shape vs the certified dimension",
        "DPS148",
        "`release_answer` refuses an answer of another shape",
    ),
    ("a setting the mechanism ignores (e.g. `steps` for GCON)", "DPS130", "error"),
    ("guarantee notion vs accountant (sa-HUC vs HUC)", "DPS505", "error"),
    (
        "a count with a declared `dataset_size`",
        "—",
        "no rule: under add/remove `dataset_size` is the public normaliser of batch rates and means, the count is "
        "the private size; the certificate covers the count's release",
    ),
    (
        "two SRPP-SGD runs of one scenario that are not composed",
        "—",
        "no rule: each certificate states its own discrepancy model as an assumption and claims nothing jointly",
    ),
)
