"""The accountants' and runtimes' own rule ids (raised as ``SoundnessError``), in the one rule catalogue that
``dpspec rules`` and docs/rules.md show.

A family's accountant keeps its catalogue of refusals in ``dpspec.accounting`` (registered with
``dpspec.accounting.errors.register_rules``); they are raised while compiling, or by the runtime on the data it is
given, never by the checker. The family declares that catalogue in one of its rule modules as
``ACCOUNTANT_RULES = AccountantRules(...)``, and ``register`` adds each of its ids the catalogue does not hold yet.
Importing the accountants pulls in numpy and scipy, so this is done on demand (``dpspec.check.catalogue()``), not
when ``dpspec check`` starts: a declaration names its catalogue by dotted path.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpspec.check.framework import CATALOGUE, register_front_end


@dataclass(frozen=True)
class AccountantRules:
    """A family's accountant catalogue, as its rule module declares it (``ACCOUNTANT_RULES``)."""

    #: ``"package.module:NAME"`` of the accountant's ``{rule id: one-line summary}``
    catalogue: str
    #: the accountant, as the rules' explanation names it, e.g. ``"GCON (dpspec.accounting.gcon)"``
    accountant: str
    #: the folder of the tests that raise its refusals
    tests: str
    #: a clean spec of the family (the rules' fixed example)
    good: str


def declared() -> list[AccountantRules]:
    """Every family's declaration, in the order of the family table (each rule module read once)."""
    from dpspec.families import FAMILIES, load

    seen: set[str] = set()
    out: list[AccountantRules] = []
    for f in FAMILIES.values():
        for module in f.rules:
            if module in seen:
                continue
            seen.add(module)
            decl = getattr(load(module), "ACCOUNTANT_RULES", None)
            if isinstance(decl, AccountantRules) and decl not in out:
                out.append(decl)
    return out


def register() -> None:
    """Add every declared accountant rule id not yet in the catalogue (idempotent), in the order of the ids."""
    from dpspec.families import load

    found: dict[str, tuple[str, AccountantRules]] = {}
    for decl in declared():
        for rid, summary in load(decl.catalogue).items():
            found.setdefault(rid, (summary, decl))
    for rid, (summary, decl) in sorted(found.items()):
        if rid in CATALOGUE:
            continue
        register_front_end(
            rid,
            summary,
            "accounting",
            bad=f"(see tests under {decl.tests}/: raised by the accountant or the runtime on a configuration or on "
            "data, not by a spec text the checker sees)",
            good=decl.good,
            explanation=f"Raised by the {decl.accountant} accountant while compiling, or by its runtime on the data it "
            "is given, when the configuration falls outside what its theorem proves: no certificate is written (or "
            "the run stops) rather than a guarantee being overstated.",
        )
