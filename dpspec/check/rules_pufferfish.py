"""Rules for Pufferfish scenarios and the sliced Wasserstein mechanism (DPS4xx).

Check-stage rules see only the spec; compile-stage rules (registered with ``stage="compile"``)
depend on the data and are raised while compiling; their examples compile generated data.
"""

from __future__ import annotations

from dpspec.check.framework import Context, diag, register_front_end, releases_of, rule
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


def _swm_releases(ctx: Context):
    for r in releases_of(ctx, __name__):  # the release families listing this module: the SWM
        sc = ctx.resolve_protects(r)
        yield r, sc if isinstance(sc, ir.Scenario) else None


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
    "DPS411",
    "slice directions do not match the query's dimension",
    bad=spec(slices="directions(vectors = [[1, 0], [0, 1]])"),
    good=spec(slices="directions(vectors = [[1, 0, 0], [0, 1, 1]])"),
    explanation="Each slice direction is a vector in the query's output space.",
)
def check_slice_dimension(ctx: Context):
    for r, _sc in _swm_releases(ctx):
        d = query_dimension(r.query)
        s = r.slices
        if d is None or not isinstance(s, ir.FiniteDirections):
            continue
        dims = sorted({len(v) for v in s.directions})
        if dims != [d]:
            yield diag(
                "DPS411",
                f"slice directions have dimension {', '.join(map(str, dims))}, but the query outputs {d} numbers",
                s,
                "directions",
                hint=f"give {d}-dimensional directions",
            )


@rule(
    "DPS413",
    "an SWM release is missing its query or slice profile",
    bad="scenario s { data synthetic(generator = secret_groups, size = 600) secret group in {A, B, C} }\n"
    "release r { mechanism swm  query mean(x1, bounds = [0, 10])  guarantee ave_srpp(alpha = 4, epsilon = 1) }",
    good=GOOD,
    explanation="The sliced Wasserstein mechanism needs the query (what is released) and the slice "
    "profile (which directions measure leakage).",
)
def check_swm_settings(ctx: Context):
    for r, sc in _swm_releases(ctx):
        if r.query is None:
            yield diag("DPS413", f"`{r.name}` has no `query`", r, hint="add `query mean(x1, bounds = [0, 10])`")
        if r.slices is None:
            yield diag(
                "DPS413",
                f"`{r.name}` has no `slices`",
                r,
                hint="add `slices sphere(m = 200, seed = 7)` or `slices axes`",
            )
        if sc is not None and sc.data is None and not all(isinstance(w, ir.SamplerWorld) for w in sc.worlds):
            yield diag(
                "DPS413",
                f"scenario `{sc.name}` has no `data` for its `{sc.worlds[0].world}` prior",
                sc,
                hint='add `data csv("adult/adult.data", schema = adult)` or a synthetic(...) source',
            )


@rule(
    "DPS414",
    "a dataset-level query with a per-record prior",
    bad=spec(query="logistic_regression(x1, x2, bounds = [0, 10], label = group, positive = A)"),
    good=spec(prior="groups", query="logistic_regression(x1, x2, bounds = [0, 10], label = group, positive = A)"),
    explanation="`empirical` and `balanced` priors read one record per secret; a fitted model (or a callable) "
    "is a function of a dataset, so it needs `prior groups` (the secret selects a group of records).",
)
def check_query_world(ctx: Context):
    for r, sc in _swm_releases(ctx):
        if sc is None or r.query is None:
            continue
        if r.query.function in ("logistic_regression", "linear_svm", "callable"):
            for w in sc.worlds:
                if isinstance(w, (ir.EmpiricalWorld, ir.BalancedWorld)):
                    yield diag(
                        "DPS414",
                        f"`{r.query.function}` is computed from a dataset, but the `{w.world}` prior "
                        "gives one record per secret",
                        w,
                        hint="use `prior groups`",
                    )


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


_SAMPLED = (
    'scenario s {{\n  secret group in {{A, B}}\n  prior  sampler("dpspec.pufferfish.examples:draw_groups", '
    "samples = 200)\n}}\nrelease r {{\n  mechanism swm\n  query     callable(target = "
    '"dpspec.pufferfish.examples:column_means", dimension = 2{bounds})\n  slices    axes\n'
    "  guarantee ave_srpp(alpha = 4, epsilon = 1, gamma = 0.05)\n}}\n"
)


@rule(
    "DPS402",
    "a sampled world needs declared output bounds",
    bad=_SAMPLED.format(bounds=""),
    good=_SAMPLED.format(bounds=", bounds = [0, 10]"),
    explanation="With a sampled world the sensitivity is estimated from draws (DKW bands, a PAC reading), and a "
    "sound estimate needs the query's output support (digest §4.1 ⚠: without it the estimator can "
    "under-state Δ).",
)
def check_pac_support(ctx: Context):
    for r, sc in _swm_releases(ctx):
        if sc is None or r.query is None:
            continue
        sampled = any(isinstance(w, ir.SamplerWorld) and not w.exhaustive for w in sc.worlds)
        if sampled and r.query.function == "callable" and not r.query.bounds:
            yield diag(
                "DPS402",
                "this release estimates sensitivities from sampled worlds, so its query needs declared output bounds",
                r.query,
                hint="add bounds = [lo, hi] to the query",
            )


@rule(
    "DPS403",
    "PAC reading without a failure probability",
    bad=spec(slices="sphere(m = 50, seed = 1, reading = monte_carlo)"),
    good=spec(
        slices="sphere(m = 50, seed = 1, reading = monte_carlo)", g="ave_srpp(alpha = 4, epsilon = 1, gamma = 0.05)"
    ),
    explanation="A Monte-Carlo slice profile or a sampled world certifies the guarantee with probability ≥ 1 − γ "
    "(Thms 4.7/4.8); γ must be stated in the guarantee.",
)
def check_gamma(ctx: Context):
    for r, sc in _swm_releases(ctx):
        g = r.guarantee
        if not isinstance(g, ir.SrppGuarantee):
            continue
        pac = isinstance(r.slices, ir.UniformSphere) and r.slices.reading == "monte_carlo"
        sampled = sc is not None and any(isinstance(w, ir.SamplerWorld) and not w.exhaustive for w in sc.worlds)
        if (pac or sampled) and g.gamma is None:
            yield diag(
                "DPS403",
                f"`{r.name}` has a PAC reading ({'Monte-Carlo slices' if pac else 'sampled world'}) but no gamma",
                g,
                hint="add gamma, e.g. ave_srpp(alpha = 4, epsilon = 1, gamma = 0.05)",
            )
        if not (pac or sampled) and g.gamma is not None:
            yield diag(
                "DPS403",
                "gamma is given, but this release is exact for its finite profile",
                g,
                "gamma",
                hint="remove gamma (or use sphere(..., reading = monte_carlo))",
            )


@rule(
    "DPS420",
    "sa-SRPP for a static release",
    bad=spec(g="sa_ave_srpp(alpha = 4, epsilon = 1)"),
    good=GOOD,
    explanation="The subsampling-aware notions average over the sampling of SRPP-SGD; a static release has no "
    "sampling and certifies plain Ave/Joint-SRPP.",
)
def check_sa_static(ctx: Context):
    for r, _sc in _swm_releases(ctx):
        g = r.guarantee
        if isinstance(g, ir.SrppGuarantee) and g.subsampling_aware:
            yield diag(
                "DPS420",
                "a static SWM release certifies plain SRPP, not the subsampling-aware variant",
                g,
                hint=f"use {g.flavour}_srpp(...)",
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
    "DPS418",
    "the data binding cannot be loaded",
    "compile",
    bad=spec().replace(
        "synthetic(generator = secret_groups, size = 600, seed = 1)", 'csv("adult/adult.names")'
    ),  # a text file that is not a table (an unknown schema name is DPS153, found by `check`)
    good=GOOD,
)
