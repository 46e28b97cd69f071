"""Releases evaluate their query on the bound data: columns resolved at compile time, checked when
the data arrives, values clamped, the certified noise added once, a private run report."""

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dpspec
from dpspec.data.bind import fingerprint
from dpspec.data.synthetic import generate
from dpspec.mechanisms.ledger import BudgetExceededError, CertificateGuardError, DataMismatchError

BLOBS = "synthetic(generator = two_blobs, size = 600, seed = 3)"


def spec(query, data=BLOBS, unit="record", size="", noise="noise gaussian(sigma = 1e-2)  guarantee dp(delta = 1e-6)"):
    d = f"  data {data}\n" if data else ""
    n = f"  dataset_size {size}\n" if size else ""
    return (f"privacy people {{\n  unit {unit}\n{d}{n}}}\n"
            f"release stat {{\n  mechanism gaussian\n  query     {query}\n  {noise}\n}}\n")


def rules_of(text, **kw):
    try:
        dpspec.compile(text, **kw)
    except dpspec.SpecError as e:
        return {d.rule for d in e.diagnostics}, e
    return set(), None


# --- compile time: the bound data is read ---------------------------------------------------------


def test_a_misspelt_column_is_a_located_error_with_a_suggestion():
    raised, e = rules_of(spec("sum(x11, bounds = [-1, 1])"))
    assert raised == {"DPS416"}
    d = e.diagnostics[0]
    assert d.span.line == 7 and d.hint == "did you mean `x1`?"


def test_a_categorical_column_is_a_located_error():
    raised, e = rules_of(spec("sum(label, bounds = [0, 1])"))
    assert raised == {"DPS147"} and e.diagnostics[0].span.line == 7


def test_the_adult_example_reads_its_column_and_a_missing_file_fails(tmp_path):
    good = spec("sum(hours-per-week, bounds = [0, 99])", data='csv("adult/adult.data", schema = adult)', size="32561",
                noise="guarantee dp(epsilon = 1, delta = 1e-6)")
    try:
        c = dpspec.compile(good)
    except dpspec.SpecError as e:
        pytest.skip(f"the Adult data is not available here: {e.diagnostics[0].message}")
    assert c.mechanism.data is not None and len(c.mechanism.data) == 32561  # rows with a missing value kept
    # a column the named schema lacks is found by `check`, before any data is read (DPS153)
    raised, e = rules_of(good.replace("hours-per-week", "hours_per_week"))
    assert raised == {"DPS153"} and "hours-per-week" in e.diagnostics[0].hint
    raised, e = rules_of(good.replace('"adult/adult.data", schema = adult', '"adult/no-such-file.csv"'))
    assert raised == {"DPS419"} and e.diagnostics[0].span.line == 3
    raised, _ = rules_of(good.replace("32561", "30162"))
    assert raised == {"DPS142"}


def test_the_cli_never_exits_0_on_a_bad_column_or_file(tmp_path, monkeypatch):
    bad = tmp_path / "data" / "bad.csv"
    bad.parent.mkdir()
    bad.write_text("x1,x2\n1,2\n3\n", encoding="utf-8")  # a row with a missing field
    monkeypatch.setenv("DPSPEC_DATA_DIR", str(bad.parent))
    for text, rule in [(spec("sum(x11, bounds = [-1, 1])"), "DPS416"),
                       (spec("sum(x1, bounds = [-1, 1])", data='csv("nowhere/none.csv")'), "DPS419"),
                       (spec("sum(x1, bounds = [-1, 1])", data='csv("bad.csv")'), "DPS418")]:
        p = tmp_path / "s.dps"
        p.write_text(text, encoding="utf-8")
        r = subprocess.run([sys.executable, "-m", "dpspec", "compile", str(p)], capture_output=True, text=True,
                           cwd=tmp_path)
        assert r.returncode == 1 and rule in r.stdout + r.stderr and "Traceback" not in r.stderr
        assert "^" in r.stdout + r.stderr
        assert not list(tmp_path.glob("*.json"))


def test_dataset_size_must_match_generated_data():
    assert "DPS142" in {d.rule for d in dpspec.loads(spec("count()", size="500")).diagnostics}
    assert dpspec.compile(spec("count()", size="600")).mechanism.data is not None


# --- run time ---------------------------------------------------------------------------------------


def test_release_evaluates_the_clamped_query_on_the_bound_data():
    c = dpspec.compile(spec("sum(x1, x2, bounds = [[-1, 1], [0, 0.5]])"))
    mech = c.mechanism
    t = generate("two_blobs", 600, seed=3)
    x1, x2 = t.column("x1"), t.column("x2")
    expected = np.array([np.clip(x1, -1, 1).sum(), np.clip(x2, 0, 0.5).sum()])
    value, report = mech.release(rng=1)
    assert np.allclose(value, expected, rtol=0, atol=0.1)
    assert report.rows == 600
    assert report.clamped == int(((x1 < -1) | (x1 > 1)).sum() + ((x2 < 0) | (x2 > 0.5)).sum()) > 0
    assert report.missing == 0
    assert report.data_fingerprint == fingerprint(x1, x2)
    assert report.data_source.startswith("synthetic(generator = two_blobs")
    assert "private" in type(report).__doc__


def test_a_release_releases_once_and_reports_what_it_spent():
    c = dpspec.compile(spec("count()", noise="guarantee dp(epsilon = 0.5, delta = 1e-6)"))
    mech = c.mechanism
    before = mech.privacy_spent()
    assert before.epsilon == 0 and before.steps == 0 and before.budget_steps == 1
    value, _ = mech.release()
    after = mech.privacy_spent()
    assert after.epsilon == c.certificate.results[0].guarantee.epsilon and after.delta == 1e-6
    assert mech.privacy_spent(delta=1e-8).epsilon == pytest.approx(c.certificate.results[0].guarantee.dp[2].epsilon)
    with pytest.raises(BudgetExceededError):
        mech.release()
    with pytest.raises(CertificateGuardError, match="release\\(data\\)"):
        mech.release_answer(1.0)  # a query dpspec evaluates on the data: no answer from elsewhere


def test_an_rdp_release_reports_epsilon_alpha():
    c = dpspec.compile(spec("count()", noise="guarantee rdp(alpha = 8, epsilon = 0.5)"))
    mech = c.mechanism
    mech.release()
    s = mech.privacy_spent()
    assert s.alpha == 8 and s.epsilon == c.certificate.results[0].guarantee.epsilon


def test_data_bound_at_run_time_is_checked_when_it_arrives():
    c = dpspec.compile(spec("sum(x1, bounds = [-1, 1])", data="dataset(survey)"))
    mech = c.mechanism
    assert c.certificate.results[0].query.data == "dataset(survey)"
    with pytest.raises(DataMismatchError, match="bound at run time"):
        mech.release()
    with pytest.raises(DataMismatchError, match=r"`x1`.*did you mean `x_1`"):
        mech.release({"x_1": [0.5, 2.0]})
    with pytest.raises(DataMismatchError, match="categorical"):
        mech.release({"x1": np.array(["a", "b"], dtype=object)})
    assert mech.privacy_spent().steps == 0  # refusals charge nothing
    value, report = mech.release({"x1": [0.5, 2.0, -3.0]})
    assert value == pytest.approx(0.5 + 1.0 - 1.0, abs=0.1) and report.clamped == 2 and report.rows == 3


def test_data_bound_at_compile_time_by_name():
    t = generate("two_blobs", 300, seed=1)
    c = dpspec.compile(spec("sum(x1, bounds = [-1, 1])", data="dataset(survey)"), data={"survey": t})
    value, report = c.mechanism.release()
    assert value == pytest.approx(np.clip(t.column("x1"), -1, 1).sum(), abs=0.1) and report.rows == 300
    assert dpspec.verify(c.certificate).ok  # the certificate does not depend on the data bound
    raised, e = rules_of(spec("sum(y, bounds = [-1, 1])", data="dataset(survey)"), data={"survey": t})
    assert raised == {"DPS416"}


def test_missing_values_count_as_the_bound_nearest_zero():
    c = dpspec.compile(spec("sum(a, b, bounds = [[2, 5], [-5, -1]])", data="dataset(d)"))
    value, report = c.mechanism.release({"a": [3.0, math.nan, 9.0], "b": [math.nan, -2.0, math.inf]})
    assert np.allclose(value, [3 + 2 + 5, -1 - 2 - 1], atol=0.1)
    assert report.missing == 2 and report.clamped == 2


def test_a_mean_divides_by_the_certified_size_not_the_row_count():
    c = dpspec.compile(spec("mean(x, bounds = [0, 10])", data="dataset(d)", size="4"))
    value, report = c.mechanism.release({"x": [10.0, 10.0]})  # add/remove: the size is not checked
    assert value == pytest.approx(20 / 4, abs=0.1) and report.rows == 2


def test_substitution_refuses_data_of_another_size():
    c = dpspec.compile(spec("mean(x, bounds = [0, 10])", data="dataset(d)", unit="record(relation = substitution)",
                            size="4"))
    with pytest.raises(DataMismatchError, match="exactly 4 rows"):
        c.mechanism.release({"x": [1.0, 2.0]})
    value, _ = c.mechanism.release({"x": [1.0, 2.0, 3.0, 4.0]})
    assert value == pytest.approx(2.5, abs=0.1)


def test_histogram_counts_clamped_values_in_equal_bins():
    c = dpspec.compile(spec("histogram(x, bins = 4, bounds = [0, 4])", data="dataset(d)"))
    value, report = c.mechanism.release({"x": [-1.0, 0.5, 1.0, 2.5, 3.99, 4.0, 7.0]})
    assert np.allclose(value, [2, 1, 1, 3], atol=0.1) and report.clamped == 2


def test_release_answer_keeps_the_caveat_and_the_dimension():
    c = dpspec.compile(spec("vector(dimension = 2, sensitivity = 1)", data=None))
    mech = c.mechanism
    assert "Caveat" in mech.release_answer.__doc__
    with pytest.raises(DataMismatchError, match="dimension 2"):
        mech.release_answer(1.0)
    out, report = mech.release_answer([1.0, 2.0], rng=0)  # (value, report), as release() returns
    assert np.shape(out) == (2,) and report.rows == 0 and report.data_source == "given to release_answer()"
    with pytest.raises(BudgetExceededError):
        mech.release_answer([1.0, 2.0])


def test_release_answer_is_refused_when_the_certificate_evaluates_the_query_on_the_data():
    c = dpspec.compile(spec("sum(x1, x2, bounds = [0, 1])", data=None))
    assert c.certificate.results[0].query.evaluated_on == "data"
    with pytest.raises(CertificateGuardError, match="vector"):
        c.mechanism.release_answer([1e9, 1e9])  # would bypass the clamp the derived Δ rests on
    assert c.mechanism.privacy_spent().steps == 0  # nothing charged


def test_a_vector_release_has_no_query_to_evaluate():
    c = dpspec.compile(spec("vector(dimension = 3, sensitivity = 1)", data=None))
    with pytest.raises(CertificateGuardError, match="release_answer"):
        c.mechanism.release({"x": [1.0]})
    assert c.certificate.results[0].query.evaluated_on == "answer"
    assert np.shape(c.mechanism.release_answer([1.0, 2.0, 3.0]).value) == (3,)


def test_the_runtime_reads_its_numbers_from_the_certificate():
    from dpspec.families.gaussian.runtime import GaussianRelease

    c = dpspec.compile(spec("sum(x1, bounds = [-1, 1])", data="dataset(d)"))
    rec = c.certificate.results[0]
    edited = rec.model_copy(update={"query": rec.query.model_copy(update={"bounds": [(-0.5, 0.5)]})})
    mech = GaussianRelease.from_certificate(edited)
    value, _ = mech.release({"x1": [3.0, -3.0, 3.0]})
    assert value == pytest.approx(0.5, abs=0.1)  # the record's bounds, not the spec's
    assert mech.sigma == rec.mechanism.parameters["sigma"]


def test_secure_mode_through_the_data_path():
    from dpspec.families.gaussian.runtime import GaussianRelease

    c = dpspec.compile(spec("count()", data="dataset(d)", noise="guarantee dp(epsilon = 1, delta = 1e-6)"))
    mech = GaussianRelease.from_certificate(c.certificate.results[0], secure=True)
    with pytest.raises(ValueError, match="secure mode"):
        mech.release({"x": [1.0, 2.0]}, rng=3)
    value, report = mech.release({"x": [1.0, 2.0]})  # the refused call charged nothing
    assert isinstance(value, float) and report.rows == 2


# --- the runtime query's sensitivity: a distinguishing-style property -------------------------------

VALUES = st.one_of(st.floats(-1e4, 1e4), st.just(math.nan), st.just(math.inf), st.just(-math.inf))
QUERIES = st.sampled_from(["sum(a, b, bounds = [[-3, 4], [2, 5]])", "mean(a, b, bounds = [[-3, 4], [2, 5]])",
                           "count()", "histogram(a, bins = 3, bounds = [-3, 4])"])
_PLANS = {}


def _plan(query, unit):
    key = (query, unit)
    if key not in _PLANS:
        c = dpspec.compile(spec(query, data="dataset(d)", unit=unit, size="8" if "mean" in query else ""))
        _PLANS[key] = (c.mechanism.query, c.certificate.results[0].query.derived_sensitivity)
    return _PLANS[key]


@given(QUERIES, st.lists(st.tuples(VALUES, VALUES), min_size=1, max_size=12), st.tuples(VALUES, VALUES),
       st.data())
def test_clamped_answers_never_move_by_more_than_delta_between_neighbours(query, rows, other, data):
    """Add/remove one row, or substitute one: the runtime answers differ by at most the certified Δ."""
    from dpspec.data.bind import as_table

    def answer(plan, rs):
        t = as_table({"a": np.array([r[0] for r in rs], float), "b": np.array([r[1] for r in rs], float)}, "d")
        return plan.evaluate(t)[0]

    i = data.draw(st.integers(0, len(rows) - 1))
    plan, delta = _plan(query, "record")
    removed = rows[:i] + rows[i + 1:]
    if removed:
        assert np.linalg.norm(answer(plan, rows) - answer(plan, removed)) <= delta * (1 + 1e-9) + 1e-9
    if "count" not in query:
        plan, delta = _plan(query, "record(relation = substitution)")
        if "mean" in query:  # substitution keeps the certified size
            rows, i = (rows * 8)[:8], i % 8
        swapped = rows[:i] + [other] + rows[i + 1:]
        assert np.linalg.norm(answer(plan, rows) - answer(plan, swapped)) <= delta * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("query,size", [("histogram(x, bounds = [0, 1])", ""), ("mean(x, bounds = [0, 1])", ""),
                                        ("sum(x)", "")])
def test_a_declared_sensitivity_without_a_derivation_is_never_evaluated_on_data(query, size):
    """Only a query whose Δ dpspec derives is computed from data; the rest is the caller's answer."""
    c = dpspec.compile(spec(query, data="dataset(d)", size=size).replace("query ", "sensitivity 1\n  query ", 1))
    assert c.certificate.results[0].query.evaluated_on == "answer"
    with pytest.raises(CertificateGuardError, match="release_answer"):
        c.mechanism.release({"x": [0.5]})
