"""Compile a ``tune`` block: certify hyper-parameter tuning of a training as one procedure.

The procedure: draw K (the ``runs`` distribution, independent of the data); for each run draw one
candidate setting from the grid (independently of the data), train under it, score the result, and
output the best run (Papernot & Steinke 2022, "Hyperparameter tuning with Rényi differential
privacy", ICLR). Its guarantee, from the runs' certified RDP curves (``dpspec.accounting.selection``):

1. every candidate is compiled by its family's own compile function, as the named training with the
   candidate's settings, giving its certified RDP curve ρ_i(α);
2. a private score (a sum of per-record values in [0, 1], released with N(0, z_s²) noise) adds the
   Gaussian curve α Δ² / (2 z_s²), Δ = the group size (Mironov 2017 Prop 7; adaptive composition,
   Prop 1); z_s is the spec's ``score_noise``, or by default the smallest one whose curve is at most
   ``SCORE_SHARE`` (10 %) of the run's training curve at every order; a public score adds nothing and is
   stated as public;
3. one run is the mixture "draw a candidate, run it": its curve is the per-order maximum over the
   candidates (quasi-convexity of Rényi divergence, van Erven & Harremoës 2014 Thm 13);
4. best-of-K: Papernot & Steinke 2022 Thm 2 (truncated negative binomial K) or Thm 6 (Poisson K), or
   k-fold composition for a fixed count; then RDP → (ε, δ) (Balle et al. 2020 Thm 21);
5. for a random K and an (ε, δ) target, also the privacy-profile bound (``dpspec.accounting.selection_profile``)
   from one run's profile: the mixture over the candidates of their PLD profiles (DP-SGD: the training's PLD
   composed with the score's Gaussian), pointwise at most the profile of the RDP envelope; the certified ε is the
   smaller of the two bounds, and ``parameters.accountant`` says which.

Calibration: one noise multiplier z for every candidate (the smallest, to relative 1e-3, whose procedure
meets the target under either bound; the upper end of the final bracket), unless the noise is given (then
certified) or the training states its own per-run target (then each candidate is calibrated to it by its family and the
procedure is certified from those runs). The final certificate is computed from every candidate compiled
at the chosen noise; the search itself only shortens the work by compiling candidates that differ in
``learning_rate``/``momentum`` alone once, and the final result is re-evaluated in full.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpspec.certificate.model import (
    Assumption,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    Source,
    TargetCertificate,
)
from dpspec.compiler.common import (
    EXTRA_DELTAS,
    CompiledTarget,
    _fail,
    _grid_text,
    _notion,
    _protected,
    _rdp_at,
    _target,
    certified_epsilon,
)
from dpspec.ir import models as ir

if TYPE_CHECKING:
    from dpspec.check.framework import Context

#: the schedule settings a candidate may change (the others go to the family's settings model)
SCHEDULE_KEYS = ("learning_rate", "momentum", "epochs", "steps")
#: settings no training family's privacy accounting reads (only the calibration search uses this, to
#: compile fewer candidates; the certified result is computed from every candidate)
OPTIMISER_ONLY = ("learning_rate", "momentum")

CALIBRATION_REL_TOL = 1e-3
Z_RANGE = (0.3, 64.0)


def tuned_training(ctx: Context, tu: ir.Tuning) -> ir.Training | None:
    return next((t for t in ctx.spec.trainings if t.name == tu.train), None)


def grid(tu: ir.Tuning) -> list[tuple[Any, ...]]:
    """The candidates: the product of the tuned settings' values, in their listed order."""
    return list(itertools.product(*(c.values for c in tu.candidates)))


def value_text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.12g}"
    if isinstance(v, ir.Node):
        fields = {
            k: x
            for k, x in v.model_dump(exclude={"span", "field_spans"}).items()
            if x is not None and k not in ("rule", "scheme", "kind")
        }
        name = (
            getattr(v, "rule", None)
            or getattr(v, "scheme", None)
            or getattr(v, "kind", None)
            or ("appr" if isinstance(v, ir.Propagation) else type(v).__name__)  # the only propagation form
        )
        inner = ", ".join(f"{k} = {value_text(x)}" for k, x in fields.items())
        return f"{name}({inner})"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value_text(x) for x in v) + "]"
    return str(v)


def candidate_text(tu: ir.Tuning, combo: tuple[Any, ...]) -> str:
    return ", ".join(f"{c.key} = {value_text(v)}" for c, v in zip(tu.candidates, combo))


def apply_candidate(
    t: ir.Training,
    tu: ir.Tuning,
    combo: tuple[Any, ...],
    index: int,
    noise: float | None,
    g: ir.DpGuarantee | ir.RdpGuarantee | None,
) -> ir.Training:
    """The training ``t`` with candidate ``combo``'s settings, noise multiplier ``noise`` (None: as the
    candidate or training gives it) and guarantee ``g`` (None: the training's own)."""
    sched: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for c, v in zip(tu.candidates, combo):
        if c.key in SCHEDULE_KEYS:
            sched[c.key] = v
            if c.key == "epochs":
                sched["steps"] = None
            elif c.key == "steps":
                sched["epochs"] = None
        elif c.key == "noise_multiplier":
            own["noise"] = ir.GaussianNoise(noise_multiplier=float(v))
        else:
            own[c.key] = v
    if noise is not None:
        own["noise"] = ir.GaussianNoise(noise_multiplier=float(noise))
    upd: dict[str, Any] = {
        "name": f"{t.name}[{index}]",
        "execution": None,
        "schedule": t.schedule.model_copy(update=sched),
        "settings": t.settings.model_copy(update=own),
    }
    if g is not None:
        upd["guarantee"] = g
    return t.model_copy(update=upd)


def _compile_run(ctx: Context, tu: ir.Tuning, cand: ir.Training, data) -> CompiledTarget:
    out = _compile_any(ctx, tu, cand, data)
    g = out.certificate.guarantee
    if (out.rdp_alphas is None or out.rdp_values is None) and g.rdp_alphas and len(g.rdp_alphas) == len(g.rdp_epsilons):
        # the certified ε(α) curve the certificate records (upper bounds, the guarantee's own curve)
        out.rdp_alphas, out.rdp_values = np.asarray(g.rdp_alphas, float), np.asarray(g.rdp_epsilons, float)
    if out.rdp_alphas is None or out.rdp_values is None:
        _fail(
            "DPS952",
            f"the certificate of `{tu.train}` ({cand.mechanism}) has no RDP curve, so the selection "
            "bounds cannot use it",
            tu,
            "train",
            hint="tune a training certified by RDP (dpsgd, relational_dpsgd)",
        )
    return out


#: the default private score's share of a run's budget: its Gaussian RDP is at most this fraction of the
#: training's certified RDP at every order (the score noise is the smallest standard deviation that does so)
SCORE_SHARE = 0.1


def default_score_noise(out: CompiledTarget, group: int) -> float:
    """The smallest σ_s with α Δ² / (2 σ_s²) <= SCORE_SHARE · ρ(α) at every order where ρ(α) > 0."""
    a = np.asarray(out.rdp_alphas, float)
    rho = np.asarray(out.rdp_values, float)
    ok = np.isfinite(rho) & (rho > 0)
    if not np.any(ok):
        return float("inf")
    return float(np.max(np.sqrt(a[ok] * group * group / (2.0 * SCORE_SHARE * rho[ok])))) * (1 + 1e-12)


def _run_curve(out: CompiledTarget, score_z: float | None, group: int):
    """One run's certified curve: the training's, plus the private score's Gaussian release."""
    from dpspec.accounting.curve import RdpCurve

    a = np.asarray(out.rdp_alphas, float)
    rho = np.asarray(out.rdp_values, float)
    err = float(out.certificate.numerics.abs_error_bound)
    theorem = out.certificate.guarantee.theorems[0] if out.certificate.guarantee.theorems else out.certificate.name
    if score_z is not None:
        score = a * group * group / (2.0 * score_z * score_z)
        rho = (rho + score) * (1 + 4e-16)
        theorem += f"; + private score N(0, {score_z:.6g}²), sensitivity {group} (Mironov 2017 Prop 7, Prop 1)"
    return RdpCurve(
        alphas=a,
        rdp=rho,
        theorem=theorem,
        method=out.certificate.numerics.method,
        abs_error=err + 4e-16 * float(np.max(rho[np.isfinite(rho)], initial=0.0)),
    )


THEOREM_MIXTURE_PROFILE = (
    "one run draws its candidate: its privacy profile is the mixture Σ w_i δ_i of the candidates' (the candidate "
    "is part of the output), bounded pointwise by the candidates' PLD profiles and by their RDP envelope's"
)


def _deltas_of(g) -> tuple[float, ...]:
    """The δ at which a tuning certifies (the spec's and the extra reporting points)."""
    if not isinstance(g, ir.DpGuarantee):
        return ()
    return (float(g.delta), *(x for x in EXTRA_DELTAS if x != g.delta))


def _run_pld(out: CompiledTarget, score_z: float | None, group: int):
    """A candidate's run as a PLD: its training's certified PLD (the family's ``tune_pld`` hook) composed with
    its private score's Gaussian release (sensitivity the group size); None for a family without the hook."""
    from dpspec.accounting.pld import pld_compose, pld_gaussian
    from dpspec.families import FAMILIES
    from dpspec.families.hooks import load_hook

    fam = FAMILIES.get(out.certificate.mechanism.name)
    if fam is None or not fam.tune_pld:
        return None
    pld = load_hook(fam.tune_pld, "tune_pld")(out.mechanism)
    if pld is None:
        return None
    if score_z is not None:
        pld = pld_compose(pld, pld_gaussian(score_z, sensitivity=float(group), relation=pld.relation))
    return pld


def _pld_profile(out: CompiledTarget, score_z: float | None, group: int, floor: float, cache: dict):
    from dpspec.accounting.selection_profile import profile_from_pld

    pld = _run_pld(out, score_z, group)
    if pld is None:
        return None
    key = (
        tuple((st.kind, st.sigma, st.count, st.rate, st.shift, st.group_size) for st in pld.steps),
        pld.relation,
        floor,
    )
    if key not in cache:
        try:
            cache[key] = profile_from_pld(pld, delta_floor=floor)
        except (ValueError, OverflowError, ArithmeticError, MemoryError, RuntimeError):
            cache[key] = None
    return cache[key]


def _run_profile(outs, env_curve, score_zs, group: int, weights, runs, deltas, cache: dict):
    """One run's profile (see ``compile_tuning.run_profile``)."""
    from dpspec.accounting.selection_profile import Profile, profile_from_rdp

    floor = _profile_floor(deltas, runs)
    parts = [_pld_profile(o, z, group, floor, cache) for o, z in zip(outs, score_zs)]
    from_rdp = profile_from_rdp(env_curve)
    if any(p is None for p in parts):
        return from_rdp
    return Profile.minimum(Profile.mixture(parts, weights), from_rdp)


def _pld_key(out: CompiledTarget, score_z: float | None, group: int):
    """What identifies a candidate's run PLD (its steps and relation); None without one."""
    pld = _run_pld(out, score_z, group)
    if pld is None:
        return None
    return (tuple((st.kind, st.sigma, st.count, st.rate, st.shift, st.group_size) for st in pld.steps), pld.relation)


def _profile_floor(deltas, runs) -> float:
    """How far down a run's profile is evaluated: 1e-3 of the smallest certified δ over E[K]."""
    return max(1e-30, min(deltas, default=1e-6) * 1e-3 / max(1.0, runs.mean()))


def _profile_epsilon(
    out: CompiledTarget, score_z: float | None, group: int, delta: float, floor: float, cache
) -> float:
    """One candidate's run certified from its PLD profile at ``delta`` (inf without a PLD)."""
    prof = _pld_profile(out, score_z, group, floor, cache)
    return prof.epsilon(delta) if prof is not None else math.inf


def _has_rdp(t: ir.Training) -> bool:
    """Whether the training's family is certified by an RDP curve that composes (else: (ε, δ) only)."""
    from dpspec.families import family

    f = family(t.mechanism)
    return f is not None and f.composable and "rdp" in f.notions


THEOREM_BASIC = "basic composition (Dwork, Kenthapadi, McSherry, Mironov & Naor 2006; Dwork & Roth 2014 Thm 3.16)"


def _compile_dp_only(ctx, tu: ir.Tuning, t: ir.Training, protected, runs, combos, data, u) -> CompiledTarget:
    """A family certified in (ε, δ) only (no RDP curve).

    A fixed number k of runs, each (ε_r, δ_r)-DP, composes to (k ε_r, k δ_r) (basic composition); a run drawn from
    the candidates is (max ε_i, max δ_i)-DP (a mixture of the candidates' output distributions); selecting the best
    is post-processing. A random number of runs (Poisson, truncated negative binomial): every (ε_i, δ_i)-DP run is a
    post-processing of the (ε_i, δ_i) randomized-response pair (Kairouz, Oh & Viswanath 2015 Thm 2.4), so its
    privacy profile is at most that pair's; one run's profile is the candidates' mixture, and the privacy-profile
    bound for best-of-K (``dpspec.accounting.selection_profile``) certifies the procedure at the tuning's δ.

    The score is public (stated, not covered), or private: a sum of per-item values in [0, 1] that one unit
    changes by at most Δ (the group size for record and group units, the family's ``tune_score`` hook otherwise),
    released with Laplace noise of scale b; given the run's output it is (Δ/b, 0)-DP (Dwork, McSherry, Nissim &
    Smith 2006; Dwork & Roth 2014 Thm 3.6), and a run with its score is (ε_t + Δ/b, δ_t)-DP (adaptive
    composition, Dwork & Roth 2014 Thm 3.16 / B.1). (Laplace, not Gaussian: with a pure score every δ goes to the
    training, and at small ε its noise is smaller than the analytic Gaussian's: standard deviation 28 against 68
    for Δ = 2 at ε_s = 0.1, δ_s = 2.5e-6.)

    Calibration: the per-run share — (ε/k, δ/k) for k fixed runs (rounded down by a relative 1e-12); for a random
    count the (ε_r, δ_r) with the largest ε_r whose randomized-response profile meets the target through the
    bound, over δ_r ∈ δ/E[K] × {0.02, 0.05, 0.1, 0.2, 0.4} (:func:`_random_run_share`) — goes SCORE_SHARE of ε to
    the score and the rest, with all of δ_r, to the training, compiled by its family; with the training's own
    target the score gets SCORE_SHARE of that target's ε on top; a given ``score_noise`` (a standard deviation,
    √2 b) is certified at its ε = Δ/b. The procedure is then certified from the candidates' own certified
    (ε_i, δ_i)."""
    from dpspec.tuning.runtime import Candidate, TunedTraining

    g = tu.guarantee
    private = tu.select.on == "private"
    score = _score_bound(t, u) if private else None
    if (private and score is None) or not isinstance(g, ir.DpGuarantee):
        _fail(
            "DPS952",
            f"`{t.name}` ({t.mechanism}) is certified in (ε, δ) only: it is tuned under an (ε, δ) guarantee, with a "
            "public score or a private one its family bounds",
            tu,
            "guarantee" if not isinstance(g, ir.DpGuarantee) else "select",
            hint="write `guarantee dp(epsilon = 4, delta = 1e-5)` (and `select best(score = ..., on = public)` if "
            "the score's sensitivity is not known)",
        )
    assert isinstance(g, ir.DpGuarantee)
    random = runs.kind != "fixed"
    k = runs.count if not random else 0
    own_target = "guarantee" in t.field_spans
    share = SCORE_SHARE if private else 0.0
    sens = score[0] if score is not None else 0.0
    given_sigma = tu.select.score_noise if private else None
    score_eps = 0.0
    run_eps = 0.0  # the per-run ε share (training and score together), when calibrated
    if own_target:
        per_g = None
    else:
        if g.epsilon is None:
            _fail(
                "DPS954",
                f"neither `{tu.name}` nor `{t.name}` gives a target ε",
                tu,
                "guarantee",
                hint="give the whole procedure's target: `guarantee dp(epsilon = 4, delta = 1e-5)`",
            )
        if random:
            eps_r, delta_r = _random_run_share(runs, float(g.epsilon or 0.0), float(g.delta))
            if eps_r <= 0.0:
                _fail(
                    "DPS959",
                    f"no per-run (ε, δ) meets ε = {g.epsilon:g} for the whole tuning",
                    tu,
                    "guarantee",
                    hint="raise the target ε or δ, or make fewer runs",
                )
        else:
            eps_r, delta_r = float(g.epsilon or 0.0) / k * (1 - 1e-12), g.delta / k * (1 - 1e-12)
        run_eps = eps_r
        if given_sigma is not None:
            score_eps = _laplace_epsilon(sens, float(given_sigma) / math.sqrt(2.0))
            if not score_eps < eps_r:
                _fail(
                    "DPS959",
                    f"the score's noise {given_sigma:g} costs ε = {score_eps:.6g} per run, the whole run's share "
                    f"({eps_r:.6g}) or more",
                    tu.select,
                    "score_noise",
                    hint="give more score noise, make fewer runs, or leave `score_noise` out (10 % of each run)",
                )
            per_g = ir.DpGuarantee(epsilon=(eps_r - score_eps) * (1 - 1e-12), delta=delta_r)
        else:
            per_g = ir.DpGuarantee(epsilon=eps_r * (1 - share), delta=delta_r)
    finals = [
        _compile_any(ctx, tu, apply_candidate(t, tu, combo, i, None, per_g), data) for i, combo in enumerate(combos)
    ]
    train_per = [
        (
            float(
                o.certificate.guarantee.epsilon
                if o.certificate.guarantee.epsilon is not None
                else o.certificate.guarantee.dp[0].epsilon
            ),
            float(
                o.certificate.guarantee.delta
                if o.certificate.guarantee.delta is not None
                else o.certificate.guarantee.dp[0].delta
            ),
        )
        for o in finals
    ]
    # each candidate's score: (Laplace scale b, ε_s = Δ/b, δ_s = 0); SCORE_SHARE of the run's ε (or of the
    # training's own target), or the given noise
    scores: list[tuple[float, float, float] | None] = []
    for e_t, _d_t in train_per:
        if not private:
            scores.append(None)
            continue
        if given_sigma is not None:
            scale = float(given_sigma) / math.sqrt(2.0)
        elif own_target:
            scale = sens / (share * e_t) * (1 + 1e-12)
        elif random:
            scale = sens / (share * run_eps) * (1 + 1e-12)
        else:
            scale = sens / (share * float(g.epsilon or 0.0) / k) * (1 + 1e-12)
        scores.append((scale, _laplace_epsilon(sens, scale), 0.0))
    per = [(e + (sc[1] if sc else 0.0), d + (sc[2] if sc else 0.0)) for (e, d), sc in zip(train_per, scores)]
    eps_run, delta_run = max(e for e, _ in per), max(d for _, d in per)
    profile_theorem = None
    if random:
        from dpspec.accounting.selection_profile import Profile, profile_from_dp, profile_selection_epsilon

        prof = Profile.mixture([profile_from_dp([pt]) for pt in per], tu.weights)
        res = profile_selection_epsilon(
            prof, runs, float(g.delta), try_epsilons=() if g.epsilon is None else (float(g.epsilon),)
        )
        eps_total, delta_total = certified_epsilon(res.epsilon), float(g.delta)
        profile_theorem = res.theorem
        if not math.isfinite(eps_total):
            _fail(
                "DPS959",
                f"the runs' (ε, δ) = ({eps_run:.6g}, {delta_run:.3g}) give no finite ε at δ = {g.delta:g} for the "
                "whole tuning",
                tu,
                "guarantee",
                hint="give the runs a smaller δ, raise the tuning's δ, or make fewer runs",
            )
    else:
        eps_total = k * eps_run * (1 + 4e-16 * k)
        delta_total = k * delta_run
    if delta_total > g.delta * (1 + 1e-12):
        _fail(
            "DPS959",
            f"the runs' δ add up to {delta_total:.6g}, above the tuning's δ = {g.delta:g}",
            tu,
            "guarantee",
            hint=f"give the runs δ <= {g.delta / k:g} each, or make fewer runs",
        )
    if g.epsilon is not None and eps_total > g.epsilon:
        _fail(
            "DPS959",
            f"the whole tuning's certified ε = {eps_total:.6g} exceeds the target {g.epsilon:g}",
            tu,
            "guarantee",
            hint="raise the target ε or make fewer runs",
        )
    # early stopping: at most `cap` runs, certified by basic composition within the certified (ε, δ)
    if random:
        cap = int(min(eps_total / eps_run if eps_run > 0 else 10_000, g.delta / delta_run if delta_run > 0 else 10_000))
        cap = max(0, min(cap, 10_000))
        while cap > 0 and (cap * eps_run * (1 + 4e-16 * cap) > eps_total or cap * delta_run > g.delta):
            cap -= 1
    else:
        cap = k
    cap_eps = cap * eps_run * (1 + 4e-16 * cap) if cap else 0.0
    params: dict[str, Any] = {
        "training": t.name,
        "family": t.mechanism,
        "runs": runs.describe(),
        "runs_kind": runs.kind,
        "runs_mean": float(runs.mean()),
    }
    if runs.kind == "fixed":
        params["runs_count"] = k
    elif runs.kind == "poisson":
        params["runs_mu"] = runs.mu
    else:
        params.update({"runs_eta": runs.eta, "runs_gamma": runs.gamma})
    params.update(
        {
            "candidates": len(combos),
            "draw": "weighted" if tu.weights is not None else "uniform",
            "select": f"best({tu.select.score})",
            "score": tu.select.score,
            "score_on": tu.select.on,
            "release_score": tu.select.release_score,
            "stop_early": tu.stop_early,
            "per_run_epsilon": eps_run,
            "per_run_delta": delta_run,
            "price_of_tuning": (eps_total / eps_run if eps_run > 0 else 0.0) if random else float(k),
            "stop_early_max_runs": cap,
        }
    )
    if random:
        params["accountant"] = "profile"
    if private:
        params["score_sensitivity"] = sens
    for i, (combo, (e, d), (e_t, d_t), sc) in enumerate(zip(combos, per, train_per, scores)):
        params[f"candidate_{i}"] = candidate_text(tu, combo)
        params[f"candidate_{i}_epsilon"] = e
        params[f"candidate_{i}_delta"] = d
        if sc is not None:
            params[f"candidate_{i}_training_epsilon"] = e_t
            params[f"candidate_{i}_training_delta"] = d_t
            params[f"candidate_{i}_score_laplace_scale"] = sc[0]
            params[f"candidate_{i}_score_epsilon"] = sc[1]
        if tu.weights is not None:
            params[f"candidate_{i}_weight"] = float(tu.weights[i])
    score_text = (
        f"; private score: Laplace noise, sensitivity {sens:g}, (Δ/b, 0)-DP (Dwork & Roth 2014 Thm 3.6), "
        "composed with its run"
        if private
        else ""
    )
    if random:
        assert profile_theorem is not None
        head = [
            profile_theorem,
            f"each run: its (ε_i, δ_i) through {THEOREM_KOV_RUN}; mixture of the candidates{score_text}",
        ]
    else:
        head = [
            f"mixture of the candidates: (max ε_i, max δ_i)-DP; {THEOREM_BASIC}, {k} runs; selection is post-processing"
            + score_text
        ]
    guarantee = GuaranteeRecord(
        target=_target(g),
        dp=[DpPoint(epsilon=eps_total, delta=float(g.delta))],
        theorems=head + [finals[0].certificate.guarantee.theorems[0]]
        if finals[0].certificate.guarantee.theorems
        else head,
        epsilon=eps_total,
        delta=float(g.delta),
    )
    if random:
        method = (
            "privacy-profile bound for best-of-K from the runs' certified (ε, δ) (their randomized-response pairs' "
            "profiles, mixed over the candidates; dpspec.accounting.selection_profile)"
        )
        calibration = (
            None
            if own_target
            else f"each candidate calibrated by its family to (ε_r, δ_r) = ({run_eps:.6g}, {delta_r:.3g}), the share "
            "with the largest ε_r whose randomized-response profile meets the target"
        )
    else:
        method = "basic composition of the runs' certified (ε, δ)"
        calibration = (
            None
            if own_target
            else f"each candidate calibrated by its family to (ε/{k}, δ/{k}) (both rounded down by a relative 1e-12)"
        )
    if private and calibration is not None and given_sigma is None:
        calibration += f", of which a share {share:g} of ε goes to the score"
    record = TargetCertificate(
        name=tu.name,
        kind="train",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="tune",
            description=f"hyper-parameter tuning of `{t.name}` ({t.mechanism}): "
            f"{runs.describe() if random else k} runs, each with a candidate drawn from {len(combos)}, the best by "
            f"`{tu.select.score}` ({tu.select.on} score) output",
            parameters=params,
            calibrated=not own_target,
        ),
        guarantee=guarantee,
        assumptions=_assumptions(tu, private, sens, score[1] if score else None),
        formulas=_basic_formulas(k, eps_run, eps_total, sens, scores),
        numerics=Numerics(
            method=method + (" (each run's training and its noisy score, composed)" if private else ""),
            abs_error_bound=0.0,
            alpha_grid="none (the runs are certified in (ε, δ) only)",
            calibration=calibration,
        ),
        warnings=[]
        if private
        else [
            "the score is computed on public data: it is not covered by this certificate, and data that is "
            "not public makes the selection leak beyond it"
        ],
    )
    cands = [
        Candidate(
            index=i,
            settings=candidate_text(tu, combo),
            values={c.key: _plain(v) for c, v in zip(tu.candidates, combo)},
            mechanism=out.mechanism,
            epsilon=e,
            score_noise=sc[0] if sc is not None else None,
            score_two_sided_exponential=True,
        )
        for i, (combo, out, (e, _d), sc) in enumerate(zip(combos, finals, per, scores))
    ]
    mech = TunedTraining(
        name=tu.name,
        candidates=tuple(cands),
        weights=tu.weights,
        runs=runs,
        score=tu.select.score,
        score_on=tu.select.on,
        score_sensitivity=sens if private else 1.0,
        release_score=tu.select.release_score,
        epsilon=eps_total,
        delta=float(g.delta),
        alpha=None,
        stop_early=tu.stop_early,
        stop_early_max_runs=cap,
        points=((float(g.delta), eps_total),),
        stop_early_points=(cap_eps,),
        accountant="privacy-profile bound for best-of-K (docs/tuning.md)"
        if random
        else f"basic composition of {k} runs (Dwork & Roth 2014 Thm 3.16)",
    )
    return CompiledTarget(tu.name, "train", record, mech)


THEOREM_KOV_RUN = "the (ε_i, δ_i) randomized-response pair (Kairouz, Oh & Viswanath 2015 Thm 2.4)"
#: the per-run δ shares tried for a random number of runs, as fractions of δ / E[K]
RANDOM_DELTA_SHARES = (0.02, 0.05, 0.1, 0.2, 0.4)


def _random_run_share(runs, epsilon: float, delta: float) -> tuple[float, float]:
    """The per-run (ε_r, δ_r) for a random number of runs: for each δ_r of RANDOM_DELTA_SHARES × δ / E[K], the
    largest ε_r (bisection, relative 1e-4, the lower end kept) whose (ε_r, δ_r) randomized-response profile meets
    (``epsilon``, ``delta``) through the privacy-profile bound; the pair with the largest ε_r ((0, 0): none)."""
    from dpspec.accounting.selection_profile import profile_from_dp, profile_selection_delta

    best = (0.0, 0.0)
    mean = max(1.0, runs.mean())
    for f in RANDOM_DELTA_SHARES:
        d_r = f * delta / mean

        def ok(e: float, d_r: float = d_r) -> bool:
            return profile_selection_delta(profile_from_dp([(e, d_r)]), runs, epsilon) <= delta

        lo, hi = 0.0, epsilon
        if ok(hi):
            lo = hi
        else:
            while hi - lo > 1e-4 * hi:
                m = 0.5 * (lo + hi)
                lo, hi = (m, hi) if ok(m) else (lo, m)
        if lo > best[0]:
            best = (lo * (1 - 1e-9), d_r)
    return best


def _basic_formulas(k: int, eps_run: float, eps_total: float, sens: float, scores) -> list:
    """The basic composition of the k runs (k = 0: a random number of runs, no such formula) and each private
    score's Laplace ε, as closed forms ``verify`` re-evaluates with sympy from the recorded numbers."""
    from dpspec.compiler import formulas as F

    out = (
        [
            F.formula(
                "basic_composition_epsilon", F.BASIC_COMPOSITION, {"count": k, "epsilon_run": eps_run}, value=eps_total
            )
        ]
        if k > 0
        else []
    )
    first = next((sc for sc in scores if sc is not None), None)
    if first is not None:
        out.append(F.formula("pure_dp_epsilon", F.PURE_DP_EPSILON, {"Delta": sens, "b": first[0]}, value=first[1]))
    return out


def _laplace_epsilon(sensitivity: float, scale: float) -> float:
    """ε = Δ/b of the Laplace mechanism (Dwork & Roth 2014 Thm 3.6), rounded up by one part in 1e15."""
    return sensitivity / scale * (1 + 1e-15)


def _compile_any(ctx: Context, tu: ir.Tuning, cand: ir.Training, data) -> CompiledTarget:
    from dpspec.families import family, load

    fam = family(cand.mechanism)
    if fam is None or not fam.compile:
        _fail(
            "DPS952",
            f"`{tu.train}` cannot be compiled, so it cannot be tuned",
            tu,
            "train",
            hint="tune a training whose mechanism this build compiles",
        )
    assert fam is not None
    return load(fam.compile)(ctx, cand, data)


def _family_notions(t: ir.Training) -> tuple[str, ...]:
    from dpspec.families import family

    f = family(t.mechanism)
    return f.notions if f is not None else ()


def run_count(tu: ir.Tuning):
    from dpspec.accounting.selection import RunCount

    r = tu.runs
    if r.kind == "fixed":
        return RunCount.fixed(int(r.count or 0))
    if r.kind == "poisson":
        return RunCount.poisson(float(r.mean or 0.0))
    return RunCount.tnb(float(r.eta if r.eta is not None else 0.0), float(r.gamma or 0.0))


def _score_bound(t: ir.Training, u) -> tuple[float, str | None] | None:
    """A private score's sensitivity to one protected unit and, where the family states it, what the score may
    read: the group size for record and group units; the family's ``tune_score`` hook otherwise (None: unknown)."""
    if isinstance(u, (ir.RecordUnit, ir.GroupUnit)):
        return float(_group(u)), None
    from dpspec.tuning.rules import family_score

    return family_score(t)


def _group(u) -> int:
    return int(getattr(u, "size", None) or 1)


def compile_tuning(ctx: Context, tu: ir.Tuning, data) -> CompiledTarget:
    from dpspec.accounting import selection as S
    from dpspec.accounting.errors import SoundnessError

    t = tuned_training(ctx, tu)
    if t is None:
        _fail(
            "DPS951",
            f"`{tu.name}` tunes `{tu.train}`, which is not a training",
            tu,
            "train",
            hint="name a `train` block of this spec",
        )
    assert t is not None
    protected, _d, u = _protected(ctx, t)
    g = tu.guarantee
    if not isinstance(g, (ir.DpGuarantee, ir.RdpGuarantee)):
        _fail(
            "DPS952",
            "a tuning is certified in (ε, δ)-DP or Rényi DP",
            tu,
            "guarantee",
            hint="write `guarantee dp(epsilon = 8, delta = 1e-6)`",
        )
    runs = run_count(tu)
    combos = grid(tu)
    group = _group(u)
    if not _has_rdp(t):
        return _compile_dp_only(ctx, tu, t, protected, runs, combos, data, u)
    private_score = tu.select.on == "private"
    if private_score and not isinstance(u, (ir.RecordUnit, ir.GroupUnit)):
        _fail(
            "DPS956",
            "a private score's sensitivity is not known for this unit",
            tu.select,
            "on",
            hint=f"score on public data: `select best(score = {tu.select.score}, on = public)`",
        )
    own_target = "guarantee" in t.field_spans  # the training states a per-run target
    tuned_noise = any(c.key == "noise_multiplier" for c in tu.candidates)
    noise_given = tuned_noise or getattr(t.settings, "noise", None) is not None
    calibrate = not own_target and not noise_given
    # the runs' target while searching and for the final curves: an RDP target without ε (only the curve is
    # needed, and a family's (ε, δ) accountants, such as PLD, are skipped); a family whose compile function
    # takes (ε, δ) targets only gets `dp(delta = δ)` instead (the curve it certifies is the same bound)
    rdp_g = ir.RdpGuarantee(alpha=2.0)
    dp_g = ir.DpGuarantee(delta=g.delta if isinstance(g, ir.DpGuarantee) else 1e-6)
    target_of = {"g": rdp_g if "rdp" in _family_notions(t) else dp_g}

    def compile_run(cand_of) -> CompiledTarget:
        from dpspec.compiler.errors import CompileError

        if target_of["g"] is rdp_g:
            try:
                return _compile_run(ctx, tu, cand_of(rdp_g), data)
            except CompileError:
                raise
            except (AttributeError, TypeError):  # the family's compile reads a δ: it takes (ε, δ) targets
                target_of["g"] = dp_g
        return _compile_run(ctx, tu, cand_of(target_of["g"]), data)

    def procedure(curve):
        if isinstance(g, ir.DpGuarantee):
            return S.selection_dp(curve, runs, g.delta)
        sel = S.selection_curve(curve, runs)
        return _rdp_at(sel.alphas, sel.rdp, g.alpha)

    profile_cache: dict = {}

    def run_profile(outs: list[CompiledTarget], env_curve):
        """One run's certified privacy profile: the mixture over the candidates (with the draw's weights) of each
        candidate's PLD profile (its training composed with its private score's Gaussian), where every candidate
        has a PLD; its pointwise minimum with the profile of the candidates' RDP envelope."""
        return _run_profile(
            outs, env_curve, [score_z(o) for o in outs], group, tu.weights, runs, _deltas_of(g), profile_cache
        )

    def score_z(out: CompiledTarget) -> float | None:
        """The private score's noise (standard deviation on the sum): as given, or the default share."""
        if not private_score:
            return None
        if tu.select.score_noise is not None:
            return float(tu.select.score_noise)
        zs = default_score_noise(out, group)
        if not math.isfinite(zs):
            _fail(
                "DPS956",
                "the score's noise cannot be derived from the runs' curves: give it",
                tu,
                "select",
                hint="write `select best(score = accuracy, score_noise = 50)`, or `on = public`",
            )
        return zs

    z: float | None = None
    cal = None
    try:
        if calibrate:
            if g.epsilon is None:
                _fail(
                    "DPS954",
                    "neither the tuning nor the training gives a target ε, and no noise is given",
                    tu,
                    "guarantee",
                    hint="give the whole procedure's ε: `guarantee dp(epsilon = 8, delta = 1e-6)`",
                )
            cache: dict[str, CompiledTarget] = {}

            def runs_at(zz: float) -> list[CompiledTarget]:
                outs = []
                for i, combo in enumerate(combos):
                    key_combo = tuple(None if c.key in OPTIMISER_ONLY else v for c, v in zip(tu.candidates, combo))
                    key = f"{zz!r}|{key_combo!r}"
                    if key not in cache:
                        cache[key] = compile_run(lambda gg, c=combo, j=i: apply_candidate(t, tu, c, j, zz, gg))
                    outs.append(cache[key])
                return outs

            def meets(zz: float) -> bool:
                outs = runs_at(zz)
                env_z = S.candidate_envelope([_run_curve(o, score_z(o), group) for o in outs])
                res = procedure(env_z)
                eps = res.epsilon if isinstance(res, S.SelectionResult) else res
                if eps <= float(g.epsilon or 0.0):
                    return True
                if not isinstance(g, ir.DpGuarantee) or runs.kind == "fixed":
                    return False
                # the privacy-profile bound at the target ε (one evaluation, no bisection)
                from dpspec.accounting.selection_profile import profile_selection_delta

                prof = run_profile(outs, env_z)
                return profile_selection_delta(prof, runs, float(g.epsilon or 0.0)) <= g.delta

            lo, hi = Z_RANGE
            if not meets(hi):
                _fail(
                    "DPS959",
                    f"no noise multiplier up to {hi:g} meets ε = {g.epsilon:g} for the whole tuning",
                    tu,
                    "guarantee",
                    hint="raise the target ε, make fewer runs, or train for fewer steps",
                )
            if meets(lo):
                z = lo
            else:
                a, b = lo, hi
                while b - a > CALIBRATION_REL_TOL * b:
                    m = math.sqrt(a * b)
                    a, b = (a, m) if meets(m) else (m, b)
                z = b
            cal = (
                f"bisection on one noise multiplier z for every candidate, in [{lo:g}, {hi:g}], for the smallest z "
                f"(relative {CALIBRATION_REL_TOL:g}) whose whole-procedure ε meets the target; the upper end of the "
                "final bracket is used and the certificate is recomputed there from every candidate"
            )
        # every candidate, compiled at the chosen noise for its certified curve (an RDP target without ε: the
        # curve is what the selection bounds take; the family's (ε, δ) accountants are not needed)
        finals = [
            _compile_run(ctx, tu, apply_candidate(t, tu, combo, i, z, None), data)
            if own_target
            else compile_run(lambda gg, c=combo, j=i: apply_candidate(t, tu, c, j, z, gg))
            for i, combo in enumerate(combos)
        ]
    except SoundnessError as err:
        _fail(err.rule, err.message, tu, "train", hint=err.hint or "")
    curves = [_run_curve(out, score_z(out), group) for out in finals]
    env = S.candidate_envelope(curves)
    alphas = env.alphas
    points: list[DpPoint] = []
    profile = None
    by_acc: dict[str, float] = {}
    accountant = "rdp"
    if isinstance(g, ir.DpGuarantee):
        if runs.kind != "fixed":
            profile = run_profile(finals, env)
        target_eps = () if g.epsilon is None else (float(g.epsilon),)
        main = S.selection_dp(env, runs, g.delta, profile=profile, try_epsilons=target_eps)
        sel_curve = main.curve
        theorem = main.theorem
        accountant = main.accountant
        by_acc = dict(main.by_accountant)
        points.append(DpPoint(epsilon=certified_epsilon(main.epsilon, procedure_error(env, runs)), delta=g.delta))
        for dl in [x for x in EXTRA_DELTAS if x != g.delta]:
            r = S.selection_dp(env, runs, dl, profile=profile)
            points.append(DpPoint(epsilon=certified_epsilon(r.epsilon, procedure_error(env, runs)), delta=dl))
        certified = points[0].epsilon
        best_alpha = main.best_alpha if accountant == "rdp" else None
        if g.epsilon is not None and certified > g.epsilon:
            _fail(
                "DPS959",
                f"the whole tuning's certified ε = {certified:.6g} exceeds the target {g.epsilon:g}",
                tu,
                "guarantee",
                hint="raise the target ε, give more noise, or make fewer runs",
            )
    else:
        sel_curve = S.selection_curve(env, runs)
        theorem = sel_curve.theorem.split(", over")[0]
        certified = _rdp_at(sel_curve.alphas, sel_curve.rdp, g.alpha)
        best_alpha = None
        if g.epsilon is not None and certified > g.epsilon:
            _fail(
                "DPS959",
                f"the whole tuning's certified ε(α) = {certified:.6g} exceeds the target {g.epsilon:g}",
                tu,
                "guarantee",
                hint="raise the target ε, give more noise, or make fewer runs",
            )
    assert sel_curve is not None
    per_run = [_run_epsilon(c, g) for c in curves]  # each run's own guarantee, its score included
    params: dict[str, Any] = {
        "training": t.name,
        "family": t.mechanism,
        "runs": runs.describe(),
        "runs_kind": runs.kind,
        "runs_mean": float(runs.mean()),
        "candidates": len(combos),
        "draw": "weighted" if tu.weights is not None else "uniform",
        "select": f"best({tu.select.score})",
        "score": tu.select.score,
        "score_on": tu.select.on,
        "release_score": tu.select.release_score,
        "stop_early": tu.stop_early,
    }
    if runs.kind == "fixed":
        params["runs_count"] = runs.count
    elif runs.kind == "poisson":
        params["runs_mu"] = runs.mu
    else:
        params.update({"runs_eta": runs.eta, "runs_gamma": runs.gamma})
    if z is not None:
        params["noise_multiplier"] = z
    if private_score:
        params["score_sensitivity"] = group
    per_delta = g.delta if isinstance(g, ir.DpGuarantee) else None
    if per_delta is not None:
        params["per_run_delta"] = per_delta
    if isinstance(g, ir.DpGuarantee) and profile is not None:
        # one run's own certified ε: the minimum of its RDP conversion and its profile's (the mixture's profile is
        # a bound for every candidate's run only on average, so each candidate's is taken: the largest)
        per_run = [
            min(e, _profile_epsilon(o, score_z(o), group, g.delta, _profile_floor(_deltas_of(g), runs), profile_cache))
            for e, o in zip(per_run, finals)
        ]
    params["per_run_epsilon"] = max(per_run)
    params["price_of_tuning"] = certified / max(per_run) if max(per_run) > 0 else 0.0
    if isinstance(g, ir.DpGuarantee):
        params["accountant"] = accountant
        params["epsilon_rdp_bound"] = by_acc.get("rdp", math.inf)
        if "profile" in by_acc:
            params["epsilon_profile_bound"] = by_acc["profile"]
    for i, (combo, out, e) in enumerate(zip(combos, finals, per_run)):
        params[f"candidate_{i}"] = candidate_text(tu, combo)
        params[f"candidate_{i}_epsilon"] = e
        if private_score:
            params[f"candidate_{i}_training_epsilon"] = _run_epsilon(_run_curve(out, None, group), g)
        nm = out.certificate.mechanism.parameters.get("noise_multiplier")
        if isinstance(nm, (int, float)) and not isinstance(nm, bool):
            params[f"candidate_{i}_noise_multiplier"] = float(nm)
        st = out.certificate.mechanism.parameters.get("steps")
        if isinstance(st, int) and not isinstance(st, bool):
            params[f"candidate_{i}_steps"] = st
        if private_score:
            params[f"candidate_{i}_score_noise"] = score_z(out)
        if tu.weights is not None:
            params[f"candidate_{i}_weight"] = float(tu.weights[i])
    steps = [v for k, v in params.items() if k.endswith("_steps") and isinstance(v, int)]
    if steps:
        params["steps"] = max(steps)  # of one run (the longest candidate)
    cert_points: list[tuple[float | None, float]] = (
        [(pt.delta, pt.epsilon) for pt in points] if isinstance(g, ir.DpGuarantee) else [(None, certified)]
    )
    common = None
    if tu.stop_early and isinstance(g, ir.DpGuarantee):
        keys = {_pld_key(o, score_z(o), group) for o in finals}
        if len(keys) == 1 and None not in keys:
            common = _run_pld(finals[0], score_z(finals[0]), group)
    stop_runs, stop_eps_all = _early_stop_cap(env, cert_points, g, common)
    stop_eps = stop_eps_all[0]
    params["stop_early_max_runs"] = stop_runs
    warnings = []
    if tu.select.on == "public":
        warnings.append(
            "the score is computed on public data: it is not covered by this certificate, and data "
            "that is not public makes the selection leak beyond it"
        )
    if tu.stop_early:
        warnings.append(
            f"stopping early: a run that stops early is certified by the composition of at most "
            f"{stop_runs} runs (ε = {stop_eps:.6g}), not by the random-count theorem; the runtime caps "
            f"it at {stop_runs} runs"
        )
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=list(map(float, alphas)),
        rdp_epsilons=list(map(float, sel_curve.rdp)),
        dp=points,
        best_alpha=best_alpha,
        theorems=(
            [S.THEOREM_ENVELOPE, theorem]
            if accountant != "profile"
            else [
                theorem,
                THEOREM_MIXTURE_PROFILE,
                f"also evaluated: {S.THEOREM_POISSON if runs.kind == 'poisson' else S.THEOREM_TNB}",
            ]
        )
        + [out.certificate.guarantee.theorems[0] for out in finals[:1]],
    )
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": certified, "delta": g.delta})
    else:
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": certified})
    rdp_alpha, rdp_value = best_alpha, points[0].epsilon if points else None
    if isinstance(g, ir.DpGuarantee) and accountant != "rdp":
        # the RDP bound's own order and value: its formulas are checked at what it gives, not at the certified ε
        rdp_res = S.selection_dp(env, runs, g.delta)
        rdp_alpha, rdp_value = rdp_res.best_alpha, rdp_res.epsilon
    formulas = _selection_formulas(env, sel_curve, runs, g, rdp_alpha, rdp_value)
    record = TargetCertificate(
        name=tu.name,
        kind="train",
        protected=protected,
        notion=_notion(g),
        formulas=formulas,
        mechanism=MechanismRecord(
            name="tune",
            description=f"hyper-parameter tuning of `{t.name}` ({t.mechanism}): {runs.describe()} runs, each with a "
            f"candidate drawn {'with the stated weights' if tu.weights is not None else 'uniformly'} "
            f"from {len(combos)}, the best by `{tu.select.score}` output",
            parameters=params,
            calibrated=calibrate,
        ),
        guarantee=guarantee,
        assumptions=_assumptions(tu, private_score, group),
        numerics=Numerics(
            method="per-run curves from the family's certificate; envelope; selection bound per order"
            + (
                "; privacy-profile bound from the runs' profiles (dpspec.accounting.selection_profile): "
                f"certified ε = min over the bounds, here {accountant}"
                if profile is not None
                else ""
            ),
            abs_error_bound=procedure_error(env, runs),
            alpha_grid=_grid_text(np.asarray(alphas)),
            conversion="Balle et al. 2020 Thm 21" if isinstance(g, ir.DpGuarantee) else None,
            calibration=cal,
        ),
        warnings=warnings,
    )
    from dpspec.tuning.runtime import Candidate, TunedTraining

    cands = [
        Candidate(
            index=i,
            settings=candidate_text(tu, combo),
            values={c.key: _plain(v) for c, v in zip(tu.candidates, combo)},
            mechanism=out.mechanism,
            epsilon=e,
            score_noise=score_z(out),
        )
        for i, (combo, out, e) in enumerate(zip(combos, finals, per_run))
    ]
    mech = TunedTraining(
        name=tu.name,
        candidates=tuple(cands),
        weights=tu.weights,
        runs=runs,
        score=tu.select.score,
        score_on=tu.select.on,
        score_sensitivity=float(group),
        release_score=tu.select.release_score,
        epsilon=certified,
        delta=g.delta if isinstance(g, ir.DpGuarantee) else None,
        alpha=None if isinstance(g, ir.DpGuarantee) else g.alpha,
        stop_early=tu.stop_early,
        stop_early_max_runs=stop_runs,
        points=tuple(cert_points),
        stop_early_points=tuple(stop_eps_all),
    )
    return CompiledTarget(tu.name, "train", record, mech, np.asarray(alphas), np.asarray(sel_curve.rdp))


def _selection_formulas(env, sel_curve, runs, g, best_alpha, rdp_value) -> list:
    """The selection bound at the order the conversion used (or the guarantee's α), and the conversion, as
    closed forms ``verify`` re-evaluates with sympy from the recorded numbers."""
    from dpspec.accounting.selection import delta_at, poisson_eps_hat, selection_curve, tnb_hat, tnb_log_mean
    from dpspec.compiler import formulas as F

    lam_used = float(best_alpha) if best_alpha is not None else float(getattr(g, "alpha", 0.0) or 0.0)
    alphas = [float(a) for a in env.alphas]
    if lam_used not in alphas:
        return []
    i = alphas.index(lam_used)
    # the curve's value at λ is the theorem's bound at the order λ° >= λ where it is smallest
    raw = selection_curve(env, runs, monotone=False).rdp
    j = i + int(np.argmin(raw[i:]))
    lam = alphas[j]
    rho, out_v = float(env.rdp[j]), float(raw[j])
    if not (math.isfinite(rho) and math.isfinite(out_v)):
        return []
    out = []
    if runs.kind == "fixed":
        out.append(F.formula("selection_fixed", F.SELECTION_FIXED, {"count": runs.count, "rdp": rho}, value=out_v))
    elif runs.kind == "poisson":
        d_hat = float(delta_at(env, poisson_eps_hat(np.array([lam])))[0])
        out.append(
            F.formula(
                "selection_poisson",
                F.SELECTION_POISSON,
                {"rdp": rho, "mu": runs.mu, "delta_hat": d_hat, "alpha": lam},
                value=out_v,
            )
        )
    else:
        a_hat, r_hat = tnb_hat(env, runs.eta, runs.gamma)
        mean = math.exp(tnb_log_mean(runs.eta, runs.gamma))
        if runs.eta == 0.0:
            out.append(
                F.formula(
                    "tnb_mean_logarithmic", F.TNB_MEAN_LOGARITHMIC, {"gam": runs.gamma}, value=mean, check="close"
                )
            )
        else:
            out.append(
                F.formula("tnb_mean", F.TNB_MEAN, {"eta": runs.eta, "gam": runs.gamma}, value=mean, check="close")
            )
        out.append(
            F.formula(
                "selection_tnb",
                F.SELECTION_TNB,
                {
                    "rdp": rho,
                    "eta": runs.eta,
                    "alpha_hat": a_hat,
                    "rdp_hat": r_hat,
                    "gam": runs.gamma,
                    "mean": mean,
                    "alpha": lam,
                },
                value=out_v,
            )
        )
    if isinstance(g, ir.DpGuarantee) and rdp_value is not None and rdp_value > 0:
        out.append(
            F.formula(
                "rdp_to_dp",
                F.BALLE_CONVERSION,
                {"rdp": float(sel_curve.rdp[i]), "alpha": lam_used, "delta": g.delta},
                value=rdp_value,
            )
        )
    return out


def procedure_error(env, runs) -> float:
    """How far the procedure's ε can move when the run curve ``env`` is off by up to its error bound e at every
    order. Truncated negative binomial: (2 + η) e; k fixed runs: k e (:func:`_slope`). Poisson: the bound
    ρ(λ) + μ δ̂(λ) + log μ/(λ-1) moves by e + μ (δ̂ of the curve + e − δ̂ of the curve), δ̂ being monotone in the
    curve; evaluated at every order (not a fixed slope: δ̂ moves by a factor up to e^{(α-1) e} at the order α
    attaining it, and μ δ̂ (α − 1) can exceed 1 — 3 for the issue's spec, whose stated error was 2 e)."""
    e = float(env.abs_error)
    if runs.kind != "poisson" or not (e > 0 and math.isfinite(e)):
        return float(e * _slope(runs))
    from dpspec.accounting.curve import RdpCurve
    from dpspec.accounting.selection import delta_at, poisson_eps_hat

    eh = poisson_eps_hat(env.alphas)
    up = RdpCurve(alphas=env.alphas, rdp=env.rdp + e, theorem="", method="", abs_error=0.0)
    dd = np.nan_to_num(delta_at(up, eh) - delta_at(env, eh), nan=1.0, posinf=1.0)
    return float((e + runs.mu * float(np.max(dd, initial=0.0))) * (1 + 1e-9))


def _slope(runs) -> float:
    """How much the procedure's ε can move per unit of error in the runs' curves (the bounds' slope in ρ):
    1 + (1 + η) for the truncated negative binomial, 1 (+ the δ̂ term, bounded in the curve) for Poisson,
    k for k fixed runs."""
    if runs.kind == "fixed":
        return float(runs.count)
    if runs.kind == "poisson":
        return 2.0
    return 2.0 + runs.eta


def _run_epsilon(curve, g) -> float:
    """One run's certified ε (training and private score) at the tuning's δ, or ε(α)."""
    from dpspec.accounting.selection import RunCount, selection_dp

    if isinstance(g, ir.DpGuarantee):
        return certified_epsilon(selection_dp(curve, RunCount.fixed(1), g.delta).epsilon, curve.abs_error)
    return _rdp_at(curve.alphas, curve.rdp, g.alpha)


def _early_stop_cap(env, certified: list[tuple[float | None, float]], g, run_pld=None) -> tuple[int, list[float]]:
    """The largest T <= 10 000 whose T-run composition (valid for any stopping rule within T runs) is within the
    certified ε at every certified point (δ, ε) (or at α), and that composition's ε at each point (0 runs, ε = 0,
    when even one run exceeds it). The composition's ε is RDP's (Mironov 2017 Prop 1), or, where every candidate's
    run has the same PLD ``run_pld``, the smaller of that and the T-fold PLD composition's (the profile of
    :func:`dpspec.accounting.selection_profile.profile_from_pld`, at each δ)."""
    from dpspec.accounting.selection import RunCount, selection_curve, selection_dp

    def eps(k: int) -> list[float]:
        if isinstance(g, ir.DpGuarantee):
            out = [selection_dp(env, RunCount.fixed(k), g.delta if d is None else d).epsilon for d, _ in certified]
            if run_pld is not None:
                from dpspec.accounting.pld import Pld, PldStep
                from dpspec.accounting.selection_profile import profile_from_pld

                steps = tuple(
                    PldStep(st.kind, st.sigma, st.count * k, st.rate, st.shift, st.group_size) for st in run_pld.steps
                )
                floor = min(g.delta if d is None else d for d, _ in certified) * 1e-2
                prof = profile_from_pld(Pld(steps=steps, relation=run_pld.relation), delta_floor=floor)
                out = [min(e, prof.epsilon(g.delta if d is None else d)) for e, (d, _) in zip(out, certified)]
            return out
        sel = selection_curve(env, RunCount.fixed(k))
        return [_rdp_at(sel.alphas, sel.rdp, g.alpha)]

    def fits(k: int) -> bool:
        return all(e <= c for e, (_, c) in zip(eps(k), certified))

    lo, hi = 0, 1
    while hi <= 10_000 and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, 10_001)
    while hi - lo > 1:
        m = (lo + hi) // 2
        lo, hi = (m, hi) if fits(m) else (lo, m)
    return lo, (eps(lo) if lo > 0 else [0.0] * len(certified))


def _plain(v: Any) -> Any:
    if isinstance(v, ir.Node):
        return value_text(v)
    return v


def _assumptions(tu: ir.Tuning, private_score: bool, group: float, reads: str | None = None) -> list[Assumption]:
    ps = Source(paper="Papernot & Steinke 2022", ref="Thms 2, 6")
    out = [
        Assumption(
            id="runs_independent_of_data",
            statement="the number of runs K and every run's candidate are "
            "drawn by the procedure's own generator, independently of the data and of earlier runs' results",
            source=ps,
        ),
        Assumption(
            id="fresh_randomness",
            statement="each run uses fresh randomness and is run under its own "
            "certificate entry (its compiled mechanism and ledger)",
            source=ps,
        ),
        Assumption(
            id="only_the_best",
            statement="only the selected run (its model, its settings"
            + (", its noisy score" if tu.select.release_score else "")
            + ") is output; the other runs' "
            "models and scores are discarded"
            + (
                ""
                if tu.runs.kind == "fixed" or tu.stop_early
                else "; the number of runs K is not released (not by the runtime, nor by the caller's training and "
                "scoring code, its logs or its running time): the random-count bound covers the best run without K"
            ),
            source=ps,
        ),
        Assumption(
            id="candidate_mixture",
            statement="one run is the mixture over the candidates; its Rényi "
            "divergence is at most the largest candidate's (quasi-convexity)",
            source=Source(paper="van Erven & Harremoës 2014", ref="Thm 13"),
        ),
    ]
    if private_score:
        out.append(
            Assumption(
                id="private_score",
                statement=(
                    "the score is a sum of per-record values clipped to "
                    f"[0, 1] (one unit changes it by at most {group:g}), released with Gaussian noise of the "
                    "recorded standard deviation; ties and comparisons use the noisy score only"
                    if reads is None
                    else f"the score is a sum of per-item values clipped to [0, 1]; {reads}; it is released with "
                    "Laplace noise of the recorded scale; ties and comparisons use the noisy score only"
                ),
                source=Source(paper="Mironov 2017", ref="Prop. 7")
                if reads is None
                else Source(paper="Dwork & Roth 2014", ref="Thm 3.6"),
            )
        )
    else:
        out.append(
            Assumption(
                id="public_score",
                statement="the score is computed on public data only: not covered by this certificate",
                source=ps,
            )
        )
    return out
