"""Stage 1: text → syntax tree (with spans), includes, and the canonical printer."""

from dpspec.parse.fmt import fmt
from dpspec.parse.includes import Program, load_program
from dpspec.parse.parser import parse_text

__all__ = ["fmt", "load_program", "parse_text", "Program"]
