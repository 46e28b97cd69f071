"""Relational DP-SGD (Alg. 3) with per-tuple gradients via ``torch.func`` and the noisy update

    g~_t = (1/b) [ sum_i gbar(T_i) + N(0, sigma^2 C^2 I) ],   Theta <- optimizer(Theta, g~_t),

b = rate * |E_bar| the expected batch size (not |B+|), a public constant of the configuration;
empty Poisson batches still add noise. The optimizer (Adam by default, as in the paper) is
post-processing.  ``private=False`` trains the same model on the same batches without clipping or
noise (the non-private baseline; no privacy ledger).

What the certificate assumes, a private trainer enforces:

* at most ``steps`` steps, counted by a :class:`~dpspec.mechanisms.ledger.PrivacyLedger` (shared by
  every trainer of one :class:`~dpspec.families.relational_dpsgd.runtime.RelationalMechanism`) and charged
  before a step's noise is drawn: :class:`~dpspec.mechanisms.ledger.BudgetExceededError` beyond;
* every batch — sampled here or passed to :meth:`RelationalTrainer.step` by the user's loop — keeps
  the caps of the node-level sensitivity: positives are distinct edges of the capped training graph
  (so a node is in at most K positive tuples), each node is a negative of at most one tuple (Alg. 2),
  k_neg negatives per tuple: :class:`~dpspec.mechanisms.ledger.CapExceededError` otherwise;
* a non-finite per-tuple gradient is replaced by zero (inside every clip threshold) and counted in
  ``result.nonfinite_events`` (a private count); the step goes on.

Privacy: :meth:`RelationalTrainer.accounting` evaluates every valid accountant for the run's
configuration (:func:`dpspec.accounting.relational.relational_accountants`).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import grad, vmap

from dpspec.accounting.relational import (
    RelationalConfig,
    RelationalSoundnessError,
    node_sensitivity,
    overflow_probability,
    relational_accountants,
)
from dpspec.mechanisms.ledger import CapExceededError, PrivacyLedger, Spent, fingerprint
from dpspec.mechanisms.noise_device import accumulation_dtype

from .capping import max_degree
from .clipping import tuple_thresholds
from .graph import RelationalGraph
from .losses import LOSSES, tuple_scores
from .samplers import PoissonEdgeSampler, TupleBatch, neg_sample_wor

__all__ = ["TrainConfig", "RelationalTrainer", "per_tuple_grads"]


@dataclass
class TrainConfig:
    batch_size: float = 64.0  # expected |B+| = rate * m
    k_neg: int = 4
    degree_cap: int = 5
    clip: float = 1.0  # C
    sigma: float = 1.0  # noise multiplier (std sigma C)
    clipping: str = "static"  # static | standard | freq  (freq_paper -> DPS601)
    steps: int = 200
    lr: float = 1e-3
    optimizer: str = "adam"
    loss: str = "infonce"
    margin: float = 1.0
    scale: float = 5.0  # score = scale * <h_u, h_v> (outputs are L2-normalised)
    private: bool = True
    chunk: int = 64  # tuples per vmap call
    seed: int = 0
    log_every: int = 0
    rate: float | None = None  # the certified Poisson rate (default: batch_size / |E_bar|)


def per_tuple_grads(
    encoder, params: dict, batch: TupleBatch, loss: str, scale: float, margin: float, chunk: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
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

    dev = next(iter(params.values())).device if params else None
    slots = torch.as_tensor(batch.node_slots(), device=dev)
    side = torch.as_tensor(batch.side, device=dev)
    out_g, out_l = [], []
    for s in range(0, batch.size, chunk):
        ids = slots[s : s + chunk]
        inp = encoder.inputs(ids.reshape(-1))
        inp = tuple(x.reshape(ids.shape[0], ids.shape[1], *x.shape[1:]) for x in inp)
        g, lo = vmap(both, in_dims=(None,) + (0,) * (len(inp) + 1))(params, *inp, side[s : s + chunk])
        out_g.append(torch.cat([g[n].reshape(ids.shape[0], -1) for n in names], dim=1))
        out_l.append(lo)
    if not out_g:
        P = sum(v.numel() for v in params.values())
        like = next(iter(params.values()))  # an empty result still follows the parameters' device and dtype
        return like.new_zeros(0, P), like.new_zeros(0)
    return torch.cat(out_g), torch.cat(out_l)


def batched_losses(encoder, params, batch: TupleBatch, loss: str, scale: float, margin: float) -> torch.Tensor:
    """(b,) per-tuple losses in one batched forward pass (rows grouped per tuple)."""
    dev = next(iter(params.values())).device if params else None
    slots = torch.as_tensor(batch.node_slots(), device=dev)
    b, S = slots.shape
    inp = encoder.inputs(slots.reshape(-1))
    h = encoder.forward(params, *inp).reshape(b, S, -1)
    pos = scale * (h[:, 0] * h[:, 1]).sum(-1)
    side = torch.as_tensor(batch.side, device=dev)
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
    """What a run did; ``batch_sizes``, ``losses`` and ``nonfinite_events`` (step, tuples whose non-finite
    gradient was replaced by zero) are functions of the private graph, not covered by the certificate."""

    losses: list = field(default_factory=list)
    batch_sizes: list = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0
    nonfinite_events: list = field(default_factory=list)


def _engine_only(steps: int, delta) -> Spent:
    raise ValueError(
        "this trainer was built without a certificate: use `compiled.mechanism.trainer()` or "
        ":meth:`RelationalTrainer.accounting` to ask what it spent"
    )


class RelationalTrainer:
    """Alg. 3 on a degree-capped private graph."""

    def __init__(
        self,
        graph: RelationalGraph,
        encoder,
        cfg: TrainConfig,
        use_ghost: bool = True,
        comm=None,
        ledger: PrivacyLedger | None = None,
    ):
        if cfg.degree_cap < 1:
            raise RelationalSoundnessError("degree_cap must be >= 1", rule="DPS607")
        if max_degree(graph.edges, graph.num_nodes) > cfg.degree_cap:
            raise RelationalSoundnessError(
                f"the training graph has max degree {max_degree(graph.edges, graph.num_nodes)} > K = {cfg.degree_cap}",
                rule="DPS607",
                hint="cap it first: dpspec.relational.capping.cap_degrees(edges, n, K)",
            )
        if graph.num_edges == 0:
            raise RelationalSoundnessError("the training graph has no edges", rule="DPS608")
        if cfg.private:
            node_sensitivity(cfg.clipping, cfg.degree_cap, cfg.k_neg)  # DPS601 for freq_paper
        self.graph, self.encoder, self.cfg = graph, encoder, cfg
        self.rate = float(cfg.rate) if cfg.rate is not None else min(1.0, cfg.batch_size / graph.num_edges)
        # the public normaliser b = rate·|E_bar| of the configuration (never the realised |B+|)
        self.normalizer = self.rate * graph.num_edges if cfg.rate is None else float(cfg.batch_size)
        self.config = RelationalConfig(
            graph.num_edges,
            graph.num_nodes,
            self.rate,
            cfg.degree_cap,
            cfg.k_neg,
            cfg.clipping,
            "wor" if cfg.k_neg > 0 else "none",
            "poisson",
        )
        if cfg.private:
            self.config.validate()
        self.rng = np.random.default_rng(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.params = encoder.params()
        P = list(self.params.values())
        if P and hasattr(encoder, "place"):  # the node tables follow the parameters, once (not per step)
            encoder.place(P[0].device, P[0].dtype)
        self.opt = torch.optim.Adam(P, lr=cfg.lr) if cfg.optimizer == "adam" else torch.optim.SGD(P, lr=cfg.lr)
        self.sampler = PoissonEdgeSampler(graph.edges, self.rate, self.rng)
        from .ghost import GhostClipper

        gc = GhostClipper(encoder.module)
        self.ghost = gc if (use_ghost and gc.supports) else None
        self.result = TrainResult()
        # dpspec.distributed.Comm: the capped graph and each step's tuples are global (same seed on
        # every rank); a rank clips its contiguous shard of the tuples, the noise is added once (rank 0)
        self.comm = comm
        self.shards: list = []  # with comm: (step, global positive rows of this rank's tuples)
        if ledger is None:
            ledger = PrivacyLedger(
                "relational_dpsgd",
                cfg.steps,
                _engine_only,
                fingerprint=fingerprint(
                    mechanism="relational_trainer",
                    sigma=cfg.sigma,
                    clip=cfg.clip,
                    rate=self.rate,
                    K=cfg.degree_cap,
                    k=cfg.k_neg,
                    clipping=cfg.clipping,
                    steps=cfg.steps,
                    m=graph.num_edges,
                    n=graph.num_nodes,
                ),
            )
        elif ledger.budget_steps != cfg.steps:
            raise ValueError(f"the ledger covers {ledger.budget_steps} steps, the configuration {cfg.steps}")
        self.ledger = ledger
        self._edge_keys = np.sort(_pair_keys(graph.edges, graph.num_nodes))
        if comm is not None:
            comm.broadcast_parameters(list(self.params.values()))

    def privacy_spent(self, delta: float | None = None) -> Spent:
        return self.ledger.privacy_spent(delta)

    def state_dict(self) -> dict:
        """Checkpoint state (with the encoder's parameters): the ledger, the optimizer, the samplers'
        generator. Loading it into a trainer of another certificate is refused."""
        return {
            "ledger": self.ledger.state_dict(),
            "optimizer": self.opt.state_dict(),
            "rng": self.rng.bit_generator.state,
            "steps": self.result.steps,
        }

    def load_state_dict(self, state: dict) -> None:
        self.ledger.load_state_dict(state["ledger"])  # DataMismatchError for another certificate
        self.opt.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = state["rng"]
        self.result.steps = int(state["steps"])

    def check_batch(self, batch: TupleBatch) -> None:
        """The caps the node-level sensitivity needs (module docstring); CapExceededError otherwise."""
        cfg, n = self.cfg, self.graph.num_nodes
        pos, neg = np.asarray(batch.pos), np.asarray(batch.neg)
        if pos.ndim != 2 or pos.shape[1] != 2 or neg.shape != (pos.shape[0], cfg.k_neg):
            raise CapExceededError(
                f"a batch of tuples needs (b, 2) positives and (b, {cfg.k_neg}) negatives, got "
                f"{pos.shape} and {neg.shape}"
            )
        if pos.size == 0:
            return
        if min(pos.min(), neg.min() if neg.size else 0) < 0 or max(pos.max(), neg.max() if neg.size else 0) >= n:
            raise CapExceededError(f"the batch names nodes outside 0..{n - 1}")
        keys = _pair_keys(pos, n)
        at = np.searchsorted(self._edge_keys, keys)
        known = (at < self._edge_keys.size) & (self._edge_keys[np.minimum(at, self._edge_keys.size - 1)] == keys)
        if not known.all():
            u, v = pos[np.argmin(known)]
            raise CapExceededError(
                f"positive ({u}, {v}) is not an edge of the degree-capped training graph: the degree cap K = "
                f"{cfg.degree_cap} bounds a node's positive tuples only for edges of that graph. Sample with "
                "`trainer.sample()`."
            )
        if np.unique(keys).size != keys.size:
            raise CapExceededError(
                "an edge appears twice among the batch's positives; Poisson sampling takes each "
                "capped edge at most once, and the degree cap K bounds a node's tuples only then"
            )
        deg = np.bincount(pos.ravel(), minlength=n)
        if deg.max() > cfg.degree_cap:
            raise CapExceededError(
                f"node {int(deg.argmax())} is in {int(deg.max())} positive tuples of this batch, above the degree cap "
                f"K = {cfg.degree_cap} of the certificate (its sensitivity assumes at most K)"
            )
        if neg.size:
            cnt = np.bincount(neg.ravel(), minlength=n)
            if cnt.max() > 1:
                raise CapExceededError(
                    f"node {int(cnt.argmax())} is a negative of {int(cnt.max())} tuples; NEG-SAMPLE-WOR (Alg. 2) draws "
                    "distinct negatives, and the sensitivity assumes a node is a negative of at most one tuple"
                )

    def sample(self) -> TupleBatch:
        pos = self.sampler()
        return neg_sample_wor(pos, self.cfg.k_neg, self.graph.num_nodes, self.rng)

    def step(self, batch: TupleBatch | None = None) -> float:
        cfg = self.cfg
        if cfg.private:
            self.ledger.require(1)  # BudgetExceededError before a batch is drawn or a gradient computed
        if batch is None:
            batch = self.sample()  # drawn as accounted: the caps hold by construction
        elif cfg.private:
            self.check_batch(batch)
        b_exp = self.normalizer
        comm, gsize = self.comm, batch.size
        if comm is not None:
            comm.check_step(np.concatenate([batch.pos.ravel(), batch.neg.ravel()]), self.ledger, self.result.steps)
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
            p0 = next(iter(params.values()))
            acc = accumulation_dtype(p0.dtype)  # the step's tensors: the parameters' device, float32 or wider
            total: torch.Tensor | None  # the clipped sum: None until the ghost or the vmap path forms it
            if batch.size == 0:
                total = torch.zeros(P, device=p0.device, dtype=acc)
                loss_val = float("nan")
            else:
                t = (
                    tuple_thresholds(batch, cfg.clipping, cfg.clip, cfg.degree_cap, cfg.k_neg)
                    if t_global is None
                    else t_global
                )

                def factors(norms):  # min(1, t/‖g‖) (clip_factors) on the norms' device, in float64
                    tt = torch.as_tensor(t, dtype=torch.float64, device=norms.device)
                    n64 = norms.detach().to(torch.float64)
                    f = torch.where(
                        n64 > tt, tt / torch.where(n64 > 0, n64, torch.ones_like(n64)), torch.ones_like(n64)
                    )
                    return f.to(norms.dtype)

                total = None
                if self.ghost is not None:
                    gsum, norms, losses = self.ghost.run(
                        lambda: batched_losses(self.encoder, self.params, batch, cfg.loss, cfg.scale, cfg.margin),
                        batch.size,
                        factors,
                    )
                    if bool(torch.isfinite(norms).all()):
                        named = {id(p): k for k, p in self.params.items()}
                        parts = {named[id(p)]: v for p, v in gsum.items()}
                        total = torch.cat(
                            [
                                parts[k].reshape(-1).to(acc)
                                if k in parts
                                else torch.zeros(num, device=p0.device, dtype=acc)
                                for k, _, num in shapes
                            ]
                        )
                if total is None:  # the vmap path (also when a tuple's gradient is non-finite)
                    g, losses = per_tuple_grads(self.encoder, params, batch, cfg.loss, cfg.scale, cfg.margin, cfg.chunk)
                    total = self._clipped_total(g, factors)
                loss_val = (
                    float(losses[torch.isfinite(losses)].mean()) if bool(torch.isfinite(losses).any()) else float("nan")
                )
            self.ledger.charge(1)  # before the step's noise is drawn
            if comm is not None:
                sc = cfg.sigma * cfg.clip
                lsum = torch.tensor(
                    [
                        0.0 if batch.size == 0 or not math.isfinite(loss_val) else loss_val * batch.size,
                        float(batch.size),
                    ],
                    dtype=total.dtype,
                    device=total.device,
                )
                (total,) = comm.noisy_sum(
                    [total], lambda i, v: torch.randn(v.shape, dtype=v.dtype, device=v.device) * sc
                )
                comm.all_reduce_sum(lsum)  # reporting only
                loss_val = float(lsum[0] / lsum[1]) if gsize else float("nan")
                upd = total / b_exp
            else:
                noise = torch.randn(total.shape, dtype=total.dtype, device=total.device) * (cfg.sigma * cfg.clip)
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
        for k, shp, num in shapes:
            self.params[k].grad = upd[off : off + num].reshape(shp).to(self.params[k].dtype).clone()
            off += num
        self.opt.step()
        self.result.losses.append(loss_val)
        self.result.batch_sizes.append(gsize if comm is not None else batch.size)
        self.result.steps += 1
        return loss_val

    def _clipped_total(self, g: torch.Tensor, factors) -> torch.Tensor:
        """Σ_i f_i g_i with a non-finite per-tuple gradient replaced by zero (inside every threshold)."""
        ok = torch.isfinite(g).all(dim=1)
        if not bool(ok.all()):
            self.result.nonfinite_events.append((self.result.steps, int((~ok).sum())))
            g = torch.where(ok[:, None], g, g.new_zeros(()))
        g = g.to(accumulation_dtype(g.dtype))
        return (g * factors(g.norm(dim=1))[:, None]).sum(0)

    def train(self, steps: int | None = None) -> TrainResult:
        """Run the remaining certified steps (or ``steps`` of them; more raises BudgetExceededError before
        any step)."""
        if self.cfg.private:
            total = self.ledger.remaining if steps is None else int(steps)
            self.ledger.require(max(total, 1 if steps is None else 0))  # a run with nothing left is refused
        else:
            total = self.cfg.steps if steps is None else int(steps)
        t0 = time.time()
        from dpspec.progress import progress

        for s in progress(range(total), desc="train relational", unit="step"):
            lv = self.step()
            if self.cfg.log_every and (s + 1) % self.cfg.log_every == 0:
                print(f"step {s + 1}: loss {lv:.4f}", file=sys.stderr)
        self.result.seconds += time.time() - t0
        return self.result

    @torch.no_grad()
    def embed(self, encoder=None, ids=None) -> np.ndarray:
        enc = encoder or self.encoder
        ids = np.arange(self.graph.num_nodes) if ids is None else ids
        return embed_nodes(enc, self.params, ids)

    def accounting(self, delta: float | None = None, steps: int | None = None, **kw):
        """Every valid accountant for this run (delta defaults to 1/|E_bar|, the paper's)."""
        d = 1.0 / self.graph.num_edges if delta is None else delta
        T = self.result.steps if steps is None else steps
        return relational_accountants(self.config, self.cfg.sigma, T, d, **kw)

    def overflow_probability(self, steps: int | None = None) -> float:
        return overflow_probability(self.config, self.cfg.steps if steps is None else steps)


def _pair_keys(edges, num_nodes: int) -> np.ndarray:
    """One int64 key per undirected pair (min · n + max)."""
    e = np.sort(np.asarray(edges, dtype=np.int64).reshape(-1, 2), axis=1)
    return e[:, 0] * int(num_nodes) + e[:, 1]


def embed_nodes(encoder, params, ids) -> np.ndarray:
    """Encodings of nodes ``ids`` (any encoder built over the same node table)."""
    p0 = next(iter(params.values()), None)
    ids = torch.as_tensor(ids, dtype=torch.long, device=None if p0 is None else p0.device)
    out = []
    with torch.no_grad():
        for s in range(0, ids.numel(), 512):
            out.append(encoder.forward(params, *encoder.inputs(ids[s : s + 512])))
    if not out:
        return np.zeros((0, 1))
    emb = torch.cat(out)
    if emb.dtype in (torch.bfloat16, torch.float16):  # numpy has no bfloat16
        emb = emb.float()
    return emb.cpu().numpy()


_ = math
