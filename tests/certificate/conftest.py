"""Shared fixtures: real certificates (compiled once per session by the certificate fuzzer's helper)."""

import json

import pytest

from tests.fuzz.certmut import base_certificates, reseal


@pytest.fixture(scope="session")
def certs() -> dict[str, str]:
    """name → certificate JSON text (specs/ without external data, and small generated specs)."""
    return base_certificates()


@pytest.fixture
def doc(certs):
    """A fresh, editable copy of a base certificate: ``doc("gaussian_release")``."""
    return lambda name="gaussian_release": json.loads(certs[name])


@pytest.fixture
def resealed():
    """Reseal an edited certificate (content hash and spec sha256), returning its JSON text."""
    return lambda d: json.dumps(reseal(d), allow_nan=True)
