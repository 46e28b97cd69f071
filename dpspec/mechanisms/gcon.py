"""The runtime GCON mechanism as compiled from a spec (Wei et al., GCON, Alg. 1 and Alg. 4).

``train()`` loads the graph named by the spec (or the one bound at compile time, or takes one), fits the edge-free encoder on the
public features and the training labels, row-normalises, and calls ``dpspec.gcon.train_gcon`` with
exactly the calibrated configuration of the certificate (it checks that β and the AMP noise match).
The result predicts with private-graph inference (each node's own 1-hop only) or public-graph
inference, as the spec says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GconMechanism:
    spec_name: str
    epsilon: float
    delta: float
    restart: float
    steps: tuple
    regularization: float
    loss: str
    huber_delta: float | None
    encoder: Any  # ir.EncoderSpec
    pseudo_labels: bool
    split: Any  # ir.SplitSpec
    inference: str
    graph: Any  # ir data binding
    certified_beta: float
    certified_amp_sigma: float
    # the graph bound with `dpspec.compile(spec, data={name: ...})`: train() uses it, as certified
    bound_graph: Any = field(default=None, compare=False, repr=False)

    def config(self):
        from dpspec.compiler.gcon_train import AMP_FRACTION, GRAD_TOL
        from dpspec.gcon import GconConfig

        return GconConfig(epsilon=self.epsilon, delta=self.delta, restart=self.restart, steps=self.steps,
                          regularization=self.regularization, loss=self.loss, huber_delta=self.huber_delta,
                          amp_fraction=AMP_FRACTION, grad_tol=GRAD_TOL)

    def train(self, dataset=None, *, rng=None):
        """Train and release (returns a ``dpspec.gcon.GconResult`` plus the test indices)."""
        from dpspec.compiler.gcon_train import load_graph, plan
        from dpspec.gcon import Graph, MLPEncoder, normalise_rows, tfidf_features, train_gcon
        from dpspec.ir import models as ir

        ds = dataset if dataset is not None else self.bound_graph if self.bound_graph is not None \
            else load_graph(self.graph)
        t = ir.Training(name=self.spec_name, protects="", mechanism="gcon", guarantee=ir.DpGuarantee(
            epsilon=self.epsilon, delta=self.delta), propagation=ir.Propagation(restart=self.restart, steps=self.steps),
            encoder=self.encoder, pseudo_labels=self.pseudo_labels, split=self.split)
        p = plan(t, ds)
        raw = ds.features if ds.features is not None else tfidf_features(ds.texts, max_features=3000)[0]
        X0 = normalise_rows(raw, zero_rows="uniform")
        if self.encoder.kind == "mlp":
            enc = MLPEncoder(hidden=self.encoder.hidden, output="logits", epochs=self.encoder.epochs,
                             seed=self.encoder.seed).fit(X0, ds.labels, p["train_idx"])
            X = normalise_rows(enc.transform(X0), zero_rows="uniform")
            pl = enc.predict(X0) if self.pseudo_labels else None
        else:
            X = X0.toarray() if hasattr(X0, "toarray") else np.asarray(X0)
            pl = None
        graph = Graph.from_edges(ds.num_nodes, ds.edges)
        res = train_gcon(graph, X, ds.labels, p["train_idx"], self.config(), pseudo_labels=pl, rng=rng)
        beta = res.calibration["beta"]
        if abs(beta - self.certified_beta) > 1e-9 * self.certified_beta:
            raise RuntimeError(f"runtime calibration β = {beta} differs from the certificate's {self.certified_beta}")
        return GconRun(res, graph, X, ds.labels, p["test_idx"], self.inference)


@dataclass
class GconRun:
    result: Any
    graph: Any
    features: np.ndarray
    labels: np.ndarray
    test_idx: np.ndarray
    inference: str

    def predict(self) -> np.ndarray:
        mode = "private" if self.inference == "private_graph" else "public"
        return self.result.predict(self.graph, self.features, mode=mode)

    def test_accuracy(self) -> float:
        pred = self.predict()
        return float(np.mean(pred[self.test_idx] == self.labels[self.test_idx]))
