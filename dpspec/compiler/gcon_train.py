"""Compile a `train` block with `mechanism gcon` (Wei et al., GCON, Thm 1) protecting an edge unit.

The calibration depends only on public quantities — ε, δ, the number of classes c, the feature
dimension d = (#depths) · d1, the number of loss nodes n1, the restart α, the depths and Λ — so the
compiler computes it (and the certificate states it) without reading a single edge. The runtime
mechanism then fits the edge-free encoder, propagates over the private graph, solves the perturbed
objective to a certified gradient norm and adds the approximate-minimiser noise (Iyengar et al. 2019
Alg. 1) paid from a 1 % share of (ε, δ); it refuses to release if the solver certificate fails.
"""

from __future__ import annotations

import math

import numpy as np

from dpspec import limits
from dpspec.certificate.model import (
    Assumption,
    DpPoint,
    GuaranteeRecord,
    MechanismRecord,
    Notion,
    Numerics,
    Protected,
    Source,
    TargetCertificate,
)
from dpspec.compiler.errors import fail as _fail
from dpspec.ir import models as ir

AMP_FRACTION = 0.01
GRAD_TOL = 1e-9


def load_graph(binding, bound: dict | None = None):
    """GraphDataset for ``graph cora|citeseer``, ``synthetic(generator = sbm_graph, ...)`` or a bound one."""
    from dpspec.data import graphs
    from dpspec.data.synthetic import generate_graph

    if isinstance(binding, ir.SyntheticData):
        return generate_graph(binding.generator, binding.size, binding.seed)
    name = binding.name
    if bound and name in bound:
        g = bound[name]
        if isinstance(g, dict):
            return graph_from_arrays(name, g)
        if not isinstance(g, graphs.GraphDataset):  # a list, a string, ...: caught here, not deep inside
            raise ValueError(f"the graph `{name}` bound at compile time is a {type(g).__name__}, not a "
                             "dpspec.data.graphs.GraphDataset or a dict of arrays")
        return g
    loaders = {"cora": graphs.load_cora, "citeseer": graphs.load_citeseer}
    if name not in loaders:
        raise ValueError(f"unknown graph `{name}`; built in: {', '.join(loaders)} (or bind one at compile time)")
    return loaders[name]()


def graph_from_arrays(name: str, d: dict):
    """``dpspec.compile(spec, data={name: {"edges": E, "features": X, "labels": y}})`` as a GraphDataset.

    ``edges``: (E, 2) node indices, each undirected edge once; ``features`` (n, f) or ``texts`` (n
    strings); ``labels`` (n,) class labels, -1 for an unlabelled node; optional ``num_nodes``. The
    node count, edges and labels enter the calibration, so self-loops, repeated or reversed pairs and
    indices outside the nodes are errors, never silently dropped (as for relational graphs, DPS608).
    """
    import scipy.sparse as sp

    from dpspec.data.graphs import GraphDataset, LoadReport, canonical_edges

    for key in ("edges", "labels"):
        if d.get(key) is None:
            raise ValueError(f"graph `{name}` needs `{key}`" + (" (an (E, 2) array of node indices)" if key == "edges"
                                                                else " (one class label per node, -1 if unlabelled)"))
    features, texts = d.get("features"), d.get("texts")
    if features is None and texts is None:
        raise ValueError(f"graph `{name}` needs `features` (an (n, f) array) or `texts` (n strings)")
    try:
        labels = np.asarray(d["labels"])
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"`labels` of graph `{name}` is not an array: {e}") from None
    if labels.ndim != 1 or labels.dtype.kind not in "iu" or (labels.size and labels.min() < -1):
        raise ValueError(f"`labels` of graph `{name}` must be a 1-d array of integer classes (-1: unlabelled)")
    n = d.get("num_nodes")
    if n is None:
        n = len(labels)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < int(n):
        raise ValueError(f"`num_nodes` of graph `{name}` must be a positive whole number, got {n!r:.40}")
    n = int(n)
    limits.require("nodes", n, f"nodes of graph `{name}`")
    if texts is not None and (isinstance(texts, (str, bytes)) or not hasattr(texts, "__len__")
                              or not all(isinstance(x, str) for x in texts)):
        raise ValueError(f"`texts` of graph `{name}` must be a list of strings, one per node")
    try:
        edges = np.asarray(d["edges"])
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"`edges` of graph `{name}` is not an array: {e}") from None
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "iu":
        raise ValueError(f"`edges` of graph `{name}` must be an (E, 2) integer array, got shape {edges.shape} "
                         f"of {edges.dtype}")
    if features is not None:
        try:
            features = sp.csr_matrix(features, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"`features` of graph `{name}` is not an (n, f) numeric array: {e}") from None
        if features.nnz and not np.all(np.isfinite(features.data)):
            raise ValueError(f"`features` of graph `{name}` has NaN or infinite values")
    for what, rows in (("labels", len(labels)), ("features", None if features is None else features.shape[0]),
                       ("texts", None if texts is None else len(texts))):
        if rows is not None and rows != n:
            raise ValueError(f"graph `{name}` has {n} nodes but {rows} rows of {what}")
    report = LoadReport(node_lines=n, nodes=n)
    canon = canonical_edges([(str(a), str(b)) for a, b in edges.tolist()], {str(i): i for i in range(n)}, report)
    bad = {"self-loops": report.self_loops, "repeated pairs": report.duplicate_lines,
           "reversed repeats of an edge": report.reciprocal_merged, "edges to a node outside 0..n-1": report.dangling_lines}
    found = ", ".join(f"{k} {what}" for what, k in bad.items() if k)
    if found:
        raise ValueError(f"graph `{name}` has {found}; give each undirected edge once, between two different "
                         f"nodes in 0..{n - 1} (they change the edge count the guarantee is about)")
    classes = int(labels.max()) + 1 if labels.size else 0
    return GraphDataset(name=name, node_ids=[str(i) for i in range(n)], labels=labels.astype(np.int64),
                        label_names=[str(k) for k in range(classes)], edges=canon, features=features,
                        texts=None if texts is None else list(texts), report=report)


def plan(t: ir.Training, ds) -> dict:
    """Public quantities the calibration needs: classes, loss nodes, dimension, the split."""
    from dpspec.data.graphs import planetoid_split

    split = t.split or ir.SplitSpec()
    train_idx, _val, test_idx = planetoid_split(ds.labels, per_class=split.per_class, seed=split.seed)
    c = int(ds.num_classes)
    enc = t.encoder or ir.EncoderSpec(kind="mlp")
    d1 = c if enc.kind == "mlp" else int(ds.features.shape[1]) if ds.features is not None else None
    if d1 is None:
        _fail("DPS726", f"graph `{ds.name}` has raw text, not features: it needs an encoder", t, "encoder",
              hint="use `encoder mlp(...)` (a TF-IDF of the text feeds the encoder)")
    steps = list(t.propagation.steps)
    n1 = int(ds.num_nodes) if t.pseudo_labels else int(len(train_idx))
    return {"classes": c, "d1": d1, "dim": len(steps) * d1, "num_train": n1, "train_idx": train_idx,
            "test_idx": test_idx, "steps": steps}


def compile_gcon(ctx, t: ir.Training, unit_decl: ir.PrivacyUnitDecl, bound):
    from dpspec.accounting.gcon import GCON_ASSUMPTIONS, GconError, gcon_release_calibration
    from dpspec.data import DataNotFoundError

    g = t.guarantee
    if unit_decl.data is None:
        _fail("DPS726", f"`{unit_decl.name}` names no graph", unit_decl, hint="add `graph cora` to the privacy block")
    try:
        ds = load_graph(unit_decl.data, bound)
    except DataNotFoundError:
        raise
    except (ValueError, KeyError) as e:
        _fail("DPS418", f"cannot load the graph: {e}", unit_decl, "data",
              hint="name a built-in graph (`graph cora`, `graph citeseer`), a generated one, or bind a graph at "
                   "compile time")
    p = plan(t, ds)
    loss = t.loss.kind if t.loss else "msml"
    try:
        cal = gcon_release_calibration(g.epsilon, g.delta, p["classes"], p["dim"], p["num_train"],
                                       t.propagation.restart, p["steps"], t.regularization, loss=loss,
                                       huber_delta=t.loss.delta if t.loss else None,
                                       amp_fraction=AMP_FRACTION, grad_tol=GRAD_TOL)
    except GconError as e:
        field = {"DPS705": "propagation", "DPS706": "propagation", "DPS707": "regularization", "DPS703": "loss",
                 "DPS704": "loss", "DPS725": "loss", "DPS711": "encoder"}.get(e.rule, "guarantee")
        _fail(e.rule, e.message, t, field, hint=e.hint)
    op, amp = cal["objective_perturbation"], cal["amp"]
    record = _certificate(t, unit_decl, ds, p, cal, op, amp, GCON_ASSUMPTIONS)
    from dpspec.mechanisms.gcon import GconMechanism

    mech = GconMechanism(spec_name=t.name, epsilon=g.epsilon, delta=g.delta, restart=t.propagation.restart,
                         steps=tuple(p["steps"]), regularization=t.regularization, loss=loss,
                         huber_delta=t.loss.delta if t.loss else None, encoder=t.encoder or ir.EncoderSpec(kind="mlp"),
                         pseudo_labels=bool(t.pseudo_labels), split=t.split or ir.SplitSpec(),
                         inference=t.inference or "private_graph", graph=unit_decl.data,
                         certified_beta=op["beta"], certified_amp_sigma=amp["sigma"], amp_fraction=AMP_FRACTION,
                         grad_tol=GRAD_TOL, certified_epsilon=cal["epsilon_total"], certified_delta=cal["delta_total"],
                         bound_graph=ds if isinstance(unit_decl.data, ir.NamedData) else None)
    return record, mech


def _certificate(t, unit_decl, ds, p, cal, op, amp, assumptions) -> TargetCertificate:
    from dpspec.compiler import formulas as F

    g = t.guarantee
    protected = Protected(definition=unit_decl.name, unit="edge", description=(
        f"one undirected edge of graph `{ds.name}` (insertion or removal) among its {ds.num_nodes} nodes — the "
        "edge set is private; the node set, every node's features and labels are public and identical in both "
        "neighbouring graphs (see the scope)"))
    params = {
        "beta": op["beta"], "regularization": op["regularization"], "extra_regularization": op["extra_regularization"],
        "sensitivity_psi": op["sensitivity"], "c_sf": op["c_sf"], "c_theta": op["c_theta"],
        "epsilon_lambda": op["epsilon_lambda"], "expected_noise_norm": op["expected_noise_norm"],
        "amp_sigma": amp["sigma"], "grad_tol": GRAD_TOL, "amp_fraction": AMP_FRACTION,
        "restart": t.propagation.restart, "steps": ",".join(str(s) for s in p["steps"]),
        "classes": p["classes"], "dimension": p["dim"], "loss_nodes": p["num_train"], "loss": op["loss"],
        "pseudo_labels": bool(t.pseudo_labels), "inference": t.inference or "private_graph",
        "nodes": int(ds.num_nodes),
    }
    guarantee = GuaranteeRecord(
        target={"notion": "dp", "epsilon": g.epsilon, "delta": g.delta},
        dp=[DpPoint(epsilon=cal["epsilon_total"], delta=cal["delta_total"])],
        epsilon=cal["epsilon_total"], delta=cal["delta_total"],
        theorems=["Wei et al. 2024 Thm 1 (objective perturbation, edge DP)",
                  "Iyengar et al. 2019 Alg. 1 (approximate minima perturbation)",
                  "Balle & Wang 2018 Thm 8 (analytic Gaussian)", "Dwork & Roth 2014 Thm B.1 (composition)"],
    )
    c1, c2 = op["c1"], op["c2"]
    formulas = [
        F.formula("beta_eq18", F.GCON_BETA,
                  {"epsilon": op["epsilon"], "epsL": op["epsilon_lambda"], "omega": op["budget_split"],
                   "c": p["classes"], "c1": c1, "c2": c2, "ctheta": op["c_theta"], "Psi": op["sensitivity"]},
                  value=op["beta"], check="close"),
        F.formula("c_theta_eq23", F.GCON_C_THETA,
                  {"n1": p["num_train"], "omega": op["budget_split"], "epsilon": op["epsilon"], "c1": c1, "c2": c2,
                   "c": p["classes"], "Psi": op["sensitivity"], "csf": op["c_sf"], "Lam": op["regularization"]},
                  value=op["c_theta"], check="close"),
    ]
    warnings = [w if isinstance(w, str) else f"[{w.get('rule', '')}] {w.get('message', w)}" for w in op["warnings"]]
    warnings.append("hyper-parameters (restart, depths, Λ, loss, encoder, pseudo-labels) chosen by looking at the "
                    "private graph are not covered by this certificate (DPS721)")
    if t.pseudo_labels:
        warnings.append("pseudo-labels come from the edge-free encoder and use every node's public features; "
                        "covered because GCON treats features and labels as public (DPS722)")
    if (t.inference or "private_graph") == "private_graph":
        warnings.append("private-graph inference: each node's prediction uses only its own 1-hop neighbourhood "
                        "and must be returned to that node only (DPS723)")
    else:
        warnings.append("public-graph inference: the graph used at inference time must be public")
    numerics = Numerics(
        method=("closed-form chain F4–F11 (eqs. (17)–(24)); c_sf = Gamma(d) upper quantile, rounded up and "
                "re-verified; solver stops at a certified gradient norm ≤ 1e-9 (Higham rounding bound)"),
        abs_error_bound=0.0, alpha_grid="not applicable (objective perturbation gives (ε, δ) directly)",
        conversion=None, calibration=f"(1 − {AMP_FRACTION})(ε, δ) for Thm 1, {AMP_FRACTION}(ε, δ) for the AMP noise")
    asm = [Assumption(id=a["id"], statement=a["text"], source=Source(paper=a["source"].split(",")[0],
                                                                        ref=",".join(a["source"].split(",")[1:]).strip()))
           for a in assumptions]
    asm.insert(0, Assumption(id="scope_public_attributes", statement=(
        f"what is not protected: the nodes of `{ds.name}`, their features and labels are treated as public (eq. (8)); "
        "the guarantee covers the released parameters Θ (and each node's private-graph prediction, returned to that "
        "node only), and says nothing about a node's attributes or membership"),
        source=Source(paper="Wei et al. 2024", ref="§III (edge-level DP, public node attributes)")))
    return TargetCertificate(
        name=t.name, kind="train", protected=protected,
        notion=Notion(name="approximate_dp", description="(ε, δ)-edge differential privacy"),
        mechanism=MechanismRecord(name="gcon", description="objective perturbation of a linear model on "
                                  "PPR-propagated features; Erlang-radius noise in the objective plus Gaussian "
                                  "output noise for the solver residual", parameters=params, calibrated=True),
        guarantee=guarantee, assumptions=asm, formulas=formulas, numerics=numerics, warnings=warnings)
