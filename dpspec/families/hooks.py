"""The types of a family's hooks: what each file of a family folder (``FOLDER_HOOKS``) or each path of a
registry entry must define, and how the shared tools call it.

``dpspec.families.load_hook(path, kind)`` returns a hook typed by the table below (checked as far as is
cheap when it is loaded: a function is callable, a class is a class, a module is a module with the
names it must define); ``tests/test_family_hooks.py`` checks every registered family's hooks against
the signatures here. The callers pass every argument by position, so a hook may name its parameters as
it likes.

=====================  ================================  ==============================================
hook (``Family``)      defined by                        type
=====================  ================================  ==============================================
``settings_model``     ``settings.py``: ``Settings``     a ``TrainingSettings`` subclass
``compile``            ``compile.py``: ``compile_target`` :class:`CompileTarget`
``compose``            ``compose.py``: ``compose``       :class:`Compose`
``split``              (entry only)                      :class:`Split`
``docs``               (entry only)                      :class:`Docs`
``accountants``        ``accountant.py`` (module)        a module (pure numerics)
``runtime``            ``runtime.py``: ``Runtime``       a class (the mechanism object)
``auditor``            ``audit.py`` (module)             :class:`AuditorModule`
``rules``              ``rules.py`` (module)             a module (registers its rules on import)
``curve``              ``plot.py``: ``curve``            :class:`Curve`
``steps_curve``        ``plot.py``: ``steps_panel``      :class:`StepsPanel`
``reverify``           ``verify.py``: ``reverify``       :class:`Reverify`
``distributed_example`` ``distributed.py`` (module)      :class:`DistributedWorkload`
``torch_backend``      ``torch_backend.py``: ``backend`` :class:`TorchBackend`
``demo``               ``demo.py``: ``run``              :class:`DemoRun`
``tune_score``         ``tuning.py``: ``tune_score``     :class:`TuneScore`
``tune_pld``           ``tuning.py``: ``tune_pld``       :class:`TunePld`
``formulas``           ``formulas.py`` (module)          :class:`FormulaTable`
=====================  ================================  ==============================================

At run time this module imports only the standard library and the registry (``dpspec.families``, whose
own imports are the standard library's alone, so the registry cannot import this module back); the
types the signatures name are imported for the type checker only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

from dpspec.errors import DpspecError
from dpspec.families import load

if TYPE_CHECKING:
    import numpy as np

    from dpspec.certificate.model import TargetCertificate
    from dpspec.check.framework import Context
    from dpspec.compiler.common import CompiledTarget
    from dpspec.ir import models as ir
    from dpspec.ir.settings import TrainingSettings
    from dpspec.plot.model import Panel, Series


class CompileTarget(Protocol):
    """``compile_target(ctx, target, data)``: calibrate or account for ``target`` (an ``ir.Release`` or
    ``ir.Training`` of the family: the driver dispatches on the mechanism, so the family's own type) and
    write its certificate entry; ``data`` is what the caller bound at compile time."""

    def __call__(self, ctx: Context, target: Any, data: Any, /) -> CompiledTarget: ...


class Compose(Protocol):
    """``compose(composition, parts)``: the certificate of a composition whose parts are all of the family
    (or of families naming the same hook), by the family's own composition theorem."""

    def __call__(self, composition: ir.Composition, parts: list[CompiledTarget], /) -> TargetCertificate: ...


class Split(Protocol):
    """``split(ctx, composition, releases)``: {release name: the share of a ``compose … split`` block's
    guarantee it is compiled to}."""

    def __call__(self, ctx: Context, composition: ir.Composition, releases: list[ir.Release], /) -> dict[str, Any]: ...


class Docs(Protocol):
    """``docs()``: the family's section of docs/language.md, as markdown lines."""

    def __call__(self) -> list[str]: ...


class Curve(Protocol):
    """``curve(result, grid, deltas)``: ``dpspec plot``'s ε(δ) line through the certified pairs of
    ``result`` (a ``TargetCertificate``) over the δ ``grid``; None: the generic RDP → (ε, δ) line."""

    def __call__(self, result: TargetCertificate, grid: np.ndarray, deltas: Sequence[float], /) -> Series | None: ...


class StepsPanel(Protocol):
    """``steps_panel(result, common, certified, steps, rdp_target)``: ``dpspec plot``'s ε-vs-steps panel
    (``common``: the panel's fixed fields; ``certified``: the certified point at ``steps``)."""

    def __call__(
        self, result: TargetCertificate, common: dict[str, Any], certified: Series, steps: int, rdp_target: bool, /
    ) -> Panel: ...


class Reverify(Protocol):
    """``reverify(result, problem, bound, rel_tol)``: ``dpspec verify``'s independent re-check of a result
    that recompiled equal, from its recorded numbers only; ``problem(message)`` records a failure and
    ``bound(name, formula, where, recorded, exact, abs_tol)`` checks a recorded upper bound."""

    def __call__(
        self, result: TargetCertificate, problem: Callable[[str], None], bound: Callable[..., None], rel_tol: float, /
    ) -> None: ...


class DemoRun(Protocol):
    """``run(target, spec_name, mechanism, rng, quiet)``: ``python -m dpspec.demo`` uses the compiled
    ``mechanism`` of ``target`` on generated data and prints one line."""

    def __call__(
        self, target: str, spec_name: str, mechanism: Any, rng: np.random.Generator, quiet: bool, /
    ) -> None: ...


class TorchBackend(Protocol):
    """``backend(mechanism)``: ``dpspec.torch.make_private``'s backend class for the family's trainings,
    constructed as ``B(mechanism, model, optimizer, criterion, n, seed)``; raises
    ``UnsupportedTrainingError`` to refuse."""

    def __call__(self, mechanism: Any, /) -> type: ...


class TuneScore(Protocol):
    """``tune_score(training)``: how much one protected unit can change a ``tune`` block's private score (a
    sum of per-item values in [0, 1]) and what the score may read for that to hold; None: not covered."""

    def __call__(self, training: ir.Training, /) -> tuple[float, str] | None: ...


class TunePld(Protocol):
    """``tune_pld(mechanism)``: a compiled training's certified privacy-loss distribution, rebuilt from the
    mechanism's certified numbers (a ``tune`` block's run profile); None where the family has none for it."""

    def __call__(self, mechanism: Any, /) -> Any: ...


class Mutate(Protocol):
    """An auditor module's ``mutate(mechanism, kind, factor)``: a deliberately broken copy of
    ``mechanism`` (None when ``kind`` does not apply to it)."""

    def __call__(self, mechanism: Any, kind: str, factor: float | None, /) -> Any: ...


class AuditorModule(Protocol):
    """An auditor module registers its auditor when imported (``dpspec.audit.register_auditor``); it may
    define ``MUTATION_FACTORS`` ({kind: default factor}) with :class:`Mutate` ``mutate``, and
    ``MUTANT_CLASSES`` (the names of its mutant runtime classes)."""

    __name__: str


class DistributedWorkload(Protocol):
    """A data-parallel reference workload (``python -m dpspec.distributed.examples``): its ``WORKLOAD``
    name, its default configuration and ``run(comm, cfg) -> dict`` (the run's numbers)."""

    WORKLOAD: str
    DEFAULTS: dict[str, Any]

    def run(self, comm: Any, cfg: dict[str, Any] | None = None, /) -> dict[str, Any]: ...


class FormulaTable(Protocol):
    """The closed forms a family's certificates carry (``formulas.py``): ``FORMULAS``, name -> sympy text, which
    ``dpspec verify`` re-evaluates (:mod:`dpspec.compiler.formulas`); a module may add ``ROUNDED_UP``, the
    names of its "close" formulas whose recorded value may only be rounded up (a noise scale, a cap)."""

    FORMULAS: dict[str, str]


#: the callable hooks: kind -> the Protocol its object's signature must fit
CALLABLE_HOOKS: dict[str, type] = {
    "compile": CompileTarget,
    "compose": Compose,
    "split": Split,
    "docs": Docs,
    "curve": Curve,
    "steps_curve": StepsPanel,
    "reverify": Reverify,
    "torch_backend": TorchBackend,
    "demo": DemoRun,
    "tune_score": TuneScore,
    "tune_pld": TunePld,
}
#: the hooks that are modules (a ``Family`` lists ``accountants`` and ``rules``, one module each)
MODULE_HOOKS = ("accountants", "auditor", "rules", "distributed_example", "formulas")
#: the hooks that are classes
CLASS_HOOKS = ("settings_model", "runtime")


class HookError(DpspecError, TypeError):
    """A family's hook is not what its kind must be (a misspelt name, a module where a function belongs)."""


def positional_arity(proto: type) -> int:
    """How many positional arguments the callers of a callable hook kind pass (its ``__call__``'s)."""
    params = list(inspect.signature(proto.__call__).parameters.values())[1:]  # (self)
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def signature_problem(obj: Callable[..., Any], arity: int) -> str | None:
    """Why ``obj`` cannot be called with ``arity`` positional arguments (None: it can): each argument must
    have a parameter to go to, and every parameter without a default must get one."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin without a signature: callable is all that can be said
        return None
    try:
        sig.bind(*range(arity))
    except TypeError as e:
        return f"takes {sig}, but is called with {arity} positional argument(s) ({e})"
    return None


def check(kind: str, path: str, obj: object) -> None:
    """Raise :class:`HookError` when ``obj`` (loaded from ``path``) cannot be a hook of ``kind``: the cheap
    checks made on every load (a callable, a class, a module with its names); the signatures are checked
    by the test-suite (``signature_problem``)."""
    if kind in CALLABLE_HOOKS:
        ok, what = callable(obj), "a function"
    elif kind == "settings_model":
        from dpspec.ir.settings import TrainingSettings

        ok, what = isinstance(obj, type) and issubclass(obj, TrainingSettings), "a TrainingSettings subclass"
    elif kind in CLASS_HOOKS:
        ok, what = isinstance(obj, type), "a class"
    elif kind == "distributed_example":
        ok = (
            isinstance(obj, ModuleType)
            and isinstance(getattr(obj, "WORKLOAD", None), str)
            and isinstance(getattr(obj, "DEFAULTS", None), dict)
            and callable(getattr(obj, "run", None))
        )
        what = "a module defining WORKLOAD, DEFAULTS and run"
    elif kind == "formulas":
        table = getattr(obj, "FORMULAS", None)
        rounded: object = getattr(obj, "ROUNDED_UP", frozenset())
        ok = (
            isinstance(obj, ModuleType)
            and isinstance(table, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in table.items())
            and isinstance(rounded, frozenset)
            and rounded <= set(table)
        )
        what = "a module defining FORMULAS (name -> text) and, optionally, ROUNDED_UP (a frozenset of its names)"
    elif kind in MODULE_HOOKS:
        ok, what = isinstance(obj, ModuleType), "a module"
    else:
        raise KeyError(f"no hook kind `{kind}`")
    if not ok:
        raise HookError(f"the {kind} hook `{path}` is {type(obj).__name__}, not {what}")


# --- typed loading ------------------------------------------------------------------------------------


@overload
def load_hook(path: str, kind: Literal["settings_model"]) -> type[TrainingSettings]: ...
@overload
def load_hook(path: str, kind: Literal["compile"]) -> CompileTarget: ...
@overload
def load_hook(path: str, kind: Literal["compose"]) -> Compose: ...
@overload
def load_hook(path: str, kind: Literal["split"]) -> Split: ...
@overload
def load_hook(path: str, kind: Literal["docs"]) -> Docs: ...
@overload
def load_hook(path: str, kind: Literal["accountants", "rules"]) -> ModuleType: ...
@overload
def load_hook(path: str, kind: Literal["runtime"]) -> type: ...
@overload
def load_hook(path: str, kind: Literal["auditor"]) -> AuditorModule: ...
@overload
def load_hook(path: str, kind: Literal["curve"]) -> Curve: ...
@overload
def load_hook(path: str, kind: Literal["steps_curve"]) -> StepsPanel: ...
@overload
def load_hook(path: str, kind: Literal["reverify"]) -> Reverify: ...
@overload
def load_hook(path: str, kind: Literal["distributed_example"]) -> DistributedWorkload: ...
@overload
def load_hook(path: str, kind: Literal["torch_backend"]) -> TorchBackend: ...
@overload
def load_hook(path: str, kind: Literal["demo"]) -> DemoRun: ...
@overload
def load_hook(path: str, kind: Literal["tune_score"]) -> TuneScore: ...
@overload
def load_hook(path: str, kind: Literal["tune_pld"]) -> TunePld: ...
@overload
def load_hook(path: str, kind: Literal["formulas"]) -> FormulaTable: ...
def load_hook(path: str, kind: str) -> Any:
    """The hook of ``kind`` that ``path`` (a ``Family`` field: ``"package.module:attribute"`` or a module)
    names, imported now and checked (:func:`check`): ``dpspec.families.load`` with the hook's type."""
    obj = load(path)
    check(kind, path, obj)
    return obj
