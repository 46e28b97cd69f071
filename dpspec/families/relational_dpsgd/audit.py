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

import dataclasses
import functools
import math

import numpy as np

from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor
from dpspec.audit.runtime import RuntimeAudit, budget_steps, oriented, runtime_targets, with_options

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
        cfg = RelationalConfig(
            int(p["num_edges"]),
            int(p["num_nodes"]),
            float(p["sample_rate"]),
            int(p["degree_cap"]),
            int(p["negatives_per_positive"]),
            str(p["clipping"]),
            str(p["negatives"]),
            "poisson",
        )
        head = float(ctx.record.guarantee.epsilon)
        if self.k == self.T:
            self._claim = Claim(head, self.delta, "(ε, δ)-node DP", head)
        else:
            eps = relational_accountants(
                cfg, float(p["noise_multiplier"]), self.k, float(p["delta_accounted"]), SEARCH_ALPHAS
            ).epsilon
            self._claim = Claim(
                eps,
                self.delta,
                "(ε, δ)-node DP",
                head,
                note=f"first {self.k} of {self.T} steps observed: compared with the certified ε of "
                f"{self.k} steps (same accountants); all {self.T} steps: ε = {head:.4g}",
            )

    def claim(self) -> Claim:
        return self._claim

    def neighbours(self) -> str:
        return (
            f"the capped training graph ({self.n} nodes, {len(self.edges)} edges) vs the same graph without node "
            f"{self.u} (degree {self.deg}) and its edges; canary gradient {self.scale:g}·C on every tuple "
            f"containing it; {self.k} noisy sums observed"
        )

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
                        thr = (
                            np.full(int(has.sum()), np.inf)
                            if m.clipping == "none"
                            else tuple_thresholds(batch, m.clipping, C, K, kneg)[has]
                        )
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
    return [RelationalAudit(ctx), *relational_targets(ctx)]


# --- mutants for the power check (dpspec.audit.mutations) ----------------------------------------

MUTATION_FACTORS = {
    "noise_scaled": 0.25,
    "no_clipping": 1.0,
    "no_step_budget": 1.0,
    "no_batch_caps": 1.0,
    "nonfinite_poisons_step": 1.0,
}


@functools.cache
def _mutant_classes():
    import types

    from dpspec.families.relational_dpsgd.runtime import RelationalMechanism

    def poisoning_total(self, g, factors):
        return (g * factors(g.norm(dim=1))[:, None]).sum(0)

    @dataclasses.dataclass(frozen=True, eq=False)
    class FreshBudgetRelational(RelationalMechanism):
        """Every trainer gets a fresh budget (`trainer().train(50)` ran 50 steps of a 10-step certificate
        once the budget check was skipped; here: a new trainer continues past it)."""

        def trainer(self, encoder=None, *, seed=0, private=True, comm=None, graph=None):
            tr = super().trainer(encoder, seed=seed, private=private, comm=comm, graph=graph)
            if private:
                from dpspec.mechanisms.ledger import PrivacyLedger

                tr.ledger = PrivacyLedger(self.name, self.steps, self._spent, fingerprint=self.ledger.fingerprint)
            return tr

    @dataclasses.dataclass(frozen=True, eq=False)
    class UncappedRelational(RelationalMechanism):
        """``step(batch)`` accepts a batch that breaks the degree cap or NEG-SAMPLE-WOR."""

        def trainer(self, encoder=None, *, seed=0, private=True, comm=None, graph=None):
            tr = super().trainer(encoder, seed=seed, private=private, comm=comm, graph=graph)
            tr.check_batch = lambda batch: None
            return tr

    @dataclasses.dataclass(frozen=True, eq=False)
    class PoisonedRelational(RelationalMechanism):
        """A non-finite per-tuple gradient enters the clipped sum."""

        def trainer(self, encoder=None, *, seed=0, private=True, comm=None, graph=None):
            tr = super().trainer(encoder, seed=seed, private=private, comm=comm, graph=graph)
            tr._clipped_total = types.MethodType(poisoning_total, tr)
            return tr

    return {
        "no_step_budget": FreshBudgetRelational,
        "no_batch_caps": UncappedRelational,
        "nonfinite_poisons_step": PoisonedRelational,
    }


def mutate(mechanism, kind: str, factor: float | None):
    """``noise_scaled`` — σ × ``factor``; ``no_clipping`` — per-tuple gradients summed unclipped (the
    noise is still σ·C). The unsound FREQ-CLIP claim (Prop 4.1) is refused by the compiler (DPS601)
    and its counterexample is tested against the sensitivity functions directly. Runtime holes:
    ``no_step_budget`` — every trainer gets a fresh budget (``train(50)`` on a 10-step certificate
    ran); ``no_batch_caps`` — a user batch with a node in more than K positive tuples is accepted;
    ``nonfinite_poisons_step`` — a non-finite per-tuple gradient enters the sum."""
    from dpspec.audit.mutations import as_class, factor_of

    if kind == "noise_scaled":
        return dataclasses.replace(mechanism, sigma=mechanism.sigma * factor_of(kind, factor))
    if kind == "no_clipping":  # every tuple keeps its full gradient (thresholds of +inf)
        return dataclasses.replace(mechanism, clipping="none")
    if kind in ("no_step_budget", "no_batch_caps", "nonfinite_poisons_step"):
        return as_class(_mutant_classes()[kind], mechanism)
    return None


# --- the runtime audits of the same entry (dpspec.audit.runtime: budget, caps, non-finite values) ---


class _CanaryEncoder:
    """One scalar parameter θ (kept at 0): node ``canary`` is encoded as θ·e₁, every other node as e₁. A
    tuple's gradient along θ is non-zero only if it contains the canary; at θ = 0 the positive score of
    a canary tuple is 0 against negatives of score ``scale``, so the gradient has norm ≈ scale ≫ the
    threshold and is clipped to it: each tuple with the canary as an endpoint adds −threshold."""

    def __init__(self, num_nodes: int, canary: int | None):
        import torch

        self.flags = torch.zeros(num_nodes, 1)
        if canary is not None:
            self.flags[canary] = 1.0
        self.module = torch.nn.Module()
        self.module.theta = torch.nn.Parameter(torch.zeros(1))
        self.e = torch.tensor([1.0, 0.0])
        self.poison = 1.0  # NaN: the canary's encoding (and every gradient through it) is non-finite

    def inputs(self, ids):
        return (self.flags[ids],)

    def forward(self, params, f):
        import torch

        return torch.where(f > 0, params["theta"] * self.e * self.poison, self.e)

    def params(self):
        return {"theta": self.module.theta}


class _RelationalRuntime(RuntimeAudit, RelationalAudit):
    default_trials = 100
    max_trials = 100

    def _graph(self, world: int):
        from dpspec.relational.graph import RelationalGraph

        if world == 1:
            return self.mech.train_graph, self.u
        e = self.edges0
        e = np.where(e > self.u, e - 1, e)  # node u* removed, the others relabelled
        return RelationalGraph(self.n - 1, e.astype(np.int64), None, None, None, "without u*", {}), None

    def _trainer(self, mech, world: int, seed: int):
        import torch

        g, canary = self._graph(world)
        tr = mech.trainer(_CanaryEncoder(g.num_nodes, canary), seed=seed, graph=g)
        tr.opt = torch.optim.SGD(list(tr.params.values()), lr=0.0)  # θ stays 0: each step is the same query
        return tr

    def statistics(self, x0, x1):
        k = x0.shape[1]
        return {
            "sum": oriented(lambda x: x[:, :k].sum(axis=1), x0, x1),
            "extreme": oriented(lambda x: x[:, :k].min(axis=1), x0, x1),
        }

    @staticmethod
    def _observed(tr) -> float:
        g = tr.params["theta"].grad
        return float(g[0]) * tr.normalizer if g is not None else 0.0


class RelationalBudgetAudit(_RelationalRuntime):
    check = "step budget"
    default_trials = 40
    max_trials = 40

    def __init__(self, ctx: AuditContext):
        T, k_req = budget_steps(ctx, int(ctx.record.mechanism.parameters["steps"]))
        super().__init__(with_options(ctx, steps=T))
        self.k_req = k_req

    def neighbours(self) -> str:
        return (
            super().neighbours().rsplit(";", 2)[0] + f"; canary encoder; a loop asks for {self.k_req} steps (the "
            f"certificate covers {self.T}), building a new trainer of the same mechanism when one refuses"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        from dpspec.mechanisms.ledger import BudgetExceededError

        out = np.zeros((n, self.k_req))
        seeds = rng.integers(0, 2**31, size=n)
        for i in range(n):
            run = dataclasses.replace(self.mech)
            tr = self._trainer(run, world, int(seeds[i]))
            for t in range(self.k_req):
                try:
                    tr.step()
                except BudgetExceededError:
                    tr = self._trainer(run, world, int(seeds[i]) + t + 1)  # "start again"
                    try:
                        tr.step()
                    except BudgetExceededError:
                        break
                out[i, t] = self._observed(tr)
        return out


class RelationalCapAudit(_RelationalRuntime):
    check = "per-batch cap"

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        K, k = self.mech.degree_cap, self.mech.negatives_per_positive
        self.repeats = int(ctx.options.get("repeats", 10 * (K + 2)))
        self.repeats = max(1, min(self.repeats, (self.n - 2) // max(k, 1)))

    def neighbours(self) -> str:
        return (
            super().neighbours() + f"; canary encoder; at every step the loop first passes a batch of "
            f"{self.repeats} copies of one of the canary's edges (distinct negatives) and, if it is refused, "
            "the batch sampled as accounted"
        )

    def _bad_batch(self, world: int):
        from dpspec.relational.samplers import TupleBatch

        k = self.mech.negatives_per_positive
        e = self.edges[(self.edges == self.u).any(axis=1)][:1] if world == 1 else self._graph(0)[0].edges[:1]
        if world == 1 and e[0, 0] != self.u:
            e = e[:, ::-1]  # the canary first; its negatives are paired with the other endpoint (side 1)
        pos = np.repeat(e, self.repeats, axis=0)
        others = np.setdiff1d(np.arange(self.n - (1 - world)), np.ravel(e))
        neg = others[: self.repeats * k].reshape(self.repeats, k)
        return TupleBatch(pos.astype(np.int64), neg.astype(np.int64), np.ones_like(neg, dtype=np.int64))

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        from dpspec.mechanisms.ledger import CapExceededError

        out = np.zeros((n, self.k))
        seeds = rng.integers(0, 2**31, size=n)
        bad = self._bad_batch(world)
        for i in range(n):
            tr = self._trainer(dataclasses.replace(self.mech), world, int(seeds[i]))
            for t in range(self.k):
                try:
                    tr.step(bad)
                except CapExceededError:
                    tr.step()
                out[i, t] = self._observed(tr)
        return out


class RelationalNonFiniteAudit(_RelationalRuntime):
    check = "non-finite"

    def neighbours(self) -> str:
        return (
            super().neighbours() + "; canary encoder whose encoding of the node is non-finite on D₁ (every "
            "tuple containing it has a NaN gradient)"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.zeros((n, 2 * self.k))
        seeds = rng.integers(0, 2**31, size=n)
        for i in range(n):
            tr = self._trainer(dataclasses.replace(self.mech), world, int(seeds[i]))
            if world == 1:
                tr.encoder.poison = float("nan")
            for t in range(self.k):
                tr.step()
                v = self._observed(tr)
                out[i, t] = v if math.isfinite(v) else 0.0
                out[i, self.k + t] = 0.0 if math.isfinite(v) else 1.0
        return out

    def statistics(self, x0, x1):
        k = self.k
        return {
            "nonfinite_steps": lambda x: x[:, k:].sum(axis=1),
            "sum": oriented(lambda x: x[:, :k].sum(axis=1), x0, x1),
        }


def relational_targets(ctx: AuditContext) -> list:
    return runtime_targets(ctx, (RelationalNonFiniteAudit, RelationalBudgetAudit, RelationalCapAudit))
