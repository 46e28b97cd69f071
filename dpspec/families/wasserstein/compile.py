"""Compile a `release` with `mechanism wasserstein` under a Pufferfish `scenario` and
`guarantee pufferfish(epsilon = …)`.

Scenario → the conditional laws of the query's output given each secret, under each prior
(PROOF.md: Lemma A for aggregates of independent records, Lemma B for membership); their weighted-ℓ1
∞-Wasserstein distance W, maximised over priors and pairs; Laplace noise of scale W·r_k/ε on
coordinate k (r_k its declared range) — Theorem W of PROOF.md, the vector form of Song, Wang &
Chaudhuri 2017, §3.
"""

from __future__ import annotations

import numpy as np

from dpspec.certificate.model import (
    Assumption,
    GuaranteeRecord,
    MechanismRecord,
    Notion,
    Numerics,
    Protected,
    QueryRecord,
    SensitivityRecord,
    Source,
    TargetCertificate,
)
from dpspec.compiler.common import CompiledTarget, binding_text
from dpspec.compiler.errors import fail as _fail
from dpspec.ir import models as ir

SONG = "Song, Wang & Chaudhuri 2017"
KM = "Kifer & Machanavajjhala 2014"
ZOC = "Zhang, Ohrimenko & Cummings 2022"
QUERIES = ("mean", "sum", "histogram")

NOTION_TEXT = (
    "ε-Pufferfish privacy (Kifer & Machanavajjhala 2014, §3): for every declared prior and discriminative "
    "pair, P(output ∈ T | sᵢ) ≤ e^ε · P(output ∈ T | sⱼ) for every set T of outputs — a bound on the whole "
    "(unsliced) output law, not an average over slices or Rényi orders; not differential privacy (only the "
    "declared pairs, against the declared priors)"
)


def compile_target(ctx, r: ir.Release, data):
    """The family's compile function (dpspec.families): a CompiledTarget for ``r``."""
    record, mech = compile_wasserstein(ctx, r, ctx.resolve_protects(r), data)
    return CompiledTarget(r.name, "release", record, mech)


def _weights(q: ir.BoundedQuery, query) -> tuple[np.ndarray, np.ndarray]:
    """(w, r): the norm weights w_k = 1/r_k and the ranges r_k of the output coordinates."""
    if q.function == "histogram":
        r = np.ones(query.dim)
    else:
        r = np.asarray(query.hi, float) - np.asarray(query.lo, float)
    if not np.all(r > 0):
        _fail("DPS105", "every bound must have lo < hi", q, "bounds", hint="for example bounds = [[20, 90], [80, 220]]")
    return 1.0 / r, r


def compile_wasserstein(ctx, r: ir.Release, sc, bound_data):
    from dpspec import pufferfish as pf
    from dpspec.compiler import scenario as S
    from dpspec.data import DataNotFoundError
    from dpspec.data.bind import DataBindingError, fingerprint, load_table
    from dpspec.pufferfish import aggregate as A

    if not isinstance(sc, ir.Scenario):
        _fail(
            "DPS120",
            "the Wasserstein mechanism protects a scenario's secret",
            r,
            "mechanism",
            hint="protect a `scenario` block",
        )
    q, g = r.query, r.guarantee
    assert isinstance(g, ir.PufferfishGuarantee)  # the family certifies ε-Pufferfish only (DPS121)
    if q is None:
        _fail("DPS413", "a Wasserstein release needs a `query`", r, hint="add `query mean(age, bounds = [17, 90])`")
    if q.function not in QUERIES:
        _fail(
            "DPS432",
            f"the Wasserstein mechanism releases {', '.join(QUERIES)}, not `{q.function}`",
            q,
            "function",
            hint="use mean, sum or histogram with declared bounds",
        )
    if r.output is None:
        _fail(
            "DPS430",
            f"`{r.name}` does not say what is released",
            r,
            hint="add `output aggregate` (one answer for the dataset) or `output per_record`",
        )
    if sc.data is None:
        _fail("DPS413", f"scenario `{sc.name}` has no `data`", sc, hint='add `data csv("...", schema = ...)`')
    for w in sc.worlds:
        if isinstance(w, ir.MarkovWorld):
            _fail(
                "DPS436",
                "a Markov-chain prior is released by the Markov Quilt Mechanism",
                w,
                hint="use `mechanism markov_quilt`",
            )
        if isinstance(w, ir.SamplerWorld) and not w.exhaustive:
            _fail(
                "DPS431",
                "a sampled prior gives draws of the conditional laws, and the Wasserstein mechanism needs "
                "their exact ∞-Wasserstein distance",
                w,
                hint="declare `exhaustive = true` if the draws enumerate the law, or use `mechanism swm`",
            )
    try:
        table = load_table(sc.data, bound_data)
    except DataNotFoundError:
        raise
    except (DataBindingError, ValueError) as e:
        _fail(
            "DPS418",
            f"cannot load the data of scenario `{sc.name}`: {e}",
            sc,
            "data",
            hint="check the file's format or the bound columns",
        )
    if len(table) == 0:
        _fail("DPS418", f"the data of scenario `{sc.name}` has no records", sc, "data", hint="check the file")
    X, query = S.build_query(table, q)
    n = int(X.shape[0])
    w_norm, ranges = _weights(q, query)
    sec = sc.secret
    if sec.share:
        _check_share(r, sc, q)
        if sec.mean_of is not None:  # Lemma E: no per-record labels; the secret is the column's mean
            _check_mean_secret(sc, q, table)
            labels = np.array([], dtype=object)
        else:
            labels, _tf = S.predicate_secret_labels(table, sec)
        values = tuple(sec.values)
    elif sec.membership:
        labels, values = np.array([], dtype=object), ("in", "out")
    else:
        labels, values = S.secret_labels(table, sc)
    pairs = (
        [tuple(p) for p in sc.pairs.items] if isinstance(sc.pairs, ir.ExplicitPairs) else pf.all_distinct_pairs(values)
    )
    bad = [v for p in pairs for v in p if v not in values]
    if bad:
        _fail(
            "DPS415",
            f"pairs name values the secret does not take: {', '.join(map(str, bad))}",
            sc.pairs,
            hint=f"the secret's values are: {', '.join(map(str, values))}",
        )
    record_level = [w for w in sc.worlds if isinstance(w, S.RECORD_WORLDS)]
    dataset_level = [w for w in sc.worlds if not isinstance(w, S.RECORD_WORLDS)]
    if r.output == "per_record" and dataset_level:
        _fail(
            "DPS435",
            f"the `{dataset_level[0].world}` prior draws whole datasets, so there is no per-record reading",
            r,
            "output",
            hint="write `output aggregate`",
        )
    if record_level and dataset_level:
        _fail(
            "DPS435",
            "one release cannot mix record-level priors with dataset-level ones (groups, sampler)",
            r,
            "output",
            hint="protect two scenarios with two releases, one per kind of prior",
        )
    if sec.membership and (q.function != "sum" or r.output != "aggregate" or dataset_level):
        _fail(
            "DPS433",
            "a membership secret is supported for `query sum(...)` with `output aggregate` under record-level priors",
            sec,
            hint="release a sum of the records present (Lemma B)",
        )
    c = A.aggregate_factor(q.function, n) if (r.output == "aggregate" and record_level) else 1.0
    G = np.asarray(query.per_record(X), float)

    instances: list[tuple[str, str, str, float, str]] = []  # (world, s_i, s_j, W, method)
    world_names: list[str] = []
    for w in sc.worlds:
        name = S.world_name(w) if isinstance(w, (ir.BernoulliWorld, ir.CategoricalWorld)) else _name(w)
        world_names.append(name)
        if isinstance(w, (ir.BernoulliWorld, ir.CategoricalWorld)) and not sec.membership:
            try:
                pf.ProductFamilyWorld(G, labels, ranges=S.prior_ranges(w, values), secret_values=values, name=name)
            except ValueError as e:
                _fail("DPS434", str(e), w, hint="give ranges in [0, 1] that some distribution satisfies")
        if sec.share:
            if sec.mean_of is not None:
                instances.extend(_mean_instances(sc, q, w_norm, pairs, n, name))
            else:
                instances.extend(_share_instances(sc, G, labels, w_norm, pairs, n, name))
            continue
        if sec.membership:
            if isinstance(w, ir.BalancedWorld):
                _fail("DPS433", "a membership secret has no balanced subsample", w, hint="use `prior empirical`")
            v = A.max_weighted_norm(G, w_norm)
            for a, b in pairs:
                instances.append((name, str(a), str(b), v, "max record norm"))
            continue
        laws = _laws(w, G, X, labels, values, query, q, name, table)
        for a, b in pairs:
            if a not in laws or b not in laws:
                continue
            if isinstance(w, ir.GroupsWorld):
                d = float(np.sum(np.abs(laws[a][0] - laws[b][0]) * w_norm))
                v, how = A._round_up(d, len(w_norm)), "point masses"
            else:
                v, how = A.weighted_l1_w_inf(laws[a], laws[b], w_norm)
            instances.append((name, str(a), str(b), v, how))
    if not instances:
        _fail("DPS409", "no discriminative pair has both secrets in any prior", sc, hint="check the data and the pairs")
    W_rec = max(v for *_x, v, _h in instances)
    W = float(np.nextafter(W_rec * c, np.inf)) if c != 1.0 else W_rec
    eps = float(g.epsilon)
    scale = float(np.nextafter(W / eps, np.inf))  # b_k = scale · r_k, both rounded up: ε is never exceeded
    b = np.nextafter(scale * ranges, np.inf)
    record = _certificate(
        r,
        sc,
        g,
        q,
        query,
        W,
        W_rec,
        c,
        scale,
        b,
        ranges,
        instances,
        world_names,
        X,
        labels,
        values,
        pairs,
        n,
        fingerprint,
    )
    from .runtime import WassersteinRelease

    cols = tuple(q.columns)
    return record, WassersteinRelease(
        cols,
        query,
        tuple(float(x) for x in b),
        output=r.output,
        records=n if (c < 1.0 or sec.share) else None,  # Lemma D depends on n even for a sum
        epsilon=eps,
        name=r.name,
    )


def _check_share(r: ir.Release, sc: ir.Scenario, q: ir.BoundedQuery) -> None:
    """DPS437: a proportion secret is covered by Lemma D (a mean secret by Lemma E) only for an aggregate of
    i.i.d. records (`prior empirical`: the data's conditional laws given the predicate, or the data's law
    shifted to the secret mean)."""
    kind = "mean" if sc.secret.mean_of is not None else "proportion"
    if r.output != "aggregate":
        _fail(
            "DPS437",
            f"a {kind} secret is about the whole dataset, so only an aggregate release can protect it",
            r,
            "output",
            hint="write `output aggregate`",
        )
    for w in sc.worlds:
        if not isinstance(w, ir.EmpiricalWorld):
            _fail(
                "DPS437",
                f"a {kind} secret is protected under i.i.d. records (`prior empirical`), not `{_name(w)}`",
                w,
                hint="write `prior empirical`: records i.i.d., the "
                + (
                    "mean is the secret, the data's law shifted to it"
                    if kind == "mean"
                    else "proportion is the secret, a record's values given the predicate as in the data"
                ),
            )


def _check_mean_secret(sc: ir.Scenario, q: ir.BoundedQuery, table) -> None:
    """DPS437: a mean secret is covered by Lemma E for a mean or sum whose columns include the secret's."""
    sec = sc.secret
    col = sec.mean_of
    assert col is not None  # called for a mean secret only
    if col not in table.columns:
        from dpspec.diagnostics import did_you_mean

        _fail(
            "DPS416", f"the data has no column `{col}`", sec, "mean_of", hint=did_you_mean(col, table.columns, "column")
        )
    if not table.is_numeric(col):
        _fail(
            "DPS437",
            f"a mean secret needs a numeric column; `{col}` is categorical",
            sec,
            "mean_of",
            hint="use `fraction(where = ...)` for a categorical attribute",
        )
    if q.function not in ("mean", "sum"):
        _fail(
            "DPS437",
            f"a mean secret's bound (Lemma E) is for a mean or sum of bounded columns, not `{q.function}`",
            q,
            "function",
            hint=f"release `mean({col}, bounds = [...])`",
        )
    if col not in q.columns:
        _fail(
            "DPS437",
            f"the query does not use `{col}`: under the location family its release would need no noise, which "
            f"holds only if the released columns do not move with the mean of `{col}`",
            q,
            "columns",
            hint=f"include `{col}` in the query, or protect a secret about the released columns",
        )


def _mean_weight(q: ir.BoundedQuery, col: str, w_norm) -> float:
    """Σ w_k over the query's coordinates on the secret's column (the norm's weight of a unit shift)."""
    from dpspec.pufferfish import aggregate as A

    ws = [float(w_norm[k]) for k, c in enumerate(q.columns) if c == col]
    return A._round_up(float(sum(ws)), len(ws))


def _mean_instances(sc, q, w_norm, pairs, n: int, name: str) -> list[tuple[str, str, str, float, str]]:
    """Lemma E: per pair (μ, μ′), n·|μ − μ′|·Σ_k w_k (the coordinates on the secret's column), rounded up; the
    aggregate factor c is applied by the caller. n·|μ − μ′| is exact (rationals of the decimal texts)."""
    from fractions import Fraction

    from dpspec.pufferfish import aggregate as A

    wsum = _mean_weight(q, sc.secret.mean_of, w_norm)
    out = []
    for a, b in pairs:
        shift = n * abs(Fraction(str(a)) - Fraction(str(b)))
        v = A._round_up(float(shift) * wsum, 2) if shift else 0.0
        out.append((name, str(a), str(b), v, f"location shift n·|μ − μ′| × Σ w {wsum!r}"))
    return out


def _share_instances(sc, G, labels, w_norm, pairs, n: int, name: str) -> list[tuple[str, str, str, float, str]]:
    """Lemma D: per pair (p, p′), m(n, p, p′) · W∞(g | predicate true, g | predicate false), rounded up; the
    aggregate factor c is applied by the caller."""
    from dpspec.pufferfish import aggregate as A
    from dpspec.pufferfish.share import MAX_RECORDS, binomial_w_inf

    sec = sc.secret
    t, f = G[labels == "true"], G[labels == "false"]
    if len(t) == 0 or len(f) == 0:
        _fail(
            "DPS437",
            f"the data has no record where the predicate of `{sec.attribute}` is "
            f"{'true' if len(t) == 0 else 'false'}, so its conditional law is not defined",
            sec,
            "predicate",
            hint="choose a predicate that some records satisfy and some do not",
        )
    if n > MAX_RECORDS:
        _fail(
            "DPS437",
            f"a proportion secret's exact binomial W∞ is computed up to {MAX_RECORDS} records, the data has {n}",
            sc,
            "data",
            hint="release a sample of the data",
        )
    w_rec, how = A.weighted_l1_w_inf(t, f, w_norm)
    out = []
    for a, b in pairs:
        m = binomial_w_inf(n, str(a), str(b))
        v = A._round_up(m * w_rec, 1) if m else 0.0
        out.append((name, str(a), str(b), v, f"binomial shift × {how} W∞ {w_rec!r}"))
    return out


def _share_conditional(instances) -> float:
    """The conditional W∞ w of Lemma D, carried in each share instance's method text as its last number."""
    return max(float(h.rsplit(" ", 1)[1]) for *_x, h in instances)


def _name(w) -> str:
    if isinstance(w, ir.BalancedWorld):
        return f"balanced(seed={w.seed})"
    if isinstance(w, ir.GroupsWorld):
        return f"groups({w.prior})"
    if isinstance(w, ir.SamplerWorld):
        return f"sampler({w.target})"
    return w.world


def _laws(w, G, X, labels, values, query, q, name, table) -> dict:
    """{secret: rows} — the conditional law of the per-record output (record-level priors), the group's
    aggregate (groups), or the exhaustive sampler's outputs."""
    from dpspec import pufferfish as pf
    from dpspec.compiler import scenario as S

    if isinstance(w, ir.BalancedWorld):
        bw = pf.BalancedSubsampleWorld(G, labels, seed=w.seed, secret_values=values, name=name)
        return {s: bw.records_of(s) for s in bw.secrets}
    if isinstance(w, (ir.EmpiricalWorld, ir.BernoulliWorld, ir.CategoricalWorld)):
        return {s: G[labels == s] for s in values if np.any(labels == s)}
    if isinstance(w, ir.GroupsWorld):
        return {s: np.asarray(query(X[labels == s]), float).reshape(1, -1) for s in values if np.any(labels == s)}
    fn = S.import_target(w.target, w, "target")
    sw = pf.SamplerWorld(fn, values, exhaustive=True, name=name)
    out = {}
    for s in values:
        try:
            out[s] = np.asarray(sw.query_outputs(query, s), float)
        except ValueError as e:
            _fail("DPS409", f"world `{name}`: {e}", w, hint="the sampler must enumerate every secret's law")
    return out


def _certificate(
    r, sc, g, q, query, W, W_rec, c, scale, b, ranges, instances, world_names, X, labels, values, pairs, n, fingerprint
) -> TargetCertificate:
    from dpspec.compiler import scenario as S

    sec = sc.secret
    if sec.share and sec.mean_of is not None:
        what = (
            f"the dataset-level secret `{sec.attribute}`: the mean of `{sec.mean_of}`, one of "
            f"{{{', '.join(map(str, values))}}} (attribute privacy of the whole dataset, not of one record)"
        )
    elif sec.share:
        what = (
            f"the dataset-level secret `{sec.attribute}`: the proportion of records for which "
            f"{S.predicate_text(sec.predicate)}, one of {{{', '.join(map(str, values))}}} (attribute privacy of the "
            "whole dataset, not of one record)"
        )
    elif sec.membership:
        what = "whether the protected record is in the dataset (membership)"
    elif sec.predicate is not None:
        what = f"the secret `{sec.attribute}` (whether {S.predicate_text(sec.predicate)}: true or false) of one record"
    else:
        what = f"the secret `{sec.attribute}` ∈ {{{', '.join(map(str, values))}}} of one record"
    if r.output == "aggregate" and c != 1.0:
        released = (
            f"one {q.function} of the whole dataset of {n} records (aggregate release; the records are "
            "independent under every prior)"
        )
    elif r.output == "aggregate":
        released = f"one {q.function} of the dataset (aggregate release)"
    else:
        released = "one answer per record (per-record release)"
    protected = Protected(
        definition=sc.name,
        unit="secret",
        description=(
            f"{what}, in scenario `{sc.name}`; released: {released}; {len(pairs)} discriminative pairs, against an "
            f"adversary whose prior is one of {', '.join(world_names)} — not any other attribute or prior"
        ),
    )
    notion = Notion(name="pufferfish", description=NOTION_TEXT)
    guarantee = GuaranteeRecord(
        target={"notion": "pufferfish", "epsilon": g.epsilon},
        epsilon=g.epsilon,
        theorems=[f"{SONG}, §3 (Wasserstein mechanism), in the weighted ℓ1 norm (PROOF.md, Theorem W)"]
        + (
            [f"dpspec Lemma A (aggregate of independent records: W∞ ≤ c·per-record W∞, c = {c:.6g}); {KM}, §7"]
            if c != 1.0 and not sec.share
            else []
        )
        + (["dpspec Lemma B (membership, sum)"] if sec.membership else [])
        + (
            [
                f"dpspec Lemma D (proportion secret; {ZOC}, §3): W∞ ≤ c · W∞(Binomial(n, p), Binomial(n, p′)) · "
                "W∞(a record's answer | predicate true, | false)"
            ]
            if sec.share and sec.mean_of is None
            else []
        )
        + (
            [
                f"dpspec Lemma E (mean secret, location family; {ZOC}, §3): W∞ ≤ c · n · |μ − μ′| · Σ_k w_k over the "
                f"coordinates on `{sec.mean_of}`"
            ]
            if sec.mean_of is not None
            else []
        ),
        pairs_notion="pufferfish",
        reading=(
            "a bound (Lemma E), equal to the exact W∞ when the shifted values stay within the query's bounds"
            if sec.mean_of is not None
            else "exact: every prior's conditional laws are finite and enumerated (no sampling, no PAC failure)"
        ),
    )
    params = {
        "output": r.output,
        "epsilon": float(g.epsilon),
        "w_inf": W,
        "scale_factor": scale,
        "dimension": int(query.dim),
        "records": n,
    }
    if c != 1.0:
        params["aggregate_factor"] = c
        params["w_inf_record"] = W_rec
    if sec.share and sec.mean_of is not None:  # Lemma E: each instance is n·|μ − μ′| times this weight
        params["mean_shift_weight"] = _mean_weight(q, sec.mean_of, 1.0 / ranges)
        params["mean_of"] = sec.mean_of
    elif sec.share:  # Lemma D: each instance is m(n, p, p′) times this conditional W∞ (verify recomputes m)
        params["w_inf_conditional"] = _share_conditional(instances)
    for k, bk in enumerate(b):
        params[f"scale_{k}"] = float(bk)
    mech = MechanismRecord(
        name="wasserstein",
        description=(
            "adds independent Laplace noise of scale scale_k = (W / ε)·range_k to coordinate k of the query answer, "
            "W the ∞-Wasserstein distance (ℓ1, coordinates over their ranges) between the answer's conditional laws"
        ),
        parameters=params,
        calibrated=True,
    )
    assumptions = [
        Assumption(
            id="fresh_noise",
            statement="the Laplace noise is drawn independently of the data and of the secret",
            source=Source(paper=SONG, ref="§3"),
        ),
        Assumption(
            id="priors",
            statement=(
                "the adversary's prior is one of the declared priors: "
                + "; ".join(world_names)
                + (
                    f" — read as a location family: the records are i.i.d. from the data's law with `{sec.mean_of}` "
                    "shifted by (the secret mean − the data's mean of it); the other columns keep their law given "
                    f"the record (they do not move with the mean of `{sec.mean_of}`); the dataset size n is public"
                    if sec.mean_of is not None
                    else " — the records are i.i.d.: each satisfies the predicate with the secret probability p, and "
                    "its values given the predicate follow the data's conditional law (the dataset size n is public)"
                    if sec.share
                    else " — under each, the records are independent and a record's values given its secret follow "
                    "the data's conditional law"
                    if any(isinstance(w, S.RECORD_WORLDS) for w in sc.worlds)
                    else ""
                )
            ),
            source=Source(paper=KM, ref="§3, §7 (data evolution scenarios)"),
        ),
        Assumption(
            id="real_arithmetic",
            statement="the Laplace sampler is treated as exact real-valued sampling "
            "(floating-point attacks are out of scope)",
            source=Source(paper="Mironov 2012", ref="§2"),
        ),
        Assumption(
            id="no_composition",
            statement="this release does not compose with other Pufferfish releases on the "
            "same data; each object releases once",
            source=Source(paper=KM, ref="§9 (composition)"),
        ),
    ]
    warnings = []
    for wn, a, bb, _v, how in instances:
        if how == "cross_distance":
            warnings.append(
                f"{wn}: ({a}, {bb}) bounded by the largest cross distance (too many records for an exact "
                "matching); the noise may be larger than needed"
            )
            break
    inst_rows = [[float(v)] for *_x, v, _h in instances]
    sens = SensitivityRecord(
        deltas=[W],
        weights=[1.0],
        instance_deltas=inst_rows,
        deltas_sha256=_sha([v for *_x, v, _h in instances]),
        estimator=";".join(sorted({h for *_x, h in instances})),
        aggregation="max over priors and pairs" + (f", times the aggregate factor {c:.6g}" if c != 1.0 else ""),
        data_source=sc.data.model_dump_json(exclude={"span", "field_spans"}),
        data_sha256=fingerprint(*([X, labels] if len(labels) else [X])),
        records=n,
        # a proportion secret's class counts would state the secret itself: never recorded
        secrets={str(v): int(np.sum(labels == v)) for v in values} if len(labels) and not sec.share else {},
        worlds=world_names,
        pairs=[(str(a), str(bb)) for a, bb in pairs],
    )
    qrec = QueryRecord(
        function=q.function,
        columns=list(q.columns),
        bounds=[
            (float(lo), float(hi))
            for lo, hi in zip(np.atleast_1d(getattr(query, "lo", [])), np.atleast_1d(getattr(query, "hi", [])))
        ],
        bins=q.bins,
        dimension=int(query.dim),
        evaluated_on="data",
        sensitivity=W,
        derivation=(
            "W∞ of the answer's conditional laws (ℓ1, coordinates over their ranges)"
            + (
                f" = {c:.6g} × {W_rec:.6g}, n times the largest |μ − μ′| times the weight of the coordinates on "
                f"`{sec.mean_of}` (Lemma E)"
                if sec.mean_of is not None
                else f" = {c:.6g} × {W_rec:.6g}, the binomial shift m(n, p, p′) times a record's W∞ between its laws "
                f"given the predicate, {_share_conditional(instances):.6g} (Lemma D)"
                if sec.share
                else f" = {c:.6g} × the per-record W∞ {W_rec:.6g} (Lemma A)"
                if c != 1.0
                else ""
            )
        ),
        dataset_size=n,
        data=binding_text(sc.data),
    )
    numerics = Numerics(
        method=(
            "Lemma E in closed form: n·|μ − μ′| exact in rationals, the weights' sum and the product rounded up "
            "(Higham Thm 3.1)"
            if sec.mean_of is not None
            else "exact bottleneck matching of the finite conditional laws (cityblock metric), or the largest cross "
            "distance where too large; rounded up by a floating-point error bound (Higham Thm 3.1)"
        ),
        abs_error_bound=0.0,
        alpha_grid="pure ε (no Rényi orders)",
        calibration=f"Laplace scale (W / ε)·range_k with ε = {g.epsilon:g}",
    )
    return TargetCertificate(
        name=r.name,
        kind="release",
        protected=protected,
        notion=notion,
        mechanism=mech,
        guarantee=guarantee,
        assumptions=assumptions,
        formulas=[],
        numerics=numerics,
        sensitivity=sens,
        query=qrec,
        warnings=warnings,
    )


def _sha(vals) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(np.ascontiguousarray(np.asarray(vals, float), "<f8").tobytes()).hexdigest()
