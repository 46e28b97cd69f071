"""The settings a ``dpsgd`` training block holds (beyond those every training has): the family's
settings model (``Family.settings_model``, read from this folder), built by lowering; a serialised IR
reads back into it by its ``family`` literal (``dpspec.ir.models.TrainingSettings.model_for``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from dpspec.ir.models import Clipping, GaussianNoise, Sampling
from dpspec.ir.settings import SCHEDULE_SETTINGS, TrainingSettings


class DpsgdSettings(TrainingSettings):
    """DP-SGD: subsampled, clipped, noised steps over a dataset of (public) size ``dataset_size``."""

    family: Literal["dpsgd"] = "dpsgd"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {"clipping": SCHEDULE_SETTINGS, "noise": ("guarantee",)}
    sampling: Sampling | None = None
    clipping: Clipping | None = None
    noise: GaussianNoise | None = None
    dataset_size: int | None = None
    model: str | None = None


#: the family's settings model (``Family.settings_model``, read from this folder)
Settings = DpsgdSettings
