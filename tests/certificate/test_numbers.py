"""Every certified number is direction-correct: no zero noise for a nonzero sensitivity, no inf/NaN,
ε never rounded down (nor to 0), out-of-range numbers are located compile errors (DPS205–DPS207)."""

import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.accounting import analytic_gaussian as GR
from dpspec.diagnostics import render
from tests.conftest import SPECS

GAUSS = "privacy p {{ unit record }}\nrelease r {{ mechanism gaussian  sensitivity {sens}  {noise}  guarantee {g} }}\n"


def compile_error(text, name="spec.dps", base=None):
    spec = dpspec.loads(text, name=name, base_dir=base)
    assert spec.ok, [render(d, spec.sources) for d in spec.diagnostics]
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(spec)
    return e.value


def _spec(name: str, old: str, new: str) -> str:
    text = (SPECS / name).read_text(encoding="utf-8")
    assert old in text
    return text.replace(old, new)


# The issue's reproductions, each now a located compile error (never a certificate, never exit 3).
CASES = {
    "swm_target_1e308": ("groups_swm.dps", "ave_srpp(alpha = 4, epsilon = 2.0)", "ave_srpp(alpha = 4, epsilon = 1e308)",
                         "DPS205"),
    "srpp_clip_5e-324": ("digits_srpp.dps", "C = 1.0", "C = 5e-324", "DPS205"),
    "dpsgd_clip_1e308": ("dpsgd_records.dps", "C = 1.0", "C = 1e308", "DPS205"),
    "dpsgd_target_1e-300": ("dpsgd_records.dps", "epsilon = 8", "epsilon = 1e-300", "DPS205"),
    "dpsgd_target_1e-12": ("dpsgd_records.dps", "epsilon = 8", "epsilon = 1e-12", "DPS206"),
    "gcon_target_1e-300": ("sbm_gcon.dps", "epsilon = 2", "epsilon = 1e-300", "DPS205"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_issue_reproductions_are_located_errors(case):
    name, old, new, rule = CASES[case]
    err = compile_error(_spec(name, old, new), name=name, base=SPECS)
    d = next(d for d in err.diagnostics if d.rule == rule)
    assert d.span is not None and d.hint
    assert "^" in render(d, err.sources)


@pytest.mark.parametrize("sens,noise,g,rule", [
    ("1", "", "dp(epsilon = 1e-300, delta = 1e-6)", "DPS205"),
    ("1", "", "dp(epsilon = 1e-12, delta = 1e-6)", "DPS206"),
    ("1", "", "rdp(alpha = 2, epsilon = 1e-300)", "DPS205"),
    ("5e-324", "", "dp(epsilon = 1, delta = 1e-6)", "DPS205"),
    ("1", "noise gaussian(sigma = 5e-324)", "dp(delta = 1e-6)", "DPS205"),
    ("1", "noise gaussian(sigma = 1e308)", "dp(delta = 1e-6)", "DPS205"),
    ("1e100", "noise gaussian(sigma = 1e-100)", "dp(delta = 1e-6)", "DPS207"),
])
def test_gaussian_release_out_of_range(sens, noise, g, rule):
    err = compile_error(GAUSS.format(sens=sens, noise=noise, g=g))
    assert rule in {d.rule for d in err.diagnostics}


def test_a_query_bound_out_of_range_is_located():
    # the exact Δ overflows a double: a check error
    spec = dpspec.loads("privacy p { unit record  dataset_size 100 }\nrelease r { mechanism gaussian  "
                        "query sum(x, y, bounds = [0, 1.5e308])  guarantee dp(epsilon = 1, delta = 1e-6) }")
    assert not spec.ok and any("overflows" in d.message for d in spec.diagnostics)
    assert all(d.rule != "DPS011" for d in spec.diagnostics)
    # Δ = 2e308 / 100 is a double, but the bounds are outside the range dpspec computes in
    err = compile_error("privacy p { unit record(relation = substitution)  dataset_size 100 }\nrelease r { "
                        "mechanism gaussian  query mean(x, bounds = [-1e308, 1e308])  guarantee dp(epsilon = 1, "
                        "delta = 1e-6) }")
    assert err.diagnostics[0].rule == "DPS205"
    err = compile_error("privacy p { unit record  dataset_size 100 }\nrelease r { mechanism gaussian  "
                        "query sum(x, bounds = [0, 1e200])  guarantee dp(epsilon = 1, delta = 1e-6) }")
    d = err.diagnostics[0]
    assert d.rule == "DPS205" and "bound" in d.message and d.span.line == 2


def test_the_cli_reports_range_errors_with_exit_1(tmp_spec):
    from dpspec.cli.main import main

    p = tmp_spec(GAUSS.format(sens="1", noise="", g="dp(epsilon = 1e-12, delta = 1e-6)"))
    assert main(["compile", str(p), "-o", str(p.with_suffix(".json"))]) == 1
    assert not p.with_suffix(".json").exists()


def test_zero_noise_is_never_certified_for_a_nonzero_sensitivity():
    from dpspec.certificate.model import MechanismRecord
    from dpspec.compiler.compile import check_certified_numbers
    from dpspec.compiler.errors import CompileError

    c = dpspec.compile(GAUSS.format(sens="1", noise="noise gaussian(sigma = 2)", g="dp(delta = 1e-6)"))
    t = c.spec.ir.releases[0]
    rec = c.certificate.results[0]
    check_certified_numbers(t, rec)  # fine as compiled
    for sigma in (0.0, 5e-324, -1.0):
        p = dict(rec.mechanism.parameters, sigma=sigma)
        bad = rec.model_copy(update={"mechanism": MechanismRecord(**{**rec.mechanism.model_dump(), "parameters": p})})
        with pytest.raises(CompileError) as e:
            check_certified_numbers(t, bad)
        assert e.value.diagnostic.rule == "DPS207"
    g = rec.guarantee.model_copy(update={"epsilon": 0.0})
    with pytest.raises(CompileError):
        check_certified_numbers(t, rec.model_copy(update={"guarantee": g}))


# --- ε is rounded up, never to 0 -----------------------------------------------------------------------


def _exact_delta(eps, mu):
    with mp.workdps(60):
        eps, mu = mp.mpf(eps), mp.mpf(mu)
        return mp.ncdf(mu / 2 - eps / mu) - mp.e ** eps * mp.ncdf(-mu / 2 - eps / mu)


@settings(max_examples=40)
@given(log_sens=st.floats(-100, 100), log_ratio=st.floats(-60, 3))
def test_a_gaussian_release_is_an_upper_bound_or_a_located_error(log_sens, log_ratio):
    """σ and Δ anywhere in the computable range: a certificate with finite, positive, rounded-up numbers
    that verifies — or a DPS20x error; never another exception."""
    sens = 10.0 ** log_sens
    sigma = 10.0 ** (log_sens - log_ratio)
    text = GAUSS.format(sens=repr(sens), noise=f"noise gaussian(sigma = {sigma!r})",
                        g="rdp(alpha = 4)" if log_ratio < -30 else "dp(delta = 1e-6)")
    try:
        c = dpspec.compile(text)
    except dpspec.SpecError as e:
        assert {d.rule for d in e.diagnostics} <= {"DPS205", "DPS207"}, [d.message for d in e.diagnostics]
        return
    r = c.certificate.results[0]
    g = r.guarantee
    assert all(math.isfinite(x) and x > 0 for x in [*g.rdp_epsilons, *(d.epsilon for d in g.dp), g.epsilon])
    mu_exact = mp.mpf(sens) / mp.mpf(r.mechanism.parameters["sigma"])
    with mp.workdps(60):
        for a, e in zip(g.rdp_alphas[::20], g.rdp_epsilons[::20]):
            assert mp.mpf(e) >= mp.mpf(a) * mu_exact ** 2 / 2   # Mironov Prop. 7, rounded up
    for d in g.dp:
        assert _exact_delta(d.epsilon, mu_exact) <= d.delta       # Balle & Wang Thm 8 at the recorded ε
    rep = dpspec.verify(c.certificate, raise_on_error=False)
    assert rep.ok, rep.problems


def test_epsilon_is_never_zero_for_a_nonzero_sensitivity():
    c = dpspec.compile(GAUSS.format(sens="1", noise="noise gaussian(sigma = 1e90)", g="dp(delta = 1e-6)"))
    g = c.certificate.results[0].guarantee
    assert g.epsilon == GR.ABS_ERROR and all(d.epsilon > 0 for d in g.dp) and min(g.rdp_epsilons) > 0
    assert dpspec.verify(c.certificate).ok


def test_rdp_curve_rounds_up_through_underflow():
    mu = 1e-200
    got = GR.rdp_curve(np.array([1.5, 2.0, 64.0]), mu)
    assert np.all(got > 0)                     # the exact values (~1e-400) underflow; recorded positive
    mu = 0.3
    alphas = np.linspace(1.01, 500, 400)
    got = GR.rdp_curve(alphas, mu)
    with mp.workdps(50):
        assert all(mp.mpf(g) >= mp.mpf(a) * mp.mpf(mu) ** 2 / 2 for a, g in zip(alphas, got))


def test_a_composition_rounds_its_sum_up():
    c = dpspec.compile(dpspec.load(SPECS / "composition.dps"))
    res = {r.name: r for r in c.certificate.results}
    from fractions import Fraction

    parts = [res[n].guarantee.rdp_epsilons for n in ("age_sum", "row_count", "model")]
    total = res["everything"].guarantee.rdp_epsilons
    for i in range(0, len(total), 7):
        assert Fraction(total[i]) >= sum(Fraction(p[i]) for p in parts)


def test_dpsgd_epsilon_at_the_tv_shortcut_is_floored_not_zero():
    text = ("privacy p { unit record  dataset_size 60000 }\ntrain t { mechanism dpsgd  sampling poisson(rate = 0.001)"
            "  clipping flat(C = 1)  steps 10  noise_multiplier 1e6  guarantee dp(delta = 1e-5) }")
    c = dpspec.compile(text)
    g = c.certificate.results[0].guarantee
    assert all(d.epsilon > 0 for d in g.dp)
    assert not any(f.name == "rdp_to_dp" for f in c.certificate.results[0].formulas)
    assert dpspec.verify(c.certificate).ok


def test_no_certificate_holds_a_non_finite_number():
    """C = 1e100 with σ/C = 1e-100 is in range, but the RDP curve overflows: DPS207, not inf in JSON."""
    text = ("privacy p { unit record  dataset_size 1000 }\ntrain t { mechanism dpsgd  sampling full_batch"
            "  clipping flat(C = 1)  steps 10  noise_multiplier 1e-100  guarantee dp(delta = 1e-5) }")
    try:
        c = dpspec.compile(text)
    except dpspec.SpecError as e:
        assert {d.rule for d in e.diagnostics} <= {"DPS207", "DPS205"}
        return
    c.certificate.to_json()  # serialisable: every number finite
    assert dpspec.verify(c.certificate, raise_on_error=False).ok
