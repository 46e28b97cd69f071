"""End-to-end GCON release (Alg. 1 + AMP) on small synthetic graphs: result/certificate fields,
named errors, exact-minimiser mode, pseudo-labels, inference modes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from gcon_testlib import sbm

from dpspec.accounting.gcon import GconError, gcon_release_calibration
from dpspec.families.gcon.encoder import normalise_rows
from dpspec.families.gcon.graph import Graph
from dpspec.families.gcon.trainer import GconConfig, train_gcon


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    lab, edges = sbm(400, 3, 0.06, 0.004, rng)
    g = Graph.from_edges(400, edges)
    X = normalise_rows(np.eye(3)[lab] * 0.8 + rng.standard_normal((400, 3)) * 0.9)
    train = np.concatenate([np.flatnonzero(lab == k)[:20] for k in range(3)])
    return g, X, lab, train


def test_release_fields_and_certificate(problem):
    g, X, lab, train = problem
    cfg = GconConfig(epsilon=2.0, delta=1 / g.num_edges, restart=0.6, steps=(2, "inf"),
                     regularization=0.5)
    r = train_gcon(g, X, lab, train, cfg, pseudo_labels=lab, rng=0)
    assert r.theta.shape == (6, 3) and r.dim == 6 and r.num_train == 400 and r.pseudo_labelled
    assert r.guarantee["certified"] and r.amp is not None
    assert r.guarantee["epsilon_objective_perturbation"] + r.guarantee["epsilon_amp"] == pytest.approx(2.0)
    assert r.solver.converged and r.solver.grad_norm_certified <= cfg.grad_tol
    assert "Wei et al. 2024 Thm 1" in r.theorem_ids
    assert all("source" in a and "text" in a for a in r.assumptions)
    rules = {c["rule"] for c in r.caveats}
    assert {"DPS721", "DPS722", "DPS723", "DPS724"} <= rules
    # the calibration used is the one the compiler would compute
    ref = gcon_release_calibration(2.0, 1 / g.num_edges, 3, 6, 400, 0.6, [2, "inf"], 0.5)
    assert r.calibration["beta"] == ref["objective_perturbation"]["beta"]
    assert r.amp["sigma"] == ref["amp"]["sigma"]
    cert = r.to_certificate_dict()
    text = json.dumps(cert)
    assert "theta" not in cert and "PPR truncated" in cert["numerics"]["propagation"]
    assert json.loads(text)["guarantee"]["unit"].startswith("edge")


def test_accuracy_improves_with_epsilon(problem):
    g, X, lab, train = problem
    acc = {}
    for eps in (0.1, 8.0):
        vals = []
        for seed in range(3):
            cfg = GconConfig(epsilon=eps, delta=1 / g.num_edges, restart=0.5, steps=(2,), regularization=0.3)
            r = train_gcon(g, X, lab, train, cfg, pseudo_labels=lab, rng=seed)
            vals.append(np.mean(r.predict(g, X, "private") == lab))
        acc[eps] = np.mean(vals)
    assert acc[8.0] > acc[0.1] + 0.1
    assert acc[8.0] > 0.65
    r = train_gcon(g, X, lab, train, GconConfig(epsilon=8.0, delta=1e-3, restart=0.5, steps=(2,),
                                                 regularization=0.3), pseudo_labels=lab, rng=1)
    pub = np.mean(r.predict(g, X, "public") == lab)
    assert pub > 0.65
    assert r.predict(g, X, "private", inference_restart=1.0).shape == (400,)


def test_exact_minimiser_mode_is_not_certified(problem):
    g, X, lab, train = problem
    cfg = GconConfig(epsilon=1.0, delta=1e-4, assume_exact_minimiser=True, regularization=0.5)
    r = train_gcon(g, X, lab, train, cfg, pseudo_labels=lab, rng=0)
    assert r.amp is None and not r.guarantee["certified"]
    assert any(c["rule"] == "DPS720" for c in r.caveats)


def test_labels_only_training(problem):
    g, X, lab, train = problem
    cfg = GconConfig(epsilon=4.0, delta=1e-4, regularization=0.5)
    r = train_gcon(g, X, lab, train, cfg, rng=0)
    assert r.num_train == 60 and not r.pseudo_labelled
    assert not any(c["rule"] == "DPS722" for c in r.caveats)


def test_named_errors(problem):
    g, X, lab, train = problem
    cfg = GconConfig(epsilon=1.0, delta=1e-4)
    with pytest.raises(GconError) as info:                      # not row-normalised
        train_gcon(g, X * 2.0, lab, train, cfg, rng=0)
    assert info.value.rule == "DPS715"
    bad = lab.copy()
    bad[train[0]] = -1
    with pytest.raises(GconError) as info:                      # unlabelled training node
        train_gcon(g, X, bad, train, cfg, rng=0)
    assert info.value.rule == "DPS718"
    with pytest.raises(GconError) as info:                      # d = 3 * 40 > n1 = 60
        Xw = normalise_rows(np.random.default_rng(0).standard_normal((400, 40)))
        train_gcon(g, Xw, lab, train, GconConfig(epsilon=1.0, delta=1e-4, steps=(1, 2, 3)), rng=0)
    assert info.value.rule == "DPS711"
    with pytest.raises(GconError) as info:
        train_gcon(g, X, lab, train, GconConfig(epsilon=1.0, delta=0.0), rng=0)
    assert info.value.rule == "DPS702"
    with pytest.raises(GconError) as info:
        train_gcon(g, X, lab, train, GconConfig(epsilon=1.0, delta=1e-4, loss="cross_entropy"), rng=0)
    assert info.value.rule == "DPS725"
    with pytest.raises(GconError) as info:
        train_gcon(g, X, lab, train, GconConfig(epsilon=1.0, delta=1e-4, restart=0.0), rng=0)
    assert info.value.rule == "DPS705"
    with pytest.raises(GconError) as info:
        train_gcon(g.adjacency, X, lab, train, cfg, rng=0)
    assert info.value.rule == "DPS716"
    pl = lab.copy()
    pl[5] = 7
    with pytest.raises(GconError) as info:
        train_gcon(g, X, lab, train, cfg, pseudo_labels=pl, rng=0)
    assert info.value.rule == "DPS718"


def test_lambda_floor_is_used_in_objective(problem):
    g, X, lab, train = problem
    cfg = GconConfig(epsilon=0.5, delta=1e-4, regularization=1e-4, restart=0.4, steps=("inf",))
    r = train_gcon(g, X, lab, train, cfg, rng=0)
    assert r.calibration["regularization_raised"]
    assert r.solver.strong_convexity == pytest.approx(
        r.calibration["regularization"] + r.calibration["extra_regularization"])
    assert any(w["rule"] == "DPS712" for w in r.warnings)


def test_graph_unused_when_alpha_one(problem):
    g, X, lab, train = problem
    r = train_gcon(g, X, lab, train, GconConfig(epsilon=1.0, delta=1e-4, restart=1.0), rng=0)
    assert r.calibration["beta"] == math.inf
    assert any(w["rule"] == "DPS714" for w in r.warnings)


def test_digest_s9_pseudo_labels_are_essential():
    """Digest §9 end-to-end run, scaled down: 4-class SBM, noisy 16-d features, alpha = 0.6,
    m = 5, Lambda = 0.2, eps = 1. Labels only (n1 = 80) is near chance; hard pseudo-labels from an
    edge-free logistic model (n1 = n) recover most of the non-private accuracy."""
    from dpspec.families.gcon.objective import Loss, PerturbedObjective, solve_certified

    rng = np.random.default_rng(11)
    n, c = 1000, 4
    lab, edges = sbm(n, c, 0.03, 0.002, rng)
    g = Graph.from_edges(n, edges)
    means = rng.standard_normal((c, 16))
    X = normalise_rows(means[lab] * 0.6 + rng.standard_normal((n, 16)) * 1.0)  # encoder acc ~0.77
    train = np.concatenate([np.flatnonzero(lab == k)[:20] for k in range(c)])
    # edge-free "encoder": one-vs-rest logistic regression on the raw features (no noise)
    enc = PerturbedObjective(X[train], np.eye(c)[lab[train]], np.zeros((16, c)), 0.01, Loss("msml", c))
    W, _ = solve_certified(enc, 1e-9)
    pseudo = np.argmax(X @ W, axis=1)
    cfg = GconConfig(epsilon=1.0, delta=1 / g.num_edges, restart=0.6, steps=(5,), regularization=0.2,
                     inference_restart=0.6)
    only, pl = [], []
    for seed in range(3):
        r0 = train_gcon(g, X, lab, train, cfg, rng=seed)
        r1 = train_gcon(g, X, lab, train, cfg, pseudo_labels=pseudo, rng=seed)
        only.append(np.mean(r0.predict(g, X) == lab))
        pl.append(np.mean(r1.predict(g, X) == lab))
    assert np.mean(only) < 0.45
    assert np.mean(pl) > np.mean(only) + 0.2
