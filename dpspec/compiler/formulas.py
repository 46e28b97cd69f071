"""Closed forms as sympy expressions: the certificate carries them as text and LaTeX, and
``verify`` re-evaluates them with high precision, independently of the accountant code."""

from __future__ import annotations

from functools import lru_cache

from dpspec.certificate.model import Formula

GAUSSIAN_RDP = "alpha*Delta**2/(2*sigma**2)"
GAUSSIAN_RDP_COMPOSED = "steps*alpha*Delta**2/(2*sigma**2)"
ANALYTIC_GAUSSIAN_DELTA = (
    "(1 + erf((mu/2 - epsilon/mu)/sqrt(2)))/2 - exp(epsilon)*(1 + erf((-mu/2 - epsilon/mu)/sqrt(2)))/2"
)
POISSON_SGM_INTEGER = (
    "steps*log(Sum(binomial(alpha, j)*(1 - q)**(alpha - j)*q**j*exp(j*(j - 1)/(2*sigma**2)), (j, 0, alpha)))"
    "/(alpha - 1)"
)
BALLE_CONVERSION = "rdp + log((alpha - 1)/alpha) - (log(delta) + log(alpha))/(alpha - 1)"
SIGMA_FOR_RDP = "sqrt(alpha*Delta**2/(2*epsilon))"


@lru_cache(maxsize=None)
def parse(expr: str):
    import sympy

    return sympy.sympify(expr, locals={"q": sympy.Symbol("q"), "Delta": sympy.Symbol("Delta"),
                                      "alpha": sympy.Symbol("alpha"), "epsilon": sympy.Symbol("epsilon")})


def latex(expr: str) -> str:
    import sympy

    return sympy.latex(parse(expr))


def evaluate(expr: str, variables: dict, digits: int = 40) -> float:
    """Evaluate with ``digits`` significant digits (exact rationals for the inputs)."""
    import sympy

    e = parse(expr)
    subs = {sympy.Symbol(k): sympy.nsimplify(v, rational=True) if isinstance(v, float) else v
            for k, v in variables.items() if v is not None}
    val = e.subs(subs)
    if val.has(sympy.Sum):
        val = val.doit()
    return float(sympy.N(val, digits))


def formula(name: str, expr: str, variables: dict, *, value: float | None = None,
            checks: list[tuple[float, float]] | None = None) -> Formula:
    return Formula(name=name, sympy=expr, latex=latex(expr), variables=variables, value=value,
                   checks=list(checks or []))
