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
# Wang, Balle & Kasiviswanathan 2019 Thm 9 for the Gaussian with batch sensitivity Delta (ε(∞) = ∞,
# so the min with (e^{ε(∞)} − 1)^j terms is 2); integer α ≥ 2.
WANG_THM9 = (
    "steps*log(1 + w**2*binomial(alpha, 2)*Min(4*(exp(Delta**2/sigma**2) - 1), 2*exp(Delta**2/sigma**2))"
    " + Sum(2*w**j*binomial(alpha, j)*exp((j - 1)*j*Delta**2/(2*sigma**2)), (j, 3, alpha)))/(alpha - 1)"
)
# Schuchardt et al. 2024 Thm 3.6 relaxed (two mixtures on a line, Thm H.12), batch sensitivity Delta.
TWO_MIXTURE = (
    "steps*log(Integral(((1 - w)*exp(-z**2/(2*sigma**2)) + w*exp(-(z - Delta)**2/(2*sigma**2)))**alpha"
    "*((1 - w)*exp(-z**2/(2*sigma**2)) + w*exp(-(z + Delta)**2/(2*sigma**2)))**(1 - alpha)"
    "/sqrt(2*pi*sigma**2), (z, -oo, oo)))/(alpha - 1)"
)
BALLE_CONVERSION = "rdp + log((alpha - 1)/alpha) - (log(delta) + log(alpha))/(alpha - 1)"
SIGMA_FOR_RDP = "sqrt(alpha*Delta**2/(2*epsilon))"


@lru_cache(maxsize=None)
def parse(expr: str):
    import sympy

    names = ("q", "Delta", "alpha", "epsilon", "w", "K", "steps", "sigma", "z", "mu", "rdp", "delta", "c", "c1",
             "c2", "Psi", "omega", "n1", "Lam", "csf", "ctheta", "epsL", "Dbar2", "sigma2")
    return sympy.sympify(expr, locals={n: sympy.Symbol(n) for n in names})


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
    if val.has(sympy.Integral):
        return _integral_value(val, digits)
    return float(sympy.N(val, digits))


def _integral_value(val, digits: int) -> float:
    """Evaluate an expression containing 1-D integrals over the real line with mpmath, splitting the
    range at ±60σ-scale breakpoints so that tanh-sinh sees each mode (digest §11.5)."""
    import mpmath
    import sympy

    with mpmath.workdps(digits):
        reps = {}
        for integral in val.atoms(sympy.Integral):
            (var, lo, hi), = integral.limits
            f = sympy.lambdify(var, integral.function, modules="mpmath")
            pts = [-mpmath.inf] + [mpmath.mpf(x) for x in range(-60, 61, 4)] + [mpmath.inf]
            reps[integral] = sympy.Float(mpmath.quad(f, pts), digits)
        return float(sympy.N(val.xreplace(reps), digits))


def group_removal(alpha: int) -> str:
    """Schuchardt et al. 2024 Thm 4.2 removal term at integer α as an explicit finite sum: with
    w_k = Bin(k | K, q), E_Z[(Σ_k w_k e^{(kZ − k²/2)/σ²})^α] = Σ_{k_1..k_α} Π_i w_{k_i} e^{−k_i²/(2σ²)}
    · e^{(Σ_i k_i)²/(2σ²)} (Gaussian moment generating function)."""
    ks = [f"k{i}" for i in range(1, alpha + 1)]
    w = "*".join(f"binomial(K, {k})*q**{k}*(1 - q)**(K - {k})*exp(-{k}**2/(2*sigma**2))" for k in ks)
    body = f"{w}*exp(({' + '.join(ks)})**2/(2*sigma**2))"
    for k in ks:
        body = f"Sum({body}, ({k}, 0, K))"
    return f"steps*log({body})/({alpha} - 1)"


def formula(name: str, expr: str, variables: dict, *, value: float | None = None,
            checks: list[tuple[float, float]] | None = None, check: str = "upper_bound") -> Formula:
    return Formula(name=name, sympy=expr, latex=latex(expr), variables=variables, value=value,
                   checks=list(checks or []), check=check)
