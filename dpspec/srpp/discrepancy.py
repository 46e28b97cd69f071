"""Discrepancy models: how many secret-affected records a minibatch can contain (ZV25 §5.2, App. D).

A model answers two questions for a :class:`~dpspec.srpp.sampling.Sampling` scheme, both in terms
of the *normalised* discrepancy κ_t = K_t / B̄_t (K_t of eq. 14 divided by the batch normaliser):

* :meth:`~DiscrepancyModel.huc_kappa` — a cap κ with κ_t ≤ κ almost surely (eq. 15 / eq. 29),
  or with probability ≥ 1 − δ_t for tail caps (eq. 31); the HUC is then h = (2 L C κ)² (Prop 5.1).
* :meth:`~DiscrepancyModel.sa_kappa2` — a bound κ̄² ≥ ess sup_{(X,X′)} E_R[κ_t²] (eq. 17 / eq. 30);
  the sa-HUC is h^sa = (2 L C)² κ̄² (Prop 5.2).

Models
------
* :class:`LocalizedInfluence` — the secret changes at most D_max records (App. D.4, eq. 42).
* :class:`FixedPairWorlds` — two fixed datasets differing in exactly Δ records, e.g. the CIFAR
  label-flip worlds (App. W.3): the localized model with D_max = Δ and deterministic worlds.
* :class:`IIDRecords` — i.i.d. records, per-record conditionals at total variation τ, record-wise
  maximal coupling (App. D.3, eqs. 36–41).
* :class:`MonteCarloDiscrepancy` — a simulator (Algorithms 3/4) with the finite-sample bounds of
  Lemma D.1 / Cor D.1 (sa caps, Hoeffding) and Lemma D.2 / Cor D.2 (HUC tail caps, DKW).

Sound refinements [D]
---------------------
* Uniform WOR, WR and Poisson sampling are exchangeable, so E_R[K² | X, X′] depends only on the
  number d of differing records, and it is increasing in d (factorial moments B d/N +
  B(B−1) d(d−1)/(N(N−1)) for WOR, B d/N + B(B−1)(d/N)² for WR, dq + d(d−1)q² for Poisson). With
  d ≤ D_max the ess sup of eq. (30) is the moment at d = D_max — a valid sa cap much smaller than
  eq. (42)'s min(B², D_max²), with no sup/E ordering issue (digest §13.6).
* i.i.d. records: under WOR and WR the mismatches in a batch are exactly Bin(B, τ) when averaged
  over the coupling, so the exact binomial quantile is a valid tail cap (≤ eq. 41). The paper's
  sa cap G(B, τ) of eq. (40) averages over the coupling draw, whereas eq. (30) needs an ess sup over
  (X, X′) (which is B² here); ``sa_reading="high_probability"`` (default) bounds the world's total
  mismatch count S_N by its binomial (1 − δ_w)-quantile s (a once-per-run failure δ_w, reported
  as in eq. 34) and uses the localized moment at d = s; ``"coupling_average"`` reproduces eq. (40)
  with a DPS507 warning.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from dpspec.accounting.huc import (
    PAPER,
    Assumption,
    SrppSoundnessError,
    binomial_k2,
    hypergeometric_k2,
    poisson_realized_kappa2,
)

from .sampling import Sampling

__all__ = [
    "Cap",
    "DiscrepancyModel",
    "LocalizedInfluence",
    "FixedPairWorlds",
    "IIDRecords",
    "MonteCarloDiscrepancy",
    "MonteCarloEstimate",
    "mc_sa_cap",
    "mc_tail_cap",
    "mc_radius",
]


@dataclass(frozen=True)
class Cap:
    """A discrepancy cap on κ (kind "huc") or on E[κ²] (kind "sa"), with its provenance."""

    value: float
    kind: str
    source: str
    per_step_failure: float = 0.0  # δ_t of a tail cap (summed over steps, eq. 34)
    once_failure: float = 0.0  # a single failure event for the whole run (MC γ, world bound δ_w)
    warnings: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    details: dict = field(default_factory=dict)


def _wr_huc_error():
    return SrppSoundnessError(
        "HUC with sampling with replacement: every draw can hit the same differing record, so the worst-case "
        "discrepancy cap equals the batch size B (App. I, Prop I.1)",
        rule="DPS501",
        hint="sample without replacement (scheme='wor') or use the sa-HUC accountant",
    )


class DiscrepancyModel(ABC):
    """Bounds on the (normalised) number of secret-affected records in a minibatch."""

    name: str = "discrepancy"

    @abstractmethod
    def huc_kappa(self, sampling: Sampling) -> Cap: ...

    @abstractmethod
    def sa_kappa2(self, sampling: Sampling) -> Cap: ...

    def kappa_law(self, sampling: Sampling) -> tuple[np.ndarray, np.ndarray, Cap]:
        """(κ values, log pmf, provenance): the law over subsampling of the normalised discrepancy of
        the worst coupled pair — input of the App. J mixture ("amplified") accountant."""
        raise ValueError(
            f"the {self.name} model does not provide the law of the discrepancy; "
            "use an analytic model (localized / fixed pair / i.i.d. records)"
        )

    def group_size(self) -> int | None:
        """Records a secret can touch (the group of the group-DP baseline), if bounded."""
        return None

    @abstractmethod
    def describe(self) -> dict: ...


def _law(s: Sampling, d: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Law of κ for d differing records under an exchangeable scheme (stochastically increasing in d)."""
    from scipy.stats import binom, hypergeom

    N = s.dataset_size
    if s.scheme == "wor":
        B = s.batch
        k = np.arange(0, min(B, d) + 1)
        lp = hypergeom.logpmf(k, N, d, B)
        return k / B, lp, "K ~ Hypergeometric(N, d, B) (WOR)"
    if s.scheme == "wr":
        B = s.batch
        k = np.arange(0, B + 1)
        lp = binom.logpmf(k, B, d / N)
        return k / B, lp, "K ~ Bin(B, d/N) (WR, Prop I.1)"
    if s.normalization == "expected":
        k = np.arange(0, d + 1)
        lp = binom.logpmf(k, d, s.rate)
        return k / s.normalizer, lp, "K ~ Bin(d, q), κ = K/(qN) (Poisson, App. E)"
    raise ValueError(
        "the amplified accountant does not support Poisson sampling normalised by the realised "
        "batch size; use normalization='expected'"
    )


def _clean_law(k, lp):
    """Drop impossible values only (log p = −∞). Tail values with tiny probability are kept: at large
    α their e^{c k²} can dominate the log-moment of the App. J envelope."""
    keep = np.isfinite(lp)
    k, lp = k[keep], lp[keep]
    from scipy.special import logsumexp

    tot = float(logsumexp(lp))
    return k, (lp - tot) if abs(tot) < 1e-9 else lp - max(tot, 0.0)


# ----------------------------------------------------------------------------------------------
# localized influence / fixed pair of worlds
# ----------------------------------------------------------------------------------------------


class LocalizedInfluence(DiscrepancyModel):
    """The secret affects at most ``d_max`` records under the declared coupling (ZV25 App. D.4).

    ``sa_bound="moment"`` (default, [D] module docstring) or ``"eq42"`` (the paper's
    min{B², D_max²}, eq. 42).
    """

    name = "localized_influence"

    def __init__(self, d_max: int, *, sa_bound: str = "moment"):
        if isinstance(d_max, bool) or not isinstance(d_max, (int, np.integer)) or d_max < 0:
            raise ValueError(f"d_max must be an integer ≥ 0, got {d_max!r}")
        if sa_bound not in ("moment", "eq42"):
            raise ValueError(f"sa_bound must be 'moment' or 'eq42', got {sa_bound!r}")
        self.d_max = int(d_max)
        self.sa_bound = sa_bound

    def _d(self, s: Sampling) -> int:
        if self.d_max > s.dataset_size:
            raise ValueError(f"d_max (D = {self.d_max}) is larger than dataset_size (N = {s.dataset_size})")
        return self.d_max

    def _assumption(self) -> Assumption:
        return Assumption(
            f"Under the declared coupling the two secret-conditional datasets differ in at most "
            f"{self.d_max} records almost surely",
            f"{PAPER}, App. D.4, eq. (42)",
        )

    def huc_kappa(self, s: Sampling) -> Cap:
        D = self._d(s)
        if s.scheme == "wr" and D > 0:
            raise _wr_huc_error()
        if s.scheme == "wor":
            K = min(s.batch, D)
            return Cap(
                K / s.batch,
                "huc",
                f"{PAPER} eq. (42): K_t = min(B, D_max) (WOR, Prop I.1)",
                assumptions=(self._assumption(),),
                details={"K": K, "B": s.batch_size},
            )
        if s.scheme == "poisson" and s.normalization == "expected":
            return Cap(
                D / s.normalizer,
                "huc",
                f"{PAPER} App. E with B̄ = qN: κ_t = K_t/(qN) ≤ D_max/(qN) (all differing records sampled)",
                assumptions=(self._assumption(),),
                details={"K": D, "normalizer": s.normalizer},
            )
        if s.scheme == "poisson":
            return Cap(
                1.0 if D > 0 else 0.0,
                "huc",
                f"{PAPER} App. E: κ_t = K_t/B_t ≤ 1 (a batch may hold only differing records)",
                warnings=(
                    "Poisson sampling normalised by the realised batch size: the worst-case κ is 1, "
                    "so HUC gives no benefit from subsampling; prefer normalization='expected'",
                )
                if D > 0
                else (),
                assumptions=(self._assumption(),),
            )
        return Cap(0.0, "huc", "D_max = 0")

    def sa_kappa2(self, s: Sampling) -> Cap:
        D = self._d(s)
        N = s.dataset_size
        a = (
            self._assumption(),
            Assumption(
                "Batches are drawn by an exchangeable scheme (uniform WOR, uniform WR or Poisson), so "
                "E_R[K²|X, X′] depends only on the number of differing records and increases with it",
                f"dpspec [D], digest §5.4; {PAPER} App. D.3/D.4",
            ),
        )
        if s.scheme == "wor":
            B = s.batch
            if self.sa_bound == "eq42":
                k2 = float(min(B, D) ** 2)
                src = f"{PAPER} eq. (42): K̄² = min(B², D_max²)"
            else:
                k2 = hypergeometric_k2(N, D, B)
                src = f"{PAPER} App. W.3 / D.3: E[K²] of Hypergeometric(N, D_max, B) (F20), sup at d = D_max [D]"
            return Cap(k2 / B**2, "sa", src, assumptions=a, details={"k2": k2, "B": B})
        if s.scheme == "wr":
            B = s.batch
            if self.sa_bound == "eq42":
                k2 = float(min(B, D) ** 2)
                src = f"{PAPER} eq. (42)"
            else:
                k2 = binomial_k2(B, D / N)
                src = f"{PAPER} Prop I.1 (K ~ Bin(B, d/n) under WR), eq. (39); sup at d = D_max [D]"
            return Cap(k2 / B**2, "sa", src, assumptions=a, details={"k2": k2, "B": B})
        if s.normalization == "expected":
            k2 = binomial_k2(D, s.rate)
            return Cap(
                k2 / s.normalizer**2,
                "sa",
                f"{PAPER} App. E with B̄ = qN: K ~ Bin(D_max, q), E[K²] by eq. (39) [D]",
                assumptions=a,
                details={"k2": k2, "normalizer": s.normalizer},
            )
        # Sampling refuses a realised normalisation without an empty-batch rule (DPS502)
        assert s.empty_batch is not None
        v = poisson_realized_kappa2(N, D, s.rate, s.empty_batch)
        return Cap(
            v,
            "sa",
            f"{PAPER} App. E: E[(K/B_t)² 1{{B_t ≥ 1}}] evaluated exactly [D]",
            assumptions=a,
            details={"empty_batch": s.empty_batch},
        )

    def kappa_law(self, s: Sampling):
        D = self._d(s)
        k, lp, what = _law(s, D)
        k, lp = _clean_law(k, lp)
        return (
            k,
            lp,
            Cap(
                float(k.max()),
                "law",
                f"{what} at d = D_max (the law is stochastically increasing in d) [D]",
                assumptions=(self._assumption(),),
            ),
        )

    def group_size(self) -> int | None:
        return self.d_max

    def describe(self) -> dict:
        return {"model": self.name, "d_max": self.d_max, "sa_bound": self.sa_bound, "source": f"{PAPER}, App. D.4"}


class FixedPairWorlds(LocalizedInfluence):
    """Two fixed datasets (one per secret) differing in exactly ``differing`` = Δ records — the
    label-flip worlds of ZV25 App. W.3 (K_cap = min(B, Δ); K ~ Hypergeometric(N, Δ, B) under WOR).

    The worlds are deterministic given the secret, so the sup/E order of eq. (17) is harmless
    (digest §13.6). Build from two label vectors with :meth:`from_labels`.
    """

    name = "fixed_pair_worlds"

    def __init__(self, dataset_size: int, differing: int, *, sa_bound: str = "moment"):
        if isinstance(dataset_size, bool) or not isinstance(dataset_size, (int, np.integer)) or dataset_size < 1:
            raise ValueError(f"dataset_size must be an integer ≥ 1, got {dataset_size!r}")
        if isinstance(differing, bool) or not isinstance(differing, (int, np.integer)) or differing < 0:
            raise ValueError(f"differing must be an integer ≥ 0, got {differing!r}")
        if differing > dataset_size:
            raise ValueError(f"differing (Δ = {differing}) is larger than dataset_size (N = {dataset_size})")
        super().__init__(int(differing), sa_bound=sa_bound)
        self.dataset_size = int(dataset_size)

    @classmethod
    def from_labels(cls, y0, y1, **kw) -> FixedPairWorlds:
        a, b = np.asarray(y0), np.asarray(y1)
        if a.shape != b.shape:
            raise ValueError(f"the two worlds must have the same shape, got {a.shape} and {b.shape}")
        diff = a != b
        if diff.ndim > 1:
            diff = diff.reshape(diff.shape[0], -1).any(axis=1)
        return cls(int(a.shape[0]), int(diff.sum()), **kw)

    def _d(self, s: Sampling) -> int:
        if s.dataset_size != self.dataset_size:
            raise ValueError(
                f"the worlds have N = {self.dataset_size} records but the sampling assumes "
                f"dataset_size = {s.dataset_size}"
            )
        return self.d_max

    def _assumption(self) -> Assumption:
        return Assumption(
            f"The two secret-conditional datasets are fixed and differ in exactly Δ = {self.d_max} "
            f"of N = {self.dataset_size} records (identity coupling)",
            f"{PAPER}, App. W.3",
        )

    def describe(self) -> dict:
        return {
            "model": self.name,
            "dataset_size": self.dataset_size,
            "differing": self.d_max,
            "sa_bound": self.sa_bound,
            "source": f"{PAPER}, App. W.3 (F20)",
        }


# ----------------------------------------------------------------------------------------------
# i.i.d. records (App. D.3)
# ----------------------------------------------------------------------------------------------


def _binom_upper(n: int, p: float, delta: float) -> int:
    """Smallest k with Pr(Bin(n, p) > k) ≤ δ (verified with the survival function)."""
    from scipy.stats import binom

    if p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    k = int(binom.isf(delta, n, p))
    k = max(0, min(n, k))
    while k > 0 and binom.sf(k - 1, n, p) <= delta:
        k -= 1
    while k < n and binom.sf(k, n, p) > delta:
        k += 1
    return k


class IIDRecords(DiscrepancyModel):
    """Records i.i.d. given (s, θ); per-record conditionals at total variation ``tv`` = τ (the sup over
    worlds and pairs); record-wise maximal coupling, so mismatches are i.i.d. Bernoulli(τ) (ZV25
    App. D.3, eq. 36).

    * HUC: almost-sure cap = all sampled records (κ = 1) unless ``tail_delta`` δ_t is given: then
      the exact binomial (1 − δ_t)-quantile of K ~ Bin(B, τ) ([D]; ``tail_method="hoeffding"`` gives
      eq. 41), a probabilistic cap with per-step failure δ_t (eq. 34).
    * sa: ``sa_reading`` "high_probability" (default, [D]) or "coupling_average" (eq. 40; DPS507).
    """

    name = "iid_records"

    def __init__(
        self,
        tv: float,
        *,
        tail_delta: float | None = None,
        tail_method: str = "exact",
        sa_reading: str = "high_probability",
        world_delta: float = 1e-6,
    ):
        tv = float(tv)
        if not (0.0 <= tv <= 1.0):
            raise ValueError(f"tv (total variation τ) must lie in [0, 1], got {tv!r}")
        if tail_delta is not None and not (0.0 < float(tail_delta) < 1.0):
            raise ValueError(f"tail_delta must lie in (0, 1), got {tail_delta!r}")
        if tail_method not in ("exact", "hoeffding"):
            raise ValueError(f"tail_method must be 'exact' or 'hoeffding', got {tail_method!r}")
        if sa_reading not in ("high_probability", "coupling_average"):
            raise ValueError(f"sa_reading must be 'high_probability' or 'coupling_average', got {sa_reading!r}")
        if not (0.0 < float(world_delta) < 1.0):
            raise ValueError(f"world_delta must lie in (0, 1), got {world_delta!r}")
        self.tv = tv
        self.tail_delta = None if tail_delta is None else float(tail_delta)
        self.tail_method = tail_method
        self.sa_reading = sa_reading
        self.world_delta = float(world_delta)

    def _assumption(self) -> Assumption:
        return Assumption(
            f"Records are i.i.d. given (secret, world) with per-record total variation ≤ τ = {self.tv:g}; "
            "record-wise maximal coupling (mismatches i.i.d. Bernoulli(τ))",
            f"{PAPER}, App. D.3, eqs. (35)–(36)",
        )

    def huc_kappa(self, s: Sampling) -> Cap:
        if s.scheme == "wr" and self.tv > 0:
            raise _wr_huc_error()
        if self.tv == 0.0:
            return Cap(0.0, "huc", "τ = 0: the worlds coincide")
        if s.scheme == "poisson" and s.normalization == "realized":
            return Cap(
                1.0,
                "huc",
                f"{PAPER} App. E: κ ≤ 1",
                assumptions=(self._assumption(),),
                warnings=("Poisson sampling normalised by the realised batch size: worst-case κ = 1",),
            )
        if self.tail_delta is None:
            return Cap(
                1.0,
                "huc",
                f"{PAPER} eq. (29): with i.i.d. records every sampled record may differ, K_t = B_t",
                assumptions=(self._assumption(),),
                warnings=(
                    "the almost-sure HUC cap of the i.i.d.-records model is the whole batch (κ = 1); "
                    "pass tail_delta for a tail cap (eq. 41) or use the sa-HUC accountant",
                ),
            )
        d = self.tail_delta
        if s.scheme == "wor":
            B = s.batch
            if self.tail_method == "hoeffding":
                K = min(B, B * self.tv + math.sqrt(0.5 * B * math.log(1.0 / d)))
                src = f"{PAPER} eq. (41) (Hoeffding; conservative for WOR)"
            else:
                K = _binom_upper(B, self.tv, d)
                src = (
                    f"[D] exact (1−δ_t)-quantile of K ~ Bin(B, τ) (WOR sample of i.i.d. mismatches); ≤ {PAPER} eq. (41)"
                )
            return Cap(
                K / B,
                "huc",
                src,
                per_step_failure=d,
                assumptions=(self._assumption(),),
                details={"K": K, "B": B, "delta_t": d},
            )
        # Poisson, expected normalisation: K ~ Bin(N, qτ)
        N = s.dataset_size
        if self.tail_method == "hoeffding":
            K = min(N, N * s.q * self.tv + math.sqrt(0.5 * N * math.log(1.0 / d)))
        else:
            K = _binom_upper(N, s.q * self.tv, d)
        return Cap(
            K / s.normalizer,
            "huc",
            "[D] tail cap of K ~ Bin(N, qτ) (Poisson inclusion × i.i.d. mismatch), App. E",
            per_step_failure=d,
            assumptions=(self._assumption(),),
            details={"K": K, "delta_t": d},
        )

    def sa_kappa2(self, s: Sampling) -> Cap:
        N = s.dataset_size
        if self.tv == 0.0:
            return Cap(0.0, "sa", "τ = 0: the worlds coincide")
        if self.sa_reading == "coupling_average":
            w = (
                "DPS507: the sa cap G(B, τ) of eq. (40) averages E[K²] over the coupling draw as well as the "
                "subsampling; eq. (30) requires an ess sup over (X, X′) of E_R[K²] (digest §13.6); use "
                "sa_reading='high_probability' for a bound that holds except with a reported probability",
            )
            if s.scheme in ("wor", "wr"):
                B = s.batch
                k2 = binomial_k2(B, self.tv)
                return Cap(
                    k2 / B**2,
                    "sa",
                    f"{PAPER} eq. (40): G(B, τ) = Bτ(1−τ) + (Bτ)²",
                    warnings=w,
                    assumptions=(self._assumption(),),
                    details={"k2": k2, "B": B},
                )
            if s.normalization == "expected":
                k2 = binomial_k2(N, s.q * self.tv)
                return Cap(
                    k2 / s.normalizer**2,
                    "sa",
                    "[D] K ~ Bin(N, qτ) averaged over the coupling (Poisson)",
                    warnings=w,
                    assumptions=(self._assumption(),),
                    details={"k2": k2},
                )
            raise ValueError(
                "sa_reading='coupling_average' with Poisson realised normalisation is not supported; "
                "use normalization='expected'"
            )
        s_hi = _binom_upper(N, self.tv, self.world_delta)
        inner = LocalizedInfluence(s_hi).sa_kappa2(s)
        a = (
            self._assumption(),
            Assumption(
                f"The world's total mismatch count S_N ~ Bin(N, τ) is ≤ {s_hi} (its (1 − δ_w)-quantile, "
                f"δ_w = {self.world_delta:g}); the failure δ_w is reported once for the run",
                "dpspec [D], digest §13.6",
            ),
        ) + inner.assumptions[1:]
        return Cap(
            inner.value,
            "sa",
            f"[D] localized moment at d = S_N upper quantile ({inner.source})",
            once_failure=self.world_delta,
            assumptions=a,
            details={"s_hi": s_hi, **inner.details},
        )

    def kappa_law(self, s: Sampling):
        if self.tv == 0.0:
            return np.zeros(1), np.zeros(1), Cap(0.0, "law", "τ = 0")
        if self.sa_reading == "coupling_average":
            raise ValueError("the amplified accountant needs the worst coupled pair; use sa_reading='high_probability'")
        s_hi = _binom_upper(s.dataset_size, self.tv, self.world_delta)
        k, lp, cap = LocalizedInfluence(s_hi).kappa_law(s)
        return (
            k,
            lp,
            Cap(
                cap.value,
                "law",
                f"[D] localized law at d = S_N upper quantile ({cap.source})",
                once_failure=self.world_delta,
                assumptions=(self._assumption(),),
                details={"s_hi": s_hi},
            ),
        )

    def group_size(self) -> int | None:
        return None

    def describe(self) -> dict:
        return {
            "model": self.name,
            "tv": self.tv,
            "tail_delta": self.tail_delta,
            "tail_method": self.tail_method,
            "sa_reading": self.sa_reading,
            "world_delta": self.world_delta,
            "source": f"{PAPER}, App. D.3",
        }


# ----------------------------------------------------------------------------------------------
# Monte Carlo simulator (App. D.2)
# ----------------------------------------------------------------------------------------------


def mc_radius(M: int, gamma: float, instances: int = 1) -> float:
    """ε_MC = √(log(2 N_t/γ)/(2M)): Lemma D.1 / D.2 (N_t = 1) and Cors D.1 / D.2 (union over N_t)."""
    if int(M) < 1:
        raise ValueError(f"M (Monte Carlo size) must be ≥ 1, got {M!r}")
    if not (0.0 < float(gamma) < 1.0):
        raise ValueError(f"gamma must lie in (0, 1), got {gamma!r}")
    if int(instances) < 1:
        raise ValueError(f"instances must be ≥ 1, got {instances!r}")
    return math.sqrt(math.log(2.0 * int(instances) / float(gamma)) / (2.0 * int(M)))


def mc_sa_cap(samples, range_max: float, gamma: float, instances: int = 1) -> tuple[float, float, float]:
    """Hoeffding upper bound on E[Z] for i.i.d. Z ∈ [0, range_max]: (bound, empirical mean, slack)
    with bound = mean + range_max·ε_MC — ZV25 Lemma D.1, eq. (32) (Z = Δ_t², range B_t²) and
    Cor D.1 (γ/N_t per instance)."""
    z = np.asarray(samples, dtype=float)
    if z.ndim != 1 or z.size == 0:
        raise ValueError("samples must be a non-empty vector")
    if np.any(z < 0) or np.any(z > range_max * (1 + 1e-12)):
        raise ValueError("samples must lie in [0, range_max]")
    mean = float(z.mean())
    slack = float(range_max) * mc_radius(z.size, gamma, instances)
    return mean + slack, mean, slack


@overload
def mc_tail_cap(samples, delta: float, gamma: float, instances: int = 1, *, upper: float) -> float: ...
@overload
def mc_tail_cap(samples, delta: float, gamma: float, instances: int = 1, upper: None = None) -> float | None: ...
def mc_tail_cap(samples, delta: float, gamma: float, instances: int = 1, upper: float | None = None) -> float | None:
    """DKW tail cap: the ⌈(1 − (δ − ε))M⌉-th order statistic, valid at level δ with probability
    ≥ 1 − γ — ZV25 Lemma D.2 (and Cor D.2 with γ/N_t). Returns ``upper`` (the a.s. cap, e.g. B) when
    δ ≤ ε (the paper's fallback), or None if no upper is given."""
    x = np.sort(np.asarray(samples, dtype=float))
    M = x.size
    eps = mc_radius(M, gamma, instances)
    if not (0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if delta <= eps:
        return upper
    k = math.ceil((1.0 - (delta - eps)) * M)
    k = min(max(k, 1), M)
    return float(x[k - 1])


@dataclass(frozen=True)
class MonteCarloEstimate:
    """Raw simulation output for one sampling scheme: per instance, M normalised discrepancies κ."""

    kappas: np.ndarray  # (instances, M)
    deterministic_worlds: bool
    max_mismatch: int


class MonteCarloDiscrepancy(DiscrepancyModel):
    """Monte Carlo discrepancy caps (ZV25 App. D.2, Algorithms 3/4).

    ``couplers``: one callable per instance (θ, (s_i, s_j)) in Θ̂ × 𝒬̂; ``coupler(rng)`` returns a
    coupled draw, either a boolean mismatch mask of length N or a pair (X_i, X_j) of record arrays
    (rows compared for equality). ``M`` draws per instance, calibration failure ``gamma`` (once for
    the run: the same estimate serves every step with the same sampling law), optional HUC tail level
    ``tail_delta`` (δ_t, per step), and an optional almost-sure bound ``range_max`` on the mismatch
    count (tightens the Hoeffding range B² to min(B, range_max)² [D]).

    Warnings (DPS506): the Hoeffding slack exceeds the empirical second moment ("slack dominates",
    digest §13.14); δ_t ≤ ε_MC (the tail cap falls back to the whole batch). DPS507 when the coupler
    is random (the MC average runs over the coupling draw as well, digest §5.4).
    """

    name = "monte_carlo"

    def __init__(
        self,
        couplers: Sequence[Callable] | Callable,
        *,
        M: int = 10_000,
        gamma: float = 0.05,
        tail_delta: float | None = None,
        range_max: int | None = None,
        seed: int = 0,
    ):
        if callable(couplers):
            couplers = [couplers]
        self.couplers = list(couplers)
        if not self.couplers:
            raise ValueError("couplers is empty: give one coupling sampler per (world, pair) instance")
        if int(M) < 1:
            raise ValueError(f"M must be ≥ 1, got {M!r}")
        if not (0.0 < float(gamma) < 1.0):
            raise ValueError(f"gamma must lie in (0, 1), got {gamma!r}")
        if tail_delta is not None and not (0.0 < float(tail_delta) < 1.0):
            raise ValueError(f"tail_delta must lie in (0, 1), got {tail_delta!r}")
        if range_max is not None and int(range_max) < 0:
            raise ValueError(f"range_max must be ≥ 0, got {range_max!r}")
        self.M = int(M)
        self.gamma = float(gamma)
        self.tail_delta = None if tail_delta is None else float(tail_delta)
        self.range_max = None if range_max is None else int(range_max)
        self.seed = int(seed)
        self._cache: dict = {}

    @staticmethod
    def _mask(draw, N: int) -> np.ndarray:
        if isinstance(draw, tuple) and len(draw) == 2:
            a, b = np.asarray(draw[0]), np.asarray(draw[1])
            if a.shape != b.shape:
                raise ValueError("a coupled draw (X_i, X_j) must have equal shapes")
            m = a != b
            if m.ndim > 1:
                m = m.reshape(m.shape[0], -1).any(axis=1)
        else:
            m = np.asarray(draw, dtype=bool)
        if m.shape != (N,):
            raise ValueError(f"a coupled draw must cover the N = {N} records, got mask shape {m.shape}")
        return m

    def simulate(self, s: Sampling) -> MonteCarloEstimate:
        """Draw M (coupled pair, batch) replicates per instance: Algorithm 3 lines 1–5."""
        key = (s.scheme, s.dataset_size, s.batch_size, s.rate, s.normalization, s.empty_batch)
        if key in self._cache:
            return self._cache[key]
        rng = np.random.default_rng(self.seed)
        N = s.dataset_size
        out = np.empty((len(self.couplers), self.M))
        deterministic = True
        max_mis = 0
        from dpspec.progress import progress

        draws = progress(total=len(self.couplers) * self.M, desc="SRPP discrepancy (Monte Carlo)", unit="draw")
        for a, coupler in enumerate(self.couplers):
            draws.update(self.M)
            first = None
            for m in range(self.M):
                mask = self._mask(coupler(rng), N)
                if first is None:
                    first = mask
                elif deterministic and not np.array_equal(mask, first):
                    deterministic = False
                max_mis = max(max_mis, int(mask.sum()))
                idx = s.draw(rng)
                K = int(mask[idx].sum())  # WR: repeated indices count repeatedly (App. I)
                if s.scheme in ("wor", "wr"):
                    out[a, m] = K / s.batch
                elif s.normalization == "expected":
                    out[a, m] = K / s.normalizer
                else:
                    out[a, m] = (K / idx.size) if idx.size else 0.0
        draws.close()
        est = MonteCarloEstimate(out, deterministic, max_mis)
        self._cache[key] = est
        return est

    def _kappa_range(self, s: Sampling) -> float:
        N = s.dataset_size
        if s.scheme in ("wor", "wr"):
            B = s.batch
            return min(B, self.range_max) / B if (self.range_max is not None and s.scheme == "wor") else 1.0
        if s.normalization == "expected":
            cnt = N if self.range_max is None else min(N, self.range_max)
            return cnt / s.normalizer
        return 1.0

    def _coupling_warnings(self, est: MonteCarloEstimate) -> tuple[str, ...]:
        if est.deterministic_worlds:
            return ()
        return (
            "DPS507: the coupling sampler is random, so the Monte Carlo moment averages over the coupling draw; "
            "eq. (30) needs an ess sup over (X, X′) of E_R[K²] (digest §5.4, §13.6)",
        )

    def sa_kappa2(self, s: Sampling) -> Cap:
        est = self.simulate(s)
        R = self._kappa_range(s)
        n_inst = len(self.couplers)
        bounds = [mc_sa_cap(est.kappas[a] ** 2, R**2, self.gamma, n_inst) for a in range(n_inst)]
        bound = min(R**2, max(b[0] for b in bounds))
        mean = max(b[1] for b in bounds)
        slack = bounds[0][2]
        warns = list(self._coupling_warnings(est))
        if slack > mean:
            warns.append(
                f"DPS506: the Monte Carlo Hoeffding slack ({slack:.4g} in κ² units, range {R**2:.4g}) exceeds "
                f"the empirical second moment ({mean:.4g}); the cap is dominated by the finite-sample term "
                "(App. D.2, digest §13.14) — use an analytic model or declare range_max"
            )
        return Cap(
            bound,
            "sa",
            f"{PAPER} Lemma D.1 / Cor D.1 (Hoeffding, M = {self.M}, γ = {self.gamma:g}, N_t = {n_inst})",
            once_failure=self.gamma,
            warnings=tuple(warns),
            assumptions=(
                Assumption(
                    "The coupling samplers draw from the declared couplings Γ_{θ,ij} of every "
                    "instantiated world and pair",
                    f"{PAPER}, App. D.2, Algorithm 4",
                ),
            ),
            details={
                "empirical_mean": mean,
                "slack": slack,
                "range": R**2,
                "M": self.M,
                "deterministic_worlds": est.deterministic_worlds,
            },
        )

    def huc_kappa(self, s: Sampling) -> Cap:
        if s.scheme == "wr":
            raise _wr_huc_error()
        R = self._kappa_range(s)
        if self.tail_delta is None:
            return Cap(
                R,
                "huc",
                "almost-sure range of the discrepancy (no tail level given)",
                warnings=("MonteCarloDiscrepancy without tail_delta: the HUC cap is the a.s. range",),
            )
        est = self.simulate(s)
        n_inst = len(self.couplers)
        caps = [mc_tail_cap(est.kappas[a], self.tail_delta, self.gamma, n_inst, upper=R) for a in range(n_inst)]
        cap = max(caps)
        warns = list(self._coupling_warnings(est))
        eps = mc_radius(self.M, self.gamma, n_inst)
        if self.tail_delta <= eps:
            warns.append(
                f"DPS506: tail level δ_t = {self.tail_delta:g} ≤ DKW radius {eps:.4g}: the tail cap falls back "
                "to the almost-sure range (Lemma D.2); increase M"
            )
        return Cap(
            cap,
            "huc",
            f"{PAPER} Lemma D.2 / Cor D.2 (DKW quantile, M = {self.M}, γ = {self.gamma:g})",
            per_step_failure=self.tail_delta,
            once_failure=self.gamma,
            warnings=tuple(warns),
            details={"dkw_radius": eps, "M": self.M},
        )

    def group_size(self) -> int | None:
        return None

    def describe(self) -> dict:
        return {
            "model": self.name,
            "instances": len(self.couplers),
            "M": self.M,
            "gamma": self.gamma,
            "tail_delta": self.tail_delta,
            "range_max": self.range_max,
            "seed": self.seed,
            "source": f"{PAPER}, App. D.2 (Algorithms 3/4, Lemmas D.1/D.2)",
        }
