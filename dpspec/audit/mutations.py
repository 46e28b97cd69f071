"""Deliberately broken mechanisms for the power check: an audit that cannot fail is not an audit.

Each mutant is a runtime object that differs from the compiled one by a bug of a kind seen in
practice, while the certificate keeps the original numbers. The mutants belong to the families:
each family's auditor module (``Family.auditor`` in :mod:`dpspec.families`) lists its kinds with
their default factors in ``MUTATION_FACTORS`` and builds one with ``mutate(mechanism, kind,
factor)`` (``None`` when the kind does not apply to it), whose docstring says what each kind
breaks. This module only finds the family of a runtime object (by its ``Family.runtime`` class)
and asks it.

``mutants(compiled, name)`` returns {label: mechanism} with the family's default factors, strong
enough to be detectable by the default audit sizes; ``mutate(mechanism, kind, factor)`` builds one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dpspec.families import FAMILIES, family
from dpspec.families.hooks import AuditorModule, load_hook

__all__ = ["mutate", "mutants", "as_class", "factor_of", "DEFAULT_FACTORS", "RUNTIME_KINDS"]  # noqa: F822 - DEFAULT_FACTORS: module __getattr__

#: the privacy mutants (what the privacy audits must catch) and the runtime mutants (the runtime's own
#: earlier holes, caught by the audits of :mod:`dpspec.audit.runtime`)
RUNTIME_KINDS = (
    "normaliser_from_data",
    "nonfinite_voids_step",
    "nonfinite_poisons_step",
    "no_step_budget",
    "no_batch_caps",
    "ledger_rewind",
    "unnoised_param_group",
)


def as_class(cls, mechanism):
    """``mechanism``'s certified numbers in an object of (sub)class ``cls`` (a fresh run)."""
    return cls(**{fld.name: getattr(mechanism, fld.name) for fld in dataclasses.fields(mechanism) if fld.init})


def factor_of(kind: str, factor: float | None) -> float:
    """The factor of a mutant ``kind`` that scales a number (a family's ``mutate`` is given None only for
    a kind without a default factor)."""
    if factor is None:
        raise ValueError(f"mutation {kind!r} needs a factor")
    return float(factor)


def _auditor(name: str) -> AuditorModule | None:
    """The auditor module of family ``name`` (None when it has none)."""
    f = family(name)
    return load_hook(f.auditor, "auditor") if f is not None and f.auditor else None


def _factors(name: str) -> dict[str, float]:
    return dict(getattr(_auditor(name), "MUTATION_FACTORS", {}))


def __getattr__(name: str):
    if name == "DEFAULT_FACTORS":  # {family: {kind: default factor}}, from the families' auditor modules
        return {k: f for k in FAMILIES if (f := _factors(k))}
    for k in FAMILIES:  # the mutant classes a family's auditor module exports (``MUTANT_CLASSES``)
        mod = _auditor(k)
        if mod is not None and name in getattr(mod, "MUTANT_CLASSES", ()):
            return getattr(mod, name)
    raise AttributeError(name)


def mutate(mechanism: Any, kind: str, factor: float | None = None) -> Any:
    """A broken copy of ``mechanism`` (see the "Mutants" section of its family's auditor module)."""
    for name, f in FAMILIES.items():
        mod = _auditor(name)
        if (
            mod is None
            or not f.runtime
            or not hasattr(mod, "mutate")
            or not isinstance(mechanism, load_hook(f.runtime, "runtime"))
        ):
            continue
        defaults = getattr(mod, "MUTATION_FACTORS", {})
        out = mod.mutate(mechanism, kind, defaults.get(kind) if factor is None else factor)
        if out is not None:
            return out
    raise ValueError(f"no mutation {kind!r} for {type(mechanism).__name__}")


def mutants(compiled, name: str, factors: dict[str, float] | None = None) -> dict[str, Any]:
    """{kind: mutated mechanism} for target ``name`` of a compiled spec (kinds that apply only)."""
    mech = compiled.targets[name].mechanism
    rec = next(r for r in compiled.certificate.results if r.name == name)
    kinds = _factors(rec.mechanism.name)
    kinds.update(factors or {})
    out = {}
    for kind, fac in kinds.items():
        try:
            out[kind] = mutate(mech, kind, fac)
        except ValueError:
            continue
    return out
