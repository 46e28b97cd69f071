"""The typed intermediate representation (IR): one frozen pydantic model per concept.

Invariants (as for dp_accounting's ``DpEvent`` tree):
- A model's meaning never changes once released. New semantics get a new class (and a new
  discriminator value), never a new reading of an old one.
- Every node keeps where it came from: ``span`` covers the whole construct and ``field_spans``
  maps a field name to the text of its value, so checks can point at ``alpha = 0.5`` itself.
- The IR is plain data: it round-trips through JSON exactly (``SpecIR.model_validate_json(
  ir.model_dump_json()) == ir``) and carries no numbers the compiler derived.
- Unions are discriminated by a literal field (``kind``, ``scheme``, ``rule``, ``notion``,
  ``profile``, ``source``), so a serialised IR names the concept of every node explicitly.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_validator


class SourceSpan(BaseModel):
    """A region of a spec file: 1-based line/column, end exclusive."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    file: str
    line: int
    col: int
    end_line: int
    end_col: int


class Node(BaseModel):
    # defer_build: a model's validator is built on first use, so `dpspec check` only pays for
    # the constructs a spec actually uses.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    span: SourceSpan | None = None
    field_spans: dict[str, SourceSpan] = Field(default_factory=dict)

    def span_of(self, field: str) -> SourceSpan | None:
        return self.field_spans.get(field, self.span)


# ---------------------------------------------------------------------------------------------
# Privacy units and neighbouring relations
# ---------------------------------------------------------------------------------------------

Relation = Literal["add_remove", "substitution"]


class RecordUnit(Node):
    """One record (row, example) is protected.

    ``add_remove``: datasets x ≃ x′ iff one is the other plus one record (unbounded DP).
    ``substitution``: |x| = |x′| and they differ in one record (bounded DP).
    """

    kind: Literal["record"] = "record"
    relation: Relation = "add_remove"


class GroupUnit(Node):
    """A group of up to ``size`` records (e.g. a user's K examples) is protected.

    ``add_remove``: x′ = x ∪ g or x = x′ ∪ g with |g| ≤ K — pure group insertion or pure group
    removal (Schuchardt et al. 2024, Thm 4.1). ``substitution``: up to K records replaced.
    """

    kind: Literal["group"] = "group"
    size: int
    relation: Relation = "add_remove"


class NodeUnit(Node):
    """A graph entity: a node and all its incident edges are inserted or removed (node-level DP)."""

    kind: Literal["node"] = "node"


class EdgeUnit(Node):
    """One edge of a graph is inserted or removed; node set and features are public (edge DP)."""

    kind: Literal["edge"] = "edge"


class SecretUnit(Node):
    """Pufferfish: the pairs (s_i, s_j) of a scenario's secret must stay indistinguishable under
    every prior (world) of the scenario. There is no dataset-level neighbouring relation."""

    kind: Literal["secret"] = "secret"
    scenario: str


Unit = Annotated[RecordUnit | GroupUnit | NodeUnit | EdgeUnit | SecretUnit, Field(discriminator="kind")]


# ---------------------------------------------------------------------------------------------
# Data bindings
# ---------------------------------------------------------------------------------------------


class CsvData(Node):
    """A CSV file under the data root (``$DPSPEC_DATA_DIR`` or the shared data folder)."""

    source: Literal["csv"] = "csv"
    path: str
    schema_name: str | None = None
    separator: str | None = None


class NamedData(Node):
    """A dataset bound by name at compile or run time (``dpspec.compile(spec, data={...})``)."""

    source: Literal["named"] = "named"
    name: str


class GraphData(Node):
    """A graph dataset by name (e.g. ``cora``, ``citeseer``) under the data root, or bound at run time."""

    source: Literal["graph"] = "graph"
    name: str


class SyntheticData(Node):
    """Data generated from a seed by a named generator (demos and tests)."""

    source: Literal["synthetic"] = "synthetic"
    generator: str
    size: int
    seed: int = 0


DataBinding = Annotated[CsvData | NamedData | GraphData | SyntheticData, Field(discriminator="source")]


# ---------------------------------------------------------------------------------------------
# Pufferfish scenarios
# ---------------------------------------------------------------------------------------------


class SecretPredicate(Node):
    """``secret disease = num > 0``: the secret is whether the protected record satisfies a predicate
    on one column (values ``true``/``false``, the secret's ``attribute`` is the defined name).
    ``op`` is a comparison with the number ``threshold``, or ``in`` with the listed ``members``."""

    column: str
    op: Literal["<", "<=", ">", ">=", "==", "!=", "in"]
    threshold: float | str | None = None
    members: tuple[str, ...] = ()


class Secret(Node):
    """The secret: the value of ``attribute`` for the protected individual(s).

    ``values`` lists the secret's values; with ``quantile_bins`` the secret is the bin of a numeric
    column (e.g. the grade quintile), and values are ``q1`` … ``qB``. With ``share`` the secret is
    about the dataset as a whole (``secret share = fraction(where = sex == "Female") in {0.45, 0.55}``,
    attribute privacy of Zhang, Ohrimenko & Cummings 2022): the proportion of records satisfying
    ``predicate``, whose candidate values (decimal text) are ``values``; with ``share`` and ``mean_of``
    it is the mean of that column (``secret avg_age = mean(age, bounds = [17, 90]) in {40, 45}``),
    whose candidate values are ``values`` (within ``mean_bounds`` when given).
    """

    attribute: str
    values: tuple[str, ...] = ()
    quantile_bins: int | None = None
    predicate: SecretPredicate | None = None
    membership: bool = False
    share: bool = False
    mean_of: str | None = None
    mean_bounds: tuple[float, float] | None = None


class AllDistinctPairs(Node):
    """Every ordered pair (s_i, s_j), i ≠ j, of the secret's values is discriminative."""

    pairs: Literal["all_distinct"] = "all_distinct"


class ExplicitPairs(Node):
    """Only the listed pairs are discriminative (each pair is protected in both directions)."""

    pairs: Literal["explicit"] = "explicit"
    items: tuple[tuple[str, str], ...]


Pairs = Annotated[AllDistinctPairs | ExplicitPairs, Field(discriminator="pairs")]


class EmpiricalWorld(Node):
    """The prior is the empirical distribution of the bound data."""

    world: Literal["empirical"] = "empirical"


class BalancedWorld(Node):
    """A class-balanced subsample of the data (equal counts per secret value), drawn with ``seed``."""

    world: Literal["balanced"] = "balanced"
    seed: int = 0


class GroupsWorld(Node):
    """The secret selects a whole dataset: X | s is the set of all records with secret value s
    (a point mass per secret; the query is evaluated on each group). ``prior``: the group sizes
    (``empirical``) or ``uniform``."""

    world: Literal["groups"] = "groups"
    prior: Literal["empirical", "uniform"] = "empirical"


class SamplerWorld(Node):
    """A prior given by a Python callable ``module:function`` bound at compile time:
    ``fn(secret, n, rng)`` returns n datasets drawn from X | s. ``exhaustive``: the draws enumerate
    the conditional law exactly; otherwise they are i.i.d. samples (a PAC reading)."""

    world: Literal["sampler"] = "sampler"
    target: str
    samples: int | None = None
    exhaustive: bool = False


class BernoulliWorld(Node):
    """A family of independent product priors over the records (Kifer & Machanavajjhala 2014, §7 "data
    evolution scenarios"): each record's binary secret is true with probability p, for every p in
    [``p_low``, ``p_high``] (a point when equal); given its secret, a record's other values follow the
    data's conditional law (the empirical world's), independently of the other records."""

    world: Literal["bernoulli"] = "bernoulli"
    p_low: float
    p_high: float


class CategoricalWorld(Node):
    """Like ``bernoulli`` for a secret of k values: P(secret = v_i) = p_i with p_i in [``low_i``,
    ``high_i``] (in the order of the secret's values; a family of independent product priors)."""

    world: Literal["categorical"] = "categorical"
    ranges: tuple[tuple[float, float], ...]


class MarkovWorld(Node):
    """The records are the steps of one Markov chain, in order (Song, Wang & Chaudhuri 2017, §4): the
    chain's transition matrix is one of ``transitions`` (an explicit class, started at its stationary
    law), or any reversible chain whose stationary probabilities are all ≥ ``min_stationary`` and whose
    second-largest absolute eigenvalue is ≤ ``max_eigenvalue``, started at stationarity."""

    world: Literal["markov"] = "markov"
    states: tuple[str, ...]
    transitions: tuple[tuple[tuple[float, ...], ...], ...] = ()
    min_stationary: float | None = None
    max_eigenvalue: float | None = None


World = Annotated[
    EmpiricalWorld | BalancedWorld | GroupsWorld | SamplerWorld | BernoulliWorld | CategoricalWorld | MarkovWorld,
    Field(discriminator="world"),
]


class Scenario(Node):
    """A Pufferfish scenario (S, Q, Θ): secrets, discriminative pairs and priors (worlds)."""

    name: str
    data: DataBinding | None = None
    secret: Secret
    pairs: Pairs = Field(default_factory=AllDistinctPairs)
    worlds: tuple[World, ...] = (EmpiricalWorld(),)


class PrivacyUnitDecl(Node):
    """A DP privacy unit: what is protected, under which neighbouring relation, on which data."""

    name: str
    unit: Unit
    data: DataBinding | None = None
    dataset_size: int | None = None


# ---------------------------------------------------------------------------------------------
# Sampling, clipping, slices, guarantees, schedule
# ---------------------------------------------------------------------------------------------


class PoissonSampling(Node):
    """Each element joins the batch independently with probability ``rate`` (or
    ``expected_batch / dataset_size``). The batch size is random."""

    scheme: Literal["poisson"] = "poisson"
    rate: float | None = None
    expected_batch: int | None = None


class WithoutReplacementSampling(Node):
    """A uniformly random subset of exactly ``batch_size`` elements, fresh each step."""

    scheme: Literal["without_replacement"] = "without_replacement"
    batch_size: int


class WithReplacementSampling(Node):
    """``batch_size`` independent uniform draws (an element may appear several times)."""

    scheme: Literal["with_replacement"] = "with_replacement"
    batch_size: int


class ShuffleSampling(Node):
    """Shuffle once per epoch and cut into consecutive batches (what most data loaders do).
    Subsampling amplification theorems for Poisson or fresh WOR batches do not apply."""

    scheme: Literal["shuffle"] = "shuffle"
    batch_size: int


class FullBatch(Node):
    """Every element is used at every step (no subsampling amplification)."""

    scheme: Literal["full_batch"] = "full_batch"


class NegativeSampler(Node):
    """How negatives are drawn for each positive tuple in relational learning."""

    scheme: Literal["without_replacement", "with_replacement", "in_batch", "content_dependent"]
    per_positive: int


class CoupledSampling(Node):
    """Two-stage sampling for relational learning: Poisson positives, then negatives per positive."""

    scheme: Literal["coupled"] = "coupled"
    positive: PoissonSampling
    negative: NegativeSampler


Sampling = Annotated[
    PoissonSampling
    | WithoutReplacementSampling
    | WithReplacementSampling
    | ShuffleSampling
    | FullBatch
    | CoupledSampling,
    Field(discriminator="scheme"),
]


class FlatClipping(Node):
    """Per-example gradients are scaled to ℓ2 norm ≤ C; the sum has add/remove sensitivity C."""

    rule: Literal["flat"] = "flat"
    C: float


class PerLayerClipping(Node):
    """Each layer's per-example gradient is clipped to C_l; total sensitivity √(Σ C_l²)."""

    rule: Literal["per_layer"] = "per_layer"
    C: tuple[float, ...]


class PerTupleClipping(Node):
    """Each tuple's (positive with its negatives) gradient is clipped to C (relational learning)."""

    rule: Literal["per_tuple"] = "per_tuple"
    C: float
    threshold: Literal["static", "standard"] = "static"


class FrequencyAdaptiveClipping(Node):
    """FREQ-CLIP (relational DP-SGD Alg. 1): thresholds depend on node frequencies in the batch."""

    rule: Literal["frequency_adaptive"] = "frequency_adaptive"
    C: float
    bound: Literal["corrected", "paper"] = "corrected"


Clipping = Annotated[
    FlatClipping | PerLayerClipping | PerTupleClipping | FrequencyAdaptiveClipping, Field(discriminator="rule")
]


class FiniteDirections(Node):
    """A finite slice profile: unit directions u_ℓ with probability weights ω_ℓ (exact reading)."""

    profile: Literal["directions"] = "directions"
    directions: tuple[tuple[float, ...], ...]
    weights: tuple[float, ...] | None = None


class CoordinateAxes(Node):
    """The d coordinate axes e_1..e_d with uniform (or given) weights (exact reading)."""

    profile: Literal["axes"] = "axes"
    weights: tuple[float, ...] | None = None


class UniformSphere(Node):
    """The uniform distribution on the unit sphere, represented by m directions drawn with ``seed``.

    ``reading = "finite"``: the guarantee holds for the finite profile of the m drawn directions.
    ``reading = "monte_carlo"``: the guarantee holds for the continuous profile with probability
    ≥ 1 − γ over the draw (PAC reading; γ is the guarantee's ``gamma``)."""

    profile: Literal["sphere"] = "sphere"
    m: int
    seed: int = 0
    reading: Literal["finite", "monte_carlo"] = "finite"


SliceProfile = Annotated[FiniteDirections | CoordinateAxes | UniformSphere, Field(discriminator="profile")]


class DpGuarantee(Node):
    """(ε, δ)-differential privacy w.r.t. the unit's neighbouring relation. ``epsilon=None``:
    report ε for the given noise instead of calibrating to a target."""

    notion: Literal["dp"] = "dp"
    epsilon: float | None = None
    delta: float


class RdpGuarantee(Node):
    """(α, ε)-Rényi DP (Mironov 2017): D_α(M(x) ‖ M(x′)) ≤ ε for all neighbours x ≃ x′."""

    notion: Literal["rdp"] = "rdp"
    alpha: float
    epsilon: float | None = None


class SrppGuarantee(Node):
    """Sliced Rényi Pufferfish privacy (Zhang & Vorobeychik): Ave- or Joint-SRPP of order α.

    ``subsampling_aware``: the sa-SRPP variant, an on-average notion over the sampling randomness;
    it is never presented as plain SRPP."""

    notion: Literal["srpp"] = "srpp"
    flavour: Literal["ave", "joint"]
    subsampling_aware: bool = False
    alpha: float
    epsilon: float | None = None
    gamma: float | None = None  # failure probability of a PAC reading (Monte-Carlo slices, sampled worlds)


class PufferfishGuarantee(Node):
    """ε-Pufferfish privacy (Kifer & Machanavajjhala 2014, §3): for every prior θ of the scenario,
    every discriminative pair (sᵢ, sⱼ) with positive prior mass and every output set S,
    P(M(X) ∈ S | sᵢ, θ) ≤ e^ε P(M(X) ∈ S | sⱼ, θ). Unsliced and not Rényi: a pure-ε statement."""

    notion: Literal["pufferfish"] = "pufferfish"
    epsilon: float


Guarantee = Annotated[DpGuarantee | RdpGuarantee | SrppGuarantee | PufferfishGuarantee, Field(discriminator="notion")]


class GaussianNoise(Node):
    """Gaussian noise given explicitly: ``sigma`` is the standard deviation in output units
    (release), ``noise_multiplier`` is σ/C in clipping units (training). Exactly one is set."""

    sigma: float | None = None
    noise_multiplier: float | None = None


class Schedule(Node):
    """Training length and optimiser settings. ``steps`` or ``epochs`` (epochs × n / batch)."""

    steps: int | None = None
    epochs: float | None = None
    learning_rate: float | None = None
    momentum: float | None = None


class Filter(Node):
    """A row filter ``column op value`` (``where = sex == "Female"``, ``where = age >= 30``): the query
    reads only the rows it keeps. A row is kept or not by its own value alone, so one record inserted
    or removed still changes at most one row of the filtered data (the sensitivity is unchanged)."""

    column: str
    op: Literal["==", "!=", "<", "<=", ">", ">="]
    value: str | float


class BoundedQuery(Node):
    """A query with a declared ℓ2 sensitivity or declared per-column bounds.

    ``function``: ``sum``/``mean``/``count``/``histogram`` of ``columns``; ``vector`` for a
    user-supplied query with a declared ``sensitivity``; ``logistic_regression``/``linear_svm``
    fitted on ``columns`` to predict ``label`` (= ``positive``), with L2 ``regularization``;
    ``callable`` for a Python function ``target`` = "module:function" of output ``dimension``.
    ``bounds`` are per-column [lo, hi] (one pair applies to all columns)."""

    function: Literal[
        "sum", "mean", "count", "histogram", "vector", "logistic_regression", "linear_svm", "callable", "quantile"
    ]
    columns: tuple[str, ...] = ()
    bounds: tuple[tuple[float, float], ...] = ()
    sensitivity: float | None = None
    dimension: int | None = None
    bins: int | None = None
    label: str | None = None
    positive: str | None = None
    regularization: float | None = None
    target: str | None = None
    #: group-by (``by = race``): one answer per group; ``keys``: the declared (public) groups (omitted:
    #: groups found in the data by DP partition selection); ``where``: a row filter; ``q``: the quantile
    by: str | None = None
    keys: tuple[str, ...] | None = None
    where: Filter | None = None
    q: float | None = None


class BudgetSplit(Node):
    """How a ``compose`` block shares its guarantee among its parts (``split evenly``, ``split weights
    [1, 2]``, ``split optimal``): the parts carry no guarantee of their own and are calibrated jointly
    so that their composition meets the block's target."""

    kind: Literal["evenly", "weights", "optimal"]
    weights: tuple[float, ...] = ()


# ---------------------------------------------------------------------------------------------
# Top-level items
# ---------------------------------------------------------------------------------------------


class Release(Node):
    """A one-shot release of a query answer by a mechanism, protecting a scenario or unit."""

    name: str
    protects: str
    mechanism: str
    query: BoundedQuery | None = None
    sensitivity: float | None = None
    noise: GaussianNoise | None = None
    slices: SliceProfile | None = None
    guarantee: Guarantee
    #: Pufferfish: what is released — the dataset's ``aggregate`` (one answer for the whole data) or one
    #: answer ``per_record``; None where the spec does not say (the family's default reading)
    output: Literal["aggregate", "per_record"] | None = None
    #: the ``compose`` block whose ``split`` gives this release its budget (it then has no guarantee of
    #: its own; ``guarantee`` holds the block's total target until the split assigns the share)
    budget_from: str | None = None


class Propagation(Node):
    """Personalised-PageRank style feature propagation (GCON, eqs. (9)–(11)): restart probability α
    and one or more depths m (an integer, or ``inf`` for PPR); several depths are concatenated."""

    restart: float
    steps: tuple[int | Literal["inf"], ...]


class LossSpec(Node):
    """A training loss: ``msml`` (multi-class squared margin), ``pseudo_huber(delta)``, or the ones
    other mechanisms use (``cross_entropy``, ``infonce``, ``hinge``)."""

    kind: Literal["msml", "pseudo_huber", "cross_entropy", "infonce", "hinge"]
    delta: float | None = None


class EncoderSpec(Node):
    """An edge-free feature encoder fitted on public features and training labels (GCON §IV-C1):
    ``mlp(hidden, epochs, seed)`` with logits output, or ``none`` (raw features, row-normalised)."""

    kind: Literal["mlp", "none", "minilm"]
    hidden: int = 64
    epochs: int = 200
    seed: int = 0
    out: int = 128
    max_len: int = 32
    missing_text: Literal["error", "empty"] = "error"


class SplitSpec(Node):
    """Which nodes are labelled for training: ``planetoid(per_class, seed)`` (per_class labelled nodes
    per class, drawn with seed; edge-free)."""

    kind: Literal["planetoid", "node_disjoint"] = "planetoid"
    per_class: int = 20
    seed: int = 0
    test: float = 0.2


class Execution(Node):
    """Where a training runs — never what it guarantees. ``single``: one process. ``distributed``:
    data-parallel over ``torch.distributed`` with ``workers`` processes and the collective
    ``backend`` (``gloo`` on CPU, ``nccl`` on GPUs). Every target runs the same mechanism: the global
    batch is drawn by the declared sampling over the whole dataset, each example is clipped before
    the all-reduce, and N(0, σ²C² I) is added once per step (docs/distributed.md), so the privacy
    analysis is computed without looking at this node and the certificate only records it."""

    kind: Literal["single", "distributed"]
    workers: int = 1
    backend: str = "gloo"


class DiscrepancySpec(Node):
    """How many records the secret can change between coupled worlds (SRPP-SGD, Zhang & Vorobeychik
    App. D): ``localized(d_max)``, ``label_flip(differing)``, ``iid(tv, tail_delta)`` or
    ``monte_carlo(flip, draws, gamma, tail_delta, seed)``."""

    kind: Literal["localized", "label_flip", "iid", "monte_carlo"]
    d_max: int | None = None
    differing: int | None = None
    tv: float | None = None
    tail_delta: float | None = None
    flip: float | None = None
    draws: int = 2000
    gamma: float = 0.05
    seed: int = 0


class LrScheduleSpec(Node):
    """Step sizes: ``constant`` or ``cosine(warmup, final)`` (warm-up fraction, final rate)."""

    kind: Literal["constant", "cosine"]
    warmup: float = 0.0
    final: float = 0.0


#: the settings held on ``Training`` itself (not in a family's model) that a family may list
COMMON_SETTINGS = ("steps", "epochs", "learning_rate", "momentum", "guarantee", "execution")

_BASE_FIELDS = frozenset({"span", "field_spans", "family"})


class TrainingSettings(Node):
    """The base of every training family's settings (holds none itself).

    A subclass declares ``family: Literal["<name>"] = "<name>"`` and its settings as optional fields,
    in the order the family's documentation and hints list them.
    """

    family: str = ""
    #: the common settings (``COMMON_SETTINGS``) this family reads, each listed right after one of
    #: its own fields: ``{"clipping": ("steps", "epochs")}``. The schedule settings not listed here
    #: are refused for the family (DPS130).
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: family name → its settings model (filled as subclasses are defined)
    registry: ClassVar[dict[str, type[TrainingSettings]]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        family = cls.model_fields["family"].default
        if isinstance(family, str) and family:
            TrainingSettings.registry[family] = cls

    @classmethod
    def setting_fields(cls) -> tuple[str, ...]:
        """The family's own settings (this model's fields), in declaration order."""
        return tuple(f for f in cls.model_fields if f not in _BASE_FIELDS)

    @classmethod
    def listed_settings(cls) -> tuple[str, ...]:
        """The family's own settings with the common ones it reads, in the order they are listed."""
        out: list[str] = []
        for f in cls.setting_fields():
            out.append(f)
            out.extend(cls.common_after.get(f, ()))
        return tuple(out)

    @classmethod
    def model_for(cls, family: str) -> type[TrainingSettings]:
        """The settings model of ``family`` (the base, holding nothing, if it has none).

        A model registers itself when its module is imported; one not imported yet (a serialised IR read in a
        fresh process) is found through the family table's ``settings_model``: the table is a standard-library
        leaf below the IR, and the IR never names a family's folder itself."""
        model = cls.registry.get(family)
        if model is None and family:
            from dpspec.families import FAMILIES, load

            entry = FAMILIES.get(family)
            if entry is not None and entry.settings_model:
                load(entry.settings_model)  # defines (and so registers) the model
            model = cls.registry.get(family)
        return model or TrainingSettings


_S = TypeVar("_S", bound=TrainingSettings)


class Training(Node):
    """Iterative private training by a mechanism, protecting a scenario or unit.

    What every training has is held here; what its family reads is in ``settings``, an instance of
    the family's own model (``dpspec/families/<family>/settings.py``). ``ignored`` names the settings the spec gave
    that the family does not hold (refused by DPS130; their spans stay in ``field_spans``).
    """

    name: str
    protects: str
    mechanism: str
    schedule: Schedule = Field(default_factory=Schedule)
    guarantee: Guarantee
    execution: Execution | None = None
    settings: SerializeAsAny[TrainingSettings]
    ignored: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _family_settings(cls, data: Any) -> Any:
        # a serialised IR reads back into the model its ``family`` names
        if isinstance(data, dict) and isinstance(data.get("settings"), dict):
            s = data["settings"]
            data = {**data, "settings": TrainingSettings.model_for(s.get("family", "")).model_validate(s)}
        return data

    def settings_as(self, cls: type[_S]) -> _S:
        """The settings, as the family's model ``cls`` (a TypeError if they are another family's)."""
        s = self.settings
        if not isinstance(s, cls):
            raise TypeError(f"training `{self.name}` ({self.mechanism}) has {type(s).__name__}, not {cls.__name__}")
        return s


class Composition(Node):
    """The sequential composition of named releases/trainings, certified as one guarantee."""

    name: str
    parts: tuple[str, ...]
    guarantee: Guarantee
    split: BudgetSplit | None = None


class CandidateSetting(Node):
    """One tuned setting of a ``tune`` block: the values its candidates take (``learning_rate [0.05, 0.1]``,
    ``clipping [flat(C = 0.5), flat(C = 1.0)]``, ``learning_rate log_range(0.01, 1, count = 5)``). ``values``
    are the lowered setting values (numbers, or the IR nodes the train block's setting lowers to)."""

    key: str
    values: tuple[int | float | Clipping | Sampling | Propagation, ...]


class RunCountSpec(Node):
    """How many runs a tuning makes: ``fixed`` (``count`` runs), ``poisson`` (K ~ Poisson(``mean``)) or
    ``truncated_negative_binomial`` (K ~ D_{``eta``, ``gamma``}, Papernot & Steinke 2022 §2; ``geometric(mean = m)``
    is η = 1, γ = 1/m). A random count is what makes selection cheap (Papernot & Steinke 2022 Thms 2, 6)."""

    kind: Literal["fixed", "poisson", "truncated_negative_binomial"]
    count: int | None = None
    mean: float | None = None
    eta: float | None = None
    gamma: float | None = None


class SelectSpec(Node):
    """What a tuning outputs: the run with the best ``score`` (a name the runtime's score function is
    bound to). ``on``: ``private`` — the score is a sum of per-record values in [0, 1] over private records,
    released with Gaussian noise of standard deviation ``score_noise`` (default: 10 % of the run's RDP), or for a
    family certified in (ε, δ) only with Laplace noise of that standard deviation (default: 10 % of the run's ε),
    and is part of what each run's guarantee covers; ``public`` — computed on public data, free, and stated so.
    ``release_score``: the selected run's (noisy) score is output too."""

    score: str
    on: Literal["private", "public"] = "private"
    score_noise: float | None = None
    release_score: bool = False


class Tuning(Node):
    """Hyper-parameter tuning charged to the budget: draw K runs (``runs``), each with a candidate setting
    drawn from the grid of ``candidates`` (uniformly, or with ``weights`` over the grid in its listed order),
    train the named training ``train`` under each, score, and output the best (``select``). ``guarantee`` is
    the guarantee of the whole procedure; the named training is compiled only as part of it."""

    name: str
    train: str
    candidates: tuple[CandidateSetting, ...] = ()
    weights: tuple[float, ...] | None = None
    runs: RunCountSpec
    select: SelectSpec
    guarantee: Guarantee
    stop_early: bool = False


class SpecIR(Node):
    """A whole spec: definitions (scenarios, privacy units) and what to certify."""

    file: str
    scenarios: tuple[Scenario, ...] = ()
    units: tuple[PrivacyUnitDecl, ...] = ()
    releases: tuple[Release, ...] = ()
    trainings: tuple[Training, ...] = ()
    compositions: tuple[Composition, ...] = ()
    tunings: tuple[Tuning, ...] = ()

    def definition(self, name: str) -> Scenario | PrivacyUnitDecl | None:
        decls: tuple[Scenario | PrivacyUnitDecl, ...] = (*self.scenarios, *self.units)
        for d in decls:
            if d.name == name:
                return d
        return None

    def targets(self) -> tuple[Release | Training | Composition | Tuning, ...]:
        """Everything that gets a certificate, in source order."""
        tuned = {tu.train for tu in self.tunings}  # a tuned training is certified as part of its tuning
        items: list[Release | Training | Composition | Tuning] = [
            *self.releases,
            *(t for t in self.trainings if t.name not in tuned),
            *self.compositions,
            *self.tunings,
        ]
        return tuple(sorted(items, key=lambda x: (x.span.line, x.span.col) if x.span else (0, 0)))
