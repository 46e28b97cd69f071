"""The statistics releases' own rules (``mechanism laplace | discrete_laplace | discrete_gaussian | auto``):
what their queries must state (DPS155) and the guarantee they calibrate to (DPS156)."""

from __future__ import annotations

from dpspec.check.framework import Context, diag, releases_of, rule
from dpspec.ir import models as ir

_U = "privacy people { unit record  data dataset(t) }\n"
_G = "guarantee dp(epsilon = 1, delta = 1e-6)"


def _problems(r: ir.Release):
    """(message, field, hint) of each problem of the release's query."""
    q = r.query
    if q is None:
        yield "a statistics release needs a `query`", None, "add `query count()` or `query sum(x, bounds = [0, 10])`"
        return
    fn = q.function
    if fn not in ("count", "sum", "mean", "quantile"):
        yield (
            f"`{fn}` is not a statistic this mechanism evaluates",
            "function",
            "use count(), sum(x, bounds = …), mean(x, bounds = …) or quantile(x, q = …, bounds = …)",
        )
        return
    if fn == "count" and q.columns:
        yield "count() counts rows and takes no column", "columns", "write `count()` (filter with `where = …`)"
    if fn != "count":
        if len(q.columns) != 1:
            yield f"`{fn}` reads exactly one column", "columns", f"write `{fn}(age, bounds = [17, 90])`"
        if len(q.bounds) != 1:
            yield f"`{fn}` needs the column's bounds", "bounds", "add `bounds = [lo, hi]`: values are clamped to them"
        elif not q.bounds[0][0] < q.bounds[0][1]:
            yield "the bounds must satisfy lo < hi", "bounds", "write `bounds = [lo, hi]` with lo < hi"
    if fn == "quantile":
        if q.q is None or not 0 < q.q < 1:
            yield "a quantile needs 0 < q < 1", "q", "write `q = 0.5` for the median"
        if q.by is not None:
            yield "a quantile cannot be grouped", "by", "release one quantile per group, filtered with `where`"
        if r.mechanism.startswith("discrete"):
            yield (
                "a quantile is released by the exponential mechanism, not by additive noise",
                "function",
                "write `mechanism laplace` or omit `mechanism`",
            )
    if q.keys is not None:
        if q.by is None:
            yield "`keys` lists the groups of `by`, which is missing", "keys", "add `by = column`"
        elif not q.keys or len(set(q.keys)) != len(q.keys):
            yield "`keys` must list each group once", "keys", "list every key once"
    if q.by is not None and q.keys is None:
        if fn != "count":
            yield (
                "groups found in the data (no `keys`) are supported for counts only",
                "keys",
                "declare the groups with `keys = [...]`",
            )
        if r.mechanism in ("gaussian", "discrete_gaussian"):
            yield "partition selection thresholds Laplace counts", "by", "use laplace or discrete_laplace"
    if (
        r.mechanism.startswith("discrete")
        and fn in ("sum", "mean")
        and q.bounds
        and not all(float(b).is_integer() for b in q.bounds[0])
    ):
        yield (
            "discrete noise needs integer bounds (values are rounded to integers inside them)",
            "bounds",
            "use integer bounds, or mechanism laplace",
        )
    if (
        r.mechanism == "discrete_gaussian"
        and fn in ("sum", "mean")
        and q.bounds
        and max(abs(b) for b in q.bounds[0]) < 1
    ):
        yield "discrete Gaussian noise needs a sensitivity of at least 1", "bounds", "use mechanism laplace"


@rule(
    "DPS155",
    "a statistics query that cannot be evaluated as written",
    bad=_U + f"release r {{ mechanism laplace  query sum(x)  {_G} }}",
    good=_U + f"release r {{ mechanism laplace  query sum(x, bounds = [0, 10])  {_G} }}",
    explanation="A statistics release evaluates its query on the data itself: `count()` counts rows, `sum`, "
    "`mean` and `quantile` read one numeric column clamped to its declared bounds; `by = column` "
    "groups by a column over the declared `keys` (or, for counts, over the groups a DP partition "
    "selection finds); `where = column op value` filters rows. Discrete noise needs integer bounds.",
)
def check_statistics_query(ctx: Context):
    for r in releases_of(ctx, __name__):
        for msg, fld, hint in _problems(r):
            node = r.query if r.query is not None and fld not in (None, "function") else r
            yield diag("DPS155", f"`{r.name}`: {msg}", node, fld if node is r.query else None, hint=hint)


@rule(
    "DPS156",
    "a statistics release needs a dp(ε, δ) target",
    bad=_U + "release r { query count()  guarantee rdp(alpha = 8, epsilon = 1) }",
    good=_U + f"release r {{ query count()  {_G} }}",
    explanation="Statistics releases are calibrated to an (ε, δ) target — `dp(epsilon = …, delta = …)` — on "
    "their own or as a share of a `compose … split` block.",
)
def check_statistics_guarantee(ctx: Context):
    for r in releases_of(ctx, __name__):
        g = r.guarantee
        if not isinstance(g, ir.DpGuarantee) or g.epsilon is None:
            yield diag(
                "DPS156", f"`{r.name}` needs a target dp(epsilon = …, delta = …)", r, "guarantee", hint=f"write `{_G}`"
            )
