"""Deliberately broken mechanisms for the power check: an audit that cannot fail is not an audit.

Each mutant is a runtime object that differs from the compiled one by a bug of a kind seen in
practice, while the certificate keeps the original numbers:

* ``gaussian``: ``noise_scaled`` — σ multiplied by ``factor`` (< 1).
* ``dpsgd``: ``noise_scaled`` — noise multiplier × ``factor``; ``no_clipping`` — per-example
  gradients summed unclipped (the clip is skipped, the noise is still σ·C); ``rate_misreported`` —
  the loader samples at ``factor`` × the accounted rate (Poisson; capped at 1) or batches of
  ``factor`` × B (without replacement), as with a sampler that silently changes the sample rate
  (Opacus #813). The runtime's earlier holes, re-introduced: ``normaliser_from_data`` — the noisy sum
  divided by q·len(data) (or len(data)) instead of the certificate's constant; ``nonfinite_voids_step``
  — one non-finite per-example gradient makes the whole step non-finite (the trainer then dropped it,
  freezing the model exactly when that example is sampled); ``no_step_budget`` — the object runs
  ``factor`` × the certified steps; ``no_batch_caps`` — a batch is accepted with repeated examples.
* ``swm``: ``delta_underestimated`` — σ² calibrated from the per-slice Δ × ``factor`` (< 1), the
  effect of an estimator that under-reports the sliced Wasserstein sensitivity.
* ``gcon``: ``noise_scaled`` — the runtime configuration calibrated for ε / ``factor`` (less
  objective and output noise than certified).
* ``relational_dpsgd``: ``noise_scaled`` — σ × ``factor``; ``no_clipping`` — per-tuple gradients
  summed unclipped (the noise is still σ·C). The unsound FREQ-CLIP claim (Prop 4.1) is refused by the
  compiler (DPS601) and its counterexample is tested against the sensitivity functions directly.
  Runtime holes: ``no_step_budget`` — every trainer gets a fresh budget (``train(50)`` on a 10-step
  certificate ran); ``no_batch_caps`` — a user batch with a node in more than K positive tuples is
  accepted; ``nonfinite_poisons_step`` — a non-finite per-tuple gradient enters the sum.
* ``srpp_sgd``: ``noise_scaled`` — σ × ``factor`` in the calibration the optimizer reads (what the
  paper's 1/η noise-unit slip does to a parameter-units run with step size η = ``factor``). Runtime
  holes: ``no_step_budget`` — every optimizer from the mechanism gets a fresh budget; ``no_batch_caps``
  — ``step()`` accepts a batch with repeated records; ``nonfinite_voids_step`` — a step with a
  non-finite per-example gradient is dropped.

``mutants(compiled, name)`` returns {label: mechanism} with the default factors below, strong enough
to be detectable by the default audit sizes; ``mutate(mechanism, kind, factor)`` builds one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

__all__ = ["mutate", "mutants", "DEFAULT_FACTORS", "RUNTIME_KINDS", "UnclippedDpSgd"]

#: the privacy mutants (what the privacy audits must catch) and the runtime mutants (the runtime's own
#: earlier holes, caught by the audits of :mod:`dpspec.audit.runtime`)
RUNTIME_KINDS = ("normaliser_from_data", "nonfinite_voids_step", "nonfinite_poisons_step", "no_step_budget",
                 "no_batch_caps")
DEFAULT_FACTORS: dict[str, dict[str, float]] = {
    "gaussian": {"noise_scaled": 0.25},
    "dpsgd": {"noise_scaled": 0.25, "no_clipping": 1.0, "rate_misreported": 10.0, "normaliser_from_data": 1.0,
              "nonfinite_voids_step": 1.0, "no_step_budget": 25.0, "no_batch_caps": 1.0},
    "swm": {"delta_underestimated": 0.2},
    "gcon": {"noise_scaled": 1e-3},
    "srpp_sgd": {"noise_scaled": 0.25, "no_step_budget": 1.0, "no_batch_caps": 1.0, "nonfinite_voids_step": 1.0},
    "relational_dpsgd": {"noise_scaled": 0.25, "no_clipping": 1.0, "no_step_budget": 1.0, "no_batch_caps": 1.0,
                         "nonfinite_poisons_step": 1.0},
}


def _as(cls, mechanism):
    """``mechanism``'s certified numbers in an object of (sub)class ``cls`` (a fresh run)."""
    return cls(**{fld.name: getattr(mechanism, fld.name) for fld in dataclasses.fields(mechanism) if fld.init})


@functools.lru_cache(maxsize=None)
def _dpsgd_classes():
    from dpspec.mechanisms.dpsgd import DpSgd
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

    return {"no_clipping": UnclippedDpSgd, "normaliser_from_data": DataNormalisedDpSgd,
            "nonfinite_voids_step": StepVoidingDpSgd, "no_batch_caps": UncappedDpSgd}


@functools.lru_cache(maxsize=None)
def _srpp_classes():
    import types

    from dpspec.mechanisms.srpp_sgd import SrppSgdMechanism

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


@functools.lru_cache(maxsize=None)
def _relational_classes():
    import types

    from dpspec.mechanisms.relational import RelationalMechanism

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

    return {"no_step_budget": FreshBudgetRelational, "no_batch_caps": UncappedRelational,
            "nonfinite_poisons_step": PoisonedRelational}


def __getattr__(name: str):
    if name == "UnclippedDpSgd":
        return _dpsgd_classes()["no_clipping"]
    raise AttributeError(name)


def _swm_scaled(mech, factor: float):
    from dpspec.accounting.swm import swm_sigma2
    from dpspec.mechanisms.swm import SwmRelease
    from dpspec.pufferfish import SWMMechanism

    cal = mech.mechanism.calibration
    mc = cal.monte_carlo
    s2 = swm_sigma2(cal.calibration_deltas * factor, cal.weights, cal.alpha, cal.epsilon, cal.flavour,
                    monte_carlo=None if mc is None else (mc[0], mc[1] * factor))
    bad = dataclasses.replace(cal, sigma2=s2)
    return SwmRelease(mech.columns, SWMMechanism(mech.mechanism.query, bad), name=mech.name)


def mutate(mechanism: Any, kind: str, factor: float | None = None) -> Any:
    """A broken copy of ``mechanism`` (see the module docstring for the kinds)."""
    from dpspec.mechanisms.dpsgd import DpSgd
    from dpspec.mechanisms.gaussian import GaussianRelease
    from dpspec.mechanisms.gcon import GconMechanism
    from dpspec.mechanisms.swm import SwmRelease

    def f(mech_kind: str) -> float:
        return float(DEFAULT_FACTORS[mech_kind][kind] if factor is None else factor)

    if isinstance(mechanism, GaussianRelease) and kind == "noise_scaled":
        return dataclasses.replace(mechanism, sigma=mechanism.sigma * f("gaussian"))
    if isinstance(mechanism, DpSgd):
        if kind == "noise_scaled":
            return dataclasses.replace(mechanism, noise_multiplier=mechanism.noise_multiplier * f("dpsgd"))
        if kind == "normaliser_from_data" and mechanism.sampling == "without_replacement":
            raise ValueError("fixed-size batches: the normaliser is B, not a size read from the data")
        if kind in ("no_clipping", "normaliser_from_data", "nonfinite_voids_step", "no_batch_caps"):
            return _as(_dpsgd_classes()[kind], mechanism)
        if kind == "no_step_budget":
            return dataclasses.replace(mechanism, steps=int(math.ceil(mechanism.steps * f("dpsgd"))))
        if kind == "rate_misreported":
            k = f("dpsgd")
            if mechanism.sampling == "poisson" and mechanism.sample_rate < 1.0:
                return dataclasses.replace(mechanism, sample_rate=min(1.0, mechanism.sample_rate * k))
            if mechanism.sampling == "without_replacement" and mechanism.batch_size < mechanism.dataset_size:
                n = mechanism.dataset_size
                return dataclasses.replace(mechanism, batch_size=float(min(n, math.ceil(mechanism.batch_size * k))))
            raise ValueError("the trainer already uses every record at every step: no sampling rate to misreport")
    from dpspec.mechanisms.relational import RelationalMechanism
    from dpspec.mechanisms.srpp_sgd import SrppSgdMechanism

    if isinstance(mechanism, RelationalMechanism):
        if kind == "noise_scaled":
            return dataclasses.replace(mechanism, sigma=mechanism.sigma * f("relational_dpsgd"))
        if kind == "no_clipping":  # every tuple keeps its full gradient (thresholds of +inf)
            return dataclasses.replace(mechanism, clipping="none")
        if kind in ("no_step_budget", "no_batch_caps", "nonfinite_poisons_step"):
            return _as(_relational_classes()[kind], mechanism)

    if isinstance(mechanism, SrppSgdMechanism):
        if kind == "noise_scaled":
            cal = mechanism.calibration
            return dataclasses.replace(mechanism, calibration=dataclasses.replace(
                cal, sigma2=cal.sigma2 * f("srpp_sgd") ** 2))
        if kind in ("no_step_budget", "no_batch_caps", "nonfinite_voids_step"):
            return _as(_srpp_classes()[kind], mechanism)
    if isinstance(mechanism, SwmRelease) and kind == "delta_underestimated":
        return _swm_scaled(mechanism, f("swm"))
    if isinstance(mechanism, GconMechanism) and kind == "noise_scaled":
        k = f("gcon")
        base = mechanism

        @dataclasses.dataclass(frozen=True)
        class _LessNoise(GconMechanism):
            def config(self):
                return dataclasses.replace(base.config(), epsilon=base.epsilon / k)

        return _as(_LessNoise, mechanism)
    raise ValueError(f"no mutation {kind!r} for {type(mechanism).__name__}")


def mutants(compiled, name: str, factors: dict[str, float] | None = None) -> dict[str, Any]:
    """{kind: mutated mechanism} for target ``name`` of a compiled spec (kinds that apply only)."""
    mech = compiled.targets[name].mechanism
    rec = next(r for r in compiled.certificate.results if r.name == name)
    kinds = dict(DEFAULT_FACTORS.get(rec.mechanism.name, {}))
    kinds.update(factors or {})
    out = {}
    for kind, fac in kinds.items():
        try:
            out[kind] = mutate(mech, kind, fac)
        except ValueError:
            continue
    return out
