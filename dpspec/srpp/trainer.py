"""SRPP-SGD runtime: a private optimizer usable in your own loop, and a trainer (torch, lazy).

    opt = SrppSgdOptimizer(model, plan, cal, seed=0)
    for idx in opt.batches():                 # drawn exactly as the accountant assumes
        opt.step(X[idx], y[idx])              # clip, average, add the certified noise, SGD step
    opt.report                                # what happened, including skipped examples

What the certificate assumes, this object does (ZV25 Algorithm 1):
* batches drawn by the plan's :class:`~dpspec.srpp.sampling.Sampling` (WOR/WR/Poisson), at most
  T steps (DPS510 beyond), batch sizes checked;
* per-example gradients clipped (flat ℓ2 C or per-layer C_e; :mod:`dpspec.mechanisms.per_example`),
  summed, divided by the plan's normaliser B̄ (or the realised B_t, App. E);
* Gaussian noise with the std of :meth:`SrppSgdPlan.gradient_noise_std` added to the mean clipped
  gradient *before* the optimizer (so momentum sees the noisy gradient and the released trajectory
  determines the optimizer state);
* torch.optim.SGD with the plan's momentum / Nesterov / weight decay and the scheduled η_t, checked
  before every step (DPS508 if someone changed them).

Non-finite per-example gradients are dropped (contribution 0, still within the clip ball) and
recorded in ``report.nonfinite_events``; a non-finite noisy gradient (never expected) skips the
step and is recorded as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from dpspec.accounting.huc import SRPPSGDCalibration, SrppSoundnessError

from .plan import SrppSgdPlan

__all__ = ["TrainingReport", "PrivateSgdEngine", "SrppSgdOptimizer", "train_srpp_sgd", "evaluate_accuracy"]


@dataclass
class TrainingReport:
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
        return {"steps_planned": self.steps_planned, "steps_taken": self.steps_taken,
                "nonfinite_examples": int(sum(n for _, n in self.nonfinite_events)),
                "skipped_steps": len(self.skipped_steps), "noise_std_first": self.noise_std_first,
                "noise_std_last": self.noise_std_last, "mean_clipped_fraction":
                    float(np.mean(self.clipped_fraction)) if self.clipped_fraction else float("nan"),
                "final_loss": float(np.nanmean(self.losses[-10:])) if self.losses else float("nan"),
                "method": self.method, "seconds": self.seconds}


class PrivateSgdEngine:
    """Noisy clipped SGD with an explicit per-step gradient-noise std (T,) or (T, E).

    The low-level engine shared by :class:`SrppSgdOptimizer` (noise from a calibration) and the
    group-DP-SGD baseline (noise from an RDP calibration).
    """

    def __init__(self, model, plan: SrppSgdPlan, noise_std, loss_fn: Callable | None = None, *,
                 seed: int | None = None, method: str = "auto", comm=None):
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
            raise ValueError(f"per_layer_clips has {len(plan.per_layer_clips)} entries but the model has "
                             f"{len(self.names)} trainable parameter tensors")
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
        self.opt = torch.optim.SGD(self.tensors, lr=float(self.lrs[0]), momentum=o.momentum, nesterov=o.nesterov,
                                   weight_decay=o.weight_decay)
        if o.block_lr_scales is not None:
            # one param group per block so each gets its own step size
            self.opt = torch.optim.SGD([{"params": [p], "lr": float(self.lrs[0] * s)}
                                        for p, s in zip(self.tensors, o.block_lr_scales)],
                                       lr=float(self.lrs[0]), momentum=o.momentum, nesterov=o.nesterov,
                                       weight_decay=o.weight_decay)
        self._hyper = {"momentum": o.momentum, "nesterov": o.nesterov, "weight_decay": o.weight_decay, "dampening": 0}
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator().manual_seed(int(self.rng.integers(2**62)))
        self.t = 0
        self.report = TrainingReport(steps_planned=plan.steps, noise_std_first=float(np.ravel(std)[0]),
                                     noise_std_last=float(np.ravel(std)[-1]))

    # --- sampling --------------------------------------------------------------------------------

    def batches(self, n: int | None = None) -> Iterator[np.ndarray]:
        """Index arrays for the remaining steps, drawn as the accountant assumes."""
        s = self.plan.sampling
        n = s.dataset_size if n is None else n
        if self.comm is not None:  # every rank must hold the same global batch (DPS806)
            return self._checked(s.batches(n, self.rng, self.plan.steps - self.t))
        return s.batches(n, self.rng, self.plan.steps - self.t)

    def _checked(self, it):
        for idx in it:
            self.comm.check_consensus(idx, self.t)
            yield idx

    @property
    def remaining(self) -> int:
        return self.plan.steps - self.t

    # --- one step -------------------------------------------------------------------------------

    def _check_optimizer(self):
        for g in self.opt.param_groups:
            for k, v in self._hyper.items():
                if g.get(k, 0) != v:
                    raise SrppSoundnessError(
                        f"the optimizer's {k} was changed to {g.get(k)!r} (certified: {v!r})", rule="DPS508",
                        hint="the Lipschitz constants of the certificate depend on the optimizer; recalibrate")

    def step(self, xb, yb):
        torch = self.torch
        t = self.t
        if t >= self.plan.steps:
            raise SrppSoundnessError(f"the certificate covers {self.plan.steps} steps; step {t + 1} is not covered",
                                     rule="DPS510", hint="calibrate for more steps")
        s = self.plan.sampling
        B = int(xb.shape[0])
        if s.scheme in ("wor", "wr") and B != s.batch_size:
            raise SrppSoundnessError(f"batch of {B} examples, the certificate assumes exactly {s.batch_size}",
                                     rule="DPS510", hint="draw batches with .batches()")
        self._check_optimizer()
        from dpspec.mechanisms.per_example import clipped_grad_sum

        if s.scheme == "poisson" and s.normalization == "realized" and B == 0:
            # App. E (ii): deterministic (no) update on an empty batch
            self.report.skipped_steps.append((t, "empty batch (deterministic no-op, App. E)"))
            self.report.batch_sizes.append(0)
            self.t += 1
            return None
        comm = self.comm
        if comm is not None:  # (xb, yb) is the global batch; clip this rank's contiguous shard
            lo, hi = comm.bounds(B)
            xb, yb = xb[lo:hi], yb[lo:hi]
        cs = clipped_grad_sum(self.model, self.loss_fn, xb, yb, clip=self.plan.clip,
                              per_layer_clips=self.plan.per_layer_clips, method=self.method)
        self.report.method = cs.method
        if cs.nonfinite:
            self.report.nonfinite_events.append((t, cs.nonfinite))
        denom = float(B) if s.normalizer == 0.0 else s.normalizer
        std = self.noise_std[t]
        grads = []
        if comm is not None:
            def noise(j, v):
                sd = float(std[j]) if np.ndim(std) else float(std)
                return sd * torch.randn(v.shape, generator=self.gen, dtype=v.dtype)
            grads = comm.noisy_sum([cs.sums[k] / denom for k in self.names], noise)
        for j, (k, p) in enumerate(zip(self.names, self.tensors) if comm is None else ()):
            sd = float(std[j]) if np.ndim(std) else float(std)
            noise = torch.randn(p.shape, generator=self.gen, dtype=p.dtype)
            grads.append(cs.sums[k] / denom + sd * noise)
        if not all(bool(torch.isfinite(g).all()) for g in grads):
            self.report.skipped_steps.append((t, "non-finite noisy gradient"))
            self.t += 1
            return cs
        lr = float(self.lrs[t])
        scales = self.plan.optimizer.block_lr_scales
        for i, g in enumerate(self.opt.param_groups):
            g["lr"] = lr * (scales[i] if scales is not None else 1.0)
        for p, g in zip(self.tensors, grads):
            p.grad = g
        self.opt.step()
        for p in self.tensors:
            p.grad = None
        self.report.batch_sizes.append(B)
        if B:
            self.report.losses.append(float(torch.nanmean(cs.losses)) if cs.losses.numel() else float("nan"))
        self.report.clipped_fraction.append(cs.clipped_fraction)
        self.t += 1
        self.report.steps_taken = self.t
        return cs


class SrppSgdOptimizer(PrivateSgdEngine):
    """SRPP-SGD step by step in your own loop; the noise comes from the calibration (DPS508 checks)."""

    def __init__(self, model, plan: SrppSgdPlan, calibration: SRPPSGDCalibration, loss_fn: Callable | None = None,
                 *, seed: int | None = None, method: str = "auto", comm=None):
        if calibration.sampling and calibration.sampling != plan.sampling.describe():
            raise SrppSoundnessError("the calibration was computed for a different sampling scheme", rule="DPS508",
                                     hint="calibrate the plan you train with")
        self.calibration = calibration
        super().__init__(model, plan, plan.gradient_noise_std(calibration), loss_fn, seed=seed, method=method,
                         comm=comm)


def train_srpp_sgd(model, X, y, plan: SrppSgdPlan, calibration: SRPPSGDCalibration, loss_fn: Callable | None = None,
                   *, seed: int | None = None, method: str = "auto", steps: int | None = None,
                   progress: bool = False, comm=None) -> TrainingReport:
    """Train ``model`` in place on tensors (X, y) for the certified number of steps (or fewer).
    ``comm``: data-parallel over a :class:`dpspec.distributed.Comm` (docs/distributed.md)."""
    import time

    if comm is not None:
        comm.broadcast_parameters(model)
    opt = SrppSgdOptimizer(model, plan, calibration, loss_fn, seed=seed, method=method, comm=comm)
    return _run(opt, X, y, steps, progress, time.perf_counter())


def _run(opt: PrivateSgdEngine, X, y, steps, progress, t0) -> TrainingReport:
    import time

    n = len(X)
    total = opt.remaining if steps is None else min(int(steps), opt.remaining)
    for i, idx in enumerate(opt.batches(n)):
        if i >= total:
            break
        ii = opt.torch.as_tensor(idx, dtype=opt.torch.long)
        opt.step(X[ii], y[ii])
        if progress and (i % max(1, total // 10) == 0 or i == total - 1):
            print(f"  step {i + 1}/{total}", flush=True)
    opt.report.steps_taken = opt.t
    opt.report.seconds = time.perf_counter() - t0
    return opt.report


def evaluate_accuracy(model, X, y, batch: int = 4096) -> float:
    import torch

    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(X), batch):
            correct += int((model(X[i:i + batch]).argmax(dim=1) == y[i:i + batch]).sum())
    model.train()
    return correct / max(1, len(X))
