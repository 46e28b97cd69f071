"""Statistics releases (issue 25): Laplace / discrete Laplace / discrete Gaussian / auto noise, counts, sums,
means and quantiles with `by`, `keys` and `where`, and one budget shared by `compose … split`."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

import dpspec
from dpspec.certificate.verify import VerificationError
from dpspec.families.statistics import accountant as A
from dpspec.families.statistics.runtime import discrete_laplace_exact

# --- accountant ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sens,eps", [(1.0, 0.1), (99.0, 0.25), (3.0, 2.0)])
def test_laplace_scale_is_pure_dp_against_dp_accounting(sens, eps):
    from dp_accounting.pld.privacy_loss_mechanism import LaplacePrivacyLoss

    b = A.pure_scale(sens, eps)
    assert A.pure_epsilon(sens, b) <= eps * (1 + 1e-15)
    pl = LaplacePrivacyLoss(b, sensitivity=sens)
    assert pl.get_delta_for_epsilon(eps) < 1e-12  # δ = 0 at the certified ε
    assert pl.get_delta_for_epsilon(0.9 * eps) > 1e-3  # and the ε is tight


@pytest.mark.parametrize("t", [0.7, 2.5, 13.3])
def test_discrete_laplace_is_pure_dp_against_dp_accounting(t):
    from dp_accounting.pld.privacy_loss_mechanism import DiscreteLaplacePrivacyLoss

    pl = DiscreteLaplacePrivacyLoss(1 / t, sensitivity=1)
    assert pl.get_delta_for_epsilon(A.pure_epsilon(1.0, t)) < 1e-12
    assert pl.get_delta_for_epsilon(0.9 / t) > 1e-4


@pytest.mark.parametrize("b", [0.5, 2.0, 10.0])
def test_laplace_rdp_against_dp_accounting(b):
    import dp_accounting

    orders = [1.5, 2.0, 8.0, 64.0]
    acc = dp_accounting.rdp.RdpAccountant(orders=orders)
    acc.compose(dp_accounting.LaplaceDpEvent(b))
    ref = acc._rdp
    ours = [A.laplace_rdp(a, 1 / b) for a in orders]
    for o, r in zip(ours, ref):
        assert o >= r * (1 - 1e-12) and o <= max(r * (1 + 1e-9), r + 1e-14)


def _dl_tail(t, k):
    """P(|X| > k) for discrete Laplace with scale t, by mpmath summation."""
    with mp.workdps(40):
        r = mp.e ** (-1 / mp.mpf(t))
        z = (1 + r) / (1 - r)
        return float(2 * mp.nsum(lambda j: r**j, [k + 1, mp.inf]) / z)


@pytest.mark.parametrize("t", [0.8, 3.0, 13.3, 40.0])
def test_discrete_laplace_accuracy_is_the_least_95_percent_bound(t):
    k = int(A.error_bound("discrete_laplace", t))
    assert _dl_tail(t, k) <= 0.05 < _dl_tail(t, k - 1) if k > 0 else _dl_tail(t, 0) <= 0.05
    with mp.workdps(30):
        r = mp.e ** (-1 / mp.mpf(t))
        z = (1 + r) / (1 - r)
        mean_abs = float(2 * mp.nsum(lambda j: j * r**j, [1, mp.inf]) / z)
    assert A.expected_abs_error("discrete_laplace", t) == pytest.approx(mean_abs, rel=1e-12)


@pytest.mark.parametrize("s", [1.5, 7.0, 30.0])
def test_discrete_gaussian_accuracy_bound(s):
    k = int(A.error_bound("discrete_gaussian", s))
    with mp.workdps(30):
        w = lambda j: mp.e ** (-(mp.mpf(j) ** 2) / (2 * s * s))  # noqa: E731
        z = 1 + 2 * mp.nsum(w, [1, mp.inf])
        tail = lambda m: float(2 * mp.nsum(w, [m + 1, mp.inf]) / z)  # noqa: E731
    assert tail(k) <= 0.05
    assert tail(k - 2) > 0.05  # at most one integer above the least bound (the tail enclosure's slack)


def test_laplace_and_gaussian_bounds():
    assert A.error_bound("laplace", 2.0) == pytest.approx(2.0 * math.log(20))
    assert A.error_bound("gaussian", 1.0) == pytest.approx(1.959963984540054)


def test_mixed_composition_is_basic_plus_gdp():
    from dpspec.accounting import analytic_gaussian as GR

    e = A.compose([0.1, 0.2], [0.3, 0.4], 1e-6)
    assert e == pytest.approx(0.3 + GR.epsilon_of_delta(0.5, 1e-6), rel=1e-9)
    with mp.workdps(40):  # the μ = 0.5 part's exact δ at ε − 0.3 (Balle & Wang 2018, Thm 8) is within 1e-6
        eg, mu = mp.mpf(e) - mp.mpf("0.3"), mp.mpf("0.5")
        d = mp.ncdf(-eg / mu + mu / 2) - mp.e**eg * mp.ncdf(-eg / mu - mu / 2)
    assert d <= 1e-6


def test_exact_discrete_laplace_sampler_matches_its_pmf():
    import random

    rng = random.Random(5)
    t = Fraction(5, 2)
    xs = np.array([discrete_laplace_exact(t, rng.randrange) for _ in range(6000)])
    r = math.exp(-1 / 2.5)
    p0 = (1 - r) / (1 + r)
    assert abs(np.mean(xs == 0) - p0) < 4 * math.sqrt(p0 * (1 - p0) / len(xs))
    assert abs(np.mean(np.abs(xs)) - A.expected_abs_error("discrete_laplace", 2.5)) < 0.12
    assert abs(np.mean(xs)) < 0.15  # symmetric


# --- specs --------------------------------------------------------------------------------------------

UNIT = "privacy people { unit record  data dataset(t) }\n"


def table(n=4000, seed=1):
    g = np.random.default_rng(seed)
    return {
        "age": g.integers(17, 91, n).astype(float),
        "hours": g.integers(1, 100, n).astype(float),
        "sex": g.choice(["Male", "Female"], n),
        "race": g.choice(["A", "B", "C"], n, p=[0.7, 0.2, 0.1]),
    }


SURVEY = (
    UNIT
    + """
release n_rows   { mechanism laplace  query count() }
release mean_age { query mean(age, bounds = [17, 90]) }
release races    { query count(by = race, keys = ["A", "B", "C", "D"]) }
release hours    { query sum(hours, bounds = [0, 99], by = sex, keys = ["Male", "Female"]) }
release found    { query count(by = race) }
release median   { query quantile(age, q = 0.5, bounds = [17, 90]) }
release women    { query mean(hours, bounds = [0, 99], where = sex == "Female") }
compose survey {
  parts [n_rows, mean_age, races, hours, found, median, women]
  guarantee dp(epsilon = 1, delta = 1e-6)
  split SPLIT
}
"""
)


def _compile(text, t=None):
    return dpspec.compile(dpspec.loads(text), data={"t": t if t is not None else table()})


def _normalised_cost(c):
    """Σ over parts of the expected squared error in units of each part's Δ² (the `optimal` objective)."""
    out = 0.0
    for r in c.certificate.results:
        if r.kind != "release":
            continue
        p = r.mechanism.parameters
        if p["noise"] == "exponential":
            out += (2 * math.log(int(p["grid"])) / r.guarantee.epsilon) ** 2
            continue
        dim = len(json.loads(p["keys"])) if "keys" in p else 1
        v = A.variance(p["noise"], p["scale"]) / p["sensitivity"] ** 2 * dim
        if "count_scale" in p:
            v += A.variance(p["noise"], p["count_scale"])
        out += v
    return out


@pytest.mark.parametrize(
    "split", ["evenly", "optimal", "weights(1, 1, 2, 2, 1, 1, 1)", "weights [1, 1, 2, 2, 1, 1, 1]"]
)
def test_the_split_meets_the_target_within_one_percent(split):
    c = _compile(SURVEY.replace("SPLIT", split))
    comp = next(r for r in c.certificate.results if r.kind == "compose")
    assert 0.99 <= comp.guarantee.epsilon <= 1.0 and comp.guarantee.delta == 1e-6
    parts = [r for r in c.certificate.results if r.kind == "release"]
    assert math.fsum(r.guarantee.epsilon for r in parts) <= 1.0  # pure parts: basic composition
    if split.startswith("weights"):
        e = {r.name: r.guarantee.epsilon for r in parts}
        assert e["races"] == pytest.approx(2 * e["n_rows"], rel=1e-9)


def test_optimal_split_is_no_worse_than_even():
    even = _normalised_cost(_compile(SURVEY.replace("SPLIT", "evenly")))
    opt = _normalised_cost(_compile(SURVEY.replace("SPLIT", "optimal")))
    assert opt <= even


def test_split_with_gaussian_noise_meets_the_target():
    text = (
        UNIT
        + """
release a { mechanism discrete_gaussian  query count(by = race, keys = ["A", "B", "C"]) }
release b { mechanism laplace  query sum(hours, bounds = [0, 99]) }
compose both { parts [a, b]  guarantee dp(epsilon = 1, delta = 1e-6)  split evenly }
"""
    )
    c = _compile(text)
    comp = c.certificate.results[-1]
    assert 0.99 <= comp.guarantee.epsilon <= 1.0
    a = c.certificate.results[0].mechanism.parameters
    assert a["noise"] == "discrete_gaussian" and a["gdp_mu"] > 0


def test_releases_evaluate_the_query_on_the_data():
    t = table()
    text = (
        UNIT
        + """
release races  { query count(by = race, keys = ["A", "B", "C", "D"])  guarantee dp(epsilon = 50, delta = 1e-6) }
release hours  { mechanism laplace  query sum(hours, bounds = [0, 50], by = sex, keys = ["Male", "Female"])
                 guarantee dp(epsilon = 50, delta = 1e-6) }
release women  { mechanism laplace  query mean(hours, bounds = [0, 99], where = sex == "Female")
                 guarantee dp(epsilon = 50, delta = 1e-6) }
release older  { mechanism discrete_laplace  query count(where = age >= 60)  guarantee dp(epsilon = 50, delta = 1e-6) }
release median { query quantile(age, q = 0.5, bounds = [17, 90])  guarantee dp(epsilon = 50, delta = 1e-6) }
"""
    )
    c = _compile(text, t)
    m = c.mechanisms
    v, rep = m["races"].release()
    assert set(v) == {"A", "B", "C", "D"} and rep.noise == "discrete_laplace"
    for k in "ABC":
        assert abs(v[k] - np.sum(t["race"] == k)) <= 3 * rep.error_95
    v, rep = m["hours"].release(rng=1)
    for s in ("Male", "Female"):  # values clamped to [0, 50]
        assert abs(v[s] - np.minimum(t["hours"][t["sex"] == s], 50).sum()) <= 3 * rep.error_95
    assert rep.clamped == int(np.sum(t["hours"] > 50))
    v, _ = m["women"].release(rng=2)
    assert abs(v - t["hours"][t["sex"] == "Female"].mean()) < 0.5
    v, rep = m["older"].release()
    assert abs(v - np.sum(t["age"] >= 60)) <= 3 * rep.error_95 and float(v).is_integer()
    v, _ = m["median"].release(rng=3)
    assert abs(v - np.median(t["age"])) <= 3
    with pytest.raises(dpspec.BudgetExceededError if hasattr(dpspec, "BudgetExceededError") else Exception):
        m["women"].release(rng=2)


def test_partition_selection_releases_only_keys_over_the_threshold():
    t = table()
    t["race"] = np.array(["A"] * 3999 + ["rare"])
    c = _compile(UNIT + "release f { query count(by = race)  guarantee dp(epsilon = 1, delta = 1e-6) }", t)
    m = c.mechanism
    assert m.threshold > 1 + math.log(1 / (2e-6)) * 0.9  # ≈ 1 + b ln(1/2δ)
    v, _ = m.release()
    assert "rare" not in v and "A" in v


def test_verify_recomputes_and_refuses_an_edited_scale(tmp_path):
    c = _compile(SURVEY.replace("SPLIT", "optimal"))
    text = c.certificate.model_dump_json()
    assert dpspec.verify(text).ok
    doc = json.loads(text)
    doc["results"][0]["mechanism"]["parameters"]["scale"] /= 2
    with pytest.raises(Exception, match=r"parameters\.scale: recorded .* recomputed"):
        dpspec.verify(json.dumps(doc))


BAD = [
    (UNIT + "release a { query count() }\ncompose c { parts [a]  guarantee dp(epsilon = 1, delta = 1e-6) }", "DPS102"),
    (
        UNIT + "release a { query count()  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
        "compose c { parts [a]  guarantee dp(epsilon = 1, delta = 1e-6)  split evenly }",
        "DPS152",
    ),
    (
        UNIT + "release a { query count() }\ncompose c { parts [a]  guarantee dp(epsilon = 1, delta = 1e-6)  "
        "split weights(1, 2) }",
        "DPS151",
    ),
    (
        UNIT + "release a { query count() }\ncompose c { parts [a]  guarantee dp(epsilon = 1, delta = 1e-6)  "
        "split weights [1, 2] }",
        "DPS151",
    ),
    (
        UNIT + "release a { query count() }\ncompose c { parts [a]  guarantee dp(epsilon = 1, delta = 1e-6)  "
        "split weights [] }",
        "DPS151",
    ),
    (
        UNIT + "release a { mechanism gaussian  query count(where = age > 3)  "
        "guarantee dp(epsilon = 1, delta = 1e-6) }",
        "DPS150",
    ),
    (UNIT + "release a { query sum(age, by = sex)  guarantee dp(epsilon = 1, delta = 1e-6) }", "DPS155"),
    (
        UNIT + "release a { mechanism discrete_laplace  query sum(age, bounds = [0, 1.5])  "
        "guarantee dp(epsilon = 1, delta = 1e-6) }",
        "DPS155",
    ),
    (UNIT + 'release a { query count(where = sex >= "F")  guarantee dp(epsilon = 1, delta = 1e-6) }', "DPS104"),
    (
        'privacy p { unit record  data csv("adult/adult.data", schema = adults) }\n'
        "release a { query count()  guarantee dp(epsilon = 1, delta = 1e-6) }",
        "DPS153",
    ),
    (
        'privacy p { unit record  data csv("adult/adult.data", schema = adult) }\n'
        "release a { query sum(race, bounds = [0, 1])  guarantee dp(epsilon = 1, delta = 1e-6) }",
        "DPS153",
    ),
]


@pytest.mark.parametrize("text,rule", BAD)
def test_bad_specs_are_located_errors(text, rule):
    spec = dpspec.loads(text)
    rules = {d.rule for d in spec.diagnostics if d.is_error}
    assert rule in rules, rules
    assert all(d.span is not None for d in spec.diagnostics if d.rule == rule)


def test_a_missing_data_file_is_reported_once():
    text = (
        'privacy p { unit record  data csv("nowhere/none.csv") }\n'
        "release a { query count()  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
        "release b { query count()  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
    )
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(dpspec.loads(text))
    assert [d.rule for d in e.value.diagnostics] == ["DPS419"]


def test_audit_flags_each_mutant_and_passes_the_mechanism():
    from dpspec.audit import audit
    from dpspec.audit.mutations import mutants

    text = UNIT + (
        'release a { mechanism laplace  query sum(hours, bounds = [0, 99], by = sex, keys = ["Male", "Female"])\n'
        "  guarantee dp(epsilon = 1, delta = 1e-6) }"
    )
    c = _compile(text)
    ok = audit(c, trials=3000, seed=1, runtime=False)
    assert ok.ok and len(ok.results) == 3  # answers, data with an outlier, data with an undeclared key
    muts = mutants(c, "a")
    assert set(muts) == {"noise_scaled", "missing_clamp", "key_leak"}
    for kind, bad in muts.items():
        trials = 40000 if kind == "noise_scaled" else 2000
        rep = audit(c, mechanisms={"a": bad}, trials=trials, seed=1, runtime=False)
        assert not rep.ok, kind


def test_verify_takes_a_path_string_to_a_json_file(tmp_path, monkeypatch):
    c = _compile(UNIT + "release a { query count()  guarantee dp(epsilon = 1, delta = 1e-6) }")
    p = tmp_path / "cert.json"
    p.write_text(c.certificate.model_dump_json(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert dpspec.verify("cert.json").ok  # a relative path string
    assert dpspec.verify(str(p)).ok
    with pytest.raises(VerificationError):  # a str that names no file is JSON text (and this is not JSON)
        dpspec.verify("missing.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(VerificationError):  # a directory is never read
        dpspec.verify("dir.json")


def test_release_takes_a_pandas_dataframe():
    pd = pytest.importorskip("pandas")
    t = table()
    df = pd.DataFrame(t)
    df.loc[3, "hours"] = None  # a missing value
    text = UNIT + (
        'release a { mechanism laplace  query sum(hours, bounds = [0, 99], by = sex, keys = ["Male", "Female"])\n'
        "  guarantee dp(epsilon = 50, delta = 1e-6) }"
    )
    c = dpspec.compile(dpspec.loads(text))  # the data arrives at run time
    v, rep = c.mechanism.release(df, rng=0)
    expect = {s: np.nansum(df["hours"][df["sex"] == s]) for s in ("Male", "Female")}
    assert all(abs(v[s] - expect[s]) <= 3 * rep.error_95 for s in expect)
    assert rep.missing == 1 and rep.rows == len(df)


def test_release_takes_a_polars_frame_and_lazy_frame_with_equal_results():
    pl = pytest.importorskip("polars")
    t = table()
    text = UNIT + (
        'release a { mechanism laplace  query count(by = race, keys = ["A", "B", "C"], where = age >= 40)\n'
        "  guarantee dp(epsilon = 50, delta = 1e-6) }"
    )
    outs = []
    for frame in (t, pl.DataFrame(t), pl.DataFrame(t).lazy()):
        c = dpspec.compile(dpspec.loads(text))
        v, rep = c.mechanism.release(frame, rng=7)  # the same noise draw: the answers must be equal
        outs.append((v, rep.rows, rep.clamped, rep.missing))
    assert outs[0] == outs[1] == outs[2]


def test_a_noisy_denominator_mean_reports_a_95_percent_bound_that_holds():
    t = table(n=300)
    text = (
        UNIT
        + "release m { mechanism laplace  query mean(age, bounds = [17, 90])  guarantee dp(epsilon = 1, delta = 1e-6) }"
    )
    rec = _compile(text, t).certificate.results[0]
    from dpspec.families.statistics.runtime import StatisticRelease

    truth_, misses, bounds = float(np.mean(t["age"])), 0, []
    for i in range(400):
        v, rep = StatisticRelease.from_certificate(rec).release(t, rng=i)
        bounds.append(rep.error_95)
        misses += abs(v - truth_) > rep.error_95
    assert misses <= 0.05 * 400 + 3 * math.sqrt(0.05 * 0.95 * 400)  # coverage ≥ 95 % (binomial slack)
    assert max(bounds) <= 73 and min(bounds) < 5  # never above hi − lo; informative at n = 300


def test_a_budget_too_small_to_share_is_a_located_error_not_a_traceback(tmp_path):
    parts = ", ".join(f"r{i}" for i in range(3))
    text = UNIT + "".join(f"release r{i} {{ mechanism discrete_gaussian  query count() }}\n" for i in range(3))
    text += f"compose c {{ parts [{parts}]  guarantee dp(epsilon = 2e-9, delta = 1e-12)  split evenly }}\n"
    with pytest.raises(dpspec.SpecError) as e:
        _compile(text)
    assert {d.rule for d in e.value.diagnostics} <= {"DPS202", "DPS206", "DPS204"}
    assert all(d.span is not None for d in e.value.diagnostics)


@pytest.mark.parametrize("b,sigma", [(2.0, 3.0), (10.0, 1.5), (1.0, 20.0)])
def test_mixed_composition_is_an_upper_bound_of_dp_accountings_pld(b, sigma):
    import dp_accounting

    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.LaplaceDpEvent(b))
    acc.compose(dp_accounting.GaussianDpEvent(sigma))
    ref = acc.get_epsilon(1e-6)
    ours = A.compose([A.pure_epsilon(1.0, b)], [1.0 / sigma], 1e-6)
    assert ours >= ref * (1 - 1e-3)  # sound (dp_accounting's PLD is itself pessimistic to ~1e-4)
    assert ours <= ref * 1.6 + 0.05  # and not far above the near-exact value


def test_a_polars_lazyframe_is_aggregated_out_of_core_with_the_in_memory_results():
    pl = pytest.importorskip("polars")
    t = table()
    t["hours"][5] = np.nan  # a missing value
    t["age"][7] = 200.0  # clamped
    cases = [
        'count(by = race, keys = ["A", "B", "C", "Z"], where = sex == "Female")',
        "count(by = race, where = age >= 40)",
        'sum(hours, bounds = [0, 50], by = sex, keys = ["Male", "Female"], where = age < 60)',
        "mean(age, bounds = [17, 90])",
        "sum(hours, bounds = [0.5, 50.5])",  # a fractional value after clamping: streamed batch by batch
    ]
    for q in cases:
        text = UNIT + f"release a {{ mechanism laplace  query {q}  guarantee dp(epsilon = 1, delta = 1e-6) }}"
        outs = []
        for frame in (t, pl.DataFrame(t).lazy()):
            c = dpspec.compile(dpspec.loads(text))
            v, rep = c.mechanism.release(frame, rng=11)
            outs.append((v, rep.rows, rep.clamped, rep.missing))
        assert outs[0] == outs[1], q
        assert "out of core" in rep.data_source  # every case, the fractional one batch by batch


def test_an_unknown_schema_on_a_scenarios_data_is_a_check_error():
    from dpspec.check.rules_pufferfish import spec

    good = spec().replace("synthetic(generator = secret_groups, size = 600, seed = 1)", 'csv("x.csv", schema = adult)')
    bad = good.replace("schema = adult", "schema = adultt")
    assert not [d for d in dpspec.loads(good).diagnostics if "unknown schema" in d.message]
    s = dpspec.loads(bad)  # no data is read: `check` alone
    d = [d for d in s.diagnostics if d.rule == "DPS153" and "unknown schema `adultt`" in d.message]
    assert len(d) == 1 and d[0].span is not None and "adult" in d[0].hint and not s.ok
