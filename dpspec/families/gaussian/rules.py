"""The Gaussian release's own rules: its sensitivity must be known (DPS129) and never below the one its
query implies (DPS140). The family's entry in ``dpspec/families/__init__.py`` lists this module; the releases it
checks are those of the families listing it.
"""

from __future__ import annotations

from dpspec.check.framework import Context, diag, releases_of, rule
from dpspec.check.rules import _UNIT, _protected
from dpspec.check.rules_conformance import _unit_of, release_spec
from dpspec.ir import models as ir


@rule(
    "DPS129",
    "release sensitivity unknown or inconsistent",
    bad=_UNIT + "release r { mechanism gaussian  query mean(age)  guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_UNIT
    + "release r { mechanism gaussian  query sum(age, bounds = [0, 100])  guarantee dp(epsilon = 1, delta = 1e-6) }",
    explanation="A Gaussian release needs the query's ℓ2 sensitivity w.r.t. the protected unit: declared with "
    "`sensitivity`, or derived from declared bounds of a sum/mean/count/histogram on record units.",
)
def check_release_sensitivity(ctx: Context):
    for r in releases_of(ctx, __name__):
        d, u = _protected(ctx, r)
        if u is None:
            continue
        n = d.dataset_size if isinstance(d, ir.PrivacyUnitDecl) else None
        problem = ctx.release_sensitivity(r, u, n).problem
        if problem:
            msg, field, hint = problem
            yield diag(
                "DPS129",
                msg,
                r.query if (field and r.query is not None and field != "sensitivity") else r,
                field,
                hint=hint,
            )


# --- DPS140: a declared sensitivity below the one the query implies --------------------------------


@rule(
    "DPS140",
    "a declared sensitivity below the one the query implies",
    bad=release_spec(sens="1.0"),
    good=release_spec(),
    explanation="When a query states its bounds, dpspec derives its ℓ2 sensitivity Δ for the protected unit "
    "(docs/language.md, 'Sensitivity of a release'). A declared `sensitivity` may be larger (the "
    "noise is then calibrated to it) but never smaller: `sum(hours, bounds = [0, 99])` moves by up "
    "to 99 when one record is inserted or removed, so calibrating to a declared 1.0 would certify "
    "ε = 1 for a release whose real ε is about 385. Remove `sensitivity`, declare at least the derived "
    "Δ, or drop the bounds (the sensitivity is then an assumption about an answer the caller "
    "computes, and `release_answer` is the only way to release it).",
)
def check_declared_sensitivity(ctx: Context):
    from dpspec.compiler.sensitivity import query_text

    for r in releases_of(ctx, __name__):
        d, u = _unit_of(ctx, r)
        if u is None or r.query is None:
            continue
        s = ctx.release_sensitivity(r, u, d.dataset_size)
        if s.declared_below_derived:
            node = r if r.sensitivity is not None else r.query
            yield diag(
                "DPS140",
                f"the declared sensitivity {s.declared:g} is below Δ = {s.derived.value:.6g} that "
                f"`{query_text(r.query)}` implies: {s.derived.statement}",
                node,
                "sensitivity",
                hint=f"remove `sensitivity` (dpspec uses the derived Δ = {s.derived.value:.6g}), or declare "
                f"at least {s.derived.value:.6g}",
            )
