"""Stage 3: the checker — named rules over the IR (see ``docs/rules.md``)."""

from dpspec.check import rules as _rules  # noqa: F401  (registers the general rules)
from dpspec.check import rules_conformance as _rules_conf  # noqa: F401  (DPS14x)
from dpspec.check import rules_distributed as _rules_dist  # noqa: F401  (DPS80x)
from dpspec.check import rules_numbers as _rules_numbers  # noqa: F401  (DPS205–207)
from dpspec.check import rules_pufferfish as _rules_pf  # noqa: F401  (DPS4xx)
from dpspec.check import rules_runtime as _rules_runtime  # noqa: F401  (DPS16x)
from dpspec.check import rules_schedule as _rules_schedule  # noqa: F401  (DPS144)
from dpspec.check.framework import CATALOGUE, RuleInfo, rule, run_checks
from dpspec.tuning import rules as _rules_tuning  # noqa: F401  (DPS95x: the `tune` block)


def _register_family_rules() -> None:
    """Rule modules a family declares (dpspec.families) that are not imported above: a new family's
    rules register without editing this file. The imports above fix the order of the built-in ones."""
    from dpspec.families import FAMILIES
    from dpspec.families.hooks import load_hook

    for f in FAMILIES.values():
        for module in f.rules:
            load_hook(module, "rules")


_register_family_rules()


def catalogue() -> dict[str, RuleInfo]:
    """Every rule id a user can see: the checker's rules, the front-end, compile and run-time ids, and the
    accountants' own (``rules_accounting``; imports numpy/scipy, so ``dpspec check`` does not call it)."""
    from dpspec.check import rules_accounting

    rules_accounting.register()
    return CATALOGUE


__all__ = ["CATALOGUE", "RuleInfo", "catalogue", "rule", "run_checks"]
