"""Audit of the Gaussian sliced Wasserstein mechanism (``mechanism swm``, Pufferfish).

Neighbours: the two secret-conditioned laws P(X | S = sᵢ, θ) and P(X | S = sⱼ, θ) of the declared
world θ and discriminative pair (sᵢ, sⱼ) with the largest certified per-instance level (the
instance that sets σ). A draw on "D₁" is X ~ P(X | sᵢ, θ) followed by the runtime release: for the
per-record worlds (``empirical``, ``balanced``) one uniformly drawn record with secret sᵢ through
the per-record reading; for ``groups`` the whole group through the release (``SwmRelease.simulate``:
the runtime's own path, one independent run per draw, outside its one-output ledger). Sampled (non-exhaustive)
worlds are not audited (their laws are only known through draws).

Observation, as the notion defines it (Zhang & Vorobeychik, App. B.4):

* Joint-SRPP ⇒ Joint-SPP: (V, ⟨Y, V⟩) with V ~ ω independent of everything (Def. B.2) is
  (ε′, δ)-Pufferfish private; ε′ = the certificate's ε′ at δ (Thm B.4). With a Monte-Carlo profile
  ω is the uniform measure on the sphere and V is drawn from it afresh (the PAC guarantee is about
  that ω); with a finite profile V is one of the recorded directions with its weight.
* Ave-SRPP ⇒ Ave-SPP: Σ_ℓ ω_ℓ D^δ_∞(slice ℓ) ≤ ε′ (Def. B.1, Thm B.3). Each of the (at most
  ``max_slices``) slices with the largest ω_ℓ·Δ_ℓ² is audited on ⟨Y, u_ℓ⟩ alone; the lower bound is
  Σ ω_ℓ ε_lower,ℓ over the audited slices (the others contribute ≥ 0), with a Bonferroni correction.
  Ave with a Monte-Carlo profile is not audited (a continuous average has no finite lower bound).

Statistics: the log-likelihood ratio of the two Gaussian mixtures (the conditional laws convolved
with N(0, σ²) at the certified σ; at most ``max_components`` mixture components per secret), and
the point-mass version (difference of the conditional means). The pair is protected in both
orders only if the reversed pair is declared; otherwise only inequality (I) is used.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
from scipy.special import logsumexp

from dpspec.audit.api import AuditError
from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor

__all__ = ["SwmAudit", "SwmSliceAudit", "scenario_for"]


def scenario_for(ctx: AuditContext):
    """Rebuild (worlds, query, profile, release IR) from the compiled spec, as the compiler did."""
    from dpspec.check.framework import Context
    from dpspec.compiler.scenario import build_query, secret_labels
    from dpspec.data.bind import load_table
    from dpspec.families.swm.compile import build_profile, build_worlds
    from dpspec.ir import models as ir

    if ctx.compiled is None:
        raise AuditError("the SWM audit needs the compiled spec (scenario worlds and slice profile)")
        # pragma: no cover
    spec_ir = ctx.compiled.spec.ir
    rel = next((t for t in spec_ir.targets() if t.name == ctx.name), None)
    if not isinstance(rel, ir.Release):
        raise AuditError(f"`{ctx.name}` is not a release in the spec")
    sc = Context(spec_ir).resolve_protects(rel)
    assert isinstance(sc, ir.Scenario)  # an SWM release protects a scenario (DPS120: its units are secrets)
    if sc.data is None:
        raise AuditError("the scenario has only sampled worlds; the audit needs exact conditional laws")
    table = load_table(sc.data, ctx.data)
    labels, values = secret_labels(table, sc)
    assert rel.query is not None  # an SWM release states its query (DPS413)
    X, query = build_query(table, rel.query)
    worlds, _ = build_worlds(sc, X, labels, values, query, rel.query)
    profile = build_profile(rel.slices, query.dim, rel)
    return worlds, query, profile, rel


def _sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, "<f8").tobytes()).hexdigest()


class _Common:
    """Shared state of the SWM targets: the chosen instance and its two conditional laws."""

    def __init__(self, ctx: AuditContext, max_components: int):
        from dpspec.pufferfish import DeterministicWorld, EmpiricalWorld

        rec = ctx.record
        p = rec.mechanism.parameters
        self.sigma = float(p["sigma"])
        self.flavour = str(p["flavour"])
        self.alpha = float(rec.guarantee.alpha)
        worlds, query, profile, _rel = scenario_for(ctx)
        compiled_mech = ctx.compiled.targets[ctx.name].mechanism
        calib = compiled_mech.mechanism.calibration
        if calib.profile.get("directions_sha256") not in (None, _sha(profile.directions)):
            raise AuditError("the rebuilt slice profile does not match the certificate's")
        self.profile = profile
        self.monte_carlo = profile.reading == "monte_carlo"
        rows = np.atleast_2d(np.asarray(rec.sensitivity.instance_deltas or [rec.sensitivity.deltas], float))
        labels = list(calib.instances) if len(calib.instances) == rows.shape[0] else None
        w = np.asarray(rec.sensitivity.weights, float)
        if self.flavour == "ave":
            score = (rows**2) @ w
        else:
            c = self.alpha * (self.alpha - 1.0) / (2.0 * self.sigma**2)
            with np.errstate(divide="ignore"):
                score = logsumexp(np.log(w)[None, :] + c * rows**2, axis=1)
        i = int(np.argmax(score))
        self.instance_deltas = rows[i]
        if labels is None:
            raise AuditError("the certificate's sensitivity instances cannot be matched to worlds and pairs")
        wname, si, sj = labels[i]
        world = next(x for x in worlds if x.name == wname)
        if not world.exact or not isinstance(world, (EmpiricalWorld, DeterministicWorld)):
            raise AuditError(
                f"world `{wname}` is a sampler world; the audit needs a world whose conditional laws "
                "it can draw from (empirical, balanced or groups)"
            )
        self.world, self.si, self.sj, self.query = world, si, sj, query
        pairs = {tuple(map(str, q)) for q in rec.sensitivity.pairs}
        self.symmetric = (str(sj), str(si)) in pairs
        self.per_group = isinstance(world, DeterministicWorld)
        # `output aggregate` under a record-level world: the experiment draws a whole dataset — the protected
        # record from its secret's class, the other records i.i.d. from the world's records (the product
        # prior of Lemma A, dpspec/pufferfish/aggregate.py) — and runs the release on it
        p = rec.mechanism.parameters
        self.aggregate_n = int(p["records"]) if p.get("output") == "aggregate" and not self.per_group else None
        rng = np.random.default_rng(12345)
        if self.aggregate_n is not None:
            assert isinstance(world, EmpiricalWorld)  # a groups world has no aggregate_n
            self.pool = world.records
            Zi = self._aggregates(world.records_of(si), max_components, rng)
            Zj = self._aggregates(world.records_of(sj), max_components, rng)
        else:
            Zi = np.asarray(world.query_outputs(query, si), float)
            Zj = np.asarray(world.query_outputs(query, sj), float)
        self.Zi = Zi if len(Zi) <= max_components else Zi[rng.choice(len(Zi), max_components, replace=False)]
        self.Zj = Zj if len(Zj) <= max_components else Zj[rng.choice(len(Zj), max_components, replace=False)]
        self.mi, self.mj = Zi.mean(axis=0), Zj.mean(axis=0)
        # per group: the secret's whole dataset; else the records of the secret's class
        self.records: dict[int, np.ndarray | None]
        self.datasets: dict[int, np.ndarray] | None
        if isinstance(world, DeterministicWorld):
            self.records, self.datasets = {0: None, 1: None}, {1: world.datasets[si], 0: world.datasets[sj]}
        else:
            self.records, self.datasets = {1: world.records_of(si), 0: world.records_of(sj)}, None
        self.wname = wname

    def _dataset(self, own: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One dataset of the aggregate experiment: a record drawn from ``own``, then n − 1 from the pool."""
        assert self.aggregate_n is not None  # the aggregate experiment only
        first = own[rng.integers(0, len(own))][None, :]
        return np.vstack([first, self.pool[rng.integers(0, len(self.pool), self.aggregate_n - 1)]])

    def _aggregates(self, own: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """k draws of the aggregate's conditional law (the components of the likelihood statistic)."""
        return np.vstack([np.asarray(self.query(self._dataset(own, rng)), float).reshape(1, -1) for _ in range(k)])

    def releases(self, mech, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """n runtime releases on X ~ P(X | s, θ) (s = sᵢ for world 1, sⱼ for world 0)."""
        if self.aggregate_n is not None:
            own = self.records[world]
            assert own is not None  # a record-level world keeps each class's records
            return np.vstack(
                [np.asarray(mech.simulate(self._dataset(own, rng), rng), float).reshape(1, -1) for _ in range(n)]
            )
        if self.datasets is not None:  # per group
            D = self.datasets[world]
            return np.vstack([np.asarray(mech.simulate(D, rng), float).reshape(1, -1) for _ in range(n)])
        R = self.records[world]
        assert R is not None  # a record-level world keeps each class's records
        idx = rng.integers(0, len(R), size=n)
        return np.asarray(mech.simulate(R[idx], rng, per_record=True), float)

    def log_mixture(self, proj: np.ndarray, U: np.ndarray, Z: np.ndarray, block: int = 4096) -> np.ndarray:
        """log (1/|Z|) Σ_k φ(proj; ⟨z_k, u⟩, σ²) per row (U: one direction per row)."""
        out = np.empty(proj.shape[0])
        s2 = 2.0 * self.sigma**2
        for a in range(0, proj.shape[0], block):
            M = U[a : a + block] @ Z.T  # (b, k) component means on each row's direction
            out[a : a + block] = logsumexp(-((proj[a : a + block, None] - M) ** 2) / s2, axis=1) - math.log(Z.shape[0])
        return out

    def claim(self, ctx: AuditContext, notion: str) -> Claim:
        g = ctx.record.guarantee
        delta = ctx.delta if ctx.delta is not None else g.dp[0].delta
        eps = None
        for pt in g.dp:
            if pt.delta == delta:
                eps = float(pt.epsilon)
        if eps is None:
            eps = float(ctx.compiled.targets[ctx.name].mechanism.mechanism.calibration.spp_epsilon(delta)[0])
        reading = f"; {g.reading}" if g.reading else ""
        return Claim(
            eps,
            float(delta),
            notion,
            eps,
            note=f"sliced (ε′, δ)-Pufferfish (Zhang & Vorobeychik App. B.4), not DP{reading}",
        )


class SwmAudit(AuditTarget):
    """Joint-SRPP: observation (V, ⟨Y, V⟩)."""

    mechanism = "swm"
    default_trials = 50_000

    def __init__(self, ctx: AuditContext, common: _Common):
        super().__init__(ctx)
        self.c = common
        self.symmetric = common.symmetric

    def claim(self) -> Claim:
        return self.c.claim(self.ctx, "Joint-SPP: (V, ⟨Y, V⟩) is (ε′, δ)-Pufferfish private")

    def neighbours(self) -> str:
        c = self.c
        how = "the group's records" if c.per_group else "one record drawn uniformly"
        v = (
            "V uniform on the sphere (Monte-Carlo profile)"
            if c.monte_carlo
            else f"V among the {c.profile.m} recorded directions"
        )
        return f"world {c.wname}: X ~ {how} with secret {c.si} (D₁) vs {c.sj} (D₀); observed (V, ⟨Y, V⟩), {v}"

    def _directions(self, n: int, rng: np.random.Generator) -> np.ndarray:
        P = self.c.profile
        if self.c.monte_carlo:
            G = rng.standard_normal((n, P.d))
            return G / np.linalg.norm(G, axis=1, keepdims=True)
        return P.directions[rng.choice(P.m, size=n, p=P.weights)]

    def sample(self, world, n, rng):
        Y = self.c.releases(self.ctx.mechanism, world, n, rng)
        U = self._directions(n, rng)
        return np.column_stack([np.einsum("ij,ij->i", Y, U), U])

    def statistics(self, x0, x1):
        c = self.c

        def lr(x):
            p, U = x[:, 0], x[:, 1:]
            return c.log_mixture(p, U, c.Zi) - c.log_mixture(p, U, c.Zj)

        def point(x):
            p, U = x[:, 0], x[:, 1:]
            a, b = U @ c.mi, U @ c.mj
            return (a - b) * (p - (a + b) / 2.0)

        return {"likelihood_ratio": lr, "mean_shift": point}


class SwmSliceAudit(AuditTarget):
    """Ave-SRPP: one slice u_ℓ, observation ⟨Y, u_ℓ⟩ (a component of the averaged notion)."""

    mechanism = "swm"
    default_trials = 50_000

    def __init__(self, ctx: AuditContext, common: _Common, index: int):
        super().__init__(ctx)
        self.c, self.index = common, index
        self.u = common.profile.directions[index]
        self.symmetric = common.symmetric

    def claim(self) -> Claim:
        return self.c.claim(self.ctx, "Ave-SPP: Σ_ℓ ω_ℓ D^δ_∞(slice ℓ) ≤ ε′")

    def neighbours(self) -> str:
        return f"slice {self.index}: ⟨Y, u⟩ with u = {np.array2string(self.u, precision=3)}"

    def label(self) -> str:
        return f"slice {self.index}"

    def sample(self, world, n, rng):
        Y = self.c.releases(self.ctx.mechanism, world, n, rng)
        return (Y @ self.u)[:, None]

    def statistics(self, x0, x1):
        c, u = self.c, self.u
        U = np.broadcast_to(u, (1, u.size))

        def lr(x):
            Ub = np.broadcast_to(u, (x.shape[0], u.size))
            return c.log_mixture(x[:, 0], Ub, c.Zi) - c.log_mixture(x[:, 0], Ub, c.Zj)

        shift = float((U @ (c.mi - c.mj))[0])
        return {"likelihood_ratio": lr, "mean_shift": lambda x: shift * x[:, 0]}


class _AveAudit(AuditTarget):
    mechanism = "swm"
    default_trials = 50_000

    def __init__(self, ctx: AuditContext, common: _Common, slices: list[int]):
        super().__init__(ctx)
        self.c = common
        self.subs = [SwmSliceAudit(ctx, common, i) for i in slices]
        self.symmetric = common.symmetric

    def claim(self) -> Claim:
        return self.c.claim(self.ctx, "Ave-SPP: Σ_ℓ ω_ℓ D^δ_∞(slice ℓ) ≤ ε′")

    def neighbours(self) -> str:
        c = self.c
        how = "the group's records" if c.per_group else "one record drawn uniformly"
        if c.aggregate_n is not None:
            how = f"a dataset of {c.aggregate_n} records (one of them the protected record)"
        return (
            f"world {c.wname}: X ~ {how} with secret {c.si} (D₁) vs {c.sj} (D₀); "
            f"{len(self.subs)} of {c.profile.m} slices audited separately"
        )

    def components(self):
        w = self.c.profile.weights
        return [(float(w[s.index]), s) for s in self.subs]

    def sample(self, world, n, rng):  # pragma: no cover - the engine runs the components
        raise NotImplementedError

    def statistics(self, x0, x1):  # pragma: no cover
        raise NotImplementedError


@register_auditor("swm")
def _factory(ctx: AuditContext):
    common = _Common(ctx, int(ctx.options.get("max_components", 400)))
    if common.flavour != "ave":
        return [SwmAudit(ctx, common)]
    if common.monte_carlo:
        raise AuditError(
            "Ave-SRPP with a Monte-Carlo profile averages over a continuous ω; no finite set of slices lower-bounds it"
        )
    w = common.profile.weights
    order = np.argsort(-(w * common.instance_deltas**2))
    k = int(ctx.options.get("max_slices", 8))
    return [_AveAudit(ctx, common, [int(i) for i in order[:k] if w[i] > 0])]


# --- mutants for the power check (dpspec.audit.mutations) ----------------------------------------

MUTATION_FACTORS = {"delta_underestimated": 0.2}


def mutate(mechanism, kind: str, factor: float | None):
    """``delta_underestimated`` — σ² calibrated from the per-slice Δ × ``factor`` (< 1), the effect of
    an estimator that under-reports the sliced Wasserstein sensitivity."""
    import dataclasses

    from dpspec.accounting.swm import swm_sigma2
    from dpspec.audit.mutations import factor_of
    from dpspec.families.swm.runtime import SwmRelease
    from dpspec.pufferfish import SWMMechanism

    if kind != "delta_underestimated":
        return None
    k = factor_of(kind, factor)
    cal = mechanism.mechanism.calibration
    mc = cal.monte_carlo
    s2 = swm_sigma2(
        cal.calibration_deltas * k,
        cal.weights,
        cal.alpha,
        cal.epsilon,
        cal.flavour,
        monte_carlo=None if mc is None else (mc[0], mc[1] * k),
    )
    bad = dataclasses.replace(cal, sigma2=s2)
    return SwmRelease(mechanism.columns, SWMMechanism(mechanism.mechanism.query, bad), name=mechanism.name)
