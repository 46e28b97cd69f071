"""Kept so that ``dpspec.compiler.gaussian_release`` still imports: the analytic-Gaussian
accountant is accounting, not compilation, and lives in ``dpspec.accounting.analytic_gaussian``."""

from dpspec.accounting.analytic_gaussian import (  # noqa: F401 - re-exported
    ABS_ERROR,
    MIN_TARGET_EPSILON,
    ROUND_UP_ULPS,
    delta_of_epsilon,
    epsilon_of_delta,
    mu_for_target,
    rdp_curve,
    round_up,
    sigma_for_rdp,
    sigma_for_target,
)
