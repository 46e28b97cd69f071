"""The audit engine and the extension interface.

An *audit target* is one distinguishing experiment for one certificate entry: two neighbouring
inputs D₀, D₁ (worst case for the mechanism's sensitivity analysis as far as the auditor can
construct them), a way to draw outputs of the **runtime mechanism object** on each, and a family of
candidate test statistics. The engine (:func:`run_target`) does the statistics, identically for
every mechanism:

1. draw ``n_sel`` outputs on each neighbour (selection split), let the target fit its candidate
   statistics on them, and choose (statistic, orientation, threshold) that maximises the bound the
   evaluation split is expected to give (:func:`dpspec.audit.stats.select_threshold`);
2. draw ``n_eval`` fresh outputs on each neighbour, count false positives / false negatives of that
   single fixed test, and turn them into ε_lower with one-sided Clopper–Pearson bounds at the
   certificate's δ (:func:`dpspec.audit.stats.epsilon_lower_bound`);
3. compare with the certified ε of the same observation: ``ε_lower > ε_certified`` is a
   *violation* (the mechanism or its accounting is wrong, with probability ≥ the confidence).

Extension hook (a new mechanism family)
---------------------------------------
Subclass :class:`AuditTarget` and register a factory for the certificate's mechanism name::

    from dpspec.audit import AuditTarget, Claim, register_auditor

    class MyAudit(AuditTarget):
        mechanism = "my_family"
        def claim(self) -> Claim: ...                       # certified ε at δ for what is observed
        def neighbours(self) -> str: ...                    # one line: what D₀ and D₁ are
        def sample(self, world, n, rng) -> np.ndarray: ...  # n outputs (rows) on D_world, world ∈ {0, 1}
        def statistics(self, x0, x1) -> dict: ...           # name → score(rows) (higher ⇒ D₁), may be fitted on x0/x1

    @register_auditor("my_family")
    def _factory(ctx: AuditContext) -> list[AuditTarget]:
        return [MyAudit(ctx)]

Rules a target must follow for the bound to be valid: ``sample`` must run the mechanism object it
was given (``ctx.mechanism``), with fresh randomness from ``rng`` on every call; D₀ and D₁ must be
neighbours under the certificate's relation (for a Pufferfish target: the two secret-conditioned
laws of one declared world and discriminative pair, and ``symmetric = False`` if only one order
of the pair is protected); ``claim().epsilon`` must be the certified bound for exactly the
observation ``sample`` returns (a prefix of a training run is certified by the k-step bound, a
single slice by the per-slice notion). A target whose guarantee is an average over components
(Ave-SRPP) returns weighted sub-targets from :meth:`AuditTarget.components`; the engine then
combines Σ wᵢ ε_lower,i with a Bonferroni correction over the components.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .stats import epsilon_lower_bound, error_counts, max_certifiable_epsilon, select_threshold

__all__ = [
    "Claim",
    "AuditContext",
    "AuditTarget",
    "AuditResult",
    "register_auditor",
    "AUDITORS",
    "run_target",
    "SkippedTarget",
    "MIN_TRIALS",
    "seconds_per_trial",
]

#: the fewest outputs per neighbour an audit runs (a selection and an evaluation split of >= 20 each)
MIN_TRIALS = 40


@dataclass(frozen=True)
class Claim:
    """What the certificate promises for the observation the audit makes.

    ``epsilon``: the certified ε at ``delta`` for exactly that observation (compared with ε_lower).
    ``epsilon_headline``: the certificate's ε at ``delta`` for the whole mechanism (equal unless the
    audit observes a part, e.g. the first k of T training steps)."""

    epsilon: float
    delta: float
    notion: str
    epsilon_headline: float | None = None
    note: str = ""


@dataclass
class AuditContext:
    """Everything a factory may read: the certificate entry, the runtime mechanism object to run,
    the compiled spec when available (IR, data bindings), per-target options, the δ to audit at."""

    name: str
    record: Any  # dpspec.certificate.model.TargetCertificate
    mechanism: Any
    compiled: Any = None  # dpspec.compiler.compile.Compiled (None when auditing a bare mechanism)
    options: dict = field(default_factory=dict)
    delta: float | None = None
    data: dict | None = None


class AuditTarget(ABC):
    """One neighbouring pair, the runtime mechanism, and candidate statistics (see module docstring)."""

    mechanism: str = ""
    #: both inequalities of the hypothesis-testing characterisation are valid (symmetric relation)
    symmetric: bool = True
    #: outputs per neighbour when the caller gives no ``trials``
    default_trials: int = 10_000
    #: at most this many outputs per neighbour whatever the caller asks (None: no limit); the runtime audits,
    #: whose verdicts are stark, cap their cost this way
    max_trials: int | None = None
    #: outputs per neighbour timed (and discarded) to estimate the cost of one output before the audit runs
    #: (:func:`seconds_per_trial`); a target whose ``sample`` batches outputs sets its batch size here, and
    #: a long ``sample`` may call :func:`tick` as it goes (for the progress bar)
    pilot_trials: int = 8

    def __init__(self, ctx: AuditContext):
        self.ctx = ctx
        self.name = ctx.name

    @abstractmethod
    def claim(self) -> Claim: ...

    @abstractmethod
    def neighbours(self) -> str: ...

    @abstractmethod
    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray: ...

    @abstractmethod
    def statistics(self, x0: np.ndarray, x1: np.ndarray) -> dict[str, Callable[[np.ndarray], np.ndarray]]: ...

    def components(self) -> list[tuple[float, AuditTarget]] | None:
        """Weighted sub-targets whose weighted sum of ε is what the claim bounds (Ave notions)."""
        return None

    def label(self) -> str:
        return self.name


AuditorFactory = Callable[[AuditContext], "list[AuditTarget] | AuditTarget"]
AUDITORS: dict[str, AuditorFactory] = {}


def register_auditor(mechanism: str) -> Callable[[AuditorFactory], AuditorFactory]:
    """Register ``factory(ctx) -> AuditTarget | list[AuditTarget]`` for a certificate mechanism name."""

    def deco(factory: AuditorFactory) -> AuditorFactory:
        AUDITORS[mechanism] = factory
        return factory

    return deco


@dataclass
class AuditResult:
    """The outcome of one audit target (or of one certificate entry that could not be audited)."""

    name: str
    mechanism: str
    status: str  # "pass", "VIOLATION" or "skipped"
    notion: str = ""
    delta: float | None = None
    epsilon_certified: float | None = None
    epsilon_headline: float | None = None
    epsilon_lower: float | None = None
    confidence: float = 0.95
    trials_selection: int = 0
    trials_evaluation: int = 0
    statistic: str = ""
    threshold: float | None = None
    fpr: float | None = None
    fnr: float | None = None
    ceiling: float | None = None  # the largest ε_lower these trial counts can show
    neighbours: str = ""
    note: str = ""
    seconds: float = 0.0
    label: str = ""
    components: list[AuditResult] = field(default_factory=list)
    budget_note: str = ""  # how a time budget cut this target's trials (empty: it ran them all)

    @property
    def violation(self) -> bool:
        return self.status == "VIOLATION"

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "components"}
        d["components"] = [c.to_dict() for c in self.components]
        return d


def _split(trials: int, selection_fraction: float) -> tuple[int, int]:
    if trials < MIN_TRIALS:
        raise ValueError(f"trials must be at least 40 per neighbour, got {trials}")
    if not 0.0 < selection_fraction < 1.0:
        raise ValueError(f"selection_fraction must be in (0, 1), got {selection_fraction}")
    n_sel = max(20, int(round(trials * selection_fraction)))
    return n_sel, trials - n_sel


def _one(
    target: AuditTarget,
    claim: Claim,
    trials: int,
    rng: np.random.Generator,
    confidence: float,
    selection_fraction: float,
    tests: int,
) -> AuditResult:
    t0 = time.perf_counter()
    n_sel, n_eval = _split(trials, selection_fraction)
    seed_seq = getattr(rng.bit_generator, "seed_seq", None)
    r_sel0, r_sel1, r_ev0, r_ev1 = (
        (np.random.default_rng(s) for s in seed_seq.spawn(4))
        if isinstance(seed_seq, np.random.SeedSequence)
        else (rng, rng, rng, rng)
    )
    from dpspec.progress import progress

    bar = progress(total=2 * (n_sel + n_eval), desc=f"audit {target.label()}", unit="output")
    try:
        return _one_drawn(target, claim, confidence, tests, t0, n_sel, n_eval, (r_sel0, r_sel1, r_ev0, r_ev1), bar)
    finally:
        bar.close()


_TICK: ContextVar[Callable[[int], None] | None] = ContextVar("dpspec_audit_tick", default=None)


def tick(n: int) -> None:
    """Report ``n`` more outputs drawn, from inside a target's ``sample`` (optional: it only moves the
    progress bar of a long ``sample`` call; the draws themselves are unchanged)."""
    f = _TICK.get()
    if f is not None:
        f(int(n))


def _draw(target: AuditTarget, world: int, n: int, rng: np.random.Generator, bar) -> np.ndarray:
    """``target.sample(world, n, rng)``, advancing ``bar`` as the target reports outputs (:func:`tick`) and by
    the rest when it returns."""
    done = [0]

    def advance(k: int) -> None:
        k = max(0, min(k, n - done[0]))
        done[0] += k
        bar.update(k)

    token = _TICK.set(advance)
    try:
        out = target.sample(world, n, rng)
    finally:
        _TICK.reset(token)
    bar.update(n - done[0])
    return out


def _one_drawn(target, claim, confidence, tests, t0, n_sel, n_eval, rngs, bar) -> AuditResult:
    r_sel0, r_sel1, r_ev0, r_ev1 = rngs
    x0, x1 = _draw(target, 0, n_sel, r_sel0, bar), _draw(target, 1, n_sel, r_sel1, bar)
    stats = target.statistics(x0, x1)
    sc0 = {k: np.asarray(f(x0), float).reshape(-1) for k, f in stats.items()}
    sc1 = {k: np.asarray(f(x1), float).reshape(-1) for k, f in stats.items()}
    thr = select_threshold(
        sc0,
        sc1,
        delta=claim.delta,
        n_eval0=n_eval,
        n_eval1=n_eval,
        confidence=confidence,
        symmetric=target.symmetric,
        tests=tests,
    )
    del x0, x1, sc0, sc1
    f = stats[thr.statistic]
    e0 = np.asarray(f(_draw(target, 0, n_eval, r_ev0, bar)), float).reshape(-1)
    e1 = np.asarray(f(_draw(target, 1, n_eval, r_ev1, bar)), float).reshape(-1)
    e0, e1 = np.nan_to_num(e0, nan=-np.inf), np.nan_to_num(e1, nan=-np.inf)
    fp, fn = error_counts(e0, e1, thr.threshold, thr.orientation)
    eps_lo = epsilon_lower_bound(
        fp, n_eval, fn, n_eval, claim.delta, confidence=confidence, symmetric=target.symmetric, tests=tests
    )
    status = "VIOLATION" if eps_lo > claim.epsilon else "pass"
    return AuditResult(
        name=target.name,
        mechanism=target.mechanism,
        status=status,
        notion=claim.notion,
        delta=claim.delta,
        epsilon_certified=claim.epsilon,
        epsilon_headline=claim.epsilon_headline,
        epsilon_lower=float(eps_lo),
        confidence=confidence,
        trials_selection=n_sel,
        trials_evaluation=n_eval,
        statistic=thr.statistic + (" (low values ⇒ D₁)" if thr.orientation < 0 else ""),
        threshold=thr.threshold,
        fpr=fp / n_eval,
        fnr=fn / n_eval,
        ceiling=max_certifiable_epsilon(n_eval, claim.delta, confidence, tests),
        neighbours=target.neighbours(),
        note=claim.note,
        seconds=time.perf_counter() - t0,
        label=target.label(),
    )


def planned_trials(target: AuditTarget, trials: int | None = None) -> int:
    """Outputs per neighbour :func:`run_target` draws for ``trials`` (None: the target's default)."""
    n = int(trials if trials is not None else target.default_trials)
    if target.max_trials is not None:
        n = min(n, int(target.max_trials))
    return n


def seconds_per_trial(target: AuditTarget, seed: int = 0) -> float:
    """Seconds one output per neighbour costs (summed over an Ave target's components), timed on
    ``pilot_trials`` outputs of each neighbour drawn with their own randomness and discarded: the estimate
    a budget plans with. It never touches the randomness of the audit itself."""
    comps = target.components() or [(1.0, target)]
    total = 0.0
    for i, (_w, t) in enumerate(comps):
        rng = np.random.default_rng([seed, i, 0x9E3779B9])
        p = max(1, int(t.pilot_trials))
        t0 = time.perf_counter()
        t.sample(0, p, rng)
        t.sample(1, p, rng)
        total += (time.perf_counter() - t0) / (2 * p)
    return total


def run_target(
    target: AuditTarget,
    *,
    trials: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    selection_fraction: float = 0.2,
) -> AuditResult:
    """Run one audit target; see the module docstring for the procedure and its guarantee."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    claim = target.claim()
    n = planned_trials(target, trials)
    rng = np.random.default_rng(seed)
    comps = target.components()
    if not comps:
        return _one(target, claim, n, rng, confidence, selection_fraction, tests=1)
    t0 = time.perf_counter()
    subs = []
    for i, (w, sub) in enumerate(comps):
        r = _one(
            sub, sub.claim(), n, np.random.default_rng([seed, i]), confidence, selection_fraction, tests=len(comps)
        )
        r.label = f"{sub.label()} (weight {w:.3g})"
        subs.append(r)
    lower = float(sum(w * _lower(r) for (w, _), r in zip(comps, subs)))
    status = "VIOLATION" if lower > claim.epsilon else "pass"
    best = max(subs, key=_lower)
    return AuditResult(
        name=target.name,
        mechanism=target.mechanism,
        status=status,
        notion=claim.notion,
        delta=claim.delta,
        epsilon_certified=claim.epsilon,
        epsilon_headline=claim.epsilon_headline,
        epsilon_lower=lower,
        confidence=confidence,
        trials_selection=subs[0].trials_selection,
        trials_evaluation=subs[0].trials_evaluation,
        statistic=f"{len(subs)} slices; best: {best.statistic}",
        ceiling=float(sum(w for w, _ in comps)) * (subs[0].ceiling or 0.0),
        neighbours=target.neighbours(),
        note=claim.note,
        seconds=time.perf_counter() - t0,
        label=target.label(),
        components=subs,
    )


def _lower(r: AuditResult) -> float:
    assert r.epsilon_lower is not None  # (a target that was audited has its lower bound)
    return r.epsilon_lower


def skipped(name: str, mechanism: str, reason: str, label: str = "") -> AuditResult:
    return AuditResult(name=name, mechanism=mechanism, status="skipped", note=reason, label=label)


@dataclass
class SkippedTarget:
    """A target a factory returns when its check does not apply to the certificate (with the reason)."""

    name: str
    label: str
    reason: str
