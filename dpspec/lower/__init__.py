"""Stage 2: syntax tree → typed IR (names, shapes and types; every problem at once)."""

from dpspec.lower.lowering import lower_program

__all__ = ["lower_program"]
