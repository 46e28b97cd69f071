"""The template family: full-batch noisy gradient descent (``mechanism noisy_gd``).

A worked example of a mechanism family in its own folder, and the folder to copy for a new one. It is
*not* registered in ``dpspec.families.FAMILIES`` (the language has no ``noisy_gd``): a copy becomes a
real family with one entry there, ``FAMILIES["my_family"] = Family(name="my_family", …)``, holding only
the declarative facts below. Every hook comes from a file of the folder (``FOLDER_HOOKS``):

- ``settings.py`` — ``Settings``, the family's settings model (what lowering builds from the block);
- ``accountant.py`` — the pure numerics (here ε(α) of T Gaussian steps);
- ``compile.py`` — ``compile_target``: calibrate or account, write the certificate entry;
- ``runtime.py`` — ``Runtime``, the mechanism object, built from its certificate only;
- ``PROOF.md`` — the theorem map and the derivation a reviewer checks.

tests/test_plugin_family.py registers ``ENTRY`` for the length of a test and takes it through every
stage: lowering, checking, compiling, ``verify`` and the runtime's step budget.
"""

from __future__ import annotations

from dpspec.families import Family

ENTRY = Family(
    name="noisy_gd",
    block="train",
    units=("record",),
    relations=("add_remove",),
    notions=("dp", "rdp"),
    summary="full-batch noisy gradient descent",
    source="Mironov 2017, Prop. 7 and Prop. 1",
    package=__name__,
)
