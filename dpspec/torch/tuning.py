"""``dpspec.torch.tune``: hyper-parameter tuning charged to the budget, with the ordinary PyTorch loop.

    result = dpspec.torch.tune(
        compiled,                                   # a spec with a `tune` block over a DP-SGD training
        make_model=lambda s: Net(),                 # a fresh model per run (s: the run's candidate settings)
        make_optimizer=lambda params, s: torch.optim.SGD(params, lr=s["learning_rate"]),
        data_loader=train_loader,                   # its dataset only: batches are drawn as certified
        train_fn=train_one,                         # train_one(model, optimizer, loader, s): your loop
        score_fn=lambda model: correct(model, val), # per-record values in [0, 1] (private score)
    )
    result.model, result.settings, result.run_certificate

Each run is :func:`dpspec.torch.make_private` over a fresh copy of its candidate's compiled mechanism, with a
ledger of its own over the candidate's certified steps: the run's loader draws its batches as the candidate's
certificate says and stops at its steps (another pass raises ``BudgetExceededError``), and its optimizer's
``step()`` is the certified private step. The number of runs K, each run's candidate and the private score's noise
are drawn by the tuning's own generator (the operating system's entropy; :meth:`TunedTraining.run
<dpspec.tuning.runtime.TunedTraining.run>`), never by the caller; only the best run's model and settings (and its
noisy score where the spec releases it) come back, with the run certificate of the whole procedure, which states
what the procedure spent (never less: the certified whole-procedure ε, or with early stopping the composition of
the capped runs). With a random K, ``train_fn`` and ``score_fn`` see every run: they must not release how many
there were (logs, counters, running time) — the certificate's ``only_the_best`` assumption.

The learning rate and momentum of a candidate (its settings) are set on the optimizer's parameter groups, so the
run trains with the candidate the selection reports; every privacy number (noise, clipping, sampling rate, steps)
comes from the candidate's certificate, whatever the optimizer or the loader say.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch.nn as nn

from dpspec.torch.private import SamplingOverrideWarning, UnsupportedTrainingError, make_private

__all__ = ["tune"]


def _resolve_tuning(compiled, target: str | None):
    """The compiled tuning procedure (``dpspec.tuning.runtime.TunedTraining``) of ``compiled``."""
    from dpspec.tuning.runtime import TunedTraining

    if isinstance(compiled, TunedTraining):
        return compiled
    mechs = getattr(compiled, "mechanisms", None)
    if mechs is None:
        raise UnsupportedTrainingError(f"tune needs a compiled spec with a `tune` block, got {type(compiled).__name__}")
    found = {k: m for k, m in mechs.items() if isinstance(m, TunedTraining)}
    if target is not None:
        if target not in found:
            raise KeyError(f"the spec has no tuning `{target}` (tunings: {', '.join(sorted(found)) or 'none'})")
        return found[target]
    if len(found) != 1:
        raise ValueError(f"the spec has {len(found)} tunings ({', '.join(sorted(found)) or 'none'}): give target=NAME")
    return next(iter(found.values()))


def _apply_schedule(optimizer, settings: dict) -> None:
    """The candidate's learning rate and momentum on every parameter group (the run is the candidate it reports)."""
    if optimizer is None:
        return
    for g in optimizer.param_groups:
        if "learning_rate" in settings:
            g["lr"] = float(settings["learning_rate"])
        if "momentum" in settings and "momentum" in g:
            g["momentum"] = float(settings["momentum"])


def tune(
    compiled,
    make_model: Callable[[dict], nn.Module],
    make_optimizer: Callable[[Any, dict], Any] | None,
    data_loader,
    train_fn: Callable[[nn.Module, Any, Any, dict], Any],
    score_fn: Callable[[nn.Module], Any],
    *,
    criterion: Callable | None = None,
    target: str | None = None,
    stop: Callable[[float, int], bool] | None = None,
    max_physical_batch_size: int | None = None,
):
    """Run the compiled tuning procedure with a ``make_private`` training per run (module docstring).

    ``make_model(settings)``: a fresh model; ``make_optimizer(parameters, settings)``: its optimizer (None: the
    family's own, e.g. SRPP-SGD); ``train_fn(model, optimizer, loader, settings)``: the ordinary loop over the
    wrapped objects (iterate ``loader`` until ``optimizer.steps_remaining`` is 0, or for the candidate's epochs);
    ``score_fn(model)``: the trained plain module's score — per-record values in [0, 1] for a private score, a number
    for a public one. ``stop(best_score, runs_done)``: stop early (only with ``stop_early true`` in the spec).
    Returns the :class:`~dpspec.tuning.runtime.TuningResult`; ``result.model`` is the selected run's trained module
    (unwrapped)."""
    mech = _resolve_tuning(compiled, target)
    # every run draws its own batches; the loader's batch size and sampler are ignored (said once, not per run)
    warnings.warn(
        f"`{mech.name}`: every run draws its batches as its candidate's certificate says; the DataLoader's batch "
        "size, sampler and shuffle are ignored",
        SamplingOverrideWarning,
        stacklevel=2,
    )

    def run_one(run_mechanism, settings: dict):
        model = make_model(dict(settings))
        optimizer = make_optimizer(model.parameters(), dict(settings)) if make_optimizer is not None else None
        _apply_schedule(optimizer, settings)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SamplingOverrideWarning)
            pm, po, loader = make_private(
                run_mechanism,
                model,
                optimizer,
                data_loader,
                criterion=criterion,
                max_physical_batch_size=max_physical_batch_size,
            )
        train_fn(pm, po, loader, dict(settings))
        return pm.module

    return mech.run(run_one, score_fn, stop=stop)
