"""The auditor of a `tune` certificate (dpspec.tuning.audit): the compiled tuning's own selection, run with
randomized-response stand-in runs on two neighbouring datasets, stays under the stand-in's certified bound; a
procedure that miscounts or releases its runs, or releases an uncharged score, is flagged."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import mpmath as mp
import pytest

import dpspec
from dpspec.audit import AUDITORS, audit
from dpspec.tuning.audit import MUTATION_FACTORS, mutate, stand_in_claim

ROOT = Path(__file__).resolve().parents[2]
BASE = "privacy people { unit record  dataset_size 2000 }\n"


def _spec(runs: str, select: str = "release_score = true") -> str:
    return (
        BASE + "train model { protect people  mechanism dpsgd  sampling poisson(expected_batch = 100)  "
        "clipping flat(C = 1.0)  steps 5 }\n"
        "tune search { train model  candidates { learning_rate [0.1, 0.5] }  "
        f"runs {runs}  select best(score = accuracy, {select})  guarantee dp(epsilon = 6, delta = 1e-5) }}\n"
    )


@pytest.fixture(scope="module")
def geometric():
    return dpspec.compile(dpspec.loads(_spec("geometric(mean = 3)")))


def test_the_auditor_is_registered_for_tune_certificates():
    assert "tune" in AUDITORS


def test_a_correct_procedure_passes(geometric):
    rep = audit(geometric, seed=1, runtime=False, trials=20_000)
    r = rep["search"]
    assert rep.ok and r.status == "pass"
    assert 0.5 < r.epsilon_lower <= r.epsilon_certified  # it does leak (the audit has power), within the bound
    assert r.epsilon_headline == geometric.certificate.results[0].guarantee.epsilon


@pytest.mark.parametrize("kind", list(MUTATION_FACTORS))
def test_each_mutant_is_flagged(geometric, kind):
    m = mutate(geometric.mechanism, kind)
    assert m is not None
    rep = audit(geometric, seed=2, runtime=False, trials=20_000, mechanisms={"search": m})
    r = rep["search"]
    assert not rep.ok and r.status == "VIOLATION", (kind, r.epsilon_lower, r.epsilon_certified)
    # the claim is the certificate's, not the mutant's: an uncharged score does not lower what is promised
    assert r.epsilon_certified == audit(geometric, seed=3, runtime=False, trials=400)["search"].epsilon_certified


def test_a_poisson_procedure_passes_and_a_fixed_count_reported_as_random_is_flagged():
    c = dpspec.compile(dpspec.loads(_spec("poisson(mean = 3)", "on = public")))
    assert audit(c, seed=1, runtime=False, trials=20_000).ok
    for kind in ("fixed_runs", "ignores_k", "k_released"):
        rep = audit(c, seed=4, runtime=False, trials=20_000, mechanisms={"search": mutate(c.mechanism, kind)})
        assert not rep.ok, kind
    assert mutate(c.mechanism, "uncharged_score") is None  # a public score has no noise to drop


def test_a_fixed_count_passes_and_its_mutants_apply_only_where_they_are_bugs():
    c = dpspec.compile(dpspec.loads(_spec("fixed(count = 3)")))
    assert audit(c, seed=1, runtime=False, trials=20_000).ok
    assert mutate(c.mechanism, "fixed_runs") is None and mutate(c.mechanism, "k_released") is None
    assert not audit(
        c, seed=2, runtime=False, trials=20_000, mechanisms={"search": mutate(c.mechanism, "ignores_k")}
    ).ok


def _rr_best_of(runs, p_zero):
    """P[best bit = 0] of best-of-K randomized-response runs (K = 0 counted apart): φ(p₀) - φ(0)."""
    from dpspec.accounting.selection_profile import pgf

    return float(pgf(runs, [p_zero])[0] - pgf(runs, [0.0])[0])


def test_the_stand_in_claim_bounds_the_stand_in_exactly():
    """With a public score the stand-in procedure's output is the best bit (or nothing): its exact δ at the claimed
    ε is at most δ — the claim is a bound for what the audit runs."""
    c = dpspec.compile(dpspec.loads(_spec("geometric(mean = 3)", "on = public")))
    rec = c.certificate.results[0]
    for eps0 in (0.5, 1.5):
        eps, _ = stand_in_claim(rec, eps0, 1e-5)
        runs = c.mechanism.runs
        q = 1 / (1 + math.exp(eps0))  # P[bit = 0] on D1 (the bit says "the record is there" more often)
        p = 1 - q  # on D0
        a = [_rr_best_of(runs, p), 1 - _rr_best_of(runs, p)]
        b = [_rr_best_of(runs, q), 1 - _rr_best_of(runs, q)]
        e = mp.e ** mp.mpf(eps)
        exact = max(sum(max(0, x - e * y) for x, y in zip(a, b)), sum(max(0, y - e * x) for x, y in zip(a, b)))
        assert exact <= 1e-5


def test_dpspec_audit_cli_runs_on_a_tune_spec(tmp_path):
    path = tmp_path / "t.dps"
    path.write_text(_spec("geometric(mean = 3)"))
    out = subprocess.run(
        [sys.executable, "-m", "dpspec", "audit", str(path), "--trials", "2000", "--seed", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "search" in out.stdout and "tune" in out.stdout
