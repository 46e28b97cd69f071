"""The runtime audits pass on the fixed runtime and flag each earlier hole re-introduced as a mutant:
the normaliser read from the data, the step voided by one non-finite example, no step budget, no
per-batch caps. Trial counts are small: on the mutants the separation is total (ε_lower at the
ceiling of the sample), on the fixed runtime the two neighbours' outputs have the same law."""

import pytest

import dpspec
from dpspec.audit import audit
from dpspec.audit.mutations import mutants

pytest.importorskip("torch")


def _runtime(report, check):
    return [r for r in report.results if r.label.endswith(f"· {check}")]


def _audit(c, name, mech=None, checks=(), trials=100, seed=0):
    return audit(c, mechanisms=None if mech is None else {name: mech}, seed=seed, trials=trials,
                 options={name: {"checks": list(checks)}})


@pytest.mark.parametrize("key", ["DPSGD_FULL_BATCH", "DPSGD_POISSON"])
def test_dpsgd_normaliser_leak_is_flagged(compiled_specs, key):
    c = compiled_specs(key)
    ok = _runtime(_audit(c, "model", checks=["normaliser"]), "normaliser")[0]
    assert ok.status == "pass" and ok.epsilon_lower < 0.5
    bad = _runtime(_audit(c, "model", mutants(c, "model")["normaliser_from_data"], ["normaliser"], seed=1),
                   "normaliser")[0]
    assert bad.violation, (bad.epsilon_lower, bad.epsilon_certified)


@pytest.mark.parametrize("kind, check", [("nonfinite_voids_step", "non-finite"),
                                         pytest.param("no_step_budget", "step budget", marks=pytest.mark.slow),
                                         ("no_batch_caps", "per-batch cap")])
def test_dpsgd_runtime_holes_are_flagged(compiled_specs, kind, check):
    c = compiled_specs("DPSGD_FULL_BATCH")
    ok = _runtime(_audit(c, "model", checks=[check]), check)[0]
    assert ok.status == "pass"
    # the budget mutant's leak grows with the extra steps; 250 trials put it clearly above the certificate
    n = 250 if kind == "no_step_budget" else 100
    bad = _runtime(_audit(c, "model", mutants(c, "model")[kind], [check], trials=n, seed=1), check)[0]
    assert bad.violation and bad.epsilon_lower > bad.epsilon_certified, (kind, bad.epsilon_lower)


def test_without_replacement_has_no_normaliser_audit_and_large_budgets_are_skipped(compiled_specs):
    c = compiled_specs("DPSGD_SUBSTITUTION")
    r = _runtime(_audit(c, "model", checks=["normaliser"]), "normaliser")[0]
    assert r.status == "skipped" and "divided by B" in r.note
    big = compiled_specs("dpsgd_records.dps")
    name = big.certificate.results[0].name
    wrapper = ["wrapper rewind", "wrapper parameter", "wrapper non-finite"]
    rep = audit(big, seed=0, trials=40, options={name: {"checks": ["step budget", *wrapper], "steps": 1}})
    r = _runtime(rep, "step budget")[0]
    assert r.status == "skipped" and "at most 40 steps" in r.note
    for check in wrapper:
        r = _runtime(rep, check)[0]
        assert r.status == "skipped" and "at most 16 steps" in r.note and check in r.note


SRPP = """scenario prevalence { secret share in {low, high} }
train model {
  protect       prevalence
  mechanism     srpp_sgd
  dataset_size  20
  discrepancy   label_flip(differing = 1)
  sampling      full_batch
  clipping      flat(C = 1.0)
  steps         4
  learning_rate 0.5
  guarantee     ave_srpp(alpha = 8, epsilon = 0.5)
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind, check", [("nonfinite_voids_step", "non-finite"), ("no_batch_caps", "per-batch cap")])
def test_srpp_runtime_holes_are_flagged(kind, check):
    c = dpspec.compile(SRPP)
    ok = _runtime(_audit(c, "model", checks=[check]), check)[0]
    assert ok.status == "pass"
    bad = _runtime(_audit(c, "model", mutants(c, "model")[kind], [check], seed=1), check)[0]
    assert bad.violation, (kind, bad.epsilon_lower, bad.epsilon_certified)


def test_srpp_budget_audit_passes_on_the_fixed_runtime():
    c = dpspec.compile(SRPP)
    r = _runtime(_audit(c, "model", checks=["step budget"], trials=40), "step budget")[0]
    assert r.status == "pass" and "asks for 400 steps" in r.neighbours


@pytest.mark.slow
@pytest.mark.parametrize("kind, check", [("nonfinite_poisons_step", "non-finite"), ("no_batch_caps", "per-batch cap")])
def test_relational_runtime_holes_are_flagged(kind, check):
    from tests.families.relational_dpsgd.test_audit_relational import TEXT

    c = dpspec.compile(TEXT)
    ok = _runtime(_audit(c, "links", checks=[check], trials=60), check)[0]
    assert ok.status == "pass"
    bad = _runtime(_audit(c, "links", mutants(c, "links")[kind], [check], trials=60, seed=1), check)[0]
    assert bad.violation, (kind, bad.epsilon_lower, bad.epsilon_certified)


# --- dpspec.torch.make_private (issue 22) ----------------------------------------------------------------


@pytest.mark.parametrize("kind, check", [("unnoised_param_group", "wrapper parameter"),
                                         ("nonfinite_voids_step", "wrapper non-finite")])
def test_wrapper_holes_are_flagged(compiled_specs, kind, check):
    pytest.importorskip("torch")
    c = compiled_specs("DPSGD_FULL_BATCH")
    ok = _runtime(_audit(c, "model", checks=[check]), check)[0]
    assert ok.status == "pass" and ok.epsilon_lower < 0.5, ok.epsilon_lower
    bad = _runtime(_audit(c, "model", mutants(c, "model")[kind], [check], seed=1), check)[0]
    assert bad.violation and bad.epsilon_lower > bad.epsilon_certified, (kind, bad.epsilon_lower)


@pytest.mark.slow
def test_a_rewound_ledger_is_flagged_through_the_wrapper():
    """One certified step (σ ≈ 2 for ε = 2): 40 reloads of the step-0 checkpoint give the mutant 40 noisy
    steps, well above the certificate on 150 trials; the real ledger refuses the first reload after it."""
    pytest.importorskip("torch")
    c = dpspec.compile("""
privacy people { unit record  dataset_size 8 }
train model { protect people  mechanism dpsgd  sampling full_batch  clipping flat(C = 1.0)  steps 1
              guarantee dp(epsilon = 2, delta = 1e-5) }
""")
    check, opts = "wrapper rewind", {"checks": ["wrapper rewind"], "rewinds": 40}
    ok = _runtime(audit(c, seed=0, trials=150, options={"model": opts}), check)[0]
    assert ok.status == "pass" and ok.epsilon_lower < 0.5, ok.epsilon_lower
    bad = _runtime(audit(c, mechanisms={"model": mutants(c, "model")["ledger_rewind"]}, seed=1, trials=150,
                         options={"model": opts}), check)[0]
    assert bad.violation and bad.epsilon_lower > bad.epsilon_certified, bad.epsilon_lower


def test_wrapper_audits_run_one_trial_per_run_under_poisson_sampling(compiled_specs):
    pytest.importorskip("torch")
    c = compiled_specs("DPSGD_POISSON")
    rep = audit(c, seed=0, trials=40, options={"model": {"checks": ["wrapper non-finite", "wrapper parameter"]}})
    for check in ("wrapper non-finite", "wrapper parameter"):
        r = _runtime(rep, check)[0]
        assert r.status == "pass", (check, r.note)
