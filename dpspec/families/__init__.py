"""The mechanism families: one declaration per family, read by every stage.

A family (a Gaussian release, DP-SGD, …) is a vertical slice: its settings, its check rules, its
accountants, its compile function, its runtime class and its auditor. Each entry below names them;
lowering (the mechanism names), checking (units, relations, notions, allowed settings), the compile
driver (which function compiles a target), the audit (which auditor to load), the distributed layer,
the CLI and the generated docs all read this table instead of keeping their own lists; the shared
tools (plot, verify, mutants, make_private, the demo, the distributed examples) reach a family's own
code through the hooks it names here.

Code is named by dotted path ("package.module:attribute") and imported only when used, so this
module imports nothing beyond the standard library and stays below the IR in the import order.

A family that lives in its own folder (``dpspec/families/<family>/``, or any package named by
``package``) needs no paths at all: a hook exists because its file exists and defines the hook's name
(``compile.py`` defining ``compile_target`` is the compile hook; the table ``FOLDER_HOOKS`` lists
every file and name). A path written in the entry wins over the file. Adding a family: copy
``dpspec/families/template/`` and see docs/extending.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Family:
    name: str
    block: str  # "release" or "train"
    units: tuple[str, ...]  # unit kinds whose neighbouring relation the analysis covers
    relations: tuple[str, ...]  # for record/group units: relations covered
    notions: tuple[str, ...]  # guarantee notions it certifies: dp, rdp, srpp, sa_srpp
    summary: str
    source: str
    available: bool = True
    # Whether two certificates of this mechanism compose by adding RDP curves.
    composable: bool = True
    #: a release family: the settings that mean something for it (others are errors); a training
    #: family derives them from ``settings_model`` (see ``allowed_settings``)
    settings: tuple[str, ...] = ()
    #: a training family: its settings model (a ``dpspec.ir.settings.TrainingSettings``; the folder's ``settings.py``),
    #: built by lowering
    settings_model: str = ""
    unavailable_reason: str = ""
    #: a release family: the mechanism a release without a `mechanism` line gets (at most one family)
    default: bool = False
    #: a release family: the query options it evaluates (``by``, ``keys``, ``where``, ``q``); others refuse them
    query_options: tuple[str, ...] = ()
    #: ``f(ctx, composition, releases) -> {part: ir.Guarantee}``: the share of a ``compose … split`` block's
    #: guarantee each part is compiled to; ``compose`` then certifies the whole
    split: str = ""
    #: ``f() -> list[str]``: the family's section of docs/language.md (markdown lines)
    docs: str = ""
    # --- code, by dotted path, imported lazily ---
    #: ``f(ctx, target, data) -> CompiledTarget``: calibrate and write the certificate entry
    compile: str = ""
    #: ``f(composition, parts) -> TargetCertificate`` when all parts are of this family and compose
    #: by the family's own theorem rather than by adding RDP curves
    compose: str = ""
    accountants: tuple[str, ...] = ()  # the accounting modules its certificates rest on
    runtime: str = ""  # the mechanism class the compiler returns
    auditor: str = ""  # module registering its auditor (``dpspec.audit.register_auditor``)
    rules: tuple[str, ...] = ()  # the check modules holding rules specific to it
    distributed: bool = False  # has a multi-worker runtime (``execution distributed(...)``)
    stepped: bool = False  # an RDP-accounted step-by-step training (ε vs steps is plotted)
    # --- the family's part in the shared tools, by dotted path, imported lazily ---
    #: ``f(result, grid, deltas) -> Series | None``: ``dpspec plot``'s ε(δ) line through the certified
    #: pairs (None: the generic RDP → (ε, δ) conversion of the recorded ε(α) curve)
    curve: str = ""
    #: ``f(result, common, certified, steps, rdp_target) -> Panel``: ``dpspec plot``'s ε-vs-steps panel
    #: (without it the family is one-shot: ε does not depend on a number of steps)
    steps_curve: str = ""
    #: ``f(result, problem, bound, rel_tol) -> None``: ``dpspec verify``'s independent re-check of a result
    #: that recompiled equal, from its recorded numbers only
    reverify: str = ""
    #: module of the data-parallel reference workload (``python -m dpspec.distributed.examples``):
    #: ``WORKLOAD`` (its name there), ``DEFAULTS`` (its configuration) and ``run(comm, cfg) -> dict``
    distributed_example: str = ""
    #: ``f(mechanism) -> type``: ``dpspec.torch.make_private``'s backend class for the family's trainings,
    #: ``B(mechanism, model, optimizer, criterion, n, seed)`` (raises ``UnsupportedTrainingError`` to refuse)
    torch_backend: str = ""
    #: ``f(training) -> (sensitivity, statement) | None``: a ``tune`` block's private score for a family whose unit
    #: is not a record or group (a sum of per-item values in [0, 1]): how much one protected unit can change it and
    #: what the score may read for that to hold (stated in the certificate); None: such a score is not covered
    tune_score: str = ""
    #: ``f(mechanism) -> PrivacyLossDistribution | None``: a compiled training's certified PLD (rebuilt from the
    #: mechanism's certified numbers), which a ``tune`` block turns into the run's privacy profile; None: no PLD
    tune_pld: str = ""
    #: ``f(target, spec_name, mechanism, rng, quiet) -> None``: ``python -m dpspec.demo`` runs the compiled
    #: object on generated data and prints one line
    demo: str = ""
    #: module defining ``FORMULAS`` (name -> sympy text) of the closed forms the family's certificates carry, which
    #: ``dpspec verify`` re-evaluates (``dpspec.compiler.formulas``), and optionally ``ROUNDED_UP``
    formulas: str = ""
    #: the package holding the family's own folder (default ``dpspec.families.<name>`` when that folder
    #: exists); its files fill every hook left empty above (``FOLDER_HOOKS``)
    package: str = ""

    def __post_init__(self) -> None:
        folder = _folder_of(self.package or f"{__name__}.{self.name}")
        if folder is None:
            return
        if not self.package:
            object.__setattr__(self, "package", f"{__name__}.{self.name}")
        for hook, (stem, attr) in FOLDER_HOOKS.items():
            path = _hook_in_folder(folder, self.package, stem, attr)
            if path is None:
                continue
            if hook in _LISTED_HOOKS:  # the folder's module joins the listed ones
                if path not in getattr(self, hook):
                    object.__setattr__(self, hook, (*getattr(self, hook), path))
            elif not getattr(self, hook):
                object.__setattr__(self, hook, path)


#: hook -> (file stem in the family's folder, the name it must define; "" = the module itself)
FOLDER_HOOKS: dict[str, tuple[str, str]] = {
    "settings_model": ("settings", "Settings"),
    "compile": ("compile", "compile_target"),
    "compose": ("compose", "compose"),
    "accountants": ("accountant", ""),
    "runtime": ("runtime", "Runtime"),
    "auditor": ("audit", ""),
    "rules": ("rules", ""),
    "curve": ("plot", "curve"),
    "steps_curve": ("plot", "steps_panel"),
    "reverify": ("verify", "reverify"),
    "distributed_example": ("distributed", ""),
    "torch_backend": ("torch_backend", "backend"),
    "demo": ("demo", "run"),
    "tune_score": ("tuning", "tune_score"),
    "tune_pld": ("tuning", "tune_pld"),
    "formulas": ("formulas", ""),
}
_LISTED_HOOKS = ("accountants", "rules")


def _folder_of(package: str) -> Path | None:
    """The folder of ``package`` if it exists (its parent packages are imported, the package is not)."""
    if package.startswith(f"{__name__}."):
        folder = Path(__file__).resolve().parent / package[len(__name__) + 1 :].replace(".", "/")
        return folder if (folder / "__init__.py").is_file() else None
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = list(found.submodule_search_locations or []) if found else []
    return Path(locations[0]) if locations else None


def _hook_in_folder(folder: Path, package: str, stem: str, attr: str) -> str | None:
    """``package.stem:attr`` when ``folder/stem.py`` exists and defines ``attr`` at top level (read as
    text: nothing is imported)."""
    f = folder / f"{stem}.py"
    if not f.is_file():
        return None
    if not attr:
        return f"{package}.{stem}"
    pattern = rf"^(?:def|class)\s+{attr}\b|^{attr}\s*[:=]"
    return f"{package}.{stem}:{attr}" if re.search(pattern, f.read_text(encoding="utf-8"), re.M) else None


#: the settings every block of a family takes, listed around the family's own
_LEADING_SETTINGS = ("protect", "mechanism")
_TRAILING_SETTINGS = ("description",)


def allowed_settings(f: Family) -> tuple[str, ...]:
    """The settings that mean something for family ``f`` (others are refused, DPS130), in the order
    they are listed: a release family's ``settings``; for a training family, its settings model's
    fields with the common settings it reads (``TrainingSettings.listed_settings``)."""
    if not f.settings_model:
        return f.settings
    return (*_LEADING_SETTINGS, *load(f.settings_model).listed_settings(), *_TRAILING_SETTINGS)


def load(path: str) -> Any:
    """The object a ``"package.module:attribute"`` (or a plain module) path names (untyped: the stages load
    a hook as its type with ``dpspec.families.hooks.load_hook``, which this module cannot import)."""
    module, _, attr = path.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj


def family(name: str) -> Family | None:
    return FAMILIES.get(name)


def names(block: str | None = None) -> tuple[str, ...]:
    """Family names, in declaration order (all, or those of ``block``)."""
    return tuple(k for k, f in FAMILIES.items() if block is None or f.block == block)


FAMILIES: dict[str, Family] = {
    "gaussian": Family(
        name="gaussian",
        block="release",
        units=("record", "group", "node", "edge"),
        relations=("add_remove", "substitution"),
        notions=("dp", "rdp"),
        summary="Gaussian noise on a query with declared ℓ2 sensitivity w.r.t. the protected unit",
        source="Mironov 2017 Prop. 7; Balle et al. 2020 Thm 21",
        settings=("protect", "mechanism", "query", "sensitivity", "noise", "guarantee", "description"),
        accountants=("dpspec.accounting.analytic_gaussian", "dpspec.accounting.gaussian"),
        rules=("dpspec.check.rules", "dpspec.check.rules_conformance"),
        # compile, runtime, audit, rules, plot (curve) and demo: the files of dpspec/families/gaussian/
    ),
    **{
        name: Family(
            name=name,
            block="release",
            units=("record",),
            relations=("add_remove",),
            notions=("dp",),
            summary=summary,
            source=source,
            settings=("protect", "mechanism", "query", "guarantee", "description"),
            default=name == "auto",
            query_options=("by", "keys", "where", "q"),
            compile="dpspec.families.statistics.compile:compile_release",
            compose="dpspec.families.statistics.compile:compose",
            split="dpspec.families.statistics.split:shares",
            docs="dpspec.families.statistics:docs",
            demo="dpspec.families.statistics.demo:run",
            accountants=("dpspec.families.statistics.accountant",),
            runtime="dpspec.families.statistics.runtime:StatisticRelease",
            auditor="dpspec.families.statistics.audit",
            rules=("dpspec.check.rules", "dpspec.families.statistics.rules"),
            package="dpspec.families.statistics",  # one folder serves the four entries
        )
        for name, summary, source in (
            (
                "laplace",
                "Laplace noise on a count, sum, mean or quantile of the data (pure ε-DP)",
                "Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014 Thm 3.6",
            ),
            (
                "discrete_laplace",
                "discrete Laplace (geometric) noise on an integer count, sum or mean (pure ε-DP, exact sampler)",
                "Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020 Alg. 2",
            ),
            (
                "discrete_gaussian",
                "discrete Gaussian noise on an integer count, sum or mean (exact sampler)",
                "Canonne, Kamath & Steinke 2020, Thm 7, Alg. 3",
            ),
            (
                "auto",
                "the statistics release with the lowest expected error at its budget (Laplace, discrete Laplace "
                "or Gaussian noise)",
                "Dwork & Roth 2014 Thm 3.6; Balle & Wang 2018 Thm 8",
            ),
        )
    },
    "dpsgd": Family(
        name="dpsgd",
        block="train",
        units=("record", "group"),
        relations=("add_remove", "substitution"),
        notions=("dp", "rdp"),
        summary="DP-SGD: per-example clipping, Gaussian noise, subsampled steps",
        source="Abadi et al. 2016; Mironov–Talwar–Zhang 2019; Schuchardt et al. 2024",
        accountants=(
            "dpspec.accounting.dpsgd",
            "dpspec.accounting.poisson",
            "dpspec.accounting.wor",
            "dpspec.accounting.group",
            "dpspec.accounting.pld",
        ),
        rules=("dpspec.check.rules", "dpspec.check.rules_runtime"),
        distributed=True,
        stepped=True,
        # settings, compile, runtime, audit, rules, plot (curve, steps_curve), distributed, torch_backend and demo:
        # the files of dpspec/families/dpsgd/
    ),
    "swm": Family(
        name="swm",
        block="release",
        units=("secret",),
        relations=(),
        notions=("srpp",),
        summary="Gaussian sliced Wasserstein mechanism (static release under Ave/Joint-SRPP)",
        source="Zhang & Vorobeychik, Sliced Rényi Pufferfish Privacy, Thms 4.5–4.8",
        composable=False,
        settings=("protect", "mechanism", "query", "slices", "output", "guarantee", "noise", "description"),
        accountants=("dpspec.accounting.swm",),
        rules=("dpspec.check.rules_pufferfish",),
        # compile, runtime, audit, rules (its releases'), verify (reverify) and demo: the files of
        # dpspec/families/swm/; the scenario rules above are shared with the other Pufferfish families
    ),
    "wasserstein": Family(
        name="wasserstein",
        block="release",
        units=("secret",),
        relations=(),
        notions=("pufferfish",),
        summary="Wasserstein mechanism: Laplace noise scaled by the ∞-Wasserstein distance of the secret-conditioned "
        "answer laws (ε-Pufferfish; aggregate or per-record releases)",
        source="Song, Wang & Chaudhuri 2017, §3; Kifer & Machanavajjhala 2014, §3",
        composable=False,
        settings=("protect", "mechanism", "query", "output", "guarantee", "description"),
        compile="dpspec.families.wasserstein.compile:compile_target",
        runtime="dpspec.families.wasserstein.runtime:WassersteinRelease",
        auditor="dpspec.families.wasserstein.audit",
        rules=("dpspec.families.wasserstein.rules",),
        reverify="dpspec.families.wasserstein.verify:reverify",
    ),
    "markov_quilt": Family(
        name="markov_quilt",
        block="release",
        units=("secret",),
        relations=(),
        notions=("pufferfish",),
        summary="Markov Quilt Mechanism: ε-Pufferfish for a statistic of one Markov chain's steps (correlated data)",
        source="Song, Wang & Chaudhuri 2017, §4",
        composable=False,
        settings=("protect", "mechanism", "query", "output", "guarantee", "description"),
        compile="dpspec.families.markov_quilt.compile:compile_target",
        runtime="dpspec.families.wasserstein.runtime:WassersteinRelease",
        auditor="dpspec.families.markov_quilt.audit",
        reverify="dpspec.families.markov_quilt.verify:reverify",
        rules=("dpspec.families.wasserstein.rules",),
    ),
    "srpp_sgd": Family(
        name="srpp_sgd",
        block="train",
        units=("secret",),
        relations=(),
        notions=("srpp",),
        summary="SRPP-SGD with the History-Uniform Cap accountants",
        source="Zhang & Vorobeychik, Sliced Rényi Pufferfish Privacy, Thms 5.6–5.8",
        accountants=("dpspec.accounting.huc",),
        rules=("dpspec.check.rules_pufferfish", "dpspec.check.rules_schedule"),
        distributed=True,
        # settings, compile, compose, runtime, audit, rules, plot (steps_curve), distributed, torch_backend and demo:
        # the files of dpspec/families/srpp_sgd/
    ),
    "relational_dpsgd": Family(
        name="relational_dpsgd",
        block="train",
        units=("node",),
        relations=(),
        notions=("dp", "rdp"),
        summary="relational DP-SGD with entity-level privacy and coupled sampling",
        source="Huang et al., Differentially Private Relational Learning with Entity-level Privacy Guarantees",
        accountants=("dpspec.accounting.relational",),
        rules=("dpspec.check.rules_schedule",),
        distributed=True,
        stepped=True,
        # settings, compile, runtime, audit, rules, plot (curve, steps_curve), distributed, torch_backend and demo:
        # the files of dpspec/families/relational_dpsgd/
    ),
    "gcon": Family(
        name="gcon",
        block="train",
        units=("edge",),
        relations=(),
        notions=("dp",),
        summary="GCON: edge-DP graph convolution by objective perturbation",
        source="Wei et al., GCON, Thm 1",
        composable=False,
        accountants=("dpspec.accounting.gcon",),
        # settings, compile, runtime, audit, rules, demo and tuning (tune_score): the files of
        # dpspec/families/gcon/
    ),
}
