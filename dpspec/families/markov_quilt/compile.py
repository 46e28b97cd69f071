"""Compile a `release` with `mechanism markov_quilt`: a statistic of one Markov chain's steps under
`prior markov(...)` and `guarantee pufferfish(epsilon = …)` (Song, Wang & Chaudhuri 2017, §4).

The records are the chain's steps in order (T of them); the secret is each step's state; the query
is the mean (L = range/T) or sum (L = range) of one bounded column. σ comes from :mod:`.mqm`: the
exact max-influence over the listed transition matrices (MQMExact), or the bound for the class of
reversible chains with a minimum stationary probability and a maximum second eigenvalue.
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
    Scalar,
    Source,
    TargetCertificate,
)
from dpspec.compiler.common import CompiledTarget, binding_text
from dpspec.compiler.errors import fail as _fail
from dpspec.ir import models as ir

SONG = "Song, Wang & Chaudhuri 2017"


def compile_target(ctx, r: ir.Release, data):
    record, mech = compile_mqm(r, ctx.resolve_protects(r), data)
    return CompiledTarget(r.name, "release", record, mech)


def _classes(w: ir.MarkovWorld, k: int):
    from .mqm import MarkovChain

    out = []
    for M in w.transitions:
        A = np.asarray(M, float)
        if A.shape != (k, k):
            _fail(
                "DPS436",
                f"a transition matrix of shape {A.shape} for {k} states",
                w,
                "transitions",
                hint=f"give {k}×{k} matrices, one row per state",
            )
        try:
            out.append(MarkovChain(A))
        except ValueError as e:
            _fail("DPS436", f"transition matrix: {e}", w, "transitions", hint="rows are probability vectors")
    return out


def compile_mqm(r: ir.Release, sc, bound_data):
    from dpspec.compiler import scenario as S
    from dpspec.data import DataNotFoundError
    from dpspec.data.bind import DataBindingError, fingerprint, load_table

    from .mqm import calibrate_mqm, calibrate_mqm_reversible

    if not isinstance(sc, ir.Scenario):
        _fail(
            "DPS120",
            "the Markov Quilt Mechanism protects a scenario's secret",
            r,
            "mechanism",
            hint="protect a `scenario` block",
        )
    q, g = r.query, r.guarantee
    assert isinstance(g, ir.PufferfishGuarantee)  # the family certifies ε-Pufferfish only (DPS121)
    worlds = [w for w in sc.worlds if isinstance(w, ir.MarkovWorld)]
    if not worlds or len(worlds) != len(sc.worlds):
        _fail(
            "DPS436",
            "the Markov Quilt Mechanism needs Markov-chain priors only",
            sc,
            hint="write `prior markov(states = [0, 1], transitions in [[[0.8, 0.2], [0.3, 0.7]]])`",
        )
    if q is None or q.function not in ("mean", "sum") or len(q.columns) != 1 or not q.bounds:
        _fail(
            "DPS432",
            "the Markov Quilt Mechanism releases the mean or sum of one bounded column",
            q or r,
            hint="write `query mean(state, bounds = [0, 1])`",
        )
    sec = sc.secret
    if sec.share:
        _fail(
            "DPS437",
            "a dataset-level secret (a proportion or mean) is released by the Wasserstein mechanism",
            sec,
            hint="protect each step's state (`secret state in {0, 1}`) with the Markov Quilt Mechanism",
        )
    if sec.predicate is not None or sec.membership or sec.quantile_bins or q.columns[0] != sec.attribute:
        # the privacy theorem covers a statistic of the chain's states only: a statistic of another column
        # (a copy of one step's state, say) is not bounded by the states' max-influence
        _fail(
            "DPS432",
            f"the Markov Quilt Mechanism releases a statistic of the chain's states: the query's column "
            f"`{q.columns[0]}` is not the secret's attribute `{sec.attribute}`",
            q,
            hint=f"write `query {q.function}({sec.attribute}, bounds = [...])`, with the secret a state "
            f"attribute (`secret {sec.attribute} in {{...}}`)",
        )
    if r.output != "aggregate":
        _fail(
            "DPS430",
            "a Markov-chain release is one aggregate of the whole sequence",
            r,
            "output",
            hint="write `output aggregate`",
        )
    if sc.data is None:
        _fail("DPS413", f"scenario `{sc.name}` has no `data`", sc, hint="add the sequence's data")
    try:
        table = load_table(sc.data, bound_data)
    except DataNotFoundError:
        raise
    except (DataBindingError, ValueError) as e:
        _fail("DPS418", f"cannot load the data of scenario `{sc.name}`: {e}", sc, "data", hint="check the file")
    X, query = S.build_query(table, q)
    T = int(X.shape[0])
    if T < 2:
        _fail("DPS418", "a chain needs at least two steps", sc, "data", hint="check the data")
    labels, values = S.secret_labels(table, sc)
    lo, hi = q.bounds[0]
    L = (hi - lo) / T if q.function == "mean" else (hi - lo)
    eps = float(g.epsilon)
    cals, names = [], []
    for w in worlds:
        stray = [v for v in values if v not in w.states]
        if stray:
            _fail(
                "DPS436",
                f"the data's states {', '.join(stray)} are not among the prior's states",
                w,
                "states",
                hint="list every state the sequence takes, in the order of the matrices' rows",
            )
        k = len(w.states)
        if w.transitions:
            try:
                cals.append(calibrate_mqm(_classes(w, k), T, eps, lipschitz=L))
            except ValueError as e:  # powers or laws leaving float64's range: no certified rounding bound
                _fail(
                    "DPS436",
                    f"transition matrix: {e}",
                    w,
                    "transitions",
                    hint="use transition probabilities "
                    "well above 1e-290 (or a class given by min_stationary and max_eigenvalue)",
                )
            names.append(f"markov(states = [{', '.join(w.states)}], {len(w.transitions)} transition matrix(es))")
        if w.min_stationary is not None or w.max_eigenvalue is not None:
            if w.min_stationary is None or w.max_eigenvalue is None:
                _fail(
                    "DPS436",
                    "a reversible class needs both min_stationary and max_eigenvalue",
                    w,
                    hint="markov(states = [0, 1], min_stationary = 0.3, max_eigenvalue = 0.5)",
                )
            try:
                cals.append(calibrate_mqm_reversible(w.min_stationary, w.max_eigenvalue, T, eps, lipschitz=L))
            except ValueError as e:
                _fail("DPS436", str(e), w, hint="0 < min_stationary ≤ 1/2 and 0 ≤ max_eigenvalue < 1")
            names.append(f"markov(reversible, π_min ≥ {w.min_stationary:g}, λ* ≤ {w.max_eigenvalue:g})")
        if not w.transitions and w.min_stationary is None:
            _fail(
                "DPS436",
                "a Markov prior needs its class of chains",
                w,
                hint="give `transitions in [...]` or `min_stationary` and `max_eigenvalue`",
            )
    worst = max(cals, key=lambda c: c.scale)
    scale = worst.scale
    params: dict[str, Scalar] = {
        "output": "aggregate",
        "epsilon": eps,
        "scale_0": scale,
        "lipschitz": L,
        "sigma_max": scale / L,
        "worst_node": worst.worst_node,
        "worst_quilt": " ".join(map(str, worst.worst_quilt)),
        "worst_influence": worst.worst_influence,
        "records": T,
        "group_dp_scale": L * T / eps,
        "dimension": 1,
    }
    sec = sc.secret
    protected = Protected(
        definition=sc.name,
        unit="secret",
        description=(
            f"the state `{sec.attribute}` ∈ {{{', '.join(values)}}} of each step of the sequence, in scenario "
            f"`{sc.name}`; released: one {q.function} of the whole sequence of {T} steps (aggregate release; the "
            f"steps are one Markov chain); against an adversary whose chain is one of: {'; '.join(names)} — "
            "not any other chain or secret"
        ),
    )
    from dpspec.families.wasserstein.compile import NOTION_TEXT

    rec = TargetCertificate(
        name=r.name,
        kind="release",
        protected=protected,
        notion=Notion(name="pufferfish", description=NOTION_TEXT),
        mechanism=MechanismRecord(
            name="markov_quilt",
            description=(
                "adds Laplace noise of scale L·max_i σ_i, σ_i = min over the Markov quilts of step i of "
                "card(X_N)/(ε − e), e the quilt's max-influence"
            ),
            parameters=params,
            calibrated=True,
        ),
        guarantee=GuaranteeRecord(
            target={"notion": "pufferfish", "epsilon": eps},
            epsilon=eps,
            theorems=[
                f"{SONG}, §4 (Markov Quilt Mechanism, its privacy theorem)",
                "dpspec/families/markov_quilt/mqm.py (max-influence on a chain; the reversible-class bound)",
            ],
            pairs_notion="pufferfish",
            reading=worst.method,
        ),
        assumptions=[
            Assumption(
                id="chain",
                statement="the records are the steps of one Markov chain of the declared class, in "
                "order, started at its stationary law",
                source=Source(paper=SONG, ref="§4"),
            ),
            Assumption(
                id="fresh_noise",
                statement="the Laplace noise is drawn independently of the sequence",
                source=Source(paper=SONG, ref="§4"),
            ),
            Assumption(
                id="no_composition",
                statement="this release does not compose with other Pufferfish releases; each object releases once",
                source=Source(paper="Kifer & Machanavajjhala 2014", ref="§9"),
            ),
        ],
        numerics=Numerics(
            method=f"{worst.method}; the quilt search is exhaustive (pruned by card ≥ σ·ε)",
            abs_error_bound=0.0,
            alpha_grid="pure ε (no Rényi orders)",
            calibration=f"Laplace scale L·σ_max with ε = {eps:g}",
        ),
        query=QueryRecord(
            function=q.function,
            columns=list(q.columns),
            bounds=[(float(lo), float(hi))],
            dimension=1,
            evaluated_on="data",
            sensitivity=float(L),
            derivation=f"Lipschitz constant L = {L:.6g} per step (range / T for a mean)",
            dataset_size=T,
            data=binding_text(sc.data),
        ),
        warnings=[],
    )
    _ = fingerprint
    from dpspec.families.wasserstein.runtime import WassersteinRelease

    return rec, WassersteinRelease(
        tuple(q.columns), query, (scale,), output="aggregate", records=T, epsilon=eps, name=r.name
    )
