"""The root of every error dpspec raises on purpose.

``except dpspec.DpspecError`` catches every refusal, guard and located diagnostic dpspec raises, and
nothing else. Each public error also inherits the builtin it imitates (a bad value is also a
``ValueError``, a missing data file also a ``FileNotFoundError``, a runtime guard also a
``RuntimeError``), so code written against the builtins keeps working. A bug in dpspec surfaces as a
builtin error that is *not* a ``DpspecError``.

This module imports only the standard library: every stage, the pure-numerics ``accounting`` leaf
included, may import it.
"""

from __future__ import annotations

__all__ = ["CertificateReadError", "DpspecError"]


class DpspecError(Exception):
    """Base class of every error dpspec raises deliberately."""


class CertificateReadError(DpspecError, ValueError):
    """The file is not a readable dpspec certificate (the message says why): missing, too large, not
    UTF-8, not JSON, or not shaped like a certificate. Raised by ``dpspec verify``, ``explain`` and
    ``plot`` alike."""
