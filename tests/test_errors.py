"""One root for every error dpspec raises on purpose (``dpspec.DpspecError``), each public error also
the builtin it imitates, and one ``CertificateReadError``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import dpspec
from dpspec.errors import CertificateReadError, DpspecError

PKG = Path(dpspec.__file__).resolve().parent
# control flow inside dpspec (raised and caught there), never seen by a caller
INTERNAL = {"_GhostUnsupported", "_StructureError", "_RunCertificate", "_Stop", "WindowTooLarge", "Unsupported"}


def _exception_classes():
    """(module, class name) of every class in dpspec whose name ends in Error/Exceeded/Refused or that
    derives from an exception by name."""
    out = []
    for p in sorted(PKG.rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        module = ".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        for n in tree.body:
            if not isinstance(n, ast.ClassDef) or n.name in INTERNAL:
                continue
            bases = [ast.unparse(b) for b in n.bases]
            if any(b.endswith(("Error", "Exception", "Exceeded", "Refused")) for b in bases):
                out.append((module, n.name))
    return out


def test_the_scan_finds_the_known_errors():
    names = {name for _, name in _exception_classes()}
    assert {"SpecError", "SoundnessError", "BudgetExceededError", "VerificationError", "DataNotFoundError"} <= names


@pytest.mark.parametrize(("module", "name"), _exception_classes())
def test_every_public_error_has_the_one_root(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, DpspecError), f"{module}.{name} does not derive from dpspec.DpspecError"


def test_each_error_is_also_the_builtin_it_imitates():
    from dpspec.accounting import SoundnessError
    from dpspec.data import DataNotFoundError
    from dpspec.mechanisms.ledger import BudgetExceededError, DataMismatchError

    assert issubclass(SoundnessError, ValueError)
    assert issubclass(DataNotFoundError, FileNotFoundError)
    assert issubclass(BudgetExceededError, RuntimeError)
    assert issubclass(DataMismatchError, ValueError)


def test_a_refused_training_is_not_a_type_error():
    pytest.importorskip("torch")
    from dpspec.torch import UnsupportedTrainingError

    assert issubclass(UnsupportedTrainingError, DpspecError) and not issubclass(UnsupportedTrainingError, TypeError)


def test_one_certificate_read_error():
    from dpspec import plot
    from dpspec.certificate import verify

    assert verify.CertificateReadError is CertificateReadError is plot.CertificateReadError
    assert dpspec.DpspecError is DpspecError
    with pytest.raises(CertificateReadError):
        verify.read_certificate_file(PKG / "no-such-certificate.json")
