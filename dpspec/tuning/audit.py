"""Audit of a tuning (``tune`` block): does the selection procedure leak more than its bound says?

The trainings a tuning runs have their own auditors (``dpsgd``, ``gcon``, ...); this one audits what the tuning
adds — drawing K, drawing the candidates, scoring with the certified noise, keeping only the best, hiding K — by
running the **compiled tuning object's own selection** (``TunedTraining.simulate``, the code ``run`` uses) with a
cheap stand-in training whose privacy is known exactly:

- **Stand-in run.** The "model" is one randomized-response bit b about the record the neighbours differ in:
  P[b = 1] = e^{ε₀}/(1 + e^{ε₀}) on D₁ (which holds the record) and 1/(1 + e^{ε₀}) on D₀ — an ε₀-DP run whose
  dominating pair is exactly randomized response. ε₀ (option ``run_epsilon``) defaults to min(2, 4/E[K]), large
  enough for a procedure that miscounts its runs to show within the default trials.
- **Score.** ``score_fn`` returns the per-record values the runtime clips, sums and noises as certified: m copies
  of b (m = 10 standard deviations of the score noise, so the best run is one with b = 1 if any) and the data's own
  values (D₀: ten zeros; D₁: the same and the record's 1), so the noisy score of a run is m·b + (0 on D₀, 1 on D₁) +
  noise: the data's sum enters with sensitivity 1, as the certificate charges it. A public score is m·b.
- **Observation.** The best run's bit, its released score where the spec releases it, and K where the result
  releases it (a fixed count, early stopping).
- **Claim.** The certified ε at the audit's δ *for this stand-in*, computed with the same accounting as the
  certificate: one run's pair is randomized response (ε₀) composed with the score's release (Gaussian of the
  certified standard deviation, or Laplace of the certified scale, sensitivity Δ; none for a public score); the
  whole procedure's ε is the minimum of Papernot & Steinke 2022 (RDP) and the privacy-profile bound for the
  run-count distribution (a fixed count: the composition, RDP and PLD). ``epsilon_headline`` is the
  certificate's own ε. A correct procedure stays under the claim (the bounds are proved); a procedure that draws
  its runs or scores otherwise than certified does not.

Mutants (``MUTATION_FACTORS``, :func:`mutate`): ``fixed_runs`` — always round(factor·E[K]) runs, reported as the
random count (a random count only); ``ignores_k`` — runs past the K drawn (K + round(factor·E[K]): a loop bounded
by something else than K); ``k_released`` — the result releases K (and
the runs' candidates) although the count is random; ``uncharged_score`` — the score's noise multiplied by factor
(≈ 0: a score released without being charged).
"""

from __future__ import annotations

import math

import numpy as np

from dpspec.audit.base import AuditContext, AuditTarget, Claim, register_auditor

__all__ = ["TuneAudit", "stand_in_claim", "mutate", "MUTATION_FACTORS"]

MUTATION_FACTORS = {"fixed_runs": 1.0, "ignores_k": 2.0, "k_released": 1.0, "uncharged_score": 1e-3}

#: the data values of the neighbours (the record the audit is about is the last of D₁)
_BASE_DATA = np.zeros(10)


def _rr_rdp(alphas: np.ndarray, eps0: float) -> np.ndarray:
    """Rényi divergence of randomized response with ε₀ (symmetric): log(p^α q^{1-α} + q^α p^{1-α})/(α - 1)."""
    p = 1.0 / (1.0 + math.exp(-eps0))
    q = 1.0 - p
    a = np.asarray(alphas, float)
    la = np.logaddexp(a * math.log(p) + (1 - a) * math.log(q), a * math.log(q) + (1 - a) * math.log(p))
    return la / (a - 1.0) * (1 + 1e-12) + 1e-15


def _laplace_rdp(alphas: np.ndarray, scale: float) -> np.ndarray:
    """Rényi divergence of the Laplace mechanism, sensitivity 1, scale b (Mironov 2017 Prop 6)."""
    a = np.asarray(alphas, float)
    lam = 1.0 / scale
    t = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) * lam, np.log((a - 1) / (2 * a - 1)) - a * lam)
    return t / (a - 1.0) * (1 + 1e-12) + 1e-15


def _certified_setup(record):
    """What the certificate says of the selection: the run-count distribution, each candidate's score noise (its
    kind and size), the score's sensitivity and the candidates' weights — from the record, never from the runtime
    object (a mutant keeps the certificate's numbers)."""
    from dpspec.accounting.selection import RunCount

    p = record.mechanism.parameters
    kind = p["runs_kind"]
    if kind == "fixed":
        runs = RunCount.fixed(int(p["runs_count"]))
    elif kind == "poisson":
        runs = RunCount.poisson(float(p["runs_mu"]))
    else:
        runs = RunCount.tnb(float(p["runs_eta"]), float(p["runs_gamma"]))
    n = int(p["candidates"])
    private = p.get("score_on") == "private"
    noise = []
    for i in range(n):
        if not private:
            noise.append(None)
        elif f"candidate_{i}_score_laplace_scale" in p:
            noise.append(("laplace", float(p[f"candidate_{i}_score_laplace_scale"])))
        else:
            noise.append(("gaussian", float(p[f"candidate_{i}_score_noise"])))
    w = np.array([float(p.get(f"candidate_{i}_weight", 1.0)) for i in range(n)])
    return runs, noise, float(p.get("score_sensitivity", 0.0) or 0.0), w / w.sum(), private


def stand_in_claim(record, eps0: float, delta: float) -> tuple[float, str]:
    """The certified ε at ``delta`` of the certificate's selection with randomized-response (ε₀) runs and its
    certified score noise (module docstring), and the bound that gave it."""
    from dpspec.accounting.curve import DEFAULT_ALPHAS, RdpCurve
    from dpspec.accounting.pld import pld_compose, pld_gaussian, pld_laplace, pld_pure
    from dpspec.accounting.selection import candidate_envelope, selection_dp
    from dpspec.accounting.selection_profile import Profile, profile_from_pld

    runs, noise, sens, weights, _private = _certified_setup(record)
    alphas = DEFAULT_ALPHAS[DEFAULT_ALPHAS <= 512]
    curves, plds = [], []
    for nz in noise:
        rho = _rr_rdp(alphas, eps0)
        pld = pld_pure(eps0)
        if nz is not None and sens > 0:
            if nz[0] == "laplace":
                rho = rho + _laplace_rdp(alphas, nz[1] / sens)
                pld = pld_compose(pld, pld_laplace(nz[1], sens))
            else:
                rho = rho + alphas * sens * sens / (2.0 * nz[1] ** 2)
                pld = pld_compose(pld, pld_gaussian(nz[1], sens))
        curves.append(RdpCurve(alphas=alphas, rdp=rho, theorem="stand-in run", method="closed form", abs_error=1e-12))
        plds.append(pld)
    env = candidate_envelope(curves)
    rdp = selection_dp(env, runs, delta)
    if runs.kind == "fixed":
        # every candidate is the same randomized response; where the score noise is the same too, the k-fold
        # PLD composition of that run bounds the k runs
        if len(set(noise)) == 1:
            e = pld_compose(*[plds[0]] * runs.count).epsilon(delta).epsilon
            if e < rdp.epsilon:
                return float(e), "composition of the runs' PLD (Zhu, Dong & Wang 2022 Thm 10)"
        return float(rdp.epsilon), rdp.theorem
    floor = delta * 1e-3 / max(1.0, runs.mean())
    prof = Profile.mixture([profile_from_pld(p, delta_floor=floor) for p in plds], weights)
    res = selection_dp(env, runs, delta, profile=prof)
    return float(res.epsilon), res.theorem


class TuneAudit(AuditTarget):
    mechanism = "tune"
    default_trials = 20_000
    pilot_trials = 40

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        g = ctx.record.guarantee
        self.delta = float(ctx.delta if ctx.delta is not None else (g.delta if g.delta is not None else 1e-5))
        runs, noise, _sens, _w, self.private = _certified_setup(ctx.record)
        self.eps0 = float(ctx.options.get("run_epsilon", min(2.0, 4.0 / max(runs.mean(), 1.0))))
        self.eps_claim, self.theorem = stand_in_claim(ctx.record, self.eps0, self.delta)
        self.headline = next((p.epsilon for p in g.dp if p.delta == self.delta), g.epsilon)
        std = max((nz[1] * (math.sqrt(2.0) if nz[0] == "laplace" else 1.0) for nz in noise if nz), default=0.0)
        self.m = int(max(1, math.ceil(10.0 * std)))

    def claim(self) -> Claim:
        return Claim(
            self.eps_claim,
            self.delta,
            "(ε, δ)-DP",
            self.headline,
            note=f"the selection with ε₀ = {self.eps0:g} randomized-response runs and the certified score noise: "
            f"{self.theorem}",
        )

    def neighbours(self) -> str:
        return (
            f"ten records of value 0, and the same with one record of value 1; each run: a randomized-response bit "
            f"(ε₀ = {self.eps0:g}) about that record, scored as {self.m}·bit + the data's sum (private) with the "
            "certified noise"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        mech = self.ctx.mechanism
        p1 = 1.0 / (1.0 + math.exp(-self.eps0)) if world else 1.0 / (1.0 + math.exp(self.eps0))
        data = np.append(_BASE_DATA, 1.0) if world else _BASE_DATA
        ones = np.ones(self.m)

        def train_one(_i, _cand):
            return 1.0 if rng.random() < p1 else 0.0

        def score_fn(b):
            if not self.private:
                return self.m * b
            return np.concatenate([ones * b, data])

        out = np.empty((n, 3))
        for t in range(n):
            r = mech.simulate(train_one, score_fn, rng)
            out[t, 0] = r.model if r.model is not None else -1.0
            out[t, 1] = r.score if r.score is not None else 0.0
            out[t, 2] = r.runs_done if r.runs_done is not None else -1.0
        return out

    def statistics(self, x0, x1):
        m = float(self.m)
        out = {
            "best_bit": lambda x: x[:, 0],
            # the released score minus the best run's bit part: the data's sum plus noise
            "released_score": lambda x: x[:, 1] - m * np.maximum(x[:, 0], 0.0),
        }
        if np.any(x0[:, 2] >= 0) or np.any(x1[:, 2] >= 0):
            # with K released: "the best bit is 0 although there were k runs" is likelier on D₀ the larger k
            out["bit_given_runs"] = lambda x: np.where(x[:, 0] > 0.5, 1.0, -np.maximum(x[:, 2], 0.0))
        return out


@register_auditor("tune")
def _factory(ctx: AuditContext):
    return [TuneAudit(ctx)]


# --- mutants for the power check ------------------------------------------------------------------------------


def _clone(mech, cls, **attrs):
    """A copy of the compiled tuning ``mech`` as an instance of ``cls`` (its certified numbers and candidates
    shared; ``attrs`` set on it)."""
    out = object.__new__(cls)
    for k, v in mech.__dict__.items():
        object.__setattr__(out, k, v)
    for k, v in attrs.items():
        object.__setattr__(out, k, v)
    return out


def mutate(mechanism, kind: str, factor: float | None = None):
    """A broken copy of a compiled tuning (module docstring); None when ``kind`` does not apply to it."""
    from dpspec.tuning.runtime import Candidate, TunedTraining

    f = MUTATION_FACTORS.get(kind) if factor is None else float(factor)
    if f is None or not isinstance(mechanism, TunedTraining):
        return None
    if kind == "fixed_runs":
        if mechanism.runs.kind == "fixed":
            return None  # a fixed count is what is certified there

        class FixedRuns(TunedTraining):
            def _draw_runs(self, rng):
                return max(1, int(round(f * self.runs.mean())))

        return _clone(mechanism, FixedRuns)
    if kind == "ignores_k":

        class IgnoresK(TunedTraining):
            def _draw_runs(self, rng):
                return int(self.runs.sample(rng)) + max(1, int(round(f * self.runs.mean())))

        return _clone(mechanism, IgnoresK)
    if kind == "k_released":
        if mechanism.runs.kind == "fixed" or mechanism.stop_early:
            return None  # K is covered there

        class KReleased(TunedTraining):
            def _k_public(self):
                return True

        return _clone(mechanism, KReleased)
    if kind == "uncharged_score":
        if not mechanism.release_score or all(c.score_noise is None for c in mechanism.candidates):
            return None
        cands = tuple(
            Candidate(
                index=c.index,
                settings=c.settings,
                values=c.values,
                mechanism=c.mechanism,
                epsilon=c.epsilon,
                score_noise=None if c.score_noise is None else c.score_noise * f,
                score_two_sided_exponential=c.score_two_sided_exponential,
            )
            for c in mechanism.candidates
        )
        return _clone(mechanism, TunedTraining, candidates=cands)
    return None
