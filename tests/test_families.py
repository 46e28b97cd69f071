"""The family table (dpspec/families/__init__.py) is the one place a mechanism family is declared: every
path it names loads, and the stages read their lists from it."""

import pytest

from dpspec.families import FAMILIES, load


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_declared_path_loads(name):
    f = FAMILIES[name]
    assert f.name == name and f.block in ("release", "train")
    assert f.compile and f.runtime, "a family needs a compile function and a runtime class"
    assert callable(load(f.compile)) and isinstance(load(f.runtime), type)
    for path in (*f.accountants, *f.rules, *(p for p in (f.auditor, f.compose) if p)):
        load(path)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_settings_are_settings_of_the_block(name):
    from dpspec.lower.lowering import BLOCK_SETTINGS

    f = FAMILIES[name]
    known = {s.key for s in BLOCK_SETTINGS[f.block]}
    assert set(f.settings) <= known, sorted(set(f.settings) - known)


def test_stages_take_their_lists_from_the_table():
    from dpspec.audit import AUDITORS
    from dpspec.check.rules_distributed import DISTRIBUTED_MECHANISMS
    from dpspec.lower.lowering import MECHANISM_NAMES
    from dpspec.mechanisms.registry import MECHANISMS

    assert MECHANISM_NAMES == tuple(FAMILIES)
    assert MECHANISMS is FAMILIES
    assert set(DISTRIBUTED_MECHANISMS) == {k for k, f in FAMILIES.items() if f.distributed}
    assert {k for k, f in FAMILIES.items() if f.auditor} <= set(AUDITORS)
