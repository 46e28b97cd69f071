"""The runtime of a ``tune`` block: draws the number of runs and each run's candidate with its own
generator, runs every candidate under a fresh copy of the mechanism its certificate entry compiled
(so each run has its own ledger and stops at its certified steps), scores, and returns the best run with
a run certificate for the whole procedure.

Every number (the candidates' noise, steps and rates inside their mechanisms, the run-count distribution,
the score's noise and sensitivity, the early-stopping cap and the certified ε) comes from the compiled
certificate; the caller supplies only the training and scoring code. Never imports the compiler.
"""

from __future__ import annotations

import copy
import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpspec.mechanisms.errors import CertificateGuardError


class TuningRefused(CertificateGuardError):
    """A request the certificate does not cover (stopping early when the spec does not allow it)."""


@dataclass(frozen=True)
class Candidate:
    """One candidate setting: its text, its values by setting name, the compiled mechanism of the training
    under it (a template: each run gets a fresh copy), its per-run ε and its score noise (None: public score)
    and that noise's kind."""

    index: int
    settings: str
    values: Mapping[str, Any]
    mechanism: Any
    epsilon: float
    score_noise: float | None
    #: the private score's noise: Gaussian (``score_noise`` its standard deviation), or with this flag Laplace
    #: (``score_noise`` its scale b, standard deviation √2 b)
    score_two_sided_exponential: bool = False


@dataclass
class TuningResult:
    """What a tuning run outputs: the selected model and its settings (and its noisy score when the spec
    releases it) and the run certificate of the whole procedure.

    How many runs were drawn and made, and each run's candidate (``runs_drawn``, ``runs_done``, ``history``), are
    outputs only where the certificate covers them: a fixed number of runs, or stopping early (the composition of
    the runs made covers all of their outputs). With a random number of runs they are None: Papernot & Steinke
    2022 Thms 2 and 6 bound the best run's output *without* K, and K released beside it is not covered (for
    randomized-response runs with ε₀ = 0.5 and a geometric K of mean 10, certified ε = 1.67 at δ = 1e-5, the pair
    (K, best) has δ = 0.013 at that ε: ``tests/tuning/test_runtime_guards.py``)."""

    model: Any
    settings: Mapping[str, Any] | None
    candidate: int | None
    score: float | None
    runs_drawn: int | None
    runs_done: int | None
    stopped_early: bool
    epsilon: float
    delta: float | None
    run_certificate: Any = None
    #: the candidate index of every run (None with a random number of runs and no early stopping: its length is K)
    history: list[int] | None = field(default_factory=list)


def _fresh_run(template, budget: int | None):
    """A new run of a candidate: a copy of its compiled object with a ledger of its own, over the candidate's
    certified steps (``budget``, recorded when the tuning was built: the template's own ledger is spent then, so
    that it cannot train outside the tuning). The tuning's certificate covers K runs, each a new run of a
    candidate; a plain copy would share the template's run count (copies of a ledger are one run, by design), so
    the copy gets a new ledger built like the template's (same target, accountant, unit, fingerprint and
    certificate binding)."""
    from dpspec.mechanisms.ledger import PrivacyLedger

    mech = copy.deepcopy(template)
    old = getattr(mech, "ledger", None)
    if isinstance(old, PrivacyLedger):
        assert budget is not None
        new = PrivacyLedger(old.target, budget, old._accountant, unit=old.unit, fingerprint=old.fingerprint)
        if old.certificate_hash is not None:
            new.bind_certificate(old.certificate_hash, old.certificate_source or "", old.record)
        object.__setattr__(mech, "ledger", new)
    return mech


def _lock_template(mech) -> int | None:
    """Spend a candidate template's own ledger (no certificate covers a run of the template itself: only the
    tuning's runs, each a fresh copy) and return its certified budget. Refuses a template already used."""
    from dpspec.mechanisms.ledger import PrivacyLedger

    led = getattr(mech, "ledger", None)
    if not isinstance(led, PrivacyLedger):
        return None
    if led.steps_taken:
        raise TuningRefused("a candidate's compiled object was used outside the tuning; compile again")
    budget = led.budget_steps
    led.charge(budget)
    return budget


class TunedTraining:
    """The compiled tuning procedure (see ``dpspec.tuning.compile``). Its ledger counts one procedure (a second
    ``run`` is refused: it would spend the certificate again), or in early-stopping mode the runs, at most
    the certified cap over every call."""

    def __init__(
        self,
        *,
        name: str,
        candidates: tuple[Candidate, ...],
        weights,
        runs,
        score: str,
        score_on: str,
        score_sensitivity: float,
        release_score: bool,
        epsilon: float,
        delta: float | None,
        alpha: float | None,
        stop_early: bool,
        stop_early_max_runs: int,
        points: tuple[tuple[float | None, float], ...],
        stop_early_points: tuple[float, ...],
        accountant: str | None = None,
    ):
        from dpspec.mechanisms.ledger import PrivacyLedger, fingerprint

        if not candidates:
            raise ValueError("a tuning needs at least one candidate")
        self.name = name
        self.candidates = candidates
        #: each candidate's certified budget per run; the templates' own ledgers are spent here
        self._run_budgets = tuple(_lock_template(c.mechanism) for c in candidates)
        w = np.full(len(candidates), 1.0 / len(candidates)) if weights is None else np.asarray(weights, float)
        self.weights = w / w.sum()
        self.runs = runs
        self.score = score
        self.score_on = score_on
        self.score_sensitivity = float(score_sensitivity)
        self.release_score = release_score
        self.epsilon = float(epsilon)
        self.delta = delta
        self.alpha = alpha
        self.stop_early = stop_early
        self.stop_early_max_runs = int(stop_early_max_runs)
        #: the certified points: (δ, ε) for an (ε, δ) guarantee, (None, ε(α)) for a Rényi one
        self.points = tuple((d, float(e)) for d, e in points)
        #: ε of the composition of ``stop_early_max_runs`` runs at each point (the early-stopping bound)
        self.stop_early_points = tuple(float(e) for e in stop_early_points)
        self.stop_early_epsilon = self.stop_early_points[0] if self.stop_early_points else 0.0
        #: the theorem the run certificate names (default: the selection bounds)
        self.accountant = accountant or "selection (Papernot & Steinke 2022)"
        unit, budget = ("run", self.stop_early_max_runs) if stop_early else ("procedure", 1)
        self.ledger = PrivacyLedger(
            name,
            budget,
            self._spent,
            unit=unit,
            fingerprint=fingerprint(
                points=[e for _, e in self.points],
                stop=list(self.stop_early_points),
                cap=self.stop_early_max_runs,
                runs=self.runs.describe(),
                candidates=[c.epsilon for c in candidates],
            ),
        )
        self.weights.flags.writeable = False
        self._frozen = True  # read-only from here on, like every compiled mechanism (frozen dataclasses)

    def __setattr__(self, key: str, value: Any) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError(
                f"`{self.name}`: a compiled tuning is read-only (its run count, candidates, score noise and cap "
                "come from its certificate); compile another spec"
            )
        object.__setattr__(self, key, value)

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"`{self.name}`: a compiled tuning is read-only")

    def _spent(self, steps: int, delta: float | None):
        from dpspec.mechanisms.ledger import Spent

        idx = next((i for i, (d, _) in enumerate(self.points) if d == delta), 0)
        d, full = self.points[idx]
        if steps <= 0:
            eps, note = 0.0, "nothing run yet"
        elif self.stop_early:
            eps = self.stop_early_points[idx]
            note = (
                f"early-stopping mode: at most {self.stop_early_max_runs} runs, certified by their composition "
                "(any stopping rule within them)"
            )
        else:
            eps, note = full, f"the whole procedure ({self.runs.describe()}), as certified"
        if self.score_on == "public":
            note += "; the score is computed on public data (not covered)"
        return Spent(
            target=self.name,
            notion="approximate_dp" if self.delta is not None else "renyi_dp",
            steps=int(steps),
            budget_steps=self.ledger.budget_steps,
            epsilon=eps,
            delta=d,
            alpha=None if d is not None else self.alpha,
            exact_for_run=not self.stop_early,
            note=note,
            accountant="composition of the capped runs (Mironov 2017 Prop 1)" if self.stop_early else self.accountant,
        )

    def bind_certificate(self, certificate, name: str) -> None:
        record = next((r for r in certificate.results if r.name == name), None)
        self.ledger.bind_certificate(certificate.content_hash, certificate.spec.source_name, record)

    def run_certificate(self, *, embed=None):
        """The run certificate of the procedure so far, from its ledger (``embed``: the original certificate)."""
        from dpspec.certificate.run_record import build_run_certificate

        return build_run_certificate(self, embed=embed)

    def describe(self) -> str:
        return (
            f"tuning `{self.name}`: {self.runs.describe()} runs over {len(self.candidates)} candidates, best by "
            f"`{self.score}` ({self.score_on} score); certified ε = {self.epsilon:.6g}"
            + (f" at δ = {self.delta:g}" if self.delta is not None else f" at α = {self.alpha:g}")
        )

    def _score(self, cand: Candidate, raw, rng: np.random.Generator) -> float:
        if cand.score_noise is None:  # public data: the caller's number, stated as such in the certificate
            v = float(raw)
            # NaN ranks lowest: "best" must be a total order on the runs' outputs (Papernot & Steinke 2022 §2);
            # with NaN compared as is, a NaN first run would win against every later one
            return -math.inf if math.isnan(v) else v
        v = np.clip(np.nan_to_num(np.asarray(raw, dtype=float).ravel(), nan=0.0), 0.0, 1.0)
        # math.fsum: the correctly rounded sum, so float re-ordering cannot add to the sensitivity
        total = math.fsum(v.tolist())
        if cand.score_two_sided_exponential:
            return float(total + rng.laplace(0.0, cand.score_noise))
        return float(total + rng.normal(0.0, cand.score_noise))

    # --- the procedure (shared by ``run`` and the audit's ``simulate``) ---------------------------------------

    def _draw_runs(self, rng: np.random.Generator) -> int:
        """K, from the certified run-count distribution."""
        return int(self.runs.sample(rng))

    def _k_public(self) -> bool:
        """K (the runs made and their candidates) is released only where the certificate covers it: a fixed count, or
        the composition bound of early stopping."""
        return self.stop_early or self.runs.kind == "fixed"

    def _procedure(self, rng, train_one, score_fn, *, stop=None, charge=None, limit_of=None) -> TuningResult:
        """Draw K; for each of the runs made draw a candidate, train it (``train_one(index, candidate)``), score it;
        keep the best. ``limit_of(K)``: the runs made (early stopping's cap); ``charge()``: before each run."""
        drawn = self._draw_runs(rng)
        limit = limit_of(drawn) if limit_of is not None else drawn
        best: tuple[float, int, Any] | None = None
        history: list[int] = []
        stopped = False
        for j in range(limit):
            if charge is not None:
                charge()
            i = int(rng.choice(len(self.candidates), p=self.weights))
            history.append(i)
            cand = self.candidates[i]
            model = train_one(i, cand)
            s = self._score(cand, score_fn(model), rng)
            if best is None or s > best[0]:
                best = (s, i, model)
            del model
            if stop is not None and j + 1 < limit and stop(best[0], j + 1):
                stopped = True
                break
        k_public = self._k_public()
        return TuningResult(
            model=best[2] if best else None,
            settings=dict(self.candidates[best[1]].values) if best else None,
            candidate=best[1] if best else None,
            score=best[0] if best and self.release_score else None,
            runs_drawn=drawn if k_public else None,
            runs_done=len(history) if k_public else None,
            stopped_early=stopped or (self.stop_early and limit < drawn),
            epsilon=self.epsilon,
            delta=self.delta,
            history=history if k_public else None,
        )

    def simulate(self, train_one, score_fn, rng: np.random.Generator) -> TuningResult:
        """One draw of the procedure's output for an audit (:mod:`dpspec.tuning.audit`): the same selection as
        :meth:`run` — K, the candidates and the score noise from ``rng`` — with ``train_one(index, candidate)``
        standing in for a training, outside the ledger (no run is charged, no certificate is written)."""
        return self._procedure(rng, train_one, score_fn)

    def run(
        self,
        train_fn: Callable[[Any, dict], Any],
        score_fn: Callable[[Any], Any],
        *,
        seed: int | None = None,
        stop: Callable[[float, int], bool] | None = None,
    ) -> TuningResult:
        """Run the procedure. ``train_fn(mechanism, settings)`` trains one model with the given compiled
        mechanism (a fresh copy per run, with its own ledger) and returns it; ``score_fn(model)`` returns, for a
        private score, the per-record values (clipped to [0, 1] and summed here, then noised with the certified
        standard deviation), and for a public score a number. ``stop(best_score, runs_done)`` may end the
        search early, only when the spec says ``stop_early true``: the run is then capped at the certified
        number of runs whose composition fits the certified ε, and its run certificate states that bound.
        ``seed`` is refused: the number of runs K, every run's candidate and the private score's noise are drawn
        from a generator seeded from the operating system's entropy. A seed the caller chooses (or knows) makes K a
        known number, so the random-count theorems (Papernot & Steinke 2022 Thms 2, 6) no longer apply, and makes
        the score's noise predictable."""
        if seed is not None:
            raise TuningRefused(
                f"`{self.name}`: a tuning draws the number of runs, the candidates and the score noise from the "
                "operating system's entropy; a seed would make them predictable (the random-count theorem would not "
                "apply); call run() without `seed`"
            )
        if stop is not None and not self.stop_early:
            raise TuningRefused(
                f"`{self.name}`: the certificate does not cover stopping early; compile a spec with `stop_early true`"
            )
        if not self.stop_early:
            self.ledger.charge(1)  # one procedure per compiled object: a second run would spend it again
        rng = np.random.default_rng(secrets.randbits(128))  # the operating system's entropy, never the caller's

        def train_one(i: int, cand: Candidate):
            mech = _fresh_run(cand.mechanism, self._run_budgets[i])  # this run's own ledger
            return train_fn(mech, dict(cand.values))

        def charge() -> None:
            if self.stop_early:
                self.ledger.charge(1)  # at most the cap's runs, over every call

        limit_of = (lambda drawn: min(drawn, self.ledger.remaining)) if self.stop_early else (lambda drawn: drawn)
        result = self._procedure(rng, train_one, score_fn, stop=stop, charge=charge, limit_of=limit_of)
        spent = self.ledger.privacy_spent(self.points[0][0] if self.points else None)
        result.epsilon = spent.epsilon
        if self.ledger.certificate_hash is not None:
            result.run_certificate = self.run_certificate()
        return result
