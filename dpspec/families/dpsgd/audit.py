"""DP-SGD's auditor (``mechanism dpsgd``; ``Family.auditor``, read from this folder).

The privacy audit is the gradient canary of :mod:`.canary`; the runtime audits of the same certificate
entry (the public normaliser, non-finite gradients, the step budget and the per-batch cap) are below,
built on the shared machinery of :mod:`dpspec.audit.runtime`, and those of ``dpspec.torch.make_private``
are in :mod:`.wrapper_audit`. ``MUTATION_FACTORS`` and ``mutate`` build the mutants of the power check
(:mod:`dpspec.audit.mutations`).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from dpspec.audit.base import AuditContext, register_auditor
from dpspec.audit.runtime import RuntimeAudit, budget_steps, runtime_targets, skip, with_options

from .canary import DpSgdAudit, _block_model, _linear_loss
from .wrapper_audit import wrapper_mutants, wrapper_targets

__all__ = ["DpSgdAudit", "MUTATION_FACTORS", "mutate"]


# --- the runtime audits (dpspec.audit.runtime) ----------------------------------------------------------


class DpSgdNormaliserAudit(RuntimeAudit, DpSgdAudit):
    check = "normaliser"
    default_trials = 300
    max_trials = 300

    def __init__(self, ctx: AuditContext):
        super().__init__(with_options(ctx, steps=1))
        if self.sampling == "without_replacement":
            raise skip(
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


class DpSgdNonFiniteAudit(RuntimeAudit, DpSgdAudit):
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


class DpSgdBudgetAudit(RuntimeAudit, DpSgdAudit):
    check = "step budget"

    def __init__(self, ctx: AuditContext):
        T, k_req = budget_steps(ctx, int(ctx.record.mechanism.parameters["steps"]))
        super().__init__(with_options(ctx, steps=T))  # the claim: the certificate's ε for all T steps
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


class DpSgdCapAudit(RuntimeAudit, DpSgdAudit):
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
    return runtime_targets(
        ctx, (DpSgdNormaliserAudit, DpSgdNonFiniteAudit, DpSgdBudgetAudit, DpSgdCapAudit)
    ) + wrapper_targets(ctx)  # the same certificate entry through dpspec.torch.make_private


@register_auditor("dpsgd")
def _factory(ctx: AuditContext):
    return [DpSgdAudit(ctx), *dpsgd_targets(ctx)]


# --- mutants for the power check (dpspec.audit.mutations) ----------------------------------------

MUTATION_FACTORS = {
    "noise_scaled": 0.25,
    "no_clipping": 1.0,
    "rate_misreported": 10.0,
    "normaliser_from_data": 1.0,
    "nonfinite_voids_step": 1.0,
    "no_step_budget": 25.0,
    "no_batch_caps": 1.0,
    "ledger_rewind": 1.0,
    "unnoised_param_group": 1.0,
}
MUTANT_CLASSES = ("UnclippedDpSgd",)


@functools.cache
def _mutant_classes():
    import dataclasses

    from dpspec.families.dpsgd.runtime import DpSgd
    from dpspec.mechanisms.per_example import ClippedSum

    @dataclasses.dataclass(frozen=True)
    class UnclippedDpSgd(DpSgd):
        """DP-SGD with the per-example clip skipped (the noise is still calibrated to σ·C)."""

        def _clipped_sum(self, model, loss_fn, xb, yb):
            import torch

            from dpspec.mechanisms.per_example import per_example_grads, trainable_parameters

            params = trainable_parameters(model)
            if len(xb):
                g = per_example_grads(model, loss_fn, xb, yb)
                summed = {k: v.sum(dim=0) for k, v in g.items()}
            else:
                summed = {k: torch.zeros_like(v) for k, v in params.items()}
            return ClippedSum(summed, int(len(xb)), 0, [], None, None, "unclipped", 0.0)

    @dataclasses.dataclass(frozen=True)
    class DataNormalisedDpSgd(DpSgd):
        """The noisy sum divided by q·len(data) (len(data) for full batch): the normaliser leak."""

        def _normaliser(self, n):
            if n is None:
                return self.normalizer
            return float(n) if self.sampling == "full_batch" else self.sample_rate * float(n)

    @dataclasses.dataclass(frozen=True)
    class StepVoidingDpSgd(DpSgd):
        """One non-finite per-example gradient makes the step's gradient non-finite (the step is lost)."""

        def _nonfinite_policy(self, cs):
            import torch

            if cs.nonfinite:
                return {k: torch.full_like(v, float("nan")) for k, v in cs.sums.items()}
            return cs.sums

    @dataclasses.dataclass(frozen=True)
    class UncappedDpSgd(DpSgd):
        """Any batch is accepted (repeated examples, any size)."""

        def _check_batch(self, idx, rows, n, comm=None):
            if idx is None and self._guard._issued:
                self._guard._issued.popleft()

    return {
        "no_clipping": UnclippedDpSgd,
        "normaliser_from_data": DataNormalisedDpSgd,
        "nonfinite_voids_step": StepVoidingDpSgd,
        "no_batch_caps": UncappedDpSgd,
    }


def __getattr__(name: str):
    if name == "UnclippedDpSgd":
        return _mutant_classes()["no_clipping"]
    raise AttributeError(name)


def mutate(mechanism, kind: str, factor: float | None):
    """``noise_scaled`` — noise multiplier × ``factor``; ``no_clipping`` — per-example gradients summed
    unclipped (the clip is skipped, the noise is still σ·C); ``rate_misreported`` — the loader samples
    at ``factor`` × the accounted rate (Poisson; capped at 1) or batches of ``factor`` × B (without
    replacement), as with a sampler that silently changes the sample rate (Opacus #813). The runtime's
    earlier holes, re-introduced: ``normaliser_from_data`` — the noisy sum divided by q·len(data) (or
    len(data)) instead of the certificate's constant; ``nonfinite_voids_step`` — one non-finite
    per-example gradient makes the whole step non-finite (the trainer then dropped it, freezing the
    model exactly when that example is sampled); ``no_step_budget`` — the object runs ``factor`` × the
    certified steps; ``no_batch_caps`` — a batch is accepted with repeated examples. The wrapper's
    (:mod:`.wrapper_audit`): ``ledger_rewind`` — a loaded checkpoint sets the ledger's count (the run is
    rewound); ``unnoised_param_group`` — make_private steps a parameter it does not noise."""
    import dataclasses

    from dpspec.audit.mutations import as_class, factor_of

    if kind == "noise_scaled":
        return dataclasses.replace(mechanism, noise_multiplier=mechanism.noise_multiplier * factor_of(kind, factor))
    if kind == "normaliser_from_data" and mechanism.sampling == "without_replacement":
        raise ValueError("fixed-size batches: the normaliser is B, not a size read from the data")
    if kind in ("no_clipping", "normaliser_from_data", "nonfinite_voids_step", "no_batch_caps"):
        return as_class(_mutant_classes()[kind], mechanism)
    if kind == "no_step_budget":
        return dataclasses.replace(mechanism, steps=int(math.ceil(mechanism.steps * factor_of(kind, factor))))
    if kind in ("ledger_rewind", "unnoised_param_group"):
        return as_class(wrapper_mutants()[kind], mechanism)
    if kind == "rate_misreported":
        k = factor_of(kind, factor)
        if mechanism.sampling == "poisson" and mechanism.sample_rate < 1.0:
            return dataclasses.replace(mechanism, sample_rate=min(1.0, mechanism.sample_rate * k))
        if mechanism.sampling == "without_replacement" and mechanism.batch_size < mechanism.dataset_size:
            n = mechanism.dataset_size
            return dataclasses.replace(mechanism, batch_size=float(min(n, math.ceil(mechanism.batch_size * k))))
        raise ValueError("the trainer already uses every record at every step: no sampling rate to misreport")
    return None
