"""The settings a ``gcon`` training block holds (beyond those every training has): the family's
settings model (``Family.settings_model``, read from this folder), built by lowering; a serialised IR
reads back into it by its ``family`` literal (``dpspec.ir.models.TrainingSettings.model_for``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from dpspec.ir.models import EncoderSpec, LossSpec, Propagation, SplitSpec
from dpspec.ir.settings import TrainingSettings


class GconSettings(TrainingSettings):
    """GCON: propagation, a strongly convex loss and an edge-free encoder (objective perturbation)."""

    family: Literal["gcon"] = "gcon"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {"inference": ("guarantee",)}
    propagation: Propagation | None = None
    loss: LossSpec | None = None
    regularization: float | None = None
    encoder: EncoderSpec | None = None
    pseudo_labels: bool | None = None
    split: SplitSpec | None = None
    inference: Literal["private_graph", "public_graph"] | None = None


#: the family's settings model (``Family.settings_model``, read from this folder)
Settings = GconSettings
