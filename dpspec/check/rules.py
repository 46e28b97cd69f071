"""The general rules (DPS0xx front end, DPS1xx structure and composability).

Mechanism-specific rules live next to their mechanisms and use ids in their own hundreds:
DPS2xx accounting/DP-SGD, DPS4xx SWM, DPS5xx SRPP-SGD, DPS6xx relational, DPS7xx GCON.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from dpspec.check.framework import Context, diag, register_front_end, rule, setting
from dpspec.diagnostics import did_you_mean
from dpspec.families import allowed_settings
from dpspec.ir import models as ir
from dpspec.mechanisms.registry import MECHANISMS, unit_phrase

# A minimal valid spec the examples below are built from.
_UNIT = "privacy people { unit record }\n"
_REL = "release r {{ mechanism gaussian  sensitivity 1.0  guarantee {g} }}\n"


def _rel(g="dp(epsilon = 1.0, delta = 1e-6)"):
    return _UNIT + _REL.format(g=g)


# --- front-end rules (raised by the parser and the lowering stage) --------------------------------

register_front_end(
    "DPS001",
    "syntax error",
    "parse",
    bad=_UNIT + "release r { mechanism gaussian sensitivity 1.0 guarantee dp(epsilon = 1.0 delta = 1e-6) }",
    good=_rel(),
    explanation="The text does not follow the grammar; the message says what was expected.",
)
register_front_end(
    "DPS002",
    "unterminated string",
    "parse",
    bad='scenario s { data csv("adult.data) secret race }',
    good='scenario s { data csv("adult.data") secret race }',
)
register_front_end(
    "DPS003",
    "unclosed bracket",
    "parse",
    bad=_UNIT + "release r { mechanism gaussian",
    good=_rel(),
    explanation="A `{`, `[` or `(` is never closed; the hint says where it opened.",
)
register_front_end("DPS004", "missing file or include", "parse", bad='use "does-not-exist.dps"\n' + _rel(), good=_rel())
register_front_end(
    "DPS005",
    "include cycle",
    "parse",
    bad="(see tests: a.dps uses b.dps uses a.dps)",
    good=_rel(),
    explanation="`use` includes form a cycle.",
)
register_front_end("DPS006", "not a text file", "parse", bad="privacy p { unit record }\x00", good=_UNIT)
register_front_end(
    "DPS007",
    "input too large or too deeply nested",
    "parse",
    bad="release r { x " + "[" * 40 + "]" * 40 + " }",
    good=_rel(),
    explanation="Front-end limits keep parsing linear-time and bounded.",
)
register_front_end(
    "DPS008",
    "empty spec",
    "lower",
    bad="# nothing here\n",
    good=_rel(),
    explanation="A spec must define at least one block.",
)
register_front_end(
    "DPS010",
    "a data path outside the data root, or a file that is not a readable dataset",
    "lower",
    bad='scenario s { data csv("/etc/passwd", separator = ":")  secret root }',
    good='scenario s { data csv("student/student-mat.csv", separator = ";")  secret sex }',
    explanation="Data is read from the data root ($DPSPEC_DATA_DIR) only: a path is relative, uses `/` "
    "and has no `..` part (checked by `dpspec check`); when compiling it must resolve, "
    "symbolic links followed, to a regular file inside the root and no larger than the "
    "`data_file_bytes` limit (never a folder, FIFO or device). A spec embedded in a "
    "certificate is held to the same rules. Messages never quote a refused file.",
)
register_front_end(
    "DPS011",
    "input a check or the compiler cannot use",
    "compile",
    bad="(see tests/fuzz: the last line of defence behind every check and compile stage; no known spec reaches it)",
    good=_rel(),
    explanation="A value or a data file that a check rule or a compile stage cannot cope with. It is "
    "reported (at the target when compiling) with the reason, and no certificate is "
    "written; each one found is a gap in the checks, to be closed by a precise rule.",
)
register_front_end("DPS100", "unknown block kind", "lower", bad="relaese r { mechanism gaussian }", good=_rel())
register_front_end(
    "DPS101",
    "unknown setting",
    "lower",
    bad=_UNIT + "release r { mechanism gaussian  sensitivty 1.0  guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_rel(),
)
register_front_end(
    "DPS102",
    "missing required setting",
    "lower",
    bad=_UNIT + "release r { mechanism gaussian  sensitivity 1.0 }",
    good=_rel(),
)
register_front_end(
    "DPS103",
    "setting given twice",
    "lower",
    bad=_UNIT + "release r { mechanism gaussian  sensitivity 1.0  sensitivity 2.0  "
    "guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_rel(),
)
register_front_end("DPS104", "wrong kind of value", "lower", bad=_rel('dp(epsilon = "one", delta = 1e-6)'), good=_rel())
register_front_end(
    "DPS106", "non-finite or over-long number", "lower", bad=_rel("dp(epsilon = inf, delta = 1e-6)"), good=_rel()
)
register_front_end(
    "DPS107",
    "name defined twice",
    "lower",
    bad=_UNIT + "privacy people { unit record }\n" + _REL.format(g="dp(epsilon = 1, delta = 1e-6)"),
    good=_rel(),
)
register_front_end("DPS111", "unknown function", "lower", bad=_rel("dpp(epsilon = 1.0, delta = 1e-6)"), good=_rel())
register_front_end(
    "DPS112", "unknown keyword argument", "lower", bad=_rel("dp(epsilom = 1.0, delta = 1e-6)"), good=_rel()
)
register_front_end("DPS113", "missing argument", "lower", bad=_rel("dp(epsilon = 1.0)"), good=_rel())
register_front_end(
    "DPS114", "too many positional arguments", "lower", bad=_rel("dp(1.0, 1e-6, 3)"), good=_rel("dp(1.0, 1e-6)")
)


# --- walking the IR --------------------------------------------------------------------------------


_SPAN_FIELDS = frozenset({"span", "field_spans"})


def walk(node) -> Iterator[BaseModel]:
    """Every IR node under ``node`` (depth-first, including itself), source spans left out.

    Iterative, with an explicit stack: linear in the size of the IR however deep or long it is
    (nested generators cost time per level and per item, and recursion can overflow).
    """
    stack = [node]
    while stack:
        n = stack.pop()
        children: Sequence[Any]
        if isinstance(n, BaseModel):
            yield n
            children = [getattr(n, f) for f in type(n).model_fields if f not in _SPAN_FIELDS]
        elif isinstance(n, (tuple, list)):
            children = n
        else:
            continue
        stack.extend(x for x in reversed(children) if isinstance(x, (BaseModel, tuple, list)))


# (class, field) → (predicate, requirement text, hint)
_pos = (lambda x: x > 0, "must be > 0")
# scales (noise, clip norm, sensitivity) only need to be positive here; their magnitude is DPS205,
# checked before each target is compiled (dpspec.compiler.compile.check_magnitudes)
_scale = _pos
_int1 = (lambda x: x >= 1, "must be at least 1")
_RANGES: dict[tuple[type, str], tuple] = {
    (ir.DpGuarantee, "epsilon"): (*_pos, "ε is a privacy loss; for example epsilon = 1.0"),
    (ir.DpGuarantee, "delta"): (
        lambda x: 0 < x < 1,
        "must be in (0, 1)",
        "δ is a probability; typically 1e-6 or below 1/n",
    ),
    (ir.RdpGuarantee, "alpha"): (lambda x: x > 1, "must be > 1", "Rényi orders are > 1, e.g. alpha = 8"),
    (ir.RdpGuarantee, "epsilon"): (*_pos, "for example epsilon = 2.0"),
    (ir.SrppGuarantee, "alpha"): (lambda x: x > 1, "must be > 1", "Rényi orders are > 1, e.g. alpha = 4"),
    (ir.SrppGuarantee, "epsilon"): (*_pos, "for example epsilon = 1.0"),
    (ir.PufferfishGuarantee, "epsilon"): (*_pos, "for example epsilon = 1.0"),
    (ir.PoissonSampling, "rate"): (lambda x: 0 < x <= 1, "must be in (0, 1]", "a sampling rate such as 0.01 or 1%"),
    (ir.PoissonSampling, "expected_batch"): (*_int1, "for example expected_batch = 256"),
    (ir.WithoutReplacementSampling, "batch_size"): (*_int1, "for example batch_size = 256"),
    (ir.WithReplacementSampling, "batch_size"): (*_int1, "for example batch_size = 256"),
    (ir.ShuffleSampling, "batch_size"): (*_int1, "for example batch_size = 256"),
    (ir.NegativeSampler, "per_positive"): (*_int1, "for example per_positive = 4"),
    (ir.FlatClipping, "C"): (*_scale, "a clipping norm such as C = 1.0"),
    (ir.PerTupleClipping, "C"): (*_scale, "a clipping norm such as C = 1.0"),
    (ir.FrequencyAdaptiveClipping, "C"): (*_scale, "a clipping norm such as C = 1.0"),
    (ir.PerLayerClipping, "C"): (
        lambda x: len(x) > 0 and all(c > 0 for c in x),
        "must be a non-empty list of positive norms",
        "for example C = [0.5, 0.5]",
    ),
    (ir.GaussianNoise, "sigma"): (*_scale, "a standard deviation such as sigma = 2.0"),
    (ir.GaussianNoise, "noise_multiplier"): (*_scale, "for example noise_multiplier = 1.1"),
    (ir.Schedule, "steps"): (*_int1, "for example steps = 1000"),
    (ir.Schedule, "epochs"): (*_pos, "for example epochs = 3"),
    (ir.Schedule, "learning_rate"): (*_pos, "for example learning_rate = 0.1"),
    (ir.Schedule, "momentum"): (lambda x: 0 <= x < 1, "must be in [0, 1)", "for example momentum = 0.9"),
    (ir.GroupUnit, "size"): (*_int1, "a group of K records, e.g. size = 8"),
    (ir.PrivacyUnitDecl, "dataset_size"): (*_int1, "the number of records, e.g. dataset_size = 60000"),
    (ir.Release, "sensitivity"): (*_scale, "the query's ℓ2 sensitivity, e.g. sensitivity = 1.0"),
    (ir.BoundedQuery, "sensitivity"): (*_scale, "the query's ℓ2 sensitivity, e.g. sensitivity = 1.0"),
    (ir.BoundedQuery, "dimension"): (*_int1, "for example dimension = 10"),
    (ir.BoundedQuery, "bins"): (lambda x: x >= 2, "must be at least 2", "for example bins = 10"),
    (ir.UniformSphere, "m"): (*_int1, "the number of directions, e.g. m = 200"),
    (ir.SrppGuarantee, "gamma"): (lambda x: 0 < x < 1, "must be in (0, 1)", "a failure probability such as 0.05"),
    (ir.SamplerWorld, "samples"): (*_int1, "draws per secret, e.g. samples = 2000"),
    (ir.BoundedQuery, "regularization"): (*_pos, "an L2 weight such as regularization = 0.01"),
    (ir.Propagation, "restart"): (lambda x: 0 < x <= 1, "must be in (0, 1]", "a restart probability such as 0.6"),
    (ir.LossSpec, "delta"): (*_pos, "for example pseudo_huber(delta = 0.1)"),
    (ir.EncoderSpec, "hidden"): (*_int1, "for example hidden = 64"),
    (ir.EncoderSpec, "epochs"): (*_int1, "for example epochs = 200"),
    (ir.SplitSpec, "per_class"): (*_int1, "labelled nodes per class, e.g. per_class = 20"),
    (ir.Secret, "quantile_bins"): (lambda x: x >= 2, "must be at least 2", "for example bins = 5"),
    (ir.SyntheticData, "size"): (*_int1, "for example size = 10000"),
}

# the ranges of training settings, for every family's settings model that holds the setting
_SETTING_RANGES = {
    "dataset_size": (*_int1, "the number of records, e.g. dataset_size = 60000"),
    "degree_cap": (*_int1, "for example degree_cap = 5"),
    "regularization": (*_pos, "an L2 weight Λ such as regularization = 0.2"),
}

# the range table by node class: one dictionary lookup per node instead of a scan of the table
_RANGES_BY_CLASS: dict[type, list] = {}
for (_cls, _f), _check in _RANGES.items():
    _RANGES_BY_CLASS.setdefault(_cls, []).append((_f, _check))


def _by_class(table: dict[type, list], settings_table: dict, cls: type) -> list:
    """``table``'s entries for node class ``cls``; a family's settings model gets the entries of
    ``settings_table`` for the settings it holds (found once per model)."""
    got = table.get(cls)
    if got is None:
        got = (
            [(f, x) for f, x in settings_table.items() if f in cls.model_fields]
            if issubclass(cls, ir.TrainingSettings)
            else []
        )
        table[cls] = got
    return got


_FIELD_LABEL = {"C": "C", "epsilon": "epsilon", "delta": "delta", "alpha": "alpha"}


@rule(
    "DPS105",
    "value out of range",
    bad=_rel("dp(epsilon = 1.0, delta = 2)"),
    good=_rel(),
    explanation="A number is outside the range where the definition or theorem makes sense "
    "(α > 1, 0 < δ < 1, ε > 0, rates in (0, 1], sizes ≥ 1, …).",
)
def check_ranges(ctx: Context):
    for n in walk(ctx.spec):
        for f, (pred, req, hint) in _by_class(_RANGES_BY_CLASS, _SETTING_RANGES, type(n)):
            x = getattr(n, f, None)
            if x is None:
                continue
            try:
                ok = bool(pred(x))
            except TypeError:
                ok = False
            if not ok:
                shown = x if not isinstance(x, float) else f"{x:g}"
                yield diag("DPS105", f"{f} {req} (got {shown})", n, f, hint=hint)
        if isinstance(n, ir.BoundedQuery):
            for lo, hi in n.bounds:
                if not lo < hi:
                    yield diag(
                        "DPS105",
                        f"bounds must satisfy lo < hi (got [{lo:g}, {hi:g}])",
                        n,
                        "bounds",
                        hint="write [lo, hi] with lo < hi",
                    )
        if isinstance(n, (ir.FiniteDirections, ir.CoordinateAxes)) and n.weights is not None:
            w = n.weights
            if any(x < 0 for x in w) or not math.isclose(sum(w), 1.0, rel_tol=0, abs_tol=1e-9):
                yield diag(
                    "DPS105",
                    f"slice weights must be ≥ 0 and sum to 1 (sum is {sum(w):.6g})",
                    n,
                    "weights",
                    hint="normalise the weights",
                )
        if isinstance(n, ir.FiniteDirections):
            dims = {len(d) for d in n.directions}
            if len(dims) > 1:
                yield diag(
                    "DPS105",
                    "all slice directions must have the same dimension",
                    n,
                    "directions",
                    hint="give every direction the query's dimension, e.g. [[1, 0], [0, 1]]",
                )
            elif any(all(x == 0 for x in d) for d in n.directions):
                yield diag(
                    "DPS105",
                    "a slice direction is the zero vector",
                    n,
                    "directions",
                    hint="directions are normalised to unit length; give a non-zero vector",
                )
            if n.weights is not None and len(n.weights) != len(n.directions):
                yield diag(
                    "DPS105",
                    f"{len(n.weights)} weights for {len(n.directions)} directions",
                    n,
                    "weights",
                    hint="give one weight per direction",
                )


@rule(
    "DPS108",
    "unknown reference",
    bad=_UNIT + "release r { protect peple  mechanism gaussian  sensitivity 1.0  "
    "guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_UNIT + "release r { protect people  mechanism gaussian  sensitivity 1.0  "
    "guarantee dp(epsilon = 1, delta = 1e-6) }",
    explanation="`protect` names a scenario or privacy block, and `parts` names releases/trainings; "
    "the name must exist (in this file or an included one).",
)
def check_references(ctx: Context):
    defs = [d.name for d in ctx.declarations()]
    for t in ctx.releases_and_trainings():
        if t.protects and ctx.definition(t.protects) is None and t.protects not in ctx.failed:
            yield diag(
                "DPS108",
                f"`{t.name}` protects `{t.protects}`, which is not defined",
                t,
                "protects",
                hint=did_you_mean(t.protects, defs, "scenario or privacy block")
                or "define it with `privacy NAME { unit record }` or `scenario NAME { ... }`",
            )
    targets = {t.name for t in ctx.releases_and_trainings()}
    for c in ctx.spec.compositions:
        for p in c.parts:
            if p not in targets and p not in ctx.failed:
                yield diag(
                    "DPS108",
                    f"composition `{c.name}` names `{p}`, which is not a release or training",
                    c,
                    "parts",
                    hint=did_you_mean(p, targets, "release or training"),
                )


@rule(
    "DPS109",
    "what is protected is ambiguous",
    bad="privacy a { unit record }\nprivacy b { unit record }\n" + _REL.format(g="dp(epsilon = 1, delta = 1e-6)"),
    good="privacy a { unit record }\nprivacy b { unit record }\n"
    "release r { protect a  mechanism gaussian  sensitivity 1.0  guarantee dp(epsilon = 1, delta = 1e-6) }",
    explanation="Without `protect`, a release or training protects the only scenario/privacy block in scope.",
)
def check_protects_resolves(ctx: Context):
    defs = [d.name for d in ctx.declarations()]
    for t in ctx.releases_and_trainings():
        if t.protects:
            continue
        if len(defs) == 0 and not ctx.failed:
            yield diag(
                "DPS109",
                f"`{t.name}` does not say what it protects, and no privacy unit or scenario is defined",
                t,
                hint="add `privacy people { unit record }` (or a scenario) to the spec",
            )
        elif len(defs) > 1:
            yield diag(
                "DPS109",
                f"`{t.name}` does not say what it protects, and {len(defs)} definitions are in scope",
                t,
                hint=f"add `protect {defs[0]}` (one of: {', '.join(defs)})",
            )


@rule(
    "DPS110",
    "mechanism not available",
    bad="(see tests/frontend/test_unavailable_mechanism.py: every mechanism of this build is available)",
    good=_rel(),
    explanation="The mechanism is known to the language but not part of this build; the message says why.",
)
def check_available(ctx: Context):
    for t in ctx.releases_and_trainings():
        m = MECHANISMS[t.mechanism]
        if not m.available:
            yield diag(
                "DPS110",
                f"mechanism `{t.mechanism}` is not available: {m.unavailable_reason}",
                t,
                "mechanism",
                hint="available mechanisms: " + ", ".join(k for k, v in MECHANISMS.items() if v.available),
            )


@rule(
    "DPS115",
    "mechanism used in the wrong kind of block",
    bad=_UNIT + "release r { mechanism dpsgd  guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_rel(),
    explanation="Release mechanisms go in `release` blocks, training mechanisms in `train` blocks.",
)
def check_block_kind(ctx: Context):
    kinds: list[tuple[ir.Release | ir.Training, str]] = [
        *((r, "release") for r in ctx.spec.releases),
        *((t, "train") for t in ctx.spec.trainings),
    ]
    for t, kind in kinds:
        m = MECHANISMS[t.mechanism]
        if m.block != kind:
            others = [k for k, v in MECHANISMS.items() if v.block == kind and v.available]
            yield diag(
                "DPS115",
                f"`{t.mechanism}` is a {m.block} mechanism, but `{t.name}` is a {kind} block",
                t,
                "mechanism",
                hint=f"use a `{m.block}` block, or one of: {', '.join(others)}",
            )


def _protected(ctx: Context, t):
    d = ctx.resolve_protects(t)
    if isinstance(d, ir.Scenario):
        return d, ir.SecretUnit(scenario=d.name)
    if isinstance(d, ir.PrivacyUnitDecl):
        return d, d.unit
    return None, None


@rule(
    "DPS120",
    "unit or relation mismatch",
    bad="scenario s { secret race in {A, B} }\n" + _REL.format(g="dp(epsilon = 1, delta = 1e-6)"),
    good=_rel(),
    explanation="Each mechanism's analysis covers certain privacy units and neighbouring relations; the "
    "protected unit must be one of them. The message names both sides.",
)
def check_unit(ctx: Context):
    for t in ctx.releases_and_trainings():
        d, u = _protected(ctx, t)
        if u is None:
            continue
        m = MECHANISMS[t.mechanism]
        if u.kind not in m.units:
            yield diag(
                "DPS120",
                f"mechanism `{m.name}` covers {', '.join(m.units)} units, but `{t.name}` protects "
                f"{unit_phrase(u)} (`{d.name}`)",
                t,
                "mechanism",
                hint=_unit_hint(u, t),
            )
        elif u.kind in ("record", "group") and u.relation not in m.relations:
            yield diag(
                "DPS120",
                f"mechanism `{m.name}` covers relations {', '.join(m.relations)}, but `{d.name}` uses {u.relation}",
                t,
                "mechanism",
                hint=f"protect with `relation {m.relations[0]}`, or use a mechanism that covers {u.relation}",
            )


def _unit_hint(u, t) -> str:
    cands = [k for k, v in MECHANISMS.items() if u.kind in v.units and v.block == MECHANISMS[t.mechanism].block]
    if cands:
        return f"for {u.kind} units use: {', '.join(cands)}"
    return "protect a different unit"


@rule(
    "DPS121",
    "guarantee the mechanism cannot provide",
    bad=_rel("joint_srpp(alpha = 4, epsilon = 1.0)"),
    good=_rel(),
    explanation="A DP mechanism certifies DP/RDP, a Pufferfish mechanism certifies SRPP; asking one for the "
    "other's notion is an error, never a silent conversion.",
)
def check_notion(ctx: Context):
    for t in ctx.releases_and_trainings():
        m = MECHANISMS[t.mechanism]
        g = t.guarantee
        if g.notion not in m.notions:
            names = {
                "dp": "dp(...)",
                "rdp": "rdp(...)",
                "srpp": "ave_srpp(...) / joint_srpp(...)",
                "pufferfish": "pufferfish(...)",
            }
            yield diag(
                "DPS121",
                f"mechanism `{m.name}` certifies {', '.join(names[n] for n in m.notions)}, not {_guarantee_name(g)}",
                t,
                "guarantee",
                hint="change the guarantee, or pick a mechanism that provides it",
            )


def _family(g) -> str:
    """DP and RDP guarantees are both read off one RDP curve; SRPP is a different notion."""
    if isinstance(g, ir.PufferfishGuarantee):
        return "pufferfish"
    return "srpp" if isinstance(g, ir.SrppGuarantee) else "dp"


def _guarantee_name(g) -> str:
    if isinstance(g, ir.SrppGuarantee):
        return f"{'sa_' if g.subsampling_aware else ''}{g.flavour}_srpp"
    return g.notion


@rule(
    "DPS122",
    "composing parts with different privacy notions or units",
    bad="privacy a { unit record }\nprivacy b { unit edge }\n"
    "release r1 { protect a  mechanism gaussian  sensitivity 1  noise gaussian(sigma = 4)  guarantee "
    "dp(delta = 1e-6) }\n"
    "release r2 { protect b  mechanism gaussian  sensitivity 1  noise gaussian(sigma = 4)  guarantee "
    "dp(delta = 1e-6) }\n"
    "compose both { parts [r1, r2]  guarantee dp(delta = 1e-6) }",
    good="privacy a { unit record }\n"
    "release r1 { protect a  mechanism gaussian  sensitivity 1  noise gaussian(sigma = 4)  guarantee "
    "dp(delta = 1e-6) }\n"
    "release r2 { protect a  mechanism gaussian  sensitivity 1  noise gaussian(sigma = 4)  guarantee "
    "dp(delta = 1e-6) }\n"
    "compose both { parts [r1, r2]  guarantee dp(delta = 1e-6) }",
    explanation="Sequential composition adds RDP curves only for the same protected unit and relation.",
)
def check_composition(ctx: Context):
    by_name = {t.name: t for t in ctx.releases_and_trainings()}
    for c in ctx.spec.compositions:
        parts = [by_name[p] for p in c.parts if p in by_name]
        if not parts:
            continue
        units = {}
        for p in parts:
            d, u = _protected(ctx, p)
            if u is not None:
                units[p.name] = (d.name, u.model_dump(exclude={"span", "field_spans"}))
        distinct = {(n, tuple(sorted(u.items()))) for n, u in units.values()}
        if len(distinct) > 1:
            desc = "; ".join(f"`{p}` protects `{n}`" for p, (n, _u) in units.items())
            yield diag(
                "DPS122",
                f"composition `{c.name}` mixes protected units: {desc}",
                c,
                "parts",
                hint="compose only releases/trainings that protect the same definition",
            )
        family = _family(c.guarantee)
        for p in parts:
            if _family(p.guarantee) != family:
                yield diag(
                    "DPS122",
                    f"composition `{c.name}` asks for {_guarantee_name(c.guarantee)}, but "
                    f"`{p.name}` is certified under {_guarantee_name(p.guarantee)}",
                    c,
                    "guarantee",
                    hint="a composition keeps the notion of its parts",
                )
        if len(set(c.parts)) != len(c.parts):
            yield diag(
                "DPS122",
                f"composition `{c.name}` lists a part twice",
                c,
                "parts",
                hint="to run a release twice, write it twice as two releases",
            )


@rule(
    "DPS123",
    "parts that do not compose",
    bad="scenario s { secret race in {A, B} }\n"
    "release r1 { mechanism swm  query vector(dimension = 2, sensitivity = 1)  slices axes  noise "
    "gaussian(sigma = 4)  guarantee ave_srpp(alpha = 4) }\n"
    "release r2 { mechanism swm  query vector(dimension = 2, sensitivity = 1)  slices axes  noise "
    "gaussian(sigma = 4)  guarantee ave_srpp(alpha = 4) }\n"
    "compose both { parts [r1, r2]  guarantee ave_srpp(alpha = 4) }",
    good=_rel(),
    explanation="Static sliced Wasserstein releases (and SRPP releases in general) do not compose additively "
    "(Zhang & Vorobeychik §3); composing them is an error, not a sum.",
)
def check_composable(ctx: Context):
    by_name = {t.name: t for t in ctx.releases_and_trainings()}
    for c in ctx.spec.compositions:
        for p in c.parts:
            t = by_name.get(p)
            if t is not None and not MECHANISMS[t.mechanism].composable:
                yield diag(
                    "DPS123",
                    f"`{p}` ({t.mechanism}) cannot be composed: its guarantee does not add up across releases",
                    c,
                    "parts",
                    hint="certify it on its own, or release all statistics in one query",
                )


@rule(
    "DPS124",
    "calibration target and noise both given, or neither",
    bad=_UNIT + "release r { mechanism gaussian  sensitivity 1.0  noise gaussian(sigma = 2)  "
    "guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_UNIT
    + "release r { mechanism gaussian  sensitivity 1.0  noise gaussian(sigma = 2)  guarantee dp(delta = 1e-6) }",
    explanation="Give a target ε in the guarantee (dpspec calibrates the noise) or give the noise "
    "(dpspec reports ε), not both.",
)
def check_calibration_target(ctx: Context):
    for t in ctx.releases_and_trainings():
        g = t.guarantee
        has_target = g.epsilon is not None
        noise = setting(t, "noise")
        if has_target and noise is not None:
            yield diag(
                "DPS124",
                f"`{t.name}` gives both a target epsilon and the noise",
                t,
                "noise",
                hint="remove `noise` to calibrate to the target, or remove epsilon to report it",
            )
        elif not has_target and noise is None:
            yield diag(
                "DPS124",
                f"`{t.name}` gives neither a target epsilon nor the noise",
                t,
                "guarantee",
                hint="add epsilon to the guarantee (e.g. dp(epsilon = 1, delta = 1e-6)) or give the noise",
            )
        if isinstance(t, ir.Release) and noise is not None and noise.noise_multiplier is not None:
            yield diag(
                "DPS124",
                "a release takes noise as a standard deviation",
                t,
                "noise",
                hint="write noise gaussian(sigma = ...)",
            )
        if isinstance(t, ir.Training) and noise is not None and noise.sigma is not None:
            yield diag(
                "DPS124",
                "training noise is given as a noise multiplier (σ / C)",
                t,
                "noise",
                hint="write noise_multiplier 1.1",
            )


@rule(
    "DPS125",
    "sampling the accountant cannot certify",
    bad=_UNIT.replace("record", "record  dataset_size 60000")
    + "train t { mechanism dpsgd  sampling shuffle(batch_size = 256)  "
    "clipping flat(C = 1)  steps 100  guarantee dp(epsilon = 8, delta = 1e-6) }",
    good=_UNIT.replace("record", "record  dataset_size 60000")
    + "train t { mechanism dpsgd  sampling poisson(expected_batch = 256)  "
    "clipping flat(C = 1)  steps 100  guarantee dp(epsilon = 8, delta = 1e-6) }",
    explanation="Shuffling once per epoch and accounting as Poisson over-claims privacy (a known Opacus/TF "
    "Privacy pitfall). Sample with `poisson(...)` (as accounted) or `without_replacement(...)`.",
)
def check_sampling(ctx: Context):
    for t in ctx.spec.trainings:
        s = setting(t, "sampling")
        if isinstance(s, ir.ShuffleSampling):
            yield diag(
                "DPS125",
                "shuffled batches are not Poisson or fresh without-replacement batches, and no "
                "amplification theorem in dpspec covers them",
                t,
                "sampling",
                hint=f"use poisson(expected_batch = {s.batch_size}) (sampled as accounted) or "
                f"without_replacement(batch_size = {s.batch_size})",
            )
        # (the samplings a family's own accountants do not cover are its rule module's,
        # e.g. dpspec/families/dpsgd/rules.py)


def dataset_size(ctx: Context, t) -> int | None:
    """The public number of records: the target's own ``dataset_size`` or its privacy block's."""
    n = setting(t, "dataset_size")
    if n:
        return n
    d = ctx.resolve_protects(t)
    if isinstance(d, ir.PrivacyUnitDecl) and d.dataset_size:
        return d.dataset_size
    return None


@rule(
    "DPS126",
    "sizes that do not fit",
    bad="privacy people { unit record  dataset_size 100 }\ntrain t { mechanism dpsgd  "
    "sampling without_replacement(batch_size = 256)  clipping flat(C = 1)  steps 10  guarantee "
    "dp(epsilon = 8, delta = 1e-6) }",
    good="privacy people { unit record  dataset_size 1000 }\ntrain t { mechanism dpsgd  "
    "sampling without_replacement(batch_size = 256)  clipping flat(C = 1)  steps 10  guarantee "
    "dp(epsilon = 8, delta = 1e-6) }",
    explanation="A batch cannot be larger than the dataset; an expected Poisson batch must give a rate ≤ 1.",
)
def check_sizes(ctx: Context):
    for t in ctx.spec.trainings:
        n = dataset_size(ctx, t)
        s = setting(t, "sampling")
        if n is None or s is None:
            continue
        b = getattr(s, "batch_size", None) or getattr(s, "expected_batch", None)
        if b is not None and b > n:
            yield diag(
                "DPS126",
                f"batch of {b} is larger than the dataset ({n} records)",
                s,
                "batch_size" if hasattr(s, "batch_size") else "expected_batch",
                hint=f"use a batch of at most {n}",
            )


@rule(
    "DPS130",
    "setting has no effect for this mechanism",
    bad=_UNIT
    + "release r { mechanism gaussian  sensitivity 1.0  slices axes  guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_rel(),
    explanation="A setting the chosen mechanism ignores is a trap (the reader believes it matters); it is an error.",
)
def check_unused_settings(ctx: Context):
    release_settings = ("slices", "query", "sensitivity", "noise")  # (a release's field names are its settings)
    for t in ctx.releases_and_trainings():
        m = MECHANISMS[t.mechanism]
        allowed = allowed_settings(m)
        if not allowed:
            continue
        given: list[tuple[str, ir.Node, str]]
        if isinstance(t, ir.Training):
            # a training's settings are in its family's model (all allowed, by derivation); the ones it
            # does not hold were kept by name, whatever setting they are (a new family's too)
            given = [(f, t, f) for f in t.ignored]
            sched = t.schedule
        else:
            fields = type(t).model_fields  # (a miss through pydantic's getattr is slow: many targets)
            given = [(f, t, f) for f in release_settings if f in fields and getattr(t, f) is not None]
            sched = None
        given += [
            (f, sched, f)
            for f in ("steps", "epochs", "learning_rate", "momentum")
            if sched is not None and getattr(sched, f) is not None
        ]
        for key, node, f in given:
            if key not in allowed:
                yield diag(
                    "DPS130",
                    f"`{key}` has no effect for mechanism `{m.name}`",
                    node,
                    f,
                    hint=f"remove it (mechanism `{m.name}` uses: "
                    f"{', '.join(s for s in allowed if s not in ('protect', 'mechanism', 'description'))})",
                )


@rule(
    "DPS131",
    "δ is not small compared with 1/n",
    severity="warning",
    bad="privacy people { unit record  dataset_size 1000 }\ntrain t { mechanism dpsgd  sampling poisson(rate = 0.01)  "
    "clipping flat(C = 1)  steps 100  guarantee dp(epsilon = 8, delta = 0.01) }",
    good="privacy people { unit record  dataset_size 1000 }\ntrain t { mechanism dpsgd  sampling poisson(rate = 0.01)  "
    "clipping flat(C = 1)  steps 100  guarantee dp(epsilon = 8, delta = 1e-5) }",
    explanation="With δ ≥ 1/n a mechanism that publishes one random record satisfies the guarantee; the "
    "certificate is technically right but protects little.",
)
def check_delta_vs_n(ctx: Context):
    for t in ctx.releases_and_trainings():
        g = t.guarantee
        if not isinstance(g, ir.DpGuarantee):
            continue
        d = ctx.resolve_protects(t)
        n = setting(t, "dataset_size") or (d.dataset_size if isinstance(d, ir.PrivacyUnitDecl) else None)
        # (a negative or zero size is DPS105's; log10 of the size itself: 1/n may underflow to 0)
        if n and n >= 1 and g.delta >= 1.0 / n and 0 < g.delta < 1:
            yield diag(
                "DPS131",
                f"delta = {g.delta:g} is not below 1/n = {1 / n:.3g}",
                g,
                "delta",
                hint=f"use delta well below 1/n, e.g. {10.0 ** (-math.ceil(math.log10(n)) - 1):g}",
            )


# --- resource limits ------------------------------------------------------------------------------

# (class, field) → (limit name, what is counted); a tuple field counts each item. The sizes are
# checked here, before the compiler allocates anything they drive (dpspec/limits.py).
_SIZE_LIMITS: dict[tuple[type, str], tuple[str, str]] = {
    (ir.PrivacyUnitDecl, "dataset_size"): ("records", "dataset_size"),
    (ir.GroupUnit, "size"): ("group_size", "the group size"),
    (ir.Secret, "quantile_bins"): ("secret_values", "the number of quantile bins"),
    (ir.BoundedQuery, "bins"): ("orders", "the number of histogram bins"),
    (ir.BoundedQuery, "dimension"): ("columns", "the query's dimension"),
    (ir.UniformSphere, "m"): ("slices", "the number of slices m"),
    (ir.SamplerWorld, "samples"): ("draws", "the number of sampled draws"),
    (ir.PoissonSampling, "expected_batch"): ("batch", "the expected batch"),
    (ir.WithoutReplacementSampling, "batch_size"): ("batch", "the batch size"),
    (ir.WithReplacementSampling, "batch_size"): ("batch", "the batch size"),
    (ir.ShuffleSampling, "batch_size"): ("batch", "the batch size"),
    (ir.NegativeSampler, "per_positive"): ("degree_cap", "the negatives per positive"),
    (ir.Schedule, "steps"): ("steps", "the number of steps"),
    (ir.Schedule, "epochs"): ("epochs", "the number of epochs"),
    (ir.EncoderSpec, "hidden"): ("hidden", "the encoder's hidden units"),
    (ir.EncoderSpec, "out"): ("hidden", "the encoder's output size"),
    (ir.EncoderSpec, "max_len"): ("hidden", "the encoder's token length"),
    (ir.EncoderSpec, "epochs"): ("epochs", "the encoder's epochs"),
    (ir.SplitSpec, "per_class"): ("records", "the labelled nodes per class"),
    (ir.Execution, "workers"): ("workers", "the number of workers"),
    (ir.DiscrepancySpec, "d_max"): ("records", "d_max"),
    (ir.DiscrepancySpec, "differing"): ("records", "the number of differing records"),
    (ir.DiscrepancySpec, "draws"): ("draws", "the number of Monte-Carlo draws"),
    (ir.Propagation, "steps"): ("orders", "a propagation depth"),
    (ir.RdpGuarantee, "alpha"): ("orders", "the Rényi order alpha"),
    (ir.SrppGuarantee, "alpha"): ("orders", "the Rényi order alpha"),
    (ir.FiniteDirections, "directions"): ("slices", "the number of slice directions"),
}
_SETTING_SIZE_LIMITS = {"dataset_size": ("records", "dataset_size"), "degree_cap": ("degree_cap", "degree_cap")}
_SIZE_LIMITS_BY_CLASS: dict[type, list] = {}
for (_cls, _f), _lim in _SIZE_LIMITS.items():
    _SIZE_LIMITS_BY_CLASS.setdefault(_cls, []).append((_f, _lim))


def _training_steps(ctx: Context, t: ir.Training) -> float | None:
    """The number of steps a training runs (given, or epochs over the sampling rate), as the
    compiler will compute it; None when it cannot be known before compiling."""
    sch = t.schedule
    if sch.steps is not None:
        return float(sch.steps)
    if sch.epochs is None:
        return None
    s = setting(t, "sampling")
    s = s.positive if isinstance(s, ir.CoupledSampling) else s
    n = dataset_size(ctx, t)
    if isinstance(s, ir.FullBatch):
        return float(sch.epochs)
    if isinstance(s, ir.PoissonSampling) and s.rate:
        return sch.epochs / s.rate
    batch = getattr(s, "batch_size", None) or getattr(s, "expected_batch", None)
    if batch and n:
        return sch.epochs * n / batch
    return None


@rule(
    "DPS009",
    "a size above a resource limit",
    bad="scenario s { data synthetic(generator = secret_groups, size = 600)  secret group in {A, B, C} }\n"
    "release r { mechanism swm  query mean(x1, bounds = [0, 10])  slices sphere(m = 100000000)  "
    "guarantee ave_srpp(alpha = 4, epsilon = 1) }",
    good="scenario s { data synthetic(generator = secret_groups, size = 600)  secret group in {A, B, C} }\n"
    "release r { mechanism swm  query mean(x1, bounds = [0, 10])  slices sphere(m = 200)  "
    "guarantee ave_srpp(alpha = 4, epsilon = 1) }",
    explanation="Every size that drives memory or work (records, nodes, slices, steps, epochs, batches, orders, "
    "draws, hidden units, …) is checked against a limit before anything is allocated, so that no spec "
    "can exhaust the machine. The limits are generous for real use and listed in docs/language.md "
    "(Limits); each can be raised for one run with its environment variable, e.g. "
    "`DPSPEC_MAX_SLICES=1000000`.",
)
def check_limits(ctx: Context):
    from dpspec import limits

    for n in walk(ctx.spec):
        for f, (name, what) in _by_class(_SIZE_LIMITS_BY_CLASS, _SETTING_SIZE_LIMITS, type(n)):
            x = getattr(n, f, None)
            if x is None:
                continue
            values = x if isinstance(x, tuple) else (x,)
            if f == "directions":
                values = (len(x),)
            for v in values:
                if limits.over(name, v):
                    yield diag("DPS009", limits.LimitExceeded(name, v, what).message, n, f, hint=limits.hint(name))
                    break
        if isinstance(n, ir.SyntheticData):
            from dpspec.data.synthetic import GRAPH_GENERATORS

            name, what = (
                ("nodes", "the synthetic graph's size (nodes)")
                if n.generator in GRAPH_GENERATORS
                else ("records", "the synthetic dataset's size (records)")
            )
            if limits.over(name, n.size):
                yield diag(
                    "DPS009", limits.LimitExceeded(name, n.size, what).message, n, "size", hint=limits.hint(name)
                )
        if isinstance(n, ir.Secret) and n.values and limits.over("secret_values", len(n.values)):
            yield diag(
                "DPS009",
                limits.LimitExceeded("secret_values", len(n.values), "the number of secret values").message,
                n,
                "values",
                hint=limits.hint("secret_values"),
            )
        if isinstance(n, ir.FiniteDirections) and n.directions and limits.over("columns", len(n.directions[0])):
            yield diag(
                "DPS009",
                limits.LimitExceeded("columns", len(n.directions[0]), "the slice dimension").message,
                n,
                "directions",
                hint=limits.hint("columns"),
            )
    for t in ctx.spec.trainings:
        if t.schedule.steps is None:
            steps = _training_steps(ctx, t)
            if steps is not None and limits.over("steps", steps):
                yield diag(
                    "DPS009",
                    limits.LimitExceeded("steps", steps, "the number of steps (epochs × dataset size / batch)").message,
                    t.schedule,
                    "epochs",
                    hint=limits.hint("steps"),
                )


# --- compile-stage accounting rules (raised while calibrating; listed here for `dpspec rules`) -------

_TRAIN = (
    "privacy people {{ unit {unit}  dataset_size 1000 }}\n"
    "train t {{ mechanism dpsgd  sampling {sampling}  clipping flat(C = 1.0)  steps {steps}  "
    "guarantee dp(epsilon = {eps}, delta = 1e-6) }}\n"
)
register_front_end(
    "DPS201",
    "a certified ε above its target",
    "compile",
    bad="(see tests/compiler: a safety net behind every calibration; no spec reaches it)",
    good=_rel(),
    explanation="After calibrating, the compiler re-evaluates the certified ε and refuses "
    "to emit a certificate whose ε exceeds the target (it would overstate privacy).",
)
register_front_end(
    "DPS202",
    "a target no admissible noise reaches",
    "compile",
    bad=_TRAIN.format(unit="record", sampling="full_batch", steps=10_000_000, eps="1e-9"),
    good=_TRAIN.format(unit="record", sampling="full_batch", steps=100, eps=8),
    explanation="Calibration searches σ up to a bound (1e6 for DP-SGD, 1e5 for relational DP-SGD); a "
    "target that needs more noise is reported instead of producing a useless or unsound model.",
)
register_front_end(
    "DPS203",
    "no accountant covers the sampling and neighbouring relation",
    "compile",
    bad=_TRAIN.format(unit="record(relation = substitution)", sampling="poisson(rate = 0.01)", steps=100, eps=8),
    good=_TRAIN.format(unit="record", sampling="poisson(rate = 0.01)", steps=100, eps=8),
    explanation="Poisson and full-batch sampling are analysed under insertion/removal; group units with "
    "fixed-size batches have no tight accountant. The message names the gap.",
)
register_front_end(
    "DPS204",
    "a composition above its target",
    "compile",
    bad=_UNIT + "release a { mechanism gaussian  sensitivity 1.0  noise gaussian(sigma = 1)  "
    "guarantee dp(delta = 1e-6) }\nrelease b { mechanism gaussian  sensitivity 1.0  noise gaussian(sigma = 1)  "
    "guarantee dp(delta = 1e-6) }\ncompose both { parts [a, b]  guarantee dp(epsilon = 1, delta = 1e-6) }\n",
    good=_UNIT + "release a { mechanism gaussian  sensitivity 1.0  noise gaussian(sigma = 1)  "
    "guarantee dp(delta = 1e-6) }\nrelease b { mechanism gaussian  sensitivity 1.0  noise gaussian(sigma = 1)  "
    "guarantee dp(delta = 1e-6) }\ncompose both { parts [a, b]  guarantee dp(epsilon = 20, delta = 1e-6) }\n",
    explanation="The composed guarantee (RDP sum, or exact Gaussian composition) must meet the "
    "composition's target; give the parts smaller budgets or more noise.",
)


# --- query options, budget splits and known schemas ---------------------------------------------------

_STATS = "privacy people { unit record  data dataset(t) }\n"
_SPLIT_GOOD = (
    _STATS + "release a { query count() }\nrelease b { query sum(x, bounds = [0, 10]) }\n"
    "compose both { parts [a, b]  guarantee dp(epsilon = 1, delta = 1e-6)  split evenly }\n"
)


def _query_options(q: ir.BoundedQuery) -> list[str]:
    return [k for k in ("by", "keys", "where", "q") if getattr(q, k) is not None]


@rule(
    "DPS150",
    "a query option the mechanism does not evaluate",
    bad=_UNIT + "release r { mechanism gaussian  query count(by = sex, keys = [F, M])  "
    "guarantee dp(epsilon = 1, delta = 1e-6) }",
    good=_UNIT + "release r { query count(by = sex, keys = [F, M])  guarantee dp(epsilon = 1, delta = 1e-6) }",
    explanation="`by`, `keys`, `where` and `q` change what a query computes and how far one record moves it; "
    "only the mechanisms that evaluate them (their family lists them) may be given them, since the "
    "others would derive the sensitivity of another query.",
)
def check_query_options(ctx: Context):
    from dpspec.families import FAMILIES

    for r in ctx.spec.releases:
        f = FAMILIES.get(r.mechanism)
        if f is None or r.query is None:
            continue
        bad = [k for k in _query_options(r.query) if k not in f.query_options]
        if bad:
            takes = [n for n, x in FAMILIES.items() if set(bad) <= set(x.query_options)]
            yield diag(
                "DPS150",
                f"mechanism `{r.mechanism}` does not evaluate `{bad[0]}` in a query",
                r.query,
                bad[0],
                hint=f"use mechanism {' or '.join(takes)} (or omit `mechanism`)" if takes else f"remove `{bad[0]}`",
            )


@rule(
    "DPS151",
    "a budget split over parts that cannot take a share",
    bad=_SPLIT_GOOD.replace("compose both { parts [a, b]", "compose both { parts [a, b, missing]"),
    good=_SPLIT_GOOD,
    explanation="`split` shares the composition's target among its parts and calibrates them jointly: every "
    "part must be a release whose mechanism takes a share, the target must be "
    "dp(epsilon = …, delta = …), and `weights [w1, …]` needs one positive weight per part.",
)
def check_split(ctx: Context):
    from dpspec.families import FAMILIES

    for c in ctx.spec.compositions:
        s = c.split
        if s is None:
            continue
        g = c.guarantee
        if not isinstance(g, ir.DpGuarantee) or g.epsilon is None:
            yield diag(
                "DPS151",
                f"`{c.name}` splits its budget, so it needs a target dp(epsilon = …, delta = …)",
                c,
                "guarantee",
                hint="write `guarantee dp(epsilon = 1, delta = 1e-6)`",
            )
        for p in c.parts:
            r = next((x for x in ctx.spec.releases if x.name == p), None)
            f = FAMILIES.get(r.mechanism) if r is not None else None
            if f is None or not f.split:
                what = f"`{p}` is not a release" if r is None else f"mechanism `{r.mechanism}` of `{p}` takes no share"
                yield diag(
                    "DPS151",
                    f"`{c.name}` splits its budget, but {what}",
                    c,
                    "parts",
                    hint="list releases whose mechanism takes a share of a split ("
                    + ", ".join(n for n, x in FAMILIES.items() if x.split)
                    + ")",
                )
        if s.kind == "weights" and (len(s.weights) != len(c.parts) or not all(w > 0 for w in s.weights)):
            yield diag(
                "DPS151",
                f"`split weights` needs one positive weight per part ({len(c.parts)}), got {len(s.weights)}",
                c,
                "split",
                hint="write `split weights(1, 2, …)` with one weight per part",
            )


@rule(
    "DPS152",
    "a part of a budget split has its own guarantee",
    bad=_SPLIT_GOOD.replace(
        "release a { query count() }", "release a { query count()  guarantee dp(epsilon = 0.5, delta = 1e-6) }"
    ),
    good=_SPLIT_GOOD,
    explanation="The parts of a `compose … split` block are calibrated together to the block's target; a part "
    "with a target of its own would be calibrated twice. Remove the part's `guarantee` (or the "
    "`split`).",
)
def check_split_part_guarantee(ctx: Context):
    split_of = {p: c for c in ctx.spec.compositions if c.split is not None for p in c.parts}
    for r in ctx.spec.releases:
        c = split_of.get(r.name)
        if c is not None and r.budget_from is None:
            yield diag(
                "DPS152",
                f"`{r.name}` is a part of `{c.name}`, which splits its budget, but has a guarantee of its own",
                r,
                "guarantee",
                hint=f"remove `guarantee` from `{r.name}`: `{c.name}` gives it its share",
            )
        elif c is not None and sum(r.name in x.parts for x in ctx.spec.compositions if x.split) > 1:
            yield diag(
                "DPS152",
                f"`{r.name}` is a part of two blocks that split their budgets",
                r,
                hint="make it a part of one split only",
            )


@rule(
    "DPS153",
    "an unknown data schema, or a column the schema does not have",
    bad='privacy people { unit record  data csv("adult/adult.data", schema = adultt) }\n'
    "release r { query count()  guarantee dp(epsilon = 1, delta = 1e-6) }",
    good='privacy people { unit record  data csv("adult/adult.data", schema = adult) }\n'
    "release r { query count()  guarantee dp(epsilon = 1, delta = 1e-6) }",
    explanation="A named schema fixes the columns of a file and which are numbers; an unknown schema name (on a "
    "privacy unit's or a Pufferfish scenario's data), a query column the schema does not have, or a categorical "
    "column read as numbers is an error found without reading the data.",
)
def check_schema(ctx: Context):
    from dpspec.data.bind import SCHEMAS, schema_columns

    decls: tuple[ir.PrivacyUnitDecl | ir.Scenario, ...] = (*ctx.spec.units, *ctx.spec.scenarios)
    for decl in decls:  # a privacy unit's data, and a Pufferfish scenario's
        b = getattr(decl, "data", None)
        if isinstance(b, ir.CsvData) and b.schema_name is not None and b.schema_name not in SCHEMAS:
            yield diag(
                "DPS153",
                f"unknown schema `{b.schema_name}`",
                b,
                "schema_name",
                hint=did_you_mean(b.schema_name, SCHEMAS, "schema") or f"known: {', '.join(SCHEMAS)}",
            )
    for r in ctx.spec.releases:
        d = ctx.resolve_protects(r)
        b = getattr(d, "data", None)
        q = r.query
        if not isinstance(b, ir.CsvData) or q is None or b.schema_name not in SCHEMAS:
            continue
        cols = schema_columns(b.schema_name, b.path)
        if cols is None:
            continue
        names, numeric = cols
        reads = (
            [(c, "columns", True) for c in q.columns]
            + [(q.by, "by", False)]
            + [
                (
                    q.where.column if q.where else None,
                    "where",
                    q.where is not None and not isinstance(q.where.value, str),
                )
            ]
        )
        for c, fld, needs_number in reads:
            if c is None:
                continue
            if c not in names:
                yield diag(
                    "DPS153",
                    f"schema `{b.schema_name}` has no column `{c}`",
                    q,
                    fld,
                    hint=did_you_mean(c, names, "column") or f"its columns are: {', '.join(names)}",
                )
            elif needs_number and c not in numeric:
                yield diag(
                    "DPS153",
                    f"column `{c}` of schema `{b.schema_name}` is categorical; `{q.function}` reads numbers here",
                    q,
                    fld,
                    hint="use a numeric column, or group by this one (`by = …`)",
                )
