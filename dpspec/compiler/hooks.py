"""Code hooks: the places where a spec names user code that the compiler imports and calls.

Two constructs do: ``sampler("module:function")`` worlds of a Pufferfish scenario and
``callable(..., target = "module:function")`` queries. Compiling a spec you wrote runs them, as any
Python program would. Verifying a certificate must not: its embedded spec comes from whoever sent it.
:func:`find_hooks` lists the hooks of a spec (pure data, nothing imported) and :func:`code_hooks`
switches importing off for a block of code; :func:`import_hook` is the only function that imports a
hook, and it refuses with :class:`CodeHookRefused` while hooks are off.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from pydantic import BaseModel

from dpspec.errors import DpspecError

_ALLOWED: ContextVar[bool] = ContextVar("dpspec_code_hooks_allowed", default=True)


class CodeHookRefused(DpspecError):
    """A spec names user code while code hooks are switched off (``dpspec verify`` without --trust-code)."""

    def __init__(self, target: str):
        self.target = target
        super().__init__(f"the spec calls user code `{target}`, and code hooks are switched off")


@dataclass(frozen=True)
class Hook:
    construct: str  # 'sampler' or 'callable'
    target: str  # "module:function"
    line: int | None


@contextmanager
def code_hooks(allowed: bool):
    """Within the block, :func:`import_hook` imports user code only if ``allowed``."""
    token = _ALLOWED.set(bool(allowed))
    try:
        yield
    finally:
        _ALLOWED.reset(token)


def hooks_allowed() -> bool:
    return _ALLOWED.get()


def find_hooks(spec_ir) -> list[Hook]:
    """Every construct of the IR that would import and call user code (found by walking the IR, so a
    construct added later is found as long as it is a ``SamplerWorld`` or a ``callable`` query)."""
    from dpspec.ir import models as ir

    out: list[Hook] = []
    stack = [spec_ir]
    while stack:
        node = stack.pop()
        if isinstance(node, ir.SamplerWorld):
            out.append(Hook("sampler", node.target, node.span.line if node.span else None))
        elif isinstance(node, ir.BoundedQuery) and node.function == "callable":
            out.append(Hook("callable", node.target or "", node.span.line if node.span else None))
        if isinstance(node, BaseModel):
            stack.extend(getattr(node, f) for f in type(node).model_fields)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
    return sorted(out, key=lambda h: (h.line or 0, h.target))


def import_hook(target: str):
    """Import ``module:function`` (only while hooks are allowed). Raises ``CodeHookRefused``,
    ``ValueError`` (not of that form), ``ImportError``/``AttributeError`` (not found)."""
    if not hooks_allowed():
        raise CodeHookRefused(target)
    mod, _, fn = target.partition(":")
    if not mod or not fn:
        raise ValueError(f'`{target}` is not of the form "module:function"')
    return getattr(importlib.import_module(mod), fn)
