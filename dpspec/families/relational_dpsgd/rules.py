"""Rules for relational DP-SGD (DPS6xx): entity-level privacy with coupled sampling (Huang et al.)."""

from __future__ import annotations

from dpspec.check.framework import Context, diag, register_front_end, rule, trainings_with
from dpspec.check.rules_accounting import AccountantRules
from dpspec.families.relational_dpsgd.settings import RelationalSettings
from dpspec.ir import models as ir


def spec(
    negative="without_replacement(per_positive = 4)",
    clip="per_tuple(C = 1.0)",
    cap="degree_cap 5\n  ",
    positive="poisson(expected_batch = 32)",
    g="dp(epsilon = 4, delta = 1e-5)",
    extra="",
    graph="synthetic(generator = sbm_graph, size = 400, seed = 1)",
):
    return (
        f"privacy authors {{\n  unit node\n  data {graph}\n}}\n"
        f"train links {{\n  mechanism  relational_dpsgd\n"
        f"  sampling   coupled {{ positive {positive}  negative {negative} }}\n"
        f"  {cap}clipping   {clip}\n  loss       infonce\n  steps      20\n{extra}"
        f"  guarantee  {g}\n}}\n"
    )


GOOD = spec()

#: the refusals of the family's accountant, in the rule catalogue (``dpspec.check.rules_accounting``)
ACCOUNTANT_RULES = AccountantRules(
    "dpspec.accounting.relational:RULES",
    "relational DP-SGD (dpspec.accounting.relational)",
    "tests/families/relational_dpsgd",
    GOOD,
)


def _rel(ctx: Context):
    """``(training, its RelationalSettings)`` for every relational DP-SGD training."""
    return trainings_with(ctx, RelationalSettings)


@rule(
    "DPS611",
    "relational DP-SGD needs its plan",
    bad=spec(cap=""),
    good=GOOD,
    explanation="Eq. (3) and Thm C.1 depend on the coupled sampling (Poisson positives, negatives per positive), "
    "the degree cap K, the per-tuple clipping and the number of steps; a node unit over a graph; and "
    "an (ε, δ) target or the noise.",
)
def check_required(ctx: Context):
    for t, st in _rel(ctx):
        if not isinstance(st.sampling, ir.CoupledSampling):
            yield diag(
                "DPS605" if st.sampling is not None else "DPS611",
                "relational DP-SGD needs coupled sampling: Poisson positives, then negatives per positive"
                + ("" if st.sampling is None else f" (found `{st.sampling.scheme}`)"),
                t,
                "sampling" if st.sampling is not None else None,
                hint="sampling coupled { positive poisson(expected_batch = 64)  "
                "negative without_replacement(per_positive = 4) }",
            )
        if st.degree_cap is None:
            yield diag("DPS611", f"`{t.name}` has no `degree_cap`", t, hint="add `degree_cap 5` (K)")
        if st.clipping is None:
            yield diag("DPS611", f"`{t.name}` has no clipping", t, hint="add `clipping per_tuple(C = 1.0)`")
        elif not isinstance(st.clipping, (ir.PerTupleClipping, ir.FrequencyAdaptiveClipping)):
            yield diag(
                "DPS611",
                f"clipping `{st.clipping.rule}` is not a relational clipping rule",
                t,
                "clipping",
                hint="use per_tuple(C = 1.0) (threshold static or standard) or frequency_adaptive(C = 1.0)",
            )
        if t.schedule.steps is None and t.schedule.epochs is None:
            yield diag("DPS611", f"`{t.name}` states neither `steps` nor `epochs`", t, hint="add `steps 1000`")
        g = t.guarantee
        if not isinstance(g, ir.DpGuarantee):
            yield diag(
                "DPS611",
                "relational DP-SGD certifies (ε, δ)-DP",
                t,
                "guarantee",
                hint="write `guarantee dp(epsilon = 4, delta = 1e-5)`",
            )
        elif g.epsilon is None and st.noise is None:
            yield diag(
                "DPS611",
                f"`{t.name}` gives neither a target ε nor the noise",
                t,
                "guarantee",
                hint="add epsilon to the guarantee, or `noise_multiplier 1.0`",
            )
        d = ctx.resolve_protects(t)
        if isinstance(d, ir.PrivacyUnitDecl) and d.data is None:
            yield diag("DPS611", f"`{d.name}` names no graph", d, hint="add `graph cora` to the privacy block")


_NEG_RULES = {
    "with_replacement": (
        "DPS602",
        "negatives drawn with replacement: a node can be the negative of many tuples, so its sensitivity is unbounded",
    ),
    "in_batch": ("DPS603", "in-batch negatives: one node's encoding enters every tuple of the batch"),
    "content_dependent": (
        "DPS604",
        "negatives that depend on the positives' contents are not cardinality-dependent "
        "sampling (Thm 3 does not apply)",
    ),
}


def _neg_rule(rid):
    kind = next(k for k, (r, _) in _NEG_RULES.items() if r == rid)
    per = "" if kind == "in_batch" else "per_positive = 4"
    return spec(negative=f"{kind}({per})")


def _check_negatives(ctx: Context, rid: str):
    for _t, st in _rel(ctx):
        s = st.sampling
        if isinstance(s, ir.CoupledSampling) and s.negative.scheme in _NEG_RULES:
            r, msg = _NEG_RULES[s.negative.scheme]
            if r == rid:
                yield diag(
                    rid,
                    msg,
                    s.negative,
                    hint="use `negative without_replacement(per_positive = 4)` "
                    "(NEG-SAMPLE-WOR: k_neg·|B+| distinct nodes)",
                )


@rule(
    "DPS602",
    "negatives with replacement",
    bad=_neg_rule("DPS602"),
    good=GOOD,
    explanation="With replacement a node can be drawn as the negative of arbitrarily many tuples, so removing it "
    "changes unboundedly many gradients; Alg. 2 (NEG-SAMPLE-WOR) bounds it by one.",
)
def check_neg_wr(ctx: Context):
    yield from _check_negatives(ctx, "DPS602")


@rule(
    "DPS603",
    "in-batch negatives",
    bad=_neg_rule("DPS603"),
    good=GOOD,
    explanation="In-batch negatives make every positive endpoint a negative of every other tuple: one node "
    "touches the whole batch.",
)
def check_neg_in_batch(ctx: Context):
    yield from _check_negatives(ctx, "DPS603")


@rule(
    "DPS604",
    "negatives that depend on the positives",
    bad=_neg_rule("DPS604"),
    good=GOOD,
    explanation="Corrupting a given endpoint's neighbourhood, degree-based or hard negatives depend on the "
    "private graph beyond cardinalities: the coupled-sampling analysis (Thm 3) does not cover them.",
)
def check_neg_content(ctx: Context):
    yield from _check_negatives(ctx, "DPS604")


@rule(
    "DPS601",
    "FREQ-CLIP at the paper's sensitivity",
    bad=spec(clip="frequency_adaptive(C = 1.0, bound = paper)"),
    good=spec(clip="frequency_adaptive(C = 1.0)"),
    explanation="Prop 4.1 claims sensitivity C for FREQ-CLIP, but removing a node also moves the thresholds of "
    "tuples that do not contain it (the reference counterexample gives 1.75·C). dpspec certifies "
    "FREQ-CLIP only with its corrected bound C/2·(1 + j + i(k_neg+1)/2) (docs/rules.md), or use "
    "per-tuple clipping, which Eq. (3) certifies at C.",
)
def check_freq_paper(ctx: Context):
    for _t, st in _rel(ctx):
        c = st.clipping
        if isinstance(c, ir.FrequencyAdaptiveClipping) and c.bound == "paper":
            yield diag(
                "DPS601",
                "FREQ-CLIP does not have the sensitivity C claimed by Prop 4.1 (counterexample: 1.75·C)",
                c,
                "bound",
                hint="drop `bound = paper` (the corrected bound is certified), or use per_tuple(C = 1.0)",
            )


register_front_end(
    "DPS606",
    "negatives do not fit: k_neg × batch exceeds the nodes",
    "compile",
    bad=spec(negative="without_replacement(per_positive = 40)", positive="poisson(expected_batch = 200)"),
    good=GOOD,
    explanation="NEG-SAMPLE-WOR draws k_neg·|B+| distinct nodes; with more than n it cannot "
    "run, and the analysis of Thm 3 would not hold.",
)
register_front_end(
    "DPS609",
    "node attributes missing",
    "compile",
    bad=spec(extra="  encoder    minilm(max_len = 16)\n"),
    good=GOOD,
    explanation="Every node needs its features or text; missing text is an error unless "
    "`missing_text = empty` encodes it as an empty string (data-independent).",
)
