"""What every training family's settings model builds on: the base ``TrainingSettings`` and the common settings.

``ir.Training`` keeps what every training has (name, what it protects, the mechanism, the schedule, the
guarantee, where it runs) and one ``settings`` field typed as the base ``TrainingSettings``; lowering builds the
family's own model, which lives in the family's folder (``dpspec/families/<family>/settings.py``, named by the
family's ``settings_model``). Code of a family reads its settings narrowed to its model,
``t.settings_as(DpsgdSettings).sampling``, so a setting of another family cannot be read by mistake.

A settings model's fields are spec-level setting names (``sampling``, ``clipping``, …) and, with the
common settings it lists (``common_after``), they are the settings the family accepts: a setting the
family does not hold is refused (DPS130). Each model is discriminated by its ``family`` literal, so a
serialised IR names its family and reads back into the same model: ``TrainingSettings.model_for`` finds a
model not yet imported through the family table (``dpspec.families``, a standard-library leaf below the IR),
never through a family's folder directly.
"""

from __future__ import annotations

from dpspec.ir.models import COMMON_SETTINGS, TrainingSettings

__all__ = ["COMMON_SETTINGS", "SCHEDULE_SETTINGS", "TrainingSettings"]

#: the common schedule settings, for a model's ``common_after``
SCHEDULE_SETTINGS = ("steps", "epochs", "learning_rate", "momentum")
