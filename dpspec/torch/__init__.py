"""dpspec for your own PyTorch loop (torch is imported only when this package is).

    model, optimizer, loader = dpspec.torch.make_private(compiled, model, optimizer, data_loader)
    dpspec.torch.validate(model)   # layers the analysis cannot cover (DPS164), e.g. BatchNorm
    dpspec.torch.fix(model)        # a copy with each replaced (BatchNorm -> GroupNorm)
    result = dpspec.torch.tune(compiled, make_model, make_optimizer, loader, train_fn, score_fn)  # a `tune` block

See docs/training.md.
"""

from dpspec.torch.private import (
    CriterionMismatchError,
    LedgerRewindError,
    PrivateCopyError,
    PrivateDataLoader,
    PrivateModel,
    PrivateOptimizer,
    SamplingOverrideWarning,
    UnnoisedParameterError,
    UnsupportedTrainingError,
    make_private,
)
from dpspec.torch.tuning import tune
from dpspec.torch.validator import ModuleIssue, ModuleValidationError, fix, validate
from dpspec.torch.virtual import VirtualDataLoader, virtual_batches

__all__ = [
    "make_private",
    "tune",
    "validate",
    "fix",
    "PrivateModel",
    "PrivateOptimizer",
    "PrivateDataLoader",
    "ModuleIssue",
    "ModuleValidationError",
    "CriterionMismatchError",
    "SamplingOverrideWarning",
    "UnsupportedTrainingError",
    "UnnoisedParameterError",
    "LedgerRewindError",
    "PrivateCopyError",
    "VirtualDataLoader",
    "virtual_batches",
]
