"""The sliced Wasserstein mechanism's closed forms that the certificate carries and ``dpspec verify``
re-evaluates in high precision (the machinery: :mod:`dpspec.compiler.formulas`)."""

from __future__ import annotations

# Zhang & Vorobeychik Thm 4.5 (Ave-SRPP of the SWM, eq. 10) at the largest weighted Δ̄².
AVE_EPSILON = "alpha*Dbar2/(2*sigma2)"

#: name -> sympy text of every formula the family's compile step emits
FORMULAS: dict[str, str] = {"epsilon_ave_srpp": AVE_EPSILON}
