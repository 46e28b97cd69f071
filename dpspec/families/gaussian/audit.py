"""Audit of a Gaussian release (``mechanism gaussian``).

Neighbours: query answers a₀ = 0 and a₁ = Δ·e₁ (ℓ2 distance exactly the certified sensitivity Δ,
the worst case of the analysis). Outputs: ``mechanism.simulate(a_w)`` — the runtime object's own
noise path, one independent run per row (outside its one-output ledger), so a secure-mode release is
audited through its own sampler. Statistic: the projection ⟨y, e₁⟩, which
is the likelihood ratio of N(a₁, σ²I) against N(a₀, σ²I) (Neyman–Pearson optimal for the
certified mechanism); the threshold comes from the selection split.

Claim: the certificate's ε at the audit δ — the analytic Gaussian ε (Balle & Wang 2018 Thm 8) of
μ = Δ/σ, which is *exact* for the continuous mechanism, so a correct mechanism's ε_lower can only
approach it, never pass it.
"""

from __future__ import annotations

import numpy as np

from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor

__all__ = ["GaussianAudit"]


def _claim_for(record, delta: float | None) -> tuple[float, float]:
    from dpspec.accounting import analytic_gaussian as GR

    g = record.guarantee
    if delta is None:
        delta = g.delta if g.delta is not None else (g.dp[0].delta if g.dp else 1e-5)
    for p in g.dp:
        if p.delta == delta:
            return float(p.epsilon), float(delta)
    mu = float(record.mechanism.parameters["mu"])
    return float(GR.epsilon_of_delta(mu, float(delta))), float(delta)


class GaussianAudit(AuditTarget):
    mechanism = "gaussian"
    default_trials = 200_000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        p = ctx.record.mechanism.parameters
        self.sensitivity = float(p["sensitivity"])
        self.dimension = int(p.get("dimension") or 1)
        self.eps, self.delta = _claim_for(ctx.record, ctx.delta)

    def claim(self) -> Claim:
        return Claim(self.eps, self.delta, "(ε, δ)-DP", self.eps)

    def neighbours(self) -> str:
        return f"answers 0 and Δ·e₁ (Δ = {self.sensitivity:g}, dimension {self.dimension})"

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        mech = self.ctx.mechanism
        out = np.empty((n, 1))
        step = max(1, int(2e6 // self.dimension))  # releases per call, bounded memory
        for a0 in range(0, n, step):
            m = min(step, n - a0)
            a = np.zeros((m, self.dimension))
            if world:
                a[:, 0] = self.sensitivity
            if getattr(mech, "secure", False):
                y = mech.simulate(a)  # secure mode draws from the OS CSPRNG and refuses a seeded rng
            else:
                y = mech.simulate(a, rng)
            out[a0 : a0 + m, 0] = np.asarray(y, float).reshape(m, self.dimension)[:, 0]
        return out

    def statistics(self, x0, x1):
        return {"likelihood_ratio": lambda x: x[:, 0]}


@register_auditor("gaussian")
def _factory(ctx: AuditContext):
    return [GaussianAudit(ctx)]


# --- mutants for the power check (dpspec.audit.mutations) ----------------------------------------

MUTATION_FACTORS = {"noise_scaled": 0.25}


def mutate(mechanism, kind: str, factor: float | None):
    """``noise_scaled`` — σ multiplied by ``factor`` (< 1)."""
    import dataclasses

    from dpspec.audit.mutations import factor_of

    if kind == "noise_scaled":
        return dataclasses.replace(mechanism, sigma=mechanism.sigma * factor_of(kind, factor))
    return None
