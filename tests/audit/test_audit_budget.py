"""Long audits: an estimate before they start, a progress bar, and a time budget that still reports what it
measured (issue 22). Nothing here asserts a duration: the cost per output is fixed by monkeypatching
``seconds_per_trial``, so the plan is the same on any machine."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpspec.audit.api as audit_api
from dpspec.audit import audit
from dpspec.audit.base import MIN_TRIALS, AuditTarget, Claim, _draw, planned_trials, seconds_per_trial, tick
from dpspec.cli.main import main
from tests.audit.conftest import DPSGD_POISSON


@pytest.fixture(scope="module")
def gaussian_cert(tmp_path_factory, compiled_specs):
    c = compiled_specs("gaussian_release.dps")
    p = tmp_path_factory.mktemp("budget") / "cert.json"
    p.write_text(c.certificate.to_json(), encoding="utf-8")
    return p


def _cost(per_trial: float):
    return lambda target, seed=0: per_trial


def test_a_budget_cuts_the_trials_and_says_so(compiled_specs, monkeypatch):
    # 0.05 s per output: the default 200 000 outputs per neighbour would take 20 000 s; a budget of 100 s
    # leaves about 0.9 x 100 / 0.1 = 900 trials per neighbour
    monkeypatch.setattr(audit_api, "seconds_per_trial", _cost(0.05))
    lines = []
    rep = audit(
        compiled_specs("gaussian_release.dps"),
        seed=0,
        max_seconds=100,
        estimate=lambda s, line: lines.append((s, line)),
    )
    r = rep["total_hours"]
    n = r.trials_selection + r.trials_evaluation
    assert r.status == "pass" and MIN_TRIALS <= n < 1000
    assert "of 200000 trials per neighbour" in r.budget_note and "weaker" in r.budget_note
    assert r.budget_note in r.note
    # the estimate came first, with the full cost, and the report keeps it
    assert len(lines) == 1 and lines[0][0] == pytest.approx(2 * 200_000 * 0.05)
    assert rep.estimated_seconds == pytest.approx(20_000) and rep.max_seconds == 100
    assert "estimated duration: 5.6 h" in lines[0][1] and "budget 100 s" in lines[0][1]
    # fewer trials: a weaker (lower) ceiling than the full run's, still a valid Clopper-Pearson bound
    full = audit(compiled_specs("gaussian_release.dps"), seed=0, trials=20_000)["total_hours"]
    assert r.ceiling < full.ceiling and r.epsilon_lower <= r.ceiling
    text = rep.to_text()
    assert "time budget: 100 s; 1 target(s) ran fewer trials" in text and "still valid" in text
    doc = json.loads(rep.to_json())
    assert doc["max_seconds"] == 100 and doc["results"][0]["budget_note"] == r.budget_note


def test_a_tiny_budget_runs_nothing_and_reports_it(compiled_specs, monkeypatch):
    monkeypatch.setattr(audit_api, "seconds_per_trial", _cost(0.05))
    rep = audit(compiled_specs("gaussian_release.dps"), seed=0, max_seconds=1e-3)
    r = rep["total_hours"]
    assert r.status == "skipped" and r.note.startswith("not run: the time budget of 0.001 s")
    assert rep.ok and "nothing was audited" in rep.to_text()


def test_the_cheapest_targets_keep_their_full_count(compiled_specs, monkeypatch):
    """A DP-SGD entry has a canary target and runtime audits: a budget that fits the runtime audits gives
    them all their trials and the rest to the canary audit."""
    from dpspec.compiler.compile import compile_spec
    from dpspec.frontend import loads

    c = compile_spec(loads(DPSGD_POISSON, name="p.dps"))
    costs = {}

    def cost(target, seed=0):
        return costs.setdefault(target.label(), 1e-4 if "·" in target.label() else 1.0)

    monkeypatch.setattr(audit_api, "seconds_per_trial", cost)
    # stub the runs: only the plan matters here
    ran = {}

    full = {}

    def fake_run(t, *, trials, **kw):
        ran[t.label()] = trials
        full[t.label()] = planned_trials(t)
        from dpspec.audit.base import AuditResult

        return AuditResult(name=t.name, mechanism=t.mechanism, status="pass", label=t.label())

    monkeypatch.setattr(audit_api, "run_target", fake_run)
    rep = audit(c, seed=0, max_seconds=1000)
    runtime = {k: v for k, v in ran.items() if "·" in k}
    assert runtime and all(v >= full[k] for k, v in runtime.items())  # their full (capped) counts
    canary = ran["model"]
    assert MIN_TRIALS <= canary < 4000 and "of 4000 trials" in rep["model"].budget_note
    assert not any(r.budget_note for r in rep.results if "·" in (r.label or ""))


def test_the_bar_follows_the_outputs_a_target_reports():
    class Count(AuditTarget):
        mechanism = "toy"
        pilot_trials = 16

        def __init__(self):
            self.name, self.calls = "toy", []

        def claim(self):
            return Claim(1.0, 1e-6, "(ε, δ)-DP")

        def neighbours(self):
            return "-"

        def sample(self, world, n, rng):
            self.calls.append(n)
            for _ in range(0, n, 100):
                tick(100)  # one call draws everything; the bar moves as it goes (over-reporting is clipped)
            return rng.normal(size=(n, 1)) + world

        def statistics(self, x0, x1):
            return {"x": lambda x: x[:, 0]}

    class Bar:
        def __init__(self):
            self.updates = []

        def update(self, k):
            self.updates.append(k)

    t, bar = Count(), Bar()
    out = _draw(t, 1, 1050, np.random.default_rng(0), bar)
    assert out.shape == (1050, 1) and t.calls == [1050]  # the draws are those of one call, as without a bar
    assert sum(bar.updates) == 1050 and bar.updates[:10] == [100] * 10
    tick(5)  # outside a draw: nothing to move
    t.calls.clear()
    assert seconds_per_trial(t) >= 0 and t.calls == [16, 16]  # the pilot: pilot_trials per neighbour


def test_cli_budget_and_estimate(gaussian_cert, capsys, monkeypatch):
    monkeypatch.setattr(audit_api, "seconds_per_trial", _cost(0.05))
    assert main(["audit", str(gaussian_cert), "--max-seconds", "100"]) == 0
    cap = capsys.readouterr()
    assert "dpspec audit: estimated duration: 5.6 h" in cap.err and "budget 100 s" in cap.err
    assert "time budget: 100 s" in cap.out and "pass" in cap.out
    # under -q the estimate of a long audit without a budget is still printed (once), with the hint
    monkeypatch.setattr(audit_api, "run_target", lambda t, **kw: audit_api.skipped(t.name, t.mechanism, "stub"))
    assert main(["audit", str(gaussian_cert), "-q"]) == 0
    err = capsys.readouterr().err
    assert err.count("estimated duration") == 1 and "--max-seconds bounds it" in err
    assert main(["audit", str(gaussian_cert), "--max-seconds", "0"]) == 2
    assert main(["audit", str(gaussian_cert), "--max-seconds", "nan"]) == 2


def test_every_target_gets_the_minimum_before_any_gets_more(monkeypatch):
    """Runtime audits at 0.05 s per output (300 trials: 30 s each) and the canary audit at 0.5 s (40 trials:
    40 s) under a 100 s budget: equal shares alone would leave the canary audit under 40 trials."""
    from dpspec.audit.base import AuditResult
    from dpspec.compiler.compile import compile_spec
    from dpspec.frontend import loads

    c = compile_spec(loads(DPSGD_POISSON, name="p.dps"))
    monkeypatch.setattr(audit_api, "seconds_per_trial", lambda t, seed=0: 0.05 if "·" in t.label() else 0.5)
    ran = {}

    full = {}

    def fake_run(t, *, trials, **kw):
        ran[t.label()] = trials
        full[t.label()] = planned_trials(t)
        return AuditResult(name=t.name, mechanism=t.mechanism, status="pass", label=t.label())

    monkeypatch.setattr(audit_api, "run_target", fake_run)
    audit(c, seed=0, max_seconds=100)
    assert len(ran) >= 3 and all(v >= MIN_TRIALS for v in ran.values())
    assert ran["model"] >= MIN_TRIALS and sum(2 * v * (0.05 if "·" in k else 0.5) for k, v in ran.items()) <= 90
