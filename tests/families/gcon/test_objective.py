"""Perturbed objective (eq. (13)) and the certified solver: derivatives, gradient-norm certificate
(against extended-precision arithmetic), and the distance bound ||Theta_hat - Theta*|| <= gamma/mu."""

from __future__ import annotations

import numpy as np
import pytest
from gcon_testlib import unit_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from dpspec.accounting.gcon import GconError
from dpspec.families.gcon.noise import sample_objective_noise
from dpspec.families.gcon.objective import Loss, PerturbedObjective, certified_gradient_norm, solve_certified


def _problem(rng, n1=150, d=6, c=3, beta=0.5, mu=0.3, loss=Loss("msml", 3)):
    Z = unit_rows(n1, d, rng) * rng.uniform(0.2, 1.0, (n1, 1))
    y = rng.integers(0, c, n1)
    Y = np.eye(c)[y]
    B = sample_objective_noise(d, c, beta, rng)
    return PerturbedObjective(Z, Y, B, mu, loss)


LOSSES = [Loss("msml", 3), Loss("pseudo_huber", 3, 0.2), Loss("pseudo_huber", 3, 0.5)]


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: f"{l.name}-{l.huber_delta}")
def test_gradient_and_hessian_match_finite_differences(rng, loss):
    obj = _problem(rng, loss=loss)
    Theta = rng.standard_normal((obj.d, obj.c))
    G = obj.grad(Theta)
    h = 1e-6
    for _ in range(5):
        k, j = rng.integers(obj.d), rng.integers(obj.c)
        E = np.zeros_like(Theta)
        E[k, j] = h
        fd = (obj.value(Theta + E) - obj.value(Theta - E)) / (2 * h)
        assert fd == pytest.approx(G[k, j], abs=1e-7)
    for j in range(obj.c):
        H = obj.hess_j(j, Theta[:, j])
        for k in range(obj.d):
            e = np.zeros(obj.d)
            e[k] = h
            fd = (obj.grad_j(j, Theta[:, j] + e) - obj.grad_j(j, Theta[:, j] - e)) / (2 * h)
            assert np.allclose(H[:, k], fd, atol=1e-7)
        assert np.allclose(obj.grad_j(j, Theta[:, j]), G[:, j], atol=1e-15)
        assert np.min(np.linalg.eigvalsh(H)) >= obj.mu * (1 - 1e-12)  # mu-strong convexity


def _grad_longdouble(obj, Theta):
    """The exact gradient of the float inputs, evaluated in x87 extended precision (u = 2^-64)."""
    ld = np.longdouble
    Z = obj.Z.astype(ld)
    T = Theta.astype(ld)
    S = np.einsum("ik,kj->ij", Z, T)
    Y = obj.Y.astype(ld)
    c = ld(obj.loss.num_classes)
    if obj.loss.name == "msml":
        R = (ld(1) / (ld(1) + np.exp(-S)) - Y) / c
    else:
        dl = ld(obj.loss.huber_delta)
        R = (S - Y) / (c * np.sqrt(ld(1) + ((S - Y) / dl) ** 2))
    V = np.einsum("ik,ij->kj", Z, R)
    return V / ld(obj.n1) + ld(obj.mu) * T + obj.B.astype(ld) / ld(obj.n1)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps,
                    reason="no extended precision long double on this platform")
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.floats(0.01, 5.0), st.floats(0.01, 3.0), st.sampled_from(LOSSES),
       st.floats(0.0, 50.0))
def test_rounding_bound_covers_the_exact_gradient(seed, beta, mu, loss, scale):
    rng = np.random.default_rng(seed)
    obj = _problem(rng, n1=120, d=5, beta=beta, mu=mu, loss=loss)
    Theta = scale * rng.standard_normal((obj.d, obj.c))
    cert = certified_gradient_norm(obj, Theta)
    exact = _grad_longdouble(obj, Theta)
    g_hat = obj.grad(Theta)
    err = float(np.linalg.norm((g_hat.astype(np.longdouble) - exact).astype(np.float64)))
    assert err <= cert["rounding_bound"]
    assert float(np.linalg.norm(exact.astype(np.float64))) <= cert["certified"]


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: f"{l.name}-{l.huber_delta}")
def test_solver_certificate_and_distance_bound(rng, loss):
    obj = _problem(rng, n1=300, d=8, beta=0.05, mu=0.2, loss=loss)  # large noise, ||b|| ~ 160
    tight, rep_t = solve_certified(obj, 1e-11)
    assert rep_t.converged and rep_t.grad_norm_certified <= 1e-11
    # the certificate holds against extended precision at the solution
    if np.finfo(np.longdouble).eps < np.finfo(np.float64).eps:
        exact = float(np.linalg.norm(_grad_longdouble(obj, tight).astype(np.float64)))
        assert exact <= rep_t.grad_norm_certified
    for tol in (1e-3, 1e-6):
        loose, rep = solve_certified(obj, tol)
        assert rep.grad_norm_certified <= tol
        # strong convexity: ||Theta_hat - Theta*|| <= gamma / mu (Nesterov Thm 2.1.10)
        assert np.linalg.norm(loose - tight) <= (tol + 1e-11) / obj.mu
        assert rep.distance_bound == pytest.approx(tol / obj.mu)


def test_first_order_condition_inverts_noise(rng):
    """Lemma 5: B = -n1 (sum_i z_i l'(.) / n1 + mu theta) at the optimum (eq. (40))."""
    obj = _problem(rng, n1=200, d=4, beta=0.3, mu=0.5)
    Theta, _ = solve_certified(obj, 1e-12)
    S = obj.Z @ Theta
    B_rec = -(obj.Z.T @ obj.loss.d1(S, obj.Y) + obj.n1 * obj.mu * Theta)
    assert np.allclose(B_rec, obj.B, atol=1e-8)


def test_certificate_failure_is_a_named_error(rng):
    obj = _problem(rng)
    with pytest.raises(GconError) as info:
        solve_certified(obj, 1e-30)
    assert info.value.rule == "DPS719"
    B = obj.B.copy()
    B[0, 0] = np.nan
    with pytest.raises(GconError):
        PerturbedObjective(obj.Z, obj.Y, B, obj.mu, obj.loss)


def test_loss_validation():
    with pytest.raises(GconError) as info:
        Loss("cross_entropy", 3)
    assert info.value.rule == "DPS725"
    with pytest.raises(GconError):
        Loss("pseudo_huber", 3)
