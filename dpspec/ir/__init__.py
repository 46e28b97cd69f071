"""The typed IR: frozen pydantic v2 models, the single source of truth for later stages."""

from dpspec.ir.models import *  # noqa: F401,F403
from dpspec.ir.models import SpecIR

__all__ = ["SpecIR"]
