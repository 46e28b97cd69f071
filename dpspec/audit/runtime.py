"""Runtime audits: distinguishing tests of what the runtime object does beyond the noise and the clip.

The privacy audits (:mod:`.dpsgd`, :mod:`.srpp`, :mod:`.relational`) test the certified step. These
targets test the runtime paths around it, each with two neighbouring inputs and a statistic that a
runtime hole makes powerful, through the public API a user's loop calls:

* ``normaliser`` (DP-SGD, Poisson or full batch): D₀ has r zero-gradient records, D₁ one more. One
  step of ``private_gradients`` is observed; the statistic is the log of the empirical standard
  deviation of the released (normalised) gradient over thousands of coordinates. A runtime that
  divides by q·len(data) releases noise of scale σC/(q·r) on D₀ and σC/(q·(r+1)) on D₁: a threshold
  test separates them (TPR ≈ 1, FPR ≈ 0). With the certificate's constant normaliser the two
  outputs have the same law.
* ``non-finite`` (DP-SGD, SRPP-SGD, relational): on D₁ the canary record's gradient is non-finite (NaN input),
  on D₀ the record has gradient 0 (SRPP: −scale·C, the other world). Observed: the released values
  of the first k steps and whether they are finite. A runtime that drops (or poisons) the whole step
  when one example is non-finite freezes exactly when the canary is sampled; replacing its gradient
  by zero keeps the step within the certified sensitivity.
* ``step budget`` (DP-SGD, SRPP-SGD, relational): the canary neighbours of the privacy audit; a user's
  loop asks for ``budget_factor`` × T steps (starting a new optimizer or trainer of the same
  mechanism when one refuses) and stops at :class:`~dpspec.mechanisms.ledger.BudgetExceededError`
  (``budget_factor`` 25; 100 for SRPP-SGD, whose per-step leakage is smaller).
  Compared with the certificate's ε for all T steps: a runtime without a budget releases the extra
  steps and the transcript leaks more than certified. (Run on certificates of at most
  ``max_budget_steps`` = 40 steps; the extra steps cost time.)
* ``per-batch cap`` (DP-SGD, SRPP-SGD, relational): the user's loop passes batches that break a cap —
  the canary record repeated ``repeats`` times (DP-SGD; SRPP: a batch of B copies of an affected
  record), one edge of the canary node repeated (relational) — and, when the runtime refuses, the
  batch drawn as accounted. A runtime that accepts the batch adds the canary's clipped gradient
  many times.
* ``wrapper rewind``, ``wrapper parameter``, ``wrapper non-finite`` (DP-SGD): the same neighbours
  through ``dpspec.torch.make_private`` — a checkpoint reloaded to buy more noisy steps, a parameter
  added to the optimizer that the private step does not noise, a NaN record that stops the run
  (:mod:`.wrapper`).

Every target runs a fresh copy of the mechanism per trial (its own ledger: one trial is one run),
has its claim computed from the certificate's numbers (not the object's), and is capped at
``max_trials`` outputs per neighbour: the verdicts are stark and the runs cost per-trial calls.
``options`` (per target or mechanism): ``records``, ``dim``, ``repeats``, ``budget_factor``,
``max_budget_steps``, ``checks`` (run only these of :data:`RUNTIME_CHECKS`), ``runtime = False``
to skip them all.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .base import AuditContext, SkippedTarget
from .dpsgd import DpSgdAudit, _block_model, _linear_loss
from .relational import RelationalAudit
from .srpp import SrppSgdAudit

__all__ = ["dpsgd_targets", "srpp_targets", "relational_targets", "RUNTIME_CHECKS"]

RUNTIME_CHECKS = (
    "normaliser",
    "non-finite",
    "step budget",
    "per-batch cap",
    "wrapper rewind",
    "wrapper parameter",
    "wrapper non-finite",
)


def _oriented(f, x0, x1):
    """``f`` signed so that higher scores point to D₁ on the selection split (the engine's convention)."""
    d = float(np.nanmean(f(x1)) - np.nanmean(f(x0)))
    sign = -1.0 if d < 0 else 1.0
    return lambda x: sign * f(x)


def _with(ctx: AuditContext, **opts) -> AuditContext:
    return dataclasses.replace(ctx, options={**ctx.options, **opts})


def _skip(reason: str):
    from .api import AuditError

    return AuditError(reason)


class _Runtime:
    check = ""
    default_trials = 400
    max_trials = 500
    pilot_trials = 8  # one run per output: the cost per output does not depend on how many are drawn

    def label(self) -> str:
        return f"{self.name} · {self.check}"


def _budget_steps(ctx: AuditContext, T: int, factor: float = 25.0) -> tuple[int, int]:
    cap = int(ctx.options.get("max_budget_steps", 40))
    if T > cap:
        raise _skip(
            f"step budget: the certificate covers {T} steps; the budget audit asks for "
            f"budget_factor × T steps and runs on certificates of at most {cap} steps "
            "(tests/runtime check the refusal itself)"
        )
    return T, int(math.ceil(float(ctx.options.get("budget_factor", factor)) * T))


# --- DP-SGD ------------------------------------------------------------------------------------------


class DpSgdNormaliserAudit(_Runtime, DpSgdAudit):
    check = "normaliser"
    default_trials = 300
    max_trials = 300

    def __init__(self, ctx: AuditContext):
        super().__init__(_with(ctx, steps=1))
        if self.sampling == "without_replacement":
            raise _skip(
                "normaliser: fixed-size batches are divided by B, and the dataset size is part of the "
                "without-replacement analysis (another size is refused)"
            )
        self.records = int(ctx.options.get("records", 20))
        self.dim = int(ctx.options.get("dim", 4096))

    def neighbours(self) -> str:
        return (
            f"{self.records} zero-gradient records (D₀) vs {self.records + 1} (D₁: one added); one step of "
            f"private_gradients; observed: log of the empirical std of the released gradient "
            f"({self.dim * self.L} coordinates)"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        mech = self.ctx.mechanism
        m = self.records + world
        model = _block_model(self.dim, self.L)
        X = torch.zeros(m, self.dim * self.L, dtype=torch.float64)
        y = torch.zeros(m, dtype=torch.float64)
        out = np.empty((n, 1))
        seeds = rng.integers(0, 2**62, size=n)
        for i in range(n):
            run = dataclasses.replace(mech)
            idx = next(run.batches(m, np.random.default_rng(int(seeds[i])), 1))
            g = run.private_gradients(
                model, _linear_loss, X[idx], y[idx], m, generator=torch.Generator().manual_seed(int(seeds[i])), idx=idx
            )
            v = torch.cat([t.reshape(-1) for t in g.values()])
            out[i, 0] = float(torch.log(v.std()))
        return out

    def statistics(self, x0, x1):
        # either direction may reveal D₁ (a data-derived normaliser shrinks or grows the noise)
        return {"log_noise_scale": lambda x: x[:, 0], "minus_log_noise_scale": lambda x: -x[:, 0]}


class DpSgdNonFiniteAudit(_Runtime, DpSgdAudit):
    check = "non-finite"
    default_trials = 300
    max_trials = 300

    def neighbours(self) -> str:
        unit = f"{self.K} canaries" if self.K > 1 else "one canary"
        return (
            f"{self.n} zero-gradient records plus {unit} whose gradient is non-finite (NaN input) on D₁ and "
            f"0 on D₀; {self.k} step(s) observed: the released values and whether they are finite"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        mech = self.ctx.mechanism
        k, L = self.k, self.L
        X = torch.zeros(self.n, L, dtype=torch.float64)
        if world:
            X[: self.K] = float("nan")
        y = torch.zeros(self.n, dtype=torch.float64)
        out = np.zeros((n, 2 * k))
        seeds = rng.integers(0, 2**62, size=n)
        for i in range(n):
            run = dataclasses.replace(mech)
            model = _block_model(1, L)
            gen = torch.Generator().manual_seed(int(seeds[i]))
            for t, idx in enumerate(run.batches(self.n, np.random.default_rng(int(seeds[i])), k)):
                g = run.private_gradients(model, _linear_loss, X[idx], y[idx], self.n, generator=gen, idx=idx)
                v = float(sum(float(t_.sum()) for t_ in g.values())) * run.normalizer
                finite = math.isfinite(v)
                out[i, t] = v if finite else 0.0
                out[i, k + t] = 0.0 if finite else 1.0
        return out

    def statistics(self, x0, x1):
        k = self.k
        return {
            "nonfinite_steps": lambda x: x[:, k:].sum(axis=1),
            "sum": lambda x: x[:, :k].sum(axis=1) / (self.sigma * self.C),
        }


class DpSgdBudgetAudit(_Runtime, DpSgdAudit):
    check = "step budget"

    def __init__(self, ctx: AuditContext):
        T, k_req = _budget_steps(ctx, int(ctx.record.mechanism.parameters["steps"]))
        super().__init__(_with(ctx, steps=T))  # the claim: the certificate's ε for all T steps
        self.k_req = k_req
        self.k = k_req

    def neighbours(self) -> str:
        return (
            super().neighbours().rsplit(";", 1)[0] + f"; a loop asks for {self.k_req} steps (the certificate "
            f"covers {self.T}) and stops when the runtime refuses"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        from dpspec.mechanisms.ledger import BudgetExceededError

        mech = self.ctx.mechanism
        out = np.zeros((n, self.k_req * self.L))
        seeds = rng.integers(0, 2**63 - 1, size=n + 1)
        gen = torch.Generator().manual_seed(int(seeds[-1] % (2**62)))
        base = self.scale * np.array(self.layer_clips)
        slot = base if world else (-base if self.relation == "substitution" else np.zeros_like(base))
        chunk = 128
        for c0 in range(0, n, chunk):
            R = min(chunk, n - c0)
            model = _block_model(R, self.L)
            run = dataclasses.replace(mech)
            rngs = [np.random.default_rng(int(seeds[c0 + r])) for r in range(R)]
            for t in range(self.k_req):
                try:
                    batches = [np.asarray(next(run.batches(self.n, rngs[r], 1))) for r in range(R)]
                except BudgetExceededError:
                    break  # nothing more is released: the rest of the transcript is empty
                x = np.zeros((sum(b.size for b in batches), R * self.L))
                row = 0
                for r, idx in enumerate(batches):
                    for pos in np.flatnonzero(idx < self.K):
                        x[row + pos, r + R * np.arange(self.L)] = slot
                    row += idx.size
                sums, _ = run._noisy_sum(
                    model, _linear_loss, torch.from_numpy(x), torch.zeros(len(x), dtype=torch.float64), generator=gen
                )
                for layer, key in enumerate(sorted(sums, key=lambda s: int(s.split(".")[-1]))):
                    out[c0 : c0 + R, t * self.L + layer] = sums[key].detach().numpy()
        return out


class DpSgdCapAudit(_Runtime, DpSgdAudit):
    check = "per-batch cap"
    default_trials = 300
    max_trials = 300

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        self.repeats = int(ctx.options.get("repeats", 10))

    def neighbours(self) -> str:
        return (
            super().neighbours() + f"; the loop samples as accounted but repeats the canary's index "
            f"{self.repeats} times when it is drawn (passed as idx), and skips the step if it is refused"
        )

    def _draw(self, rng):
        if self.sampling == "poisson":
            return np.flatnonzero(rng.random(self.n) < self.rate)
        if self.sampling == "without_replacement":
            return rng.choice(self.n, size=int(self.batch), replace=False)
        return np.arange(self.n)

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        from dpspec.mechanisms.ledger import CapExceededError

        mech = self.ctx.mechanism
        k, L = self.k, self.L
        base = self.scale * np.array(self.layer_clips)
        X = torch.zeros(self.n, L, dtype=torch.float64)
        X[: self.K] = torch.from_numpy(base if world else (-base if self.relation == "substitution" else 0 * base))
        y = torch.zeros(self.n, dtype=torch.float64)
        out = np.zeros((n, k * L))
        seeds = rng.integers(0, 2**62, size=n)
        for i in range(n):
            run = dataclasses.replace(mech)
            model = _block_model(1, L)
            gen = torch.Generator().manual_seed(int(seeds[i]))
            r = np.random.default_rng(int(seeds[i]))
            for t in range(k):
                idx = self._draw(r)
                canaries = idx[idx < self.K]
                if canaries.size:  # the bug: the canary's record is fed several times
                    idx = np.concatenate([idx, np.repeat(canaries, self.repeats - 1)])
                try:
                    g = run.private_gradients(model, _linear_loss, X[idx], y[idx], self.n, generator=gen, idx=idx)
                except CapExceededError:
                    continue  # refused: nothing released for this step
                for layer, key in enumerate(sorted(g, key=lambda s: int(s.split(".")[-1]))):
                    out[i, t * L + layer] = float(g[key].sum()) * run.normalizer
        return out


def dpsgd_targets(ctx: AuditContext) -> list:
    from .wrapper import wrapper_targets  # the same certificate entry through dpspec.torch.make_private

    return _targets(
        ctx, (DpSgdNormaliserAudit, DpSgdNonFiniteAudit, DpSgdBudgetAudit, DpSgdCapAudit)
    ) + wrapper_targets(ctx)


# --- SRPP-SGD ----------------------------------------------------------------------------------------


class _SrppRuntime(_Runtime, SrppSgdAudit):
    default_trials = 200
    max_trials = 200

    def _data(self, world: int):
        import torch

        x = torch.zeros(self.n, 1, dtype=torch.float32)
        x[: self.delta_records, 0] = (1.0 if world == 1 else -1.0) * self.scale * self.C
        return x, torch.zeros(self.n, dtype=torch.long)

    def _model(self):
        import torch

        torch.set_num_threads(1)
        model = torch.nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            model.weight.zero_()
        return model


class SrppNonFiniteAudit(_SrppRuntime):
    check = "non-finite"

    def neighbours(self) -> str:
        return (
            super().neighbours() + "; on D₁ the first affected record's gradient is non-finite (NaN input) "
            "instead of +scale·C"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        x, y = self._data(world)
        if world:
            x[0, 0] = float("nan")
        out = np.empty((n, self.k))
        seeds = rng.integers(0, 2**62, size=n)
        for i in range(n):
            model = self._model()
            opt = dataclasses.replace(self.mech).optimizer(model, _linear_loss, seed=int(seeds[i]))
            for t, idx in enumerate(opt.batches(self.n)):
                if t >= self.k:
                    break
                ii = torch.as_tensor(idx, dtype=torch.long)
                opt.step(x[ii], y[ii])
                out[i, t] = float(model.weight.detach()[0, 0])
        return out

    def statistics(self, x0, x1):
        return {
            "nonfinite": lambda x: np.isnan(x).sum(axis=1).astype(float),
            "last": _oriented(lambda x: np.nan_to_num(x[:, -1], nan=0.0), x0, x1),
        }


class SrppCapAudit(_SrppRuntime):
    check = "per-batch cap"

    def neighbours(self) -> str:
        return (
            super().neighbours() + "; at every step the loop first passes a batch of B copies of an affected "
            "record (idx given) and, if it is refused, the batch drawn as accounted"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        from dpspec.mechanisms.ledger import CapExceededError

        x, y = self._data(world)
        B = int(self.mech.plan.sampling.batch_size)
        bad = np.zeros(B, dtype=np.int64)
        out = np.empty((n, self.k))
        seeds = rng.integers(0, 2**62, size=n)
        for i in range(n):
            model = self._model()
            opt = dataclasses.replace(self.mech).optimizer(model, _linear_loss, seed=int(seeds[i]))
            for t, idx in enumerate(opt.batches(self.n)):
                if t >= self.k:
                    break
                try:
                    opt.step(x[torch.as_tensor(bad)], y[torch.as_tensor(bad)], bad)
                except CapExceededError:
                    ii = torch.as_tensor(idx, dtype=torch.long)
                    opt.step(x[ii], y[ii])
                out[i, t] = float(model.weight.detach()[0, 0])
        return out


class SrppBudgetAudit(_SrppRuntime):
    check = "step budget"
    default_trials = 100
    max_trials = 100

    def __init__(self, ctx: AuditContext):
        T, k_req = _budget_steps(ctx, int(ctx.mechanism.plan.steps), factor=100.0)
        super().__init__(_with(ctx, steps=T))
        self.k_req = k_req

    def neighbours(self) -> str:
        return (
            super().neighbours().rsplit(";", 1)[0] + f"; a loop asks for {self.k_req} steps (the certificate "
            f"covers {self.T}), building a new optimizer of the same mechanism when one refuses; the final "
            "parameter is observed"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        from dpspec.mechanisms.ledger import BudgetExceededError

        x, y = self._data(world)
        out = np.empty((n, 1))
        seeds = rng.integers(0, 2**62, size=n)
        sampling = self.mech.plan.sampling
        for i in range(n):
            model = self._model()
            run = dataclasses.replace(self.mech)
            r = np.random.default_rng(int(seeds[i]))
            opt = run.optimizer(model, _linear_loss, seed=int(seeds[i]))
            for _ in range(self.k_req):
                idx = sampling.draw(r)  # the loop's own sampler, exactly as accounted
                ii = torch.as_tensor(idx, dtype=torch.long)
                try:
                    opt.step(x[ii], y[ii], idx)
                except BudgetExceededError:
                    opt = run.optimizer(model, _linear_loss, seed=int(r.integers(2**62)))  # "start again"
                    try:
                        opt.step(x[ii], y[ii], idx)
                    except BudgetExceededError:
                        break
            out[i, 0] = float(model.weight.detach()[0, 0])
        return out

    def statistics(self, x0, x1):
        return {"last": _oriented(lambda x: x[:, 0], x0, x1)}


def srpp_targets(ctx: AuditContext) -> list:
    return _targets(ctx, (SrppNonFiniteAudit, SrppCapAudit, SrppBudgetAudit))


# --- relational DP-SGD ---------------------------------------------------------------------------------


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


class _RelationalRuntime(_Runtime, RelationalAudit):
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
            "sum": _oriented(lambda x: x[:, :k].sum(axis=1), x0, x1),
            "extreme": _oriented(lambda x: x[:, :k].min(axis=1), x0, x1),
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
        T, k_req = _budget_steps(ctx, int(ctx.record.mechanism.parameters["steps"]))
        super().__init__(_with(ctx, steps=T))
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
            "sum": _oriented(lambda x: x[:, :k].sum(axis=1), x0, x1),
        }


def relational_targets(ctx: AuditContext) -> list:
    return _targets(ctx, (RelationalNonFiniteAudit, RelationalBudgetAudit, RelationalCapAudit))


def _targets(ctx: AuditContext, classes) -> list:
    from .api import AuditError

    if ctx.options.get("runtime") is False:
        return []
    only = ctx.options.get("checks")
    out = []
    for cls in classes:
        if only is not None and cls.check not in only:
            continue
        try:
            out.append(cls(ctx))
        except AuditError as e:
            out.append(SkippedTarget(ctx.name, f"{ctx.name} · {cls.check}", str(e)))
    return out
