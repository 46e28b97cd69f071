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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class TuningRefused(RuntimeError):
    """A request the certificate does not cover (stopping early when the spec does not allow it)."""


@dataclass(frozen=True)
class Candidate:
    """One candidate setting: its text, its values by setting name, the compiled mechanism of the training
    under it (a template: each run gets a fresh copy), its per-run ε and its score noise (None: public score)."""

    index: int
    settings: str
    values: Mapping[str, Any]
    mechanism: Any
    epsilon: float
    score_noise: float | None


@dataclass
class TuningResult:
    """What a tuning run outputs: the selected model and its settings (and its noisy score when the spec
    releases it), with how many runs were drawn and made and the run certificate of the whole procedure."""

    model: Any
    settings: Mapping[str, Any] | None
    candidate: int | None
    score: float | None
    runs_drawn: int
    runs_done: int
    stopped_early: bool
    epsilon: float
    delta: float | None
    run_certificate: Any = None
    history: list[int] = field(default_factory=list)  # the candidate index of every run (public: data-independent)


class TunedTraining:
    """The compiled tuning procedure (see ``dpspec.tuning.compile``)."""

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
        stop_early_epsilon: float,
    ):
        if not candidates:
            raise ValueError("a tuning needs at least one candidate")
        self.name = name
        self.candidates = candidates
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
        self.stop_early_epsilon = float(stop_early_epsilon)
        self.certificate_hash: str | None = None
        self.certificate_source: str | None = None
        self.record: Any = None

    def bind_certificate(self, certificate, name: str) -> None:
        self.certificate_hash = certificate.content_hash
        self.certificate_source = certificate.spec.source_name
        self.record = next((r for r in certificate.results if r.name == name), None)

    def describe(self) -> str:
        return (
            f"tuning `{self.name}`: {self.runs.describe()} runs over {len(self.candidates)} candidates, best by "
            f"`{self.score}` ({self.score_on} score); certified ε = {self.epsilon:.6g}"
            + (f" at δ = {self.delta:g}" if self.delta is not None else f" at α = {self.alpha:g}")
        )

    def _score(self, cand: Candidate, raw, rng: np.random.Generator) -> float:
        if cand.score_noise is None:  # public data: the caller's number, stated as such in the certificate
            return float(raw)
        v = np.clip(np.nan_to_num(np.asarray(raw, dtype=float).ravel(), nan=0.0), 0.0, 1.0)
        return float(v.sum() + rng.normal(0.0, cand.score_noise))

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
        ``seed``: for reproducible tests; by default the generator is seeded from the operating system."""
        if stop is not None and not self.stop_early:
            raise TuningRefused(
                f"`{self.name}`: the certificate does not cover stopping early; compile a spec with `stop_early true`"
            )
        rng = np.random.default_rng(seed)
        drawn = int(self.runs.sample(rng))
        limit = min(drawn, self.stop_early_max_runs) if self.stop_early else drawn
        best: tuple[float, int, Any] | None = None
        history: list[int] = []
        stopped = False
        for j in range(limit):
            i = int(rng.choice(len(self.candidates), p=self.weights))
            history.append(i)
            cand = self.candidates[i]
            mech = copy.deepcopy(cand.mechanism)  # a fresh ledger for this run
            model = train_fn(mech, dict(cand.values))
            s = self._score(cand, score_fn(model), rng)
            if best is None or s > best[0]:
                best = (s, i, model)
            del model
            if stop is not None and j + 1 < limit and stop(best[0], j + 1):
                stopped = True
                break
        early = self.stop_early  # capped mode: certified by the composition of at most the cap
        eps = self.stop_early_epsilon if early else self.epsilon
        result = TuningResult(
            model=best[2] if best else None,
            settings=dict(self.candidates[best[1]].values) if best else None,
            candidate=best[1] if best else None,
            score=best[0] if best and self.release_score else None,
            runs_drawn=drawn,
            runs_done=len(history),
            stopped_early=stopped or (early and limit < drawn),
            epsilon=eps,
            delta=self.delta,
            history=history,
        )
        result.run_certificate = self._run_certificate(result, early)
        return result

    def _run_certificate(self, result: TuningResult, early: bool):
        if self.certificate_hash is None:
            return None
        from dpspec.certificate.model import Tool
        from dpspec.certificate.run_record import OriginalRef, RunCertificate, SpentPoint

        def point(e: float) -> SpentPoint:
            return (
                SpentPoint(epsilon=e, delta=self.delta)
                if self.delta is not None
                else SpentPoint(epsilon=e, alpha=self.alpha)
            )

        from dpspec import __version__

        note = (
            f"early-stopping mode: at most {self.stop_early_max_runs} runs, certified by their composition "
            f"(any stopping rule within them); {result.runs_done} made of {result.runs_drawn} drawn"
            if early
            else f"the whole procedure ({self.runs.describe()}): {result.runs_done} runs made, as drawn; the "
            "certified ε covers the procedure, not the realised number of runs"
        )
        if self.score_on == "public":
            note += "; the score was computed on public data (not covered)"
        return RunCertificate(
            tool=Tool(version=__version__),
            certificate=OriginalRef(content_hash=self.certificate_hash, source_name=self.certificate_source or ""),
            target=self.name,
            mechanism="tune",
            notion="approximate_dp" if self.delta is not None else "renyi_dp",
            unit="run",
            steps_taken=result.runs_done,
            budget_steps=min(result.runs_drawn, self.stop_early_max_runs) if early else result.runs_drawn,
            accountant="selection",
            exact_for_run=not early,
            spent=[point(result.epsilon)],
            certified=[point(self.epsilon)],
            note=note,
        ).sealed()
