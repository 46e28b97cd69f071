"""Runtime object of a compiled `relational_dpsgd` training (torch imported on first use).

It holds the split and the degree-capped training graph the certificate was computed on, and the
certified σ, clip, degree cap, sampling rate and normaliser (the expected batch rate·m);
:meth:`RelationalMechanism.trainer` builds the Alg. 3 trainer
(:class:`dpspec.relational.trainer.RelationalTrainer`) with exactly those values, never values
re-derived from a graph it is handed.

One privacy ledger per mechanism: every trainer it builds charges the same T-step budget (a second
trainer continues where the first stopped; ``train(50)`` on a 10-step certificate is refused), and
``privacy_spent(delta)`` is ε after the steps taken from the certificate's accountants
(:func:`dpspec.accounting.relational.relational_accountants` at the prefix, with the NEG-SAMPLE-WOR
overflow probability of that prefix paid from δ, as in the certificate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpspec.mechanisms.ledger import DataMismatchError, LedgerOwner, PrivacyLedger, Spent, fingerprint


@dataclass(frozen=True, eq=False)
class RelationalMechanism(LedgerOwner):
    name: str
    graph: Any  # dpspec.relational.RelationalGraph (the whole graph: node attributes)
    split: Any  # node-disjoint SplitResult
    train_graph: Any  # the capped private training graph (its n, m are in the certificate)
    sigma: float
    clip: float
    clipping: str  # static | standard | freq
    degree_cap: int
    negatives_per_positive: int
    rate: float
    steps: int
    learning_rate: float
    loss: str
    encoder: Any  # dpspec.ir.models.EncoderSpec
    negatives: str = "wor"
    delta: float | None = None  # the certificate's δ (privacy_spent's default)
    num_edges: int | None = None  # the certificate's counts of the capped training graph
    num_nodes: int | None = None
    ledger: PrivacyLedger = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        m, n = self.train_graph.num_edges, self.train_graph.num_nodes
        if (self.num_edges is not None and self.num_edges != m) or (self.num_nodes is not None and self.num_nodes != n):
            raise DataMismatchError(
                f"`{self.name}`: the training graph has {n} nodes and {m} edges, the certificate "
                f"{self.num_nodes} and {self.num_edges}"
            )
        fp = fingerprint(
            mechanism="relational_dpsgd",
            sigma=self.sigma,
            clip=self.clip,
            clipping=self.clipping,
            K=self.degree_cap,
            k=self.negatives_per_positive,
            negatives=self.negatives,
            rate=self.rate,
            steps=self.steps,
            m=m,
            n=n,
        )
        object.__setattr__(self, "ledger", PrivacyLedger(self.name, self.steps, self._spent, fingerprint=fp))

    @property
    def noise_std(self) -> float:
        """Std of the noise added to the sum of clipped per-tuple gradients (σ·C)."""
        return self.sigma * self.clip

    @property
    def normalizer(self) -> float:
        """The public expected batch size rate·m the noisy sum is divided by."""
        return self.rate * self.train_graph.num_edges

    def config(self):
        from dpspec.accounting.relational import RelationalConfig

        return RelationalConfig(
            self.train_graph.num_edges,
            self.train_graph.num_nodes,
            self.rate,
            self.degree_cap,
            self.negatives_per_positive,
            self.clipping,
            self.negatives,
            "poisson",
        )

    def _spent(self, steps: int, delta: float | None) -> Spent:
        from dpspec.accounting.relational import SEARCH_ALPHAS, overflow_probability, relational_accountants

        d = self.delta if delta is None else float(delta)
        if d is None:
            raise ValueError(f"`{self.name}`: give the δ at which to report ε")
        if steps == 0:
            return Spent(
                target=self.name,
                notion="approximate_dp",
                steps=steps,
                budget_steps=self.steps,
                delta=d,
                epsilon=0.0,
                note="no step taken",
                accountant="none",
            )
        cfg = self.config()
        p_over = overflow_probability(cfg, steps)
        if not d - p_over > 0:
            raise ValueError(f"δ = {d:g} does not cover the NEG-SAMPLE-WOR overflow probability {p_over:.3g}")
        res = relational_accountants(cfg, self.sigma, steps, d - p_over, SEARCH_ALPHAS)
        note = f"accounted at δ − {p_over:.3g} (NEG-SAMPLE-WOR overflow over {steps} steps)" if p_over > 0 else ""
        return Spent(
            target=self.name,
            notion="approximate_dp",
            steps=steps,
            budget_steps=self.steps,
            delta=d,
            epsilon=float(res.dp.epsilon + 0.0),
            note=note,
            accountant=f"{res.best} (pointwise minimum of the valid accountants: {', '.join(sorted(res.accountants))})",
        )

    # --- training -----------------------------------------------------------------------------------

    def build_encoder(self):
        from dpspec.relational.encoders import MiniLMEncoder, MLPEncoder

        e = self.encoder
        if e.kind == "minilm":
            return MiniLMEncoder(self.graph.texts, max_len=e.max_len, out=e.out, seed=e.seed)
        return MLPEncoder(self.graph.features, hidden=e.hidden, out=e.out, seed=e.seed)

    def trainer(self, encoder=None, *, seed: int = 0, private: bool = True, comm=None, graph=None):
        """The Alg. 3 trainer over the capped training graph (``private=False``: the same model and
        batches without clipping or noise, for comparison; it has no budget). A private trainer
        charges this mechanism's ledger. ``graph``: run the certified configuration (rate, normaliser,
        σ, clip, K) on another capped graph — a neighbour, for the audits — with ``encoder`` indexed by
        its nodes."""
        from dpspec.relational.encoders import SubsetEncoder
        from dpspec.relational.trainer import RelationalTrainer, TrainConfig

        enc = encoder if encoder is not None else self.build_encoder()
        cfg = TrainConfig(
            batch_size=self.normalizer,
            k_neg=self.negatives_per_positive,
            rate=self.rate,
            degree_cap=self.degree_cap,
            clip=self.clip,
            sigma=self.sigma,
            clipping=self.clipping,
            steps=self.steps,
            lr=self.learning_rate,
            loss=self.loss,
            private=private,
            seed=seed,
        )
        if graph is not None:
            return RelationalTrainer(graph, enc, cfg, comm=comm, ledger=self.ledger if private else None)
        return RelationalTrainer(
            self.train_graph,
            SubsetEncoder(enc, self.split.train_nodes),
            cfg,
            comm=comm,
            ledger=self.ledger if private else None,
        )

    def train(self, *, steps: int | None = None, seed: int = 0, private: bool = True):
        """Train for the remaining certified steps (or ``steps`` of them) and evaluate zero-shot link
        prediction on the held-out nodes: returns (trainer, {"mrr", "hits@1", "hits@10", …})."""
        if private:
            total = self.ledger.remaining if steps is None else int(steps)
            self.ledger.require(max(total, 1 if steps is None else 0))
        enc = self.build_encoder()
        tr = self.trainer(enc, seed=seed, private=private)
        tr.train(steps)
        return tr, self.evaluate(enc, tr.params, seed=seed)

    def evaluate(self, encoder, params, *, seed: int = 0, max_queries: int = 2000) -> dict:
        import numpy as np

        from dpspec.relational.encoders import SubsetEncoder
        from dpspec.relational.metrics import link_prediction_eval
        from dpspec.relational.trainer import embed_nodes

        ids = np.arange(self.split.test.num_nodes)
        emb = embed_nodes(SubsetEncoder(encoder, self.split.test_nodes), params, ids)
        return link_prediction_eval(emb, self.split.test.edges, max_queries=max_queries, seed=seed)


#: the family's runtime class (``Family.runtime``, read from this folder)
Runtime = RelationalMechanism
