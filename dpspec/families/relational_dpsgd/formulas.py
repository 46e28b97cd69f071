"""Relational DP-SGD's closed forms that the certificate carries and ``dpspec verify`` re-evaluates in high
precision (the machinery, and the subsampled-Gaussian formulas several families share:
:mod:`dpspec.compiler.formulas`)."""

from __future__ import annotations

# Huang et al. 2025: the unamplified Gaussian mechanism composed over T steps (a cap on the curve).
NAIVE_CAP = "T*alpha*sens**2/(2*sigma**2)"

#: name -> sympy text of every formula the family's compile step emits
FORMULAS: dict[str, str] = {"naive_cap": NAIVE_CAP}
#: formulas checked "close" whose value is a cap on the loss: ``verify`` accepts a recorded value rounded up only
ROUNDED_UP: frozenset[str] = frozenset({"naive_cap"})
