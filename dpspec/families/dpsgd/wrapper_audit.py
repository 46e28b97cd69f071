"""Runtime audits of ``dpspec.torch.make_private`` (the ordinary PyTorch loop around the DP-SGD runtime).

The targets of :mod:`.audit` drive the runtime object itself; these drive it the way a user's loop
does — through ``make_private``'s loader, model and optimizer — with the canary neighbours of the
privacy audit (:mod:`.dpsgd`: zero-gradient records plus a canary of gradient ``canary_scale``·C on D₁)
and a loop that tries one of the wrapper's earlier holes (issue 22):

* ``wrapper rewind``: the loop saves ``optimizer.state_dict()`` before its first step, trains, reloads
  the checkpoint (with a fresh noise generator state) and trains again, ``rewinds`` times (default
  50), stopping when a reload is refused. Observed: the canary coordinate of every noisy gradient the
  wrapped optimizer is handed (rewinds × T steps; zeros after a refusal). A ledger that a checkpoint
  rewinds releases rewinds × T noisy steps (mutant ``ledger_rewind``).
* ``wrapper parameter``: the loop adds a parameter ``temp`` with ``add_param_group`` and trains on
  ``loss + temp·Σx`` — the exact data gradient of ``temp`` would reach it. Observed: the T noisy steps
  and ``temp`` at the end (mutant ``unnoised_param_group``: a wrapper without the parameter check).
* ``wrapper non-finite``: D₁'s canary has a NaN input (D₀: a zero-gradient record). Observed: the T
  noisy steps, whether they are finite, and how many steps the loop completed before an error. A run
  that stops (the wrapper's earlier loss check raised at the step sampling the record) or a step
  poisoned by the record (mutant ``nonfinite_voids_step`` through the wrapper) tells the worlds apart.

Claim: the certificate's ε for all T steps (each observation is a post-processing of the certified
transcript when the wrapper keeps its promises). Trials: for full-batch sampling, many trials share
one run (trial r owns parameter r of a block model and a block of records, as in :mod:`.canary`: every
batch is the whole dataset, so the trials stay independent); otherwise one run per trial (each with
its own Poisson or fixed-size batch stream), which costs T steps per trial (T × rewinds on a ledger
that a reload rewinds) — run on certificates of at most ``max_wrapper_steps`` = 16 steps then (full
batch: ``max_budget_steps`` = 40).
"""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np

from dpspec.audit.base import AuditContext
from dpspec.audit.runtime import RuntimeAudit, oriented, runtime_targets, skip, with_options

from .canary import DpSgdAudit, _block_model, _linear_loss

__all__ = ["WrapperRewindAudit", "WrapperParameterAudit", "WrapperNonFiniteAudit", "wrapper_mutants", "wrapper_targets"]


class _WrapperAudit(RuntimeAudit, DpSgdAudit):
    default_trials = 200
    max_trials = 300

    def __init__(self, ctx: AuditContext, factor: float = 1.0):
        try:
            import torch  # noqa: F401
        except ImportError:  # pragma: no cover - torch is a dependency of the training extra
            raise skip(f"{self.check}: needs torch (dpspec.torch)") from None
        T = int(ctx.record.mechanism.parameters["steps"])
        chunked = str(ctx.record.mechanism.parameters["sampling"]) == "full_batch"
        cap = int(ctx.options.get("max_budget_steps", 40) if chunked else ctx.options.get("max_wrapper_steps", 16))
        if T > cap:
            how = "full-batch trials share a run" if chunked else "one make_private run per trial"
            raise skip(
                f"{self.check}: the certificate covers {T} steps; the wrapper audits ({how}) run on certificates "
                f"of at most {cap} steps (option {'max_budget_steps' if chunked else 'max_wrapper_steps'}; "
                "tests/torch/test_private_promises.py checks the wrapper's promises themselves)"
            )
        super().__init__(with_options(ctx, steps=T))  # the claim: the certificate's ε for all T steps
        self.k_req = int(math.ceil(factor * T))
        self.chunk = int(ctx.options.get("chunk") or 128) if chunked else 1

    def _data(self, R: int, world: int, nan: bool = False):
        """R blocks of the n records (block r: trial r's records, its canary slot(s) first), inputs in
        trial r's columns of the block model."""
        import torch

        n = int(self.n or 0)  # set by DpSgdAudit (K + 1 without a declared size)
        base = self.scale * np.array(self.layer_clips)
        slot = base if world else (-base if self.relation == "substitution" else np.zeros_like(base))
        X = torch.zeros(R * n, R * self.L, dtype=torch.float64)
        for r in range(R):
            cols = r + R * np.arange(self.L)
            for j in range(self.K):
                X[r * n + j, cols] = float("nan") if (nan and world) else torch.from_numpy(slot)
        return torch.utils.data.TensorDataset(X, torch.zeros(R * n, dtype=torch.float64))

    def _wrap(self, R: int, world: int, seed: int, nan: bool = False):
        import warnings

        import torch

        from dpspec.torch import SamplingOverrideWarning, make_private

        run = dataclasses.replace(self.ctx.mechanism)  # a fresh run (its own ledger)
        model = _block_model(R, self.L)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SamplingOverrideWarning)
            wrapped, opt, loader = make_private(
                run,
                model,
                torch.optim.SGD(model.parameters(), lr=0.0),
                self._data(R, world, nan),
                criterion=_linear_loss,
                seed=seed,
            )
        return run, model, wrapped, opt, loader

    def _step(self, run, model, wrapped, opt, x, y, extra=None) -> np.ndarray:
        """One step of the user's loop; the un-normalised noisy canary coordinates, shape (R, L)."""
        opt.zero_grad()
        loss = _linear_loss(wrapped(x), y)
        if extra is not None:
            loss = loss + extra(x)
        loss.backward()
        opt.step()
        return np.stack([w.grad.detach().numpy() * run.normalizer for w in model.ws], axis=1)

    def _chunks(self, n: int):
        c0 = 0
        while c0 < n:
            R = min(self.chunk, n - c0)
            yield c0, R
            c0 += R

    def _transcript_stats(self, k: int) -> dict:
        """The privacy audit's statistics on the first k·L columns (the canary coordinates)."""
        saved = self.k

        def on(f):
            def g(x):
                self.k = k
                try:
                    return f(np.nan_to_num(x[:, : k * self.L]))
                finally:
                    self.k = saved

            return g

        return {name: on(f) for name, f in DpSgdAudit.statistics(self, None, None).items()}


class WrapperRewindAudit(_WrapperAudit):
    check = "wrapper rewind"

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx, float(ctx.options.get("rewinds", 50)))
        self.rewinds = self.k_req // self.T
        self.k = self.k_req

    def neighbours(self) -> str:
        return (
            DpSgdAudit.neighbours(self).rsplit(";", 1)[0] + f"; through make_private, the loop reloads the "
            f"checkpoint taken before its first step {self.rewinds} times (fresh noise each time), training "
            f"{self.T} step(s) after each reload, and stops when a reload is refused"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        from dpspec.mechanisms.ledger import LedgerRewindError

        out = np.zeros((n, self.k_req * self.L))
        seeds = rng.integers(0, 2**62, size=(n, self.rewinds + 1))
        for c0, R in self._chunks(n):
            run, model, wrapped, opt, loader = self._wrap(R, world, int(seeds[c0, -1]))
            ckpt = opt.state_dict()
            t = 0
            for r in range(self.rewinds):
                state = copy.deepcopy(ckpt)
                state["dpspec"]["generator"] = torch.Generator().manual_seed(int(seeds[c0, r])).get_state()
                try:
                    opt.load_state_dict(state)
                except LedgerRewindError:
                    break  # refused: nothing more is released
                while opt.steps_remaining and t < self.k_req:
                    for x, y in loader:
                        out[c0 : c0 + R, t * self.L : (t + 1) * self.L] = self._step(run, model, wrapped, opt, x, y)
                        t += 1
        return out

    def statistics(self, x0, x1):
        return self._transcript_stats(self.k_req)


class WrapperParameterAudit(_WrapperAudit):
    check = "wrapper parameter"

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        self.k = self.T

    def neighbours(self) -> str:
        return (
            DpSgdAudit.neighbours(self).rsplit(";", 1)[0] + f"; through make_private, the loop adds a "
            f"parameter temp with add_param_group and trains {self.T} step(s) on loss + temp·Σx; observed: "
            "the noisy steps and temp"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        from dpspec.torch import UnnoisedParameterError

        T, L = self.T, self.L
        out = np.zeros((n, T * L + 1))
        seeds = rng.integers(0, 2**62, size=n)
        for c0, R in self._chunks(n):
            run, model, wrapped, opt, loader = self._wrap(R, world, int(seeds[c0]))
            temp = torch.nn.Parameter(torch.zeros(R, dtype=torch.float64))

            def extra(x, temp=temp, R=R):
                return (temp * x.reshape(x.shape[0], L, R).sum(dim=(0, 1))).sum()

            try:
                opt.add_param_group({"params": [temp], "lr": 1.0})
            except UnnoisedParameterError:
                pass  # refused: the loop trains without it
            t = 0
            try:
                while opt.steps_remaining:
                    for x, y in loader:
                        out[c0 : c0 + R, t * L : (t + 1) * L] = self._step(run, model, wrapped, opt, x, y, extra)
                        t += 1
            except UnnoisedParameterError:
                pass  # the step was refused before anything moved
            out[c0 : c0 + R, -1] = temp.detach().numpy()
        return out

    def statistics(self, x0, x1):
        stats = self._transcript_stats(self.T)
        stats["temp"] = oriented(lambda x: x[:, -1], x0, x1)
        return stats


class WrapperNonFiniteAudit(_WrapperAudit):
    check = "wrapper non-finite"

    def __init__(self, ctx: AuditContext):
        super().__init__(ctx)
        self.k = self.T

    def neighbours(self) -> str:
        unit = f"{self.K} canaries" if self.K > 1 else "one canary"
        return (
            f"{self.n} zero-gradient records plus {unit} whose input is NaN on D₁ and whose gradient is 0 on "
            f"D₀; through make_private, {self.T} step(s) of the loop; observed: the noisy steps, whether they "
            "are finite, and the steps completed before an error"
        )

    def sample(self, world: int, n: int, rng: np.random.Generator) -> np.ndarray:
        from dpspec.mechanisms.errors import CertificateGuardError

        T, L = self.T, self.L
        out = np.zeros((n, T * L + 2))
        seeds = rng.integers(0, 2**62, size=n)
        for c0, R in self._chunks(n):
            run, model, wrapped, opt, loader = self._wrap(R, world, int(seeds[c0]), nan=True)
            t = 0
            try:
                while opt.steps_remaining:
                    for x, y in loader:
                        out[c0 : c0 + R, t * L : (t + 1) * L] = self._step(run, model, wrapped, opt, x, y)
                        t += 1
            except (CertificateGuardError, ValueError):
                pass  # the run stopped early
            block = out[c0 : c0 + R, : T * L]
            out[c0 : c0 + R, -2] = (~np.isfinite(block)).sum(axis=1)
            out[c0 : c0 + R, -1] = t
        return out

    def statistics(self, x0, x1):
        stats = self._transcript_stats(self.T)
        stats["nonfinite"] = lambda x: x[:, -2]
        stats["stopped_early"] = lambda x: self.T - x[:, -1]
        return stats


# --- the wrapper's earlier holes, re-introduced (the family's ``audit.mutate``) ---------------------------


def wrapper_mutants() -> dict:
    """{kind: DpSgd subclass}: ``ledger_rewind`` — the ledger as it was before its high-water mark (a
    loaded state sets the count, copies hold their own count); ``unnoised_param_group`` — make_private's
    backend without the parameter check (a parameter the model does not hold is stepped on its gradient)."""
    return _classes()


def _classes():
    global _CACHE
    if _CACHE is None:
        import uuid

        from dpspec.families.dpsgd.runtime import DpSgd
        from dpspec.families.dpsgd.torch_backend import DpSgdBackend
        from dpspec.mechanisms.ledger import PrivacyLedger, _Run

        class RewindableLedger(PrivacyLedger):
            def load_state_dict(self, state: dict) -> None:
                self._run = _Run(uuid.uuid4().hex, int(state["steps_taken"]))

        @dataclasses.dataclass(frozen=True)
        class RewindableDpSgd(DpSgd):
            """DP-SGD whose ledger a checkpoint rewinds."""

            def __post_init__(self):
                super().__post_init__()
                self.ledger.__class__ = RewindableLedger

        class UncheckedBackend(DpSgdBackend):
            @staticmethod
            def check_parameters(*args) -> None:
                return None

        @dataclasses.dataclass(frozen=True)
        class UncheckedWrapperDpSgd(DpSgd):
            """DP-SGD behind a make_private without the parameter check."""

            torch_backend = UncheckedBackend

        _CACHE = {"ledger_rewind": RewindableDpSgd, "unnoised_param_group": UncheckedWrapperDpSgd}
    return _CACHE


_CACHE: dict | None = None


def wrapper_targets(ctx: AuditContext) -> list:
    return runtime_targets(ctx, (WrapperRewindAudit, WrapperParameterAudit, WrapperNonFiniteAudit))
