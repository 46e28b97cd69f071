"""GCON calibration: edge-level DP graph convolution by objective perturbation.

Source
------
Wei, Zhu, Xiao, Bao, Yang, Cai, Ooi, "GCON: Differentially Private Graph Convolutional Network via
Objective Perturbation", arXiv:2407.05034v2 (ICDE 2025). Equation numbers ``(n)`` below are the
paper's; "Thm 1" is its main privacy theorem, "Lemma 2" its propagation sensitivity, "Lemma 9" its
tail bound. Derivations: ``dpspec/families/gcon/PROOF.md`` (formulas F1-F15).

What this module computes
-------------------------
``gcon_calibration`` is the calibration chain of Theorem 1, evaluated in the paper's order
(19) -> (20) -> (21) -> (22) -> (23) -> (24) -> (17) -> (18):

    c1, c2, c3 (19) -> Psi (20) -> c_sf (21) -> Lambda floor (22) -> c_theta (23)
    -> eps_Lambda (24) -> Lambda' (17) -> beta (18)

It is a pure function of public quantities (epsilon, delta, number of classes c, dimension d,
number of loss nodes n1, restart alpha, propagation steps, Lambda, loss, omega, xi). It never sees
the graph.

Theorem 1 is stated for the **exact** minimiser of the perturbed objective (13). A numerical solver
returns an approximate minimiser. ``amp_calibration`` and ``gcon_release_calibration`` make the
released model rigorous by the approximate-minima-perturbation argument (Iyengar et al. 2019,
"Towards Practical Differentially Private Convex Optimization", IEEE S&P, Alg. 1 "AMP" and its
privacy theorem), re-derived here for GCON:

    Let T = argmin L_priv (GCON Thm 1: (eps_op, delta_op)-DP). The solver output is
    T_hat = h_D(T) with ||T_hat - T||_F <= gamma / mu whenever ||grad L_priv(T_hat)||_F <= gamma,
    because L_priv is mu-strongly convex with mu = Lambda + Lambda' (Lemma 4 + Fact 1). For a fixed
    T = t, the map D -> h_D(t) - t has L2 sensitivity <= 2 gamma / mu, so releasing
    T_hat + N(0, sigma^2 I) is, given t, the Gaussian mechanism (analytic calibration, Balle & Wang
    2018, Thm 8) with (eps_amp, delta_amp). Adaptive composition (Dwork & Roth 2014, Thm B.1)
    gives (eps_op + eps_amp, delta_op + delta_amp)-DP for (T, release); the release alone is a
    post-processing. The bijection T <-> B of Lemma 5 makes h_D a function of (D, t).

    Scope: the argument needs the gradient certificate to pass on every input. If it fails, the
    runtime raises DPS719 and releases nothing; that abort is itself a data-dependent event which
    the guarantee does not cover. It cannot be ruled out formally in floating point, but the
    solver is Newton's method on a smooth, mu-strongly convex problem and ``grad_tol`` is checked
    against the rounding floor up front, so it is not expected (not observed in the tests,
    benchmarks or evaluation). A failed run must not be retried on the same graph unaccounted.

Floating point
--------------
The chain is evaluated in float64 with directed safety margins so that rounding cannot make a
certified quantity optimistic: c_sf is rounded *up* (relative 2e-13, then verified with the
regularised upper incomplete gamma function, ``Q(d, c_sf) <= (delta/c)(1 - 1e-12)``) and beta is
rounded *down* (relative 1e-14). Both conditions of the proof are then re-checked on the final
floats and reported under ``checks``: the epsilon spent by eq. (45) with the objective's
Lambda + Lambda' (``<= epsilon``; beta is nudged further down if rounding breaks it), and the
Lemma 9 tail ``c Q(d, beta n1 (Lambda c_theta - c1)) <= delta`` (with ``Lambda c_theta - c1`` in a
cancellation-free closed form). If both cannot hold, an internal error is raised rather than a
number returned. The margins are far below the 1e-9 reproduction tolerance of the digest's test
vectors. All functions here use numpy/scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from scipy import special

from .errors import SoundnessError, register_rules

__all__ = [
    "GconError",
    "GCON_RULES",
    "GCON_THEOREM",
    "GCON_ASSUMPTIONS",
    "SUPPORTED_LOSSES",
    "loss_constants",
    "normalise_steps",
    "propagation_sensitivity",
    "tail_constant",
    "regularization_floor",
    "gcon_calibration",
    "analytic_gaussian_sigma",
    "amp_calibration",
    "gcon_release_calibration",
    "solver_rounding_floor",
]

# --------------------------------------------------------------------------------------------
# Named rules and errors
# --------------------------------------------------------------------------------------------

GCON_RULES: dict[str, str] = {
    "DPS701": "epsilon must be finite and > 0",
    "DPS702": "delta must satisfy 0 < delta < 1 (delta = 0 is impossible: c_sf = inf, eq. (21))",
    "DPS703": "loss must be one whose constants c1, c2, c3 are proven: 'msml' or 'pseudo_huber'",
    "DPS704": "pseudo-Huber needs huber_delta > 0 (and MSML takes none)",
    "DPS705": "restart probability alpha must lie in (0, 1]",
    "DPS706": "propagation steps must be non-negative integers or 'inf' (PPR), at least one",
    "DPS707": "regularization Lambda must be finite and > 0",
    "DPS708": "budget_split omega must lie strictly in (0, 1)",
    "DPS709": "xi must be finite and > 0 (eq. (22))",
    "DPS710": "num_classes >= 2, dim >= 1 and num_train >= 1 must be integers",
    "DPS711": "dim d larger than the number of training nodes n1",
    "DPS712": "Lambda raised to the floor of eq. (22) (warning)",
    "DPS713": "Lambda close to the floor of eq. (22): c_theta and the noise explode (warning)",
    "DPS714": "Psi = 0: the graph is not used (alpha = 1 or all steps 0); no noise needed (warning)",
    "DPS715": "features must be row-normalised: ||x_i||_2 = 1 after the encoder (Sec. IV-C1)",
    "DPS716": "graph must be non-empty, undirected, unweighted, without out-of-range node ids",
    "DPS717": "graph has several connected components or no edge at all (warning)",
    "DPS718": "every training node needs a label in {0, ..., c-1}",
    "DPS719": "the solver did not reach the certified gradient-norm bound; nothing is released",
    "DPS720": "approximate-minimiser share (AMP) invalid, or the exact-minimiser assumption used",
    "DPS721": "hyper-parameter tuning on the private graph is not covered by one run's certificate (a `tune` "
    "block covers it)",
    "DPS722": "pseudo-labels: n1 = n, labels from the edge-free encoder (see caveat)",
    "DPS723": "private inference answers are private only when each node receives its own answer",
    "DPS724": "floating-point caveat of continuous noise samplers",
    "DPS725": "softmax cross-entropy / non-separable losses break Lemma 7 (block-diagonal Jacobian)",
}


register_rules(GCON_RULES)


class GconError(SoundnessError):
    """A GCON configuration for which Theorem 1 (Wei et al. 2024) does not apply.

    Attributes: ``rule`` (stable id, e.g. ``"DPS702"``), ``message``, ``hint`` (how to fix).
    """

    def __init__(self, rule: str, message: str, hint: str = "") -> None:
        if rule not in GCON_RULES:
            raise ValueError(f"unknown GCON rule id {rule!r}")
        super().__init__(message, rule=rule, hint=hint or None)
        self.hint = hint

    def to_diagnostic(self) -> dict[str, str | None]:
        return {"rule": self.rule, "severity": "error", "message": self.message, "hint": self.hint}


def _warning(rule: str, message: str, hint: str = "") -> dict[str, str]:
    return {"rule": rule, "severity": "warning", "message": message, "hint": hint}


GCON_THEOREM = "Wei et al. 2024 Thm 1"

#: Assumptions of Theorem 1, each with the paper location it comes from.
GCON_ASSUMPTIONS: tuple[dict[str, str], ...] = (
    {
        "id": "A1",
        "text": "neighbouring graphs differ by adding/removing one undirected, unweighted "
        "edge; nodes, features X and labels Y are identical (public)",
        "source": "Wei et al. 2024, Sec. III, Def. 1 / eq. (8)",
    },
    {
        "id": "A2",
        "text": "transition matrix A~ = D^-1 (A + I), A symmetric 0/1 with zero diagonal",
        "source": "Wei et al. 2024, Sec. IV-C2, Alg. 1 line 4; Lemma 1",
    },
    {
        "id": "A3",
        "text": "propagation R_m (APPR) / R_inf (PPR), Z = (1/s)[Z_m1 || ... || Z_ms]",
        "source": "Wei et al. 2024, eqs. (4), (9), (10), (11)",
    },
    {
        "id": "A4",
        "text": "encoder and pseudo-labels use no edges; every feature row has ||x_i||_2 <= 1",
        "source": "Wei et al. 2024, Sec. IV-C1, Alg. 3; App. G",
    },
    {
        "id": "A5",
        "text": "linear model Y_hat = Z Theta, no bias; class-separable convex loss with "
        "bounded |l'|, |l''|, |l'''| (MSML eq. (27) or pseudo-Huber eq. (28))",
        "source": "Wei et al. 2024, eqs. (12), (19), (27), (28); App. F",
    },
    {
        "id": "A6",
        "text": "objective L_priv = (1/n1) sum L + (Lambda/2)||Theta||^2 + (1/n1) B.Theta "
        "+ (Lambda'/2)||Theta||^2 with the Lambda raised by eq. (22)",
        "source": "Wei et al. 2024, eqs. (13), (15), (22)",
    },
    {
        "id": "A7",
        "text": "noise columns b_j i.i.d. with density prop. to exp(-beta ||b||): Erlang(d, beta) "
        "radius, uniform direction",
        "source": "Wei et al. 2024, eq. (14), Alg. 2, Lemma 6",
    },
    {
        "id": "A8",
        "text": "Theta_priv is the exact argmin of L_priv (replaced here by the AMP argument "
        "with a certified gradient-norm bound)",
        "source": "Wei et al. 2024, eq. (15), Lemma 5; Iyengar et al. 2019 Alg. 1",
    },
    {
        "id": "A9",
        "text": "0 < delta (pDP tail event of probability <= delta, Lemma 9) and pDP => DP",
        "source": "Wei et al. 2024, eq. (21), Lemma 9, Lemma 10",
    },
    {
        "id": "A10",
        "text": "a single release with hyper-parameters fixed independently of the private "
        "edges (no tuning on the private graph)",
        "source": "Wei et al. 2024, Sec. VI / App. Q (tuning not accounted)",
    },
)

SUPPORTED_LOSSES = ("msml", "pseudo_huber")
_LOSS_ALIASES = {
    "msml": "msml",
    "multilabel_soft_margin": "msml",
    "multilabelsoftmargin": "msml",
    "pseudo_huber": "pseudo_huber",
    "pseudo-huber": "pseudo_huber",
    "pseudohuber": "pseudo_huber",
    "huber": "pseudo_huber",
}
_REJECTED_LOSSES = {
    "cross_entropy": "softmax cross-entropy couples the classes; Lemma 7 needs a class-separable "
    "loss (block-diagonal Jacobian)",
    "softmax": "softmax cross-entropy couples the classes; Lemma 7 needs a class-separable loss",
    "ce": "softmax cross-entropy couples the classes; Lemma 7 needs a class-separable loss",
    "hinge": "hinge is not differentiable (c2, c3 undefined)",
    "squared": "squared loss has unbounded l' (c1 = inf)",
    "mse": "squared loss has unbounded l' (c1 = inf)",
}

_CSF_INFLATE = 2e-13  # relative upward rounding of c_sf (tail slack for Lemma 9)
_CSF_TAIL_MARGIN = 1e-12  # c_sf is bumped until Q(d, c_sf) <= (delta/c)(1 - this)
_BETA_DEFLATE = 1e-14  # relative downward rounding of beta (epsilon slack for eq. (45))
NEAR_FLOOR_FACTOR = 2.0  # warn when Lambda_eff < NEAR_FLOOR_FACTOR * Lambda_min (digest §4.10)


# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------


def _finite_positive(name: str, value: Any, rule: str, hint: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise GconError(rule, f"{name} must be a number, got {value!r}", hint) from None
    if not math.isfinite(v) or v <= 0.0:
        raise GconError(rule, f"{name} must be finite and > 0, got {value!r}", hint)
    return v


def _positive_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise GconError(
                "DPS710", f"{name} must be an integer, got {value!r}", f"pass an integer {name} >= {minimum}"
            )
    value = int(value)
    if value < minimum:
        raise GconError("DPS710", f"{name} must be >= {minimum}, got {value}", f"pass an integer {name} >= {minimum}")
    return value


def _canonical_loss(loss: str) -> str:
    key = str(loss).strip().lower().replace(" ", "_")
    if key in _LOSS_ALIASES:
        return _LOSS_ALIASES[key]
    why = _REJECTED_LOSSES.get(key, "its constants c1, c2, c3 are not proven")
    rule = "DPS725" if key in ("cross_entropy", "softmax", "ce") else "DPS703"
    raise GconError(
        rule,
        f"loss {loss!r} is not supported: {why}",
        "use loss='msml' (MultiLabelSoftMargin, eq. (27)) or 'pseudo_huber' (eq. (28))",
    )


def _check_restart(restart: Any) -> float:
    try:
        a = float(restart)
    except (TypeError, ValueError):
        raise GconError(
            "DPS705",
            f"restart must be a number, got {restart!r}",
            "choose alpha in (0, 1]; the paper recommends alpha >= 0.4",
        ) from None
    if not (math.isfinite(a) and 0.0 < a <= 1.0):
        raise GconError(
            "DPS705",
            f"restart probability alpha = {restart!r} is outside (0, 1]",
            "choose alpha in (0, 1]; alpha = 0 (plain SGC) is outside Lemma 2 as stated",
        )
    return a


# --------------------------------------------------------------------------------------------
# The chain
# --------------------------------------------------------------------------------------------


def loss_constants(loss: str, num_classes: int, huber_delta: float | None = None) -> tuple[float, float, float]:
    """Return ``(c1, c2, c3) = (sup|l'|, sup|l''|, sup|l'''|)`` -- eq. (19), App. F.

    * MSML, eq. (27): ``l(x;y) = -(1/c)[y log s(x) + (1-y) log(1-s(x))]``, giving
      ``c1 = 1/c``, ``c2 = 1/(4c)``, ``c3 = 1/(6 sqrt(3) c)`` (App. F; the appendix's second
      "sup|l'|" is a typo for sup|l''|).
    * pseudo-Huber, eq. (28): ``l(x;y) = (dl^2/c)(sqrt(1 + (x-y)^2/dl^2) - 1)``, giving
      ``c1 = dl/c``, ``c2 = 1/c``, ``c3 = 48 sqrt(5) / (125 c dl)`` (max of t/(1+t^2)^{5/2} at t=1/2).
    """
    c = _positive_int("num_classes", num_classes, 2)
    name = _canonical_loss(loss)
    if name == "msml":
        if huber_delta is not None:
            raise GconError(
                "DPS704", "huber_delta was given but the loss is MSML", "drop huber_delta, or use loss='pseudo_huber'"
            )
        return 1.0 / c, 1.0 / (4.0 * c), 1.0 / (6.0 * math.sqrt(3.0) * c)
    if huber_delta is None:
        raise GconError(
            "DPS704",
            "pseudo-Huber loss needs huber_delta (delta_l) > 0",
            "pass huber_delta, e.g. 0.1, 0.2 or 0.5 (the paper's grid, App. Q)",
        )
    dl = _finite_positive("huber_delta", huber_delta, "DPS704", "pass huber_delta > 0")
    return dl / c, 1.0 / c, 48.0 * math.sqrt(5.0) / (125.0 * c * dl)


def normalise_steps(steps: Any) -> tuple[float, ...]:
    """Canonical tuple of propagation depths ``m_i`` (ints as floats, PPR as ``math.inf``).

    Accepts an int, ``"inf"`` / ``math.inf`` (PPR, eq. (9) with m = inf), or a non-empty list.
    """
    if isinstance(steps, (str, int, float, np.integer, np.floating)) and not isinstance(steps, bool):
        items: Iterable[Any] = [steps]
    else:
        try:
            items = list(steps)
        except TypeError:
            raise GconError(
                "DPS706",
                f"steps must be an int, 'inf' or a list, got {steps!r}",
                "e.g. steps=2, steps='inf' or steps=[0, 1, 2]",
            ) from None
    out: list[float] = []
    for m in items:
        if isinstance(m, str):
            if m.strip().lower() in ("inf", "infinity", "ppr", "\u221e"):
                out.append(math.inf)
                continue
            raise GconError(
                "DPS706",
                f"propagation step {m!r} is not an integer or 'inf'",
                "use non-negative integers, or 'inf' for PPR",
            )
        if isinstance(m, bool):
            raise GconError(
                "DPS706", f"propagation step {m!r} is a bool", "use non-negative integers, or 'inf' for PPR"
            )
        try:
            v = float(m)
        except (TypeError, ValueError):
            raise GconError(
                "DPS706", f"propagation step {m!r} is not a number", "use non-negative integers, or 'inf' for PPR"
            ) from None
        if v == math.inf:
            out.append(math.inf)
        elif math.isfinite(v) and v >= 0 and v.is_integer():
            out.append(v)
        else:
            raise GconError(
                "DPS706",
                f"propagation step {m!r} must be a non-negative integer or inf",
                "use non-negative integers, or 'inf' for PPR",
            )
    if not out:
        raise GconError("DPS706", "no propagation step given", "give at least one m_i, e.g. [2]")
    return tuple(out)


def propagation_sensitivity(restart: float, steps: Any) -> float:
    """Sensitivity ``Psi(Z)`` of the concatenated propagated features -- eq. (20), Lemma 2.

    ``Psi(Z) = (1/s) sum_i 2(1-alpha)/alpha [1 - (1-alpha)^{m_i}]``; the ``m_i = inf`` (PPR) term
    is ``2(1-alpha)/alpha`` and ``m_i = 0`` gives 0. ``Psi`` is the max over edge-neighbouring graphs
    of ``sum_i ||z_i - z'_i||_2`` (Def. 3) for unit-norm feature rows; it does not depend on
    degrees or on n. Monotone non-decreasing in every m_i and non-increasing in alpha.
    """
    a = _check_restart(restart)
    ms = normalise_steps(steps)
    q = 1.0 - a
    total = 0.0
    for m in ms:
        if m == 0.0 or q == 0.0:
            continue
        if m == math.inf:
            total += 2.0 * q / a
        else:
            # 2(1-a)/a * (1 - q^m), computed as -2q/a * expm1(m log q) to keep precision
            total += -2.0 * q / a * math.expm1(m * math.log(q))
    return total / len(ms)


def tail_constant(delta: float, num_classes: int, dim: int) -> float:
    """``c_sf``: the upper-(delta/c) quantile of Gamma(shape=d, scale=1) -- eq. (21).

    ``c_sf = min{u > 0 : int_0^u x^{d-1} e^{-x}/(d-1)! dx >= 1 - delta/c}``, computed with the
    inverse regularised upper incomplete gamma function (no ``1 - p`` cancellation), then rounded
    up by a relative ``2e-13`` and verified: ``Q(d, c_sf) <= (delta/c)(1 - 1e-12)``.
    """
    c = _positive_int("num_classes", num_classes, 2)
    d = _positive_int("dim", dim, 1)
    q = float(delta) / c
    if not (0.0 < q < 1.0):
        raise GconError("DPS702", f"delta/c = {q!r} is outside (0, 1)", "use 0 < delta < 1")
    u = float(special.gammainccinv(d, q))
    if not math.isfinite(u) or u <= 0.0:
        raise GconError(
            "DPS702",
            f"c_sf could not be computed for delta={delta!r}, d={d}",
            "delta is too small for float64; use delta >= 1e-300",
        )
    u *= 1.0 + _CSF_INFLATE
    for _ in range(1000):  # verify the tail, bump further if the special function disagrees
        if special.gammaincc(d, u) <= q * (1.0 - _CSF_TAIL_MARGIN):
            return u
        u *= 1.0 + 1e-12
    raise GconError("DPS702", f"could not verify the Gamma({d},1) tail at delta/c = {q!r}", "use a larger delta")


def _epsilon_spent(
    c: int,
    d: int,
    n1: int,
    lam: float,
    lam_prime: float,
    c1: float,
    c2: float,
    c3: float,
    c_theta: float,
    psi: float,
    beta: float,
) -> float:
    """Left side of eq. (45) for the objective actually solved (Lambda + Lambda'), Lemmas 7-8:
    ``c d log1p((2c2 + c3 c_theta) Psi / (d n1 (Lambda + Lambda'))) + beta c (c1 + c2 c_theta) Psi``.
    """
    jac = c * d * math.log1p((2.0 * c2 + c3 * c_theta) * psi / (d * n1 * (lam + lam_prime)))
    return jac + beta * c * (c1 + c2 * c_theta) * psi


def regularization_floor(
    epsilon: float, num_classes: int, c2: float, sensitivity: float, c_sf: float, num_train: int, budget_split: float
) -> float:
    """``Lambda_min = c c2 Psi c_sf / (n1 omega eps)`` -- the floor inside eq. (22).

    Eq. (22) sets ``Lambda <- max(Lambda, Lambda_min + xi)``; the floor makes the denominator of
    c_theta (23) strictly positive, ``n1 omega eps Lambda > c c2 Psi c_sf``.
    """
    return num_classes * c2 * sensitivity * c_sf / (num_train * budget_split * epsilon)


def gcon_calibration(
    epsilon: float,
    delta: float,
    num_classes: int,
    dim: int,
    num_train: int,
    restart: float,
    steps: Any,
    regularization: float,
    loss: str = "msml",
    budget_split: float = 0.9,
    xi: float = 1e-3,
    huber_delta: float | None = None,
) -> dict[str, Any]:
    """Theorem 1 calibration chain (Wei et al. 2024), eqs. (19)-(24), (17), (18).

    Parameters: ``epsilon`` (eps > 0), ``delta`` (0 < delta < 1), ``num_classes`` (c >= 2),
    ``dim`` (d = s * d1, rows of Theta), ``num_train`` (n1, nodes in the loss, incl. pseudo-labels),
    ``restart`` (alpha in (0, 1]), ``steps`` (m_i: int, 'inf' or a list), ``regularization``
    (nominal Lambda > 0), ``loss`` ('msml' | 'pseudo_huber'), ``budget_split`` (omega in (0, 1),
    paper: 0.9), ``xi`` (> 0, eq. (22)), ``huber_delta`` (delta_l, pseudo-Huber only).

    Returns a JSON-friendly dict with, in the chain's order: ``c1, c2, c3`` (19), ``sensitivity``
    (Psi, 20), ``c_sf`` (21), ``regularization_floor`` and ``regularization`` (Lambda after the
    floor, 22; *use this Lambda in the objective*), ``c_theta`` (23), ``epsilon_lambda`` (24),
    ``extra_regularization`` (Lambda', 17), ``beta`` (18), plus ``strong_convexity``
    (Lambda + Lambda'), ``jacobian_part``, ``noise_part`` (eq. (45)), ``expected_noise_norm``
    (E||b_j|| = d / beta), ``warnings`` (list of diagnostics) and provenance fields.

    Raises ``GconError`` (rules DPS701-DPS711, DPS725) when Theorem 1 does not apply.
    Psi = 0 (alpha = 1 or all m_i = 0) returns ``beta = inf`` (no noise): the edges are unused.
    """
    eps = _finite_positive("epsilon", epsilon, "DPS701", "use a finite epsilon > 0")
    try:
        dlt = float(delta)
    except (TypeError, ValueError):
        raise GconError("DPS702", f"delta must be a number, got {delta!r}", "use 0 < delta < 1") from None
    if not (math.isfinite(dlt) and 0.0 < dlt < 1.0):
        hint = (
            "GCON's proof spends delta on the tail event ||theta_j|| > c_theta (Lemma 9); "
            "with delta = 0, c_sf = inf and no Lambda works. Use e.g. delta = 1/|E|"
            if dlt == 0.0
            else "use 0 < delta < 1, e.g. 1/|E|"
        )
        raise GconError("DPS702", f"delta = {delta!r} is not in (0, 1)", hint)
    c = _positive_int("num_classes", num_classes, 2)
    d = _positive_int("dim", dim, 1)
    n1 = _positive_int("num_train", num_train, 1)
    if d > n1:
        raise GconError(
            "DPS711",
            f"dim d = {d} is larger than the number of training nodes n1 = {n1}",
            "reduce the encoder width d1 or the number of step settings s, or use "
            "pseudo-labels (n1 = n, App. Q); the noise term d/(beta n1) would swamp the data",
        )
    alpha = _check_restart(restart)
    ms = normalise_steps(steps)
    lam_nominal = _finite_positive(
        "regularization", regularization, "DPS707", "use Lambda > 0, e.g. 0.2 or 1 (the paper's grid {0.01,0.2,1,2})"
    )
    omega = float(budget_split)
    if not (math.isfinite(omega) and 0.0 < omega < 1.0):
        raise GconError(
            "DPS708",
            f"budget_split omega = {budget_split!r} is outside (0, 1)",
            "use omega in (0, 1); the paper fixes 0.9",
        )
    xi_v = _finite_positive("xi", xi, "DPS709", "use a small xi > 0, e.g. 1e-3")
    loss_name = _canonical_loss(loss)
    c1, c2, c3 = loss_constants(loss_name, c, huber_delta)  # (19)
    psi = propagation_sensitivity(alpha, ms)  # (20)
    c_sf = tail_constant(dlt, c, d)  # (21)

    warnings: list[dict[str, str]] = []
    lam_min = regularization_floor(eps, c, c2, psi, c_sf, n1, omega)
    lam = max(lam_nominal, lam_min + xi_v)  # (22)
    raised = lam > lam_nominal
    if raised:
        warnings.append(
            _warning(
                "DPS712",
                f"Lambda raised from {lam_nominal:.6g} to {lam:.6g} (floor {lam_min:.6g} + "
                f"xi {xi_v:.3g}, eq. (22)); the raised Lambda is used in the objective",
                "choose Lambda >= 2 x the floor to avoid the near-singular regime",
            )
        )
    if psi > 0.0 and lam < NEAR_FLOOR_FACTOR * lam_min:
        warnings.append(
            _warning(
                "DPS713",
                f"Lambda = {lam:.6g} is within a factor {NEAR_FLOOR_FACTOR:g} of the floor "
                f"{lam_min:.6g}: c_theta (23) is near-singular and the noise explodes",
                f"use Lambda >= {NEAR_FLOOR_FACTOR * lam_min:.4g}, a larger n1 or a larger alpha",
            )
        )

    if psi == 0.0:
        warnings.append(
            _warning(
                "DPS714",
                "Psi = 0 (alpha = 1 or all steps 0): the edges are never read; no noise needed",
                "this is an edge-free model; the certificate states that the graph is unused",
            )
        )
        c_theta = c1 / lam
        eps_lam = 0.0
        lam_prime = 0.0
        beta = math.inf
        noise_part = 0.0
    else:
        denom = n1 * omega * eps * lam - c * c2 * psi * c_sf
        if not denom > 0.0:
            raise GconError(
                "DPS709",
                "n1 omega eps Lambda <= c c2 Psi c_sf after eq. (22)",
                "xi is too small to survive rounding; use xi >= 1e-9 * Lambda_min",
            )
        c_theta = (n1 * omega * eps * c1 + c * c1 * psi * c_sf) / denom  # (23)
        eps_lam = c * d * math.log1p((2.0 * c2 + c3 * c_theta) * psi / (d * n1 * lam))  # (24)
        if eps_lam <= (1.0 - omega) * eps:  # (17)
            lam_prime = 0.0
        else:
            lam_prime = c * (2.0 * c2 + c3 * c_theta) * psi / (n1 * (1.0 - omega) * eps) - lam
            lam_prime = max(lam_prime, 0.0)
        noise_part = max(eps - eps_lam, omega * eps)
        beta = noise_part / (c * (c1 + c2 * c_theta) * psi)  # (18)
        beta *= 1.0 - _BETA_DEFLATE
        for _ in range(100):  # rounding guard on eq. (45); beta only goes down
            if _epsilon_spent(c, d, n1, lam, lam_prime, c1, c2, c3, c_theta, psi, beta) <= eps:
                break
            beta *= 1.0 - 1e-14

    jacobian_part = min(eps_lam, (1.0 - omega) * eps)
    mu = lam + lam_prime
    if psi == 0.0:
        eps_spent, tail = 0.0, 0.0
    else:
        eps_spent = _epsilon_spent(c, d, n1, lam, lam_prime, c1, c2, c3, c_theta, psi, beta)
        # Lemma 9 radius n1 (Lambda c_theta - c1), in the cancellation-free form
        # Lambda c_theta - c1 = c c1 Psi c_sf (Lambda + c2) / denom (from eq. (23))
        radius = n1 * c * c1 * psi * c_sf * (lam + c2) / denom
        tail = c * float(special.gammaincc(d, beta * radius))
        if not (eps_spent <= eps and tail <= dlt):
            raise GconError(
                "DPS701",
                "internal: the calibrated (beta, Lambda') fail the eq. (45) / "
                f"Lemma 9 re-check (eps spent {eps_spent!r} vs {eps!r}, tail {tail!r} "
                f"vs {dlt!r})",
                "report this configuration; it is a rounding corner case",
            )
    result: dict[str, Any] = {
        "theorem": GCON_THEOREM,
        "mechanism": "gcon-objective-perturbation",
        "neighbouring": "edge add/remove (undirected, unweighted)",
        "epsilon": eps,
        "delta": dlt,
        "num_classes": c,
        "dim": d,
        "num_train": n1,
        "restart": alpha,
        "steps": [("inf" if m == math.inf else int(m)) for m in ms],
        "loss": loss_name,
        "huber_delta": None if huber_delta is None else float(huber_delta),
        "budget_split": omega,
        "xi": xi_v,
        "c1": c1,
        "c2": c2,
        "c3": c3,
        "sensitivity": psi,
        "c_sf": c_sf,
        "regularization_nominal": lam_nominal,
        "regularization_floor": lam_min,
        "regularization": lam,
        "regularization_raised": raised,
        "c_theta": c_theta,
        "epsilon_lambda": eps_lam,
        "extra_regularization": lam_prime,
        "beta": beta,
        "strong_convexity": mu,
        "jacobian_part": jacobian_part,
        "noise_part": noise_part,
        "expected_noise_norm": (d / beta) if beta != math.inf else 0.0,
        "graph_unused": psi == 0.0,
        "assumes_exact_minimiser": True,
        "equations": {
            "c1,c2,c3": "(19), App. F",
            "sensitivity": "(20), Lemma 2",
            "c_sf": "(21)",
            "regularization": "(22)",
            "c_theta": "(23)",
            "epsilon_lambda": "(24)",
            "extra_regularization": "(17)",
            "beta": "(18)",
            "budget_identity": "(45)",
            "tail": "Lemma 9, (60)",
        },
        "rounding": {
            "c_sf_inflation": _CSF_INFLATE,
            "c_sf_tail_margin": _CSF_TAIL_MARGIN,
            "beta_deflation": _BETA_DEFLATE,
        },
        "checks": {"epsilon_spent": eps_spent, "tail_probability": tail},
        "warnings": warnings,
    }
    return result


# --------------------------------------------------------------------------------------------
# Approximate minimiser: AMP-style output noise
# --------------------------------------------------------------------------------------------


def _gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """delta(eps) of the Gaussian mechanism, Balle & Wang 2018 Thm 8 (exact, not a bound)."""
    a = sensitivity / (2.0 * sigma) - epsilon * sigma / sensitivity
    b = -sensitivity / (2.0 * sigma) - epsilon * sigma / sensitivity
    return float(special.ndtr(a) - math.exp(epsilon + float(special.log_ndtr(b))))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest sigma (rounded up) such that ``x + N(0, sigma^2 I)`` is (eps, delta)-DP for
    L2 sensitivity ``sensitivity`` -- the analytic Gaussian mechanism, Balle & Wang 2018, Thm 8:
    ``Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta``. Bisection in log(sigma),
    60 halvings, upper end returned and inflated by 1e-9 relative.
    """
    eps = _finite_positive("epsilon", epsilon, "DPS720", "use eps_amp > 0")
    dlt = float(delta)
    if not (0.0 < dlt < 1.0):
        raise GconError("DPS720", f"delta_amp = {delta!r} is outside (0, 1)", "use 0 < delta_amp < 1")
    if sensitivity == 0.0:
        return 0.0
    sens = _finite_positive("sensitivity", sensitivity, "DPS720", "use a finite sensitivity")
    lo, hi = sens * 1e-6, sens
    while _gaussian_delta(hi, eps, sens) > dlt:
        hi *= 2.0
    while _gaussian_delta(lo, eps, sens) <= dlt:
        lo *= 0.5
        if lo < sens * 1e-300:
            break
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if _gaussian_delta(mid, eps, sens) <= dlt:
            hi = mid
        else:
            lo = mid
        if hi / lo - 1.0 < 1e-12:
            break
    return hi * (1.0 + 1e-9)


def amp_calibration(epsilon: float, delta: float, grad_norm_bound: float, strong_convexity: float) -> dict[str, Any]:
    """Output noise that makes an *approximate* minimiser private (AMP step).

    If ``||grad L_priv(Theta_hat)||_F <= gamma`` and ``L_priv`` is ``mu``-strongly convex, then
    ``||Theta_hat - Theta*||_F <= gamma / mu`` (Nesterov 2004, Thm 2.1.10); for neighbours the
    difference map has L2 sensitivity ``2 gamma / mu``. Releasing ``Theta_hat + N(0, sigma^2 I)``
    with sigma from the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) costs
    ``(epsilon, delta)`` on top of GCON's Theorem 1 (adaptive composition, Dwork & Roth 2014,
    Thm B.1). This is the approximate-minima-perturbation argument of Iyengar et al. 2019 (Alg. 1).
    """
    gamma = float(grad_norm_bound)
    if not (math.isfinite(gamma) and gamma > 0.0):
        raise GconError(
            "DPS720",
            f"gradient-norm bound gamma = {grad_norm_bound!r} must be > 0",
            "use a tolerance like 1e-9 that the solver can certify",
        )
    mu = _finite_positive("strong_convexity", strong_convexity, "DPS707", "mu = Lambda + Lambda' > 0")
    sens = 2.0 * gamma / mu
    sigma = analytic_gaussian_sigma(epsilon, delta, sens)
    return {
        "theorem": "Iyengar et al. 2019 Alg. 1 (AMP); Balle & Wang 2018 Thm 8; Dwork & Roth 2014 Thm B.1",
        "epsilon": float(epsilon),
        "delta": float(delta),
        "grad_norm_bound": gamma,
        "strong_convexity": mu,
        "distance_bound": gamma / mu,
        "sensitivity": sens,
        "sigma": sigma,
    }


def solver_rounding_floor(num_train: int, dim: int, num_classes: int) -> float:
    """A data-independent lower limit for a certifiable gradient tolerance (a guard, not a bound).

    The solver's a-posteriori rounding bound (``dpspec.families.gcon.objective.certified_gradient_norm``)
    is dominated by ``gamma_{n1} |Z|^T |l'| / n1``, about ``n1 u c1`` per coordinate, i.e.
    ``~ n1 u sqrt(d c)`` in Frobenius norm (u = 2^-53, c1 <= 1). A ``grad_tol`` below
    ``(n1 + d + 8) u sqrt(d c)`` can therefore never be certified and is rejected up front
    (DPS720); tolerances should exceed it by a wide margin. The actual certificate is checked on
    the solver output, so this guard only avoids a certain failure (which would itself be a
    data-dependent event).
    """
    u = 2.0**-53
    return (num_train + dim + 8) * u * math.sqrt(dim * num_classes)


def gcon_release_calibration(
    epsilon: float,
    delta: float,
    num_classes: int,
    dim: int,
    num_train: int,
    restart: float,
    steps: Any,
    regularization: float,
    loss: str = "msml",
    budget_split: float = 0.9,
    xi: float = 1e-3,
    huber_delta: float | None = None,
    amp_fraction: float = 0.01,
    grad_tol: float = 1e-9,
) -> dict[str, Any]:
    """Full budget for a *released* GCON model trained by a numerical solver.

    Splits (epsilon, delta) into ``(eps_op, delta_op) = (1 - f)(epsilon, delta)`` for Theorem 1
    (``gcon_calibration``) and ``(eps_amp, delta_amp) = f (epsilon, delta)`` for the output noise of
    ``amp_calibration``, with ``f = amp_fraction`` in (0, 1). ``grad_tol`` (gamma) is the
    Frobenius-norm gradient bound that the solver must certify; it must be fixed before seeing the
    data. The total is (epsilon, delta)-DP by Dwork & Roth 2014 Thm B.1.
    """
    f = float(amp_fraction)
    if not (math.isfinite(f) and 0.0 < f < 1.0):
        raise GconError(
            "DPS720",
            f"amp_fraction = {amp_fraction!r} is outside (0, 1)",
            "a share such as 0.01 of (epsilon, delta) pays for the solver's residual",
        )
    eps = _finite_positive("epsilon", epsilon, "DPS701", "use a finite epsilon > 0")
    op = gcon_calibration(
        eps * (1.0 - f),
        float(delta) * (1.0 - f),
        num_classes,
        dim,
        num_train,
        restart,
        steps,
        regularization,
        loss=loss,
        budget_split=budget_split,
        xi=xi,
        huber_delta=huber_delta,
    )
    floor = solver_rounding_floor(op["num_train"], op["dim"], op["num_classes"])
    if float(grad_tol) < floor:
        raise GconError(
            "DPS720",
            f"grad_tol = {grad_tol!r} is below the float64 rounding floor {floor:.3g} for n1={num_train}, d={dim}",
            f"use grad_tol >= {100 * floor:.3g}",
        )
    amp = amp_calibration(eps * f, float(delta) * f, grad_tol, op["strong_convexity"])
    return {
        "epsilon": eps,
        "delta": float(delta),
        "amp_fraction": f,
        "objective_perturbation": op,
        "amp": amp,
        "composition": "Dwork & Roth 2014 Thm B.1 (adaptive basic composition)",
        "epsilon_total": op["epsilon"] + amp["epsilon"],
        "delta_total": op["delta"] + amp["delta"],
    }
