"""Compile a `release` with `mechanism gaussian`: the analytic Gaussian mechanism on a query with a
derived or declared ℓ2 sensitivity (Balle & Wang 2018; Mironov 2017). The family's compile hook
(``compile_target``, read from this folder by dpspec.families)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dpspec.accounting import analytic_gaussian as GR
from dpspec.certificate.model import (
    Assumption,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    QueryRecord,
    Scalar,
    Source,
    TargetCertificate,
)
from dpspec.compiler import formulas as F
from dpspec.compiler.common import (
    _DPS201_HINT,
    CompiledTarget,
    _alpha_grid,
    _deltas,
    _fail,
    _grid_text,
    _notion,
    _protected,
    _target,
    binding_text,
)
from dpspec.compiler.sensitivity import column_bounds
from dpspec.ir import models as ir

if TYPE_CHECKING:
    from dpspec.check.framework import Context


GAUSSIAN_ASSUMPTIONS = [
    Assumption(
        id="fresh_noise",
        statement="the noise is a fresh N(0, σ² I) draw independent of the data and of other releases",
        source=Source(paper="Balle & Wang 2018", ref="Thm 8"),
    ),
    Assumption(
        id="real_arithmetic",
        statement="the noise sampler is treated as exact real-valued Gaussian sampling "
        "(floating-point attacks are out of scope unless secure mode is used)",
        source=Source(paper="Mironov 2012", ref="On significance of the least significant bits"),
    ),
]


def _sensitivity_assumption(on_data: bool, derivation: str) -> Assumption:
    if on_data:
        return Assumption(
            id="sensitivity",
            statement="the runtime evaluates the query itself on values clamped to "
            f"the certified bounds, so its ℓ2 sensitivity w.r.t. the protected unit is at most Δ: "
            f"{derivation}",
            source=Source(paper="Dwork & Roth 2014", ref="Def. 3.8 (ℓ2 sensitivity)"),
        )
    return Assumption(
        id="sensitivity",
        statement="the caller computes the answer (release_answer); its ℓ2 "
        "sensitivity w.r.t. the protected unit is at most the declared Δ — declared by the spec, not "
        "checked by dpspec",
        source=Source(paper="Dwork & Roth 2014", ref="Def. 3.8 (ℓ2 sensitivity)"),
    )


def _release_table(r: ir.Release, d, bound):
    """The table a release's query reads, resolved now when its data is bound: (table or None, the
    name of a `dataset(name)` binding that arrives at run time). Columns and the declared size are
    checked against it (DPS416, DPS147, DPS142); a missing file is DPS419 (raised by the caller)."""
    from dpspec.check.rules_conformance import size_mismatch
    from dpspec.data.bind import DataBindingError, as_table, load_table
    from dpspec.diagnostics import did_you_mean

    b = d.data if isinstance(d, ir.PrivacyUnitDecl) else None
    if b is None:
        return None, None
    if isinstance(b, ir.NamedData) and not (bound and b.name in bound):
        return None, b.name  # checked by the runtime when the data arrives (DPS148)
    try:
        table = as_table(bound[b.name], b.name) if isinstance(b, ir.NamedData) else load_table(b, bound, missing="keep")
    except (DataBindingError, ValueError) as e:  # a malformed file, a wrong schema, an unusable bound object
        _fail(
            "DPS418",
            f"cannot load the data of `{d.name}`: {e}",
            d,
            "data",
            hint="bind a table (a dict of columns, a pandas DataFrame or a list of rows) or fix the data file",
        )
    q = r.query
    assert q is not None  # (data is read for a query only)
    for c in q.columns:
        if c not in table.columns:
            _fail(
                "DPS416",
                f"the data of `{d.name}` has no column `{c}`",
                q,
                "columns",
                hint=did_you_mean(c, table.columns, "column") or f"its columns are: {', '.join(table.columns)}",
            )
        if not table.is_numeric(c):
            _fail(
                "DPS147",
                f"column `{c}` of `{d.name}`'s data is categorical; `{q.function}` reads numbers",
                q,
                "columns",
                hint="use a numeric column, or encode the categories as numbers before binding the data",
            )
    if d.dataset_size is not None and len(table) != d.dataset_size:
        msg, hint = size_mismatch(len(table), d.dataset_size, f"`{d.name}`")
        _fail("DPS142", msg, d, "dataset_size", hint=hint)
    return table, (b.name if isinstance(b, ir.NamedData) else None)


def compile_target(ctx: Context, r: ir.Release, data) -> CompiledTarget:
    from dpspec.check.rules_pufferfish import query_dimension
    from dpspec.compiler.sensitivity import evaluated_on_data, release_sensitivity

    protected, d, u = _protected(ctx, r)
    n = d.dataset_size if isinstance(d, ir.PrivacyUnitDecl) else None
    sens = release_sensitivity(r, u, n)
    if sens.problem or sens.used is None:
        msg, fld, hint = sens.problem or ("the release's sensitivity cannot be determined", None, None)
        _fail("DPS129", msg, r.query if (fld and r.query is not None and fld != "sensitivity") else r, fld, hint=hint)
    if sens.declared_below_derived:  # also a check-stage rule; never emit such a certificate
        assert sens.derived is not None  # (what the declared Δ is below)
        _fail(
            "DPS140",
            f"the declared sensitivity {sens.declared:g} is below Δ = {sens.derived.value:.6g} that the "
            f"query implies: {sens.derived.statement}",
            r,
            "sensitivity",
            hint=f"declare `sensitivity {sens.derived.value:.6g}` or more, or remove it and let dpspec derive it",
        )
    delta_sens = sens.used
    on_data = evaluated_on_data(r, u, n)
    table, data_name = _release_table(r, d, data) if on_data else (None, None)
    from dpspec.compiler import accountant_selection as DA

    g = r.guarantee
    assert isinstance(g, (ir.DpGuarantee, ir.RdpGuarantee))  # the family's notions (DPS121)
    alphas = _alpha_grid(ctx.spec)
    calibrated = r.noise is None
    theorems: list[str] = []
    if r.noise is None:
        assert g.epsilon is not None  # a release without noise has a target ε (DPS124)
        if isinstance(g, ir.DpGuarantee):
            sigma = GR.sigma_for_target(g.epsilon, g.delta, delta_sens)
            cal = (
                "analytic Gaussian: largest μ = Δ/σ with δ(ε; μ) ≤ δ by bisection (relative width 1e-13), σ rounded up"
            )
        else:
            sigma = GR.sigma_for_rdp(g.alpha, g.epsilon, delta_sens)
            cal = "closed form σ = √(α Δ² / (2 ε)), rounded up"
    else:
        assert r.noise.sigma is not None  # a release's noise is a standard deviation (DPS124)
        sigma = r.noise.sigma
        cal = None
    mu = delta_sens / sigma
    rdp = GR.rdp_curve(alphas, mu)
    points = []
    for dl in _deltas(g):
        points.append(DpPoint(epsilon=GR.epsilon_of_delta(mu, dl), delta=dl))
    if not all(math.isfinite(p.epsilon) for p in points):
        _fail(
            "DPS202",
            f"with σ = {sigma:g} and Δ = {delta_sens:g} (μ = Δ/σ = {mu:.3g}) the release has no finite ε "
            f"at δ = {points[0].delta:g}",
            r,
            "noise",
            hint=f"give a σ of the order of Δ = {delta_sens:g} or more",
        )
    theorems.append("Balle & Wang 2018, Thm 8 (analytic Gaussian mechanism, exact δ(ε))")
    theorems.append("Mironov 2017, Prop. 7 (Rényi DP of the Gaussian mechanism)")
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=list(map(float, alphas)),
        rdp_epsilons=list(map(float, rdp)),
        dp=points,
        theorems=theorems,
    )
    if isinstance(g, ir.DpGuarantee):
        guarantee = guarantee.model_copy(update={"epsilon": points[0].epsilon, "delta": g.delta})
    else:
        guarantee = guarantee.model_copy(update={"alpha": g.alpha, "epsilon": float(GR.rdp_curve([g.alpha], mu)[0])})
    if g.epsilon is not None and guarantee.epsilon is not None and guarantee.epsilon > g.epsilon * (1 + 1e-9):
        _fail(
            "DPS201",
            f"certified ε = {guarantee.epsilon:.6g} exceeds the target {g.epsilon:g}",
            r,
            "guarantee",
            hint=_DPS201_HINT,
        )
    check_alphas = [2.0, 8.0, 32.0]
    formulas = [
        F.formula(
            "rdp_gaussian",
            F.GAUSSIAN_RDP,
            {"Delta": delta_sens, "sigma": sigma},
            checks=[(a, float(GR.rdp_curve(np.array([a]), mu)[0])) for a in check_alphas],
        ),
        F.formula(
            "delta_of_epsilon",
            F.ANALYTIC_GAUSSIAN_DELTA,
            {"mu": mu, "epsilon": points[0].epsilon},
            value=GR.delta_of_epsilon(points[0].epsilon, mu),
        ),
    ]
    dim = query_dimension(r.query)
    mech_params: dict[str, Scalar] = {"sigma": sigma, "sensitivity": delta_sens, "mu": mu}
    if dim:
        mech_params["dimension"] = dim
    derivation = sens.derived.statement if sens.derived is not None else "declared by the spec"
    if sens.derived is not None:
        assert r.query is not None  # (a Δ is derived from a query's bounds)
        fname = F.query_sensitivity_name(r.query.function, u.relation, len(r.query.columns))
        if fname is not None:  # (a sum over more columns than the formula table holds: value only)
            formulas.append(F.formula(fname, sens.derived.formula, sens.derived.variables, value=sens.derived.value))
        if sens.declared is not None and sens.declared > sens.derived.value:
            derivation += f"; the larger declared Δ = {sens.declared:g} is used"
    query_record = None
    if r.query is not None:
        q = r.query
        bounds = column_bounds(q) or []
        query_record = QueryRecord(
            function=q.function,
            columns=list(q.columns),
            bounds=[(float(lo), float(hi)) for lo, hi in bounds],
            bins=q.bins,
            dimension=dim or 1,
            evaluated_on="data" if on_data else "answer",
            sensitivity=delta_sens,
            derived_sensitivity=sens.derived.value if sens.derived is not None else None,
            derivation=derivation,
            dataset_size=n,
            data=binding_text(d.data) if isinstance(d, ir.PrivacyUnitDecl) else None,
        )
    record = TargetCertificate(
        name=r.name,
        kind="release",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="gaussian",
            description="adds N(0, σ² I) to the query answer",
            parameters=mech_params,
            calibrated=calibrated,
        ),
        guarantee=guarantee,
        assumptions=[_sensitivity_assumption(on_data, derivation), *GAUSSIAN_ASSUMPTIONS],
        formulas=formulas,
        numerics=Numerics(
            method="closed form for ε(α); analytic Gaussian δ(ε) in log space (log_ndtr), "
            "ε by bisection, conservative end returned",
            abs_error_bound=GR.ABS_ERROR,
            alpha_grid=_grid_text(alphas),
            conversion="Balle & Wang 2018 Thm 8 (exact privacy profile)",
            calibration=cal,
        ),
        query=query_record,
        accounting=DA.gaussian_record(mu, lambda dl: GR.epsilon_of_delta(mu, dl), [p.delta for p in points]),
    )
    from dpspec.families.gaussian.runtime import GaussianRelease

    mech = GaussianRelease.from_certificate(record, data=table, data_name=data_name)
    return CompiledTarget(
        r.name,
        "release",
        record,
        mech,
        alphas,
        rdp,
        gaussian_mu=mu,
        pld=DA.gaussian_release_pld(
            sigma, delta_sens, getattr(u, "relation", None), getattr(u, "size", None) or 1, getattr(u, "kind", "")
        ),
    )
