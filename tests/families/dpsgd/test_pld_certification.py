"""The compiler certifies DP-SGD and compositions with the minimum over the valid accountants (RDP, PLD).

Each candidate is recomputed independently: RDP by dpspec.accounting.dpsgd_epsilon, PLD against
dp_accounting's pessimistic connect-the-dots PLD at the same discretisation (a test-only reference).
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpspec
from dpspec import accounting as acc
from dpspec.certificate.model import Certificate
from dpspec.certificate.verify import verify


def spec(sigma=1.0, rate=0.01, steps=200, delta=1e-5, sampling=None, unit="record", extra="", target=None,
         n=10000):
    s = sampling or f"poisson(rate = {rate})"
    noise = f"noise_multiplier {sigma}" if target is None else ""
    guar = f"dp(epsilon = {target}, delta = {delta})" if target is not None else f"dp(delta = {delta})"
    return (f"privacy p {{ unit {unit}  dataset_size {n} }}\n"
            f"train t {{ protect p  mechanism dpsgd  sampling {s}  clipping flat(C = 1)  steps {steps}  {noise}  "
            f"guarantee {guar} }}\n" + extra)


def result(text, name="t"):
    c = dpspec.compile(text)
    return c, next(r for r in c.certificate.results if r.name == name)


def cands(r, delta):
    return {c.accountant: c.epsilon for c in r.accounting.candidates if c.delta == delta}


def test_certified_epsilon_is_the_minimum_over_the_candidates_at_every_delta():
    _, r = result(spec())
    assert r.accounting.accountant == "pld" and r.mechanism.parameters["accountant"] == "pld"
    for p in r.guarantee.dp:
        c = cands(r, p.delta)
        assert set(c) == {"rdp", "pld"} and p.epsilon == min(c.values())
    assert r.guarantee.epsilon == r.guarantee.dp[0].epsilon == min(cands(r, 1e-5).values())
    # the curve: min per δ at δ ∈ {1e-3 … 1e-10} and the spec's δ, ε decreasing in δ
    ds = [p.delta for p in r.accounting.curve]
    assert {1e-3, 1e-4, 1e-6, 1e-8, 1e-10, 1e-5} <= set(ds)
    eps = [p.epsilon for p in r.accounting.curve]
    assert all(a <= b for a, b in zip(eps, eps[1:]))
    pld_numerics = r.accounting.pld
    assert pld_numerics.delta_error > 0 and pld_numerics.discretization > 0
    assert r.accounting.gdp_mu is None  # a subsampled mechanism has no exact μ


def test_each_candidate_is_recomputed_independently():
    _, r = result(spec(sigma=1.0, rate=0.01, steps=200))
    c = cands(r, 1e-5)
    # RDP: the accounting module directly (the certificate's RDP candidate is the old certified ε)
    assert c["rdp"] == pytest.approx(acc.dpsgd_epsilon(1.0, 0.01, 200, 1e-5), rel=1e-12)
    # PLD: dp_accounting's pessimistic PLD at the same grid (reference only)
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    d = r.accounting.pld.discretization
    ref = pldlib.from_gaussian_mechanism(1.0, sensitivity=1.0, sampling_prob=0.01, value_discretization_interval=d,
                                         pessimistic_estimate=True, use_connect_dots=True).self_compose(200)
    ref_eps = ref.get_epsilon_for_delta(1e-5)
    assert ref_eps - 1e-6 <= c["pld"] <= ref_eps * (1 + 1e-3) + 2 * d
    assert c["pld"] < c["rdp"]


def test_pld_is_below_rdp_only_within_its_stated_error():
    """The PLD candidate never undercuts the truth: δ at the certified ε, evaluated optimistically by an
    independent library, is ≤ the spec's δ (the certified ε is an upper bound up to the stated error)."""
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    _, r = result(spec(sigma=0.8, rate=0.02, steps=300))
    eps = cands(r, 1e-5)["pld"]
    opt = pldlib.from_gaussian_mechanism(0.8, sensitivity=1.0, sampling_prob=0.02, value_discretization_interval=1e-4,
                                         pessimistic_estimate=False).self_compose(300)
    assert opt.get_delta_for_epsilon(eps) <= 1e-5 * (1 + 1e-6)
    assert r.accounting.pld.delta_error < 1e-5 * 1e-3


def test_calibration_uses_pld_and_certifies_below_the_target():
    _, r = result(spec(target=3.0, rate=0.01, steps=1000))
    p = r.mechanism.parameters
    assert r.guarantee.epsilon <= 3.0 and "PLD calibration" in r.numerics.calibration
    rdp_sigma = acc.calibrate_dpsgd_sigma(3.0, 1e-5, 0.01, 1000)
    assert p["noise_multiplier"] < rdp_sigma
    assert r.guarantee.epsilon == min(cands(r, 1e-5).values())


@pytest.mark.parametrize("sampling,unit,want", [
    ("without_replacement(batch_size = 100)", "record", "add_remove"),
    ("without_replacement(batch_size = 100)", "record(relation = substitution)", "substitution"),
    ("poisson(rate = 0.01)", "group(size = 3)", "add_remove_group_3"),
])
def test_every_sampling_the_pld_module_supports(sampling, unit, want):
    _, r = result(spec(sampling=sampling, unit=unit, steps=100, sigma=1.5))
    assert r.accounting.pld is not None and r.accounting.pld.relation == want
    c = cands(r, 1e-5)
    assert r.guarantee.epsilon == min(c.values())


def test_full_batch_reports_the_exact_gdp_mu():
    _, r = result(spec(sampling="full_batch", steps=100, sigma=20.0, n=1000))
    mu = r.accounting.gdp_mu
    assert mu == pytest.approx(math.sqrt(100) / 20.0, rel=1e-12) and "tight" in r.accounting.tight
    assert r.accounting.accountant == "pld"


def test_gaussian_release_states_it_is_tight_and_unchanged():
    text = ("privacy p { unit record  dataset_size 100 }\n"
            "release r { protect p  mechanism gaussian  sensitivity 1  noise gaussian(sigma = 5)  "
            "guarantee dp(delta = 1e-6) }")
    _, r = result(text, "r")
    a = r.accounting
    assert a.accountant == "analytic_gaussian" and a.gdp_mu == pytest.approx(0.2) and a.pld is None
    assert "tight" in a.tight and r.guarantee.epsilon == cands(r, 1e-6)["analytic_gaussian"]


def test_composition_uses_pld_when_every_part_has_one():
    extra = ("release r { protect p  mechanism gaussian  sensitivity 1  noise gaussian(sigma = 5)  "
             "guarantee dp(delta = 1e-5) }\ncompose all { parts [r, t]  guarantee dp(delta = 1e-5) }")
    c, r = result(spec(extra=extra), "all")
    assert r.accounting.accountant == "pld"
    want = acc.pld_compose(acc.pld_gaussian(5.0), acc.pld_dpsgd(1.0, 0.01, 200)).epsilon(1e-5).epsilon
    assert cands(r, 1e-5)["pld"] == pytest.approx(want, rel=1e-12)
    assert r.guarantee.epsilon == min(cands(r, 1e-5).values())
    assert verify(c.certificate, raise_on_error=False).ok


def test_renyi_guarantees_stay_rdp():
    text = ("privacy p { unit record  dataset_size 10000 }\ntrain t { protect p  mechanism dpsgd  sampling "
            "poisson(rate = 0.01)  clipping flat(C = 1)  steps 100  noise_multiplier 1  guarantee rdp(alpha = 8) }")
    _, r = result(text)
    assert r.accounting.accountant == "rdp" and r.accounting.pld is None


def _resealed(cert: Certificate, edit) -> dict:
    d = json.loads(cert.to_json())
    edit(d["results"][0])
    c = Certificate.model_validate(d)
    return json.loads(c.sealed().to_json())


def test_verify_accepts_and_a_lowered_pld_epsilon_fails():
    c, r = result(spec())
    assert verify(c.certificate, raise_on_error=False).ok

    def lower_candidate(res):
        for x in res["accounting"]["candidates"]:
            if x["accountant"] == "pld":
                x["epsilon"] *= 0.99

    def lower_everywhere(res):
        lower_candidate(res)
        res["guarantee"]["epsilon"] *= 0.99
        res["guarantee"]["dp"][0]["epsilon"] *= 0.99
        for p in res["accounting"]["curve"]:
            p["epsilon"] *= 0.99
        res["mechanism"]["parameters"]["epsilon_pld"] *= 0.99

    def lower_error(res):
        res["accounting"]["pld"]["delta_error"] /= 2

    def claim_rdp(res):
        res["accounting"]["accountant"] = "rdp"

    for edit in (lower_candidate, lower_everywhere, lower_error, claim_rdp):
        rep = verify(_resealed(c.certificate, edit), raise_on_error=False)
        assert not rep.ok, edit.__name__
    rep = verify(_resealed(c.certificate, lower_everywhere), raise_on_error=False)
    assert any("BELOW" in f for f in rep.problems)


def test_ledger_uses_the_certified_family_and_never_exceeds_the_certificate():
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    c, r = result(spec(steps=60, sigma=1.0, rate=0.05))
    mech = c.mechanism
    assert mech.accountant == "pld"
    cert_eps = r.guarantee.epsilon
    last = 0.0
    for t in (1, 10, 30, 60):
        mech.ledger.load_state_dict({**mech.ledger.state_dict(), "steps_taken": t})
        s = mech.privacy_spent(1e-5)
        assert s.epsilon <= cert_eps and s.epsilon >= last
        truth = pldlib.from_gaussian_mechanism(1.0, sampling_prob=0.05, value_discretization_interval=1e-4,
                                               pessimistic_estimate=False).self_compose(t).get_epsilon_for_delta(1e-5)
        assert s.epsilon >= truth - 1e-9
        last = s.epsilon
    assert last == cert_eps


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.sampled_from([0.7, 1.0, 1.5]), rate=st.sampled_from([0.01, 0.05]), steps=st.sampled_from([5, 20, 50]))
def test_certified_epsilon_is_monotone_in_sigma_rate_and_steps(sigma, rate, steps):
    def eps(s, q, t):
        return result(spec(sigma=s, rate=q, steps=t))[1].guarantee.epsilon

    e = eps(sigma, rate, steps)
    assert eps(sigma * 1.25, rate, steps) <= e
    assert eps(sigma, rate * 1.5, steps) >= e
    assert eps(sigma, rate, steps * 2) >= e
