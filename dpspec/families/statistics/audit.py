"""Audit of a statistics release (``mechanism laplace | discrete_laplace | discrete_gaussian | auto``).

Two kinds of neighbouring pair, each a hypothesis test whose ε lower bound must stay below the certified ε:

* ``answers`` — answers 0 and Δ (one record moves one coordinate of a count or sum by at most Δ: the worst
  case of the analysis); outputs from ``mechanism.simulate`` (the runtime object's own samplers); statistic:
  the output itself (the likelihood ratio of every additive noise here is monotone in it). It checks the
  noise against the certificate.
* ``data`` — two tables that differ in one record, released end to end by a fresh copy of the runtime object
  (``release(table)``): the filter, the grouping, the clamping and the key handling are under test, not only
  the noise. Two added records are tried: one of the first declared group (or of the filter's side) whose value
  lies far outside the bounds (a release that does not clamp moves by far more than Δ), and one of a group
  that is not declared (a release that takes its keys from the data shows it). Statistics: the first group's
  answer, and whether the undeclared key appears in the output.

Mutants (``dpspec.audit.mutations``): ``noise_scaled`` (the noise scale times ``factor``, halved by
default), ``missing_clamp`` (values are not clamped to the bounds), ``key_leak`` (the groups are taken from
the data: declared keys replaced, or the partition-selection threshold removed).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor

_ADDITIVE = ("laplace", "discrete_laplace", "gaussian", "discrete_gaussian")
LEAK_KEY = "__not_a_declared_key__"


def _claim(ctx: AuditContext) -> tuple[float, float]:
    g = ctx.record.guarantee
    delta = float(ctx.delta if ctx.delta is not None else g.delta)
    return next((pt.epsilon for pt in g.dp if pt.delta == delta), float(g.epsilon)), delta


class StatisticAudit(AuditTarget):
    """Answers 0 and Δ through ``simulate``."""

    default_trials = 100_000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        p = ctx.record.mechanism.parameters
        self.mechanism = ctx.record.mechanism.name
        self.sensitivity = float(p["sensitivity"])
        self.eps, self.delta = _claim(ctx)
        if str(p["noise"]).startswith("discrete"):
            self.default_trials = 20_000  # exact rational sampling is slow

    def claim(self) -> Claim:
        return Claim(self.eps, self.delta, "(ε, δ)-DP", self.eps)

    def neighbours(self) -> str:
        return f"answers 0 and Δ = {self.sensitivity:g}"

    def label(self) -> str:
        return f"{self.name} (answers)"

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        mech = self.ctx.mechanism
        a = np.full(n, self.sensitivity if world else 0.0)
        discrete = mech.noise.startswith("discrete")
        return np.asarray(mech.simulate(a, None if discrete else rng), float).reshape(n, 1)

    def statistics(self, x0, x1):
        return {"output": lambda x: x[:, 0]}


def _passing(where) -> object:
    """A value that the filter keeps."""
    col, op, v = where
    if isinstance(v, str):
        return v if op == "==" else v + "_other"
    return {"==": v, "!=": v + 1, "<": v - 1, "<=": v, ">": v + 1, ">=": v}[op]


class StatisticDataAudit(AuditTarget):
    """Two tables differing in one record, released end to end (module doc)."""

    default_trials = 3_000
    max_trials = 20_000

    def __init__(self, ctx: AuditContext, added: str):
        super().__init__(ctx)
        self.mechanism = ctx.record.mechanism.name
        self.added = added  # "outlier" (a declared group, a value far outside the bounds) or "new_key"
        self.eps, self.delta = _claim(ctx)

    def claim(self) -> Claim:
        return Claim(self.eps, self.delta, "(ε, δ)-DP", self.eps)

    def label(self) -> str:
        return f"{self.name} (data, {self.added.replace('_', ' ')})"

    def neighbours(self) -> str:
        what = "a value far outside the bounds" if self.added == "outlier" else "an undeclared group"
        return f"a one-row table and the same table with one more record ({what})"

    def _tables(self):
        plan = self.ctx.mechanism.plan
        first = plan.keys[0] if plan.keys else "k0"
        qb = self.ctx.record.query.bounds  # the certificate's bounds (a mutant's plan may have lost them)
        lo, hi = map(float, qb[0]) if qb else (0.0, 1.0)
        base: dict[str, list] = {}
        extra: dict[str, list] = {}
        if plan.column:
            base[plan.column] = [float(lo)]
            extra[plan.column] = [hi + 10 * (hi - lo) + 100 * float(self.ctx.record.mechanism.parameters["scale"])]
        if plan.by:
            base[plan.by] = [first]
            extra[plan.by] = [first if self.added == "outlier" else LEAK_KEY]
        if plan.where:
            keep = _passing(plan.where)
            base.setdefault(plan.where[0], [keep])
            extra.setdefault(plan.where[0], [keep])
        if not base:
            base, extra = {"row": [0.0]}, {"row": [0.0]}
        both = {k: base[k] + extra[k] for k in base}
        return (
            {k: np.array(v, dtype=object if isinstance(v[0], str) else float) for k, v in base.items()},
            {k: np.array(v, dtype=object if isinstance(v[0], str) else float) for k, v in both.items()},
            first,
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        d0, d1, first = self._tables()
        table = d1 if world else d0
        mech = self.ctx.mechanism
        discrete = mech.noise.startswith("discrete")
        out = np.empty((n, 2))
        for i in range(n):
            fresh = dataclasses.replace(mech, data=None)  # a new one-shot object: its own ledger
            v, _ = fresh.release(table, rng=None if discrete else rng)
            if isinstance(v, dict):
                out[i, 0] = v.get(first, -1e300)
                out[i, 1] = float(LEAK_KEY in v)
            else:
                out[i, 0], out[i, 1] = float(v), 0.0
        return out

    def statistics(self, x0, x1):
        return {"first_group": lambda x: x[:, 0], "undeclared_key": lambda x: x[:, 1]}


def _factory(ctx: AuditContext):
    p = ctx.record.mechanism.parameters
    out: list[AuditTarget] = []
    if p.get("noise") in _ADDITIVE and p.get("count_scale") is None:
        out.append(StatisticAudit(ctx))  # (a mean's noisy denominator makes two answers: audited on data only)
    if p.get("noise") in _ADDITIVE:
        out.append(StatisticDataAudit(ctx, "outlier"))
        if p.get("by") is not None:
            out.append(StatisticDataAudit(ctx, "new_key"))
    return out


for _name in ("laplace", "discrete_laplace", "discrete_gaussian", "auto"):
    register_auditor(_name)(_factory)

MUTATION_FACTORS = {"noise_scaled": 0.5, "missing_clamp": 1.0, "key_leak": 1.0}


def mutate(mechanism, kind: str, factor: float | None):
    """``noise_scaled`` — the noise scale (and a mean's denominator scale) times ``factor``; ``missing_clamp``
    — values are no longer clamped (sums, means, quantiles); ``key_leak`` — groups come from the data (grouped
    queries)."""
    plan = mechanism.plan
    if kind == "noise_scaled":
        from dpspec.audit.mutations import factor_of

        cs, k = mechanism.count_scale, factor_of(kind, factor)
        return dataclasses.replace(mechanism, scale=mechanism.scale * k, count_scale=None if cs is None else cs * k)
    if kind == "missing_clamp" and plan.bounds is not None:
        return dataclasses.replace(
            mechanism, plan=dataclasses.replace(plan, bounds=(-math.inf, math.inf), integer=False)
        )
    if kind == "key_leak" and plan.by is not None:
        if plan.keys is None:
            return dataclasses.replace(mechanism, threshold=None)
        return dataclasses.replace(mechanism, plan=dataclasses.replace(plan, keys=None))
    return None
