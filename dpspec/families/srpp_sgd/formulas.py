"""SRPP-SGD's closed forms that the certificate carries and ``dpspec verify`` re-evaluates in high precision
(the machinery: :mod:`dpspec.compiler.formulas`)."""

from __future__ import annotations

# Zhang & Vorobeychik Thms 5.6/5.7: σ² = α H_total / (2 ε) and its inverse.
SIGMA2 = "alpha*H/(2*epsilon)"
EPSILON = "alpha*H/(2*sigma2)"

#: name -> sympy text of every formula the family's compile step emits
FORMULAS: dict[str, str] = {"sigma2_thm5_6": SIGMA2, "epsilon_alpha": EPSILON}
#: formulas checked "close" whose value is a noise scale: ``verify`` accepts a recorded value rounded up only
ROUNDED_UP: frozenset[str] = frozenset({"sigma2_thm5_6"})
