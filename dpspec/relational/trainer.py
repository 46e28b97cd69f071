"""Relational DP-SGD (Alg. 3) with per-tuple gradients via ``torch.func`` and the noisy update

    g~_t = (1/b) [ sum_i gbar(T_i) + N(0, sigma^2 C^2 I) ],   Theta <- optimizer(Theta, g~_t),

b = rate * |E_bar| the expected batch size (not |B+|); empty Poisson batches still add noise.
The optimizer (Adam by default, as in the paper) is post-processing.  ``private=False`` trains
the same model on the same batches without clipping or noise (the non-private baseline).

Privacy: :meth:`RelationalTrainer.accounting` evaluates every valid accountant for the run's
configuration (:func:`dpspec.accounting.relational.relational_accountants`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import grad, vmap

from dpspec.accounting.relational import (RelationalConfig, RelationalSoundnessError,
                                          node_sensitivity, overflow_probability,
                                          relational_accountants)

from .capping import max_degree
from .clipping import clip_factors, tuple_thresholds
from .graph import RelationalGraph
from .losses import LOSSES, tuple_scores
from .samplers import PoissonEdgeSampler, TupleBatch, neg_sample_wor

__all__ = ["TrainConfig", "RelationalTrainer", "per_tuple_grads"]


@dataclass
class TrainConfig:
    batch_size: float = 64.0          # expected |B+| = rate * m
    k_neg: int = 4
    degree_cap: int = 5
    clip: float = 1.0                 # C
    sigma: float = 1.0                # noise multiplier (std sigma C)
    clipping: str = "static"          # static | standard | freq  (freq_paper -> DPS601)
    steps: int = 200
    lr: float = 1e-3
    optimizer: str = "adam"
    loss: str = "infonce"
    margin: float = 1.0
    scale: float = 5.0                # score = scale * <h_u, h_v> (outputs are L2-normalised)
    private: bool = True
    chunk: int = 64                   # tuples per vmap call
    seed: int = 0
    log_every: int = 0


def per_tuple_grads(encoder, params: dict, batch: TupleBatch, loss: str, scale: float,
                    margin: float, chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """(b, P) flattened per-tuple gradients and (b,) losses.

    Each tuple's loss uses the encodings of its own 2 + k node slots only, so its gradient is a
    function of that tuple alone (the per-example unit of Eq. (1))."""
    names = list(params)
    lossf = LOSSES[loss]

    def tuple_loss(p, *inp_and_side):
        *inp, side = inp_and_side
        h = encoder.forward(p, *inp)
        pos, neg = tuple_scores(h, side, scale)
        return lossf(pos, neg, margin)

    def both(p, *a):
        g = grad(tuple_loss)(p, *a)
        return g, tuple_loss(p, *a)

    slots = torch.as_tensor(batch.node_slots())
    side = torch.as_tensor(batch.side)
    out_g, out_l = [], []
    for s in range(0, batch.size, chunk):
        ids = slots[s:s + chunk]
        inp = encoder.inputs(ids.reshape(-1))
        inp = tuple(x.reshape(ids.shape[0], ids.shape[1], *x.shape[1:]) for x in inp)
        g, lo = vmap(both, in_dims=(None,) + (0,) * (len(inp) + 1))(params, *inp, side[s:s + chunk])
        out_g.append(torch.cat([g[n].reshape(ids.shape[0], -1) for n in names], dim=1))
        out_l.append(lo)
    if not out_g:
        P = sum(v.numel() for v in params.values())
        return torch.zeros(0, P), torch.zeros(0)
    return torch.cat(out_g), torch.cat(out_l)


def batched_losses(encoder, params, batch: TupleBatch, loss: str, scale: float,
                   margin: float) -> torch.Tensor:
    """(b,) per-tuple losses in one batched forward pass (rows grouped per tuple)."""
    slots = torch.as_tensor(batch.node_slots())
    b, S = slots.shape
    inp = encoder.inputs(slots.reshape(-1))
    h = encoder.forward(params, *inp).reshape(b, S, -1)
    pos = scale * (h[:, 0] * h[:, 1]).sum(-1)
    side = torch.as_tensor(batch.side)
    if S > 2:
        ends = torch.where(side[..., None] == 0, h[:, :1], h[:, 1:2])
        neg = scale * (ends * h[:, 2:]).sum(-1)
    else:
        neg = h.new_zeros(b, 0)
    if loss == "infonce":
        return torch.logsumexp(torch.cat([pos[:, None], neg], 1), dim=1) - pos
    return torch.clamp(margin - pos[:, None] + neg, min=0.0).sum(1)


@dataclass
class TrainResult:
    losses: list = field(default_factory=list)
    batch_sizes: list = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0


class RelationalTrainer:
    """Alg. 3 on a degree-capped private graph."""

    def __init__(self, graph: RelationalGraph, encoder, cfg: TrainConfig, use_ghost: bool = True, comm=None):
        if cfg.degree_cap < 1:
            raise RelationalSoundnessError("degree_cap must be >= 1", rule="DPS607")
        if max_degree(graph.edges, graph.num_nodes) > cfg.degree_cap:
            raise RelationalSoundnessError(
                f"the training graph has max degree {max_degree(graph.edges, graph.num_nodes)} > "
                f"K = {cfg.degree_cap}", rule="DPS607",
                hint="cap it first: dpspec.relational.capping.cap_degrees(edges, n, K)")
        if graph.num_edges == 0:
            raise RelationalSoundnessError("the training graph has no edges", rule="DPS608")
        if cfg.private:
            node_sensitivity(cfg.clipping, cfg.degree_cap, cfg.k_neg)     # DPS601 for freq_paper
        self.graph, self.encoder, self.cfg = graph, encoder, cfg
        self.rate = min(1.0, cfg.batch_size / graph.num_edges)
        self.config = RelationalConfig(graph.num_edges, graph.num_nodes, self.rate,
                                       cfg.degree_cap, cfg.k_neg, cfg.clipping,
                                       "wor" if cfg.k_neg > 0 else "none", "poisson")
        if cfg.private:
            self.config.validate()
        self.rng = np.random.default_rng(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.params = encoder.params()
        P = list(self.params.values())
        self.opt = (torch.optim.Adam(P, lr=cfg.lr) if cfg.optimizer == "adam"
                    else torch.optim.SGD(P, lr=cfg.lr))
        self.sampler = PoissonEdgeSampler(graph.edges, self.rate, self.rng)
        from .ghost import GhostClipper
        gc = GhostClipper(encoder.module)
        self.ghost = gc if (use_ghost and gc.supports) else None
        self.result = TrainResult()
        # dpspec.distributed.Comm: the capped graph and each step's tuples are global (same seed on
        # every rank); a rank clips its contiguous shard of the tuples, the noise is added once (rank 0)
        self.comm = comm
        self.shards: list = []  # with comm: (step, global positive rows of this rank's tuples)
        if comm is not None:
            comm.broadcast_parameters(list(self.params.values()))

    def sample(self) -> TupleBatch:
        pos = self.sampler()
        return neg_sample_wor(pos, self.cfg.k_neg, self.graph.num_nodes, self.rng)

    def step(self, batch: TupleBatch | None = None) -> float:
        cfg = self.cfg
        batch = self.sample() if batch is None else batch
        b_exp = self.rate * self.graph.num_edges
        comm, gsize = self.comm, batch.size
        if comm is not None:
            comm.check_consensus(np.concatenate([batch.pos.ravel(), batch.neg.ravel()]), self.result.steps)
        params = {k: v.detach() for k, v in self.params.items()}
        shapes = [(k, v.shape, v.numel()) for k, v in params.items()]
        if cfg.private:
            P = sum(num for _, _, num in shapes)
            t_global = None
            if comm is not None and batch.size:
                # thresholds on the GLOBAL batch (FREQ-CLIP depends on all tuples), then shard
                t_global = tuple_thresholds(batch, cfg.clipping, cfg.clip, cfg.degree_cap, cfg.k_neg)
                lo, hi = comm.bounds(batch.size)
                t_global = t_global[lo:hi]
                batch = TupleBatch(batch.pos[lo:hi], batch.neg[lo:hi], batch.side[lo:hi])
                self.shards.append((self.result.steps, batch.pos.copy()))
            if batch.size == 0:
                total = torch.zeros(P)
                loss_val = float("nan")
            else:
                t = (tuple_thresholds(batch, cfg.clipping, cfg.clip, cfg.degree_cap, cfg.k_neg)
                     if t_global is None else t_global)

                def factors(norms):
                    return torch.as_tensor(clip_factors(norms.detach().numpy(), t),
                                           dtype=norms.dtype)

                if self.ghost is not None:
                    gsum, _, losses = self.ghost.run(
                        lambda: batched_losses(self.encoder, self.params, batch, cfg.loss,
                                               cfg.scale, cfg.margin), batch.size, factors)
                    named = {id(p): k for k, p in self.params.items()}
                    parts = {named[id(p)]: v for p, v in gsum.items()}
                    total = torch.cat([parts[k].reshape(-1) if k in parts
                                       else torch.zeros(num) for k, _, num in shapes])
                else:
                    g, losses = per_tuple_grads(self.encoder, params, batch, cfg.loss, cfg.scale,
                                                cfg.margin, cfg.chunk)
                    total = (g * factors(g.norm(dim=1))[:, None]).sum(0)
                loss_val = float(losses.mean())
            if comm is not None:
                sc = cfg.sigma * cfg.clip
                lsum = torch.tensor([0.0 if batch.size == 0 else loss_val * batch.size, float(batch.size)],
                                    dtype=total.dtype)
                (total,) = comm.noisy_sum([total], lambda i, v: torch.randn(v.shape) * sc)
                comm.all_reduce_sum(lsum)  # reporting only
                loss_val = float(lsum[0] / lsum[1]) if gsize else float("nan")
                upd = total / b_exp
            else:
                noise = torch.randn(total.shape) * (cfg.sigma * cfg.clip)
                upd = (total + noise) / b_exp
        else:
            if batch.size == 0:
                return float("nan")
            P = list(self.params.values())
            ls = batched_losses(self.encoder, self.params, batch, cfg.loss, cfg.scale, cfg.margin)
            grads = torch.autograd.grad(ls.sum() / b_exp, P)
            upd = torch.cat([gg.reshape(-1) for gg in grads])
            loss_val = float(ls.detach().mean())
        off = 0
        for (k, shp, num) in shapes:
            self.params[k].grad = upd[off:off + num].reshape(shp).clone()
            off += num
        self.opt.step()
        self.result.losses.append(loss_val)
        self.result.batch_sizes.append(gsize if comm is not None else batch.size)
        self.result.steps += 1
        return loss_val

    def train(self, steps: int | None = None) -> TrainResult:
        t0 = time.time()
        for s in range(steps if steps is not None else self.cfg.steps):
            lv = self.step()
            if self.cfg.log_every and (s + 1) % self.cfg.log_every == 0:
                print(f"step {s + 1}: loss {lv:.4f}")
        self.result.seconds += time.time() - t0
        return self.result

    @torch.no_grad()
    def embed(self, encoder=None, ids=None) -> np.ndarray:
        enc = encoder or self.encoder
        n = enc.inputs(torch.arange(1))[0].shape[0] if False else None  # noqa: F841
        ids = torch.arange(self.graph.num_nodes) if ids is None else torch.as_tensor(ids)
        out = []
        for s in range(0, ids.numel(), 512):
            out.append(enc.forward(self.params, *enc.inputs(ids[s:s + 512])))
        return torch.cat(out).numpy()

    def accounting(self, delta: float | None = None, steps: int | None = None, **kw):
        """Every valid accountant for this run (delta defaults to 1/|E_bar|, the paper's)."""
        d = 1.0 / self.graph.num_edges if delta is None else delta
        T = self.result.steps if steps is None else steps
        return relational_accountants(self.config, self.cfg.sigma, T, d, **kw)

    def overflow_probability(self, steps: int | None = None) -> float:
        return overflow_probability(self.config, self.cfg.steps if steps is None else steps)


def embed_nodes(encoder, params, ids) -> np.ndarray:
    """Encodings of nodes ``ids`` (any encoder built over the same node table)."""
    ids = torch.as_tensor(ids)
    out = []
    with torch.no_grad():
        for s in range(0, ids.numel(), 512):
            out.append(encoder.forward(params, *encoder.inputs(ids[s:s + 512])))
    return torch.cat(out).numpy() if out else np.zeros((0, 1))


_ = math
