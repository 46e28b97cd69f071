"""Audit of GCON (``mechanism gcon``, edge-level DP by objective perturbation).

Neighbours: the spec's graph G and G′ = G with one edge flipped. The edge is chosen among pairs of
low-degree loss nodes with different labels — where one edge moves the propagated features most
— as the pair whose noiseless minimiser moves most (at most ``candidates`` pairs are tried); any
edge is a valid neighbour, the choice only affects the power.

Outputs: the released parameter matrix Θ of the runtime path of ``GconMechanism.train`` after
the edge-free encoder: ``dpspec.families.gcon.trainer.train_gcon(graph, X, labels, train_idx, mechanism.config(),
pseudo_labels, rng)`` (calibration, propagation over the private graph, objective noise, certified
solver, approximate-minimiser noise). The encoder reads no edge, so it is fitted once and shared by
both neighbours, exactly as it would be on either graph.

Statistics: the projection of Θ on the noiseless shift Θ*(G′) − Θ*(G); on the mean difference of
the selection split; and on its LDA direction (pooled covariance, ridge).

Claim: the certificate's (ε, δ) (objective perturbation plus the AMP share).
"""

from __future__ import annotations

import itertools

import numpy as np

from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor

__all__ = ["GconAudit"]


class GconAudit(AuditTarget):
    mechanism = "gcon"
    default_trials = 1000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        from dpspec.data.bind import load_graph
        from dpspec.families.gcon.encoder import MLPEncoder, normalise_rows, tfidf_features
        from dpspec.families.gcon.graph import Graph
        from dpspec.families.gcon.plan import plan
        from dpspec.families.gcon.settings import GconSettings
        from dpspec.ir import models as ir

        mech = ctx.mechanism
        ds = load_graph(mech.graph, ctx.data)
        t = ir.Training(
            name=mech.spec_name,
            protects="",
            mechanism="gcon",
            guarantee=ir.DpGuarantee(epsilon=mech.epsilon, delta=mech.delta),
            settings=GconSettings(
                propagation=ir.Propagation(restart=mech.restart, steps=mech.steps),
                encoder=mech.encoder,
                pseudo_labels=mech.pseudo_labels,
                split=mech.split,
            ),
        )
        p = plan(t, ds)
        raw = ds.features if ds.features is not None else tfidf_features(ds.texts, max_features=3000)[0]
        X0 = normalise_rows(raw, zero_rows="uniform")
        if mech.encoder.kind == "mlp":
            enc = MLPEncoder(
                hidden=mech.encoder.hidden, output="logits", epochs=mech.encoder.epochs, seed=mech.encoder.seed
            ).fit(X0, ds.labels, p["train_idx"])
            X = normalise_rows(enc.transform(X0), zero_rows="uniform")
            pl = enc.predict(X0) if mech.pseudo_labels else None
        else:
            X = X0.toarray() if hasattr(X0, "toarray") else np.asarray(X0)
            pl = None
        self.X, self.labels, self.train_idx, self.pseudo = X, ds.labels, p["train_idx"], pl
        self.graph0 = Graph.from_edges(ds.num_nodes, ds.edges)
        self.edge, self.added, self.shift = self._choose_edge(ds, int(ctx.options.get("candidates", 12)))
        e = np.asarray(ds.edges).reshape(-1, 2)
        u, v = self.edge
        if self.added:
            e1 = np.vstack([e, [[u, v]]])
        else:
            keep = ~(((e[:, 0] == u) & (e[:, 1] == v)) | ((e[:, 0] == v) & (e[:, 1] == u)))
            e1 = e[keep]
        self.graph1 = Graph.from_edges(ds.num_nodes, e1)
        g = ctx.record.guarantee
        self.eps, self.delta = float(g.epsilon), float(g.delta)
        if ctx.delta is not None and ctx.delta != self.delta:
            raise ValueError(
                f"GCON certifies a single (ε, δ) = ({self.eps:g}, {self.delta:g}); cannot audit at δ = {ctx.delta:g}"
            )

    # --- the neighbouring pair ---------------------------------------------------------------------
    def _targets(self):
        n = self.graph0.num_nodes
        if self.pseudo is not None:
            t = np.asarray(self.pseudo).copy()
            t[self.train_idx] = np.asarray(self.labels)[self.train_idx]
            return np.arange(n), t
        return np.asarray(self.train_idx), np.asarray(self.labels)

    def _noiseless(self, graph) -> np.ndarray:
        from dpspec.families.gcon.objective import Loss, PerturbedObjective, solve_certified
        from dpspec.families.gcon.propagation import propagate_features

        p = self.ctx.record.mechanism.parameters
        cfg = self.ctx.mechanism.config()
        loss_idx, targets = self._targets()
        c = int(p["classes"])
        from dpspec.accounting.gcon import normalise_steps

        Z = propagate_features(
            graph, self.X, cfg.restart, normalise_steps(cfg.steps), ppr_method=cfg.ppr_method, ppr_tol=cfg.ppr_tol
        )
        Y = np.zeros((loss_idx.size, c))
        Y[np.arange(loss_idx.size), targets[loss_idx]] = 1.0
        mu = float(p["regularization"]) + float(p["extra_regularization"])
        obj = PerturbedObjective(
            Z[loss_idx], Y, np.zeros((Z.shape[1], c)), mu, Loss(str(p["loss"]), c, cfg.huber_delta)
        )
        theta, _ = solve_certified(obj, 1e-9)
        return theta

    def _choose_edge(self, ds, k: int):
        loss_idx, targets = self._targets()
        deg = self.graph0.degrees()
        order = loss_idx[np.argsort(deg[loss_idx], kind="stable")][: max(4, k)]
        adj = self.graph0.adjacency
        cands = []
        for u, v in itertools.combinations(order.tolist(), 2):
            if targets[u] != targets[v]:
                cands.append((float(np.linalg.norm(self.X[u] - self.X[v])), u, v))
        if not cands:
            cands = [(0.0, u, v) for u, v in itertools.combinations(order.tolist(), 2)]
        cands.sort(reverse=True)
        base = self._noiseless(self.graph0)
        best = None
        from dpspec.families.gcon.graph import Graph

        e = np.asarray(ds.edges).reshape(-1, 2)
        for _, u, v in cands[:k]:
            present = adj[u, v] != 0
            if present:
                keep = ~(((e[:, 0] == u) & (e[:, 1] == v)) | ((e[:, 0] == v) & (e[:, 1] == u)))
                g1 = Graph.from_edges(ds.num_nodes, e[keep])
            else:
                g1 = Graph.from_edges(ds.num_nodes, np.vstack([e, [[u, v]]]) if e.size else np.array([[u, v]]))
            shift = self._noiseless(g1) - base
            size = float(np.linalg.norm(shift))
            if best is None or size > best[0]:
                best = (size, (int(u), int(v)), not present, shift)
        assert best is not None  # the candidates are pairs of training nodes, and a GCON split has two or more
        return best[1], best[2], best[3]

    # --- AuditTarget -------------------------------------------------------------------------------
    def claim(self) -> Claim:
        return Claim(self.eps, self.delta, "(ε, δ)-edge DP", self.eps)

    def neighbours(self) -> str:
        u, v = self.edge
        what = "added" if self.added else "removed"
        return (
            f"graph with {self.graph0.num_nodes} nodes vs the same graph with edge ({u}, {v}) {what}; "
            f"noiseless ‖ΔΘ‖ = {np.linalg.norm(self.shift):.3g}; Θ observed"
        )

    def sample(self, world, n, rng):
        from dpspec.families.gcon.trainer import train_gcon

        mech = self.ctx.mechanism
        graph = self.graph1 if world else self.graph0
        cfg = mech.config()
        seeds = rng.integers(0, 2**63 - 1, size=n)
        out = []
        for s in seeds:
            res = train_gcon(
                graph,
                self.X,
                self.labels,
                self.train_idx,
                cfg,
                pseudo_labels=self.pseudo,
                rng=np.random.default_rng(int(s)),
            )
            out.append(np.asarray(res.theta, float).ravel())
        return np.vstack(out)

    def statistics(self, x0, x1):
        d = self.shift.ravel()
        m = x1.mean(axis=0) - x0.mean(axis=0)
        S = np.cov(np.vstack([x0 - x0.mean(axis=0), x1 - x1.mean(axis=0)]).T).reshape(m.size, m.size)
        ridge = 1e-6 * max(float(np.trace(S)) / m.size, 1e-300)
        try:
            w = np.linalg.solve(S + ridge * np.eye(m.size), m)
        except np.linalg.LinAlgError:  # pragma: no cover
            w = m
        return {"noiseless_shift": lambda x: x @ d, "mean_difference": lambda x: x @ m, "lda": lambda x: x @ w}


@register_auditor("gcon")
def _factory(ctx: AuditContext):
    return [GconAudit(ctx)]


# --- mutants for the power check (dpspec.audit.mutations) ----------------------------------------

MUTATION_FACTORS = {"noise_scaled": 1e-3}


def mutate(mechanism, kind: str, factor: float | None):
    """``noise_scaled`` — the runtime configuration calibrated for ε / ``factor`` (less objective and
    output noise than certified)."""
    import dataclasses

    from dpspec.audit.mutations import as_class, factor_of
    from dpspec.families.gcon.runtime import GconMechanism

    if kind != "noise_scaled":
        return None
    k = factor_of(kind, factor)
    base = mechanism

    @dataclasses.dataclass(frozen=True)
    class _LessNoise(GconMechanism):
        def config(self):
            return dataclasses.replace(base.config(), epsilon=base.epsilon / k)

    return as_class(_LessNoise, mechanism)
