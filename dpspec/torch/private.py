"""``make_private``: a compiled training's runtime behind the ordinary PyTorch loop.

    model, optimizer, loader = dpspec.torch.make_private(compiled, model, optimizer, data_loader)
    for x, y in loader:                         # batches drawn exactly as the certificate says
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()                        # clip per example, noise, charge the ledger, step
    optimizer.get_epsilon(delta)                # ε spent so far (the certificate's accountant)

Nothing here re-implements the runtime: the loader draws with the mechanism's own sampler
(``DpSgd.batches`` / the SRPP-SGD optimizer's ``batches``), and ``optimizer.step()`` calls the
mechanism's own private step (``DpSgd.private_gradients`` — per-example gradients by ``torch.func``
on batches of one, clipped, non-finite ones zeroed, noise σC added once, divided by the certificate's
normaliser, ledger charged before the noise — or ``SrppSgdOptimizer.step``). Every guard of the
runtime applies unchanged: the step budget (BudgetExceededError), the per-batch caps and the
batch-of-this-step rule (CapExceededError), the data size where the analysis uses it
(DataMismatchError). What the wrapper adds (docs/training.md):

* the private gradient is computed from ``criterion`` on each example alone — never from the
  gradient your loop's ``backward()`` left in ``.grad``, which a loss coupling the examples of a
  batch would make unsound. Your loop's loss is checked against it at every step: the gradient it
  back-propagated into the model's output must be the per-example criterion's (mean or sum over
  the batch), and nothing else may have reached the parameters (a regulariser: use the optimizer's
  ``weight_decay``), else :class:`CriterionMismatchError` (DPS165) — after the first step the loss
  check is read one step late (no host read of a step's own device values), so a mismatch refuses
  the next step and names the one taken;
* a train-mode forward must be on the batch the loader drew for this step (CapExceededError), and
  a drawn batch must be stepped on before the next is drawn (skipping a batch — say, one whose loss
  is NaN — would choose batches by their content, which the sampling analysis does not cover);
* the model is checked by :func:`dpspec.torch.validate` (DPS164: no BatchNorm);
* every parameter the wrapped optimizer steps is a parameter of the model that the step noises (a
  parameter added with ``add_param_group`` that the model does not hold, or a frozen one given a
  gradient by hand, is refused before anything moves: :class:`UnnoisedParameterError`, DPS166);
* a non-finite example is zeroed by the step (the runtime's policy) and never stops the run: the loss
  check above compares the finite examples only (:mod:`dpspec.torch.guards`);
* ``load_state_dict`` never lowers the run's ledger (:class:`LedgerRewindError`, DPS167; ``journal=``
  carries the high-water mark across processes), and the optimizer is not copied or pickled
  (:class:`PrivateCopyError`).

In train mode the wrapped model's forward runs without an autograd graph (the private step makes its
own), so your ``backward()`` only reaches the output: the wasted batch gradient is not computed.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn as nn

from dpspec.errors import DpspecError
from dpspec.mechanisms.ledger import (
    CapExceededError,
    CertificateGuardError,
    DataMismatchError,
    LedgerRewindError,
)
from dpspec.torch.guards import (
    PrivateCopyError,
    UnnoisedParameterError,
    check_stepped_parameters,
    close_on_finite_rows,
    close_on_finite_rows_any,
    same_values,
)
from dpspec.torch.validator import validate

if TYPE_CHECKING:
    from dpspec.torch.virtual import VirtualDataLoader

__all__ = [
    "make_private",
    "PrivateModel",
    "PrivateOptimizer",
    "PrivateDataLoader",
    "CriterionMismatchError",
    "SamplingOverrideWarning",
    "UnsupportedTrainingError",
    "UnnoisedParameterError",
    "LedgerRewindError",
    "PrivateCopyError",
]


class CriterionMismatchError(CertificateGuardError, ValueError):
    """The loss a loop back-propagated is not the per-example criterion the private step uses (DPS165)."""

    rule = "DPS165"


class UnsupportedTrainingError(DpspecError, ValueError):
    """The compiled target is not a training whose steps are (x, y) batches of a DataLoader."""


class SamplingOverrideWarning(UserWarning):
    """make_private draws its own batches; the DataLoader's batch size, sampler and shuffle are ignored."""


# --- which runtime -------------------------------------------------------------------------------------


def _family_of(mech):
    """The family whose runtime class ``mech`` is an instance of (None for anything else)."""
    from dpspec.families import FAMILIES, load

    return next((f for f in FAMILIES.values() if f.runtime and isinstance(mech, load(f.runtime))), None)


def _resolve(compiled, target: str | None):
    """The training's runtime object and its backend class (the family's ``torch_backend`` hook)."""
    from dpspec.families import FAMILIES, load

    trainers = tuple(load(f.runtime) for f in FAMILIES.values() if f.torch_backend)
    mech = compiled
    if hasattr(compiled, "mechanisms") and hasattr(compiled, "certificate"):
        mechs = compiled.mechanisms
        if target is not None:
            if target not in mechs:
                raise KeyError(f"the spec has no target `{target}` (targets: {', '.join(sorted(mechs))})")
            mech = mechs[target]
        else:
            found = {k: m for k, m in mechs.items() if isinstance(m, trainers)}
            if len(found) != 1:
                raise ValueError(
                    f"the spec has {len(found)} trainings ({', '.join(sorted(found)) or 'none'}): give target=NAME"
                )
            mech = next(iter(found.values()))
    f = _family_of(mech)
    if f is None or not f.torch_backend:
        raise UnsupportedTrainingError(
            f"make_private needs a compiled DP-SGD or SRPP-SGD training, got {type(mech).__name__}"
        )
    return mech, load(f.torch_backend)(mech)  # the hook raises UnsupportedTrainingError for a family it refuses


# --- the session shared by the three objects -------------------------------------------------------------


@dataclass
class _Batch:
    idx: np.ndarray
    x: Any
    y: Any
    x_model: Any = None  # the input the forward saw (x, possibly moved to a device)
    out: Any = None  # the forward's output (a leaf: the loop's backward stops there)
    out_grad: Any = None  # what the loop's backward put on it
    clipped: Any = None  # the clipped sum computed with that output (DP-SGD), used by the step


class _Session:
    def __init__(self, backend, module, criterion, dataset, collate_fn):
        self.backend, self.module, self.criterion = backend, module, criterion
        self.dataset, self.collate_fn = dataset, collate_fn
        self.pending: _Batch | None = None
        self._grads_set: dict = {}
        self._criterion_checked = False
        self._criterion_sum: bool | None = None  # the criterion sums its examples' values (else: their mean)
        self._loss_checked_once = False  # the first step's loss check is read at once, later ones a step late
        self._verdicts: list[_DeferredVerdict] = []  # loss checks not read yet, oldest first
        self._verdict = self._loss_verdict
        graphed = getattr(backend, "graphed", None)
        # the padded loss check needs the criterion's kind: looked for again on later batches while none told it
        self._needs_kind = graphed is not None and graphed.bucket is not None
        if graphed is not None:  # cuda_graph=True: the loss check is a graph too (its pool the clipped sum's)
            from dpspec.torch import cuda_graph

            if graphed.bucket is None:
                self._verdict = cuda_graph.Replayer(
                    self._loss_verdict, pools=graphed.pools, light=True, roots=cuda_graph.criterion_modules(criterion)
                )
            else:  # Poisson batches: padded as the clipped sum's are, once the criterion's kind is known
                self._verdict = cuda_graph.GraphedLossCheck(
                    self._loss_verdict,
                    graphed.bucket,
                    lambda: self._criterion_sum is not None,
                    pools=graphed.pools,
                    light=True,
                    roots=cuda_graph.criterion_modules(criterion),
                )

    @property
    def ledger(self):
        return self.backend.ledger

    def fetch(self, idx: np.ndarray):
        ds = self.dataset
        if isinstance(ds, torch.utils.data.TensorDataset):
            ii = {torch.device("cpu"): torch.as_tensor(idx, dtype=torch.long)}  # the sampler's indices (host)
            for t in ds.tensors:  # one copy per device holding the data, not one per tensor indexed
                if t.device not in ii:
                    cpu = ii[torch.device("cpu")]
                    # to a GPU through pinned memory, without waiting (the caching host allocator keeps
                    # the pinned block until the copy is done)
                    ii[t.device] = (
                        cpu.pin_memory().to(t.device, non_blocking=True)
                        if t.device.type == "cuda"
                        else cpu.to(t.device)
                    )
            batch = tuple(t[ii[t.device]] for t in ds.tensors)
        elif len(idx):
            batch = self.collate_fn([ds[int(i)] for i in idx])
        else:  # an empty Poisson batch: the structure of one example, with 0 rows
            batch = _empty_like(self.collate_fn([ds[0]]))
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError("make_private needs a dataset of (input, target) pairs")
        return batch[0], batch[1]

    def next_batch(self):
        if self.pending is not None:
            raise CapExceededError(
                f"`{self.ledger.target}`: the batch drawn before was not stepped on. Every batch the loader draws "
                "must be used by `optimizer.step()` before the next one: skipping batches (for instance those "
                "whose loss is NaN — non-finite gradients are zeroed by the step) would choose batches by their "
                "content, which the sampling analysis does not cover. Gradient accumulation across Poisson "
                "batches is not covered either (docs/training.md)."
            )
        idx = self.backend.draw()
        x, y = self.fetch(idx)
        self.pending = _Batch(idx, x, y)
        return x, y

    def check_loss(self, b: _Batch) -> None:
        """The loop back-propagated ``criterion(out, y)`` (mean or sum over the batch) into the output. The
        first time, also that ``criterion`` on the batch is the mean of its per-example values (what the
        private step computes: each example alone); after that one autograd call on the batch suffices.

        The first step's verdict is read at once (before anything is charged). Later steps' verdicts are
        read by the host one step late (:class:`_DeferredVerdict`): a read now would wait for the device to
        finish this step's forward and clipping before the rest of the step could be queued. The check
        is about fidelity, not privacy — the private step's gradient is ``criterion``'s on each example
        alone whatever the loop back-propagated — so a mismatch found a step late refuses the next step and
        names the one taken."""
        self.settle_loss_check()
        G, out = b.out_grad, b.out
        if G is None or out is None or out.shape[0] == 0:
            return
        crit = self.criterion
        B = out.shape[0]
        y = b.y.to(out.device) if torch.is_tensor(b.y) else b.y
        if (not self._criterion_checked or (self._needs_kind and self._criterion_sum is None)) and B > 1:
            o = out.detach().requires_grad_(True)
            with torch.enable_grad():
                (R,) = torch.autograd.grad(crit(o, y), o)  # the batch criterion's gradient
                per = self._per_example_output_grads(o, y)
                mean = close_on_finite_rows(R, per / B)
                summed = close_on_finite_rows(R, per)
                if not (mean or summed):
                    raise CriterionMismatchError(
                        f"`{self.ledger.target}`: `criterion(output, target)` on a batch is not the mean of its "
                        "per-example values (or their sum), so the private step (which computes each "
                        "example's gradient from "
                        "`criterion` on that example alone) would not train the loss of your loop. Give a "
                        "per-example criterion averaged over the batch (e.g. F.cross_entropy)."
                    )
                self._criterion_checked = True
                # the kind where the batch tells it: per-example gradients all ~0 (or non-finite) match both
                if mean != summed:
                    self._criterion_sum = summed
        # a padded check (Poisson batches with cuda_graph=True) rescales the criterion's gradient by padded size ÷
        # batch size, which is right for a criterion that averages over its rows but not for one that averages over
        # its content (ignore_index targets, in the batch or left in the padding rows by an earlier batch): its
        # failures are confirmed by the eager check on the batch itself, so that a loss the eager check passes is
        # never refused (the tensors are this step's own, kept until the verdict is read: for a large output, whose
        # step dwarfs the check, the eager check at once instead)
        padded = getattr(self._verdict, "bucket", None) is not None
        eager_now = padded and G.numel() > _PADDED_CHECK_MAX
        ok = (self._loss_verdict if eager_now else self._verdict)(G, out, y)
        confirm = functools.partial(self._loss_verdict, G, out, y) if padded and not eager_now else None
        if self._loss_checked_once and self.ledger.steps_taken > 0:
            self._verdicts.append(_DeferredVerdict(ok, self.ledger.steps_taken + 1, confirm))
            return
        # the first step (every chunk of it, with virtual batches) decides before anything is charged
        if bool(ok) or (confirm is not None and bool(confirm())):
            self._loss_checked_once = True
            return
        raise CriterionMismatchError(self._mismatch())

    def _loss_verdict(self, G, out, y, pad=None):
        """A 0-dim bool on the device: ``G`` (the gradient the loop back-propagated into the output ``out``) is
        the batch criterion's gradient, of its mean or its sum; a non-finite example is zeroed, not compared.
        A function of its arguments only (replayed as a CUDA graph with ``cuda_graph=True``).

        ``pad`` (a padded Poisson batch, :class:`~dpspec.torch.cuda_graph.GraphedLossCheck`): True on the rows
        past the batch's B, which are not compared. The criterion on the S padded rows has, on each of the
        batch's rows, the batch criterion's gradient (a sum) or S/B times it (a mean: 1/S in place of 1/B),
        which the first check on a batch that tells them apart decided (``_criterion_sum``); B is counted on the
        device."""
        o = out.detach().requires_grad_(True)
        with torch.enable_grad():
            (R,) = torch.autograd.grad(self.criterion(o, y), o)  # the batch criterion's gradient
        if pad is None:
            return close_on_finite_rows_any(G, [R, R * o.shape[0]])
        B = (~pad).sum()
        if not self._criterion_sum:
            R = R * (o.shape[0] / B)
        from dpspec.torch.clipping.kernels import constant

        G = torch.where(pad.reshape((-1,) + (1,) * (G.dim() - 1)), constant(float("nan"), G), G)
        return close_on_finite_rows_any(G, [R, R * B])

    def _mismatch(self, taken: int | None = None) -> str:
        when = (
            ""
            if taken is None
            else f" at step {taken} (found one step late: that step was taken, with the per-example gradient "
            "of `criterion`, and this one is refused)"
        )
        return (
            f"`{self.ledger.target}`: the loss your loop back-propagated{when} is not `criterion(model(x), y)` "
            "(mean or sum over the batch). The private step computes each example's gradient from `criterion` "
            "on that example alone (a loss that couples examples, or another loss, is not what is clipped and "
            "noised): pass the loss you train with as make_private(..., criterion=...)"
        )

    def settle_loss_check(self, wait: bool = False) -> None:
        """Read the loss checks left by earlier steps whose values have reached the host (all of them, waiting
        if need be, with ``wait``): CriterionMismatchError for the first that failed."""
        while self._verdicts and (wait or self._verdicts[0].ready()):
            v = self._verdicts.pop(0)
            if not v.passed():
                self._verdicts.clear()
                raise CriterionMismatchError(self._mismatch(v.step))

    def _per_example_output_grads(self, o, y):
        from torch.func import vmap

        crit = self.criterion

        def one(oi, ti):
            return crit(oi.unsqueeze(0), ti.unsqueeze(0))

        try:  # Σ_i criterion(o_i, y_i): its gradient in o_i is example i's (each term sees o_i only)
            losses = vmap(one)(o, y)
        except RuntimeError:  # a criterion vmap cannot batch: one example at a time
            losses = torch.stack([one(o[i], y[i]) for i in range(o.shape[0])])
        return torch.autograd.grad(losses.sum(), o)[0]

    def check_param_grads(self, named: list | None = None) -> None:
        for k, p in self.module.named_parameters() if named is None else named:
            g = p.grad
            if g is None or not p.requires_grad:
                continue
            seen = self._grads_set.get(k)
            if seen is None or seen != (id(g), g._version):
                raise CriterionMismatchError(
                    f"`{self.ledger.target}`: a gradient reached parameter `{k}` directly (not through the model's "
                    "output), e.g. a regulariser added to the loss; the private step replaces `.grad` with the "
                    "clipped, noised per-example gradient and would drop it silently. Use the optimizer's "
                    "`weight_decay` (a post-processing of the noisy gradient) instead."
                )

    def check_stepped_params(self, param_groups, assigned: dict | None = None, named: list | None = None) -> None:
        """Every parameter the wrapped optimizer steps is noised by the private step (DPS166). The backend's
        ``check_parameters`` when it has one (the audit's mutants re-introduce the earlier hole there).
        ``named``: the model's ``named_parameters()``, walked just before."""
        check = getattr(self.backend, "check_parameters", check_stepped_parameters)
        check(self.module, param_groups, self._grads_set if assigned is None else assigned, self.ledger.target, named)

    def record_param_grads(self, named: list | None = None) -> None:
        named = self.module.named_parameters() if named is None else named
        self._grads_set = {k: (id(p.grad), p.grad._version) for k, p in named if p.grad is not None}


_PADDED_CHECK_MAX = 1 << 20  # output elements up to which a Poisson step's loss check is padded (and replayed)


class _DeferredVerdict:
    """A step's loss check (a 0-dim bool on the device), read by the host at a later step. On CUDA it is
    copied to pinned host memory without waiting, with an event recorded after the copy: a later step
    reads it once the event has completed (``ready``, which does not wait), so no step waits for the
    device; the loader's end waits for the last ones. Elsewhere the value is kept and read then."""

    __slots__ = ("flag", "event", "step", "confirm")

    def __init__(self, ok, step: int, confirm=None):
        self.step = step
        self.event = None
        self.confirm = confirm  # the eager check of a padded one, run if the padded one fails
        if ok.device.type == "cuda":
            self.flag = torch.empty((), dtype=torch.bool, device="cpu", pin_memory=True)  # on the host, on purpose
            self.flag.copy_(ok, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.flag = ok

    def ready(self) -> bool:
        return self.event is None or self.event.query()

    def passed(self) -> bool:
        if self.event is not None:
            self.event.synchronize()
        confirm, self.confirm = self.confirm, None
        return bool(self.flag) or (confirm is not None and bool(confirm()))


def _accepts(cls, name: str) -> bool:
    import inspect

    return name in inspect.signature(cls.__init__).parameters


def _empty_like(batch):
    if torch.is_tensor(batch):
        return batch[:0]
    if isinstance(batch, (tuple, list)):
        return type(batch)(_empty_like(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _empty_like(v) for k, v in batch.items()}
    return batch


def _same_input(x, drawn) -> bool:
    if x is drawn:
        return True
    if not (torch.is_tensor(x) and torch.is_tensor(drawn)):
        return False
    return same_values(x, drawn)


# --- the three objects ---------------------------------------------------------------------------------


class PrivateModel(nn.Module):
    """The user's model (``.module``); in train mode its forward takes the batch the loader drew."""

    def __init__(self, module: nn.Module, session: _Session):
        super().__init__()
        self._module = module
        object.__setattr__(self, "_session", session)

    @property
    def module(self) -> nn.Module:
        return self._module

    @property
    def cuda_graph_status(self) -> str | None:
        """What ``make_private(cuda_graph=True)`` did: how many steps were replayed from CUDA graphs, or why
        none was (:mod:`dpspec.torch.cuda_graph`); None without ``cuda_graph=True``."""
        graphed = getattr(self._session.backend, "graphed", None)
        return None if graphed is None else graphed.status

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:  # the wrapped model's attributes (not while being built or copied)
            modules = self.__dict__.get("_modules")
            if modules is None or "_module" not in modules or name.startswith("__"):
                raise
            return getattr(modules["_module"], name)

    def forward(self, *args, **kwargs):
        s = self._session
        b = s.pending
        if not self.training or not torch.is_grad_enabled() or b is None:
            return self._module(*args, **kwargs)
        if len(args) != 1 or kwargs:
            raise TypeError(
                "in train mode the private model takes the batch's input only: `model(x)` with the x "
                "the loader returned"
            )
        x = args[0]
        if not _same_input(x, b.x):
            raise CapExceededError(
                f"`{s.ledger.target}`: a train-mode forward on an input that is not the batch the private loader "
                "drew for this step; the certificate covers only batches drawn as accounted. Train on the "
                "loader make_private returned (call `model.eval()` to evaluate on other data)."
            )
        b.clipped = None
        if s.backend.clipped_sum is not None and x.shape[0] > 0:
            # the private step's own per-example forward (each example alone): its outputs are the output
            y = b.y.to(x.device) if torch.is_tensor(b.y) else b.y
            cs = s.backend.clipped_sum(x, y)
            if cs.outputs is not None:
                b.clipped, out = cs, cs.outputs
                return self._leaf(b, x, out)
        with torch.no_grad():
            if x.shape[0] == 0:  # an empty Poisson batch: some layers refuse 0 rows; the output has 0 rows
                try:
                    out = self._module(x)
                except RuntimeError:
                    proto = s.fetch(np.zeros(1, dtype=np.int64))[0].to(x.device)
                    out = self._module(proto)[:0]
            else:
                out = self._module(x)
        return self._leaf(b, x, out)

    @staticmethod
    def _leaf(b: _Batch, x, out):
        if not torch.is_tensor(out) or not out.is_floating_point():
            raise TypeError(
                "the private model must return a floating-point tensor (wrap a model that returns a "
                "structure, e.g. a Hugging Face model: `forward(x): return hf(x).logits`)"
            )
        out = out.detach().requires_grad_(True)
        b.x_model, b.out, b.out_grad = x, out, None
        # the hook holds the batch weakly: b → out → hook → b would be a reference cycle, which keeps the
        # step's clipped sums (a copy of the parameters) and outputs alive until Python's cyclic collector runs
        ref = weakref.ref(b)

        def keep_grad(g):
            batch = ref()
            if batch is not None:
                batch.out_grad = g.detach()

        out.register_hook(keep_grad)
        return out


class PrivateDataLoader:
    """Draws each step's batch with the mechanism's sampler (Poisson: possibly empty). One pass is one
    epoch (about 1/q steps), cut at the steps the ledger has left; iterating with nothing left raises
    :class:`BudgetExceededError`."""

    def __init__(self, session: _Session):
        self._s = session
        self.dataset = session.dataset
        self.sample_rate = session.backend.rate
        self.steps_per_epoch = max(1, int(round(1.0 / self.sample_rate)))

    def __len__(self) -> int:
        return max(0, min(self.steps_per_epoch, self._s.ledger.remaining))

    def __iter__(self):
        self._s.ledger.require(1)  # BudgetExceededError: the certificate's steps are all taken
        for _ in range(len(self)):
            if self._s.ledger.remaining == 0:
                break
            yield self._s.next_batch()
        self._s.settle_loss_check(wait=True)  # the last steps' loss checks (read late)


class PrivateOptimizer(torch.optim.Optimizer):
    """The user's optimizer behind the certified private step (``.original_optimizer``)."""

    def __init__(self, inner, session: _Session, mechanism):
        # share the wrapped optimizer's state (LR schedulers see the same param_groups); no super().__init__
        self.original_optimizer = inner
        self.defaults = inner.defaults
        self.param_groups = inner.param_groups
        self.state = inner.state
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        self._session = session
        self.mechanism = mechanism

    def __repr__(self) -> str:
        return f"PrivateOptimizer({self.original_optimizer!r}, target={self.mechanism.name!r})"

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.original_optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of the model's parameters (unfreezing a layer, say); a parameter the model does not
        hold is refused at once (:class:`UnnoisedParameterError`, DPS166): the private step would not noise it."""
        if not isinstance(param_group, dict):
            raise TypeError("a param group is a dict")
        params = param_group.get("params")
        params = [params] if torch.is_tensor(params) else list(params or [])  # a generator is read once
        self._session.check_stepped_params([{"params": params}])
        self.original_optimizer.add_param_group({**param_group, "params": params})

    def __reduce_ex__(self, protocol):
        raise PrivateCopyError(
            "a private optimizer cannot be copied or pickled: a copy would hold copies of the "
            "model's parameters and of the run's session, outside its ledger. Save "
            "`optimizer.state_dict()` with the model's and call make_private again to resume."
        )

    def __copy__(self):
        self.__reduce_ex__(2)

    def __deepcopy__(self, memo):
        self.__reduce_ex__(2)

    def step(self, closure: Callable | None = None):
        if closure is not None:
            raise TypeError("the private step takes no closure: the gradient is recomputed per example")
        s = self._session
        b = s.pending
        if b is None:
            s.ledger.require(1)
            raise CapExceededError(
                f"`{s.ledger.target}`: no batch drawn by the private loader is waiting for this step; iterate the "
                "loader make_private returned (each step uses the batch it drew)"
            )
        # one walk of the model for the checks around the step and the step's own setting of the gradients
        named = list(s.module.named_parameters())
        # DPS166, before anything is charged or moves: the groups the wrapped optimizer will step
        s.check_stepped_params(self.original_optimizer.param_groups, named=named)
        s.check_param_grads(named)
        s.check_loss(b)
        x = b.x_model if b.x_model is not None else b.x
        y = b.y.to(x.device) if torch.is_tensor(b.y) and torch.is_tensor(x) else b.y
        s.backend.step(x, y, b.idx, b.clipped, named=named)
        s.pending = None
        b.clipped = b.out = b.out_grad = None  # let the step's tensors go now (the batch may be referenced on)
        s.record_param_grads(named)

    # --- the privacy ledger ---------------------------------------------------------------------------

    def privacy_spent(self, delta: float | None = None):
        """ε spent after the steps taken (:class:`~dpspec.mechanisms.ledger.Spent`), the certificate's accountant."""
        return self.mechanism.privacy_spent(delta)

    def get_epsilon(self, delta: float | None = None) -> float:
        """ε spent so far at ``delta`` (default: the certificate's δ; SRPP-SGD: ε(α), no δ)."""
        return float(self.privacy_spent(delta).epsilon)

    @property
    def steps_taken(self) -> int:
        return self._session.ledger.steps_taken

    @property
    def steps_remaining(self) -> int:
        return self._session.ledger.remaining

    @property
    def nonfinite_examples(self) -> int:
        """How many examples' gradients were non-finite and zeroed so far: a function of the private data,
        not covered by the certificate — for debugging, never to publish."""
        return int(getattr(self._session.backend, "nonfinite_examples", 0))

    def ledger_state(self) -> dict:
        return self.mechanism.ledger_state()

    def state_dict(self) -> dict:
        """The wrapped optimizer's state, the ledger and the samplers' generators (a checkpoint)."""
        return {"dpspec": self._session.backend.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Resume from :meth:`state_dict` (a state of another certificate raises DataMismatchError)."""
        if not isinstance(state, dict) or "dpspec" not in state:
            raise DataMismatchError("a private optimizer resumes from its own state_dict() (with the ledger)")
        self._session.backend.load_state_dict(state["dpspec"])
        self._session.pending = None


def make_private(
    compiled,
    model: nn.Module,
    optimizer,
    data_loader,
    *,
    criterion: Callable | None = None,
    target: str | None = None,
    seed: int | None = None,
    journal=None,
    max_physical_batch_size: int | None = None,
    secure: bool = False,
    cuda_graph: bool = False,
    block_size: int | None = None,
):
    """(model, optimizer, loader) that train ``model`` as the compiled training's certificate says.

    ``compiled``: ``dpspec.compile(spec)`` (``target=`` picks a training when it has several) or the
    mechanism object. ``optimizer``: any torch optimizer over ``model``'s parameters (DP-SGD: it post-
    processes the noisy gradient; SRPP-SGD: ignored with a warning, its certificate fixes the optimizer).
    ``data_loader``: only its ``dataset`` (and ``collate_fn``) is used; batches are drawn as certified
    and its batch size / sampler / shuffle are ignored (a :class:`SamplingOverrideWarning` says so).
    ``criterion``: the per-example loss ``criterion(output, target)`` (default cross-entropy); the loop's
    loss must be it (mean or sum). ``seed``: for reproducible sampling and noise (never in production).
    ``journal``: a file keeping the run's high-water mark across processes (give the same path to every
    process that resumes the run): a checkpoint older than the steps already charged is then refused there
    too (:class:`LedgerRewindError`, docs/training.md).
    ``max_physical_batch_size``: the loader yields each certified batch in chunks of at most that many
    rows and ``optimizer.step()`` steps once per batch (:mod:`dpspec.torch.virtual`; DP-SGD only).
    ``block_size``: the clipped sum is computed on blocks of that many rows, each alone, added in order:
    the same step bit for bit with or without ``max_physical_batch_size`` (which must be a multiple of it),
    at the speed of batches of ``block_size`` rows (DP-SGD only; docs/training.md, "Virtual batches").
    ``secure``: the batches and the noise from the OS CSPRNG, the noise as integer noise on a power-of-two
    grid added exactly (:mod:`dpspec.mechanisms.secure_noise_training`; DP-SGD only, no seed).
    ``cuda_graph``: on CUDA, the clipped per-example sum (forward, backward, norms, clip, sums) is replayed
    as a CUDA graph once a batch shape has been seen twice: one launch instead of a few hundred, for models
    whose step the host's launches bound (:mod:`dpspec.torch.cuda_graph`; DP-SGD only; Poisson batches are
    padded to a few sizes; ``model.cuda_graph_status`` says what happened). A step that reads a tensor no
    graph could watch (one in a closure or a global, not a buffer or a module attribute) is not replayed.
    Raises :class:`~dpspec.torch.validator.ModuleValidationError` (DPS164) for a model with BatchNorm,
    :class:`UnsupportedTrainingError` for a relational training (use its own trainer)."""
    mech, backend_class = _resolve(compiled, target)
    if isinstance(model, PrivateModel):
        raise ValueError("this model is already wrapped by make_private")
    validate(model, strict=True)
    if criterion is None:
        criterion = nn.functional.cross_entropy
    dataset = getattr(data_loader, "dataset", data_loader)
    n = len(dataset)
    collate = getattr(data_loader, "collate_fn", None) or torch.utils.data.default_collate
    if optimizer is not None:
        ours = {id(p) for p in model.parameters()}
        if any(id(p) not in ours for g in optimizer.param_groups for p in g["params"]):
            raise UnnoisedParameterError(
                f"`{mech.name}`: the optimizer holds parameters that are not the model's, which the private step "
                "would not noise (after dpspec.torch.fix(model), build the optimizer on the returned model)"
            )
    extra: dict = {"secure": True} if secure else {}  # a backend without a secure mode is never asked for one
    if block_size is not None:
        if not _accepts(backend_class, "block_size"):
            raise ValueError(f"block_size is for DP-SGD trainings; `{mech.name}` is not one")
        from dpspec.mechanisms.per_example import whole_blocks

        extra["block_size"] = whole_blocks(block_size, max_physical_batch_size)
    if cuda_graph:
        if not _accepts(backend_class, "cuda_graph"):
            raise ValueError(f"cuda_graph=True is for DP-SGD trainings; `{mech.name}` is not one")
        extra["cuda_graph"] = True
    backend = backend_class(mech, model, optimizer, criterion, n, seed, **extra)
    if journal is not None:
        mech.ledger.attach_journal(journal)
    bs = getattr(data_loader, "batch_size", None)
    if data_loader is not dataset:
        warnings.warn(
            f"make_private draws each step's batch as the certificate of `{mech.name}` says "
            f"({backend.describe}); the DataLoader's batch_size={bs}, sampler and shuffle are ignored",
            SamplingOverrideWarning,
            stacklevel=2,
        )
    session = _Session(backend, model, criterion, dataset, collate)
    loader: PrivateDataLoader | VirtualDataLoader = PrivateDataLoader(session)
    if max_physical_batch_size is not None:
        from dpspec.torch.virtual import VirtualDataLoader

        loader = VirtualDataLoader(loader, max_physical_batch_size)
    return PrivateModel(model, session), PrivateOptimizer(backend.inner, session, mech), loader
