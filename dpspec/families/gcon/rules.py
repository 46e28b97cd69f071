"""Rules for GCON (DPS7xx): edge-level DP by objective perturbation (Wei et al.)."""

from __future__ import annotations

from dpspec.check.framework import Context, diag, register_front_end, rule, trainings_with
from dpspec.check.rules_accounting import AccountantRules
from dpspec.families.gcon.settings import GconSettings
from dpspec.ir import models as ir


def spec(
    loss="msml",
    extra="",
    prop="appr(restart = 0.6, steps = [2, inf])",
    reg="regularization 0.2\n",
    g="dp(epsilon = 1, delta = 1e-4)",
    graph="synthetic(generator = sbm_graph, size = 600, seed = 1)",
):
    return (
        f"privacy links {{\n  unit edge\n  data {graph}\n}}\n"
        f"train model {{\n  mechanism   gcon\n  propagation {prop}\n  loss        {loss}\n  {reg}{extra}"
        f"  guarantee   {g}\n}}\n"
    )


GOOD = spec()

#: the refusals of the family's accountant, in the rule catalogue (``dpspec.check.rules_accounting``)
ACCOUNTANT_RULES = AccountantRules(
    "dpspec.accounting.gcon:GCON_RULES",
    "GCON (dpspec.accounting.gcon)",
    "tests/families/gcon",
    GOOD,
)


def _gcon(ctx: Context):
    """``(training, its GconSettings)`` for every GCON training."""
    return trainings_with(ctx, GconSettings)


@rule(
    "DPS703",
    "a loss whose constants are not proven for GCON",
    bad=spec(loss="cross_entropy"),
    good=GOOD,
    explanation="Theorem 1 needs the bounds c1, c2, c3 of the loss's derivatives and a per-class separable loss "
    "(Lemma 7); they are proven for MSML and pseudo-Huber only (App. F). Softmax cross-entropy "
    "couples the classes and breaks Lemma 7.",
)
def check_loss(ctx: Context):
    for _t, s in _gcon(ctx):
        if s.loss is not None and s.loss.kind not in ("msml", "pseudo_huber"):
            yield diag(
                "DPS703",
                f"loss `{s.loss.kind}` is not covered by GCON's Theorem 1",
                s.loss,
                hint="use `loss msml` or `loss pseudo_huber(delta = 0.1)`",
            )


@rule(
    "DPS726",
    "GCON needs its propagation and regularisation",
    bad=spec(reg=""),
    good=GOOD,
    explanation="The sensitivity Ψ of the propagated features depends on the restart and depths, and the noise "
    "on Λ; both must be stated.",
)
def check_required(ctx: Context):
    for t, s in _gcon(ctx):
        if s.propagation is None:
            yield diag(
                "DPS726",
                f"`{t.name}` has no `propagation`",
                t,
                hint="add `propagation appr(restart = 0.6, steps = [2, inf])`",
            )
        if s.regularization is None:
            yield diag("DPS726", f"`{t.name}` has no `regularization`", t, hint="add `regularization 0.2` (Λ)")
        d = ctx.resolve_protects(t)
        if isinstance(d, ir.PrivacyUnitDecl) and d.data is None:
            yield diag("DPS726", f"`{d.name}` names no graph", d, hint="add `graph cora` to the privacy block")


register_front_end(
    "DPS711",
    "feature dimension larger than the number of loss nodes",
    "compile",
    bad=spec(
        extra="encoder     none\n  ",
        g="dp(epsilon = 1, delta = 1e-4)",
        graph="synthetic(generator = sbm_graph, size = 300, seed = 1)",
    ).replace("steps = [2, inf]", "steps = [0, 1, 2, 3, 4, 5, inf]"),
    good=GOOD,
    explanation="Theorem 1's Jacobian bound needs d ≤ n1 (digest §8).",
)
register_front_end(
    "DPS419",
    "the data is not available",
    "compile",
    bad=(
        'scenario s { data csv("no/such/file.csv")  secret group in {A, B} }\n'
        "release r { mechanism swm  query mean(x, bounds = [0, 1])  slices axes  "
        "guarantee ave_srpp(alpha = 4, epsilon = 1) }"
    ),
    good=GOOD,
    explanation="A real dataset the spec names is not under the data root; set DPSPEC_DATA_DIR.",
)
