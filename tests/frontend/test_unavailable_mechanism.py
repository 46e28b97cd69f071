"""DPS110: a mechanism the language knows but this build does not ship is a located error."""

import dataclasses

import dpspec
from dpspec.mechanisms import registry


def test_unavailable_mechanism_is_reported(monkeypatch):
    decl = registry.MECHANISMS["gcon"]
    monkeypatch.setitem(registry.MECHANISMS, "gcon", dataclasses.replace(
        decl, available=False, unavailable_reason="GCON is switched off in this build"))
    spec = dpspec.loads("privacy links { unit edge  graph cora }\n"
                        "train t { mechanism gcon  guarantee dp(epsilon = 1, delta = 1e-4) }", name="x.dps")
    d = [d for d in spec.diagnostics if d.rule == "DPS110"]
    assert d and "switched off" in d[0].message and d[0].span.line == 2
