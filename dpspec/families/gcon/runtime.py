"""The runtime GCON mechanism as compiled from a spec (Wei et al., GCON, Alg. 1 and Alg. 4).

``train()`` loads the graph named by the spec (or the one bound at compile time, or takes one), fits the edge-free
encoder on the
public features and the training labels, row-normalises, and calls ``dpspec.families.gcon.trainer.train_gcon`` with
exactly the calibrated configuration of the certificate: β and the AMP noise are recomputed from
the public quantities of the graph it is given and must equal the certificate's *before* anything
is drawn (:class:`~dpspec.mechanisms.ledger.DataMismatchError` otherwise). The result predicts
with private-graph inference (each node's own 1-hop only) or public-graph inference, as the spec says.

GCON is one-shot: the certificate covers one release of Θ. The privacy ledger has a budget of one
release, charged before the noise is drawn; a second ``train()`` on the same object raises
:class:`~dpspec.mechanisms.ledger.BudgetExceededError`. ``privacy_spent()`` is 0 before the release
and the certificate's (ε, δ) after it, marked ``exact_for_run = False``: there are no intermediate
steps to account for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpspec.mechanisms.ledger import DataMismatchError, LedgerOwner, PrivacyLedger, Spent, fingerprint


@dataclass(frozen=True)
class GconMechanism(LedgerOwner):
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
    amp_fraction: float = 0.01
    grad_tol: float = 1e-9
    # the certificate's guarantee (ε, δ) of the release
    certified_epsilon: float | None = None
    certified_delta: float | None = None
    ledger: PrivacyLedger = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        fp = fingerprint(
            mechanism="gcon",
            epsilon=self.epsilon,
            delta=self.delta,
            beta=self.certified_beta,
            amp_sigma=self.certified_amp_sigma,
            restart=self.restart,
            steps=list(map(str, self.steps)),
        )
        object.__setattr__(
            self, "ledger", PrivacyLedger(self.spec_name, 1, self._spent, unit="release", fingerprint=fp)
        )

    def _spent(self, releases: int, delta: float | None) -> Spent:
        eps = self.certified_epsilon if self.certified_epsilon is not None else self.epsilon
        dl = self.certified_delta if self.certified_delta is not None else self.delta
        if delta is not None and delta < dl:
            raise ValueError(
                f"`{self.spec_name}`: GCON certifies (ε, δ) at δ = {dl:g} only (objective perturbation "
                "gives no curve); ask at δ ≥ that"
            )
        note = (
            "one-shot mechanism: nothing released yet"
            if releases == 0
            else "one-shot mechanism: the certificate's (ε, δ) for its single release; there are no intermediate steps"
        )
        return Spent(
            target=self.spec_name,
            notion="approximate_dp",
            steps=releases,
            budget_steps=1,
            epsilon=0.0 if releases == 0 else float(eps),
            delta=float(dl),
            exact_for_run=False,
            note=note,
            accountant="Wei et al. 2024 Thm 1 + Iyengar et al. 2019 Alg. 1 (one release)",
        )

    def config(self):
        from dpspec.families.gcon.trainer import GconConfig

        return GconConfig(
            epsilon=self.epsilon,
            delta=self.delta,
            restart=self.restart,
            steps=self.steps,
            regularization=self.regularization,
            loss=self.loss,
            huber_delta=self.huber_delta,
            amp_fraction=self.amp_fraction,
            grad_tol=self.grad_tol,
        )

    def _check_calibration(self, p: dict) -> None:
        """β and the AMP σ of the graph at hand must be the certificate's (public quantities only)."""
        from dpspec.accounting.gcon import gcon_release_calibration

        cfg = self.config()
        cal = gcon_release_calibration(
            cfg.epsilon,
            cfg.delta,
            p["classes"],
            p["dim"],
            p["num_train"],
            cfg.restart,
            list(p["steps"]),
            cfg.regularization,
            loss=cfg.loss,
            huber_delta=cfg.huber_delta,
            amp_fraction=cfg.amp_fraction,
            grad_tol=cfg.grad_tol,
        )
        beta, amp = cal["objective_perturbation"]["beta"], cal["amp"]["sigma"]
        if (
            abs(beta - self.certified_beta) > 1e-9 * self.certified_beta
            or abs(amp - self.certified_amp_sigma) > 1e-9 * self.certified_amp_sigma
        ):
            raise DataMismatchError(
                f"`{self.spec_name}`: this graph gives β = {beta} and AMP σ = {amp} ({p['classes']} classes, "
                f"{p['num_train']} loss nodes, dimension {p['dim']}), the certificate β = {self.certified_beta} and "
                f"σ = {self.certified_amp_sigma}: it is not the graph the certificate was compiled for"
            )

    def train(self, dataset=None, *, rng=None, encoder_cache: dict | None = None):
        """Train and release (returns a ``dpspec.families.gcon.trainer.GconResult`` plus the test indices).
        Once per object.

        ``encoder_cache``: a dict the caller keeps across runs on the same dataset (a tuning's runs, a benchmark's
        candidates) so the edge-free encoder is fitted once per (encoder settings, training nodes): it reads no
        edge and is deterministic given its seed, so reusing it changes nothing the certificate covers."""
        from dpspec.data.bind import load_graph
        from dpspec.families.gcon.encoder import MLPEncoder, normalise_rows, tfidf_features
        from dpspec.families.gcon.graph import Graph
        from dpspec.families.gcon.plan import plan
        from dpspec.families.gcon.settings import GconSettings
        from dpspec.families.gcon.trainer import train_gcon
        from dpspec.ir import models as ir

        self.ledger.require(1)
        ds = (
            dataset
            if dataset is not None
            else self.bound_graph
            if self.bound_graph is not None
            else load_graph(self.graph)
        )
        t = ir.Training(
            name=self.spec_name,
            protects="",
            mechanism="gcon",
            guarantee=ir.DpGuarantee(epsilon=self.epsilon, delta=self.delta),
            settings=GconSettings(
                propagation=ir.Propagation(restart=self.restart, steps=self.steps),
                encoder=self.encoder,
                pseudo_labels=self.pseudo_labels,
                split=self.split,
            ),
        )
        p = plan(t, ds)
        self._check_calibration(p)
        raw = ds.features if ds.features is not None else tfidf_features(ds.texts, max_features=3000)[0]
        X0 = normalise_rows(raw, zero_rows="uniform")
        if self.encoder.kind == "mlp":
            key = (self.encoder.hidden, self.encoder.epochs, self.encoder.seed, tuple(p["train_idx"].tolist()))
            got = None if encoder_cache is None else encoder_cache.get(key)
            if got is None:
                enc = MLPEncoder(
                    hidden=self.encoder.hidden, output="logits", epochs=self.encoder.epochs, seed=self.encoder.seed
                ).fit(X0, ds.labels, p["train_idx"])
                got = (normalise_rows(enc.transform(X0), zero_rows="uniform"), enc.predict(X0))
                if encoder_cache is not None:
                    encoder_cache[key] = got
            X = got[0]
            pl = got[1] if self.pseudo_labels else None
        else:
            X = X0.toarray() if hasattr(X0, "toarray") else np.asarray(X0)
            pl = None
        graph = Graph.from_edges(ds.num_nodes, ds.edges)
        self.ledger.charge(1)  # the one release, charged before its noise is drawn
        res = train_gcon(graph, X, ds.labels, p["train_idx"], self.config(), pseudo_labels=pl, rng=rng)
        beta = res.calibration["beta"]
        if abs(beta - self.certified_beta) > 1e-9 * self.certified_beta:  # the same check, after the fact
            raise DataMismatchError(
                f"runtime calibration β = {beta} differs from the certificate's {self.certified_beta}"
            )
        return GconRun(res, graph, X, ds.labels, p["test_idx"], self.inference, p["val_idx"])


@dataclass
class GconRun:
    result: Any
    graph: Any
    features: np.ndarray
    labels: np.ndarray
    test_idx: np.ndarray
    inference: str
    #: the split's validation nodes (public, disjoint from the training and test nodes)
    val_idx: np.ndarray | None = None

    def predict(self) -> np.ndarray:
        mode = "private" if self.inference == "private_graph" else "public"
        return self.result.predict(self.graph, self.features, mode=mode)

    def validation_values(self) -> np.ndarray:
        """Per validation node, 1.0 if its prediction is correct, else 0.0: the private score of a ``tune``
        block (``score_fn=lambda run: run.validation_values()``). With private-graph inference node v's value
        reads only Θ, the public features and labels and v's own edges, so one edge changes at most two values
        (``dpspec.families.gcon.tuning:tune_score``); with public-graph inference it is refused."""
        if self.inference != "private_graph":
            raise ValueError(
                "a private validation score needs private-graph inference (each node reads only its own edges)"
            )
        if self.val_idx is None:
            raise ValueError("this run has no validation nodes")
        pred = self.predict()
        return (pred[self.val_idx] == self.labels[self.val_idx]).astype(float)

    def test_accuracy(self) -> float:
        pred = self.predict()
        return float(np.mean(pred[self.test_idx] == self.labels[self.test_idx]))


#: the family's runtime class (``Family.runtime``, read from this folder)
Runtime = GconMechanism
