"""The settings a ``srpp_sgd`` training block holds (beyond those every training has): the family's
settings model (``Family.settings_model``, read from this folder), built by lowering; a serialised IR
reads back into it by its ``family`` literal (``dpspec.ir.models.TrainingSettings.model_for``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from dpspec.ir.models import Clipping, DiscrepancySpec, GaussianNoise, LrScheduleSpec, Sampling
from dpspec.ir.settings import SCHEDULE_SETTINGS, TrainingSettings


class SrppSgdSettings(TrainingSettings):
    """SRPP-SGD: DP-SGD's settings plus the secret's discrepancy model and the HUC accountant's."""

    family: Literal["srpp_sgd"] = "srpp_sgd"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {
        "clipping": SCHEDULE_SETTINGS,
        "noise": ("guarantee",),
        "model": ("execution",),
    }
    sampling: Sampling | None = None
    clipping: Clipping | None = None
    lr_schedule: LrScheduleSpec | None = None
    noise_units: Literal["gradient", "parameter"] | None = None
    accountant: Literal["huc", "sa_huc", "amplified"] | None = None
    discrepancy: DiscrepancySpec | None = None
    dataset_size: int | None = None
    noise: GaussianNoise | None = None
    model: str | None = None


#: the family's settings model (``Family.settings_model``, read from this folder)
Settings = SrppSgdSettings
