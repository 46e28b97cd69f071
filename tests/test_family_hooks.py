"""Every family's hooks are what ``dpspec.families.hooks`` types them as.

The registry names hooks by path and a family folder defines them by file; mypy sees them only through
``load_hook``'s declared types, and a ``runtime_checkable`` Protocol would check names only. So each
registered family's hook (and the template folder's) is loaded here and its signature is checked
against its Protocol's: the callers pass every argument by position, so it must accept exactly that
many (``inspect.signature(...).bind``).
"""

from __future__ import annotations

import types

import pytest

from dpspec.families import FAMILIES, FOLDER_HOOKS, Family
from dpspec.families import hooks as H
from dpspec.families.template import ENTRY

#: every hook a Family holds: the folder hooks and the two an entry names only (``split``, ``docs``)
KINDS = (*FOLDER_HOOKS, "split", "docs")


def _paths(f: Family, kind: str) -> tuple[str, ...]:
    value = getattr(f, kind)
    return value if isinstance(value, tuple) else ((value,) if value else ())


def _cases():
    seen: dict[tuple[str, str], str] = {}
    for f in (*FAMILIES.values(), ENTRY):
        for kind in KINDS:
            for path in _paths(f, kind):
                seen.setdefault((kind, path), f.name)
    return [pytest.param(kind, path, id=f"{name}:{kind}:{path}") for (kind, path), name in seen.items()]


def test_every_hook_kind_has_a_type():
    typed = {*H.CALLABLE_HOOKS, *H.MODULE_HOOKS, *H.CLASS_HOOKS}
    assert typed == set(KINDS)
    assert len(typed) == len(H.CALLABLE_HOOKS) + len(H.MODULE_HOOKS) + len(H.CLASS_HOOKS)


def test_the_families_have_hooks_to_check():
    kinds = {case.values[0] for case in _cases()}
    assert {"compile", "runtime", "auditor", "rules", "curve", "steps_curve", "reverify", "demo"} <= kinds
    assert {"distributed_example", "torch_backend", "compose", "split", "docs", "tune_score"} <= kinds


@pytest.mark.parametrize("kind, path", _cases())
def test_hook_fits_its_type(kind, path):
    obj = H.load_hook(path, kind)  # the load-time checks (HookError otherwise)
    if kind in H.CALLABLE_HOOKS:
        assert H.signature_problem(obj, H.positional_arity(H.CALLABLE_HOOKS[kind])) is None
    elif kind == "distributed_example":
        assert H.signature_problem(obj.run, 2) is None  # RUNNERS[w](comm, cfg)
        assert H.signature_problem(obj.run, 1) is None  # and run(comm): cfg defaults to DEFAULTS
    elif kind == "auditor" and hasattr(obj, "mutate"):
        assert H.signature_problem(obj.mutate, H.positional_arity(H.Mutate)) is None
        assert isinstance(getattr(obj, "MUTATION_FACTORS", {}), dict)


def test_the_signature_check_can_fail():
    arity = H.positional_arity(H.CompileTarget)
    assert arity == 3

    def two(ctx, t): ...

    def four(ctx, t, data, extra): ...

    def keyword_only(ctx, t, *, data): ...

    def three_and_a_default(ctx, t, data, extra=None): ...

    def variadic(*args): ...

    for bad in (two, four, keyword_only):
        assert H.signature_problem(bad, arity) is not None, bad.__name__
    for good in (three_and_a_default, variadic):
        assert H.signature_problem(good, arity) is None, good.__name__


@pytest.mark.parametrize(
    "kind, obj",
    [
        ("compile", types.ModuleType("not_a_function")),
        ("runtime", lambda: None),
        ("settings_model", dict),
        ("auditor", lambda: None),
        ("distributed_example", types.ModuleType("no_workload")),
    ],
)
def test_a_hook_of_the_wrong_kind_is_refused(kind, obj):
    with pytest.raises(H.HookError, match=kind):
        H.check(kind, "somewhere:hook", obj)
