"""Rules of the sliced Wasserstein mechanism's releases (DPS4xx): the query, the slice profile, the PAC
reading and the notion of a static release. The rules of the scenario itself (its secret, pairs and priors),
shared by every family that protects a scenario's secret, are ``dpspec.check.rules_pufferfish``, whose
``spec`` builds the examples."""

from __future__ import annotations

from dpspec.check.framework import Context, diag, releases_of, rule
from dpspec.check.rules_accounting import AccountantRules
from dpspec.check.rules_pufferfish import GOOD, query_dimension, spec
from dpspec.ir import models as ir

#: the refusals of the family's accountant (and of the sliced sensitivities of ``dpspec.pufferfish`` it calls), in
#: the rule catalogue (``dpspec.check.rules_accounting``)
ACCOUNTANT_RULES = AccountantRules(
    "dpspec.accounting.swm:RULES", "SWM (dpspec.accounting.swm)", "tests/pufferfish", GOOD
)


def _swm_releases(ctx: Context):
    for r in releases_of(ctx, __name__):  # the release families listing this module
        sc = ctx.resolve_protects(r)
        yield r, sc if isinstance(sc, ir.Scenario) else None


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
