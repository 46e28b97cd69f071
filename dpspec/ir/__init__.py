"""The typed IR: frozen pydantic v2 models, the single source of truth for later stages."""

from dpspec.ir.models import *  # noqa: F401,F403
from dpspec.ir.models import SpecIR
from dpspec.ir.settings import *  # noqa: F401,F403  (the base of the training families' settings models)

__all__ = ["SpecIR"]
