"""The statistics releases' closed forms that the certificate carries and ``dpspec verify`` re-evaluates in
high precision (the machinery, and the formulas several families share — ε = Δ/b of a pure mechanism, the
analytic Gaussian's δ(ε): :mod:`dpspec.compiler.formulas`)."""

from __future__ import annotations

# ε of the exponential mechanism with probabilities ∝ exp(u/b): 2Δ/b (McSherry & Talwar 2007), and the δ of
# partition selection by a threshold T on noisy counts (Laplace, discrete Laplace).
EXPONENTIAL_EPSILON = "2*Delta/b"
SELECTION_DELTA_LAPLACE = "exp(-(T - 1)/b)/2"
SELECTION_DELTA_DISCRETE_LAPLACE = "exp(-(T - 1)/b)/(1 + exp(-1/b))"
# the bound on P(Y <= -K - 1), Y ~ N_Z(0, s^2), that a composition's PLD puts on the loss +inf (PROOF.md §3.4:
# one term plus the Gaussian tail, over the normaliser's lower bound sqrt(2 pi) s)
DISCRETE_GAUSSIAN_TAIL_BOUND = "exp(-(K + 1)**2/(2*s**2))/(sqrt(2*pi)*s) + (1 - erf((K + 1)/(s*sqrt(2))))/2"

#: name -> sympy text of every formula the family's compile step emits
FORMULAS: dict[str, str] = {
    "exponential_epsilon": EXPONENTIAL_EPSILON,
    "selection_delta_laplace": SELECTION_DELTA_LAPLACE,
    "selection_delta_discrete_laplace": SELECTION_DELTA_DISCRETE_LAPLACE,
    "discrete_gaussian_tail_bound": DISCRETE_GAUSSIAN_TAIL_BOUND,
}
