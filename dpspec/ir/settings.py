"""The settings of each training family: one typed model per family, holding only what it reads.

``ir.Training`` keeps what every training has (name, what it protects, the mechanism, the
schedule, the guarantee, where it runs) and one ``settings`` field typed as the base
``TrainingSettings``; lowering builds the family's own model (named by ``settings_model`` in the
family's entry in ``dpspec/families/__init__.py``). Code of a family reads its settings narrowed to its model,
``t.settings_as(DpsgdSettings).sampling``, so a setting of another family cannot be read by mistake.

A settings model's fields are spec-level setting names (``sampling``, ``clipping``, …) and, with the
common settings it lists (``common_after``), they are the settings the family accepts: a setting the
family does not hold is refused (DPS130). Each model is discriminated by its ``family`` literal, so a
serialised IR names its family and reads back into the same model.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from dpspec.ir.models import (
    COMMON_SETTINGS,
    Clipping,
    DiscrepancySpec,
    EncoderSpec,
    GaussianNoise,
    LossSpec,
    LrScheduleSpec,
    Propagation,
    Sampling,
    SplitSpec,
    TrainingSettings,
)

__all__ = [
    "COMMON_SETTINGS",
    "DpsgdSettings",
    "GconSettings",
    "RelationalSettings",
    "SrppSgdSettings",
    "TrainingSettings",
]

_SCHEDULE = ("steps", "epochs", "learning_rate", "momentum")


class DpsgdSettings(TrainingSettings):
    """DP-SGD: subsampled, clipped, noised steps over a dataset of (public) size ``dataset_size``."""

    family: Literal["dpsgd"] = "dpsgd"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {"clipping": _SCHEDULE, "noise": ("guarantee",)}
    sampling: Sampling | None = None
    clipping: Clipping | None = None
    noise: GaussianNoise | None = None
    dataset_size: int | None = None
    model: str | None = None


class SrppSgdSettings(TrainingSettings):
    """SRPP-SGD: DP-SGD's settings plus the secret's discrepancy model and the HUC accountant's."""

    family: Literal["srpp_sgd"] = "srpp_sgd"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {
        "clipping": _SCHEDULE,
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
