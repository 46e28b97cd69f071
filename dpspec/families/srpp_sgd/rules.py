"""Rules for SRPP-SGD (DPS5xx): sliced Rényi Pufferfish privacy for training (Zhang & Vorobeychik §5)."""

from __future__ import annotations

from dpspec.check.framework import Context, diag, register_front_end, rule, trainings_with
from dpspec.check.rules import dataset_size
from dpspec.check.rules_accounting import AccountantRules
from dpspec.check.rules_schedule import FLIP, two_runs
from dpspec.families.srpp_sgd.settings import SrppSgdSettings
from dpspec.ir import models as ir


def spec(
    extra="",
    sampling="without_replacement(batch_size = 64)",
    disc="label_flip(differing = 20)",
    g="sa_ave_srpp(alpha = 16, epsilon = 8)",
    n="1400",
    clip="flat(C = 1.0)",
):
    disc_line = f"  discrepancy   {disc}\n" if disc else ""
    n_line = f"  dataset_size  {n}\n" if n else ""
    return (
        "scenario prevalence {\n  secret share in {low, high}\n}\n"
        "train model {\n  protect       prevalence\n  mechanism     srpp_sgd\n"
        f"{n_line}{disc_line}  sampling      {sampling}\n  clipping      {clip}\n  steps         200\n"
        f"  learning_rate 0.1\n  momentum      0.9\n{extra}  guarantee     {g}\n}}\n"
    )


GOOD = spec()

#: the refusals of the family's accountant, in the rule catalogue (``dpspec.check.rules_accounting``)
ACCOUNTANT_RULES = AccountantRules(
    "dpspec.accounting.huc:SRPP_RULES",
    "SRPP-SGD (dpspec.accounting.huc)",
    "tests/families/srpp_sgd",
    GOOD,
)


def _srpp(ctx: Context):
    """``(training, its SrppSgdSettings)`` for every SRPP-SGD training."""
    return trainings_with(ctx, SrppSgdSettings)


@rule(
    "DPS511",
    "SRPP-SGD needs its training plan",
    bad=spec(disc=""),
    good=GOOD,
    explanation="The History-Uniform Caps depend on the discrepancy model (how many records the secret can "
    "change), the sampling, the clipping, the step sizes and the number of steps (Prop 5.1); every "
    "one of them must be stated.",
)
def check_required(ctx: Context):
    for t, s in _srpp(ctx):
        need = {
            "discrepancy": ("discrepancy label_flip(differing = 20)", s.discrepancy),
            "sampling": ("sampling without_replacement(batch_size = 64)", s.sampling),
            "clipping": ("clipping flat(C = 1.0)", s.clipping),
            "learning_rate": ("learning_rate 0.1", t.schedule.learning_rate),
        }
        for key, (example, value) in need.items():
            if value is None:
                yield diag("DPS511", f"`{t.name}` has no `{key}`", t, hint=f"add `{example}`")
        if t.schedule.steps is None and t.schedule.epochs is None:
            yield diag("DPS511", f"`{t.name}` states neither `steps` nor `epochs`", t, hint="add `steps 1000`")
        d = ctx.resolve_protects(t)
        if dataset_size(ctx, t) is None and not (isinstance(d, ir.Scenario) and d.data is not None):
            yield diag(
                "DPS511",
                f"`{t.name}` does not say how many records it trains on",
                t,
                hint="add `dataset_size N`, or give the scenario its `data`",
            )
        if isinstance(t.guarantee, ir.SrppGuarantee) and t.guarantee.epsilon is None and s.noise is None:
            yield diag(
                "DPS511",
                f"`{t.name}` gives neither a target ε nor the noise",
                t,
                "guarantee",
                hint="write e.g. `guarantee ave_srpp(alpha = 16, epsilon = 8)`",
            )


@rule(
    "DPS512",
    "a discrepancy larger than the dataset",
    bad=spec(disc="label_flip(differing = 2000)"),
    good=GOOD,
    explanation="The coupled worlds cannot differ in more records than the dataset holds (Δ ≤ N, D_max ≤ N); "
    "a total variation must lie in [0, 1].",
)
def check_discrepancy(ctx: Context):
    for t, s in _srpp(ctx):
        d = s.discrepancy
        if d is None:
            continue
        n = dataset_size(ctx, t)
        for field in ("differing", "d_max"):
            v = getattr(d, field)
            if v is not None and v < 0:
                yield diag(
                    "DPS512",
                    f"`{field}` must be ≥ 0, got {v}",
                    d,
                    field,
                    hint=f"the number of records the secret changes, e.g. {field} = 20",
                )
            elif v is not None and n is not None and v > n:
                yield diag(
                    "DPS512", f"`{field}` = {v} is larger than the dataset ({n} records)", d, field, hint=f"at most {n}"
                )
        for field in ("tv", "flip"):
            v = getattr(d, field)
            if v is not None and not 0 <= v <= 1:
                yield diag(
                    "DPS512", f"`{field}` must lie in [0, 1], got {v:g}", d, field, hint="a probability such as 0.01"
                )
        for field in ("tail_delta",):
            v = getattr(d, field)
            if v is not None and not 0 < v < 1:
                yield diag("DPS512", f"`{field}` must lie in (0, 1), got {v:g}", d, field, hint="for example 1e-7")


@rule(
    "DPS501",
    "HUC with sampling with replacement",
    bad=spec(sampling="with_replacement(batch_size = 64)", g="ave_srpp(alpha = 16, epsilon = 8)"),
    good=spec(sampling="with_replacement(batch_size = 64)"),
    explanation="With replacement, one affected record can be drawn B times: the worst-case cap collapses to the "
    "whole batch (App. I, Prop I.1), so HUC gives no useful bound. The sa-HUC accountant (an "
    "on-average notion) handles it; or sample without replacement.",
)
def check_wr(ctx: Context):
    for t, s in _srpp(ctx):
        acc = s.accountant or ("sa_huc" if getattr(t.guarantee, "subsampling_aware", False) else "huc")
        if isinstance(s.sampling, ir.WithReplacementSampling) and acc != "sa_huc":
            yield diag(
                "DPS501",
                "the HUC accountant with sampling with replacement: the cap collapses to the batch size",
                s.sampling,
                hint="sample without_replacement(...), or certify sa_ave_srpp with the sa-HUC accountant",
            )


@rule(
    "DPS505",
    "an accountant that does not certify the stated notion",
    bad=spec(extra="  accountant    huc\n"),
    good=GOOD,
    explanation="sa-HUC (Prop 5.2) bounds sa-SRPP, an on-average notion over the subsampling pattern (§3.3); "
    "HUC and the amplified accountant bound worst-case SRPP. The guarantee and the accountant must "
    "agree, so that an on-average bound is never presented as SRPP.",
)
def check_accountant(ctx: Context):
    for t, s in _srpp(ctx):
        g = t.guarantee
        if s.accountant is None or not isinstance(g, ir.SrppGuarantee):
            continue
        if g.subsampling_aware != (s.accountant == "sa_huc"):
            want = "sa_huc" if g.subsampling_aware else "huc"
            yield diag(
                "DPS505",
                f"accountant `{s.accountant}` does not certify {'sa-' if g.subsampling_aware else ''}{g.flavour}-SRPP",
                t,
                "accountant",
                hint=f"use `accountant {want}`, or change the guarantee",
            )


def _train(name, g):
    text = spec(g=g)
    return text[text.index("train model") :].replace("train model", f"train {name}")


_TWO = "compose both { parts [a, b]  guarantee sa_ave_srpp(alpha = 16) }\n"


@rule(
    "DPS504",
    "SRPP-SGD runs composed under different α, slice profile or flavour",
    bad=spec().split("train model")[0]
    + _train("a", "sa_ave_srpp(alpha = 16, epsilon = 8)")
    + _train("b", "sa_joint_srpp(alpha = 16, epsilon = 8)")
    + _TWO,
    good=spec().split("train model")[0]
    + _train("a", "sa_ave_srpp(alpha = 16, epsilon = 8)")
    + _train("b", "sa_ave_srpp(alpha = 16, epsilon = 8)")
    + _TWO,
    explanation="Thm 5.8 adds the ε of SRPP-SGD runs only when they share the order α, the slice profile and the "
    "flavour (and use independent randomness).",
)
def check_composition(ctx: Context):
    by_name = {t.name: t for t in ctx.spec.trainings}
    for c in ctx.spec.compositions:
        parts = [by_name[p] for p in c.parts if p in by_name and isinstance(by_name[p].settings, SrppSgdSettings)]
        if not parts:
            continue
        keys = {
            (p.guarantee.alpha, p.guarantee.flavour, p.guarantee.subsampling_aware)
            for p in parts
            if isinstance(p.guarantee, ir.SrppGuarantee)
        }
        g = c.guarantee
        if isinstance(g, ir.SrppGuarantee):
            keys.add((g.alpha, g.flavour, g.subsampling_aware))
        if len(keys) > 1:
            yield diag(
                "DPS504",
                f"composition `{c.name}` mixes SRPP-SGD runs of different order, flavour or "
                "sa-ness: " + ", ".join(f"α = {a:g} {'sa-' if s else ''}{f}" for a, f, s in sorted(keys)),
                c,
                "parts",
                hint="use the same α and the same guarantee kind in every part (Thm 5.8)",
            )


register_front_end(
    "DPS513",
    "the SRPP-SGD plan is invalid",
    "compile",
    bad=spec(extra="  lr_schedule   cosine(warmup = 1.5)\n"),
    good=GOOD,
    explanation="The training plan is checked once more when it is built (schedule, clipping, "
    "sampling); a plan the accountant cannot use is refused with the core's message.",
)


# --- DPS143: SRPP-SGD runs of one scenario composed under different discrepancy models ---------------


def _discrepancy_key(ctx: Context, t: ir.Training):
    d = t.settings_as(SrppSgdSettings).discrepancy
    disc = d.model_dump(exclude={"span", "field_spans"}) if d is not None else None
    return disc, dataset_size(ctx, t)


def _describe_discrepancy(key) -> str:
    disc, n = key
    if disc is None:
        return "no discrepancy model"
    args = {
        "localized": ("d_max",),
        "label_flip": ("differing",),
        "iid": ("tv", "tail_delta"),
        "monte_carlo": ("flip", "draws", "gamma", "tail_delta", "seed"),
    }[disc["kind"]]
    text = f"{disc['kind']}({', '.join(f'{a} = {disc[a]:g}' for a in args if disc.get(a) is not None)})"
    return text + (f" on {n} records" if n else "")


@rule(
    "DPS143",
    "one scenario composed under different discrepancy models",
    bad=two_runs(FLIP, "label_flip(differing = 2)"),
    good=two_runs(FLIP, FLIP),
    explanation="A discrepancy model says how many records the secret can change between the coupled worlds "
    "of a scenario — a property of the scenario and its data, not of one run. Composing SRPP-SGD "
    "runs that declare different models (or train on different numbers of records) adds costs "
    "computed for different worlds, and the sum bounds neither: the composed certificate would rest "
    "on the weaker model silently. Declare one model for every run of the scenario.",
)
def check_discrepancy_composition(ctx: Context):
    by_name = {t.name: t for t in ctx.spec.trainings}
    for c in ctx.spec.compositions:
        runs: dict[str, list] = {}
        for p in c.parts:
            t = by_name.get(p)
            if t is not None and isinstance(t.settings, SrppSgdSettings):
                d = ctx.resolve_protects(t)
                if d is not None:
                    runs.setdefault(d.name, []).append(t)
        for scenario, ts in runs.items():
            keys = {t.name: _discrepancy_key(ctx, t) for t in ts}
            sizes = {n for _d, n in keys.values() if n is not None}  # a run without one reads the scenario's data
            if len({repr(d) for d, _n in keys.values()}) > 1 or len(sizes) > 1:
                yield diag(
                    "DPS143",
                    f"composition `{c.name}` adds SRPP-SGD runs of scenario `{scenario}` "
                    "under different discrepancy models: "
                    + "; ".join(f"`{n}`: {_describe_discrepancy(k)}" for n, k in keys.items()),
                    c,
                    "parts",
                    hint="give every run of the scenario the same `discrepancy` and dataset size",
                )
