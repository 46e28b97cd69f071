"""The errors a runtime object raises when asked for more than its certificate covers. A leaf module,
so that the certificate package can raise them without importing the ledger."""

from __future__ import annotations

from dpspec.errors import DpspecError


class CertificateGuardError(DpspecError, RuntimeError):
    """A runtime object was asked to do something its certificate does not cover (``rule``: the
    catalogue id, `dpspec rules DPS16x`)."""

    rule = "DPS161"

    def __init__(self, message: str):
        self.message = message
        super().__init__(f"[{self.rule}] {message}")


class BudgetExceededError(CertificateGuardError):
    """More steps (or outputs) were requested than the certificate accounts for."""

    rule = "DPS161"


class CapExceededError(CertificateGuardError):
    """A per-batch cap of the certificate (records per batch, node degree, …) would be exceeded."""

    rule = "DPS162"


class DataMismatchError(CertificateGuardError, ValueError):
    """The data handed to the runtime differs from what the certificate assumes (size, columns, …)."""

    rule = "DPS163"


class LedgerRewindError(DataMismatchError):
    """A ledger state (checkpoint, copy, pickle) would lower the steps already charged against a run, or
    give a second, independent copy of its budget: refused (the ledger's high-water mark)."""

    rule = "DPS167"
