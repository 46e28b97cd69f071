"""What each mechanism consumes and produces — read by the checker, never imports torch.

As in OpenDP, every mechanism declares its input (the privacy units and neighbouring relations
its analysis covers) and its output (the privacy notions it can certify). Chaining mismatched
pieces is an error naming both sides, never a silent conversion.
"""

from __future__ import annotations

from dpspec.families import FAMILIES, Family

# The declarations live in dpspec.families (one entry per family); these names stay for their users.
MechanismDecl = Family
MECHANISMS: dict[str, Family] = FAMILIES


def unit_phrase(unit) -> str:
    """`a record unit (add_remove)`, `a node unit`, … for messages naming both sides."""
    rel = getattr(unit, "relation", None)
    extra = f" of size {unit.size}" if getattr(unit, "size", None) else ""
    return f"a {unit.kind} unit{extra}" + (f" ({rel})" if rel else "")
