"""Compile a ``noisy_gd`` training: account for the given noise and write the certificate entry.

Uses only the public extension API (``dpspec.compiler.api``) and the certificate model.
"""

from __future__ import annotations

from typing import Any

from dpspec.certificate.model import DpPoint, GuaranteeRecord, MechanismRecord, Numerics, TargetCertificate
from dpspec.compiler import api
from dpspec.families.template.accountant import rdp
from dpspec.families.template.runtime import Runtime
from dpspec.families.template.settings import Settings

THEOREMS = ["Mironov 2017, Prop. 7 and Prop. 1"]


def compile_target(ctx: Any, t: Any, data: Any) -> api.CompiledTarget:
    s = t.settings_as(Settings)
    sigma, steps = s.noise.noise_multiplier, t.schedule.steps
    protected, _definition, _unit = api.protected_record(ctx, t)
    alphas = api.alpha_grid(ctx.spec)
    curve = rdp(alphas, sigma, steps)
    points = [DpPoint(epsilon=api.rdp_to_dp(alphas, curve, d)[0], delta=d) for d in api.reported_deltas(t.guarantee)]
    guarantee = GuaranteeRecord(
        target=api.target_record(t.guarantee),
        rdp_alphas=list(map(float, alphas)),
        rdp_epsilons=list(map(float, curve)),
        dp=points,
        theorems=THEOREMS,
        epsilon=points[0].epsilon,
        delta=points[0].delta,
    )
    cert = TargetCertificate(
        name=t.name,
        kind="train",
        protected=protected,
        notion=api.notion_record(t.guarantee),
        mechanism=MechanismRecord(
            name="noisy_gd",
            description="full-batch noisy gradient descent",
            parameters={"noise_multiplier": sigma, "steps": steps},
            calibrated=False,
        ),
        guarantee=guarantee,
        numerics=Numerics(
            method="closed form", abs_error_bound=0.0, alpha_grid=api.grid_text(alphas), conversion="RDP to (ε, δ)"
        ),
    )
    return api.CompiledTarget(t.name, "train", cert, Runtime.from_certificate(cert), alphas, curve)
