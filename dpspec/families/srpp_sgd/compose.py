"""Composition of SRPP-SGD runs (``Family.compose``, read from this folder): Zhang & Vorobeychik, Thm 5.8
(``dpspec.accounting.huc:compose_srpp_sgd``); see ``PROOF.md``."""

from __future__ import annotations

from dpspec.certificate.model import (
    Assumption,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    Source,
    TargetCertificate,
)
from dpspec.compiler.errors import fail as _fail
from dpspec.ir import models as ir


def compose(c: ir.Composition, parts) -> TargetCertificate:
    """Thm 5.8: independently randomised SRPP-SGD runs at one α, flavour and slice profile compose
    by adding their ε (sa runs only with sa runs); otherwise DPS504."""
    from dpspec.accounting.huc import SrppSoundnessError, compose_srpp_sgd
    from dpspec.compiler.common import _notion, _target, composed_protected

    g = c.guarantee

    def model(p) -> str:
        d = p.mechanism.discrepancy.describe()
        return ", ".join(f"{k} = {v}" for k, v in sorted(d.items()) if k not in ("source", "sa_bound")) + (
            f", dataset_size = {p.certificate.mechanism.parameters.get('dataset_size')}"
        )

    models = {(p.certificate.protected.definition, model(p)) for p in parts}
    if len({m[0] for m in models}) < len(models):  # also a check-stage rule; never add costs of other worlds
        _fail(
            "DPS143",
            f"composition `{c.name}` adds SRPP-SGD runs of one scenario under different discrepancy "
            "models: " + "; ".join(f"`{p.name}`: {model(p)}" for p in parts),
            c,
            "parts",
            hint="give every run of the scenario the same `discrepancy` and dataset size",
        )
    try:
        comp = compose_srpp_sgd([p.mechanism.calibration for p in parts])
        if (
            not isinstance(g, ir.SrppGuarantee)
            or g.alpha != comp.alpha
            or g.flavour != comp.flavour
            or g.subsampling_aware != comp.subsampling_aware
        ):
            raise SrppSoundnessError(
                f"the composition's guarantee must be {comp.notion} at α = {comp.alpha:g}, the notion of its parts",
                rule="DPS504",
                hint="state the parts' notion and α",
            )
    except SrppSoundnessError as e:
        _fail(e.rule, e.message, c, "parts", hint=e.hint)
    if g.epsilon is not None and comp.epsilon > g.epsilon:
        _fail(
            "DPS204",
            f"the composition's ε(α) = {comp.epsilon:.6g} exceeds the target {g.epsilon:g}",
            c,
            "guarantee",
            hint="give the parts smaller budgets (or more noise)",
        )
    first = parts[0].certificate
    guarantee = GuaranteeRecord(
        target=_target(g),
        alpha=comp.alpha,
        epsilon=comp.epsilon,
        theorems=list(comp.theorems),
        pairs_notion=first.guarantee.pairs_notion,
        reading=(
            "exact caps (almost sure)"
            if comp.failure_probability == 0
            else f"holds except with probability {comp.failure_probability:.3g}"
        ),
    )
    asm = [
        Assumption(
            id=f"srpp_compose_{i}",
            statement=a.statement,
            source=Source(paper=a.source.split(",")[0], ref=",".join(a.source.split(",")[1:]).strip()),
        )
        for i, a in enumerate(comp.assumptions)
    ]
    return TargetCertificate(
        name=c.name,
        kind="compose",
        protected=composed_protected(parts),
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="composition",
            description="SRPP-SGD runs composed by Thm 5.8: " + ", ".join(c.parts),
            parameters={"parts": ",".join(c.parts)},
            calibrated=False,
        ),
        guarantee=guarantee,
        assumptions=asm,
        numerics=Numerics(
            method="sum of the parts' ε(α) (Thm 5.8), rounded up",
            abs_error_bound=0.0,
            alpha_grid=f"single order α = {comp.alpha:g}",
        ),
        warnings=list(comp.warnings),
    )
