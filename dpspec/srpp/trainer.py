"""SRPP-SGD runtime: a private optimizer usable in your own loop, and a trainer (torch, lazy).

    opt = SrppSgdOptimizer(model, plan, cal, seed=0)
    for idx in opt.batches():                 # drawn exactly as the accountant assumes
        opt.step(X[idx], y[idx])              # clip, average, add the certified noise, SGD step
    opt.report                                # what happened (private: do not publish)
    opt.privacy_spent()                       # ε(α) after the steps taken (mechanism optimizers)

What the certificate assumes, this object does (ZV25 Algorithm 1), and it refuses anything else:
* batches drawn by the plan's :class:`~dpspec.srpp.sampling.Sampling` (WOR/WR/Poisson); a step uses
  the batch ``batches()`` drew for it, or the training-set indices ``idx=`` a user's loop passes,
  which must respect the caps the discrepancy analysis needs (each record at most once per batch —
  except with replacement, where repeats are counted by the analysis — and exactly B records for
  fixed-size sampling): :class:`~dpspec.mechanisms.ledger.CapExceededError` otherwise;
* at most T steps, counted by a :class:`~dpspec.mechanisms.ledger.PrivacyLedger` shared by every
  optimizer of one mechanism and charged before the noise of a step is drawn
  (:class:`~dpspec.mechanisms.ledger.BudgetExceededError` beyond);
* per-example gradients clipped (flat ℓ2 C or per-layer C_e; :mod:`dpspec.mechanisms.per_example`),
  summed, divided by the plan's normaliser B̄ — a public constant — (or the realised B_t, App. E);
* Gaussian noise with the std of :meth:`SrppSgdPlan.gradient_noise_std` added to the mean clipped
  gradient *before* the optimizer (so momentum sees the noisy gradient and the released trajectory
  determines the optimizer state);
* torch.optim.SGD with the plan's momentum / Nesterov / weight decay and the scheduled η_t, checked
  before every step (DPS508 if someone changed them).

A non-finite per-example gradient is replaced by zero (inside the clip ball, so the caps hold; the
normaliser stays the public constant) and counted in ``report.nonfinite_events`` — a count of the
private data, not covered by the certificate. The step is never dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from dpspec.accounting.huc import SRPPSGDCalibration, SrppSoundnessError
from dpspec.mechanisms.ledger import BatchGuard, PrivacyLedger, Spent, fingerprint
from dpspec.mechanisms.noise_device import device_generator, parameter_device, standard_normal_like

from .plan import SrppSgdPlan

__all__ = ["TrainingReport", "PrivateSgdEngine", "SrppSgdOptimizer", "train_srpp_sgd", "evaluate_accuracy"]


@dataclass
class TrainingReport:
    """What a run did. ``batch_sizes``, ``losses``, ``clipped_fraction`` and ``nonfinite_events`` (step,
    number of examples whose non-finite gradient was replaced by zero) are functions of the private data,
    not covered by the certificate: do not publish them."""

    steps_planned: int
    steps_taken: int = 0
    batch_sizes: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    nonfinite_events: list = field(default_factory=list)  # (step, number of examples dropped)
    skipped_steps: list = field(default_factory=list)  # (step, reason)
    clipped_fraction: list = field(default_factory=list)
    noise_std_first: float = float("nan")
    noise_std_last: float = float("nan")
    method: str = ""
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "steps_planned": self.steps_planned,
            "steps_taken": self.steps_taken,
            "nonfinite_examples": int(sum(n for _, n in self.nonfinite_events)),
            "skipped_steps": len(self.skipped_steps),
            "noise_std_first": self.noise_std_first,
            "noise_std_last": self.noise_std_last,
            "mean_clipped_fraction": float(np.mean(self.clipped_fraction)) if self.clipped_fraction else float("nan"),
            "final_loss": float(np.nanmean(self.losses[-10:])) if self.losses else float("nan"),
            "method": self.method,
            "seconds": self.seconds,
        }


class PrivateSgdEngine:
    """Noisy clipped SGD with an explicit per-step gradient-noise std (T,) or (T, E).

    The low-level engine shared by :class:`SrppSgdOptimizer` (noise from a calibration) and the
    group-DP-SGD baseline (noise from an RDP calibration). ``ledger``: the step budget it charges
    (a mechanism passes its own, shared by all its optimizers; default: a fresh one of T steps); the
    engine continues the noise and learning-rate schedules at the ledger's step.
    """

    def __init__(
        self,
        model,
        plan: SrppSgdPlan,
        noise_std,
        loss_fn: Callable | None = None,
        *,
        seed: int | None = None,
        method: str = "auto",
        comm=None,
        ledger: PrivacyLedger | None = None,
        name: str = "srpp_sgd",
    ):
        import torch

        from dpspec.mechanisms.per_example import trainable_parameters

        self.comm = comm  # dpspec.distributed.Comm: step() clips this rank's shard, noise once on rank 0

        self.torch = torch
        self.model = model
        self.plan = plan
        self.params = trainable_parameters(model)  # ValueError if none
        self.names = list(self.params.keys())
        self.tensors = [p for k, p in model.named_parameters() if p.requires_grad]
        if plan.per_layer_clips is not None and len(plan.per_layer_clips) != len(self.names):
            raise ValueError(
                f"per_layer_clips has {len(plan.per_layer_clips)} entries but the model has "
                f"{len(self.names)} trainable parameter tensors"
            )
        std = np.asarray(noise_std, dtype=float)
        if std.shape[0] != plan.steps:
            raise ValueError(f"noise_std covers {std.shape[0]} steps, the plan {plan.steps}")
        if std.ndim == 2 and std.shape[1] != len(self.names):
            raise ValueError("per-block noise std must have one column per trainable parameter tensor")
        if not np.all(np.isfinite(std)) or np.any(std < 0):
            raise ValueError("noise std must be finite and ≥ 0")
        self.noise_std = std
        self.loss_fn = loss_fn if loss_fn is not None else torch.nn.functional.cross_entropy
        self.method = method
        self.lrs = plan.optimizer.schedule.array()
        o = plan.optimizer
        self.opt = torch.optim.SGD(
            self.tensors, lr=float(self.lrs[0]), momentum=o.momentum, nesterov=o.nesterov, weight_decay=o.weight_decay
        )
        if o.block_lr_scales is not None:
            # one param group per block so each gets its own step size
            self.opt = torch.optim.SGD(
                [{"params": [p], "lr": float(self.lrs[0] * s)} for p, s in zip(self.tensors, o.block_lr_scales)],
                lr=float(self.lrs[0]),
                momentum=o.momentum,
                nesterov=o.nesterov,
                weight_decay=o.weight_decay,
            )
        self._hyper = {"momentum": o.momentum, "nesterov": o.nesterov, "weight_decay": o.weight_decay, "dampening": 0}
        self.rng = np.random.default_rng(seed)
        self.gen = device_generator(int(self.rng.integers(2**62)), parameter_device(model))
        s = plan.sampling
        if ledger is None:
            ledger = PrivacyLedger(
                name,
                plan.steps,
                _engine_only,
                fingerprint=fingerprint(mechanism="private_sgd_engine", plan=repr(plan.describe()), std=std.tolist()),
            )
        elif ledger.budget_steps != plan.steps:
            raise ValueError(f"the ledger covers {ledger.budget_steps} steps, the plan {plan.steps}")
        self.ledger = ledger
        self._guard = BatchGuard(
            ledger.target,
            batch_size=s.batch_size if s.scheme in ("wor", "wr") else None,
            population=s.dataset_size,
            repeats_allowed=s.scheme == "wr",
        )
        self.report = TrainingReport(
            steps_planned=plan.steps,
            steps_taken=ledger.steps_taken,
            noise_std_first=float(np.ravel(std)[0]),
            noise_std_last=float(np.ravel(std)[-1]),
        )

    @property
    def t(self) -> int:
        """The next step's index in the certified schedule (= steps already charged to the ledger)."""
        return self.ledger.steps_taken

    def privacy_spent(self, delta: float | None = None) -> Spent:
        return self.ledger.privacy_spent(delta)

    def state_dict(self) -> dict:
        """Checkpoint state (store it with ``model.state_dict()``): the ledger, the optimizer and the
        samplers' generators. Loading it into an optimizer of another certificate is refused."""
        return {
            "ledger": self.ledger.state_dict(),
            "optimizer": self.opt.state_dict(),
            "rng": self.rng.bit_generator.state,
            "generator": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.ledger.load_state_dict(state["ledger"])  # DataMismatchError for another certificate
        self.opt.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = state["rng"]
        self.gen.set_state(state["generator"])
        self._guard.clear()
        self.report.steps_taken = self.t

    # --- sampling --------------------------------------------------------------------------------

    def batches(self, n: int | None = None) -> Iterator[np.ndarray]:
        """Index arrays for the remaining steps, drawn as the accountant assumes (each is the batch
        the next :meth:`step` uses when it is given no ``idx``)."""
        s = self.plan.sampling
        n = s.dataset_size if n is None else n
        return self._issued(s.batches(n, self.rng, self.remaining))

    def _issued(self, it):
        for idx in it:
            if self.comm is not None:  # every rank must hold the same global batch and ledger (DPS806)
                self.comm.check_step(idx, self.ledger, self.t)
            yield self._guard.issue(idx)

    @property
    def remaining(self) -> int:
        return self.ledger.remaining

    # --- one step -------------------------------------------------------------------------------

    def _check_optimizer(self):
        for g in self.opt.param_groups:
            for k, v in self._hyper.items():
                if g.get(k, 0) != v:
                    raise SrppSoundnessError(
                        f"the optimizer's {k} was changed to {g.get(k)!r} (certified: {v!r})",
                        rule="DPS508",
                        hint="the Lipschitz constants of the certificate depend on the optimizer; recalibrate",
                    )

    def _check_batch(self, idx, rows: int) -> None:
        self._guard.resolve(idx, rows)

    def _nonfinite_policy(self, cs) -> dict:
        """The clipped sums to noise: non-finite per-example gradients were replaced by zero inside
        ``clipped_grad_sum`` (zero is in the clip ball); the step goes on."""
        return cs.sums

    def step(self, xb, yb, idx=None):
        """One private step on the global batch (xb, yb). ``idx``: the training-set indices of its rows
        (default: the batch :meth:`batches` drew for this step), checked against the caps."""
        torch = self.torch
        t = self.t
        self.ledger.require(1)  # BudgetExceededError before anything is computed or drawn
        s = self.plan.sampling
        B = int(xb.shape[0])
        self._check_optimizer()
        self._check_batch(idx, B)
        from dpspec.mechanisms.per_example import clipped_grad_sum

        if s.scheme == "poisson" and s.normalization == "realized" and B == 0:
            # App. E (ii): deterministic (no) update on an empty batch; it is one of the T steps
            self.ledger.charge(1)
            self.report.skipped_steps.append((t, "empty batch (deterministic no-op, App. E)"))
            self.report.batch_sizes.append(0)
            self.report.steps_taken = self.t
            return None
        comm = self.comm
        if comm is not None:  # (xb, yb) is the global batch; clip this rank's contiguous shard
            lo, hi = comm.bounds(B)
            xb, yb = xb[lo:hi], yb[lo:hi]
        cs = clipped_grad_sum(
            self.model,
            self.loss_fn,
            xb,
            yb,
            clip=self.plan.clip,
            per_layer_clips=self.plan.per_layer_clips,
            method=self.method,
        )
        self.report.method = cs.method
        if cs.nonfinite:
            self.report.nonfinite_events.append((t, cs.nonfinite))
        sums = self._nonfinite_policy(cs)
        # the public normaliser B̄ (App. E realised normalisation: B_t, which the caps account for)
        denom = float(B) if s.normalizer == 0.0 else s.normalizer
        std = self.noise_std[t]
        self.ledger.charge(1)  # before the step's noise is drawn
        grads = []
        if comm is not None:

            def noise(j, v):
                sd = float(std[j]) if np.ndim(std) else float(std)
                return sd * standard_normal_like(v, self.gen)

            grads = comm.noisy_sum([sums[k] / denom for k in self.names], noise)
        for j, (k, p) in enumerate(zip(self.names, self.tensors) if comm is None else ()):
            sd = float(std[j]) if np.ndim(std) else float(std)
            noise = standard_normal_like(p, self.gen)  # on p's device, float32 or wider
            grads.append(sums[k] / denom + sd * noise)
        lr = float(self.lrs[t])
        scales = self.plan.optimizer.block_lr_scales
        for i, g in enumerate(self.opt.param_groups):
            g["lr"] = lr * (scales[i] if scales is not None else 1.0)
        for p, g in zip(self.tensors, grads):
            p.grad = g.to(p.dtype)
        self.opt.step()
        for p in self.tensors:
            p.grad = None
        self.report.batch_sizes.append(B)
        if B:
            self.report.losses.append(float(torch.nanmean(cs.losses)) if cs.losses.numel() else float("nan"))
        self.report.clipped_fraction.append(cs.clipped_fraction)
        self.report.steps_taken = self.t
        return cs


class SrppSgdOptimizer(PrivateSgdEngine):
    """SRPP-SGD step by step in your own loop; the noise comes from the calibration (DPS508 checks)."""

    def __init__(
        self,
        model,
        plan: SrppSgdPlan,
        calibration: SRPPSGDCalibration,
        loss_fn: Callable | None = None,
        *,
        seed: int | None = None,
        method: str = "auto",
        comm=None,
        ledger: PrivacyLedger | None = None,
        name: str = "srpp_sgd",
    ):
        if calibration.sampling and calibration.sampling != plan.sampling.describe():
            raise SrppSoundnessError(
                "the calibration was computed for a different sampling scheme",
                rule="DPS508",
                hint="calibrate the plan you train with",
            )
        self.calibration = calibration
        super().__init__(
            model,
            plan,
            plan.gradient_noise_std(calibration),
            loss_fn,
            seed=seed,
            method=method,
            comm=comm,
            ledger=ledger,
            name=name,
        )


def _engine_only(steps: int, delta) -> Spent:
    raise ValueError(
        "this optimizer was built without a certificate: use the mechanism's optimizer "
        "(`compiled.mechanism.optimizer(model)`) or `dpspec.accounting` to ask what it spent"
    )


def train_srpp_sgd(
    model,
    X,
    y,
    plan: SrppSgdPlan,
    calibration: SRPPSGDCalibration,
    loss_fn: Callable | None = None,
    *,
    seed: int | None = None,
    method: str = "auto",
    steps: int | None = None,
    progress: bool = False,
    comm=None,
    ledger: PrivacyLedger | None = None,
) -> TrainingReport:
    """Train ``model`` in place on tensors (X, y) for the remaining certified steps (or ``steps`` of
    them; more raises :class:`BudgetExceededError` before any step).
    ``comm``: data-parallel over a :class:`dpspec.distributed.Comm` (docs/distributed.md)."""
    import time

    if comm is not None:
        comm.broadcast_parameters(model)
    opt = SrppSgdOptimizer(model, plan, calibration, loss_fn, seed=seed, method=method, comm=comm, ledger=ledger)
    return _run(opt, X, y, steps, progress, time.perf_counter())


def _run(opt: PrivateSgdEngine, X, y, steps, progress, t0) -> TrainingReport:
    import time

    n = len(X)
    total = opt.remaining if steps is None else int(steps)
    opt.ledger.require(max(total, 1 if steps is None else 0))  # a run with nothing left is refused
    from dpspec.progress import progress as bar

    for idx in bar(itertools.islice(opt.batches(n), total), total=total, desc="train srpp_sgd", unit="step"):
        ii = opt.torch.as_tensor(idx, dtype=opt.torch.long, device=X.device if opt.torch.is_tensor(X) else None)
        opt.step(X[ii], y[ii], idx)
    opt.report.steps_taken = opt.t
    opt.report.seconds = time.perf_counter() - t0
    return opt.report


def evaluate_accuracy(model, X, y, batch: int = 4096) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(X), batch):
            correct += int((model(X[i : i + batch]).argmax(dim=1) == y[i : i + batch]).sum())
    model.train()
    return correct / max(1, len(X))
