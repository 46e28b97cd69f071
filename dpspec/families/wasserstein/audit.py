"""Audit of the Wasserstein mechanism (ε-Pufferfish): a distinguishing test on the two secret-conditioned
laws of the pair with the largest W∞, drawn from the Pufferfish experiment itself.

Neighbours: under a record-level prior, ``output aggregate`` draws a whole dataset — the protected record
from its secret's class, the other n − 1 records i.i.d. from the data (the empirical member of the
product prior) — and runs the runtime object on it; ``output per_record`` draws one record of the
secret's class through the per-record release; ``groups`` releases the secret's whole group. The
statistics are the exact Laplace log-likelihood ratio against drawn components of the two conditional
laws (:func:`dpspec.pufferfish.attacks.laplace_log_likelihood`) and the mean shift. Pure ε: δ = 0.
"""

from __future__ import annotations

import numpy as np

from dpspec.audit.api import AuditError
from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor


def _rebuild(ctx: AuditContext):
    from dpspec.check.framework import Context
    from dpspec.compiler import scenario as S
    from dpspec.data.bind import load_table
    from dpspec.ir import models as ir

    if ctx.compiled is None:
        raise AuditError("the audit needs the compiled spec (the scenario's laws)")
    spec_ir = ctx.compiled.spec.ir
    rel = next((t for t in spec_ir.targets() if t.name == ctx.name), None)
    assert isinstance(rel, ir.Release)  # the audited certificate is one of this spec's releases
    sc = Context(spec_ir).resolve_protects(rel)
    assert isinstance(sc, ir.Scenario)  # a Wasserstein release protects a scenario (DPS120: its units are secrets)
    if sc.secret.membership:
        raise AuditError("membership secrets are not audited yet")
    table = load_table(sc.data, ctx.data)
    if sc.secret.share and sc.secret.mean_of is not None:  # a mean secret: no labels; the values are means
        labels, values = np.array([], dtype=object), tuple(sc.secret.values)
    elif sc.secret.share:  # a proportion secret: the records' predicate labels; the secret values are proportions
        labels, _tf = S.predicate_secret_labels(table, sc.secret)
        values = tuple(sc.secret.values)
    else:
        labels, values = S.secret_labels(table, sc)
    assert rel.query is not None  # a Wasserstein release states its query (the compile step refuses one without)
    X, query = S.build_query(table, rel.query)
    return rel, sc, X, labels, values, query


class PufferfishLaplaceAudit(AuditTarget):
    """D₁: the secret sᵢ of the worst pair, D₀: sⱼ; the runtime's Laplace release of the experiment's data."""

    mechanism = "wasserstein"
    default_trials = 20_000

    def __init__(self, ctx: AuditContext, max_components: int = 300):
        super().__init__(ctx)
        from dpspec.ir import models as ir
        from dpspec.pufferfish import aggregate as A

        rel, sc, X, labels, values, query = _rebuild(ctx)
        p = ctx.record.mechanism.parameters
        self.scales = np.array([p[f"scale_{k}"] for k in range(int(p["dimension"]))])
        self.eps = float(p["epsilon"])
        self.query, self.X, self.labels = query, X, labels
        self.groups = any(isinstance(w, ir.GroupsWorld) for w in sc.worlds)
        self.aggregate = rel.output == "aggregate" and not self.groups
        self.share = bool(sc.secret.share)
        # a mean secret (Lemma E): the query's coordinates on the column, shifted to the secret mean
        self.mean_cols = [k for k, c in enumerate(rel.query.columns) if c == sc.secret.mean_of]
        self.mean = bool(sc.secret.share and sc.secret.mean_of is not None)
        self.base_mean = float(np.mean(X[:, self.mean_cols[0]])) if self.mean and self.mean_cols else 0.0
        G = np.asarray(query.per_record(X), float)
        w = 1.0 / (self.scales / max(float(np.max(self.scales)), 1e-300))  # ∝ 1/range: the calibration's norm
        best: tuple[float, str | None, str | None] = (-1.0, None, None)
        pairs = {tuple(map(str, q)) for q in ctx.record.sensitivity.pairs}
        for a, b in pairs:
            if self.mean:  # Lemma E: the pair's W∞ is n·|μ − μ′| times a constant
                d = len(X) * abs(float(a) - float(b))
            elif self.share:  # Lemma D: the pair's W∞ is m(n, p, p′) times a constant
                from dpspec.pufferfish.share import binomial_w_inf

                d = float(binomial_w_inf(len(X), a, b))
            elif self.groups:
                d = float(np.sum(w * np.abs(query(X[labels == a]) - query(X[labels == b]))))
            else:
                d = A.weighted_l1_w_inf(G[labels == a], G[labels == b], w)[0]
            if d > best[0]:
                best = (d, a, b)
        _, self.si, self.sj = best
        self.symmetric = (self.sj, self.si) in pairs
        rng = np.random.default_rng(12345)
        self.Zi = self._laws(self.si, max_components, rng)
        self.Zj = self._laws(self.sj, max_components, rng)

    def _dataset(self, s, rng) -> np.ndarray:
        if self.mean:  # θ_μ: n i.i.d. records of the data, the secret's column shifted to mean μ
            D = self.X[rng.integers(0, len(self.X), len(self.X))].astype(float)
            D[:, self.mean_cols] += float(s) - self.base_mean
            return D
        if self.share:  # θ_p: n i.i.d. records, each on the predicate's true side with probability p
            n = len(self.X)
            T, F = self.X[self.labels == "true"], self.X[self.labels == "false"]
            k = int(rng.binomial(n, float(s)))
            return np.vstack([T[rng.integers(0, len(T), k)], F[rng.integers(0, len(F), n - k)]])
        own = self.X[self.labels == s]
        if self.groups:
            return own
        first = own[rng.integers(0, len(own))][None, :]
        if not self.aggregate:
            return first
        return np.vstack([first, self.X[rng.integers(0, len(self.X), len(self.X) - 1)]])

    def _answer(self, D) -> np.ndarray:
        if self.aggregate or self.groups:
            return np.asarray(self.query(D), float).reshape(1, -1)
        return np.asarray(self.query.per_record(D), float).reshape(1, -1)

    def _laws(self, s, k, rng) -> np.ndarray:
        if self.groups:
            return self._answer(self._dataset(s, rng))
        if not self.aggregate:
            own = self.X[self.labels == s]
            G = np.asarray(self.query.per_record(own), float)
            return G if len(G) <= k else G[rng.choice(len(G), k, replace=False)]
        return np.vstack([self._answer(self._dataset(s, rng)) for _ in range(k)])

    def claim(self) -> Claim:
        return Claim(self.eps, 0.0, "ε-Pufferfish", self.eps, note="pure ε-Pufferfish of the declared scenario, not DP")

    def neighbours(self) -> str:
        how = (
            "n i.i.d. records of the data, the secret's column shifted to the secret mean"
            if self.mean
            else "n i.i.d. records whose predicate holds with the secret proportion"
            if self.share
            else "the secret's whole group"
            if self.groups
            else "the protected record from the secret's class and n − 1 records from the data"
            if self.aggregate
            else "one record of the secret's class"
        )
        return f"secret {self.si} (D₁) vs {self.sj} (D₀): {how}"

    def sample(self, world, n, rng):
        s = self.si if world == 1 else self.sj
        mech = self.ctx.mechanism
        return np.vstack(
            [np.asarray(mech.simulate(self._dataset(s, rng), rng), float).reshape(1, -1) for _ in range(n)]
        )

    def statistics(self, x0, x1):
        from dpspec.pufferfish.attacks import laplace_log_likelihood

        mi, mj = self.Zi.mean(0), self.Zj.mean(0)

        def lr(x):
            return laplace_log_likelihood(x, self.Zi, self.scales) - laplace_log_likelihood(x, self.Zj, self.scales)

        return {"likelihood_ratio": lr, "mean_shift": lambda x: (x - (mi + mj) / 2) @ ((mi - mj) / self.scales)}


@register_auditor("wasserstein")
def _factory(ctx: AuditContext):
    return [PufferfishLaplaceAudit(ctx, int(ctx.options.get("max_components", 300)))]
