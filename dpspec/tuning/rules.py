"""Check rules of the ``tune`` block (DPS950–DPS959)."""

from __future__ import annotations

import math

from dpspec.check.framework import Context, diag, register_front_end, rule
from dpspec.ir import models as ir

_BASE = "privacy people { unit record  dataset_size 60000 }\n"
_TRAIN = (
    "train model { protect people  mechanism dpsgd  sampling poisson(expected_batch = 600)  "
    "clipping flat(C = 1.0)  steps 20 }\n"
)


def _tune(body: str, train: str = _TRAIN) -> str:
    return _BASE + train + "tune search { train model  " + body + " }\n"


_GOOD = _tune(
    "candidates { learning_rate [0.1, 0.5] }  runs 2  select best(score = accuracy)  "
    "guarantee dp(epsilon = 8, delta = 1e-6)"
)

register_front_end(
    "DPS950",
    "a setting that cannot be tuned",
    "lower",
    bad=_tune(
        "candidates { optimizer [sgd, adam] }  runs 2  select best(score = accuracy)  "
        "guarantee dp(epsilon = 8, delta = 1e-6)"
    ),
    good=_GOOD,
    explanation="A `tune` block searches settings whose values the training's compile function reads: "
    "learning_rate, momentum, epochs, steps, noise_multiplier, regularization, degree_cap, clipping, "
    "sampling, propagation. Anything else is code the runtime's train function chooses, outside the certificate.",
)
register_front_end(
    "DPS959",
    "the whole tuning procedure misses its target",
    "compile",
    bad=_tune(
        "candidates { learning_rate [0.1, 0.5] }  runs fixed(count = 500)  select best(score = accuracy)  "
        "guarantee dp(epsilon = 0.05, delta = 1e-6)"
    ),
    good=_GOOD,
    explanation="No noise multiplier in the searched range makes the best-of-K procedure meet the target, or "
    "the given noise does not. Raise ε, make fewer runs (a random number of runs is much cheaper "
    "than a fixed one), or train for fewer steps.",
)


#: each candidate is compiled; a larger grid is refused (DPS955)
MAX_CANDIDATES = 1000

#: the largest expected number of runs E[K] (DPS955): more runs are impractical, and the accounting's numerics
#: (E[K] in a double, the privacy-profile floors δ/E[K]) are not validated beyond
MAX_MEAN_RUNS = 1e6

#: a candidate key → the family setting it sets (`noise_multiplier 1.1` is the train block's `noise` shortcut)
_FAMILY_SETTING = {"noise_multiplier": "noise"}

_NOT_TUNED = ("protect", "mechanism", "description", "guarantee", "execution")


def family_score(t: ir.Training) -> tuple[float, str] | None:
    """A private score's sensitivity to one unit of a family whose unit is not a record or group, and what the
    score may read for it to hold (the family's ``tune_score`` hook); None: not covered."""
    from dpspec.families import family, load

    f = family(t.mechanism)
    if f is None or not f.tune_score:
        return None
    out = load(f.tune_score)(t)
    return None if out is None else (float(out[0]), str(out[1]))


def _trainings(ctx: Context) -> dict[str, ir.Training]:
    return {t.name: t for t in ctx.spec.trainings}


@rule(
    "DPS951",
    "a tuning names no training",
    bad=_tune(
        "candidates { learning_rate [0.1] }  runs 2  select best(score = accuracy)  "
        "guarantee dp(epsilon = 8, delta = 1e-6)"
    ).replace("train model  candidates", "train modle  candidates"),
    good=_GOOD,
)
def tune_names_a_training(ctx: Context):
    """A `tune` block's `train` must name a `train` block of the spec."""
    trains = _trainings(ctx)
    seen: dict[str, str] = {}
    for tu in ctx.spec.tunings:
        if tu.train not in trains:
            if tu.train in ctx.failed:
                continue
            from dpspec.diagnostics import did_you_mean

            yield diag(
                "DPS951",
                f"`{tu.name}` tunes `{tu.train}`, which is not a training",
                tu,
                "train",
                hint=did_you_mean(tu.train, tuple(trains), "training") or "name a `train` block of this spec",
            )
        elif tu.train in seen:
            yield diag(
                "DPS951",
                f"`{tu.train}` is tuned twice (by `{seen[tu.train]}` and `{tu.name}`)",
                tu,
                "train",
                hint="tune each training in one `tune` block; list every setting to search in its candidates",
            )
        seen.setdefault(tu.train, tu.name)


@rule(
    "DPS952",
    "a training whose guarantee the selection bounds cannot use",
    bad=_BASE.replace("privacy people { unit record  dataset_size 60000 }", "privacy links { unit edge  graph cora }")
    + "train g { protect links  mechanism gcon  regularization 0.2 }\n"
    "tune search { train g  candidates { regularization [0.1, 0.2] }  runs poisson(mean = 2)  "
    "select best(score = accuracy, on = public)  guarantee rdp(alpha = 8, epsilon = 2) }\n",
    good=_GOOD,
)
def tuned_family_composes(ctx: Context):
    """The selection bounds take each run's Rényi DP curve (Papernot & Steinke 2022) or its privacy profile. A
    family certified in (ε, δ) only (GCON's objective perturbation) is tuned under an (ε, δ) guarantee, with a
    public score or a private score whose sensitivity the family states (its ``tune_score`` hook): a fixed number
    of runs by basic composition, a random number by the privacy-profile bound from each run's (ε, δ) (its
    randomized-response pair's profile). A notion that does not compose (SRPP-SGD's Pufferfish privacy) cannot be
    tuned; the tuning's own guarantee must be (ε, δ)-DP or Rényi DP."""
    from dpspec.families import family

    trains = _trainings(ctx)
    for tu in ctx.spec.tunings:
        t = trains.get(tu.train)
        if not isinstance(tu.guarantee, (ir.DpGuarantee, ir.RdpGuarantee)):
            yield diag(
                "DPS952",
                "a tuning is certified in (ε, δ)-DP or Rényi DP",
                tu,
                "guarantee",
                hint="write `guarantee dp(epsilon = 8, delta = 1e-6)`",
            )
        if t is None:
            continue
        f = family(t.mechanism)
        dp_only = f is not None and "dp" in f.notions and not (f.composable and "rdp" in f.notions)
        if dp_only and (tu.select.on == "public" or family_score(t) is not None):
            if isinstance(tu.guarantee, ir.RdpGuarantee):
                yield diag(
                    "DPS952",
                    f"`{t.name}` ({t.mechanism}) is certified in (ε, δ) only, so its tuning is certified in (ε, δ)",
                    tu,
                    "guarantee",
                    hint="write `guarantee dp(epsilon = 4, delta = 1e-5)`",
                )
            continue  # (ε, δ) runs: basic composition, or the privacy-profile bound (dpspec.tuning.compile)
        if f is None or not f.composable or "rdp" not in f.notions:
            yield diag(
                "DPS952",
                f"`{t.name}` ({t.mechanism}) is not certified by a Rényi DP curve, which the selection bounds need",
                tu,
                "train",
                hint="a family certified in (ε, δ) only is tuned under an (ε, δ) guarantee with a public score or "
                "a private one its family bounds; a family whose notion does not compose (Pufferfish) cannot be "
                "tuned: fix its settings on public data",
            )


@rule(
    "DPS953",
    "a candidate setting the training's mechanism does not read",
    bad=_tune(
        "candidates { regularization [0.1, 0.2] }  runs 2  select best(score = accuracy)  "
        "guarantee dp(epsilon = 8, delta = 1e-6)"
    ),
    good=_GOOD,
)
def candidates_belong_to_family(ctx: Context):
    """Each tuned setting must be one the training's family reads (as in its `train` block, DPS130)."""
    from dpspec.families import allowed_settings, family

    trains = _trainings(ctx)
    for tu in ctx.spec.tunings:
        t = trains.get(tu.train)
        f = family(t.mechanism) if t is not None else None
        if t is None or f is None:
            continue
        allowed = allowed_settings(f)
        from dpspec.lower.lowering import TUNABLE

        for c in tu.candidates:
            if (_FAMILY_SETTING.get(c.key, c.key)) not in allowed:
                yield diag(
                    "DPS953",
                    f"`{t.mechanism}` does not read `{c.key}`, so tuning it changes nothing the certificate covers",
                    c,
                    "key",
                    hint="tune one of: "
                    + ", ".join(k for k in TUNABLE if _FAMILY_SETTING.get(k, k) in allowed and k not in _NOT_TUNED),
                )


@rule(
    "DPS954",
    "the per-run target and the whole-procedure target conflict",
    bad=_tune(
        "candidates { learning_rate [0.1, 0.5] }  runs 2  select best(score = accuracy)  "
        "guarantee dp(epsilon = 8, delta = 1e-6)",
        train=_TRAIN.replace("steps 20 }", "steps 20  guarantee dp(epsilon = 1, delta = 1e-6) }"),
    ),
    good=_tune(
        "candidates { learning_rate [0.1, 0.5] }  runs 2  select best(score = accuracy)  guarantee dp(delta = 1e-6)",
        train=_TRAIN.replace("steps 20 }", "steps 20  guarantee dp(epsilon = 1, delta = 1e-6) }"),
    ),
)
def one_target(ctx: Context):
    """Either the training states each run's target (and the tuning reports the whole procedure's ε:
    `guarantee dp(delta = 1e-6)`), or the tuning states the whole procedure's target and dpspec calibrates
    the runs — not both, and not neither (unless the noise is given)."""
    trains = _trainings(ctx)
    for tu in ctx.spec.tunings:
        t = trains.get(tu.train)
        if t is None:
            continue
        own = "guarantee" in t.field_spans
        whole = getattr(tu.guarantee, "epsilon", None)
        noise = getattr(t.settings, "noise", None) is not None or any(
            c.key == "noise_multiplier" for c in tu.candidates
        )
        if own and whole is not None:
            yield diag(
                "DPS954",
                f"`{t.name}` states a per-run target and `{tu.name}` a whole-procedure target",
                tu,
                "guarantee",
                hint="keep one: drop the tuning's epsilon to certify from the runs' "
                "targets, or drop the training's guarantee to calibrate the runs",
            )
        elif (
            own
            and isinstance(t.guarantee, ir.DpGuarantee)
            and isinstance(tu.guarantee, ir.DpGuarantee)
            and t.guarantee.delta != tu.guarantee.delta
        ):
            yield diag(
                "DPS954",
                f"the runs are certified at δ = {t.guarantee.delta:g} but the tuning at δ = {tu.guarantee.delta:g}",
                tu,
                "guarantee",
                hint="use the same δ in both",
            )
        elif not own and whole is None and not noise:
            yield diag(
                "DPS954",
                f"neither `{tu.name}` nor `{t.name}` gives a target ε, and no noise is given",
                tu,
                "guarantee",
                hint="give the whole procedure's target: `guarantee dp(epsilon = 8, delta = 1e-6)`",
            )
        elif own and noise:
            yield diag(
                "DPS954",
                f"`{t.name}` gives both its noise and a per-run target",
                t,
                "guarantee",
                hint="give one of them",
            )


@rule(
    "DPS955",
    "a run count, draw or score noise out of range",
    bad=_tune(
        "candidates { learning_rate [0.1, 0.5] }  runs poisson(mean = 0)  select best(score = accuracy)  "
        "guarantee dp(epsilon = 8, delta = 1e-6)"
    ),
    good=_GOOD,
)
def tuning_numbers(ctx: Context):
    """Run counts: `fixed(count >= 1)`, `poisson(mean > 0)`, `truncated_negative_binomial(eta > -1,
    0 < gamma < 1)`, each with an expected number of runs E[K] of at most 10^6 (more runs are impractical, and the
    accounting's numerics are not validated beyond). Draw weights: one per candidate of the grid, non-negative,
    summing to 1. `score_noise` > 0. At most 1000 candidates (each is compiled)."""
    for tu in ctx.spec.tunings:
        r = tu.runs
        if r.kind == "fixed" and not (r.count or 0) >= 1:
            yield diag(
                "DPS955",
                f"a fixed number of runs must be at least 1, found {r.count}",
                r,
                "count",
                hint="write e.g. `runs fixed(count = 10)`",
            )
        if r.kind == "poisson" and not (r.mean or 0) > 0:
            yield diag(
                "DPS955",
                f"a Poisson number of runs needs a mean above 0, found {r.mean:g}",
                r,
                "mean",
                hint="write e.g. `runs poisson(mean = 10)`",
            )
        if r.kind == "truncated_negative_binomial":
            if not (r.eta is not None and r.eta > -1):
                yield diag(
                    "DPS955",
                    f"eta must be above -1, found {r.eta:g}",
                    r,
                    "eta",
                    hint="eta = 1 is the geometric distribution, eta = 0 the logarithmic",
                )
            if not (r.gamma is not None and 0 < r.gamma < 1):
                yield diag(
                    "DPS955",
                    f"gamma must lie in (0, 1), found {r.gamma:g}",
                    r,
                    "gamma",
                    hint="a smaller gamma means more runs on average",
                )
        log_mean = _log_mean_runs(r)
        if log_mean is not None and log_mean > math.log(MAX_MEAN_RUNS):
            mean = f"{math.exp(log_mean):.6g}" if log_mean < 709.0 else f"e^{log_mean:.6g}"
            yield diag(
                "DPS955",
                f"the expected number of runs is {mean}, above {MAX_MEAN_RUNS:g}",
                r,
                {"fixed": "count", "poisson": "mean"}.get(r.kind, "gamma"),
                hint="make fewer runs"
                + (
                    ": a truncated negative binomial's mean grows as gamma falls (the geometric, eta = 1, has mean "
                    "1/gamma)"
                    if r.kind == "truncated_negative_binomial"
                    else f", at most {MAX_MEAN_RUNS:g} on average"
                ),
            )
        n = math.prod(len(c.values) for c in tu.candidates)
        if n > MAX_CANDIDATES:
            yield diag(
                "DPS955",
                f"the candidate grid has {n:,} settings, above {MAX_CANDIDATES:,}",
                tu,
                "candidates",
                hint="search fewer values per setting (each candidate is compiled and accounted)",
            )
        if tu.weights is not None:
            w = tu.weights
            if len(w) != n or any(not x >= 0 for x in w) or abs(sum(w) - 1.0) > 1e-9:
                yield diag(
                    "DPS955",
                    f"the draw weights must be {n} non-negative numbers summing to 1 (one per "
                    f"candidate of the grid), found {len(w)} summing to {sum(w):g}",
                    tu,
                    "weights",
                    hint="list one weight per candidate, in the grid's order (the last setting varies fastest)",
                )
        sn = tu.select.score_noise
        if sn is not None and not sn > 0:
            yield diag(
                "DPS955",
                f"score_noise must be above 0, found {sn:g}",
                tu.select,
                "score_noise",
                hint="the standard deviation of the noise on the summed score, e.g. 50",
            )


def _log_mean_runs(r) -> float | None:
    """log E[K] of a run count whose parameters are valid (None otherwise), from logarithms: E[K] may exceed a
    double (gamma = 1e-310), which must give this check's error, not an overflow."""
    from dpspec.accounting.selection import tnb_log_mean

    if r.kind == "fixed":
        return math.log(r.count) if r.count is not None and r.count >= 1 else None
    if r.kind == "poisson":
        return math.log(r.mean) if r.mean is not None and 0 < r.mean < math.inf else None
    if r.kind == "truncated_negative_binomial":
        if r.eta is None or not -1 < r.eta < math.inf or r.gamma is None or not 0 < r.gamma < 1:
            return None
        return tnb_log_mean(float(r.eta), float(r.gamma))
    return None


@rule(
    "DPS956",
    "a private score the unit's analysis does not cover",
    bad="privacy nodes { unit node  graph cora }\n"
    "train enc { protect nodes  mechanism relational_dpsgd  sampling coupled { positive poisson(expected_batch "
    "= 256)  negative without_replacement(per_positive = 4) }  degree_cap 5  clipping per_tuple(C = 1.0)  steps 100 "
    "}\ntune search { train enc  candidates { learning_rate [0.1, 0.5] }  runs 2  select best(score = mrr)  "
    "guarantee dp(epsilon = 8, delta = 1e-6) }\n",
    good="privacy nodes { unit node  graph cora }\n"
    "train enc { protect nodes  mechanism relational_dpsgd  sampling coupled { positive poisson(expected_batch "
    "= 256)  negative without_replacement(per_positive = 4) }  degree_cap 5  clipping per_tuple(C = 1.0)  steps 100 "
    "}\ntune search { train enc  candidates { learning_rate [0.1, 0.5] }  runs 2  "
    "select best(score = mrr, on = public)  guarantee dp(epsilon = 8, delta = 1e-6) }\n",
)
def private_score_unit(ctx: Context):
    """A private score is a sum of per-record values in [0, 1]: one record (or a group of K) changes it by at
    most 1 (or K). For node, edge or secret units that bound is not known, so the score must be computed on
    public data (`on = public`)."""
    trains = _trainings(ctx)
    for tu in ctx.spec.tunings:
        t = trains.get(tu.train)
        if t is None or tu.select.on != "private":
            continue
        d = ctx.resolve_protects(t)
        u = getattr(d, "unit", None)
        if not isinstance(u, (ir.RecordUnit, ir.GroupUnit)) and family_score(t) is None:
            kind = getattr(u, "kind", "secret")
            yield diag(
                "DPS956",
                f"a private score's sensitivity is not known for a {kind} unit",
                tu.select,
                "on",
                hint=f"score on public data: `select best(score = {tu.select.score}, on = public)`",
            )
