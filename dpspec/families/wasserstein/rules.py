"""Check rules of the Wasserstein mechanism (DPS430–DPS433, DPS435); DPS434 (prior ranges) is a scenario rule
in :mod:`dpspec.check.rules_pufferfish`."""

from __future__ import annotations

from dpspec.check.framework import Context, diag, register_front_end, releases_of, rule
from dpspec.ir import models as ir

_SC = (
    "scenario s {{\n  data   synthetic(generator = secret_groups, size = 600, seed = 1)\n"
    "  secret {secret}\n  prior  {prior}\n}}\n"
)
_REL = "release r {{\n  mechanism wasserstein\n{output}  query     {query}\n  guarantee pufferfish(epsilon = 1)\n}}\n"


def spec(secret="group in {A, B, C}", prior="empirical", output="aggregate", query="mean(x1, x2, bounds = [0, 10])"):
    out = f"  output    {output}\n" if output else ""
    return _SC.format(secret=secret, prior=prior) + _REL.format(output=out, query=query)


GOOD = spec()
_RECORD_WORLDS = (ir.EmpiricalWorld, ir.BalancedWorld, ir.BernoulliWorld, ir.CategoricalWorld)


def _releases(ctx: Context):
    for r in releases_of(ctx, __name__):
        sc = ctx.resolve_protects(r)
        yield r, sc if isinstance(sc, ir.Scenario) else None


@rule(
    "DPS430",
    "a Pufferfish release that does not say what it releases",
    bad=spec(output=""),
    good=GOOD,
    explanation="Under a record-level prior (empirical, balanced, bernoulli) the same query can be read as one "
    "answer per record or as one aggregate of the whole dataset, and the two need very different noise "
    "(a mean's aggregate moves by about range / n). The release must say which: `output aggregate` or "
    "`output per_record`.",
)
def check_output(ctx: Context):
    for r, _sc in _releases(ctx):
        if r.output is None:
            yield diag(
                "DPS430",
                f"`{r.name}` does not say what is released",
                r,
                hint="add `output aggregate` (one answer for the dataset) or `output per_record`",
            )


@rule(
    "DPS431",
    "the Wasserstein mechanism with a sampled prior",
    bad=(
        "scenario s {\n  data   synthetic(generator = secret_groups, size = 600, seed = 1)\n  secret group in {A, B}\n"
        '  prior  sampler("dpspec.pufferfish.examples:draw_groups", samples = 200)\n}\n'
        "release r {\n  mechanism wasserstein\n  output    aggregate\n  query     mean(x1, x2, bounds = [0, 10])\n"
        "  guarantee pufferfish(epsilon = 1)\n}\n"
    ),
    good=GOOD,
    explanation="The Wasserstein mechanism needs the exact ∞-Wasserstein distance of the conditional laws; draws "
    "from a sampler only estimate it, and no sound multivariate bound is claimed. Declare the sampler "
    "exhaustive if its draws enumerate the law, or use the SWM (which has a PAC reading).",
)
def check_sampled(ctx: Context):
    for r, sc in _releases(ctx):
        for w in sc.worlds if sc is not None else ():
            if isinstance(w, ir.SamplerWorld) and not w.exhaustive:
                yield diag(
                    "DPS431",
                    f"`{r.name}` needs exact conditional laws, but the sampler prior only draws them",
                    w,
                    hint="declare `exhaustive = true` if the draws enumerate the law, or use `mechanism swm`",
                )


@rule(
    "DPS432",
    "an aggregate that is not a sum of per-record terms",
    bad=spec(query="vector(dimension = 2, sensitivity = 1)"),
    good=GOOD,
    explanation="The aggregate bound (W∞ of the aggregate ≤ c × a record's W∞, Lemma A) needs f(X) = c·Σ g(x_j): "
    "mean, sum or histogram with declared bounds.",
)
def check_query(ctx: Context):
    for r, _sc in _releases(ctx):
        if r.query is not None and r.query.function not in ("mean", "sum", "histogram"):
            yield diag(
                "DPS432",
                f"the Wasserstein mechanism releases mean, sum or histogram, not `{r.query.function}`",
                r.query,
                hint="use mean, sum or histogram with declared bounds",
            )


@rule(
    "DPS433",
    "a membership secret with a query other than an aggregate sum",
    bad=spec(secret="member(record)"),
    good=spec(secret="member(record)", query="sum(x1, x2, bounds = [0, 10])"),
    explanation="With `secret member(record)` the record is present or absent; a sum over the records present "
    "moves by that record's own contribution (Lemma B), but a mean's normaliser moves too. Membership is "
    "supported for `sum` with `output aggregate`.",
)
def check_membership(ctx: Context):
    for r, sc in _releases(ctx):
        if sc is None or not sc.secret.membership or r.query is None:
            continue
        if r.query.function != "sum" or r.output == "per_record":
            yield diag(
                "DPS433",
                "a membership secret is supported for `query sum(...)` with `output aggregate`",
                r.query,
                hint="release a sum of the records present",
            )


register_front_end(
    "DPS435",
    "a per-record release under a dataset-level prior (or both kinds mixed)",
    "compile",
    bad=spec(prior="groups", output="per_record"),
    good=spec(prior="groups"),
    explanation="`groups` and sampler priors draw whole datasets, so their release is an aggregate; "
    "an aggregate bound also cannot mix them with record-level priors in one release.",
)


_MARKOV = (
    "scenario s {{\n  data   synthetic(generator = markov_chain, size = 200, seed = 1)\n  secret state in {{0, 1}}\n"
    "  prior  markov(states = [0, 1], transitions in [[[0.8, 0.2], [0.3, 0.7]]])\n}}\n"
    "release r {{\n  mechanism {mech}  output aggregate\n  query     mean(state, bounds = [0, 1])\n"
    "  guarantee pufferfish(epsilon = 1)\n}}\n"
)
register_front_end(
    "DPS436",
    "a Markov-chain prior with another mechanism, or a Markov prior that does not fit the data",
    "compile",
    bad=_MARKOV.format(mech="wasserstein\n"),
    good=_MARKOV.format(mech="markov_quilt\n"),
    explanation="`prior markov(...)` says the records are the steps of one Markov chain; only the Markov Quilt "
    "Mechanism accounts for that correlation. Its states must cover the data's, its matrices must be stochastic "
    "and k × k, and a reversible class needs both min_stationary and max_eigenvalue.",
)


_SHARE = "fraction(where = group == A) in {0.45, 0.55}"
register_front_end(
    "DPS437",
    "a dataset-level proportion or mean secret outside the derivation of Lemma D or E",
    "compile",
    bad=spec(secret=f"share = {_SHARE}", output="per_record"),
    good=spec(secret=f"share = {_SHARE}"),
    explanation='A proportion secret (`secret share = fraction(where = sex == "Female") in {0.45, 0.55}`) is '
    "about the whole dataset. Its bound (Lemma D of the Wasserstein PROOF.md: c · W∞(Binomial(n, p), "
    "Binomial(n, p′)) · a record's W∞ between its laws given the predicate) holds for an aggregate release "
    "(`output aggregate`) of mean, sum or histogram by the Wasserstein mechanism, under `prior empirical` read as "
    "i.i.d. records whose predicate holds with the secret probability; the data must have records on both sides "
    "of the predicate. A mean secret (`secret avg_age = mean(age, bounds = [17, 90]) in {40, 45}`) is bounded by "
    "Lemma E (c · n · |μ − μ′| · the weight of the query's coordinates on that column) under `prior empirical` "
    "read as a location family (the data's law with the column shifted to the secret mean), for an aggregate "
    "mean or sum whose columns include the secret's (numeric) column. Other mechanisms, priors, queries and "
    "per-record releases are refused.",
)

register_front_end(
    "DPS444",
    "a threshold secret about the whole dataset (a mean or proportion above a value against the rest)",
    "lower",
    bad=spec(secret="old = mean(x1) > 5"),
    good=spec(secret="avg_x1 = mean(x1, bounds = [0, 10]) in {4, 5}", query="mean(x1, bounds = [0, 10])"),
    explanation="`secret old = mean(age) > 40` (or `fraction(where = …) > 0.5`) asks to hide which side of a "
    "threshold the dataset is on. Each side holds datasets (or, under the i.i.d. families of Lemmas D and E, "
    "parameters) whose answers differ by as much as the whole range of the attribute — proportion 1 against 0, "
    "or a mean near the top of the range against one near the bottom — so the only sound W∞ bound is the "
    "range itself, the noise of releasing nothing (Wasserstein PROOF.md §3.9). A useful bound needs more "
    "assumptions (a prior over the parameter); protect candidate values instead: "
    "`mean(age, bounds = [17, 90]) in {40, 45}` or `fraction(where = …) in {0.45, 0.55}`.",
)
