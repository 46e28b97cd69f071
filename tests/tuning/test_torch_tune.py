"""Tuning through make_private (dpspec.torch.tune): each run is an ordinary PyTorch loop over make_private's
objects, under a fresh copy of its candidate's mechanism with its own ledger; a run cannot exceed its steps; the
selection sees exactly the runs drawn (K from the tuning's own generator); the run certificate states the whole
procedure, never less than one run; stopping early is allowed where the spec says so, and stated."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dpspec  # noqa: E402
import dpspec.torch  # noqa: E402
from dpspec.accounting.selection import RunCount  # noqa: E402
from dpspec.mechanisms.errors import BudgetExceededError  # noqa: E402

BASE = "privacy people { unit record  dataset_size 400 }\n"


def _spec(runs: str, extra: str = "", steps: int = 6) -> str:
    return (
        BASE + "train model { protect people  mechanism dpsgd  sampling poisson(expected_batch = 40)  "
        f"clipping flat(C = 1.0)  steps {steps} }}\n"
        "tune search { train model  candidates { learning_rate [0.05, 0.5]  momentum [0.0, 0.9] }  "
        f"runs {runs}  select best(score = accuracy)  {extra}guarantee dp(epsilon = 6, delta = 1e-5) }}\n"
    )


def _data(n=400, d=4, seed=0):
    g = np.random.default_rng(seed)
    w = g.normal(size=d)
    X = torch.from_numpy(g.normal(size=(n, d)).astype(np.float32))
    y = torch.from_numpy((X.numpy() @ w > 0).astype(np.int64))
    return torch.utils.data.TensorDataset(X, y)


class Recorder:
    """The caller's side: the model/optimizer factories, an Opacus-style loop, a validation score."""

    def __init__(self, loop_twice: bool = False):
        self.train = _data()
        self.val = _data(100, seed=1)
        self.runs: list[dict] = []
        self.loop_twice = loop_twice

    def make_model(self, settings):
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

    def make_optimizer(self, params, settings):
        return torch.optim.SGD(params, lr=123.0, momentum=0.5)  # the candidate's lr and momentum replace these

    def train_fn(self, model, optimizer, loader, settings):
        rec = {"settings": dict(settings), "steps": 0, "lr": optimizer.param_groups[0]["lr"]}
        rec["momentum"] = optimizer.param_groups[0]["momentum"]
        self.runs.append(rec)
        crit = torch.nn.CrossEntropyLoss()
        while optimizer.steps_remaining:
            for x, y in loader:
                optimizer.zero_grad()
                crit(model(x), y).backward()
                optimizer.step()
                rec["steps"] += 1
        rec["ledger"] = (optimizer.steps_taken, optimizer.steps_remaining)
        if self.loop_twice:  # a run cannot go past its certified steps
            with pytest.raises(BudgetExceededError):
                for _batch in loader:
                    optimizer.step()
            rec["refused"] = True

    def score_fn(self, model):
        X, y = self.val.tensors
        with torch.no_grad():
            return (model(X).argmax(1) == y).float().numpy()


def _tune(c, rec, **kw):
    loader = torch.utils.data.DataLoader(rec.train, batch_size=17, shuffle=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpspec.torch.tune(c, rec.make_model, rec.make_optimizer, loader, rec.train_fn, rec.score_fn, **kw)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_each_run_is_a_make_private_run_and_the_selection_sees_exactly_k(k, monkeypatch):
    c = dpspec.compile(dpspec.loads(_spec("poisson(mean = 3)")))
    cert = c.certificate.results[0]
    steps = cert.mechanism.parameters["candidate_0_steps"]
    # K is the tuning's draw: pin it here to count what the caller's code sees
    monkeypatch.setattr(RunCount, "sample", lambda self, rng: k)
    rec = Recorder(loop_twice=True)
    res = _tune(c, rec)
    assert len(rec.runs) == k  # every run drawn, and no other, is trained and scored
    for r in rec.runs:
        assert r["steps"] <= steps and r["ledger"] == (steps, 0) and r.get("refused")  # its own ledger, spent
        assert r["lr"] == r["settings"]["learning_rate"] and r["momentum"] == r["settings"]["momentum"]
    # the output is the best run's model and settings, not K (random count: hidden)
    assert res.runs_drawn is None and res.runs_done is None and res.history is None
    assert res.settings in [r["settings"] for r in rec.runs]
    assert isinstance(res.model, torch.nn.Module) and not isinstance(res.model, dpspec.torch.PrivateModel)
    # the run certificate states the whole procedure: its certified ε, above every candidate's own
    rc = res.run_certificate
    assert rc is not None and rc.certificate.content_hash == c.certificate.content_hash
    assert rc.spent[0].epsilon == cert.guarantee.epsilon
    per = [cert.mechanism.parameters[f"candidate_{i}_epsilon"] for i in range(4)]
    assert rc.spent[0].epsilon >= max(per) >= cert.mechanism.parameters["per_run_epsilon"] * (1 - 1e-12)
    # one procedure per compiled object
    with pytest.raises(BudgetExceededError):
        _tune(c, Recorder())


def test_stopping_early_is_capped_and_stated():
    c = dpspec.compile(dpspec.loads(_spec("truncated_negative_binomial(eta = 1, gamma = 0.3)", "stop_early true  ")))
    cert = c.certificate.results[0]
    cap = cert.mechanism.parameters["stop_early_max_runs"]
    assert cap >= 1
    rec = Recorder()
    res = _tune(c, rec, stop=lambda best, done: done >= 1)
    assert len(rec.runs) == res.runs_done <= min(res.runs_drawn, cap)  # early stopping releases its count
    spent = res.run_certificate.spent[0].epsilon
    assert spent <= cert.guarantee.epsilon and spent >= cert.mechanism.parameters["per_run_epsilon"] * (1 - 1e-12)
    # without `stop_early true` a stop rule is refused before anything runs
    c2 = dpspec.compile(dpspec.loads(_spec("poisson(mean = 3)")))
    rec2 = Recorder()
    from dpspec.tuning.runtime import TuningRefused

    with pytest.raises(TuningRefused):
        _tune(c2, rec2, stop=lambda best, done: True)
    assert rec2.runs == []


def test_resolution_errors():
    rec = Recorder()
    train_only = dpspec.compile(
        dpspec.loads(
            BASE + "train model { protect people  mechanism dpsgd  sampling poisson(expected_batch = 40)  "
            "clipping flat(C = 1.0)  steps 3  guarantee dp(epsilon = 2, delta = 1e-5) }\n"
        )
    )
    with pytest.raises(ValueError):
        _tune(train_only, rec)
    c = dpspec.compile(dpspec.loads(_spec("fixed(count = 2)")))
    with pytest.raises(KeyError):
        _tune(c, rec, target="nope")
    res = _tune(c.mechanism, rec)  # the compiled tuning object itself
    assert res.runs_done == 2 and len(rec.runs) == 2
