"""A training's length given twice (DPS144), for the families that list this module in their ``rules``
(``dpspec/families/__init__.py``): those whose length is `steps` or `epochs` and that have no rule of their own for
the conflict (DP-SGD's is DPS128).
"""

from __future__ import annotations

from dpspec.check.framework import Context, diag, rule, trainings_of


def two_runs(disc_a: str, disc_b: str, extra: str = "") -> str:
    """Two SRPP-SGD runs of one scenario, composed: the examples of DPS144 here and of SRPP-SGD's DPS143."""
    runs = "".join(
        f"train {name} {{\n  protect       prevalence\n  mechanism     srpp_sgd\n  dataset_size  1400\n"
        f"  discrepancy   {disc}\n  sampling      without_replacement(batch_size = 64)\n"
        f"  clipping      flat(C = 1.0)\n  steps         100\n{extra if name == 'a' else ''}  learning_rate 0.1\n"
        "  guarantee     sa_ave_srpp(alpha = 16, epsilon = 4)\n}\n"
        for name, disc in (("a", disc_a), ("b", disc_b))
    )
    return (
        "scenario prevalence {\n  secret share in {low, high}\n}\n"
        + runs
        + "compose both { parts [a, b]  guarantee sa_ave_srpp(alpha = 16) }\n"
    )


FLIP = "label_flip(differing = 20)"


@rule(
    "DPS144",
    "both `steps` and `epochs`",
    bad=two_runs(FLIP, FLIP, extra="  epochs        3\n"),
    good=two_runs(FLIP, FLIP),
    explanation="A training's length is `steps` or `epochs` (epochs × n / batch steps); given both, one would "
    "be ignored and the certificate's step count could differ from what the reader expects. "
    "(For `dpsgd` the same conflict is DPS128.)",
)
def check_steps_epochs(ctx: Context):
    for t in trainings_of(ctx, __name__):
        if t.schedule.steps is not None and t.schedule.epochs is not None:
            yield diag(
                "DPS144",
                f"`{t.name}` gives both steps ({t.schedule.steps}) and epochs ({t.schedule.epochs:g})",
                t.schedule,
                "epochs",
                hint="keep one of them",
            )
