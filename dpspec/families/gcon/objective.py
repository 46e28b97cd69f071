"""GCON's perturbed objective (eq. (13)) and a certified solver.

Objective (F13; Wei et al. 2024 eqs. (12), (13), (15)):

    L_priv(Theta) = (1/n1) sum_{i} sum_{j=1..c} l(z_i^T theta_j; y_ij)
                    + (Lambda/2) ||Theta||_F^2 + (1/n1) sum_j b_j^T theta_j + (Lambda'/2) ||Theta||_F^2

with ``Lambda`` the value *after* the floor of eq. (22). It separates into c independent
d-dimensional problems, each ``mu``-strongly convex with ``mu = Lambda + Lambda'`` (Lemma 4,
Fact 1), so the minimiser is unique (Lemma 5). Losses (class-separable, eq. (12)):

* MSML, eq. (27): ``l(x; y) = (1/c) [log(1 + e^x) - y x]`` (= -(1/c)[y log s + (1-y) log(1-s)]);
  ``l' = (s(x) - y)/c``, ``l'' = s(1-s)/c``;
* pseudo-Huber, eq. (28): ``l(x; y) = (dl^2/c)(sqrt(1 + (x-y)^2/dl^2) - 1)``;
  ``l' = (x-y) / (c sqrt(1 + (x-y)^2/dl^2))``, ``l'' = 1 / (c (1 + (x-y)^2/dl^2)^{3/2})``.

Solver: damped Newton per class (exact Hessian ``Z^T diag(l'') Z / n1 + mu I``, Cholesky,
Armijo backtracking), float64, started from Theta = 0, run until the *certified* Frobenius gradient
norm is <= ``grad_tol``. Newton's method with backtracking converges globally for smooth strongly
convex functions and quadratically near the optimum (Boyd & Vandenberghe 2004, Sec. 9.5.3).

Certified gradient norm. ``certified_gradient_norm`` returns ``||g_hat|| (1 + gamma_{dc+2})`` plus
an a-posteriori bound on the rounding error of the computed gradient ``g_hat`` relative to the exact
gradient of the objective defined by the float inputs (Z, Y, B, mu), in the standard model of
floating-point arithmetic (Higham 2002, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
Sec. 3.1, eq. (3.5): ``|fl(x^T y) - x^T y| <= gamma_n |x|^T |y|``, ``gamma_n = n u / (1 - n u)``,
valid for any summation order, incl. blocked BLAS and FMA):

    s = Z theta:          |s_hat - s|_i   <= gamma_d (|Z| |theta|)_i                      =: es_i
    r = l'(s):            |r_hat - r|_i   <= 16 u c1 + c2 es_i                            =: er_i
    v = Z^T r:            |v_hat - v|     <= gamma_{n1} |Z|^T |r_hat| + |Z|^T er
    g = v/n1 + mu theta + b/n1:  + gamma_6 (|v_hat|/n1 + |mu theta| + |b|/n1)

(``16 u c1`` covers the few-ulp evaluation error of ``expit`` / the pseudo-Huber derivative and
the subtraction of y; ``l'`` is ``c2``-Lipschitz.) The bound is inflated by 1e-6 relative for the
rounding in its own evaluation. With ``||g|| <= gamma`` and strong convexity ``mu``,
``||Theta_hat - Theta*||_F <= gamma / mu`` (Nesterov 2004, Thm 2.1.10), which is what the AMP step
(``dpspec.accounting.gcon.amp_calibration``) needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import linalg, special

from dpspec.accounting.gcon import GconError, loss_constants

__all__ = ["Loss", "PerturbedObjective", "SolverReport", "solve_certified", "certified_gradient_norm"]

_U = 2.0**-53


def _gamma(k: float) -> float:
    """Higham's gamma_k = k u / (1 - k u)."""
    return k * _U / (1.0 - k * _U)


@dataclass(frozen=True)
class Loss:
    """A class-separable loss with proven constants (eq. (19)): 'msml' or 'pseudo_huber'."""

    name: str
    num_classes: int
    huber_delta: float | None = None

    def __post_init__(self) -> None:
        loss_constants(self.name, self.num_classes, self.huber_delta)  # validates (DPS703/704)

    @property
    def _huber(self) -> float:
        """δ_l of the pseudo-Huber loss: ``__post_init__`` refuses that loss without it (DPS704)."""
        assert self.huber_delta is not None
        return float(self.huber_delta)

    @property
    def constants(self) -> tuple[float, float, float]:
        return loss_constants(self.name, self.num_classes, self.huber_delta)

    def value(self, s: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Elementwise l(s; y) -- eq. (27) / (28)."""
        c = self.num_classes
        if self.name == "msml":
            return (np.logaddexp(0.0, s) - y * s) / c
        dl = self._huber
        t = (s - y) / dl
        return dl * dl * (np.sqrt(1.0 + t * t) - 1.0) / c

    def d1(self, s: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Elementwise l'(s; y) (App. F)."""
        c = self.num_classes
        if self.name == "msml":
            return (special.expit(s) - y) / c
        dl = self._huber
        t = (s - y) / dl
        return (s - y) / (c * np.sqrt(1.0 + t * t))

    def d2(self, s: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Elementwise l''(s; y) (App. F)."""
        c = self.num_classes
        if self.name == "msml":
            p = special.expit(s)
            return p * (1.0 - p) / c
        dl = self._huber
        t = (s - y) / dl
        return 1.0 / (c * (1.0 + t * t) ** 1.5)


@dataclass
class PerturbedObjective:
    """``L_priv`` of eq. (13) on the loss nodes: ``Z`` (n1 x d), one-hot ``Y`` (n1 x c), noise ``B``
    (d x c), ``mu = Lambda + Lambda'``. Everything is float64."""

    Z: np.ndarray
    Y: np.ndarray
    B: np.ndarray
    mu: float
    loss: Loss

    def __post_init__(self) -> None:
        self.Z = np.ascontiguousarray(self.Z, dtype=np.float64)
        self.Y = np.asarray(self.Y, dtype=np.float64)
        self.B = np.asarray(self.B, dtype=np.float64)
        self.n1, self.d = self.Z.shape
        self.c = self.Y.shape[1]
        if self.B.shape != (self.d, self.c):
            raise ValueError(f"B has shape {self.B.shape}, expected {(self.d, self.c)}")
        if not (
            np.all(np.isfinite(self.Z))
            and np.all(np.isfinite(self.B))
            and np.all(np.isfinite(self.Y))
            and math.isfinite(self.mu)
            and self.mu > 0
        ):
            raise GconError(
                "DPS715",
                "the objective has non-finite features, labels or noise, or mu <= 0",
                "check the encoder output and the calibration",
            )
        self.absZ = np.abs(self.Z)

    # per-class pieces -------------------------------------------------------------------
    def value_j(self, j: int, theta: np.ndarray) -> float:
        s = self.Z @ theta
        return float(
            self.loss.value(s, self.Y[:, j]).sum() / self.n1
            + 0.5 * self.mu * theta @ theta
            + self.B[:, j] @ theta / self.n1
        )

    def grad_j(self, j: int, theta: np.ndarray) -> np.ndarray:
        s = self.Z @ theta
        return self.Z.T @ self.loss.d1(s, self.Y[:, j]) / self.n1 + self.mu * theta + self.B[:, j] / self.n1

    def hess_j(self, j: int, theta: np.ndarray) -> np.ndarray:
        s = self.Z @ theta
        w = self.loss.d2(s, self.Y[:, j]) / self.n1
        H = self.Z.T @ (self.Z * w[:, None])
        H[np.diag_indices_from(H)] += self.mu
        return H

    # whole objective --------------------------------------------------------------------
    def value(self, Theta: np.ndarray) -> float:
        S = self.Z @ Theta
        return float(
            self.loss.value(S, self.Y).sum() / self.n1
            + 0.5 * self.mu * np.sum(Theta * Theta)
            + np.sum(self.B * Theta) / self.n1
        )

    def grad(self, Theta: np.ndarray) -> np.ndarray:
        S = self.Z @ Theta
        return self.Z.T @ self.loss.d1(S, self.Y) / self.n1 + self.mu * Theta + self.B / self.n1


def certified_gradient_norm(obj: PerturbedObjective, Theta: np.ndarray) -> dict[str, float]:
    """Upper bound on the exact ``||grad L_priv(Theta)||_F`` from a float64 evaluation.

    Returns ``computed`` (||g_hat||_F), ``rounding_bound`` (bound on ||g_hat - g||_F) and
    ``certified`` (>= the exact norm). See the module docstring for the error model.
    """
    c1, c2, _ = obj.loss.constants
    n1, d = obj.n1, obj.d
    S = obj.Z @ Theta
    R = obj.loss.d1(S, obj.Y)
    V = obj.Z.T @ R
    G = V / n1 + obj.mu * Theta + obj.B / n1
    es = _gamma(d) * (obj.absZ @ np.abs(Theta))  # n1 x c
    er = 16.0 * _U * c1 + c2 * es  # n1 x c
    ev = _gamma(n1) * (obj.absZ.T @ np.abs(R)) + obj.absZ.T @ er  # d x c
    err = ev / n1 * (1.0 + _gamma(2)) + _gamma(6) * (np.abs(V) / n1 + np.abs(obj.mu * Theta) + np.abs(obj.B) / n1)
    computed = float(np.linalg.norm(G))
    bound = float(np.linalg.norm(err)) * (1.0 + 1e-6)
    certified = computed * (1.0 + _gamma(d * obj.c + 2)) + bound
    return {"computed": computed, "rounding_bound": bound, "certified": certified * (1.0 + 1e-12)}


@dataclass
class SolverReport:
    """What the certificate records about the numerical minimisation."""

    method: str
    iterations: int
    grad_tol: float
    grad_norm_computed: float
    grad_norm_rounding_bound: float
    grad_norm_certified: float
    strong_convexity: float
    distance_bound: float  # certified ||Theta_hat - Theta*||_F <= this
    objective_value: float
    converged: bool
    per_class_iterations: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _newton_class(
    obj: PerturbedObjective, j: int, theta: np.ndarray, tol_j: float, max_iter: int
) -> tuple[np.ndarray, int]:
    """Damped Newton on class j until the computed gradient norm is <= tol_j (or stalls)."""
    f = obj.value_j(j, theta)
    it = 0
    for it in range(1, max_iter + 1):
        g = obj.grad_j(j, theta)
        gn = float(np.linalg.norm(g))
        if gn <= tol_j:
            return theta, it - 1
        H = obj.hess_j(j, theta)
        try:
            step = -linalg.cho_solve(linalg.cho_factor(H, lower=True, check_finite=False), g, check_finite=False)
        except linalg.LinAlgError:
            step = -g / obj.mu
        dec = float(g @ step)  # negative Newton decrement^2
        if -dec <= 1e-13 * (1.0 + abs(f)):
            # function differences are below float resolution: Armijo on f is meaningless here.
            # In this (quadratic-convergence) region take the full step if it reduces ||grad||.
            cand = theta + step
            if float(np.linalg.norm(obj.grad_j(j, cand))) < gn:
                theta, f = cand, obj.value_j(j, cand)
                continue
            return theta, it  # stalled at rounding level
        t = 1.0
        while True:
            cand = theta + t * step
            fc = obj.value_j(j, cand)
            if fc <= f + 0.25 * t * dec or t < 1e-12:
                break
            t *= 0.5
        if np.array_equal(cand, theta):
            return theta, it  # stalled at rounding level
        theta, f = cand, fc
    return theta, it


def solve_certified(
    obj: PerturbedObjective, grad_tol: float, *, max_iter: int = 200, Theta0: np.ndarray | None = None
) -> tuple[np.ndarray, SolverReport]:
    """Minimise ``L_priv`` to a certified gradient norm ``<= grad_tol`` (Frobenius).

    Raises ``GconError`` (DPS719) if the certificate fails: then nothing may be released. A failure
    is itself data-dependent; for these strongly convex, smooth problems with ``grad_tol`` above the
    rounding floor (``dpspec.accounting.gcon.solver_rounding_floor``) it is not expected to occur.
    """
    Theta = np.zeros((obj.d, obj.c)) if Theta0 is None else np.array(Theta0, dtype=np.float64)
    # aim below the tolerance so that the rounding bound fits in the remaining slack
    tol_j = 0.25 * grad_tol / math.sqrt(obj.c)
    iters: list[int] = []
    from dpspec.progress import progress

    for j in progress(range(obj.c), desc="GCON solver", unit="class"):
        th, k = _newton_class(obj, j, Theta[:, j].copy(), tol_j, max_iter)
        Theta[:, j] = th
        iters.append(k)
    cert = certified_gradient_norm(obj, Theta)
    report = SolverReport(
        method="damped Newton per class (exact Hessian, Cholesky, Armijo backtracking), float64; "
        "a-posteriori rounding bound (Higham 2002 eq. (3.5))",
        iterations=int(sum(iters)),
        grad_tol=float(grad_tol),
        grad_norm_computed=cert["computed"],
        grad_norm_rounding_bound=cert["rounding_bound"],
        grad_norm_certified=cert["certified"],
        strong_convexity=float(obj.mu),
        distance_bound=float(grad_tol) / float(obj.mu),
        objective_value=obj.value(Theta),
        converged=cert["certified"] <= grad_tol,
        per_class_iterations=iters,
    )
    if not report.converged:
        raise GconError(
            "DPS719",
            f"certified gradient norm {cert['certified']:.3e} > grad_tol "
            f"{grad_tol:.3e} (computed {cert['computed']:.3e}, rounding bound "
            f"{cert['rounding_bound']:.3e}); the model is not released",
            "raise grad_tol (it is fixed before seeing the data) or check the inputs "
            "for NaN/inf; do not retry on the same private graph without accounting",
        )
    return Theta, report
