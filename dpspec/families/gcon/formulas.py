"""GCON's closed forms that the certificate carries and ``dpspec verify`` re-evaluates in high precision
(the machinery, and the formulas several families share: :mod:`dpspec.compiler.formulas`)."""

from __future__ import annotations

# Wei et al. 2024 (GCON) eqs. (18) and (23).
BETA_EQ18 = "Max(epsilon - epsL, omega*epsilon)/(c*(c1 + c2*ctheta)*Psi)"
C_THETA_EQ23 = "(n1*omega*epsilon*c1 + c*c1*Psi*csf)/(n1*omega*epsilon*Lam - c*c2*Psi*csf)"

#: name -> sympy text of every formula the family's compile step emits
FORMULAS: dict[str, str] = {"beta_eq18": BETA_EQ18, "c_theta_eq23": C_THETA_EQ23}
