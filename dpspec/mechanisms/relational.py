"""Runtime object of a compiled `relational_dpsgd` training (torch imported on first use).

It holds the split and the degree-capped training graph the certificate was computed on, and the
certified σ, clip, degree cap and sampling rate; :meth:`RelationalMechanism.trainer` builds the
Alg. 3 trainer (:class:`dpspec.relational.trainer.RelationalTrainer`) with exactly those values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class RelationalMechanism:
    name: str
    graph: Any         # dpspec.relational.RelationalGraph (the whole graph: node attributes)
    split: Any         # node-disjoint SplitResult
    train_graph: Any   # the capped private training graph (its n, m are in the certificate)
    sigma: float
    clip: float
    clipping: str      # static | standard | freq
    degree_cap: int
    negatives_per_positive: int
    rate: float
    steps: int
    learning_rate: float
    loss: str
    encoder: Any       # dpspec.ir.models.EncoderSpec

    @property
    def noise_std(self) -> float:
        """Std of the noise added to the sum of clipped per-tuple gradients (σ·C)."""
        return self.sigma * self.clip

    def build_encoder(self):
        from dpspec.relational.encoders import MLPEncoder, MiniLMEncoder

        e = self.encoder
        if e.kind == "minilm":
            return MiniLMEncoder(self.graph.texts, max_len=e.max_len, out=e.out, seed=e.seed)
        return MLPEncoder(self.graph.features, hidden=e.hidden, out=e.out, seed=e.seed)

    def trainer(self, encoder=None, *, seed: int = 0, private: bool = True, comm=None):
        """The Alg. 3 trainer over the capped training graph (``private=False``: the same model and
        batches without clipping or noise, for comparison)."""
        from dpspec.relational.encoders import SubsetEncoder
        from dpspec.relational.trainer import RelationalTrainer, TrainConfig

        enc = encoder if encoder is not None else self.build_encoder()
        cfg = TrainConfig(batch_size=self.rate * self.train_graph.num_edges, k_neg=self.negatives_per_positive,
                          degree_cap=self.degree_cap, clip=self.clip, sigma=self.sigma, clipping=self.clipping,
                          steps=self.steps, lr=self.learning_rate, loss=self.loss, private=private, seed=seed)
        return RelationalTrainer(self.train_graph, SubsetEncoder(enc, self.split.train_nodes), cfg, comm=comm)

    def train(self, *, steps: int | None = None, seed: int = 0, private: bool = True):
        """Train for the certified steps (or fewer) and evaluate zero-shot link prediction on the held-out
        nodes: returns (trainer, {"mrr", "hits@1", "hits@10", …})."""
        if steps is not None and steps > self.steps:
            raise ValueError(f"the certificate covers {self.steps} steps, not {steps}")
        enc = self.build_encoder()
        tr = self.trainer(enc, seed=seed, private=private)
        tr.train(steps if steps is not None else self.steps)
        return tr, self.evaluate(enc, tr.params, seed=seed)

    def evaluate(self, encoder, params, *, seed: int = 0, max_queries: int = 2000) -> dict:
        import numpy as np

        from dpspec.relational.encoders import SubsetEncoder
        from dpspec.relational.metrics import link_prediction_eval
        from dpspec.relational.trainer import embed_nodes

        ids = np.arange(self.split.test.num_nodes)
        emb = embed_nodes(SubsetEncoder(encoder, self.split.test_nodes), params, ids)
        return link_prediction_eval(emb, self.split.test.edges, max_queries=max_queries, seed=seed)
