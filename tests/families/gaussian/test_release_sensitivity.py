"""A release's sensitivity: declared vs derived (DPS140), its derivation carried by the certificate,
bounds vs columns (DPS141), and the mean's public normaliser."""

import math
from fractions import Fraction
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

import dpspec
from dpspec.compiler import formulas as F

ISSUE = """privacy respondents { unit record  dataset_size 32561 }
release total_hours {
  mechanism   gaussian
  query       sum(hours_per_week, bounds = [0, 99])
  sensitivity 1.0
  guarantee   dp(epsilon = 1.0, delta = 1e-6)
}
"""


def rules(text):
    return {d.rule for d in dpspec.loads(text, name="s.dps").diagnostics}


def release(query, unit="record", sens=None, extra="", noise="noise gaussian(sigma = 1e6)  guarantee dp(delta = 1e-6)"):
    s = f"  sensitivity {sens!r}\n" if sens is not None else ""
    return (f"privacy p {{\n  unit {unit}\n{extra}}}\n"
            f"release r {{\n  mechanism gaussian\n  query {query}\n{s}  {noise}\n}}\n")


def test_the_issue_example_is_no_longer_certified(tmp_path):
    """A declared Δ = 1 next to bounds implying Δ = 99 was certified at ε = 1 (true ε ≈ 385)."""
    assert "DPS140" in rules(ISSUE)
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(ISSUE)
    d = [d for d in e.value.diagnostics if d.rule == "DPS140"][0]
    assert d.span.line == 5 and "99" in d.message and d.hint
    p = tmp_path / "issue.dps"
    p.write_text(ISSUE, encoding="utf-8")
    for cmd in ("check", "compile"):
        r = subprocess.run([sys.executable, "-m", "dpspec", cmd, str(p)], capture_output=True, text=True,
                           cwd=tmp_path)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "DPS140" in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "issue.cert.json").exists()


@st.composite
def columns_and_bounds(draw):
    k = draw(st.integers(1, 4))
    pairs = []
    for _ in range(k):
        lo = draw(st.floats(-1e3, 1e3, allow_nan=False).filter(lambda x: x == 0 or abs(x) >= 1e-9))  # DPS205
        width = draw(st.floats(1e-3, 1e3))
        pairs.append((lo, lo + width))
    return [f"c{i}" for i in range(k)], pairs


UNITS = st.sampled_from(["record", "record(relation = substitution)", "group(size = 3)",
                         "group(size = 5, relation = substitution)"])


def _exact_delta(pairs, unit, function, n=None):
    K = 3 if "size = 3" in unit else 5 if "size = 5" in unit else 1
    if "substitution" in unit:
        s = math.sqrt(sum((hi - lo) ** 2 for lo, hi in pairs))
    else:
        s = math.sqrt(sum(max(abs(lo), abs(hi)) ** 2 for lo, hi in pairs))
    return K * s / (n or 1)


def _query(function, cols, pairs):
    return f"{function}({', '.join(cols)}, bounds = [{', '.join(f'[{lo!r}, {hi!r}]' for lo, hi in pairs)}])"


@given(columns_and_bounds(), UNITS, st.sampled_from(["sum", "mean"]), st.floats(0.0, 0.999))
def test_a_declared_sensitivity_below_the_derived_one_is_always_rejected(cb, unit, function, factor):
    cols, pairs = cb
    extra = "  dataset_size 1000\n"
    exact = _exact_delta(pairs, unit, function, 1000 if function == "mean" else None)
    text = release(_query(function, cols, pairs), unit, sens=exact * factor, extra=extra)
    assert "DPS140" in rules(text)


@given(columns_and_bounds(), UNITS, st.sampled_from(["sum", "mean"]), st.floats(1.0, 10.0))
def test_a_declared_sensitivity_at_or_above_the_derived_one_is_used(cb, unit, function, factor):
    cols, pairs = cb
    exact = _exact_delta(pairs, unit, function, 1000 if function == "mean" else None)
    text = release(_query(function, cols, pairs), unit, sens=exact * factor * (1 + 1e-9), extra="  dataset_size 1000\n")
    assert "DPS140" not in rules(text)
    r = dpspec.compile(text).certificate.results[0]
    q = r.query
    assert q.derived_sensitivity >= exact * (1 - 1e-12)
    assert r.mechanism.parameters["sensitivity"] == max(q.derived_sensitivity, exact * factor * (1 + 1e-9))


@settings(max_examples=25)  # each example re-evaluates the formula with sympy at 40 digits
@given(columns_and_bounds(), UNITS)
def test_the_derived_sensitivity_is_an_upper_bound_re_evaluated_from_the_certificate(cb, unit):
    cols, pairs = cb
    r = dpspec.compile(release(_query("sum", cols, pairs), unit)).certificate.results[0]
    f = next(f for f in r.formulas if f.name.startswith("query_sensitivity_"))
    K = 3 if "size = 3" in unit else 5 if "size = 5" in unit else 1
    per = ((Fraction(hi) - Fraction(lo)) ** 2 if "substitution" in unit else max(abs(Fraction(lo)), abs(Fraction(hi))) ** 2
           for lo, hi in pairs)
    exact_sq = K * K * sum(per)
    assert Fraction(f.value) ** 2 >= exact_sq  # rounded up: never below the exact value
    assert f.value <= math.sqrt(exact_sq) * (1 + 4e-16)
    assert f.value == pytest.approx(float(F.evaluate(f.name, f.variables)), rel=1e-12)  # what verify re-evaluates
    assert r.query.derived_sensitivity == f.value == r.mechanism.parameters["sensitivity"]
    assert r.query.bounds == [tuple(p) for p in pairs]


@pytest.mark.parametrize("unit,query,expected,words", [
    ("record", "sum(a, b, bounds = [[-3, 4], [0, 2]])", math.sqrt(16 + 4), "max(|lo_c|, |hi_c|)"),
    ("record(relation = substitution)", "sum(a, b, bounds = [[-3, 4], [0, 2]])", math.sqrt(49 + 4), "(hi_c − lo_c)"),
    ("group(size = 4)", "sum(a, bounds = [17, 90])", 360.0, "K"),
    ("record", "mean(a, bounds = [17, 90])", 90 / 1000, "public n = 1000"),
    ("record(relation = substitution)", "mean(a, bounds = [17, 90])", 73 / 1000, "exactly n rows"),
    ("record", "count()", 1.0, "row count"),
    ("group(size = 3)", "count()", 3.0, "row count"),
    ("record", "histogram(a, bins = 5, bounds = [0, 1])", 1.0, "one bin"),
    ("record(relation = substitution)", "histogram(a, bins = 5, bounds = [0, 1])", math.sqrt(2), "−1"),
    ("group(size = 2, relation = substitution)", "histogram(a, bins = 5, bounds = [0, 1])", 2 * math.sqrt(2), "−1"),
])
def test_every_derivation_is_recorded_with_its_formula(unit, query, expected, words):
    c = dpspec.compile(release(query, unit, extra="  dataset_size 1000\n"))
    assert dpspec.verify(c.certificate).ok
    r = c.certificate.results[0]
    assert r.query.derived_sensitivity == pytest.approx(expected, rel=1e-15)
    assert r.query.derived_sensitivity >= expected * (1 - 1e-16)
    assert words in r.query.derivation
    assert any(f.name.startswith("query_sensitivity_") for f in r.formulas)
    assert r.query.evaluated_on == "data"
    assert any(a.id == "sensitivity" and "clamped" in a.statement for a in r.assumptions)


def test_verify_re_evaluates_the_derivation_and_catches_an_understated_one():
    import json

    from dpspec.certificate.model import Certificate, content_hash

    c = dpspec.compile(release("sum(a, b, bounds = [0, 99])"))
    rep = dpspec.verify(c.certificate)
    assert any("query_sensitivity" in x for x in rep.checks)
    data = json.loads(c.certificate.to_json())
    f = next(f for f in data["results"][0]["formulas"] if f["name"].startswith("query_sensitivity_"))
    f["value"] = 99.0  # √2·99 is the truth
    data["content_hash"] = content_hash(Certificate.model_validate(data))
    rep = dpspec.verify(data, raise_on_error=False)
    assert any("formulas[2].value" in p and "BELOW" in p for p in rep.problems)


def test_a_mean_needs_the_public_size_under_add_remove_too():
    assert "DPS129" in rules(release("mean(a, bounds = [0, 10])"))
    assert "DPS129" in rules(release("mean(a, bounds = [0, 10])", "record(relation = substitution)"))
    assert not rules(release("mean(a, bounds = [0, 10])", extra="  dataset_size 500\n"))


def test_a_histogram_needs_public_bins_and_one_column():
    assert "DPS129" in rules(release("histogram(a)"))
    assert "DPS129" in rules(release("histogram(a, b, bins = 4, bounds = [0, 1])"))
    assert not rules(release("histogram(a, bins = 4, bounds = [0, 1])"))


def test_without_bounds_a_declared_sensitivity_is_an_assumption_about_a_caller_answer():
    r = dpspec.compile(release("sum(a)", sens=2.0)).certificate.results[0]
    assert r.query.evaluated_on == "answer" and r.query.derived_sensitivity is None
    assert any(a.id == "sensitivity" and "not checked" in a.statement for a in r.assumptions)


@pytest.mark.parametrize("query,k", [("sum(a, b, bounds = [[0, 1], [0, 1], [0, 1]])", 2),
                                     ("mean(a, b, c, bounds = [[0, 1], [0, 1]])", 3)])
def test_bounds_must_match_the_columns(query, k):
    spec = dpspec.loads(release(query, extra="  dataset_size 10\n"))
    d = [d for d in spec.diagnostics if d.rule == "DPS141"]
    assert d and f"for {k} columns" in d[0].message and d[0].span is not None
    assert "DPS129" not in {x.rule for x in spec.diagnostics}


def test_bounds_must_match_the_columns_of_an_swm_query_at_check_time():
    from dpspec.check.rules_pufferfish import spec

    assert "DPS141" in rules(spec(query="mean(x1, x2, bounds = [[0, 10], [0, 10], [0, 10]])"))


def test_given_noise_without_a_finite_epsilon_is_a_diagnostic_not_a_crash():
    text = release("sum(a, bounds = [0, 1e6])", noise="noise gaussian(sigma = 1e-3)  guarantee dp(delta = 1e-6)")
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(text)
    assert [d.rule for d in e.value.diagnostics] in (["DPS202"], ["DPS207"])
