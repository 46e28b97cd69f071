"""A training's length given twice (DPS144), for the families that list this module in their ``rules``
(``dpspec/families/__init__.py``): those whose length is `steps` or `epochs` and that have no rule of their own for
the conflict (DP-SGD's is DPS128).
"""

from __future__ import annotations

from dpspec.check.framework import Context, diag, rule, trainings_of
from dpspec.families.srpp_sgd.rules import FLIP, two_runs


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
