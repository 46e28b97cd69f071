"""Reading a Pufferfish ``scenario`` at compile time: the bound data → the secret's labels, the query's
records and its Pufferfish query (``dpspec.pufferfish``), a prior family's ranges, and the words a
certificate uses for priors and predicate secrets. Shared by the release families that protect a
scenario's secret (the sliced Wasserstein mechanism, the Wasserstein mechanism, the Markov Quilt
Mechanism); refusals are located diagnostics (``dpspec.compiler.errors.fail``).
"""

from __future__ import annotations

import math

import numpy as np

from dpspec.compiler.errors import fail as _fail
from dpspec.ir import models as ir

__all__ = [
    "RECORD_WORLDS",
    "build_query",
    "import_target",
    "predicate_secret_labels",
    "predicate_text",
    "prior_ranges",
    "secret_labels",
    "world_name",
]

#: priors under which X | s is one record (the others independent): per-record or, with
#: ``output aggregate``, the dataset's aggregate through Lemma A (dpspec.pufferfish.aggregate)
RECORD_WORLDS = (ir.EmpiricalWorld, ir.BalancedWorld, ir.BernoulliWorld, ir.CategoricalWorld)


def import_target(target: str, node, field: str):
    """The callable a spec names as ``"module:function"`` (a sampler world, a callable query), imported through
    the code-hook gate (refused while code hooks are off, as in ``verify``); a malformed or missing target is
    DPS104 / DPS108 at ``node``'s ``field``."""
    from dpspec.compiler.hooks import import_hook

    mod, _, fn = target.partition(":")
    if not mod or not fn:
        _fail(
            "DPS104",
            f'`{target}` is not of the form "module:function"',
            node,
            field,
            hint='write "my_package.my_module:my_function"',
        )
    try:
        obj = import_hook(target)  # refuses (CodeHookRefused) while code hooks are off, e.g. in verify
    except (ImportError, AttributeError) as e:
        _fail("DPS108", f"cannot import `{target}`: {e}", node, field, hint="check the module path and PYTHONPATH")
    if not callable(obj):
        _fail("DPS104", f"`{target}` is not callable", node, field, hint='name a function: "my_module:my_function"')
    return obj


# --- data → records, secret labels ------------------------------------------------------------------


def secret_labels(table, sc: ir.Scenario) -> tuple[np.ndarray, tuple[str, ...]]:
    """The secret's value for each record of ``table`` and the secret's values (declared, or the quantile bins):
    a record-level secret only (a membership or proportion secret is refused here, DPS433 / DPS437)."""
    sec = sc.secret
    if sec.membership:
        _fail(
            "DPS433",
            "a membership secret needs a release whose answer is a sum over the records present",
            sec,
            hint="use `mechanism wasserstein` with `query sum(...)` and `output aggregate`",
        )
    if sec.share:
        _fail(
            "DPS437",
            "a proportion secret (about the whole dataset) is released by the Wasserstein mechanism",
            sec,
            hint="use `mechanism wasserstein` with `output aggregate` and `prior empirical`",
        )
    if sec.predicate is not None:
        return predicate_secret_labels(table, sec)
    if sec.attribute not in table.columns:
        from dpspec.diagnostics import did_you_mean

        _fail(
            "DPS416",
            f"the data has no column `{sec.attribute}`",
            sec,
            "attribute",
            hint=did_you_mean(sec.attribute, table.columns, "column"),
        )
    col = table.column(sec.attribute)
    if sec.quantile_bins:
        if not table.is_numeric(sec.attribute):
            _fail(
                "DPS104",
                f"quantile bins need a numeric column; `{sec.attribute}` is categorical",
                sec,
                "attribute",
                hint=f"list the values instead: `secret {sec.attribute} in {{...}}`",
            )
        edges = np.quantile(col, np.arange(1, sec.quantile_bins) / sec.quantile_bins)
        idx = np.searchsorted(edges, col, side="left")
        labels = np.array([f"q{i + 1}" for i in idx], dtype=object)
        values = tuple(f"q{i + 1}" for i in range(sec.quantile_bins))
    else:
        labels = np.array([_label_text(x) for x in col], dtype=object)
        values = sec.values or tuple(dict.fromkeys(labels.tolist()))
    from dpspec import limits

    # values read from the data are as many as its distinct labels: bound them before counting
    limits.require("secret_values", len(values), f"the number of values of the secret `{sec.attribute}`")
    counts = dict.fromkeys(values, 0)
    for label in labels.tolist():  # one pass over the records, whatever the number of values
        if label in counts:
            counts[label] += 1
    empty = [v for v, c in counts.items() if c == 0]
    if empty:
        _fail(
            "DPS409",
            f"secret value(s) {', '.join(map(str, empty))} have no records in the data (empty secret class)",
            sec,
            "values",
            hint="remove them from the secret's values, or check the data",
        )
    stray = sorted(set(labels.tolist()) - set(values), key=str)
    if stray:
        n = int(np.isin(labels, stray).sum())
        _fail(
            "DPS412",
            f"{n} records have secret values not declared: {', '.join(map(str, stray[:6]))}",
            sec,
            "values",
            hint="declare every value the secret takes (or filter the data before binding it)",
        )
    if len(values) < 2:
        _fail(
            "DPS410",
            "the secret has a single value, so there is no pair to protect",
            sec,
            "values",
            hint="a secret needs at least two values, e.g. `secret race in {White, Black}`",
        )
    return labels, tuple(values)


def predicate_secret_labels(table, sec: ir.Secret) -> tuple[np.ndarray, tuple[str, ...]]:
    """Labels true/false of ``secret name = column op value`` (dpspec.pufferfish.secrets)."""
    from dpspec.pufferfish.secrets import PREDICATE_VALUES, predicate_labels

    pr = sec.predicate
    assert pr is not None  # callers pass a predicate or proportion secret, each lowered with its predicate
    if pr.column not in table.columns:
        from dpspec.diagnostics import did_you_mean

        _fail(
            "DPS416",
            f"the data has no column `{pr.column}`",
            pr,
            "column",
            hint=did_you_mean(pr.column, table.columns, "column"),
        )
    try:
        labels = predicate_labels(table.column(pr.column), pr.op, pr.threshold, pr.members)
    except ValueError as e:
        _fail(
            "DPS104",
            f"secret `{sec.attribute}`: {e}",
            pr,
            "column",
            hint="compare a numeric column with a number, or test membership with `in {...}`",
        )
    empty = [v for v in PREDICATE_VALUES if not np.any(labels == v)]
    if empty:
        _fail(
            "DPS409",
            f"the secret `{sec.attribute}` is {empty[0]} for no record (empty secret class)",
            sec,
            "predicate",
            hint="a predicate secret needs records on both sides; check the threshold",
        )
    return labels, PREDICATE_VALUES


def _label_text(x) -> str:
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():  # 1.0 is the label "1"; inf stays "inf"
        return str(int(x))
    return str(x)


def _columns(table, q: ir.BoundedQuery, cols) -> np.ndarray:
    from dpspec.diagnostics import did_you_mean

    for c in cols:
        if c not in table.columns:
            _fail(
                "DPS416", f"the data has no column `{c}`", q, "columns", hint=did_you_mean(c, table.columns, "column")
            )
        if not table.is_numeric(c):
            _fail(
                "DPS104",
                f"column `{c}` is categorical; the query needs numbers",
                q,
                "columns",
                hint="use a numeric column, or a histogram of codes",
            )
    X = table.matrix(cols)
    if not np.all(np.isfinite(X)):
        bad = int((~np.isfinite(X)).any(axis=1).sum())
        _fail(
            "DPS417",
            f"{bad} records have missing or non-finite values in the query columns",
            q,
            "columns",
            hint="drop or impute them before binding the data",
        )
    return X


def _bounds(q: ir.BoundedQuery, k: int):
    if not q.bounds:
        return None
    if len(q.bounds) not in (1, k):
        _fail("DPS105", f"{len(q.bounds)} bounds for {k} columns", q, "bounds", hint="one [lo, hi] or one per column")
    b = q.bounds if len(q.bounds) == k else q.bounds * k
    return np.array([x[0] for x in b]), np.array([x[1] for x in b])


def build_query(table, q: ir.BoundedQuery):
    """(records matrix, pf query). Column indices refer to the records matrix."""
    from dpspec import pufferfish as pf

    k = len(q.columns)
    if q.function in ("mean", "sum"):
        if not k:
            _fail("DPS113", f"`{q.function}` names no columns", q, hint=f"write {q.function}(age, bounds = [17, 90])")
        X = _columns(table, q, q.columns)
        b = _bounds(q, k)
        if b is None:
            _fail(
                "DPS402",
                f"`{q.function}` needs declared bounds (its support) for the SWM",
                q,
                hint=f"write {q.function}({', '.join(q.columns)}, bounds = [lo, hi])",
            )
        if q.function == "mean":
            return X, pf.Mean(list(range(k)), b[0], b[1], name="mean")
        return X, pf.Sum(list(range(k)), b[0], b[1], max_records=len(X), name="sum")
    if q.function == "histogram":
        if k != 1:
            _fail(
                "DPS104",
                "a histogram takes one column",
                q,
                "columns",
                hint="histogram(age, bins = 10, bounds = [17, 90])",
            )
        X = _columns(table, q, q.columns)
        b = _bounds(q, 1)
        if b is None or not q.bins:
            _fail(
                "DPS113",
                "a histogram for the SWM needs bins and bounds",
                q,
                hint=f"histogram({q.columns[0]}, bins = 10, bounds = [lo, hi])",
            )
        edges = np.linspace(b[0][0], b[1][0], q.bins + 1)
        return X, pf.Histogram(0, edges, name="histogram")
    if q.function in ("logistic_regression", "linear_svm"):
        if not k:
            _fail(
                "DPS113",
                f"`{q.function}` names no feature columns",
                q,
                hint=f"name the features first: {q.function}(age, hours-per-week, bounds = ..., label = ..., "
                "positive = ...)",
            )
        X = _columns(table, q, q.columns)
        if q.label not in table.columns:
            from dpspec.diagnostics import did_you_mean

            _fail(
                "DPS416",
                f"the data has no label column `{q.label}`",
                q,
                "label",
                hint=did_you_mean(q.label or "", table.columns, "column"),
            )
        y = np.array([_label_text(v) == q.positive for v in table.column(q.label)], dtype=float)
        if y.min() == y.max():
            _fail(
                "DPS105",
                f"label `{q.label}` equals `{q.positive}` in {'all' if y.max() else 'no'} records",
                q,
                "positive",
                hint="name the positive class as it appears in the data",
            )
        b = _bounds(q, k)
        cls = pf.LogisticRegressionQuery if q.function == "logistic_regression" else pf.LinearSVMQuery
        query = cls(list(range(k)), k, l2=q.regularization or 1e-2, feature_lo=b[0], feature_hi=b[1])
        return np.column_stack([X, y]), query
    if q.function == "callable":
        # callable(…) states its target and dimension (the lowering's signature requires both, DPS113)
        assert q.target is not None and q.dimension is not None
        fn = import_target(q.target, q, "target")
        X = _columns(table, q, q.columns) if k else np.zeros((len(table), 0))
        b = _bounds(q, q.dimension) if q.bounds else None
        sup = pf.BoxSupport(b[0], b[1]) if b is not None else None
        return X, pf.CallableQuery(fn, q.dimension, support=sup, name=q.target)
    _fail(
        "DPS104",
        f"query `{q.function}` is not supported by the SWM",
        q,
        "function",
        hint="use mean, sum, histogram, logistic_regression, linear_svm or callable",
    )


def prior_ranges(w, values) -> dict:
    """{secret value: (low, high)} of a ``bernoulli``/``categorical`` family (bernoulli: P(first value) = p)."""
    if isinstance(w, ir.BernoulliWorld):
        if len(values) != 2:
            _fail(
                "DPS434",
                f"`bernoulli` is a prior for a secret with two values; this one has {len(values)}",
                w,
                hint="use `categorical(p in [[lo, hi], ...])`, one range per value",
            )
        return {values[0]: (w.p_low, w.p_high), values[1]: (1.0 - w.p_high, 1.0 - w.p_low)}
    if len(w.ranges) != len(values):
        _fail(
            "DPS434",
            f"`categorical` gives {len(w.ranges)} ranges for a secret with {len(values)} values",
            w,
            "ranges",
            hint=f"give one [low, high] per value, in order: {', '.join(map(str, values))}",
        )
    return dict(zip(values, w.ranges))


def predicate_text(pr: ir.SecretPredicate) -> str:
    if pr.op == "in":
        return f"{pr.column} in {{{', '.join(pr.members)}}}"
    t = f"{pr.threshold:g}" if isinstance(pr.threshold, float) else str(pr.threshold)
    return f"{pr.column} {pr.op} {t}"


def world_name(w) -> str:
    if isinstance(w, ir.BernoulliWorld):
        return f"bernoulli(p in [{w.p_low:g}, {w.p_high:g}])" if w.p_low != w.p_high else f"bernoulli(p = {w.p_low:g})"
    if isinstance(w, ir.CategoricalWorld):
        return "categorical(p in [" + ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in w.ranges) + "])"
    return w.world
