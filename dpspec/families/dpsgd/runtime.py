"""The DP-SGD runtime: samples batches as accounted, clips per-example gradients, adds noise.

What the certificate assumes, this object does — and it refuses to do anything else:
- Poisson sampling draws each example independently with probability q at every step (the
  batch size is random, possibly 0); without-replacement sampling draws a fresh uniform subset
  of exactly B examples at every step. Never "shuffle and call it Poisson".
- Per-example gradients come from ``torch.func`` (vmap over grad; shared utilities in
  :mod:`dpspec.mechanisms.per_example`, with the equivalent ghost-norm path for Sequential MLPs);
  each is clipped to ℓ2 norm ≤ C (flat) or each layer to C_l (per-layer, total C = √Σ C_l²)
  before summation. A non-finite per-example gradient is replaced by zero (inside the clip ball,
  so one example still moves the sum by at most C) and counted; the step is never dropped.
- The clipped sum gets N(0, (σC)² I) noise exactly once per step, then is divided by the
  certificate's ``normalizer`` — the public expected batch size qN (or B, or N for full batch) —
  never by a size read from the data (under insertion/removal the noise scale would reveal it).
- Every step is charged to the privacy ledger *before* its noise is drawn; beyond the certified
  number of steps :class:`~dpspec.mechanisms.ledger.BudgetExceededError` is raised.
- A step's batch is named by training-set indices (the batch ``batches()`` drew, or ``idx=``):
  each example at most once, exactly B of them for without-replacement sampling
  (:class:`~dpspec.mechanisms.ledger.CapExceededError` otherwise).

torch is imported lazily: compiling a spec never imports it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from dpspec.mechanisms.ledger import BatchGuard, DataMismatchError, LedgerOwner, PrivacyLedger, Spent, fingerprint


@dataclass
class TrainingReport:
    """What a run did. ``batch_sizes`` and ``nonfinite_events`` (step, number of examples whose
    gradient was non-finite and replaced by zero) are functions of the private data: they are not
    covered by the certificate and must not be published."""

    steps: int
    noise_std: float
    batch_sizes: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    nonfinite_events: list[tuple[int, int]] = field(default_factory=list)
    injected_noise_std: list[float] = field(default_factory=list)
    # how the per-example clipped sums were computed (ClippedSum.method: ghost, rules, vmap, loop) and,
    # for vmap/loop, why the per-layer rules did not cover the model
    clipping: str = ""
    clipping_fallback: str = ""
    # where the noise came from: "generator" (torch's, seeded) or "secure" (the OS CSPRNG, integer noise on a
    # power-of-two grid: dpspec.mechanisms.secure_noise_training); in secure mode the noise std in the
    # gradient's units (σC raised by at most 2^-10 for the grid's rounding)
    noise: str = "generator"
    # with cuda_graph=True: how many steps were replayed from CUDA graphs, or why none was
    cuda_graph: str = ""
    # (step, count) with the count still on the device: read once by settle(), not at every step
    pending_nonfinite: list = field(default_factory=list, repr=False, compare=False)

    def note_nonfinite(self, step: int, count) -> None:
        """Record a step's count of zeroed non-finite examples (an int, or a 0-dim tensor left on the device
        until :meth:`settle`)."""
        if isinstance(count, int):
            if count:
                self.nonfinite_events.append((step, count))
        else:
            self.pending_nonfinite.append((step, count))

    def settle(self) -> TrainingReport:
        """Read the counts left on the device (one host read for all of them) into ``nonfinite_events``."""
        if self.pending_nonfinite:
            import torch

            steps = [t for t, _ in self.pending_nonfinite]
            counts = torch.stack([c.reshape(()) for _, c in self.pending_nonfinite])
            self.pending_nonfinite = []
            self.nonfinite_events.extend((t, int(k)) for t, k in zip(steps, counts.tolist()) if k)
            self.nonfinite_events.sort()
        return self


@dataclass(frozen=True)
class DpSgd(LedgerOwner):
    noise_multiplier: float
    clip_norm: float
    sampling: str  # "poisson", "without_replacement" or "full_batch"
    sample_rate: float
    steps: int
    batch_size: float | None = None
    dataset_size: int | None = None
    learning_rate: float = 0.1
    momentum: float = 0.0
    per_layer_clip: tuple[float, ...] | None = None
    name: str = "train"
    # the public constant the noisy sum is divided by (default: qN, B or N from the fields above)
    normalizer: float | None = None
    group_size: int = 1
    relation: str = "add_remove"
    # the certificate's α grid and guarantee (δ for (ε, δ), α for RDP): privacy_spent's defaults
    rdp_alphas: tuple[float, ...] | None = None
    delta: float | None = None
    alpha: float | None = None
    # the accountant family that certified the (ε, δ) guarantee ("rdp" or "pld") and the certified
    # (δ, ε) points: the ledger reports ε from that family, never above the certificate for t ≤ T
    accountant: str = "rdp"
    certified: tuple[tuple[float, float], ...] = ()
    ledger: PrivacyLedger = field(init=False, repr=False, compare=False)
    _guard: BatchGuard = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        norm = self.normalizer
        if norm is None:
            if self.sampling == "without_replacement":
                norm = self.batch_size
            elif self.sampling == "full_batch":
                norm = self.dataset_size
            elif self.batch_size is not None:
                norm = self.batch_size
            elif self.dataset_size is not None:
                norm = self.sample_rate * self.dataset_size
        if norm is None or not (float(norm) > 0) or not math.isfinite(float(norm)):
            raise ValueError(
                f"`{self.name}`: DP-SGD divides the noisy sum by a public constant (the expected batch "
                "size); give dataset_size (or the batch size) so that it is not read from the data "
                "(rule DPS160)"
            )
        object.__setattr__(self, "normalizer", float(norm))
        fp = fingerprint(
            mechanism="dpsgd",
            sigma=self.noise_multiplier,
            clip=self.clip_norm,
            sampling=self.sampling,
            rate=self.sample_rate,
            steps=self.steps,
            batch=self.batch_size,
            n=self.dataset_size,
            normalizer=self.normalizer,
            group=self.group_size,
            relation=self.relation,
        )
        object.__setattr__(self, "ledger", PrivacyLedger(self.name, self.steps, self._spent, fingerprint=fp))
        fixed = int(self.batch_size) if self.sampling == "without_replacement" else None
        object.__setattr__(self, "_guard", BatchGuard(self.name, batch_size=fixed, what="example"))

    @property
    def _fixed_batch(self) -> int:
        """B of without-replacement sampling (``__post_init__`` takes it as the batch guard's size)."""
        assert self.batch_size is not None
        return int(self.batch_size)

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise added to the clipped gradient sum (σ·C)."""
        return self.noise_multiplier * self.clip_norm

    # --- the ledger's accountant (the certificate's own, at the steps taken) ------------------------

    def _accountant_name(self) -> str:
        if self.sampling == "without_replacement":
            return "wor_substitution" if self.relation == "substitution" else "wor"
        return "poisson"

    def _spent(self, steps: int, delta: float | None) -> Spent:
        from dpspec import accounting as acc

        at_delta = delta if delta is not None else self.delta
        if at_delta is None and self.alpha is None:
            raise ValueError(f"`{self.name}`: give the δ at which to report ε")
        use_rdp = at_delta is None
        name = self._accountant_name()
        rate = 1.0 if self.sampling == "full_batch" else self.sample_rate
        if steps == 0:
            return Spent(
                target=self.name,
                steps=steps,
                budget_steps=self.steps,
                notion="renyi_dp" if use_rdp else "approximate_dp",
                epsilon=0.0,
                delta=at_delta,
                alpha=self.alpha if use_rdp else None,
                note="no step taken",
                accountant=name,
            )
        alphas = None if self.rdp_alphas is None else np.asarray(self.rdp_alphas, dtype=float)
        if at_delta is None and alphas is not None and self.alpha not in set(alphas.tolist()):
            assert self.alpha is not None  # checked above: without a δ the report is at α
            alphas = np.sort(np.append(alphas, self.alpha))
        curve = acc.dpsgd_rdp_curve(
            self.noise_multiplier,
            rate,
            steps,
            sampling=name,
            group_size=self.group_size,
            dataset_size=self.dataset_size if name != "poisson" else None,
            alphas=alphas,
        )
        if at_delta is None:
            i = int(np.flatnonzero(np.asarray(curve.alphas) == self.alpha)[0])
            return Spent(
                target=self.name,
                steps=steps,
                budget_steps=self.steps,
                notion="renyi_dp",
                epsilon=float(np.asarray(curve.rdp)[i]),
                alpha=self.alpha,
                accountant=curve.theorem,
            )
        d = float(at_delta)
        res = acc.dp_from_curve(curve, d)
        eps, text = float(res.epsilon), f"{curve.theorem}; {res.conversion}"
        if self.accountant == "pld":
            pld_eps, pld_text = self._pld_spent(steps, d)
            eps, text = (pld_eps, pld_text) if pld_eps < eps else (eps, text)
        if steps <= self.steps:  # the certificate's ε at T bounds every prefix of the run
            cert = dict(self.certified).get(d)
            if cert is not None and cert < eps:
                eps, text = cert, text + " (capped at the certificate's ε for the full run)"
        return Spent(
            target=self.name,
            steps=steps,
            budget_steps=self.steps,
            notion="approximate_dp",
            epsilon=eps,
            delta=d,
            accountant=text,
        )

    def _pld_spent(self, steps: int, delta: float) -> tuple[float, str]:
        """PLD ε after ``steps`` steps (the certified PLD construction at t steps; cached)."""
        cache = self.__dict__.setdefault("_pld_cache", {})
        key = (int(steps), float(delta))
        if key not in cache:
            from dpspec.accounting.pld_select import dpsgd_pld

            rate = 1.0 if self.sampling == "full_batch" else self.sample_rate
            pld = dpsgd_pld(
                self.noise_multiplier, rate, steps, self._accountant_name(), self.group_size, self.dataset_size
            )
            if pld is None:
                cache[key] = (math.inf, "PLD not applicable")
            else:
                r = pld.epsilon(delta)
                cache[key] = (float(r.epsilon) if r.epsilon > 0 else 0.0, f"PLD: {r.theorem}")
        return cache[key]

    def bind_certificate(self, certificate, name: str) -> None:
        """Attach the sealed certificate and take its accountant family and certified (δ, ε) points, so
        that the ledger reports ε from the family that certified (see :meth:`_spent`)."""
        super().bind_certificate(certificate, name)
        rec = next((r for r in certificate.results if r.name == name), None)
        a = getattr(rec, "accounting", None) if rec is not None else None
        if rec is not None and a is not None and a.accountant in ("rdp", "pld"):
            object.__setattr__(self, "accountant", a.accountant)
            object.__setattr__(self, "certified", tuple((p.delta, p.epsilon) for p in rec.guarantee.dp))
            self.__dict__.pop("_pld_cache", None)

    # --- sampling ---------------------------------------------------------------------------------

    def _check_size(self, n: int) -> None:
        # Without replacement, the accountant uses N (rate B/N): another size is another analysis. Poisson and
        # full-batch analyses do not depend on N (the normaliser is the certificate's constant), and refusing a
        # dataset of N ± 1 records would itself reveal a membership under insertion/removal.
        if self.sampling == "without_replacement" and self.dataset_size is not None and n != self.dataset_size:
            raise DataMismatchError(
                f"`{self.name}`: the data has {n} examples but the certificate samples "
                f"{self._fixed_batch} of dataset_size = {self.dataset_size} per step; "
                "recompile with the right size"
            )

    def batches(self, n: int, rng: np.random.Generator, steps: int | None = None) -> Iterator[np.ndarray]:
        """Index arrays, one per step, drawn exactly as the accountant assumes (at most the steps the
        ledger has left: more raises :class:`BudgetExceededError` before any batch is drawn)."""
        total = self.ledger.remaining if steps is None else int(steps)
        self.ledger.require(total)
        self._check_size(int(n))
        return self._draw(int(n), rng, total)

    def _draw(self, n: int, rng: np.random.Generator, total: int) -> Iterator[np.ndarray]:
        for _ in range(total):
            if self.sampling == "poisson":
                idx = np.flatnonzero(rng.random(n) < self.sample_rate)
            elif self.sampling == "without_replacement":
                idx = rng.choice(n, size=self._fixed_batch, replace=False)
            else:
                idx = np.arange(n)
            yield self._guard.issue(idx)

    def expected_batch(self, n: int | None = None) -> float:
        """The certificate's normaliser (``n`` is ignored: the normaliser never depends on the data)."""
        return self._normaliser(n)

    def _normaliser(self, n: int | None) -> float:
        assert self.normalizer is not None  # __post_init__ sets it or refuses the object (DPS160)
        return self.normalizer

    # --- one private step ---------------------------------------------------------------------------

    def _clipped_sum(self, model, loss_fn: Callable, xb, yb, max_physical_batch_size: int | None = None, pad=None):
        """The batch's ClippedSum; with ``max_physical_batch_size`` computed on chunks of at most that
        many rows and added (a virtual batch: the same clipped sum, noised once by the caller). ``pad``: the
        rows that are padding (``clipped_grad_sum``)."""
        from dpspec.mechanisms.per_example import clipped_grad_sum, trainable_parameters

        if self.per_layer_clip is not None:  # (flat clipping: clipped_grad_sum refuses a model with none)
            params = trainable_parameters(model)
            if len(self.per_layer_clip) != len(params):
                raise ValueError(
                    f"per-layer clipping gives {len(self.per_layer_clip)} norms for {len(params)} parameter tensors"
                )
        clip = None if self.per_layer_clip is not None else self.clip_norm
        layers = self.per_layer_clip

        def one(x, t, p):
            return clipped_grad_sum(model, loss_fn, x, t, clip=clip, per_layer_clips=layers, pad=p)

        return _chunked(one, max_physical_batch_size, xb, yb, pad)

    def _nonfinite_policy(self, cs) -> dict:
        """The clipped sums to noise. Non-finite per-example gradients were replaced by zero inside
        ``clipped_grad_sum`` (zero is in the clip ball: sensitivity C holds); the step goes on."""
        return cs.sums

    def _noisy_sum(self, model, loss_fn: Callable, xb, yb, generator=None, comm=None, clipped=None):
        """(un-normalised noisy clipped sums, ClippedSum): the certified step on this batch. The ledger is
        charged before the noise is drawn. ``clipped``: this batch's ClippedSum, already computed by
        :meth:`_clipped_sum` (dpspec.torch computes it in the model's forward)."""
        import torch

        from dpspec.mechanisms.noise_device import gaussian_like

        cs = clipped if clipped is not None else self._clipped_sum(model, loss_fn, xb, yb)
        summed = self._nonfinite_policy(cs)
        secure = getattr(generator, "secure", False)
        if secure and comm is not None:
            raise ValueError(
                f"`{self.name}`: secure mode runs in one process (the grid's integer noise is not split "
                "across ranks); train without comm"
            )
        self.ledger.charge(1)
        if secure:  # OS-CSPRNG integer noise on a grid, added exactly (dpspec.mechanisms.secure_noise_training)
            return generator.add(summed, self.noise_multiplier, self.clip_norm), cs
        std = self.noise_std
        if comm is not None:
            # distributed (dpspec.distributed): (xb, yb) is this rank's shard of the global batch;
            # the clipped sums are all-reduced and the noise is added once, on rank 0, before the sum
            return comm.noisy_sum(summed, lambda i, s: gaussian_like(s, std, generator)), cs
        # on the sums' device, in float32 or wider (dpspec.mechanisms.noise_device); drawn in the parameters'
        # order as one draw per tensor (the generator's stream) and added into the clipped sums, which the
        # step consumes: a large tensor's noise at once (so that the noise of the whole model is never alive
        # with the sums: Opacus's one-parameter-at-a-time peak), the others' with one kernel on a GPU
        noise = {}
        for k, s in summed.items():
            z = gaussian_like(s, std, generator)
            if torch.is_tensor(s) and s.dtype == z.dtype and s.numel() >= _NOISE_AT_ONCE:
                s.add_(z)  # s + z: the same number as before
                del z
            else:
                noise[k] = z
        return _added_into(summed, noise), cs

    def _check_batch(self, idx, rows: int, n: int | None, comm=None) -> None:
        global_rows = rows
        if comm is not None and idx is not None:
            lo, hi = comm.bounds(len(idx))
            if hi - lo != rows:
                raise DataMismatchError(
                    f"`{self.name}`: this rank holds {rows} rows of a batch whose shard is {hi - lo}"
                )
            global_rows = len(idx)
        self._guard.resolve(idx, global_rows, population=n)

    def private_gradients(
        self,
        model,
        loss_fn: Callable,
        xb,
        yb,
        n: int | None = None,
        generator=None,
        comm=None,
        *,
        idx=None,
        report: TrainingReport | None = None,
        clipped=None,
    ):
        """Clipped, noised, normalised gradient for each trainable parameter (a dict name → tensor).

        ``idx``: the training-set indices of the batch's rows (default: the batch ``batches()`` drew
        for this step); checked against the certificate's caps. ``n``: the number of examples the
        batch was drawn from (checked for without-replacement sampling; never used to normalise).
        With ``comm``, (xb, yb) is this rank's shard of the global batch ``idx``."""
        if n is not None:
            self._check_size(int(n))
        self._check_batch(idx, int(xb.shape[0]), n, comm)
        noisy, cs = self._noisy_sum(model, loss_fn, xb, yb, generator, comm, clipped)
        if report is not None:
            report.clipping, report.clipping_fallback = cs.method, cs.fallback
            if getattr(generator, "secure", False):
                report.noise = "secure"
                report.injected_noise_std.append(generator.last.get("noise_std", self.noise_std))
        if report is not None:  # left on the device: TrainingReport.settle reads it (no host read per step)
            report.note_nonfinite(self.ledger.steps_taken - 1, cs.nonfinite_count)
        # the default path's noisy sums are the step's own clipped sums, noised in place: divided in place
        own = comm is None and not getattr(generator, "secure", False)
        return _divided(noisy, self._normaliser(n), in_place=own)

    # --- a whole run -------------------------------------------------------------------------------

    def train(
        self,
        model,
        X,
        y,
        loss_fn: Callable | None = None,
        *,
        seed: int | None = None,
        progress: bool = False,
        steps: int | None = None,
        comm=None,
        max_physical_batch_size: int | None = None,
        secure: bool = False,
        cuda_graph: bool = False,
        block_size: int | None = None,
    ) -> TrainingReport:
        """Train ``model`` in place on tensors (X, y) for the remaining certified steps (or ``steps`` of
        them; more than the ledger has left raises :class:`BudgetExceededError` before any step).

        A progress bar on stderr (:mod:`dpspec.progress`; ``progress`` is kept for compatibility).
        ``comm`` (a :class:`dpspec.distributed.Comm`): run data-parallel — every rank draws the same
        global batch, clips its shard, and the noise is added once per step (docs/distributed.md);
        every rank keeps the same ledger, checked with the batch at every step.
        ``max_physical_batch_size``: clip each step's (logical) batch in chunks of at most that many rows
        and noise the summed clipped gradients once — the same certified step in bounded memory.
        ``secure``: draw the batches and the noise from the OS CSPRNG, the noise as integer noise on a
        power-of-two grid added exactly (:mod:`dpspec.mechanisms.secure_noise_training`; no seed, one process).
        ``cuda_graph``: on CUDA, each batch's (or chunk's) clipped per-example sum is replayed as a CUDA graph once
        its shape has been seen twice, as ``make_private(..., cuda_graph=True)`` does (:mod:`dpspec.torch.cuda_graph`;
        Poisson batches padded to a few sizes); the report's ``cuda_graph`` says what happened.
        ``block_size``: each batch's clipped sum computed on blocks of that many rows, each alone, added in order
        (:func:`~dpspec.mechanisms.per_example.blocked_clipped_sum`): the same bits as ``make_private(...,
        block_size=...)`` for every ``max_physical_batch_size`` that is a multiple of it."""
        import torch

        from dpspec.mechanisms.noise_device import device_generator, parameter_device
        from dpspec.mechanisms.per_example import blocked_clipped_sum, whole_blocks, whole_rows

        if loss_fn is None:
            loss_fn = torch.nn.functional.cross_entropy
        if max_physical_batch_size is not None:  # (refused before anything is drawn or charged)
            max_physical_batch_size = whole_rows(max_physical_batch_size)
        block = whole_blocks(block_size, max_physical_batch_size)
        n = len(X)
        if secure:
            rng, gen = _secure_sources(self.name, seed, comm)
        else:
            rng = np.random.default_rng(seed)
            gen = device_generator(int(rng.integers(2**62)), parameter_device(model))
        opt = torch.optim.SGD(
            [p for p in model.parameters() if p.requires_grad], lr=self.learning_rate, momentum=self.momentum
        )
        total = self.ledger.remaining if steps is None else int(steps)
        self.ledger.require(max(total, 1 if steps is None else 0))  # a run with nothing left is refused
        batches = self.batches(n, rng, total)
        rep = TrainingReport(steps=total, noise_std=self.noise_std)
        names = [k for k, p in model.named_parameters() if p.requires_grad]
        graphed = self._graphed_clipped_sum(model, loss_fn) if cuda_graph else None
        if comm is not None:
            comm.broadcast_parameters(model)
        from dpspec.progress import progress as bar

        try:
            for t, idx in enumerate(bar(batches, total=total, desc=f"train {self.name}", unit="step")):
                if comm is not None:
                    comm.check_step(idx, self.ledger, t)
                    local = comm.shard(idx)
                    xb, yb = X[local], y[local]
                else:
                    xb, yb = X[idx], y[idx]
                if block is not None and len(xb) > 0:  # (chunks of whole blocks: the blocks decide the sum)
                    whole = graphed if graphed is not None else functools.partial(self._clipped_sum, model, loss_fn)
                    cs = blocked_clipped_sum(whole, xb, yb, block)
                elif graphed is not None and len(xb) > 0:
                    cs = _chunked(graphed, max_physical_batch_size, xb, yb)
                elif max_physical_batch_size is None:
                    cs = None
                else:
                    cs = self._clipped_sum(model, loss_fn, xb, yb, max_physical_batch_size)
                grads = self.private_gradients(
                    model, loss_fn, xb, yb, n, generator=gen, comm=comm, idx=idx, report=rep, clipped=cs
                )
                for k, p in zip(names, (p for p in model.parameters() if p.requires_grad)):
                    p.grad = grads[k].to(p.dtype)
                opt.step()
                rep.batch_sizes.append(len(idx))
        finally:
            rep.settle()  # the non-finite counts, read once for the run
            if graphed is not None:
                rep.cuda_graph = graphed.status
        return rep

    def _graphed_clipped_sum(self, model, loss_fn: Callable):
        """:meth:`_clipped_sum` replayed as a CUDA graph where it can be (:mod:`dpspec.torch.cuda_graph`); Poisson
        batches padded as make_private pads them."""
        from dpspec.torch.cuda_graph import GraphedClippedSum

        def clipped_sum(x, y, pad):
            return self._clipped_sum(model, loss_fn, x, y, pad=pad)

        return GraphedClippedSum(clipped_sum, model, bucket=graph_bucket(self), criterion=loss_fn)


def graph_bucket(mech):
    """None for fixed-size batches; for Poisson batches the size a batch is padded to for its CUDA graph
    (:mod:`dpspec.torch.cuda_graph`): the next multiple of a width w ≥ 2√(qN) (a power of two, at least 8), so that
    the sizes within three standard deviations of qN fall in at most four graphs."""
    if mech.sampling != "poisson":
        return None
    mean = max(1.0, float(mech.sample_rate) * float(mech.dataset_size or 1))
    width = max(8, 1 << math.ceil(math.log2(2 * math.sqrt(mean))))
    return lambda b: -(-b // width) * width


def _chunked(clipped_sum: Callable, m: int | None, *tensors):
    """``clipped_sum(*tensors)`` of the batch, or of its chunks of at most ``m`` rows (each tensor, None left as it
    is, cut the same way), added: a virtual batch, the same clipped sum, noised once by the caller."""
    from dpspec.mechanisms.per_example import combine_clipped, whole_rows

    B = int(tensors[0].shape[0])
    if m is None or B <= (m := whole_rows(m)):
        return clipped_sum(*tensors)
    return combine_clipped(
        [clipped_sum(*(None if t is None else t[i : i + m] for t in tensors)) for i in range(0, B, m)]
    )


_NOISE_AT_ONCE = 1 << 16  # elements: a tensor this large gets its noise added as soon as it is drawn


def _added_into(a: dict, b: dict) -> dict:
    """{k: a[k] + b[k]} for the keys of ``b`` (the others of ``a`` already hold their sum), written into
    ``a``'s tensors — the step's own clipped sums, consumed here: no third copy of the parameters' size —
    with one foreach kernel on a GPU (on the CPU ``torch._foreach_add_`` adds tensor by tensor); the same
    numbers as ``a[k] + b[k]``."""
    import torch

    keys = [k for k in b if torch.is_tensor(a[k]) and torch.is_tensor(b[k]) and a[k].dtype == b[k].dtype]
    out = dict(a)
    out.update({k: a[k] + b[k] for k in b.keys() - set(keys)})
    if keys:
        torch._foreach_add_([a[k] for k in keys], [b[k] for k in keys])
    return {k: out[k] for k in a}


def _divided(noisy: dict, denom: float, in_place: bool = False) -> dict:
    """{k: v / denom}, the numbers of that division, in fewer kernels: on the CPU ``torch._foreach_div``
    (it divides tensor by tensor); on a GPU whose division by a number is a multiplication by a reciprocal
    (CUDA: ``a * (1/b)`` for a CPU scalar b, the reciprocal rounded as the installed torch rounds it), one
    ``torch._foreach_mul`` per dtype by that same reciprocal, read off the device once
    (:func:`_division_reciprocal`); elsewhere one division per tensor. ``in_place``: into ``noisy``'s own
    tensors (the same numbers; no third copy of the parameters' size)."""
    import torch

    keys = [k for k, v in noisy.items() if torch.is_tensor(v)]
    out = {k: noisy[k] / denom for k in noisy.keys() - set(keys)}
    groups: dict = {}
    for k in keys:
        v = noisy[k]
        groups.setdefault((v.device, v.dtype), []).append(k)
    for (dev, dtype), ks in groups.items():
        vs = [noisy[k] for k in ks]
        inv = None if dev.type == "cpu" else _division_reciprocal(float(denom), dtype, dev)
        if dev.type == "cpu" and in_place:
            torch._foreach_div_(vs, denom)
            out.update(zip(ks, vs))
        elif dev.type == "cpu":
            out.update(zip(ks, torch._foreach_div(vs, denom)))
        elif inv is not None and in_place:
            torch._foreach_mul_(vs, inv)
            out.update(zip(ks, vs))
        elif inv is not None:
            out.update(zip(ks, torch._foreach_mul(vs, inv)))
        elif in_place:
            for v in vs:
                v.div_(denom)
            out.update(zip(ks, vs))
        else:
            out.update((k, v / denom) for k, v in zip(ks, vs))
    return {k: out[k] for k in noisy}


_RECIPROCALS: dict = {}


def _division_reciprocal(denom: float, dtype, device) -> float | None:
    """The number by which ``v / denom`` multiplies ``v`` on ``device`` — 1/denom as that kernel rounds it
    (read off the device: 1 · r = r) — or None unless this device's division by a number is such a
    multiplication. Decided once per (denom, dtype, device): 5 / 3 by a multiplication differs from the
    correctly rounded quotient in float32 and float64, so the device's 5 / 3 tells which kernel it runs
    (CUDA's for a CPU scalar: ``a * (1/b)``); a probe spanning the mantissa is compared too."""
    key = (denom, dtype, str(device))
    if key not in _RECIPROCALS:
        import torch

        r: float | None = None
        if dtype in (torch.float32, torch.float64):
            one = torch.ones((), dtype=dtype, device=device)
            five = torch.full((), 5.0, dtype=dtype, device=device)
            exact = float(np.float32(5.0) / np.float32(3.0)) if dtype == torch.float32 else 5.0 / 3.0
            by_reciprocal = float((five * float((one / 3.0).item())).item())
            if by_reciprocal != exact and float((five / 3.0).item()) == by_reciprocal:
                r = float((one / denom).item())
                probe = torch.linspace(1.0, 2.0, 1025, dtype=dtype, device=device) * 1.61803398875
                r = r if bool(torch.equal(probe / denom, probe * r)) else None
        _RECIPROCALS[key] = r
    return _RECIPROCALS[key]


def _secure_sources(name: str, seed, comm=None):
    """(sampler, noise) of secure mode, both reading the OS CSPRNG; a seed or a data-parallel run is refused."""
    if seed is not None:
        raise ValueError(
            f"`{name}`: secure mode draws every random bit from the operating system (os.urandom) and takes "
            "no seed; a seeded run is reproducible by whoever knows the seed"
        )
    if comm is not None:
        raise ValueError(f"`{name}`: secure mode runs in one process; train without comm")
    from dpspec.mechanisms.secure_noise_training import SecureGaussianNoise, SecureSampler

    return SecureSampler(), SecureGaussianNoise()


def steps_for_epochs(epochs: float, rate: float) -> int:
    return max(1, math.ceil(epochs / rate))


#: the family's runtime class (``Family.runtime``, read from this folder)
Runtime = DpSgd
