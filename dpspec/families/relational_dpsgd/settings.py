"""The settings a ``relational_dpsgd`` training block holds (beyond those every training has): the family's
settings model (``Family.settings_model``, read from this folder), built by lowering; a serialised IR
reads back into it by its ``family`` literal (``dpspec.ir.models.TrainingSettings.model_for``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from dpspec.ir.models import Clipping, EncoderSpec, GaussianNoise, LossSpec, Sampling, SplitSpec
from dpspec.ir.settings import TrainingSettings


class RelationalSettings(TrainingSettings):
    """Relational DP-SGD: coupled sampling over a degree-capped graph, per-tuple clipping."""

    family: Literal["relational_dpsgd"] = "relational_dpsgd"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {
        "split": ("steps", "epochs", "learning_rate"),
        "noise": ("guarantee", "execution"),
    }
    sampling: Sampling | None = None
    degree_cap: int | None = None
    clipping: Clipping | None = None
    loss: LossSpec | None = None
    encoder: EncoderSpec | None = None
    split: SplitSpec | None = None
    noise: GaussianNoise | None = None


#: the family's settings model (``Family.settings_model``, read from this folder)
Settings = RelationalSettings
