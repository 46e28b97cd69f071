"""A code hook that records that it ran: the certificate fuzzer and tests/certificate inject specs
naming it, and ``dpspec verify`` must never import or call it (without --trust-code)."""

import os
from pathlib import Path

import numpy as np


def _touch(what: str) -> None:
    path = os.environ.get("DPSPEC_FUZZ_CANARY")
    if path:
        Path(path).write_text(what, encoding="utf-8")


_touch("imported")

SPEC = ('scenario s {{\n  secret x in {{a, b}}\n  prior sampler("tests.fuzz.hook_canary:draw", samples = 50)\n}}\n'
        'release r {{\n  protect s\n  mechanism swm\n'
        '  query callable(target = "tests.fuzz.hook_canary:query", dimension = 1, bounds = [0, 1])\n'
        '  slices axes\n  guarantee ave_srpp(alpha = 2, epsilon = {eps}, gamma = 0.05)\n}}\n')


def draw(secret, n, rng):
    """n datasets of 20 values in [0, 1] whose mean depends on the secret."""
    _touch("sampler called")
    centre = 0.6 if str(secret) == "a" else 0.4
    return [np.clip(rng.normal(centre, 0.1, size=(20, 1)), 0.0, 1.0) for _ in range(n)]


def query(X):
    _touch("callable called")
    return np.asarray(X, dtype=float).mean(axis=0)
