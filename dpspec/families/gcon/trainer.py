"""GCON trainer and inference (Wei et al. 2024, Alg. 1 and Alg. 4) with a certifiable result.

``train_gcon`` runs Algorithm 1 on already-encoded, row-normalised features:

1. validate graph (DPS716/717), features (DPS715), labels (DPS718);
2. calibrate: ``gcon_release_calibration`` = Theorem 1 chain (eqs. (17)-(24)) on
   ``(1 - f)(eps, delta)`` + AMP output noise on ``f (eps, delta)``;
3. propagate ``Z = (1/s)[R_m1 X || ... || R_ms X]`` (eqs. (9)-(11));
4. draw ``B`` (Alg. 2), build ``L_priv`` (eq. (13)) with the raised Lambda and Lambda';
5. minimise to a certified gradient norm ``<= grad_tol`` (damped Newton; DPS719 if not reached);
6. release ``Theta_hat + N(0, sigma^2 I)`` (AMP; Iyengar et al. 2019 Alg. 1).

The release is (eps, delta)-DP w.r.t. adding/removing one undirected edge, under the assumptions
listed in ``GconResult.assumptions``. ``assume_exact_minimiser=True`` skips step 6 and reproduces the
paper literally; the result is then marked *not certified* (rule DPS720): Theorem 1 covers only the
exact argmin, which a float solver does not return.

Pseudo-labels (App. Q; ``pseudo_labels=`` argument). Privacy implications:

* the pseudo-labels must come from an **edge-free** model (e.g. ``MLPEncoder.predict``) trained on
  public features and training labels; they are then identical on edge-neighbouring graphs, so
  Theorem 1 applies with ``n1 = n`` loss nodes;
* this uses the features of **all** nodes (incl. test nodes) -- covered only because GCON treats X
  as public (eq. (8)); with private node features it is not covered;
* every noise term is divided by n1, so n1 = n reduces the noise by a factor n / n0: the gain is
  real, but the model then fits the encoder's guesses, whose errors it inherits;
* choosing between n1 = n0 and n1 = n by validation accuracy on the private graph is hyper-parameter
  tuning, which the certificate does not cover (DPS721).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dpspec.accounting.gcon import (
    GCON_ASSUMPTIONS,
    GconError,
    gcon_calibration,
    gcon_release_calibration,
    normalise_steps,
)
from dpspec.families.gcon.encoder import check_row_normalised
from dpspec.families.gcon.graph import Graph
from dpspec.families.gcon.noise import as_generator, gaussian_output_noise, sample_objective_noise
from dpspec.families.gcon.objective import Loss, PerturbedObjective, SolverReport, solve_certified
from dpspec.families.gcon.propagation import (
    ppr_truncation_steps,
    private_inference_features,
    propagate_features,
    public_inference_features,
    transition_matrix,
)

__all__ = ["GconConfig", "GconResult", "train_gcon", "THEOREM_IDS"]

THEOREM_IDS: tuple[str, ...] = (
    "Wei et al. 2024 Thm 1",
    "Wei et al. 2024 Lemma 1 (row/column sums of A~^m, R_m)",
    "Wei et al. 2024 Lemma 2 (sensitivity Psi of APPR/PPR features, eq. (20))",
    "Wei et al. 2024 Lemma 3 (I - (1-alpha)A~ invertible)",
    "Wei et al. 2024 Lemma 4, Lemma 5 (strong convexity; B <-> Theta bijection)",
    "Wei et al. 2024 Lemma 6 (Alg. 2 direction uniform)",
    "Wei et al. 2024 Lemma 7 (Jacobian ratio), Lemma 8 (noise ratio), Lemma 9 (tail, delta)",
    "Wei et al. 2024 Lemma 10 (pDP => DP; Zhao et al. Lemma 3)",
    "Iyengar et al. 2019 Alg. 1 (approximate minima perturbation)",
    "Balle & Wang 2018 Thm 8 (analytic Gaussian mechanism)",
    "Dwork & Roth 2014 Thm B.1 (adaptive composition)",
    "Nesterov 2004 Thm 2.1.10 (strong convexity: ||x - x*|| <= ||grad f(x)|| / mu)",
)


@dataclass(frozen=True)
class GconConfig:
    """Hyper-parameters of one GCON release. Fix them *before* looking at the private edges.

    ``steps``: propagation depths m_i (ints and/or "inf"); ``restart``: alpha in (0, 1];
    ``inference_restart``: alpha_I for private inference (default: alpha); ``amp_fraction``: share
    of (eps, delta) paying for the solver residual; ``grad_tol``: certified Frobenius gradient bound.
    """

    epsilon: float
    delta: float
    restart: float = 0.6
    steps: tuple[Any, ...] = (2,)
    regularization: float = 1.0
    loss: str = "msml"
    huber_delta: float | None = None
    budget_split: float = 0.9
    xi: float = 1e-3
    amp_fraction: float = 0.01
    grad_tol: float = 1e-9
    inference_restart: float | None = None
    ppr_method: str = "iterate"
    ppr_tol: float = 1e-12
    assume_exact_minimiser: bool = False
    max_newton_iter: int = 200

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["steps"] = [("inf" if m == math.inf else int(m)) for m in normalise_steps(self.steps)]
        return d


def _caveat(rule: str, text: str) -> dict[str, str]:
    return {"rule": rule, "severity": "caveat", "message": text}


@dataclass
class GconResult:
    """A trained GCON model plus everything a certificate needs.

    ``theta`` is the released parameter matrix (d x c). ``calibration`` is the Theorem 1 chain
    (F4-F11) actually used; ``amp`` the output-noise step (None in exact-minimiser mode);
    ``solver`` the numerical method and its certified error; ``theorem_ids``, ``assumptions``
    (each with paper + equation), ``caveats`` and ``warnings`` are lists of plain dicts.
    """

    theta: np.ndarray
    config: GconConfig
    guarantee: dict[str, Any]
    calibration: dict[str, Any]
    amp: dict[str, Any] | None
    solver: SolverReport
    numerics: dict[str, Any]
    graph: dict[str, Any]
    num_classes: int
    feature_dim: int
    dim: int
    num_train: int
    pseudo_labelled: bool
    theorem_ids: list[str] = field(default_factory=lambda: list(THEOREM_IDS))
    assumptions: list[dict[str, str]] = field(default_factory=lambda: [dict(a) for a in GCON_ASSUMPTIONS])
    caveats: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    # ----------------------------------------------------------------- inference (Alg. 4)
    def decision_function(
        self, graph: Graph, features: np.ndarray, mode: str = "private", inference_restart: float | None = None
    ) -> np.ndarray:
        """Logits ``Z_inf Theta``. ``mode="private"``: each node's own 1-hop only (eq. (16));
        ``mode="public"``: full propagation on a graph whose edges are public (Alg. 4)."""
        check_row_normalised(features)
        cfg = self.config
        if mode == "private":
            aI = cfg.inference_restart if inference_restart is None else inference_restart
            aI = cfg.restart if aI is None else aI
            Z = private_inference_features(graph, features, aI, cfg.steps)
        elif mode == "public":
            Z = public_inference_features(
                graph, features, cfg.restart, cfg.steps, ppr_method=cfg.ppr_method, ppr_tol=cfg.ppr_tol
            )
        else:
            raise ValueError("mode must be 'private' or 'public'")
        return Z @ self.theta

    def predict(
        self, graph: Graph, features: np.ndarray, mode: str = "private", inference_restart: float | None = None
    ) -> np.ndarray:
        """Predicted classes (argmax of the logits). In private mode, deliver row v to node v
        only (DPS723)."""
        return np.argmax(self.decision_function(graph, features, mode, inference_restart), axis=1)

    def to_certificate_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (no parameters) for the compiler's certificate."""
        return {
            "mechanism": "gcon-objective-perturbation",
            "guarantee": self.guarantee,
            "config": self.config.as_dict(),
            "calibration": self.calibration,
            "amp": self.amp,
            "solver": self.solver.as_dict(),
            "numerics": self.numerics,
            "graph": self.graph,
            "dimensions": {
                "num_classes": self.num_classes,
                "feature_dim": self.feature_dim,
                "dim": self.dim,
                "num_train": self.num_train,
                "pseudo_labelled": self.pseudo_labelled,
            },
            "theorem_ids": list(self.theorem_ids),
            "assumptions": list(self.assumptions),
            "caveats": list(self.caveats),
            "warnings": list(self.warnings),
        }


def _validate_labels(labels: np.ndarray, idx: np.ndarray, c: int, what: str) -> np.ndarray:
    y = np.asarray(labels)[idx]
    if y.size == 0:
        raise GconError("DPS718", f"no {what} nodes", "give at least one labelled training node")
    if not np.issubdtype(y.dtype, np.integer):
        if np.all(np.isfinite(y)) and np.all(y == np.round(y)):
            y = y.astype(np.int64)
        else:
            raise GconError(
                "DPS718",
                f"{what} labels must be integers (NaN = no label)",
                "remove unlabelled nodes from the training set",
            )
    bad = (y < 0) | (y >= c)
    if np.any(bad):
        raise GconError(
            "DPS718",
            f"{int(bad.sum())} {what} node(s) have no label in 0..{c - 1} (e.g. node {int(idx[np.argmax(bad)])})",
            "drop unlabelled nodes from train_idx, or pass pseudo-labels for them",
        )
    return y.astype(np.int64)


def train_gcon(
    graph: Graph,
    features: np.ndarray,
    labels: np.ndarray,
    train_idx: np.ndarray,
    config: GconConfig,
    *,
    num_classes: int | None = None,
    pseudo_labels: np.ndarray | None = None,
    rng: np.random.Generator | int | None = None,
) -> GconResult:
    """Train and release a GCON model (Alg. 1) with a certificate-ready ``GconResult``.

    ``features``: encoder output, row-normalised (n x d1; DPS715). ``labels``: length-n ints, -1 for
    unknown. ``train_idx``: labelled nodes (n0). ``pseudo_labels``: optional length-n hard labels from
    an edge-free model; if given, all n nodes enter the loss (n1 = n) with the true labels kept on
    ``train_idx`` -- see the module docstring for the privacy implications. ``rng``: None (OS
    entropy; production) or a seed / Generator (reproducible; tests only).
    """
    if not isinstance(graph, Graph):
        raise GconError(
            "DPS716",
            "graph must be a dpspec.families.gcon.graph.Graph",
            "build it with Graph.from_edges(n, edges) or Graph.from_adjacency(A)",
        )
    X = np.asarray(features, dtype=np.float64)
    n = graph.num_nodes
    if X.ndim != 2 or X.shape[0] != n:
        raise GconError("DPS715", f"features have shape {X.shape}, expected ({n}, d1)", "")
    check_row_normalised(X)
    labels = np.asarray(labels)
    if labels.shape[0] != n:
        raise GconError("DPS718", f"labels have length {labels.shape[0]}, expected {n}", "")
    train_idx = np.unique(np.asarray(train_idx, dtype=np.int64))
    if train_idx.size and (train_idx.min() < 0 or train_idx.max() >= n):
        raise GconError("DPS718", "train_idx contains node indices outside 0..n-1", "")
    if num_classes is None:
        known = labels[train_idx]
        known = known[known >= 0]
        if known.size == 0:
            raise GconError("DPS718", "no labelled training node", "pass num_classes and labels")
        num_classes = int(np.max(labels[labels >= 0])) + 1
    c = int(num_classes)
    y_train = _validate_labels(labels, train_idx, c, "training")

    if pseudo_labels is not None:
        pl = np.asarray(pseudo_labels)
        if pl.shape[0] != n:
            raise GconError("DPS718", f"pseudo_labels have length {pl.shape[0]}, expected {n}", "")
        targets = _validate_labels(pl, np.arange(n), c, "pseudo-labelled").copy()
        targets[train_idx] = y_train
        loss_idx = np.arange(n)
    else:
        targets = y_train
        loss_idx = train_idx

    cfg = config
    ms = normalise_steps(cfg.steps)
    d1 = X.shape[1]
    d = len(ms) * d1
    n1 = int(loss_idx.size)
    if cfg.assume_exact_minimiser:
        cal = gcon_calibration(
            cfg.epsilon,
            cfg.delta,
            c,
            d,
            n1,
            cfg.restart,
            ms,
            cfg.regularization,
            loss=cfg.loss,
            budget_split=cfg.budget_split,
            xi=cfg.xi,
            huber_delta=cfg.huber_delta,
        )
        amp = None
    else:
        full = gcon_release_calibration(
            cfg.epsilon,
            cfg.delta,
            c,
            d,
            n1,
            cfg.restart,
            ms,
            cfg.regularization,
            amp_fraction=cfg.amp_fraction,
            grad_tol=cfg.grad_tol,
            loss=cfg.loss,
            budget_split=cfg.budget_split,
            xi=cfg.xi,
            huber_delta=cfg.huber_delta,
        )
        cal, amp = full["objective_perturbation"], full["amp"]

    g = as_generator(rng)
    P = transition_matrix(graph)
    Z = propagate_features(graph, X, cfg.restart, ms, ppr_method=cfg.ppr_method, ppr_tol=cfg.ppr_tol, P=P)
    B = sample_objective_noise(d, c, cal["beta"], g)
    Y = np.zeros((n1, c))
    Y[np.arange(n1), targets] = 1.0
    loss = Loss(cal["loss"], c, cal["huber_delta"])
    mu = cal["regularization"] + cal["extra_regularization"]
    obj = PerturbedObjective(Z[loss_idx], Y, B, mu, loss)
    theta_hat, report = solve_certified(obj, cfg.grad_tol, max_iter=cfg.max_newton_iter)
    if amp is not None:
        theta = theta_hat + gaussian_output_noise(theta_hat.shape, amp["sigma"], g)
    else:
        theta = theta_hat
    del theta_hat, B  # never exposed

    warnings = list(cal["warnings"]) + list(graph.summary.warnings)
    caveats = [
        _caveat(
            "DPS721",
            "hyper-parameters (alpha, steps, Lambda, loss, encoder, n1) must be fixed "
            "without using the private edges; tuning them on the private graph (e.g. by "
            "validation accuracy with propagated features) is not covered by this certificate "
            "unless the search runs through a `tune` block, whose certificate covers it",
        ),
        _caveat(
            "DPS723",
            "private inference (eq. (16)) is private only when each node receives "
            "its own prediction; publishing all predictions reveals each node's adjacency",
        ),
        _caveat(
            "DPS724",
            "the guarantee is for real-valued noise; float64 samplers only approximate it "
            "(see dpspec.families.gcon.noise)",
        ),
        _caveat(
            "A1/A4",
            "node features and labels are treated as public (Wei et al. eq. (8)); the "
            "encoder must not read edges -- the caller asserts this, the trainer cannot check it",
        ),
    ]
    if pseudo_labels is not None:
        caveats.append(
            _caveat(
                "DPS722",
                "pseudo-labels (App. Q): n1 = n loss nodes with labels from "
                "an edge-free model; sound only if that model read no edges, and it "
                "uses the features of all nodes (public under eq. (8))",
            )
        )
    if amp is None:
        caveats.append(
            _caveat(
                "DPS720",
                "exact-minimiser assumption: Theorem 1 covers the exact "
                "argmin only; this run released the solver output without AMP noise, "
                "so the (eps, delta) claim is NOT certified",
            )
        )
    ppr_k = ppr_truncation_steps(cfg.restart, cfg.ppr_tol) if math.inf in ms else None
    numerics = {
        "propagation": "sparse CSR products, recursion of eq. (4)"
        + (
            f"; PPR truncated at k = {ppr_k:d} steps (row error <= {cfg.ppr_tol:.1e}; certified Psi(inf) >= Psi(k))"
            if ppr_k is not None and cfg.ppr_method == "iterate"
            else ""
        ),
        "calibration_rounding": cal["rounding"],
        "calibration_checks": cal["checks"],
        "solver_distance_bound": report.distance_bound,
    }
    certified = amp is not None
    guarantee = {
        "notion": "(epsilon, delta)-DP",
        "unit": "edge (add/remove one undirected edge)",
        "epsilon": float(cfg.epsilon),
        "delta": float(cfg.delta),
        "epsilon_objective_perturbation": cal["epsilon"],
        "delta_objective_perturbation": cal["delta"],
        "epsilon_amp": None if amp is None else amp["epsilon"],
        "delta_amp": None if amp is None else amp["delta"],
        "certified": certified,
        "statement": (
            "Theta is (eps, delta)-DP: Wei et al. 2024 Thm 1 for the exact minimiser at "
            "(eps_op, delta_op), plus AMP output noise at (eps_amp, delta_amp), composed "
            "by Dwork & Roth 2014 Thm B.1"
            if certified
            else "conditional on the exact-minimiser assumption (not certified)"
        ),
    }
    return GconResult(
        theta=theta,
        config=cfg,
        guarantee=guarantee,
        calibration=cal,
        amp=amp,
        solver=report,
        numerics=numerics,
        graph=graph.summary.as_dict(),
        num_classes=c,
        feature_dim=d1,
        dim=d,
        num_train=n1,
        pseudo_labelled=pseudo_labels is not None,
        caveats=caveats,
        warnings=warnings,
    )
