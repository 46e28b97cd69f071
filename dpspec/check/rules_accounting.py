"""The accountants' and runtimes' own rule ids (DPS4xx–DPS7xx raised as ``SoundnessError``), in the
one rule catalogue that ``dpspec rules`` and docs/rules.md show.

Each family's accountant keeps its catalogue of refusals in ``dpspec.accounting`` (registered with
``dpspec.accounting.errors.register_rules``); they are raised while compiling, or by the runtime on
the data it is given, never by the checker. Importing the accountants pulls in numpy and scipy, so
this is done on demand (``dpspec.check.catalogue()``), not when ``dpspec check`` starts.
"""

from __future__ import annotations

from dpspec.check import rules_pufferfish
from dpspec.check.framework import CATALOGUE, register_front_end
from dpspec.families.gcon import rules as gcon_rules
from dpspec.families.relational_dpsgd import rules as relational_rules
from dpspec.families.srpp_sgd import rules as srpp_rules

# hundreds digit of the id -> (the family's tests, a clean spec of that family, its accountant)
_FAMILY = {
    "4": ("tests/pufferfish", rules_pufferfish.GOOD, "SWM (dpspec.accounting.swm)"),
    "5": ("tests/families/srpp_sgd", srpp_rules.GOOD, "SRPP-SGD (dpspec.accounting.huc)"),
    "6": ("tests/families/relational_dpsgd", relational_rules.GOOD, "relational DP-SGD (dpspec.accounting.relational)"),
    "7": ("tests/families/gcon", gcon_rules.GOOD, "GCON (dpspec.accounting.gcon)"),
}

# compile-stage ids raised outside the accountants' catalogues
_OTHERS = {
    "DPS417": (
        "missing or non-finite values in an SWM release's query columns",
        "compile",
        "tests/pufferfish",
        rules_pufferfish.GOOD,
        "The SWM calibration reads the bound data at compile time; a missing or non-finite value in a query "
        "column has no clamped value, so the release refuses the data (drop or impute those rows first).",
    ),
}


def register() -> None:
    """Add every accountant rule id not yet in the catalogue (idempotent)."""
    import dpspec.accounting  # noqa: F401 - registers the families' catalogues
    from dpspec.accounting.errors import known_rules

    for rid, summary in sorted(known_rules().items()):
        if rid in CATALOGUE or rid[3] not in _FAMILY:
            continue
        tests, good, who = _FAMILY[rid[3]]
        register_front_end(
            rid,
            summary,
            "accounting",
            bad=f"(see tests under {tests}/: raised by the accountant or the runtime on a configuration or on data, "
            "not by a spec text the checker sees)",
            good=good,
            explanation=f"Raised by the {who} accountant while compiling, or by its runtime on the data it is given, "
            "when the configuration falls outside what its theorem proves: no certificate is written (or "
            "the run stops) rather than a guarantee being overstated.",
        )
    for rid, (title, stage, tests, good, why) in _OTHERS.items():
        if rid not in CATALOGUE:
            register_front_end(
                rid, title, stage, bad=f"(see tests under {tests}/: needs bound data)", good=good, explanation=why
            )
