"""The settings a ``noisy_gd`` training block holds (beyond those every training has)."""

from __future__ import annotations

from typing import ClassVar, Literal

from dpspec.ir import models as ir
from dpspec.ir.settings import TrainingSettings


class Settings(TrainingSettings):
    """``noise noise_multiplier(…)``: σ in units of the clipping norm. ``common_after`` places the
    setting in the documented order (after ``steps``, before ``guarantee``)."""

    family: Literal["noisy_gd"] = "noisy_gd"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {"noise": ("steps", "guarantee")}
    noise: ir.GaussianNoise | None = None
