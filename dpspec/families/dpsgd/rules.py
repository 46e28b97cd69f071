"""DP-SGD's own rules: what its accountants cover and what a DP-SGD training must state.

DPS127 and DPS128 (a size or a setting DP-SGD needs), DPS160 (a normaliser that would be read from the
data) and DP-SGD's cases of DPS125 (samplings its accountants do not cover). The family's entry in
``dpspec/families/__init__.py`` lists this module; its trainings are the ones with ``DpsgdSettings``.
"""

from __future__ import annotations

from dpspec.check.framework import Context, also, diag, rule, trainings_with
from dpspec.check.rules import _UNIT, dataset_size
from dpspec.check.rules_runtime import GOOD, NORMALISER_HINT, _spec
from dpspec.families.dpsgd.settings import DpsgdSettings
from dpspec.ir import models as ir


@also("DPS125")
def check_dpsgd_sampling(ctx: Context):
    for t, st in trainings_with(ctx, DpsgdSettings):
        s = st.sampling
        if isinstance(s, ir.WithReplacementSampling):
            yield diag(
                "DPS125",
                "sampling with replacement is not covered by the DP-SGD accountants",
                t,
                "sampling",
                hint=f"use poisson(expected_batch = {s.batch_size}) or without_replacement(batch_size = "
                f"{s.batch_size})",
            )
        elif isinstance(s, ir.CoupledSampling):
            yield diag(
                "DPS125",
                "coupled sampling belongs to relational_dpsgd",
                t,
                "sampling",
                hint="use `mechanism relational_dpsgd` with a node unit",
            )


@rule(
    "DPS127",
    "a size is needed and not given",
    bad=_UNIT + "train t { mechanism dpsgd  sampling poisson(expected_batch = 256)  clipping flat(C = 1)  steps 100  "
    "guarantee dp(epsilon = 8, delta = 1e-6) }",
    good=_UNIT.replace("record", "record  dataset_size 60000") + "train t { mechanism dpsgd  sampling "
    "poisson(expected_batch = 256)  clipping flat(C = 1)  steps 100  guarantee dp(epsilon = 8, delta = 1e-6) }",
    explanation="An expected batch, a without-replacement batch or a number of epochs needs the (public) "
    "dataset size to become a rate or a number of steps.",
)
def check_needs_size(ctx: Context):
    for t, st in trainings_with(ctx, DpsgdSettings):
        n = dataset_size(ctx, t)
        s = st.sampling
        need = None
        if isinstance(s, ir.PoissonSampling) and s.expected_batch is not None:
            need = "an expected batch"
        elif isinstance(s, ir.WithoutReplacementSampling):
            need = "without-replacement sampling"
        elif t.schedule.epochs is not None:
            need = "a number of epochs"
        if need and n is None:
            yield diag(
                "DPS127",
                f"`{t.name}` uses {need}, which needs the dataset size",
                t,
                "sampling",
                hint="add `dataset_size N` to the privacy block or the train block",
            )


@rule(
    "DPS128",
    "training is missing a setting its mechanism needs",
    bad=_UNIT
    + "train t { mechanism dpsgd  sampling poisson(rate = 0.01)  steps 100  guarantee dp(epsilon = 8, delta = 1e-6) }",
    good=_UNIT.replace("record", "record  dataset_size 60000") + "train t { mechanism dpsgd  sampling "
    "poisson(rate = 0.01)  clipping flat(C = 1)  steps 100  guarantee dp(epsilon = 8, delta = 1e-6) }",
    explanation="DP-SGD needs sampling, clipping (the sensitivity) and a length (steps or epochs).",
)
def check_training_settings(ctx: Context):
    for t, st in trainings_with(ctx, DpsgdSettings):
        if st.sampling is None:
            yield diag(
                "DPS128",
                f"`{t.name}` does not say how batches are sampled",
                t,
                hint="add `sampling poisson(rate = 0.01)`",
            )
        if st.clipping is None:
            yield diag(
                "DPS128",
                f"`{t.name}` has no clipping, so its gradients have no bounded sensitivity",
                t,
                hint="add `clipping flat(C = 1.0)`",
            )
        elif not isinstance(st.clipping, (ir.FlatClipping, ir.PerLayerClipping)):
            yield diag(
                "DPS128",
                f"clipping `{st.clipping.rule}` is for relational learning",
                t,
                "clipping",
                hint="use flat(C = ...) or per_layer(C = [...])",
            )
        sch = t.schedule
        if sch.steps is None and sch.epochs is None:
            yield diag(
                "DPS128", f"`{t.name}` does not say how long it trains", t, hint="add `steps 1000` or `epochs 3`"
            )
        elif sch.steps is not None and sch.epochs is not None:
            yield diag("DPS128", f"`{t.name}` gives both steps and epochs", t, hint="keep one of them")


@rule(
    "DPS160",
    "a DP-SGD normaliser that would be read from the data",
    bad=_spec("poisson(rate = 0.004)"),
    good=GOOD,
    explanation="DP-SGD divides the noisy sum of clipped gradients by the expected batch size. With "
    "`poisson(rate = q)` or `full_batch` and no dataset size, that constant would be q·len(data) "
    "(or len(data)) at run time: under insertion/removal the scale of the released noise then "
    "depends on whether a record is present, and a threshold test on it tells neighbouring datasets "
    "apart. Declare the public `dataset_size` (or `poisson(expected_batch = B)` with it); the "
    "certificate records the normaliser and the runtime uses that number only.",
)
def check_public_normaliser(ctx: Context):
    for t, st in trainings_with(ctx, DpsgdSettings):
        if dataset_size(ctx, t) is not None:
            continue
        s = st.sampling
        if isinstance(s, ir.PoissonSampling) and s.expected_batch is None:
            what = f"q·len(data) with q = {s.rate:g}" if s.rate is not None else "q·len(data)"
        elif isinstance(s, ir.FullBatch):
            what = "len(data)"
        else:
            continue
        yield diag(
            "DPS160",
            f"`{t.name}` would divide its noisy gradient sum by {what}, a size read from the private data",
            s,
            hint=NORMALISER_HINT,
        )
