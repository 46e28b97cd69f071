"""End-to-end Gaussian SWM: scenario → sensitivities → calibrated σ² → release (ZV25 §4.3).

:func:`calibrate` decides the reading and the estimator from the scenario and refuses unsound
configurations with :class:`~dpspec.accounting.swm.SoundnessError`:

* all worlds exact (empirical / deterministic / exhaustive) → plug-in W∞, which *is* Δ^u;
* a sampled world → the DKW estimator with the query's declared support (DPS401 if the plug-in is
  requested, DPS402 without support); the per-band failure is ρ = γ_est / (#sampled (θ, s) × m);
* ``profile.reading == "monte_carlo"`` → Thms 4.7/4.8 with Δ0 = the support's diameter (or, for
  exact worlds without declared support, a data-derived bound ≥ every projected W∞); γ/2 goes to
  the directions and γ/2 to the estimation layer, as in the theorems (DPS403 if γ is missing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpspec.accounting.swm import PAPER, Assumption, SoundnessError, SWMCalibration, calibrate_swm

from .profiles import SliceProfile
from .sensitivity import check_pairs, sliced_sensitivity_report
from .worlds import World, all_distinct_pairs

if TYPE_CHECKING:
    from .queries import Query

__all__ = ["Scenario", "collect_outputs", "calibrate", "release", "SWMMechanism", "data_delta0"]


@dataclass
class Scenario:
    """(𝒮, 𝒬̂, Θ̂): worlds, and pairs (default: all ordered distinct pairs of the worlds' secrets)."""

    worlds: Sequence[World]
    pairs: Sequence[tuple] | str = "all_distinct"
    name: str = "scenario"

    def __post_init__(self):
        self.worlds = list(self.worlds)
        if not self.worlds:
            raise ValueError("a scenario needs at least one world")
        names = [w.name for w in self.worlds]
        if len(set(names)) != len(names):
            raise ValueError(f"world names must be distinct, got {names}")

    @property
    def secrets(self) -> tuple:
        out: dict = {}
        for w in self.worlds:
            for s in w.secrets:
                out[s] = None
        return tuple(out)

    def resolved_pairs(self) -> list[tuple]:
        if isinstance(self.pairs, str):
            if self.pairs != "all_distinct":
                raise ValueError(f"pairs must be a list of (s_i, s_j) or 'all_distinct', got {self.pairs!r}")
            return all_distinct_pairs(self.secrets)
        return check_pairs(self.pairs, self.secrets)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "worlds": [w.describe() for w in self.worlds],
            "pairs": [[str(a), str(b)] for a, b in self.resolved_pairs()],
        }


def collect_outputs(scenario: Scenario, query, *, n_samples: int | None = None, seed=None):
    """{(world, secret): outputs} for every secret with positive prior mass in the world, and the
    set of worlds whose outputs are i.i.d. draws (not exact)."""
    rng = np.random.default_rng(seed)
    samples, sampled_worlds = {}, []
    for w in scenario.worlds:
        prior = w.prior()
        for s in w.secrets:
            if prior.get(s, 0.0) <= 0.0:
                continue  # Pufferfish only protects pairs with positive prior mass (Def 2.1)
            out = np.asarray(w.query_outputs(query, s, n=n_samples, rng=rng), dtype=float)
            if out.ndim != 2 or out.shape[1] != query.dim:
                raise ValueError(
                    f"world {w.name!r}, secret {s!r}: query outputs have shape {out.shape}, expected (k, {query.dim})"
                )
            if not np.all(np.isfinite(out)):
                raise ValueError(f"world {w.name!r}, secret {s!r}: non-finite query outputs")
            samples[(w.name, s)] = out
        if not w.exact:
            sampled_worlds.append(w.name)
    return samples, sampled_worlds


def data_delta0(samples: dict) -> float:
    """A bound Δ0 ≥ W∞ between any two conditional laws of the same world, valid when the samples
    are the exact laws: the diameter of the union of the world's supports, bounded by
    min(‖max − min‖₂ over coordinates, 2·max‖z − centroid‖₂) [D]."""
    worlds: dict = {}
    for (w, _), z in samples.items():
        worlds.setdefault(w, []).append(z)
    best = 0.0
    for zs in worlds.values():
        Z = np.vstack(zs)
        box = float(np.linalg.norm(Z.max(axis=0) - Z.min(axis=0)))
        c = Z.mean(axis=0)
        rad = 2.0 * float(np.max(np.linalg.norm(Z - c, axis=1)))
        best = max(best, min(box, rad))
    return best


def calibrate(
    scenario: Scenario,
    query,
    profile: SliceProfile,
    *,
    alpha: float,
    epsilon: float,
    flavour: str = "ave",
    estimator: str = "auto",
    gamma: float | None = None,
    aggregation: str = "per_direction",
    n_samples: int | None = None,
    seed=None,
    chunk_size: int | None = None,
    memory_limit: int = 256 * 2**20,
    progress: Callable[[int, int], None] | None = None,
    return_report: bool = False,
    aggregate_scale: float | None = None,
):
    """Calibrate the Gaussian SWM for ``query`` under ``scenario`` and slice ``profile``.

    Returns an :class:`~dpspec.accounting.swm.SWMCalibration` (and the
    :class:`SensitivityReport` if ``return_report``). ``aggregation="per_instance"`` takes the
    maximum over (θ, pair) outside the slice aggregate (digest §4.1 [D]; never looser).

    ``aggregate_scale = c``: the release is the aggregate f(X) = c Σ_j g(x_j) of a dataset of independent
    records (``query.per_record`` is g), and every Δ^u (and Δ0) is the per-record one times c (Lemma A
    of :mod:`dpspec.pufferfish.aggregate`: the projection ⟨·, u⟩ is linear, so the coupling argument
    holds slice by slice), rounded up by one ulp.
    """
    if profile.d != query.dim:
        raise ValueError(f"profile directions have d = {profile.d} but the query has dimension {query.dim}")
    if estimator not in ("auto", "plugin", "dkw"):
        raise ValueError(f"estimator must be 'auto', 'plugin' or 'dkw', got {estimator!r}")
    pairs = scenario.resolved_pairs()
    samples, sampled = collect_outputs(scenario, query, n_samples=n_samples, seed=seed)
    support = query.support
    mc = profile.reading == "monte_carlo"
    assumptions: list[Assumption] = []

    if sampled and estimator == "plugin":
        raise SoundnessError(
            f"world(s) {sampled} are sampled, and the plug-in W∞ of a sample can under-estimate Δ^u",
            rule="DPS401",
            hint="use estimator='dkw' with declared support bounds and gamma, or an exhaustive world",
        )
    use_dkw = estimator == "dkw" or (estimator == "auto" and bool(sampled))
    if use_dkw and support is None:
        raise SoundnessError(
            "the DKW estimator needs declared support bounds of the query output",
            rule="DPS402",
            hint="give the query bounds (Mean/Rate/… clip to them) or a CallableQuery support",
        )
    if (use_dkw or mc) and gamma is None:
        raise SoundnessError(
            "a PAC reading (sampled worlds or Monte-Carlo directions) needs gamma",
            rule="DPS403",
            hint="set gamma, e.g. 0.05",
        )
    if gamma is not None and not (0.0 < float(gamma) < 1.0):
        raise ValueError(f"gamma must lie in (0, 1), got {gamma!r}")
    if support is not None:
        for key, z in samples.items():
            if not support.contains(z):
                raise SoundnessError(
                    f"query outputs of {key!r} fall outside the declared support",
                    rule="DPS404",
                    hint="clip the query to its declared bounds",
                )

    gamma_est = 0.0
    rho = None
    dkw_cells = None
    if use_dkw:
        assert gamma is not None  # refused above without it (DPS403)
        gamma_est = float(gamma) / 2.0 if mc else float(gamma)
        dkw_cells = [k for k in samples if k[0] in sampled] if sampled else list(samples)
        rho = gamma_est / (len(dkw_cells) * profile.m)
    report = sliced_sensitivity_report(
        samples,
        pairs,
        profile.directions,
        estimator="dkw" if use_dkw else "plugin",
        support=support,
        rho=rho,
        dkw_cells=dkw_cells if use_dkw else None,
        chunk_size=chunk_size,
        memory_limit=memory_limit,
        progress=progress,
    )
    deltas, inst = report.deltas, report.instance_deltas
    c = 1.0 if aggregate_scale is None else float(aggregate_scale)
    if not (0.0 < c <= 1.0):
        raise ValueError(f"aggregate_scale must lie in (0, 1], got {aggregate_scale!r}")
    if aggregate_scale is not None:
        deltas = np.nextafter(deltas * c, np.inf)
        inst = np.nextafter(inst * c, np.inf)

    monte_carlo = None
    notes: list[str] = []
    if mc:
        if support is not None and (sampled or support.diameter() <= data_delta0(samples)):
            delta0 = support.diameter()
            src = "diameter of the declared output support"
        elif not sampled:
            delta0 = data_delta0(samples)
            src = "diameter bound of the (exact) empirical supports"
        else:  # pragma: no cover - excluded above (sampled ⇒ DKW ⇒ support)
            raise SoundnessError("Monte-Carlo reading needs Δ0", rule="DPS403")
        if aggregate_scale is not None:
            delta0 = float(np.nextafter(delta0 * c, np.inf))
            src += f", times the aggregate's factor {c:.6g}"
        if float(np.max(deltas)) > delta0 * (1 + 1e-9) + 1e-12:
            if not use_dkw:
                raise SoundnessError(f"an exact Δ^u = {np.max(deltas):.6g} exceeds Δ0 = {delta0:.6g}", rule="DPS404")
        # Δ^u ≤ Δ0 for every u, so min(Δ̂, Δ0) is still an upper estimate.
        deltas, inst = np.minimum(deltas, delta0), np.minimum(inst, delta0)
        assert gamma is not None  # refused above without it (DPS403)
        monte_carlo = (float(gamma), float(delta0))
        notes.append(f"Δ0 = {delta0:.6g} ({src})")

    if use_dkw:
        assumptions.append(
            Assumption(
                f"Sampled worlds {sampled or 'all'}: rows are i.i.d. draws from P_θ^{{f,s}}; outputs "
                "lie in the declared "
                f"support; DKW bands of failure ρ = {rho:.3g} each, union over (θ, s, u_ℓ) (total {gamma_est:g})",
                f"{PAPER}, §4.3.2 (DKW estimator, made sound with support bounds: digest §4.1 ⚠)",
            )
        )
    else:
        assumptions.append(
            Assumption(
                "Each world's conditional law P_θ^{f,s} is exactly the uniform distribution of the listed outputs "
                "(empirical world θ_D, a point mass, or an exhaustive enumeration), so the plug-in W∞ is Δ^u",
                f"{PAPER}, Lemma P.1; App. W.1",
            )
        )
    if aggregate_scale is not None:
        assumptions.append(
            Assumption(
                f"Aggregate release f(X) = c·Σ_j g(x_j) with c = {c:.6g}: under every prior the "
                "records are independent "
                "(a product prior) and the secret is a function of the protected record, so each Δ^u "
                "of the aggregate is "
                "at most c times the per-record Δ^u (a shared draw of the other records couples the two laws)",
                "dpspec, Lemma A (dpspec/pufferfish/aggregate.py; Kifer & Machanavajjhala 2014, §7 product priors)",
            )
        )
    for w in scenario.worlds:
        assumptions.append(
            Assumption(
                f"World {w.name!r}: {w.describe()['type']} with prior "
                f"{ {str(k): round(v, 6) for k, v in w.prior().items()} }",
                f"{PAPER}, §2 (scenario (𝒮, 𝒬, Θ))",
            )
        )

    calib = calibrate_swm(
        deltas,
        profile.weights,
        alpha,
        epsilon,
        flavour,
        monte_carlo=monte_carlo,
        instance_deltas=inst,
        instances=report.instances,
        aggregation=aggregation,
        profile=profile.describe(),
        estimation_failure=gamma_est,
        assumptions=assumptions,
        estimator={
            "name": report.estimator,
            "sample_sizes": report.sample_sizes,
            "dkw": report.dkw,
            "query": query.describe(),
            "scenario": scenario.describe(),
        },
        notes=notes,
    )
    return (calib, report) if return_report else calib


def release(value, calibration: SWMCalibration, rng=None) -> np.ndarray:
    """Y = f(x) + 𝒩(0, σ² I_d) with the calibrated σ² (ZV25 §4.3.1). ``rng``: a numpy Generator or
    seed (default: fresh OS entropy)."""
    v = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(v)):
        raise ValueError("the value to release must be finite")
    d = calibration.profile.get("d") if calibration.profile else None
    if d is not None and v.shape[-1] != d:
        raise ValueError(f"value has dimension {v.shape[-1]}, the calibration is for d = {d}")
    rng = np.random.default_rng(rng)
    return v + math.sqrt(calibration.sigma2) * rng.standard_normal(v.shape)


@dataclass
class SWMMechanism:
    """A runnable Gaussian SWM: ``mech.release(dataset)`` = query(dataset) + 𝒩(0, σ² I)."""

    query: Query
    calibration: SWMCalibration

    def release(self, dataset, rng=None) -> np.ndarray:
        return release(self.query(dataset), self.calibration, rng)

    def release_records(self, records, rng=None) -> np.ndarray:
        """Per-record release (empirical-world reading): each record's query vector plus fresh noise."""
        return release(self.query.per_record(records), self.calibration, rng)
