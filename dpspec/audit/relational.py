"""Audit of relational DP-SGD (``mechanism relational_dpsgd``): remove a high-degree node.

Neighbours (node-level DP, insertion/removal): the certified capped training graph D₁ and D₀ = D₁
without its highest-degree node u* and all of u*'s edges. Each trial runs k steps of the mechanism's
own sampling and clipping — Poisson positives over the capped edges (:class:`PoissonEdgeSampler`),
NEG-SAMPLE-WOR negatives (:func:`neg_sample_wor`), the per-tuple thresholds of the certified rule
(:func:`tuple_thresholds`) — with a canary encoder: every tuple that contains u* (as an endpoint or as
a negative) has a per-tuple gradient of norm ``canary_scale``·C along a fixed direction e, every other
tuple has gradient 0. The adversary sees ⟨e, Σ clipped gradients + N(0, σ²C²I)⟩ at each step
(white box: the noisy sums are the released transcript, before the optimizer, which is
post-processing). The noise std is the mechanism object's σ·C.

Claim: the certified ε at δ of the k-step prefix (the same valid accountants with ``steps = k``).
"""

from __future__ import annotations

import numpy as np

from .base import AuditContext, AuditTarget, Claim, register_auditor

__all__ = ["RelationalAudit"]


class RelationalAudit(AuditTarget):
    mechanism = "relational_dpsgd"
    default_trials = 4000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        from dpspec.accounting.relational import SEARCH_ALPHAS, RelationalConfig, relational_accountants

        mech = ctx.mechanism
        p = ctx.record.mechanism.parameters
        o = ctx.options
        self.mech = mech
        g = mech.train_graph
        self.edges, self.n = np.asarray(g.edges), int(g.num_nodes)
        deg = np.bincount(self.edges.ravel(), minlength=self.n)
        self.u = int(np.argmax(deg))
        self.deg = int(deg[self.u])
        keep = (self.edges != self.u).all(axis=1)
        self.edges0 = self.edges[keep]
        self.T = int(p["steps"])
        self.k = int(o.get("steps") or min(self.T, int(o.get("max_steps", 4))))
        self.scale = float(o.get("canary_scale", 10.0))
        self.delta = float(ctx.delta if ctx.delta is not None else ctx.record.guarantee.delta)
        cfg = RelationalConfig(int(p["num_edges"]), int(p["num_nodes"]), float(p["sample_rate"]), int(p["degree_cap"]),
                               int(p["negatives_per_positive"]), str(p["clipping"]), str(p["negatives"]), "poisson")
        head = float(ctx.record.guarantee.epsilon)
        if self.k == self.T:
            self._claim = Claim(head, self.delta, "(ε, δ)-node DP", head)
        else:
            eps = relational_accountants(cfg, float(p["noise_multiplier"]), self.k, float(p["delta_accounted"]),
                                         SEARCH_ALPHAS).epsilon
            self._claim = Claim(eps, self.delta, "(ε, δ)-node DP", head,
                                note=f"first {self.k} of {self.T} steps observed: compared with the certified ε of "
                                     f"{self.k} steps (same accountants); all {self.T} steps: ε = {head:.4g}")

    def claim(self) -> Claim:
        return self._claim

    def neighbours(self) -> str:
        return (f"the capped training graph ({self.n} nodes, {len(self.edges)} edges) vs the same graph without node "
                f"{self.u} (degree {self.deg}) and its edges; canary gradient {self.scale:g}·C on every tuple "
                f"containing it; {self.k} noisy sums observed")

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        from dpspec.relational.clipping import tuple_thresholds
        from dpspec.relational.samplers import PoissonEdgeSampler, neg_sample_wor

        m = self.mech
        C, K, kneg = m.clip, m.degree_cap, m.negatives_per_positive
        std = m.sigma * m.clip
        edges = self.edges if world == 1 else self.edges0
        nodes = self.n if world == 1 else self.n - 1
        out = np.empty((n, self.k))
        for i in range(n):
            sampler = PoissonEdgeSampler(edges, m.rate, rng)
            for t in range(self.k):
                pos = sampler()
                batch = neg_sample_wor(pos, kneg, nodes, rng)
                total = 0.0
                if world == 1 and batch.size:
                    # on D₀ node ids are relabelled without u*; on D₁ the canary is u* itself
                    has = (batch.pos == self.u).any(axis=1)
                    if kneg:
                        has |= (batch.neg == self.u).any(axis=1)
                    if has.any():
                        thr = (np.full(int(has.sum()), np.inf) if m.clipping == "none"
                               else tuple_thresholds(batch, m.clipping, C, K, kneg)[has])
                        total = float(np.sum(self._clip(np.full(thr.shape, self.scale * C), thr)))
                out[i, t] = total + std * rng.standard_normal()
        return out

    @staticmethod
    def _clip(norms, thresholds):
        return np.minimum(norms, thresholds)

    def statistics(self, x0: np.ndarray, x1: np.ndarray):
        return {"sum": lambda x: x.sum(axis=1), "max": lambda x: x.max(axis=1)}


@register_auditor("relational_dpsgd")
def _factory(ctx: AuditContext):
    from .runtime import relational_targets  # the runtime audits of the same entry (normaliser, budget, caps, …)

    return [RelationalAudit(ctx), *relational_targets(ctx)]
