"""Pufferfish scenarios and the Gaussian Sliced Wasserstein Mechanism (SWM).

Numerical core of Zhang & Vorobeychik (2025), "Sliced Rényi Pufferfish Privacy" §3–4 (static
release). Noise calibration formulas live in :mod:`dpspec.accounting.swm`; this package computes
their inputs (per-slice ∞-Wasserstein sensitivities, eq. 6) from Pufferfish worlds and queries,
releases, and audits.

    from dpspec import pufferfish as pf
    pf.w_inf_1d(a, b)                                   # exact 1-D W∞ (F7/F7b)
    pf.slice_sensitivities(samples, pairs, directions)  # Δ^u per direction (eq. 6)
    pf.calibrate(scenario, query, profile, alpha=4, epsilon=1, flavour="joint_exact")
"""

from dpspec.accounting.concentration import dkw_radius
from dpspec.accounting.swm import (
    PAPER,
    RULES,
    Assumption,
    SoundnessError,
    SWMCalibration,
    ave_srd,
    calibrate_swm,
    compose_static_releases,
    gaussian_renyi_shift,
    gwm_sigma2,
    joint_srd,
    profile_aggregates,
    spp_epsilon,
    swm_epsilon,
    swm_rdp_curve,
    swm_sigma2,
    swm_spp_epsilon,
)

from .attacks import attack_accuracy, bayes_attack, bayes_log_posterior, map_attack, prior_baseline
from .mechanism import Scenario, SWMMechanism, calibrate, collect_outputs, data_delta0, release
from .profiles import SliceProfile, axes_profile, explicit_profile, sphere_profile
from .queries import (
    BallSupport,
    BoxSupport,
    CallableQuery,
    Concat,
    Histogram,
    LinearSVMQuery,
    LogisticRegressionQuery,
    Mean,
    Query,
    Rate,
    SecondMoment,
    Std,
    Sum,
    fit_linear_svm,
    fit_logistic_regression,
)
from .sensitivity import SensitivityReport, check_pairs, slice_sensitivities, sliced_sensitivity_report
from .wasserstein import w_inf_1d, w_inf_dkw_upper_sorted_rows, w_inf_exact, w_inf_exceeds, w_inf_sorted_rows
from .worlds import (
    BalancedSubsampleWorld,
    DeterministicWorld,
    EmpiricalWorld,
    ProductFamilyWorld,
    SamplerWorld,
    World,
    all_distinct_pairs,
)

__all__ = [
    # distances and sensitivities
    "w_inf_1d",
    "w_inf_sorted_rows",
    "w_inf_dkw_upper_sorted_rows",
    "w_inf_exact",
    "w_inf_exceeds",
    "slice_sensitivities",
    "sliced_sensitivity_report",
    "SensitivityReport",
    "check_pairs",
    # profiles
    "SliceProfile",
    "explicit_profile",
    "axes_profile",
    "sphere_profile",
    # worlds and scenarios
    "World",
    "EmpiricalWorld",
    "BalancedSubsampleWorld",
    "DeterministicWorld",
    "SamplerWorld",
    "ProductFamilyWorld",
    "all_distinct_pairs",
    "Scenario",
    "collect_outputs",
    "data_delta0",
    # queries
    "Query",
    "BoxSupport",
    "BallSupport",
    "Mean",
    "Sum",
    "Std",
    "SecondMoment",
    "Rate",
    "Histogram",
    "Concat",
    "LogisticRegressionQuery",
    "LinearSVMQuery",
    "CallableQuery",
    "fit_logistic_regression",
    "fit_linear_svm",
    # calibration and release
    "calibrate",
    "release",
    "SWMMechanism",
    "SWMCalibration",
    "calibrate_swm",
    "swm_sigma2",
    "swm_epsilon",
    "swm_rdp_curve",
    "spp_epsilon",
    "swm_spp_epsilon",
    "gwm_sigma2",
    "profile_aggregates",
    "ave_srd",
    "joint_srd",
    "gaussian_renyi_shift",
    "dkw_radius",
    "Assumption",
    "PAPER",
    "compose_static_releases",
    # errors
    "SoundnessError",
    "RULES",
    # attacks
    "map_attack",
    "bayes_attack",
    "bayes_log_posterior",
    "prior_baseline",
    "attack_accuracy",
]
