"""Which layers a private training can cover, and how to replace the others (rule DPS164).

The DP-SGD analysis bounds what one example changes in a step by one clipped per-example gradient.
That holds only if example i's gradient depends on example i alone *and* the step releases nothing
else. A layer that mixes the examples of a batch, or writes statistics of the batch into the model,
breaks it:

* ``BatchNorm*`` / ``SyncBatchNorm`` in train mode normalise by the batch's mean and variance (each
  gradient then depends on every other example) and update ``running_mean`` / ``running_var`` — a
  statistic of the private data stored in the released model without noise;
* ``InstanceNorm*`` with ``track_running_stats=True`` update running statistics the same way.

:func:`validate` lists them (or raises :class:`ModuleValidationError`); :func:`fix` returns a copy of
the model with each replaced by a per-example layer (``BatchNorm`` → ``GroupNorm`` — one group for ``BatchNorm1d``
—, as Opacus's
``ModuleValidator.fix`` does; ``InstanceNorm`` → the same layer without running statistics).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch.nn as nn

from dpspec.mechanisms.ledger import CertificateGuardError

__all__ = ["ModuleIssue", "ModuleValidationError", "validate", "fix", "RULE"]

RULE = "DPS164"

_BATCHNORM = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
_INSTANCENORM = (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)


@dataclass(frozen=True)
class ModuleIssue:
    """A layer a private training cannot cover: its ``name`` in ``model.named_modules()``, its type, why,
    and the suggested replacement."""

    name: str
    layer: str
    reason: str
    replacement: str
    rule: str = RULE

    def __str__(self) -> str:
        return f"[{self.rule}] `{self.name or '<model>'}` ({self.layer}): {self.reason}; use {self.replacement}"


class ModuleValidationError(CertificateGuardError, ValueError):
    """The model has layers whose per-example gradients the analysis cannot cover (``issues``)."""

    rule = RULE

    def __init__(self, issues: list[ModuleIssue]):
        self.issues = list(issues)
        lines = "\n".join(f"  - {i}" for i in self.issues)
        super().__init__(
            f"the model has {len(self.issues)} layer(s) that mix the examples of a batch or store "
            f"batch statistics, which the certificate does not cover:\n{lines}\n"
            "`dpspec.torch.fix(model)` returns a copy with each replaced (`dpspec rules DPS164`)"
        )


def _groups(m) -> int:
    """GroupNorm groups for a BatchNorm's channels: min(32, C) (a divisor of C) for images; one group for
    BatchNorm1d, whose (N, C) inputs would otherwise leave one value per group."""
    channels = m.num_features
    if isinstance(m, nn.BatchNorm1d):
        return 1
    g = min(32, channels)
    while channels % g:
        g -= 1
    return g


def validate(model: nn.Module, *, strict: bool = False) -> list[ModuleIssue]:
    """The layers of ``model`` a private training cannot cover (empty: none). With ``strict``, raise
    :class:`ModuleValidationError` instead of returning a non-empty list. Layers in eval mode that do not
    track running statistics are per-example and accepted; a BatchNorm is refused in either mode (put
    in train mode by ``model.train()`` it mixes examples, and its running statistics are private)."""
    issues = []
    for name, m in model.named_modules():
        if isinstance(m, _BATCHNORM):
            issues.append(
                ModuleIssue(
                    name,
                    type(m).__name__,
                    "normalises by the statistics of the whole batch (each example's gradient "
                    "depends on the others) and stores running statistics of the private data",
                    f"nn.GroupNorm({_groups(m)}, {m.num_features})",
                )
            )
        elif isinstance(m, _INSTANCENORM) and m.track_running_stats:
            issues.append(
                ModuleIssue(
                    name,
                    type(m).__name__,
                    "stores running statistics of the private data in the model (no noise covers them)",
                    f"nn.{type(m).__name__}({m.num_features}, affine={m.affine}, track_running_stats=False)",
                )
            )
    if strict and issues:
        raise ModuleValidationError(issues)
    return issues


def _replacement(m: nn.Module) -> nn.Module:
    # fix() replaces the layers validate() refuses: batch norms, and instance norms with running statistics
    assert isinstance(m, (*_BATCHNORM, *_INSTANCENORM))
    new: nn.GroupNorm | nn.InstanceNorm1d | nn.InstanceNorm2d | nn.InstanceNorm3d
    if isinstance(m, _BATCHNORM):
        new = nn.GroupNorm(_groups(m), m.num_features, eps=m.eps, affine=m.affine)
    else:
        # torch annotates InstanceNorm's momentum as float, but its _NormBase takes None (a cumulative average)
        # and stores it as given: the layer's own momentum is passed on unchanged
        new = type(m)(
            m.num_features,
            eps=m.eps,
            momentum=m.momentum,  # type: ignore[arg-type]
            affine=m.affine,
            track_running_stats=False,
        )
    if m.affine and getattr(m, "weight", None) is not None:
        new.weight.data.copy_(m.weight.data)
        new.bias.data.copy_(m.bias.data)
    new.train(m.training)
    return new.to(next((p.device for p in m.parameters()), None) or "cpu")


def fix(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every layer :func:`validate` refuses replaced by its suggested replacement
    (the original is not modified). Build the optimizer on the returned model's parameters."""
    model = copy.deepcopy(model)
    names = {i.name for i in validate(model)}
    if "" in names:
        return _replacement(model)
    for name in sorted(names, key=lambda n: -n.count(".")):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, _replacement(getattr(parent, child)))
    return model
