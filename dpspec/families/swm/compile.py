"""Compile a `release` with `mechanism swm` under a Pufferfish `scenario` (Zhang & Vorobeychik,
Sliced Rényi Pufferfish Privacy, §3–4, §7).

Scenario → worlds (θ): ``empirical`` / ``balanced(seed)`` (X | s is one record with secret s:
per-record reading), ``groups`` (X | s is the set of all records with secret s: one aggregate per
secret), ``sampler("mod:fn")`` (user draws). Query → a numeric map with declared support bounds.
Slice profile → directions and weights. Then the exact sliced ∞-Wasserstein sensitivities
(eq. 6), the calibrated σ² (Thm 4.5 Ave; eq. 11 exact finite-profile Joint; Thms 4.7/4.8 for the
Monte-Carlo reading), and a certificate that embeds Δ and a fingerprint of the data.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpspec.certificate.model import (
    Assumption,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Notion,
    Numerics,
    Protected,
    SensitivityRecord,
    Source,
    TargetCertificate,
)
from dpspec.compiler.common import CompiledTarget
from dpspec.compiler.errors import fail as _fail
from dpspec.compiler.scenario import (
    RECORD_WORLDS,
    build_query,
    import_target,
    predicate_text,
    prior_ranges,
    secret_labels,
    world_name,
)
from dpspec.ir import models as ir

STATIC_ORDERS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0)
SPP_DELTAS = (1e-5, 1e-6, 1e-8, 1e-10)


def build_worlds(sc: ir.Scenario, X, labels, values, query, q: ir.BoundedQuery):
    from dpspec import pufferfish as pf

    worlds: list[pf.World] = []
    n_samples: int | None = None
    for w in sc.worlds:
        try:
            if isinstance(w, RECORD_WORLDS) and q.function in ("logistic_regression", "linear_svm", "callable"):
                _fail(
                    "DPS414",
                    f"`{q.function}` is computed from a dataset; the `{w.world}` prior reads one record per secret",
                    w,
                    hint="use `prior groups` (the secret selects the group's records)",
                )
            if isinstance(w, ir.EmpiricalWorld):
                worlds.append(pf.EmpiricalWorld(X, labels, secret_values=values, name="empirical"))
            elif isinstance(w, ir.BalancedWorld):
                worlds.append(
                    pf.BalancedSubsampleWorld(
                        X, labels, seed=w.seed, secret_values=values, name=f"balanced(seed={w.seed})"
                    )
                )
            elif isinstance(w, (ir.BernoulliWorld, ir.CategoricalWorld)):
                worlds.append(
                    pf.ProductFamilyWorld(
                        X, labels, secret_values=values, ranges=prior_ranges(w, values), name=world_name(w)
                    )
                )
            elif isinstance(w, ir.MarkovWorld):
                _fail(
                    "DPS436",
                    "a Markov-chain prior is released by the Markov Quilt Mechanism",
                    w,
                    hint="use `mechanism markov_quilt` with `guarantee pufferfish(epsilon = ...)`",
                )
            elif isinstance(w, ir.GroupsWorld):
                worlds.append(
                    pf.DeterministicWorld.from_groups(
                        X, labels, secret_values=values, prior=w.prior, name=f"groups({w.prior})"
                    )
                )
            else:
                fn = import_target(w.target, w, "target")
                worlds.append(pf.SamplerWorld(fn, values, exhaustive=w.exhaustive, name=f"sampler({w.target})"))
                n_samples = w.samples
                if not w.exhaustive and not w.samples:
                    _fail(
                        "DPS113",
                        "a sampled world needs the number of draws per secret",
                        w,
                        hint=f'sampler("{w.target}", samples = 2000)',
                    )
        except ValueError as e:
            _fail(
                "DPS409",
                f"world `{w.world}`: {e}",
                w,
                hint="every secret value needs records (or draws) in every prior; check the data or the prior",
            )
    return worlds, n_samples


def output_scale(r: ir.Release, sc: ir.Scenario, n_records: int) -> float | None:
    """The aggregate factor c (Lemma A) when ``output aggregate`` is read through per-record priors; None
    for a per-record release or for dataset-level priors (groups, sampler: already an aggregate)."""
    from dpspec.pufferfish.aggregate import DECOMPOSABLE, aggregate_factor

    rec = [w for w in sc.worlds if isinstance(w, RECORD_WORLDS)]
    if r.output is None:
        return None
    if r.output == "per_record":
        other = [w for w in sc.worlds if not isinstance(w, RECORD_WORLDS)]
        if other:
            _fail(
                "DPS435",
                f"the `{other[0].world}` prior draws whole datasets, so there is no per-record reading",
                r,
                "output",
                hint="write `output aggregate`, or use record-level priors (empirical, balanced, bernoulli)",
            )
        return None
    if not rec:
        return None
    if len(rec) != len(sc.worlds):
        _fail(
            "DPS435",
            "an aggregate release cannot mix record-level priors with dataset-level ones (groups, sampler)",
            r,
            "output",
            hint="protect two scenarios with two releases, one per kind of prior",
        )
    if r.query is None or r.query.function not in DECOMPOSABLE:
        _fail(
            "DPS432",
            f"`output aggregate` under record-level priors needs a sum of per-record terms "
            f"({', '.join(DECOMPOSABLE)}), not `{r.query.function if r.query else 'no query'}`",
            r,
            "output",
            hint="use mean, sum or histogram, or `prior groups`",
        )
    return aggregate_factor(r.query.function, n_records)


def reading_words(r: ir.Release, sc: ir.Scenario, n_records: int) -> str:
    """What is released, in words (explain's `Protects:` line)."""
    if r.output == "aggregate" and all(isinstance(w, RECORD_WORLDS) for w in sc.worlds):
        return (
            f"one {r.query.function if r.query else 'answer'} of the whole dataset of {n_records} records (aggregate "
            "release; the records are independent under every prior)"
        )
    if r.output == "aggregate":
        return "one answer computed from the dataset the prior draws (aggregate release)"
    if r.output == "per_record":
        return "one answer per record (per-record release)"
    if all(isinstance(w, RECORD_WORLDS) for w in sc.worlds):
        return "one answer per record (per-record release, the reading when `output` is not given)"
    return ""


def build_profile(slices, d: int, node):
    from dpspec import pufferfish as pf

    if slices is None:
        _fail("DPS413", "an SWM release needs a slice profile", node, hint="add `slices sphere(m = 200, seed = 7)`")
    try:
        if isinstance(slices, ir.FiniteDirections):
            dims = {len(v) for v in slices.directions}
            if dims != {d}:
                _fail(
                    "DPS411",
                    f"slice directions have dimension {sorted(dims)}, the query output has {d}",
                    slices,
                    "directions",
                    hint=f"give {d}-dimensional directions",
                )
            return pf.explicit_profile(np.array(slices.directions, float), slices.weights, normalize=True)
        if isinstance(slices, ir.CoordinateAxes):
            if slices.weights is not None and len(slices.weights) != d:
                _fail(
                    "DPS411",
                    f"{len(slices.weights)} axis weights for a {d}-dimensional query",
                    slices,
                    "weights",
                    hint=f"give {d} weights, one per axis, summing to 1",
                )
            return pf.axes_profile(d, slices.weights)
        return pf.sphere_profile(slices.m, d, slices.seed, reading=slices.reading)
    except ValueError as e:
        _fail(
            "DPS105",
            f"slice profile: {e}",
            slices,
            hint="for example `slices sphere(m = 200, seed = 7)` or `slices axes`",
        )


# --- the compile step ----------------------------------------------------------------------------


def compile_swm(ctx, r: ir.Release, sc: ir.Scenario, bound_data):
    """→ (TargetCertificate, SWMMechanism)."""
    from dpspec import pufferfish as pf
    from dpspec.accounting import swm as S
    from dpspec.data import DataNotFoundError
    from dpspec.data.bind import DataBindingError, fingerprint, load_table

    if not isinstance(sc, ir.Scenario):
        _fail(
            "DPS120",
            "mechanism `swm` protects a scenario's secret",
            r,
            "mechanism",
            hint="protect a `scenario` block, or use `mechanism gaussian` for a privacy unit",
        )
    g = r.guarantee
    assert isinstance(g, ir.SrppGuarantee)  # the family certifies SRPP only (DPS121)
    q = r.query
    if q is None:
        _fail("DPS413", "an SWM release needs a `query`", r, hint="add `query mean(age, bounds = [17, 90])`")
    if sc.data is None and not all(isinstance(w, ir.SamplerWorld) for w in sc.worlds):
        _fail(
            "DPS413",
            f"scenario `{sc.name}` has no `data`",
            sc,
            hint='add `data csv("adult/adult.data", schema = adult)`',
        )
    table = None
    if isinstance(sc.data, ir.SyntheticData) and r.slices is not None and r.query is not None:
        # the size is known before generating the data: refuse early rather than after generating it
        n_values = len(sc.secret.values) if sc.secret.values else 2
        _require_sensitivity_work(
            r,
            sc,
            1,
            sc.data.size,
            None,
            n_values,
            len(sc.worlds),
            sc.pairs.items if isinstance(sc.pairs, ir.ExplicitPairs) else "all_distinct",
        )
    if sc.data is not None:
        try:
            table = load_table(sc.data, bound_data)
        except DataNotFoundError:
            raise  # reported as DPS419 by the compiler
        except (DataBindingError, ValueError) as e:
            _fail(
                "DPS418",
                f"cannot load the data of scenario `{sc.name}`: {e}",
                sc,
                "data",
                hint="check the file's format (a header row, the separator, one value per column) or the bound columns",
            )
    if table is not None and len(table) == 0:
        _fail(
            "DPS418",
            f"the data of scenario `{sc.name}` has no records"
            + (f" ({table.n_dropped} dropped for missing values)" if table.n_dropped else ""),
            sc,
            "data",
            hint="check the file: a header row, then one record per line",
        )
    if table is not None:
        labels, values = secret_labels(table, sc)
        X, query = build_query(table, q)
    else:
        values = sc.secret.values
        if len(values) < 2:
            _fail(
                "DPS410",
                "a sampled scenario must list at least two secret values",
                sc.secret,
                "values",
                hint="write `secret group in {A, B}`",
            )
        labels, X = np.array([], dtype=object), np.zeros((0, 0))
        _x, query = build_query(_EmptyTable(), q)
    worlds, n_samples = build_worlds(sc, X, labels, values, query, q)
    pairs: list[tuple[str, ...]] | str
    if isinstance(sc.pairs, ir.ExplicitPairs):
        pairs = [tuple(p) for p in sc.pairs.items]
        bad = [v for p in pairs for v in p if v not in values]
        if bad:
            _fail(
                "DPS415",
                f"pairs name values the secret does not take: {', '.join(map(str, bad))}",
                sc.pairs,
                hint=f"the secret's values are: {', '.join(map(str, values))}",
            )
    else:
        pairs = "all_distinct"
    scenario = pf.Scenario(worlds, pairs, name=sc.name)
    agg = output_scale(r, sc, len(X))
    _require_sensitivity_work(r, sc, query.dim, len(X), n_samples, len(values), len(worlds), pairs)
    profile = build_profile(r.slices, query.dim, r)
    flavour = "ave" if g.flavour == "ave" else "joint_exact"
    target_eps = g.epsilon if g.epsilon is not None else 1.0
    try:
        calib = pf.calibrate(
            scenario,
            query,
            profile,
            alpha=g.alpha,
            epsilon=target_eps,
            flavour=flavour,
            gamma=g.gamma,
            aggregation="per_instance",
            n_samples=n_samples,
            seed=0,
            aggregate_scale=agg,
        )
    except S.SoundnessError as e:
        _fail(e.rule, str(e), r, "slices" if e.rule in ("DPS403", "DPS407") else "query", hint=e.hint)
    except ValueError as e:
        _fail("DPS105", str(e), r, hint="check the query's bounds, the slices and the guarantee's numbers")
    calibrated = r.noise is None
    if r.noise is not None:
        assert r.noise.sigma is not None  # a release's noise is a standard deviation (DPS124)
        sigma2 = r.noise.sigma**2
        eps = S.swm_epsilon(
            sigma2, calib.calibration_deltas, calib.weights, g.alpha, flavour, monte_carlo=calib.monte_carlo
        )
        calib = dataclasses.replace(calib, sigma2=sigma2, epsilon=eps)
    else:
        eps = calib.epsilon_at(g.alpha)
        assert g.epsilon is not None  # without noise the guarantee states its target ε (DPS124)
        if eps > g.epsilon:
            _fail(
                "DPS201",
                f"certified ε = {eps:.6g} exceeds the target {g.epsilon:g}",
                r,
                "guarantee",
                hint="no certificate is written; raise the target ε a little, or give the noise explicitly",
            )
    record = _certificate(r, sc, g, calib, flavour, calibrated, eps, X, labels, values, scenario, fingerprint)
    if r.output is not None:
        record.mechanism.parameters["output"] = r.output
        if agg is not None:
            record.mechanism.parameters["records"] = int(len(X))
            record.mechanism.parameters["aggregate_factor"] = float(agg)
    from dpspec.families.swm.runtime import SwmRelease

    cols = tuple(q.columns) + ((q.label,) if q.label else ())
    return record, SwmRelease(
        cols,
        pf.SWMMechanism(query, calib),
        name=r.name,
        output=r.output,
        records=int(len(X)) if agg is not None and agg < 1.0 else None,
    )


def _require_sensitivity_work(r, sc, d: int, n_records: int, n_samples, n_values: int, n_worlds: int, pairs) -> None:
    """Refuse (DPS009) before any allocation when the sliced sensitivity would need more work than
    the ``work`` limit: projecting and sorting every world's records on every slice, then one
    pass per (pair, world) instance (pufferfish.sensitivity: O(M m n + S m n log n))."""
    import math

    from dpspec import limits

    s = r.slices
    m = s.m if isinstance(s, ir.UniformSphere) else len(s.directions) if isinstance(s, ir.FiniteDirections) else d
    n = max(n_records, (n_samples or 0) * n_values, 1) * max(n_worlds, 1)
    n_pairs = len(pairs) if not isinstance(pairs, str) else n_values * (n_values - 1) // 2
    instances = max(n_pairs, 1) * max(n_worlds, 1)
    limits.require_work(
        f"the sliced sensitivity ({m:,} slices × {n:,} records × "
        f"(dimension + {instances:,} pair instances + log records))",
        m,
        n,
        d + instances + math.log2(n + 2),
    )


class _EmptyTable:
    columns: tuple = ()

    def __len__(self):
        return 0


def _assumption(i: int, a) -> Assumption:
    src = a.source
    paper, _, ref = src.partition(", ")
    return Assumption(id=f"swm_{i}", statement=a.statement, source=Source(paper=paper, ref=ref or src))


def _certificate(
    r, sc, g, calib, flavour, calibrated, eps, X, labels, values, scenario, fingerprint
) -> TargetCertificate:
    from dpspec.compiler import formulas as F
    from dpspec.families.swm import formulas as own

    sec = sc.secret
    what = f"the secret `{sec.attribute}`" + (
        f" (quantile bins q1…q{sec.quantile_bins})" if sec.quantile_bins else f" ∈ {{{', '.join(map(str, values))}}}"
    )
    if sec.predicate is not None:
        what = f"the secret `{sec.attribute}` (whether {predicate_text(sec.predicate)}: true or false)"
    pairs = scenario.resolved_pairs()
    worlds = [w.name for w in scenario.worlds]
    readings: dict[type, str] = {
        ir.EmpiricalWorld: "of one record drawn from the data",
        ir.BalancedWorld: "of one record drawn from a class-balanced subsample",
        ir.GroupsWorld: "that selects the whole released group of records",
        ir.SamplerWorld: "of a dataset drawn by the scenario's sampler",
        ir.BernoulliWorld: "of one record (independent records, the secret's rate in the prior's range)",
        ir.CategoricalWorld: "of one record (independent records, the secret's rates in the prior's ranges)",
    }
    whose = " or ".join(dict.fromkeys(readings[type(w)] for w in sc.worlds))
    words = reading_words(r, sc, len(labels))
    if words:
        whose += f"; released: {words}"
    protected = Protected(
        definition=sc.name,
        unit="secret",
        description=(
            f"{what} {whose}, in scenario `{sc.name}`: {len(pairs)} discriminative pairs, against an adversary whose "
            f"prior is one of {', '.join(worlds)} — not membership or any other attribute"
        ),
    )
    sa = "sa_" if g.subsampling_aware else ""
    notion = Notion(
        name=f"{sa}{g.flavour}_srpp",
        description=(
            f"{'Average' if g.flavour == 'ave' else 'Joint'} sliced Rényi Pufferfish privacy of order α = {g.alpha:g} "
            "(Zhang & Vorobeychik, Defs 3.2/3.3); not differential privacy"
        ),
    )
    orders = sorted(set(STATIC_ORDERS) | {float(g.alpha)})
    curve = [calib.epsilon_at(a) for a in orders]
    spp = []
    for dl in SPP_DELTAS:
        e2, _a = calib.spp_epsilon(dl)
        spp.append(DpPoint(epsilon=e2, delta=dl))
    guarantee = GuaranteeRecord(
        target={
            "notion": f"{sa}{g.flavour}_srpp",
            "alpha": g.alpha,
            **({"epsilon": g.epsilon} if g.epsilon else {}),
            **({"gamma": g.gamma} if g.gamma else {}),
        },
        rdp_alphas=orders,
        rdp_epsilons=curve,
        dp=spp,
        alpha=g.alpha,
        epsilon=eps,
        theorems=list(calib.theorems)
        + ["Zhang & Vorobeychik, Lemma B.1 / Thms B.3–B.4 (to sliced (ε′, δ)-Pufferfish)"],
        pairs_notion="sliced (ε′, δ)-Pufferfish privacy (ZV25 App. B.4); not (ε, δ)-DP (Props G.1/G.2)",
        reading=calib.reading,
    )
    params = {
        "sigma": calib.sigma,
        "sigma2": calib.sigma2,
        "dimension": r_dimension(calib),
        "directions": int(len(calib.weights)),
        "flavour": flavour,
        "aggregation": calib.aggregation,
        "delta_bar2": calib.delta_bar2,
        "delta_star2": calib.delta_star2,
    }
    if calib.monte_carlo:
        params["gamma"], params["delta0"] = calib.monte_carlo
    mech = MechanismRecord(
        name="swm",
        description="adds N(0, σ² I) to the query answer; σ² from the sliced "
        "∞-Wasserstein sensitivities of the scenario",
        parameters=params,
        calibrated=calibrated,
    )
    formulas = []
    if not calib.monte_carlo and flavour == "ave":
        formulas.append(
            F.formula(
                "epsilon_ave_srpp",
                own.AVE_EPSILON,
                {"alpha": g.alpha, "Dbar2": _max_bar(calib), "sigma2": calib.sigma2},
                value=eps,
            )
        )
    data_arrays = [X, labels] if len(labels) else [X]
    sens = SensitivityRecord(
        deltas=[float(x) for x in calib.deltas],
        weights=[float(w) for w in calib.weights],
        instance_deltas=(
            [[float(x) for x in row] for row in np.atleast_2d(calib.instance_deltas)]
            if calib.aggregation == "per_instance" and calib.instance_deltas is not None
            else []
        ),
        deltas_sha256=calib.deltas_sha256,
        estimator=str(calib.estimator.get("name", "")),
        aggregation=calib.aggregation,
        data_source=(sc.data.model_dump_json(exclude={"span", "field_spans"}) if sc.data is not None else "sampler"),
        data_sha256=fingerprint(*data_arrays),
        records=int(len(labels)),
        secrets={str(v): int(np.sum(labels == v)) for v in values} if len(labels) else {},
        worlds=worlds,
        pairs=[(str(a), str(b)) for a, b in pairs],
    )
    assumptions = [_assumption(i, a) for i, a in enumerate(calib.assumptions)]
    warnings = list(calib.notes)
    for w in scenario.worlds:
        zero = [s for s, p in w.prior().items() if p <= 0]
        if zero:
            warnings.append(
                f"world {w.name}: secret value(s) {zero} have zero prior mass; their pairs are not "
                "protected (Pufferfish only covers pairs with positive prior)"
            )
    numerics = Numerics(
        method=(
            "exact sliced ∞-Wasserstein distances from sorted projections (Lemma P.1), "
            f"estimator {calib.estimator.get('name')}, Δ rounded up by a floating-point error bound; "
            + ("σ² in closed form (Thm 4.5)" if flavour == "ave" else "σ² by bisection on eq. 11 (relative 1e-12)")
            + ", rounded up by 8 ulps"
        ),
        abs_error_bound=0.0,
        alpha_grid=f"static release: ε at orders {', '.join(f'{a:g}' for a in orders)} (one σ² holds for all α)",
        conversion="Zhang & Vorobeychik Lemma B.1 (ε′ = ε_α + log(1/δ)/(α − 1), optimised over α)",
        calibration=None if not calibrated else f"smallest σ² certifying ε = {g.epsilon:g} at α = {g.alpha:g}",
    )
    return TargetCertificate(
        name=r.name,
        kind="release",
        protected=protected,
        notion=notion,
        mechanism=mech,
        guarantee=guarantee,
        assumptions=assumptions,
        formulas=formulas,
        numerics=numerics,
        sensitivity=sens,
        warnings=warnings,
    )


def _max_bar(calib) -> float:
    d = np.atleast_2d(calib.calibration_deltas)
    return float(np.max((d**2) @ calib.weights))


def r_dimension(calib) -> int:
    return int(calib.profile.get("d", 0))


def compile_target(ctx, r: ir.Release, data):
    """The family's compile function (dpspec.families): a CompiledTarget for ``r``."""
    record, mech = compile_swm(ctx, r, ctx.resolve_protects(r), data)
    return CompiledTarget(r.name, "release", record, mech)
