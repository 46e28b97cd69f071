"""Audit of SRPP-SGD (``mechanism srpp_sgd``): the two secret-conditioned worlds of a label-flip /
localized discrepancy model, run through the real optimizer (white box: every parameter is observed).

Neighbours (a coupled pair of worlds, Zhang & Vorobeychik Def 5.1): a dataset of N records on a
one-parameter linear model whose loss is linear, so a record's gradient is its input and does not
depend on the model state. The records a secret changes (Δ of them; D_max for the localized model)
have gradient +``canary_scale``·C on D₁ and −``canary_scale``·C on D₀ (clipped to ±C by a correct
mechanism — the largest shift 2C per record of the replace model, Prop 5.1); every other record has
gradient 0. Each trial is a fresh optimizer from :meth:`SrppSgdMechanism.optimizer` with its own
seed, drawing its own batches exactly as certified, and observes the parameter after each of the
first k steps.

Claim: worst-case SRPP-SGD (HUC caps) certifies, for every order α′, ε_k(α′) = α′·H_k/(2σ²) with
H_k = Σ_{t<k} h_t (Thm 5.6; the caps do not depend on α′), so the observation is (ε, δ)-indistinguishable
with ε = min_α′ ε_k(α′) + log(1/δ)/(α′ − 1) (Mironov 2017 Prop 3), the reading the audit tests. In one
dimension the slice is the whole output, so Ave and Joint readings coincide. sa-SRPP (sa-HUC) bounds
an average over the sampling pattern (§3.3), which no output-only test can check: such certificates
are skipped with that reason. Per-layer clipping and Poisson sampling are skipped as well (the
one-parameter construction does not cover them).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor
from dpspec.audit.runtime import RuntimeAudit, budget_steps, oriented, runtime_targets, with_options

__all__ = ["SrppSgdAudit"]


def _linear_loss(out, y):
    return out.sum()


class SrppSgdAudit(AuditTarget):
    mechanism = "srpp_sgd"
    default_trials = 1000

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        from dpspec.audit.api import AuditError  # a skip with its reason, not a failure
        from dpspec.srpp import plan_caps

        mech = ctx.mechanism
        cal = mech.calibration
        if cal.subsampling_aware:
            raise AuditError(
                "sa-SRPP is an on-average notion over the subsampling pattern (ZV25 §3.3): it does "
                "not bound the divergence of the released outputs, so no output-only audit can test it"
            )
        if mech.plan.per_layer_clips is not None:
            raise AuditError("per-layer clipping: the one-parameter audit model has a single block")
        if mech.plan.sampling.scheme == "poisson":
            raise AuditError("Poisson sampling: the audit covers fixed-size batches (without replacement, full batch)")
        if mech.discrepancy is None:
            raise AuditError("the mechanism does not carry its discrepancy model")
        d = getattr(mech.discrepancy, "d_max", None)
        if d is None:
            raise AuditError(
                f"discrepancy model `{mech.discrepancy.name}`: the audit builds worlds for label-flip "
                "and localized models only"
            )
        o = ctx.options
        self.mech = mech
        self.n = mech.plan.sampling.dataset_size
        self.delta_records = int(d)
        self.T = mech.plan.steps
        self.k = int(o.get("steps") or min(self.T, int(o.get("max_steps", 4))))
        self.scale = float(o.get("canary_scale", 10.0))
        self.C = mech.plan.total_clip
        self.delta = float(ctx.delta if ctx.delta is not None else o.get("delta", 1e-5))
        accountant = "amplified" if cal.accountant == "amplified" else "huc"
        h, _w, _g, _cap = plan_caps(mech.plan, mech.discrepancy, "huc")
        step_caps = np.max(h, axis=1)  # the largest slice cap per step (slice-independent here)
        self.h_k = float(np.sum(step_caps[: self.k]))
        self.h_total = float(np.sum(step_caps))
        self.accountant = accountant
        p = ctx.record.mechanism.parameters
        self.sigma2 = float(p["sigma2"])
        self.certified = (float(ctx.record.guarantee.alpha), float(ctx.record.guarantee.epsilon))
        self._claim = self._compute_claim()

    def _eps(self, steps_cap: float) -> float:
        rho = steps_cap / (2.0 * self.sigma2)  # ε(α′) = α′·ρ, with the certificate's σ² (not the object's)
        if rho <= 0:
            return 0.0
        L = math.log(1.0 / self.delta)
        a = 1.0 + math.sqrt(L / rho)  # the minimising order
        return a * rho + L / (a - 1.0)

    def _compute_claim(self) -> Claim:
        a, e = self.certified
        head = self._eps(self.h_total)
        eps = self._eps(self.h_k)
        note = (
            f"HUC caps of the first {self.k} of {self.T} steps, read as (ε, δ) at δ = {self.delta:g} via "
            f"min over α′ of α′·H_k/(2σ²) + log(1/δ)/(α′−1); certified ε({a:g}) = {e:.4g}"
        )
        if self.accountant == "amplified":
            note += "; the certificate used the amplified accountant, the audit compares with the (larger) HUC reading"
        return Claim(eps, self.delta, "SRPP-SGD read as (ε, δ) indistinguishability of the two worlds", head, note=note)

    def claim(self) -> Claim:
        return self._claim

    def neighbours(self) -> str:
        return (
            f"{self.n} records; the {self.delta_records} records the secret changes have gradient "
            f"+{self.scale:g}·C (D₁) or −{self.scale:g}·C (D₀), the others 0; parameter observed after each of "
            f"the first {self.k} steps"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        torch.set_num_threads(1)
        x = torch.zeros(self.n, 1, dtype=torch.float32)
        x[: self.delta_records, 0] = (1.0 if world == 1 else -1.0) * self.scale * self.C
        y = torch.zeros(self.n, dtype=torch.long)
        out = np.empty((n, self.k))
        seeds = rng.integers(0, 2**62, size=n)
        for i in range(n):
            model = torch.nn.Linear(1, 1, bias=False)
            with torch.no_grad():
                model.weight.zero_()
            # every trial is one run: a fresh copy of the mechanism (its own ledger)
            opt = dataclasses.replace(self.mech).optimizer(model, _linear_loss, seed=int(seeds[i]))
            for t, idx in enumerate(opt.batches(self.n)):
                if t >= self.k:
                    break
                ii = torch.as_tensor(idx, dtype=torch.long)
                opt.step(x[ii], y[ii])
                out[i, t] = float(model.weight.detach()[0, 0])
        return out

    def statistics(self, x0: np.ndarray, x1: np.ndarray):
        m0, m1 = x0.mean(axis=0), x1.mean(axis=0)
        cov = (
            0.5 * (np.cov(x0, rowvar=False) + np.cov(x1, rowvar=False))
            if x0.shape[1] > 1
            else np.array([[0.5 * (x0.var() + x1.var())]])
        )
        w = np.linalg.solve(np.atleast_2d(cov) + 1e-12 * np.eye(x0.shape[1]), m1 - m0)
        return {"last": lambda x: x[:, -1], "lda": lambda x: x @ w}


@register_auditor("srpp_sgd")
def _factory(ctx: AuditContext):
    return [SrppSgdAudit(ctx), *srpp_targets(ctx)]


# --- mutants for the power check (dpspec.audit.mutations) ----------------------------------------

MUTATION_FACTORS = {"noise_scaled": 0.25, "no_step_budget": 1.0, "no_batch_caps": 1.0, "nonfinite_voids_step": 1.0}


@functools.cache
def _mutant_classes():
    import types

    from dpspec.families.srpp_sgd.runtime import SrppSgdMechanism

    def permissive_batch(self, idx, rows):
        if idx is None and self._guard._issued:
            self._guard._issued.popleft()

    def voiding_policy(self, cs):
        import torch

        if cs.nonfinite:
            return {k: torch.full_like(v, float("nan")) for k, v in cs.sums.items()}
        return cs.sums

    @dataclasses.dataclass(frozen=True, eq=False)
    class FreshBudgetSrpp(SrppSgdMechanism):
        """Every optimizer gets a fresh T-step budget (optimizer() twice ran 2T steps)."""

        def optimizer(self, model, loss_fn=None, *, seed=None, comm=None):
            from dpspec.srpp import SrppSgdOptimizer

            return SrppSgdOptimizer(model, self.plan, self.calibration, loss_fn, seed=seed, comm=comm, name=self.name)

    @dataclasses.dataclass(frozen=True, eq=False)
    class UncappedSrpp(SrppSgdMechanism):
        """``step()`` accepts any batch (200 copies of one affected record against a cap of 5)."""

        def optimizer(self, model, loss_fn=None, *, seed=None, comm=None):
            opt = super().optimizer(model, loss_fn, seed=seed, comm=comm)
            opt._check_batch = types.MethodType(permissive_batch, opt)
            return opt

    @dataclasses.dataclass(frozen=True, eq=False)
    class StepVoidingSrpp(SrppSgdMechanism):
        """A step with a non-finite per-example gradient is lost (the parameters become non-finite)."""

        def optimizer(self, model, loss_fn=None, *, seed=None, comm=None):
            opt = super().optimizer(model, loss_fn, seed=seed, comm=comm)
            opt._nonfinite_policy = types.MethodType(voiding_policy, opt)
            return opt

    return {"no_step_budget": FreshBudgetSrpp, "no_batch_caps": UncappedSrpp, "nonfinite_voids_step": StepVoidingSrpp}


def mutate(mechanism, kind: str, factor: float | None):
    """``noise_scaled`` — σ × ``factor`` in the calibration the optimizer reads (what the paper's 1/η
    noise-unit slip does to a parameter-units run with step size η = ``factor``). Runtime holes:
    ``no_step_budget`` — every optimizer from the mechanism gets a fresh budget; ``no_batch_caps`` —
    ``step()`` accepts a batch with repeated records; ``nonfinite_voids_step`` — a step with a
    non-finite per-example gradient is dropped."""
    from dpspec.audit.mutations import as_class, factor_of

    if kind == "noise_scaled":
        cal = mechanism.calibration
        return dataclasses.replace(
            mechanism, calibration=dataclasses.replace(cal, sigma2=cal.sigma2 * factor_of(kind, factor) ** 2)
        )
    if kind in ("no_step_budget", "no_batch_caps", "nonfinite_voids_step"):
        return as_class(_mutant_classes()[kind], mechanism)
    return None


# --- the runtime audits of the same entry (dpspec.audit.runtime: budget, caps, non-finite values) ---


# --- SRPP-SGD ----------------------------------------------------------------------------------------


class _SrppRuntime(RuntimeAudit, SrppSgdAudit):
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
            "last": oriented(lambda x: np.nan_to_num(x[:, -1], nan=0.0), x0, x1),
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
        T, k_req = budget_steps(ctx, int(ctx.mechanism.plan.steps), factor=100.0)
        super().__init__(with_options(ctx, steps=T))
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
        return {"last": oriented(lambda x: x[:, 0], x0, x1)}


def srpp_targets(ctx: AuditContext) -> list:
    return runtime_targets(ctx, (SrppNonFiniteAudit, SrppCapAudit, SrppBudgetAudit))


# --- relational DP-SGD ---------------------------------------------------------------------------------
