"""GCON runtime: edge-level DP graph convolution by objective perturbation (Wei et al. 2024).

Layout:
* ``graph``       -- ``Graph`` (canonical undirected 0/1 adjacency, validation, counts)
* ``propagation`` -- ``A~ = D^-1(A+I)``, APPR/PPR features, inference features (F1-F3, F14)
* ``encoder``     -- edge-free encoder: ``MLPEncoder``, ``tfidf_features``, ``normalise_rows``
* ``noise``       -- Erlang-radius / uniform-direction sampler (Alg. 2), AMP Gaussian noise
* ``objective``   -- perturbed objective (eq. (13)), certified Newton solver
* ``trainer``     -- ``GconConfig``, ``train_gcon``, ``GconResult`` (certificate-ready)

Calibration lives in ``dpspec.accounting.gcon`` (pure numpy/scipy).
"""

from dpspec.gcon.encoder import MLPEncoder, check_row_normalised, normalise_rows, tfidf_features
from dpspec.gcon.graph import Graph, GraphSummary
from dpspec.gcon.noise import sample_objective_noise
from dpspec.gcon.objective import Loss, PerturbedObjective, SolverReport, solve_certified
from dpspec.gcon.propagation import (
    private_inference_features,
    propagate,
    propagate_features,
    public_inference_features,
    transition_matrix,
)
from dpspec.gcon.trainer import THEOREM_IDS, GconConfig, GconResult, train_gcon

__all__ = [
    "Graph",
    "GraphSummary",
    "transition_matrix",
    "propagate",
    "propagate_features",
    "private_inference_features",
    "public_inference_features",
    "MLPEncoder",
    "tfidf_features",
    "normalise_rows",
    "check_row_normalised",
    "sample_objective_noise",
    "Loss",
    "PerturbedObjective",
    "SolverReport",
    "solve_certified",
    "GconConfig",
    "GconResult",
    "train_gcon",
    "THEOREM_IDS",
]
