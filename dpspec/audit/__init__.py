"""Empirical privacy audits: trust the certificate, but verify the mechanism.

    import dpspec
    from dpspec.audit import audit

    compiled = dpspec.compile(dpspec.load("specs/gaussian_release.dps"))
    report = audit(compiled, seed=0)            # or audit("cert.json") / `dpspec audit cert.json`
    print(report.to_text())                     # certified ε next to an ε lower bound (95 %)
    assert report.ok                            # no ε_lower above a certified ε

For every release or training in a certificate, an auditor builds two neighbouring inputs (worst
case for the mechanism's sensitivity analysis), runs the **runtime mechanism object** many times on
each, picks a distinguishing test on a selection split and turns its false-positive / false-negative
rates on a fresh evaluation split into a one-sided Clopper–Pearson lower bound on ε at the
certificate's δ (:mod:`dpspec.audit.stats`). A lower bound above the certified ε is a violation:
the mechanism (or its accounting) leaks more than the certificate says.

Built-in auditors: ``gaussian`` (answers 0 and Δe₁), ``dpsgd`` (gradient canary, k steps of a block
linear model), ``swm`` (the two secret-conditioned laws of the worst world and pair, observation
(V, ⟨Y, V⟩) for Joint-SRPP or per slice for Ave-SRPP) and ``gcon`` (one edge flipped between two
low-degree training nodes); ``tune`` (the selection procedure of a tuning, with stand-in runs:
:mod:`dpspec.tuning.audit`). :mod:`dpspec.audit.mutations` builds deliberately broken mechanisms for
the power check. New mechanisms plug in with :func:`register_auditor` (see
:mod:`dpspec.audit.base` for the interface and the rules a target must follow).
"""

from .api import AuditError, AuditReport, audit, load_subject
from .base import AUDITORS, AuditContext, AuditResult, AuditTarget, Claim, register_auditor, run_target
from .stats import cp_lower, cp_upper, epsilon_from_rates, epsilon_lower_bound, max_certifiable_epsilon


def _register_family_auditors() -> None:
    """Import each family's auditor module (dpspec.families), which registers it; torch stays lazy."""
    from importlib import import_module

    from dpspec.families import FAMILIES
    from dpspec.families.hooks import load_hook

    for f in FAMILIES.values():
        if f.auditor:
            load_hook(f.auditor, "auditor")
    import_module("dpspec.tuning.audit")  # a `tune` certificate: the selection procedure (not a family)


_register_family_auditors()

__all__ = [
    "audit",
    "AuditReport",
    "AuditResult",
    "AuditError",
    "load_subject",
    "AuditTarget",
    "AuditContext",
    "Claim",
    "register_auditor",
    "run_target",
    "AUDITORS",
    "cp_upper",
    "cp_lower",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "max_certifiable_epsilon",
]
