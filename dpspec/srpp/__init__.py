"""SRPP-SGD: private training under sliced Rényi Pufferfish privacy (Zhang & Vorobeychik 2025, §5).

Accounting formulas live in :mod:`dpspec.accounting.huc` (numpy only); this package adds the
discrepancy models (App. D), Lipschitz constants of optimizers (App. C, W.2), training plans with
noise placement, the torch runtime (imported lazily), the group-DP baseline and auditing.

    from dpspec import srpp
    plan = srpp.SrppSgdPlan(sampling=srpp.Sampling("wor", dataset_size=N, batch_size=64),
                            optimizer=srpp.OptimizerSpec(srpp.LrSchedule(0.1, T, "cosine", 0.05), momentum=0.9),
                            clip=1.0)
    cal = srpp.calibrate(plan, srpp.FixedPairWorlds(N, 5), alpha=16, epsilon=8, accountant="sa_huc")
    report = srpp.train_srpp_sgd(model, X, y, plan, cal, seed=0)
"""

from dpspec.accounting.huc import (
    SRPP_RULES,
    SRPPSGDCalibration,
    SRPPSGDComposition,
    SrppSoundnessError,
    amplified_epsilon,
    amplified_sigma2,
    binomial_k2,
    calibrate_srpp_sgd,
    calibrate_srpp_sgd_amplified,
    compose_srpp_sgd,
    huc,
    hypergeometric_k2,
    sa_huc,
    srpp_sgd_epsilon,
    srpp_sgd_epsilon_from_variances,
    srpp_sgd_sigma2,
)

from .audit import loss_threshold_auc, roc_auc
from .baseline import GroupDpBaseline, calibrate_group_dpsgd
from .discrepancy import (
    Cap,
    DiscrepancyModel,
    FixedPairWorlds,
    IIDRecords,
    LocalizedInfluence,
    MonteCarloDiscrepancy,
    mc_radius,
    mc_sa_cap,
    mc_tail_cap,
)
from .lipschitz import LrSchedule, OptimizerSpec, optimizer_spec_from_torch
from .plan import BlockProfile, SrppSgdPlan, calibrate, plan_caps, realized_epsilon, unit_caps
from .sampling import Sampling
from .worlds import prevalence_worlds, relabel_to_count


def __getattr__(name):  # the torch runtime, imported on first use
    if name in ("SrppSgdOptimizer", "PrivateSgdEngine", "train_srpp_sgd", "TrainingReport", "evaluate_accuracy"):
        from . import trainer

        return getattr(trainer, name)
    raise AttributeError(f"module 'dpspec.srpp' has no attribute {name!r}")


__all__ = [
    # accounting
    "huc",
    "sa_huc",
    "hypergeometric_k2",
    "binomial_k2",
    "srpp_sgd_sigma2",
    "srpp_sgd_epsilon",
    "srpp_sgd_epsilon_from_variances",
    "calibrate_srpp_sgd",
    "compose_srpp_sgd",
    "SRPPSGDCalibration",
    "amplified_epsilon",
    "amplified_sigma2",
    "calibrate_srpp_sgd_amplified",
    "SRPPSGDComposition",
    "SrppSoundnessError",
    "SRPP_RULES",
    # plan and models
    "Sampling",
    "LrSchedule",
    "OptimizerSpec",
    "optimizer_spec_from_torch",
    "SrppSgdPlan",
    "BlockProfile",
    "calibrate",
    "plan_caps",
    "unit_caps",
    "realized_epsilon",
    "Cap",
    "DiscrepancyModel",
    "LocalizedInfluence",
    "FixedPairWorlds",
    "IIDRecords",
    "MonteCarloDiscrepancy",
    "mc_radius",
    "mc_sa_cap",
    "mc_tail_cap",
    # runtime (lazy)
    "SrppSgdOptimizer",
    "PrivateSgdEngine",
    "train_srpp_sgd",
    "TrainingReport",
    "evaluate_accuracy",
    # baseline, worlds, audit
    "GroupDpBaseline",
    "calibrate_group_dpsgd",
    "prevalence_worlds",
    "relabel_to_count",
    "roc_auc",
    "loss_threshold_auc",
]
