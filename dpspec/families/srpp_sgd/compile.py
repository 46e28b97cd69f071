"""Compile a `train` block with `mechanism srpp_sgd` (Zhang & Vorobeychik, SRPP-SGD, §5).

The spec gives the plan the accountant depends on — sampling, clipping, optimizer and schedule, the
noise units — and a discrepancy model (how many records the secret can change, App. D). The compiler
builds a :class:`dpspec.srpp.SrppSgdPlan`, computes the History-Uniform Caps

    h_t = (2 L_t C κ)²                (HUC, Prop 5.1, eq. 15)
    h_t = (2 L_t C)² κ̄²              (sa-HUC, Prop 5.2, eq. 17)

and calibrates σ² = α H_total / (2 ε) (Thms 5.6 / 5.7; H_total = Σ_t h_t for Ave and Joint with
slice-independent caps). The sa notion is certified as an on-average notion and never as SRPP
(§3.3). Noise units (digest §8.9): σ is the std of the noise on the *mean clipped gradient* for
``noise_units gradient`` (L ≡ 1); for ``noise_units parameter`` σ is parameter-space and the runtime
adds σ / L_t to the gradient, so the fresh parameter-space noise per step is exactly σ. The
certificate states the injected gradient-noise std the runtime uses; the runtime refuses a plan
that does not match it (DPS508).
"""

from __future__ import annotations

import math

import numpy as np

from dpspec.certificate.model import (
    Assumption,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    Source,
    TargetCertificate,
)
from dpspec.compiler.common import CompiledTarget, _protected
from dpspec.compiler.errors import fail as _fail
from dpspec.families.srpp_sgd.settings import SrppSgdSettings
from dpspec.ir import models as ir

#: which spec field a soundness rule points at
_RULE_FIELD = {
    "DPS501": "sampling",
    "DPS502": "sampling",
    "DPS503": "clipping",
    "DPS505": "accountant",
    "DPS506": "discrepancy",
    "DPS507": "discrepancy",
    "DPS508": "noise_units",
    "DPS509": "momentum",
    "DPS510": "steps",
}


def _sampling(t: ir.Training, n: int):
    st = t.settings_as(SrppSgdSettings)
    from dpspec.srpp import Sampling

    s = st.sampling
    if isinstance(s, ir.PoissonSampling):
        if s.rate is not None:
            rate = s.rate
        else:
            assert s.expected_batch is not None  # a rate or an expected batch (DPS113)
            rate = s.expected_batch / n
        return Sampling("poisson", n, rate=rate, normalization="expected")
    if isinstance(s, ir.WithoutReplacementSampling):
        return Sampling("wor", n, batch_size=s.batch_size)
    if isinstance(s, ir.WithReplacementSampling):
        return Sampling("wr", n, batch_size=s.batch_size)
    if isinstance(s, ir.FullBatch):
        return Sampling("wor", n, batch_size=n)
    assert s is not None  # (a training says how it samples, DPS511)
    _fail(
        "DPS125",
        f"sampling `{s.scheme}` is not covered by the SRPP-SGD accountants",
        t,
        "sampling",
        hint="use poisson(...), without_replacement(...) or full_batch",
    )


def _steps(t: ir.Training, sampling) -> int:
    if t.schedule.steps is not None:
        return int(t.schedule.steps)
    per_epoch = sampling.dataset_size / max(1.0, sampling.normalizer or sampling.dataset_size * sampling.rate)
    assert t.schedule.epochs is not None  # steps or epochs (DPS511)
    return max(1, math.ceil(t.schedule.epochs * per_epoch))


def _discrepancy(t: ir.Training, n: int):
    st = t.settings_as(SrppSgdSettings)
    from dpspec import srpp

    d = st.discrepancy
    assert d is not None  # (DPS511)
    # each model's own number is a required argument of its call (lowering)
    if d.kind == "localized":
        assert d.d_max is not None
        return srpp.LocalizedInfluence(d.d_max)
    if d.kind == "label_flip":
        assert d.differing is not None
        return srpp.FixedPairWorlds(n, d.differing)
    if d.kind == "iid":
        assert d.tv is not None
        return srpp.IIDRecords(d.tv, tail_delta=d.tail_delta)
    assert d.flip is not None
    flip = float(d.flip)
    from dpspec import limits

    # M simulated couplings of N records each, plus a Python step per draw (worth ~10^4 elements)
    limits.require_work(f"the Monte-Carlo discrepancy ({d.draws:,} draws × {n:,} records)", d.draws, n + 10_000)

    def coupler(rng):  # record-wise independent mismatches between the coupled worlds
        return rng.random(n) < flip

    return srpp.MonteCarloDiscrepancy([coupler], M=d.draws, gamma=d.gamma, tail_delta=d.tail_delta, seed=d.seed)


def build_plan(t: ir.Training, n: int):
    """(plan, discrepancy model, accountant) for a checked `srpp_sgd` training."""
    st = t.settings_as(SrppSgdSettings)
    from dpspec import srpp

    sampling = _sampling(t, n)
    steps = _steps(t, sampling)
    sch = st.lr_schedule or ir.LrScheduleSpec(kind="constant")
    assert t.schedule.learning_rate is not None  # (DPS511)
    lr = srpp.LrSchedule(t.schedule.learning_rate, steps, sch.kind, warmup_frac=sch.warmup, final_lr=sch.final)
    opt = srpp.OptimizerSpec(lr, momentum=t.schedule.momentum or 0.0)
    c = st.clipping
    assert c is not None  # (DPS511)
    if isinstance(c, ir.FlatClipping):
        clip, per_layer_clips = c.C, None
    elif isinstance(c, ir.PerLayerClipping):
        clip, per_layer_clips = None, tuple(c.C)
    else:  # relational DP-SGD's clipping rules (refused here as an invalid plan, DPS513)
        raise ValueError(f"SRPP-SGD clips each example's gradient: use flat(C) or per_layer(C), not {c.rule}")
    plan = srpp.SrppSgdPlan(
        sampling=sampling,
        optimizer=opt,
        noise_units=st.noise_units or "gradient",
        clip=clip,
        per_layer_clips=per_layer_clips,
    )
    g = t.guarantee
    assert isinstance(g, ir.SrppGuarantee)  # the family's notion (DPS121)
    accountant = st.accountant or ("sa_huc" if g.subsampling_aware else "huc")
    return plan, _discrepancy(t, n), accountant


def srpp_dataset_size(ctx, t: ir.Training, scenario, bound) -> int:
    """The public number of training records: `dataset_size`, else the rows of the scenario's data."""
    from dpspec.check.rules import dataset_size

    n = dataset_size(ctx, t)
    if (
        isinstance(scenario, ir.Scenario)
        and scenario.data is not None
        and not (n and isinstance(scenario.data, ir.NamedData) and not (bound and scenario.data.name in bound))
    ):
        from dpspec.check.rules_conformance import size_mismatch
        from dpspec.data import DataNotFoundError
        from dpspec.data.bind import load_table

        try:
            rows = int(len(load_table(scenario.data, bound)))
        except DataNotFoundError as e:
            _fail(
                "DPS419",
                f"the data of `{scenario.name}` is not available: {e}",
                scenario,
                "data",
                hint="set DPSPEC_DATA_DIR to the folder holding the datasets, or give `dataset_size`",
            )
        if n and rows != n:  # the discrepancy model and the sampling rate count in n: one n only
            msg, hint = size_mismatch(rows, int(n), f"`{t.name}`")
            _fail("DPS142", msg.replace("its data", f"scenario `{scenario.name}`'s data"), t, "dataset_size", hint=hint)
        return rows
    if n:
        return int(n)
    _fail(
        "DPS511",
        f"`{t.name}` does not say how many records it trains on",
        t,
        hint="add `dataset_size N` (the public number of training records)",
    )


def protected_secret(protected, t: ir.Training, n: int):
    """The secret as the SRPP-SGD analysis protects it: under the declared discrepancy model, which is
    part of what is protected (the same secret under another model is another guarantee, DPS143)."""
    st = t.settings_as(SrppSgdSettings)
    d = st.discrepancy
    assert d is not None  # (DPS511)
    change = {
        "localized": lambda: f"the secret changes at most d_max = {d.d_max} of the {n} training records",
        "label_flip": lambda: (
            f"each secret value fixes a training set of {n} records, and the two differ in exactly "
            f"Δ = {d.differing} records"
        ),
        "iid": lambda: (
            f"the {n} training records are i.i.d. given the secret, and one record's law moves by total "
            f"variation at most τ = {d.tv:g} between the secret values"
        ),
        "monte_carlo": lambda: (
            f"the {n} training records differ between the coupled worlds independently with "
            f"probability {d.flip:g} (simulated couplings)"
        ),
    }[d.kind]()
    return protected.model_copy(
        update={
            "description": f"{protected.description}, for a model trained on one of "
            f"the scenario's datasets — {change} (discrepancy `{d.kind}`, an assumption "
            "of the certificate, App. D)"
        }
    )


def compile_srpp(ctx, t: ir.Training, protected, n: int):
    """(TargetCertificate, SrppSgdMechanism) for a checked `srpp_sgd` training on n records."""
    st = t.settings_as(SrppSgdSettings)
    from dpspec import srpp
    from dpspec.accounting.huc import SrppSoundnessError, srpp_sgd_epsilon
    from dpspec.compiler.common import _notion, _target

    g = t.guarantee
    assert isinstance(g, ir.SrppGuarantee)  # the family's notion (DPS121)
    try:
        plan, model, accountant = build_plan(t, n)
        if g.subsampling_aware != (accountant == "sa_huc"):
            raise SrppSoundnessError(
                f"accountant `{accountant}` does not certify {'an sa-SRPP' if g.subsampling_aware else 'a plain SRPP'} "
                "guarantee: sa-HUC bounds an on-average notion over the subsampling (§3.3), HUC and the amplified "
                "accountant the worst case",
                rule="DPS505",
                hint="use `accountant sa_huc` with sa_ave_srpp/sa_joint_srpp, or huc/amplified with "
                "ave_srpp/joint_srpp",
            )
        if st.noise is None:
            assert g.epsilon is not None  # a target ε or the noise (DPS511)
            cal = srpp.calibrate(
                plan, model, alpha=g.alpha, epsilon=g.epsilon, flavour=g.flavour, accountant=accountant
            )
            calibrated = True
        else:
            if accountant == "amplified":
                raise SrppSoundnessError(
                    "the amplified accountant calibrates σ; it does not report ε for a given σ",
                    rule="DPS508",
                    hint="give `guarantee …(epsilon = …)` instead of `noise`",
                )
            if st.noise.sigma is not None:
                sigma = st.noise.sigma  # in the declared noise units
            elif plan.noise_units == "gradient" and plan.sampling.normalizer > 0:
                assert st.noise.noise_multiplier is not None  # (σ or σ/C: one of them)
                # σ/C on the clipped sum (Opacus convention) → std on the mean clipped gradient
                sigma = st.noise.noise_multiplier * plan.total_clip / plan.sampling.normalizer
            else:
                raise SrppSoundnessError(
                    "a noise multiplier (σ/C on the clipped sum) needs gradient noise units and "
                    "a constant batch normaliser",
                    rule="DPS508",
                    hint="give a target `epsilon` in the guarantee (dpspec calibrates σ), "
                    "or use `noise_units gradient`",
                )
            h, w, _glob, _cap = srpp.plan_caps(plan, model, accountant)
            eps = srpp_sgd_epsilon(sigma * sigma, h, g.alpha, g.flavour, w)
            cal = srpp.calibrate(plan, model, alpha=g.alpha, epsilon=eps, flavour=g.flavour, accountant=accountant)
            calibrated = False
    except SrppSoundnessError as e:
        _fail(e.rule, e.message, t, _RULE_FIELD.get(e.rule, "guarantee"), hint=e.hint)
    except ValueError as e:  # the core's validation, e.g. Δ > N or a zero-length schedule
        _fail(
            "DPS513",
            f"the SRPP-SGD plan is invalid: {e}",
            t,
            "discrepancy"
            if any(k in str(e) for k in ("differing", "d_max", "tv", "tail_delta", "gamma"))
            else "guarantee",
            hint="fix the value the message names (`dpspec rules DPS513`)",
        )
    protected = protected_secret(protected, t, n)
    eps = cal.epsilon_at(g.alpha)
    if g.epsilon is not None and eps > g.epsilon * (1 + 1e-12):
        _fail(
            "DPS201",
            f"certified ε(α) = {eps:.6g} exceeds the target {g.epsilon:g}",
            t,
            "guarantee",
            hint="raise epsilon or train for fewer steps",
        )
    std = plan.gradient_noise_std(cal)
    orders = sorted({1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, float(g.alpha)})
    reading = (
        "exact caps (almost sure)"
        if cal.failure_probability == 0
        else f"holds except with probability {cal.failure_probability:.3g} (tail / Monte-Carlo caps, eq. 34)"
    )
    guarantee = GuaranteeRecord(
        target=_target(g) | ({"gamma": g.gamma} if g.gamma else {}),
        rdp_alphas=orders,
        rdp_epsilons=[cal.epsilon_at(a) for a in orders],
        alpha=g.alpha,
        epsilon=eps,
        theorems=list(cal.theorems),
        pairs_notion=(
            "none: SRPP-SGD certifies ε(α) of sliced Rényi Pufferfish privacy, not (ε, δ)-DP"
            + ("; sa: on average over the subsampling pattern, not SRPP" if cal.subsampling_aware else "")
        ),
        reading=reading,
    )
    cap = cal.discrepancy.get("cap", {})
    params = {
        "sigma": cal.sigma,
        "sigma2": cal.sigma2,
        "noise_units": cal.noise_units,
        "accountant": cal.accountant,
        "flavour": cal.flavour,
        "h_total": cal.h_total,
        "caps_sha256": cal.caps_sha256,
        "gradient_noise_std_first": float(np.ravel(std)[0]),
        "gradient_noise_std_max": float(np.max(std)),
        "gradient_noise_std_min": float(np.min(std)),
        "gradient_noise_std_sha256": cal.injected.get("std_sha256", ""),
        "clip_norm": plan.total_clip,
        "clipping": "flat" if plan.clip is not None else "per_layer",
        "sampling": plan.sampling.scheme,
        "sample_rate": plan.sampling.rate,
        "dataset_size": n,
        "steps": plan.steps,
        "learning_rate": t.schedule.learning_rate,
        "momentum": t.schedule.momentum or 0.0,
        "lr_schedule": (st.lr_schedule.kind if st.lr_schedule else "constant"),
        "discrepancy": model.name,
        "failure_probability": cal.failure_probability,
    }
    if plan.sampling.batch_size is not None:
        params["batch_size"] = plan.sampling.batch_size
    if "value" in cap:
        params["discrepancy_cap"] = float(cap["value"])
        params["discrepancy_cap_kind"] = str(cap.get("kind", ""))
    if "noise_multiplier_first" in cal.injected:
        params["noise_multiplier_first"] = cal.injected["noise_multiplier_first"]
    from dpspec.compiler import formulas as F
    from dpspec.families.srpp_sgd import formulas as own

    formulas = []
    if cal.accountant != "amplified" and cal.flavour in ("ave", "joint") and calibrated:
        formulas.append(
            F.formula(
                "sigma2_thm5_6",
                own.SIGMA2,
                {"alpha": g.alpha, "H": cal.h_total, "epsilon": g.epsilon},
                value=cal.sigma2,
                check="close",
            )
        )
    if cal.accountant != "amplified" and cal.flavour in ("ave", "joint"):
        formulas.append(
            F.formula(
                "epsilon_alpha", own.EPSILON, {"alpha": g.alpha, "H": cal.h_total, "sigma2": cal.sigma2}, value=eps
            )
        )
    warnings = list(cal.warnings)
    if cal.subsampling_aware:
        warnings.append(
            "sa-SRPP is an on-average notion over the subsampling pattern: it bounds the divergence given "
            "the sampling, averaged; it is not SRPP and does not convert to sliced (ε, δ)-Pufferfish (DPS505)"
        )
    warnings.append("hyper-parameters chosen by looking at the private data are not covered by this certificate")
    asm = [
        Assumption(
            id=f"srpp_{i}",
            statement=a.statement,
            source=Source(paper=a.source.split(",")[0], ref=",".join(a.source.split(",")[1:]).strip()),
        )
        for i, a in enumerate(cal.assumptions)
    ]
    numerics = Numerics(
        method="closed form σ² = α·H_total/(2ε) (Thms 5.6/5.7); caps rounded up"
        if cal.accountant != "amplified"
        else "amplified accountant: bisection on σ² over the shared-mixture envelope (App. J), verified at the end",
        abs_error_bound=0.0,
        alpha_grid=f"single order α = {g.alpha:g} (ε(α) at other orders for reference)",
        calibration=("σ² solved for the target ε(α)" if calibrated else "σ given; ε(α) reported"),
    )
    record = TargetCertificate(
        name=t.name,
        kind="train",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="srpp_sgd",
            description=(
                "SGD on per-example clipped gradients with Gaussian noise on the mean "
                f"clipped gradient; σ in {cal.noise_units} units"
            ),
            parameters=params,
            calibrated=calibrated,
        ),
        guarantee=guarantee,
        assumptions=asm,
        formulas=formulas,
        numerics=numerics,
        warnings=warnings,
    )
    from dpspec.families.srpp_sgd.runtime import SrppSgdMechanism

    return record, SrppSgdMechanism(name=t.name, plan=plan, calibration=cal, discrepancy=model)


def compile_target(ctx, t: ir.Training, data):
    """The family's compile function (dpspec.families): a CompiledTarget for ``t``."""
    protected, d, _u = _protected(ctx, t)
    record, mech = compile_srpp(ctx, t, protected, srpp_dataset_size(ctx, t, d, data))
    return CompiledTarget(t.name, "train", record, mech)
