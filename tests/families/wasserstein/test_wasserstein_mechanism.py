"""The Wasserstein mechanism (ε-Pufferfish), aggregate releases, predicate and membership secrets, and
prior families — checked against brute-force references and a distinguishing test."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.ir import models as ir
from dpspec.pufferfish import aggregate as A
from dpspec.pufferfish.attacks import distinguishing_epsilon, laplace_log_likelihood
from tests.conftest import SPECS

SYN = """
scenario s {{
  data   synthetic(generator = secret_groups, size = {size}, seed = 1)
  secret {secret}
  prior  {prior}
}}
release r {{
  mechanism wasserstein
  output    {output}
  query     {query}
  guarantee pufferfish(epsilon = {eps})
}}
"""


def syn(
    secret="group in {A, B, C}",
    prior="empirical",
    output="aggregate",
    query="mean(x1, x2, bounds = [0, 10])",
    eps=1,
    size=120,
):
    return SYN.format(secret=secret, prior=prior, output=output, query=query, eps=eps, size=size)


def compile_text(text):
    return dpspec.compile(dpspec.loads(text, name="t.dps"))


# --- the language ------------------------------------------------------------------------------------


def test_predicate_membership_and_prior_ranges_lower_to_the_ir():
    spec = dpspec.loads(
        "scenario h { secret disease = num > 0  prior [empirical, bernoulli(p in [0.2, 0.5]), "
        "categorical(p in [[0.1, 0.9], [0.1, 0.9]])] }\nscenario m { secret member(record) }\n"
        "scenario k { secret smoker = smoke in {daily, weekly}  prior bernoulli(p = 0.3) }",
        name="t.dps",
    ).ir
    h, m, k = spec.scenarios
    assert h.secret.attribute == "disease" and h.secret.values == ("true", "false")
    pr = h.secret.predicate
    assert (pr.column, pr.op, pr.threshold) == ("num", ">", 0.0)
    assert isinstance(h.worlds[1], ir.BernoulliWorld) and (h.worlds[1].p_low, h.worlds[1].p_high) == (0.2, 0.5)
    assert h.worlds[2].ranges == ((0.1, 0.9), (0.1, 0.9))
    assert m.secret.membership and m.secret.values == ("in", "out")
    assert k.secret.predicate.op == "in" and k.secret.predicate.members == ("daily", "weekly")
    assert (k.worlds[0].p_low, k.worlds[0].p_high) == (0.3, 0.3)


def test_a_range_for_a_single_valued_parameter_is_refused_with_a_location():
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.loads(
            "scenario h { secret g in {A, B}  prior balanced(seed in [1, 2]) }", name="t.dps"
        ).raise_for_errors()
    d = e.value.diagnostics[0]
    assert d.rule == "DPS104" and "takes one value" in d.message and d.span.line == 1


@pytest.mark.parametrize(
    "text, rule",
    [
        (syn(output=""), "DPS430"),
        (syn(query="vector(dimension = 2, sensitivity = 1)"), "DPS432"),
        (syn(secret="member(record)"), "DPS433"),
        (syn(secret="group in {A, B}", prior="bernoulli(p in [0.6, 0.4])"), "DPS434"),
        (syn(prior="bernoulli(p in [0.2, 0.4])"), "DPS434"),  # three values
    ],
)
def test_bad_wasserstein_specs_are_refused(text, rule):
    text = text.replace("  output    \n", "")
    with pytest.raises(dpspec.SpecError) as e:
        compile_text(text)
    assert rule in {d.rule for d in e.value.diagnostics}


# --- the numbers --------------------------------------------------------------------------------------


def _bottleneck_brute(A_, B_, w):
    """min over bijections of the max weighted-ℓ1 distance (equal sizes)."""
    best = np.inf
    for perm in itertools.permutations(range(len(B_))):
        best = min(best, max(float(np.sum(w * np.abs(A_[i] - B_[j]))) for i, j in enumerate(perm)))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_weighted_l1_w_inf_matches_brute_force_matching(seed):
    rng = np.random.default_rng(seed)
    A_, B_ = rng.integers(0, 5, (5, 3)).astype(float), rng.integers(0, 5, (5, 3)).astype(float)
    w = rng.uniform(0.1, 2, 3)
    exact, how = A.weighted_l1_w_inf(A_, B_, w)
    ref = _bottleneck_brute(A_, B_, w)
    assert how == "exact" and ref <= exact <= ref * (1 + 1e-12) + 1e-300
    bound, how2 = A.weighted_l1_w_inf(A_, B_, w, exact_cells=1)
    cross = max(float(np.sum(w * np.abs(a - b))) for a in A_ for b in B_)
    assert how2 == "cross_distance" and cross <= bound <= cross * (1 + 1e-12) and bound >= exact * (1 - 1e-12)


def test_lemma_a_aggregate_w_inf_against_an_enumerated_product_prior():
    """n = 3 records i.i.d. from a small empirical law; the secret is record 1's class. The exact W∞ of the
    mean's two conditional laws (enumerated) is at most (1/n)·the per-record W∞ — and the bound is attained
    here, so it is not loose by construction."""
    from dpspec.pufferfish import w_inf_1d

    rec = np.array([0.0, 1.0, 4.0, 10.0])
    lab = np.array([0, 0, 1, 1])
    n = 3
    per_rec, _ = A.weighted_l1_w_inf(rec[lab == 0, None], rec[lab == 1, None], np.ones(1))
    laws = []
    for s in (0, 1):
        laws.append([(a + b + c) / n for a in rec[lab == s] for b in rec for c in rec])
    agg = w_inf_1d(laws[0], laws[1])
    assert agg <= A.aggregate_factor("mean", n) * per_rec * (1 + 1e-12)
    assert agg == pytest.approx(per_rec / n, rel=1e-12)


def test_aggregate_noise_scales_like_one_over_n():
    small = compile_text(syn(size=120)).certificate.results[0].mechanism.parameters
    big = compile_text(syn(size=480)).certificate.results[0].mechanism.parameters
    per = compile_text(syn(size=120, output="per_record")).certificate.results[0].mechanism.parameters
    assert small["w_inf"] == pytest.approx(small["w_inf_record"] / 120, rel=1e-9)
    assert per["w_inf"] == pytest.approx(small["w_inf_record"], rel=1e-9)  # the same per-record law
    assert big["w_inf"] < small["w_inf"] / 2  # four times the records: about a quarter of the noise
    assert small["scale_0"] == pytest.approx(small["w_inf"] * 10 / 1.0, rel=1e-12)  # (W/ε)·range


def test_prior_family_gives_the_empirical_number_and_membership_the_record_norm():
    fam = compile_text(syn(prior="[empirical, categorical(p in [[0.1, 0.5], [0.1, 0.5], [0.2, 0.6]])]"))
    one = compile_text(syn())
    pf_, p1 = fam.certificate.results[0].mechanism.parameters, one.certificate.results[0].mechanism.parameters
    assert pf_["w_inf"] == p1["w_inf"]  # the family's sup is the empirical conditional laws' number
    mem = compile_text(syn(secret="member(record)", query="sum(x1, x2, bounds = [0, 10])"))
    m = mem.certificate.results[0].mechanism.parameters
    X = np.asarray([[min(max(v, 0), 10) for v in row] for row in _synthetic_rows(120)])
    assert m["w_inf"] == pytest.approx(np.max(np.abs(X).sum(1) / 10), rel=1e-9)


def _synthetic_rows(size):
    from dpspec.data.bind import load_table

    t = load_table(ir.SyntheticData(generator="secret_groups", size=size, seed=1), None)
    return t.matrix(("x1", "x2"))


# --- the runtime and the distinguishing test ------------------------------------------------------------


def test_runtime_takes_the_certified_scales_and_refuses_other_readings():
    from dpspec.mechanisms.ledger import BudgetExceededError, DataMismatchError

    c = compile_text(syn())
    mech = c.mechanisms["r"]
    p = c.certificate.results[0].mechanism.parameters
    assert mech.scales == (p["scale_0"], p["scale_1"])
    X = _synthetic_rows(120)
    with pytest.raises(DataMismatchError):
        mech.release(X[:100])  # a smaller dataset's mean would need more noise
    with pytest.raises(DataMismatchError):
        mech.release_records(X)  # aggregate noise does not cover per-record answers
    out = mech.release(X, rng=0)
    assert out.value.shape == (2,)
    with pytest.raises(BudgetExceededError):
        mech.release(X, rng=1)


def _labels(size):
    from dpspec.data.bind import load_table

    t = load_table(ir.SyntheticData(generator="secret_groups", size=size, seed=1), None)
    return np.asarray(t.column("group"), dtype=object)


def _eps_lower(draw_a, draw_b, za, zb, scales):
    score = lambda y: laplace_log_likelihood(y, za, scales) - laplace_log_likelihood(y, zb, scales)  # noqa: E731
    return distinguishing_epsilon(score(draw_a()), score(draw_b()))


def test_distinguishing_test_on_the_aggregate_of_independent_records_stays_below_epsilon():
    """Outputs drawn from the Pufferfish experiment itself under the empirical product prior (record i from
    the secret's class, the others i.i.d. from the data), scored by the log-likelihood ratio."""
    c = compile_text(syn(size=60, eps=1))
    mech = c.mechanisms["r"]
    G, labels = np.clip(_synthetic_rows(60), 0, 10), _labels(60)
    rng = np.random.default_rng(7)
    n, draws = len(G), 3000

    def means(s, k):
        own = G[labels == s][rng.integers(0, np.sum(labels == s), k)]
        return (own + G[rng.integers(0, n, (k, n - 1))].sum(1)) / n

    sens = c.certificate.results[0].sensitivity
    a, b = sens.pairs[int(np.argmax([row[0] for row in sens.instance_deltas]))]
    za, zb = means(a, 400), means(b, 400)  # the conditional laws, for the score
    noisy = lambda s: lambda: means(s, draws) + rng.laplace(size=(draws, 2)) * np.asarray(mech.scales)  # noqa: E731
    assert _eps_lower(noisy(a), noisy(b), za, zb, mech.scales) <= 1.0


def test_distinguishing_test_on_point_mass_priors_is_tight_enough_to_refute_a_tenth_of_the_noise():
    """`prior groups`: the secret selects a whole group, the two laws are point masses W apart, and the
    certified ε is attained by the likelihood-ratio test: the certified noise passes, a tenth of it fails."""
    c = compile_text(syn(prior="groups", size=90, eps=1))
    mech = c.mechanisms["r"]
    X, labels = _synthetic_rows(90), _labels(90)
    sens = c.certificate.results[0].sensitivity
    a, b = sens.pairs[int(np.argmax([row[0] for row in sens.instance_deltas]))]
    za, zb = mech.query(X[labels == a])[None, :], mech.query(X[labels == b])[None, :]
    rng = np.random.default_rng(3)

    def draw(z, scales):
        return lambda: z + rng.laplace(size=(4000, z.shape[1])) * np.asarray(scales)

    certified = _eps_lower(draw(za, mech.scales), draw(zb, mech.scales), za, zb, mech.scales)
    assert 0.5 < certified <= 1.0  # close to the bound: the test has power
    tenth = np.asarray(mech.scales) / 10
    assert _eps_lower(draw(za, tenth), draw(zb, tenth), za, zb, tenth) > 1.0


# --- the spec on the real data (skipped without the data folder) ------------------------------


def test_heart_disease_spec_compiles_verifies_explains_and_releases_useful_noise():
    from dpspec.certificate.explain import explain
    from dpspec.data.bind import load_table

    c = dpspec.compile(dpspec.load(SPECS / "heart_disease_pufferfish.dps"))
    cert = c.certificate
    dpspec.verify(cert.to_json())  # raises on any problem
    text = explain(cert)
    assert "aggregate release" in text and "what it bounds" in text
    sc = c.spec.ir.scenarios[0]
    table = load_table(sc.data, None)
    ranges = np.array([70, 140, 500, 150])
    truth = table.matrix(("age", "trestbps", "chol", "thalach")).mean(0)
    for name in ("vitals", "vitals_sliced"):
        out = np.asarray(c.mechanisms[name].release(table, rng=3).value)
        assert np.all(np.abs(out - truth) < 0.1 * ranges), (name, out, truth)
    p = {r.name: r.mechanism.parameters for r in cert.results}
    assert p["vitals"]["records"] == 297 and p["vitals_sliced"]["sigma"] < 1.0


# --- notion statements are never ambiguous ---------------------------------------------------------------

_READINGS = ("released:", "selects the whole released group", "for a model trained on")


def check_notion_lines(text: str) -> list[str]:
    """Every `Protects:` / `Against:` line of an explain output, held to the rules of issue 26: a secret's
    Against line says what its notion bounds (a sliced one that it is weaker than the same ε unsliced);
    a secret's Protects line says what is released; a DP line names a differential privacy notion."""
    bad = []
    for line in text.splitlines():
        if line.startswith("Against:"):
            if "notion:" not in line:
                bad.append(line)
            elif "Pufferfish" in line:
                sliced = "sliced Rényi" in line.split("notion:", 1)[1].split(";")[0]
                if (
                    "what it bounds" not in line
                    or (sliced and "weaker than the same ε" not in line)
                    or (not sliced and "unsliced" not in line)
                ):
                    bad.append(line)
            elif "differential privacy" not in line:
                bad.append(line)
        elif line.startswith("Protects:") and "secret unit" in line and not any(r in line for r in _READINGS):
            bad.append(line)
    return bad


def test_the_notion_checker_catches_an_ambiguous_line():
    assert check_notion_lines("Against:  an adversary; notion: Average sliced Rényi Pufferfish privacy") != []
    assert check_notion_lines("Protects: the secret `x` of one record — definition `s` (secret unit)") != []


PUFFERFISH_SPECS = sorted(
    p
    for p in SPECS.glob("*.dps")
    if re.search(r"mechanism\s+(swm|wasserstein|markov_quilt|srpp_sgd)", p.read_text(encoding="utf-8"))
)


@pytest.mark.parametrize("path", PUFFERFISH_SPECS, ids=lambda p: p.name)
def test_every_pufferfish_spec_states_its_notion_unambiguously(path):
    from dpspec.certificate.explain import explain

    assert not check_notion_lines(explain(dpspec.compile(dpspec.load(path)).certificate))


def test_dp_certificates_state_their_notion_unambiguously(tmp_path):
    from dpspec.certificate.explain import explain
    from tests.conftest import load_example

    assert not check_notion_lines(explain(dpspec.compile(load_example(SPECS / "gaussian_release.dps")).certificate))


# --- the sliced mechanism's aggregate reading ------------------------------------------------------------

SWM = """
scenario s {{
  data   synthetic(generator = secret_groups, size = 150, seed = 1)
  secret group in {{A, B, C}}
  prior  [empirical, categorical(p in [[0.2, 0.6], [0.2, 0.6], [0.1, 0.5]])]
}}
release r {{
  mechanism swm
  {output}
  query     mean(x1, x2, bounds = [0, 10])
  slices    axes
  guarantee ave_srpp(alpha = 4, epsilon = 1)
}}
"""


def test_swm_aggregate_sigma_is_the_per_record_sigma_over_n_and_the_runtime_keeps_to_it():
    from dpspec.mechanisms.ledger import DataMismatchError

    agg = compile_text(SWM.format(output="output aggregate"))
    per = compile_text(SWM.format(output=""))
    pa = agg.certificate.results[0].mechanism.parameters
    pp = per.certificate.results[0].mechanism.parameters
    assert pa["output"] == "aggregate" and pa["records"] == 150 and "output" not in pp  # old certificates unchanged
    assert pa["sigma"] == pytest.approx(pp["sigma"] / 150, rel=1e-9)  # Ave: σ is linear in Δ (Thm 4.5)
    assert "per-record release" in per.certificate.results[0].protected.description
    X = _synthetic_rows(150)
    mech = agg.mechanisms["r"]
    with pytest.raises(DataMismatchError):
        mech.release_records(X)
    with pytest.raises(DataMismatchError):
        mech.release(X[:149])
    assert mech.release(X, rng=0).value.shape == (2,)


@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 3),
    st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_weighted_l1_w_inf_properties(na, nb, d, seed):
    """Symmetric; between the weighted distance of the means (W∞ ≥ W1 ≥ ‖E a − E b‖, Jensen) and the
    largest cross distance; zero for identical laws."""
    rng = np.random.default_rng(seed)
    A_, B_ = rng.normal(size=(na, d)), rng.normal(size=(nb, d))
    w = rng.uniform(0.1, 3.0, d)
    ab, _ = A.weighted_l1_w_inf(A_, B_, w)
    ba, _ = A.weighted_l1_w_inf(B_, A_, w)
    assert ab == pytest.approx(ba, rel=1e-12)
    assert float(np.sum(w * np.abs(A_.mean(0) - B_.mean(0)))) <= ab * (1 + 1e-12)
    assert ab <= A.max_cross_distance(A_, B_, w) * (1 + 1e-12)
    assert A.weighted_l1_w_inf(A_, A_[::-1], w)[0] < 1e-12
