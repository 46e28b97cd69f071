"""Each part of a `compose … split` of statistics releases enters the PLD by its own dominating pair: discrete
Gaussian parts by their exact pair (never as μ-GDP), partition selections by the (ε, δ) four-output pair; the
basic bound takes discrete Gaussians in zCDP. The certificate names each part's pair and theorem, and
`verify` recompiles it and re-evaluates the discrete Gaussian truncation bounds at 40 digits."""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest

import dpspec
from dpspec.accounting import analytic_gaussian as GR
from dpspec.accounting import pld as PLD
from dpspec.certificate.verify import VerificationError
from dpspec.families.statistics import accountant as A
from dpspec.families.statistics.compile import composed_bounds, design, part_numbers

UNIT = "privacy people { unit record  data dataset(t) }\n"


def table(n=2000, seed=1):
    g = np.random.default_rng(seed)
    return {
        "hours": g.integers(1, 100, n).astype(float),
        "race": g.choice(["A", "B", "C"], n, p=[0.7, 0.2, 0.1]),
    }


DG_SPLIT = (
    UNIT
    + """
release a { mechanism discrete_gaussian  query count(by = race, keys = ["A", "B", "C"]) }
release b { mechanism discrete_gaussian  query sum(hours, bounds = [0, 99]) }
release c { mechanism discrete_gaussian  query mean(hours, bounds = [0, 99]) }
release d { mechanism laplace  query count() }
release e { mechanism discrete_laplace  query count(by = race) }
compose all { parts [a, b, c, d, e]  guarantee dp(epsilon = 1, delta = 1e-6)  split %s }
"""
)


@pytest.fixture(scope="module", params=["evenly", "optimal"])
def dg_split(request):
    return dpspec.compile(dpspec.loads(DG_SPLIT % request.param), data={"t": table()})


def test_a_split_with_discrete_gaussian_and_selection_parts_meets_its_target_and_verifies(dg_split):
    comp = dg_split.certificate.results[-1]
    p = comp.mechanism.parameters
    assert 0.99 <= comp.guarantee.epsilon <= 1.0  # calibrated to the target within 1 %, never above
    assert p["accounting"] == "pld" and p["pld_epsilon"] == comp.guarantee.epsilon
    pairs = p["dominating_pairs"]
    for name in "abc":
        assert f"{name}: discrete_gaussian pair" in pairs
    assert "e: approx_dp pair" in pairs and "d: laplace pair" in pairs
    for theorem in (PLD.THEOREM_DGAUSS, PLD.THEOREM_APPROX_DP, PLD.THEOREM_LAPLACE):
        assert any(t.startswith(theorem) for t in comp.guarantee.theorems)
    report = dpspec.verify(dg_split.certificate)
    assert report.ok
    assert any("discrete_gaussian_tail_bound" in c and "re-evaluated" in c for c in report.checks)


def test_the_truncation_bounds_in_the_certificate_hold_against_direct_summation(dg_split):
    comp = dg_split.certificate.results[-1]
    tails = [f for f in comp.formulas if f.name == "discrete_gaussian_tail_bound"]
    assert len(tails) == 4  # a, b, and the two halves of c
    for f in tails:
        k, s = f.variables["K"], f.variables["s"]
        with mp.workdps(40):
            top = int(k + 40 * s + 50)
            w = [mp.exp(-(mp.mpf(j) ** 2) / (2 * mp.mpf(s) ** 2)) for j in range(top + 1)]
            z = 2 * mp.fsum(w) - 1
            exact = mp.fsum(w[k + 1 :]) / z  # P(Y ≤ −K − 1) = P(Y ≥ K + 1)
        assert f.value >= exact
        assert f.value <= 1e-4 * 1e-6  # the tail the query leaves per step: ~1e-4 δ / T


def test_a_forged_pair_theorem_or_truncation_bound_does_not_verify(dg_split):
    from tests.fuzz.certmut import reseal

    d = json.loads(dg_split.certificate.model_dump_json())
    d["results"][-1]["guarantee"]["theorems"] = [
        t for t in d["results"][-1]["guarantee"]["theorems"] if not t.startswith(PLD.THEOREM_APPROX_DP)
    ]
    with pytest.raises(VerificationError):
        dpspec.verify(json.dumps(reseal(d)))
    d = json.loads(dg_split.certificate.model_dump_json())
    f = next(f for f in d["results"][-1]["formulas"] if f["name"] == "discrete_gaussian_tail_bound")
    f["value"] *= 0.5
    with pytest.raises(VerificationError):
        dpspec.verify(json.dumps(reseal(d)))


def test_discrete_gaussian_parts_never_compose_as_gdp():
    dg = ("discrete_gaussian", 6.0, 1.0, None, None, 0.0, 0.15, 0.0)
    lap = ("laplace", 3.0, 1.0, None, None, 1 / 3, 0.0, 0.0)
    base = composed_bounds([dg, lap], 1e-6)
    # the recorded μ plays no part: only σ and Δ do
    assert composed_bounds([(*dg[:6], 0.5, 0.0), lap], 1e-6) == base
    rho = A.discrete_gaussian_rho(6.0, 1.0)
    assert rho >= 1 / 72
    assert base[0] == A.compose([0.0, 1 / 3], [], 1e-6, [rho])
    assert base[1] == A.pld_compose([("discrete_gaussian", 6.0, 1.0), ("laplace", 3.0, 1.0)], [], 1e-6)
    assert base[1] <= base[0]


@pytest.mark.parametrize("rho,delta", [(0.01, 1e-6), (0.5, 1e-10), (3.0, 1e-5)])
def test_zcdp_conversion_lies_between_the_exact_gaussian_and_the_classic_bound(rho, delta):
    e = A.zcdp_epsilon(rho, delta)
    # the Gaussian with μ = √(2ρ) is exactly ρ-zCDP: no valid conversion can beat its exact ε(δ)
    assert e >= GR.epsilon_of_delta(math.sqrt(2 * rho), delta) - GR.ABS_ERROR
    assert e <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun & Steinke 2016 Prop. 1.3


def test_a_discrete_gaussian_mean_is_certified_by_its_two_halves_exact_pairs():
    spec = UNIT + (
        "release m { mechanism discrete_gaussian  query mean(hours, bounds = [0, 99])"
        "  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
    )
    c = dpspec.compile(dpspec.loads(spec), data={"t": table()})
    r = c.certificate.results[0]
    p = r.mechanism.parameters
    assert 0.99 <= r.guarantee.epsilon <= 1.0
    assert r.guarantee.epsilon == min(composed_bounds([part_numbers(p)], 1e-6))
    assert not any(f.name == "delta_of_epsilon" for f in r.formulas)  # no μ-GDP claim for the pair of halves
    assert dpspec.verify(c.certificate).ok


def test_a_single_discrete_gaussian_below_the_profile_floor_falls_back_to_zcdp():
    spec = dpspec.loads(
        UNIT + "release a { mechanism discrete_gaussian  query count()  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
    )
    d = design(None, spec.ir.releases[0], 1.0, 1e-6)
    assert d.epsilon_at(1e-6) == A.gdp_epsilon(d.mu, 1e-6)  # the μ-GDP profile, checked down to 1e-30
    tiny = 1e-35
    assert d.epsilon_at(tiny) == A.zcdp_epsilon(A.discrete_gaussian_rho(d.scale, 1.0), tiny)


def test_selection_inside_the_pld_against_dp_accounting():
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as P

    lap = ("laplace", 4.0, 1.0, None, None, 0.25, 0.0, 0.0)
    sel = ("discrete_laplace", 5.0, 1.0, None, None, 0.2, 0.0, 2e-7)
    _, pld = composed_bounds([lap, sel], 1e-6)
    ref = P.from_laplace_mechanism(4.0, value_discretization_interval=1e-4).compose(
        P.from_privacy_parameters(common.DifferentialPrivacyParameters(0.2, 2e-7), 1e-4)
    )
    opt = P.from_laplace_mechanism(4.0, value_discretization_interval=1e-4, pessimistic_estimate=False)
    ref_e = ref.get_epsilon_for_delta(1e-6)
    assert opt.get_epsilon_for_delta(1e-6 - 2e-7) <= pld  # at least the Laplace part alone with δ less the selection's
    assert pld <= ref_e + 1e-3
    assert abs(pld - ref_e) <= 1e-3


def test_the_discrete_gaussians_expected_error_needs_no_sum_of_12_sigma_terms_for_a_large_sigma():
    # a sum with bounds [0, 1e6] at ε ≈ 0.1 has σ ≈ 5e7: the closed form above σ = 1e5 matches the direct sum
    for sigma in (1.5e5, 4e5):
        j = np.arange(1, int(14 * sigma), dtype=float)
        w = np.exp(-j * j / (2 * sigma * sigma))
        direct = 2 * math.fsum(j * w) / (1 + 2 * math.fsum(w))
        assert A.expected_abs_error("discrete_gaussian", sigma) == pytest.approx(direct, rel=1e-9)
