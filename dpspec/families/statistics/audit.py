"""Audit of a statistics release (``mechanism laplace | discrete_laplace | discrete_gaussian | auto``).

Neighbours: answers 0 and Δ (one record moves one coordinate of a count or sum by at most Δ — the worst
case of the analysis). Outputs: ``mechanism.simulate`` (the runtime object's own samplers). Statistic:
the output itself, thresholded (the likelihood ratio of every additive noise here is monotone in it).
Claim: the certificate's ε at the audit δ. Mutants: ``noise_scaled`` (the noise scale times ``factor``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor


class StatisticAudit(AuditTarget):
    default_trials = 100_000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        p = ctx.record.mechanism.parameters
        self.mechanism = ctx.record.mechanism.name
        self.sensitivity = float(p["sensitivity"])
        g = ctx.record.guarantee
        self.delta = float(ctx.delta if ctx.delta is not None else g.delta)
        self.eps = next((pt.epsilon for pt in g.dp if pt.delta == self.delta), float(g.epsilon))
        if str(p["noise"]).startswith("discrete"):
            self.default_trials = 20_000  # exact rational sampling is slow

    def claim(self) -> Claim:
        return Claim(self.eps, self.delta, "(ε, δ)-DP", self.eps)

    def neighbours(self) -> str:
        return f"answers 0 and Δ = {self.sensitivity:g}"

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        mech = self.ctx.mechanism
        a = np.full(n, self.sensitivity if world else 0.0)
        discrete = mech.noise.startswith("discrete")
        return np.asarray(mech.simulate(a, None if discrete else rng), float).reshape(n, 1)

    def statistics(self, x0, x1):
        return {"output": lambda x: x[:, 0]}


def _factory(ctx: AuditContext):
    if ctx.record.mechanism.parameters.get("noise") not in (
        "laplace",
        "discrete_laplace",
        "gaussian",
        "discrete_gaussian",
    ):
        return []
    if ctx.record.mechanism.parameters.get("count_scale") is not None:
        return []  # a mean with a noisy denominator: two answers (not audited yet)
    return [StatisticAudit(ctx)]


for _name in ("laplace", "discrete_laplace", "discrete_gaussian", "auto"):
    register_auditor(_name)(_factory)

MUTATION_FACTORS = {"noise_scaled": 0.5}


def mutate(mechanism, kind: str, factor: float | None):
    """``noise_scaled`` — the noise scale multiplied by ``factor`` (< 1: halved noise by default)."""
    if kind == "noise_scaled":
        return dataclasses.replace(mechanism, scale=mechanism.scale * float(factor))
    return None
