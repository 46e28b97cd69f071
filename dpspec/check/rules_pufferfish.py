"""Rules for Pufferfish scenarios (DPS4xx): the secret, its pairs and the priors, shared by every family that
protects a scenario's secret (the rules of the sliced Wasserstein mechanism's releases are its folder's
``rules.py``; ``spec`` builds their examples too).

Check-stage rules see only the spec; compile-stage rules (registered with ``stage="compile"``)
depend on the data and are raised while compiling; their examples compile generated data.
"""

from __future__ import annotations

from dpspec.check.framework import Context, diag, register_front_end, rule
from dpspec.ir import models as ir

_SC = (
    "scenario s {{\n  data   synthetic(generator = secret_groups, size = 600, seed = 1)\n"
    "  secret {secret}\n  prior  {prior}\n{extra}}}\n"
)
_REL = "release r {{\n  mechanism swm\n  query     {query}\n  slices    {slices}\n  guarantee {g}\n}}\n"


def spec(
    secret="group in {A, B, C}",
    prior="empirical",
    extra="",
    query="mean(x1, x2, x3, bounds = [0, 10])",
    slices="axes",
    g="ave_srpp(alpha = 4, epsilon = 1)",
) -> str:
    return _SC.format(secret=secret, prior=prior, extra=extra) + _REL.format(query=query, slices=slices, g=g)


GOOD = spec()


def query_dimension(q: ir.BoundedQuery | None) -> int | None:
    if q is None:
        return None
    if q.function in ("mean", "sum"):
        return len(q.columns) or None
    if q.function == "count":
        return 1
    if q.function == "histogram":
        return q.bins
    if q.function in ("logistic_regression", "linear_svm"):
        return len(q.columns) + 1 if q.columns else None
    if q.function in ("callable", "vector"):
        return q.dimension
    return None


@rule(
    "DPS410",
    "a secret needs at least two values",
    bad=spec(secret="group in {A}"),
    good=GOOD,
    explanation="Pufferfish protects pairs of secret values; one value gives nothing to protect.",
)
def check_secret_values(ctx: Context):
    for sc in ctx.spec.scenarios:
        v = sc.secret.values
        if v and len(set(v)) < 2:
            yield diag(
                "DPS410",
                f"the secret `{sc.secret.attribute}` of `{sc.name}` has a single value",
                sc.secret,
                "values",
                hint="list at least two values, e.g. `secret race in {White, Black}`",
            )
        if v and len(set(v)) != len(v):
            yield diag("DPS410", "a secret value is listed twice", sc.secret, "values", hint="list each value once")


@rule(
    "DPS415",
    "pairs name values the secret does not take",
    bad=spec(extra="  pairs [(A, Z)]\n"),
    good=spec(extra="  pairs [(A, B)]\n"),
    explanation="Discriminative pairs are pairs of the secret's declared values, and a pair needs two different "
    "values.",
)
def check_pairs(ctx: Context):
    for sc in ctx.spec.scenarios:
        if not isinstance(sc.pairs, ir.ExplicitPairs):
            continue
        vals = set(sc.secret.values)
        for a, b in sc.pairs.items:
            if a == b:
                yield diag("DPS415", f"the pair ({a}, {b}) repeats a value", sc.pairs, hint="pair two different values")
            bad = [x for x in (a, b) if vals and x not in vals]
            if bad:
                yield diag(
                    "DPS415",
                    f"pair ({a}, {b}) names {', '.join(bad)}, not among the secret's values",
                    sc.pairs,
                    hint=f"the values are: {', '.join(sorted(vals))}",
                )


@rule(
    "DPS434",
    "a prior family whose ranges no distribution satisfies",
    bad=spec(secret="group in {A, B}", prior="bernoulli(p in [0.7, 0.2])"),
    good=spec(secret="group in {A, B}", prior="bernoulli(p in [0.2, 0.7])"),
    explanation="`bernoulli(p in [lo, hi])` (a two-valued secret) and `categorical(p in [[lo, hi], ...])` (one range "
    "per value, in order) describe families of independent product priors; each range must lie in "
    "[0, 1] with lo ≤ hi, and some distribution must fit all ranges (Σ lo ≤ 1 ≤ Σ hi).",
)
def check_prior_ranges(ctx: Context):
    for sc in ctx.spec.scenarios:
        n_values = 2 if sc.secret.predicate is not None or sc.secret.membership else len(sc.secret.values)
        for w in sc.worlds:
            if isinstance(w, ir.BernoulliWorld):
                ranges = [(w.p_low, w.p_high)]
                if n_values and n_values != 2:
                    yield diag(
                        "DPS434",
                        f"`bernoulli` is a prior for a two-valued secret; `{sc.secret.attribute}` has "
                        f"{n_values} values",
                        w,
                        hint="use `categorical(p in [[lo, hi], ...])`",
                    )
            elif isinstance(w, ir.CategoricalWorld):
                ranges = list(w.ranges)
                if n_values and len(ranges) != n_values:
                    yield diag(
                        "DPS434",
                        f"`categorical` gives {len(ranges)} ranges for {n_values} secret values",
                        w,
                        "ranges",
                        hint="give one [lo, hi] per value, in the order of the secret's values",
                    )
            else:
                continue
            if any(not (0.0 <= lo <= hi <= 1.0) for lo, hi in ranges):
                yield diag(
                    "DPS434",
                    "a probability range must satisfy 0 ≤ lo ≤ hi ≤ 1",
                    w,
                    hint="for example bernoulli(p in [0.2, 0.5])",
                )
            elif isinstance(w, ir.CategoricalWorld) and (
                sum(lo for lo, _ in ranges) > 1 + 1e-12 or sum(hi for _, hi in ranges) < 1 - 1e-12
            ):
                yield diag(
                    "DPS434",
                    "no distribution has probabilities in these ranges (Σ lo ≤ 1 ≤ Σ hi fails)",
                    w,
                    "ranges",
                    hint="widen the ranges",
                )


# --- compile-stage rules (data dependent) -------------------------------------------------------

register_front_end(
    "DPS409",
    "empty secret class",
    "compile",
    bad=spec(secret="group in {A, B, C, D}"),
    good=GOOD,
    explanation="A declared secret value with no records has zero prior mass; its pairs would be silently unprotected.",
)
register_front_end(
    "DPS412",
    "the data has undeclared secret values",
    "compile",
    bad=spec(secret="group in {A, B}"),
    good=GOOD,
    explanation="Every value the secret takes in the data must be declared (or the data filtered).",
)
register_front_end(
    "DPS416",
    "unknown column",
    "compile",
    bad=spec(query="mean(x1, x9, bounds = [0, 10])"),
    good=GOOD,
    explanation="The query or secret names a column the bound data does not have.",
)
register_front_end(
    "DPS417",
    "missing or non-finite values in an SWM release's query columns",
    "compile",
    bad="(see tests under tests/pufferfish/: needs bound data)",
    good=GOOD,
    explanation="The SWM calibration reads the bound data at compile time; a missing or non-finite value in a query "
    "column has no clamped value, so the release refuses the data (drop or impute those rows first).",
)
register_front_end(
    "DPS418",
    "the data binding cannot be loaded",
    "compile",
    bad=spec().replace(
        "synthetic(generator = secret_groups, size = 600, seed = 1)", 'csv("adult/adult.names")'
    ),  # a text file that is not a table (an unknown schema name is DPS153, found by `check`)
    good=GOOD,
)
