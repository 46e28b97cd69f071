"""Audit of the Markov Quilt Mechanism: the chain conditioned on the state of the node that sets σ.

Neighbours: for the first listed transition matrix (started at its stationary law), the whole sequence
drawn given X_i = x (D₁) or X_i = x′ (D₀) — forward from i with P, backward with the time reversal
P*(x, y) = π(y) P(y, x) / π(x) — and released by the runtime object. The statistic is the released
value (the engine picks the orientation). A class given only by its mixing (reversible, π_min, λ*) has
no member to draw from and is not audited. Pure ε: δ = 0.
"""

from __future__ import annotations

import numpy as np

from dpspec.audit.api import AuditError
from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor


class MqmAudit(AuditTarget):
    mechanism = "markov_quilt"
    default_trials = 20_000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        from dpspec.check.framework import Context
        from dpspec.ir import models as ir

        from .mqm import MarkovChain

        if ctx.compiled is None:
            raise AuditError("the audit needs the compiled spec (the chain's class)")
        spec_ir = ctx.compiled.spec.ir
        rel = next((t for t in spec_ir.targets() if t.name == ctx.name), None)
        assert isinstance(rel, ir.Release)  # the audited certificate is one of this spec's releases
        sc = Context(spec_ir).resolve_protects(rel)
        assert isinstance(sc, ir.Scenario)  # the mechanism protects a scenario (DPS120: its units are secrets)
        w = next((w for w in sc.worlds if isinstance(w, ir.MarkovWorld) and w.transitions), None)
        if w is None:
            raise AuditError("only classes given by explicit transition matrices have a member to draw from")
        self.chain = MarkovChain(np.asarray(w.transitions[0], float))
        self.states = np.array([float(s) for s in w.states])
        p = ctx.record.mechanism.parameters
        self.T, self.node, self.eps = int(p["records"]), int(p["worst_node"]), float(p["epsilon"])
        pi = self.chain.start
        P = self.chain.transition
        self.reverse = (pi[None, :] * P.T) / pi[:, None]
        self.x1, self.x0 = 1, 0

    def _chains(self, x: int, n: int, rng) -> np.ndarray:
        P, R = self.chain.transition, self.reverse
        S = np.empty((n, self.T), dtype=np.int64)
        S[:, self.node] = x
        cp, cr = np.cumsum(P, 1), np.cumsum(R, 1)
        for t in range(self.node + 1, self.T):
            S[:, t] = np.minimum((rng.random(n)[:, None] > cp[S[:, t - 1]]).sum(1), P.shape[0] - 1)
        for t in range(self.node - 1, -1, -1):
            S[:, t] = np.minimum((rng.random(n)[:, None] > cr[S[:, t + 1]]).sum(1), P.shape[0] - 1)
        return S

    def claim(self) -> Claim:
        return Claim(self.eps, 0.0, "ε-Pufferfish", self.eps, note="pure ε-Pufferfish of the declared chain class")

    def neighbours(self) -> str:
        return f"the chain given X_{self.node} = state {self.x1} (D₁) vs state {self.x0} (D₀), first listed matrix"

    def sample(self, world, n, rng):
        S = self._chains(self.x1 if world == 1 else self.x0, n, rng)
        mech = self.ctx.mechanism
        return np.vstack([np.asarray(mech.simulate(self.states[s][:, None], rng), float).reshape(1, -1) for s in S])

    def statistics(self, x0, x1):
        return {"released_value": lambda x: x[:, 0]}


@register_auditor("markov_quilt")
def _factory(ctx: AuditContext):
    return [MqmAudit(ctx)]
