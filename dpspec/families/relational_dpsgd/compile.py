"""Compile a `train` block with `mechanism relational_dpsgd` (Huang et al. 2025, entity-level DP).

The privacy unit is a node with all its edges. The compiler loads the graph, makes the node-disjoint
train/test split (zero-shot link prediction on held-out entities), caps degrees at K
(Daigavane et al.; removing a node changes at most K capped edges) and treats the counts of the
capped training graph (n nodes, m edges) as public, as the paper does. It then evaluates **every
valid accountant** for the declared clipping and coupled sampling (:func:`relational_accountants`):

* ``eq3``   — Eq. (3) / Thm 3: Poisson positives, NEG-SAMPLE-WOR negatives, constant node
  sensitivity Δ (static per-tuple threshold C/(K+2): Δ = C; standard: (K+2)C; FREQ-CLIP: the
  corrected bound of :func:`freq_clip_sensitivity`, never Prop 4.1's C);
* ``thm_c1`` — Thm C.1 / Eq. (47): per-tuple-additive clipping with WOR negatives;
* ``group`` — Schuchardt et al. 2024 Thm 4.2 when there are no private negatives;
* ``naive`` — the Gaussian mechanism without amplification;

calibrates σ against their pointwise minimum and certifies the tightest curve; the certificate
lists every candidate with its ε and why the others do not apply.
"""

from __future__ import annotations

import math

import numpy as np

from dpspec.certificate.model import (
    Assumption,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Numerics,
    Protected,
    Source,
    TargetCertificate,
)
from dpspec.compiler.common import CompiledTarget
from dpspec.compiler.errors import fail as _fail
from dpspec.families.relational_dpsgd.settings import RelationalSettings
from dpspec.ir import models as ir

_NEGATIVES = {
    "without_replacement": "wor",
    "with_replacement": "with_replacement",
    "in_batch": "in_batch",
    "content_dependent": "content_dependent",
}
_RULE_FIELD = {
    "DPS601": "clipping",
    "DPS602": "sampling",
    "DPS603": "sampling",
    "DPS604": "sampling",
    "DPS605": "sampling",
    "DPS606": "sampling",
    "DPS607": "degree_cap",
    "DPS608": "protect",
    "DPS609": "encoder",
    "DPS610": "split",
    "DPS611": "guarantee",
}


def clipping_mode(c) -> str:
    if isinstance(c, ir.PerTupleClipping):
        return c.threshold
    return "freq" if c.bound == "corrected" else "freq_paper"


def prepare_graph(t: ir.Training, unit_decl, bound):
    """(full graph, split, capped training graph) — deterministic given the spec."""
    st = t.settings_as(RelationalSettings)
    from dpspec.data.bind import load_graph
    from dpspec.relational import cap_degrees, from_graph_dataset, node_disjoint_split

    enc = st.encoder or ir.EncoderSpec(kind="mlp")
    missing = enc.missing_text if enc.kind == "minilm" else "error"
    b = unit_decl.data
    if isinstance(b, ir.NamedData) and bound and isinstance(bound.get(b.name), dict):
        from dpspec.accounting.relational import RelationalSoundnessError

        try:
            g = _from_arrays(b.name, bound[b.name], missing)  # dpspec.compile(spec, data={name: {...}})
        except RelationalSoundnessError:
            raise  # a located rule of its own (DPS608/609)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
            _fail(
                "DPS418",
                f"cannot read the graph `{b.name}` bound at compile time: {e}",
                unit_decl,
                "data",
                hint="bind {'edges': (E, 2) integer node indices, 'features': (n, f) numbers and/or "
                "'texts': n strings, optionally 'num_nodes' and 'labels'}",
            )
        ds = g
    else:
        ds = load_graph(b, bound)
        g = (
            from_graph_dataset(ds, missing_text=missing)
            if enc.kind == "minilm" or ds.features is None
            else _features_only(ds)
        )
    if enc.kind == "minilm" and g.texts is None:
        from dpspec.accounting.relational import RelationalSoundnessError

        raise RelationalSoundnessError(
            f"graph `{ds.name}` has no node texts for the MiniLM encoder",
            rule="DPS609",
            hint="use `encoder mlp(...)` on its features, or a graph with raw text",
        )
    sp = st.split or ir.SplitSpec(kind="node_disjoint")
    split = node_disjoint_split(g, sp.test, seed=sp.seed)
    tr = split.train
    assert st.degree_cap is not None  # (DPS611)
    capped = tr.with_edges(cap_degrees(tr.edges, tr.num_nodes, st.degree_cap, sp.seed))
    return g, split, capped


def _from_arrays(name: str, d: dict, missing: str):
    """A graph given as arrays: ``edges`` (E, 2) node indices, ``features`` (n, f) and/or ``texts``
    (n strings), optional ``num_nodes``. Self-loops, duplicate and dangling edges are DPS608 errors,
    never silently dropped (the node and edge counts enter the accountant)."""
    import numpy as np

    from dpspec import limits
    from dpspec.relational import RelationalGraph

    if "edges" not in d:
        raise ValueError(f"graph `{name}` needs `edges` (an (E, 2) array of node indices)")
    edges = np.asarray(d["edges"])
    if edges.dtype == object or not np.issubdtype(edges.dtype, np.number):
        raise ValueError(f"graph `{name}`: `edges` must be numbers (node indices), got {edges.dtype} values")
    limits.require("records", edges.size // 2 if edges.ndim else 0, f"the number of edges of `{name}`")
    n = d.get("num_nodes")
    if n is None:
        sizes = [len(d[k]) for k in ("features", "texts") if d.get(k) is not None]
        n = sizes[0] if sizes else (int(edges.max()) + 1 if edges.size else 0)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer, float)) or n != n or n != int(n):
        raise ValueError(f"graph `{name}`: `num_nodes` must be a whole number, got {n!r}")
    limits.require("nodes", int(n), f"the number of nodes of `{name}`")
    return RelationalGraph.build(
        int(n), edges, d.get("features"), d.get("texts"), d.get("labels"), name, missing_text=missing
    )


def _features_only(ds):
    from dpspec.relational import RelationalGraph

    return RelationalGraph.build(ds.num_nodes, ds.edges, ds.features, None, ds.labels, ds.name)


def compile_relational(ctx, t: ir.Training, unit_decl, bound):
    st = t.settings_as(RelationalSettings)
    from dpspec.accounting.relational import (
        RelationalConfig,
        RelationalSoundnessError,
        calibrate_relational_sigma,
        certify_relational,
        node_sensitivity,
        overflow_probability,
        tuple_threshold,
    )
    from dpspec.compiler.common import (
        CERTIFIED_SIGMA,
        MAGNITUDE_RANGE,
        _notion,
        _target,
        certified_epsilon,
        target_epsilon,
    )
    from dpspec.data import DataNotFoundError

    g = t.guarantee
    assert isinstance(g, ir.DpGuarantee)  # relational DP-SGD certifies (ε, δ)-DP (DPS611)
    s = st.sampling
    assert isinstance(s, ir.CoupledSampling)  # (DPS605, DPS611)
    clip = st.clipping
    assert isinstance(clip, (ir.PerTupleClipping, ir.FrequencyAdaptiveClipping))  # (DPS611)
    assert st.degree_cap is not None  # (DPS611)
    K = int(st.degree_cap)
    k = int(s.negative.per_positive)
    mode = clipping_mode(st.clipping)
    try:
        full, split, tr = prepare_graph(t, unit_decl, bound)
        m, n = tr.num_edges, tr.num_nodes
        pos = s.positive
        if pos.rate is not None:
            rate = pos.rate
        else:
            assert pos.expected_batch is not None  # a rate or an expected batch (DPS113)
            rate = pos.expected_batch / m
        if rate > 1:
            raise RelationalSoundnessError(
                f"an expected batch of {pos.expected_batch} is larger than the {m} capped training edges",
                rule="DPS606",
                hint=f"use at most {m}",
            )
        negatives = _NEGATIVES[s.negative.scheme] if k > 0 else "none"
        config = RelationalConfig(m, n, rate, K, k, mode, negatives, "poisson")
        config.validate()
        if t.schedule.steps is not None:
            steps = int(t.schedule.steps)
        else:
            assert t.schedule.epochs is not None  # steps or epochs (DPS611)
            steps = max(1, math.ceil(t.schedule.epochs / rate))
        p_over = overflow_probability(config, steps)
        delta_acc = g.delta - p_over
        if not delta_acc > 0:
            raise RelationalSoundnessError(
                f"NEG-SAMPLE-WOR overflows (k_neg·|B+| > n) with probability {p_over:.3g} ≥ δ = {g.delta:g}",
                rule="DPS606",
                hint="use a smaller batch or fewer negatives per positive",
            )
        recorded = CERTIFIED_SIGMA.get().get(t.name) if st.noise is None else None
        if recorded is not None:  # verify: one evaluation at the certified σ, the search is not repeated
            lo, hi = MAGNITUDE_RANGE  # as for a σ written in a spec (DPS205): never fed to the accountant
            if not (isinstance(recorded, float) and lo <= recorded <= hi):
                _fail(
                    "DPS205",
                    f"the certificate's σ = {recorded!r} is outside the range dpspec computes in ([{lo:g}, {hi:g}])",
                    t,
                    "guarantee",
                    hint="recompile the spec",
                )
            sigma, calibrated = recorded, True
        elif st.noise is None:
            try:
                from dpspec.progress import progress

                with progress(desc="relational σ search", unit="eval") as bar:
                    sigma = calibrate_relational_sigma(target_epsilon(g), delta_acc, config, steps, on_eval=bar.update)
            except RelationalSoundnessError:
                raise
            except ValueError as e:
                _fail(
                    "DPS202",
                    f"cannot reach the target: {e}",
                    t,
                    "guarantee",
                    hint="raise epsilon, train for fewer steps, or sample a smaller fraction of edges per step",
                )
            calibrated = True
        else:
            nz = st.noise  # noise_multiplier σ, or the std σ·C of the noise on the clipped sum
            if nz.noise_multiplier is not None:
                sigma = float(nz.noise_multiplier)
            else:
                assert nz.sigma is not None  # (one of the two)
                sigma = float(nz.sigma) / float(clip.C)
            calibrated = False
        res = certify_relational(config, sigma, steps, delta_acc)  # one evaluation at σ (verify can redo it)
        sens = node_sensitivity(mode, K, k, negatives)
        thr = tuple_threshold(mode, K, k, negatives)
    except RelationalSoundnessError as e:
        _fail(e.rule, e.message, t, _RULE_FIELD.get(e.rule, "guarantee"), hint=e.hint)
    except DataNotFoundError:
        raise
    except ValueError as e:
        _fail(
            "DPS611",
            f"the relational DP-SGD configuration is invalid: {e}",
            t,
            "sampling",
            hint="fix the value the message names (`dpspec rules DPS611`)",
        )
    eps = certified_epsilon(res.dp.epsilon)  # never 0 for a node's nonzero sensitivity
    if calibrated and eps > target_epsilon(g):
        _fail(
            "DPS201",
            f"certified ε = {eps:.6g} exceeds the target {g.epsilon:g}",
            t,
            "guarantee",
            hint="raise epsilon or train for fewer steps",
        )
    C = float(clip.C)
    protected = Protected(
        definition=unit_decl.name,
        unit="node",
        relation="add_remove",
        description=(
            f"a node of the training graph after degree capping at K = {K} (from graph `{full.name}`: {n} training "
            f"nodes, {m} capped edges), with its at most {K} capped edges (insertion or removal) — not a node of "
            f"`{full.name}` itself (see the scope)"
        ),
    )
    cands = {name: float(a.epsilon) for name, a in res.accountants.items()}
    guarantee = GuaranteeRecord(
        target=_target(g),
        rdp_alphas=[float(a) for a in res.curve.alphas],
        rdp_epsilons=[float(x) for x in res.curve.rdp],
        dp=[DpPoint(epsilon=eps, delta=g.delta)],
        best_alpha=float(res.dp.best_alpha),
        epsilon=eps,
        delta=g.delta,
        theorems=sorted({a.curve.theorem for a in res.accountants.values()})
        + ["Balle et al. 2020 Thm 21 (RDP to (ε, δ))"],
    )
    params = {
        "noise_multiplier": sigma,
        "clip_norm": C,
        "noise_std": sigma * C,
        "clipping": mode,
        "tuple_threshold": (thr * C) if thr is not None else "frequency-adaptive",
        "node_sensitivity": sens * C,
        "degree_cap": K,
        "negatives_per_positive": k,
        "negatives": negatives,
        "sample_rate": rate,
        "expected_batch": rate * m,
        "steps": steps,
        "num_nodes": n,
        "num_edges": m,
        "test_nodes": int(split.test.num_nodes),
        "dropped_cross_edges": int(split.dropped_cross_edges),
        "accountant": res.best,
        "overflow_probability": p_over,
        "delta_accounted": delta_acc,
        "learning_rate": t.schedule.learning_rate or 1e-3,
        "loss": (st.loss.kind if st.loss else "infonce"),
        "encoder": (st.encoder.kind if st.encoder else "mlp"),
        **{f"epsilon_{nm}": v for nm, v in cands.items()},
    }
    asm = [
        Assumption(
            id="scope_original_graph",
            statement=(
                f"what this means for `{full.name}`: the bound compares two capped training graphs that differ in one "
                f"node and at most K = {K} of its edges. Capping keeps edges greedily in a seeded order, so removing a "
                f"node of `{full.name}` itself can change which edges other nodes keep: two graphs that differ in one "
                "node before capping may differ in more than K capped edges. The certificate "
                "therefore bounds the privacy of a node of the capped training graph, not of a "
                f"node of `{full.name}`; the {int(split.test.num_nodes)} held-out test nodes are not in the training "
                "graph at all"
            ),
            source=Source(
                paper="Huang et al. 2025", ref="Alg. 3 'Initialize' (degree capping, not analysed for stability)"
            ),
        ),
        Assumption(
            id="public_counts",
            statement="the node and edge counts of the capped training graph are public",
            source=Source(paper="Huang et al. 2025", ref="§4 (m, n enter Eq. (3))"),
        ),
        Assumption(
            id="degree_cap",
            statement=f"degrees are capped at K = {K} before training; removing a node changes at most K capped edges",
            source=Source(paper="Daigavane et al. 2022", ref="degree capping"),
        ),
        Assumption(
            id="poisson_positives",
            statement="each capped edge is a positive independently with probability "
            "rate; negatives are k_neg distinct nodes per positive drawn without replacement (Alg. 2), so a "
            "node is a negative of at most one tuple",
            source=Source(paper="Huang et al. 2025", ref="Alg. 2, Thm 3"),
        ),
        Assumption(
            id="noise_once",
            statement="N(0, σ²C²I) is added once per step to the sum of clipped per-tuple "
            "gradients, divided by the expected batch size; the optimizer is post-processing",
            source=Source(paper="Huang et al. 2025", ref="Alg. 3"),
        ),
    ]
    warnings = [f"accountant: {res.statement}"]
    warnings += [f"{nm} not used: {why}" for nm, why in res.rejected.items()]
    if mode == "freq":
        warnings.append(
            "FREQ-CLIP is certified with the corrected node sensitivity "
            f"{sens:g}·C (dpspec derivation), not Prop 4.1's C (DPS601)"
        )
    if p_over > 0:
        warnings.append(
            f"NEG-SAMPLE-WOR overflow probability {p_over:.3g} over the run is paid from δ "
            f"(accounted at δ − p = {delta_acc:.6g})"
        )
    iso = int(full.report.get("isolated_nodes", 0)) if hasattr(full, "report") else 0
    if iso:
        warnings.append(
            f"{iso} isolated node(s) are kept: they count in n and can be drawn as negatives, never as positives"
        )
    warnings.append("hyper-parameters chosen by looking at the private graph are not covered by this certificate")
    numerics = Numerics(
        method="pointwise minimum of the valid accountants' RDP curves (exact sums / quadrature with stated error)",
        abs_error_bound=float(np.max(res.curve.abs_errors)) if len(res.curve.abs_errors) else 0.0,
        alpha_grid=f"{len(res.curve.alphas)} orders {res.curve.alphas[0]:g}…{res.curve.alphas[-1]:g}",
        conversion="Balle et al. 2020 Thm 21",
        calibration=(
            "Illinois search on σ against every valid accountant (relative tolerance 2e-3), the verified "
            "upper end is used"
            if calibrated
            else "σ given; ε reported"
        ),
    )
    from dpspec.compiler import formulas as F
    from dpspec.families.relational_dpsgd import formulas as own

    a_best = float(res.dp.best_alpha)
    formulas = [
        F.formula(
            "naive_cap",
            own.NAIVE_CAP,
            {"T": steps, "alpha": a_best, "sens": sens, "sigma": sigma},
            value=steps * a_best * sens * sens / (2 * sigma * sigma),
            check="close",
        )
    ]
    record = TargetCertificate(
        name=t.name,
        kind="train",
        protected=protected,
        notion=_notion(g),
        mechanism=MechanismRecord(
            name="relational_dpsgd",
            description=(
                "coupled sampling (Poisson positives over capped edges, NEG-SAMPLE-WOR negatives), per-tuple clipping, "
                "Gaussian noise once per step"
            ),
            parameters=params,
            calibrated=calibrated,
        ),
        guarantee=guarantee,
        assumptions=asm,
        formulas=formulas,
        numerics=numerics,
        warnings=warnings,
    )
    from dpspec.families.relational_dpsgd.runtime import RelationalMechanism

    mech = RelationalMechanism(
        name=t.name,
        graph=full,
        split=split,
        train_graph=tr,
        sigma=sigma,
        clip=C,
        clipping=mode,
        degree_cap=K,
        negatives_per_positive=k,
        rate=rate,
        steps=steps,
        learning_rate=t.schedule.learning_rate or 1e-3,
        loss=(st.loss.kind if st.loss else "infonce"),
        encoder=st.encoder or ir.EncoderSpec(kind="mlp", hidden=256),
        negatives=negatives,
        delta=g.delta,
        num_edges=m,
        num_nodes=n,
    )
    return record, mech


def compile_target(ctx, t: ir.Training, data):
    """The family's compile function (dpspec.families): a CompiledTarget for ``t``."""
    from dpspec.data import DataNotFoundError

    d = ctx.resolve_protects(t)
    try:
        record, mech = compile_relational(ctx, t, d, data)
    except DataNotFoundError as e:
        _fail(
            "DPS419",
            f"the graph of `{d.name}` is not available: {e}",
            d,
            "data",
            hint="set DPSPEC_DATA_DIR to the folder holding the datasets",
        )
    return CompiledTarget(t.name, "train", record, mech)
