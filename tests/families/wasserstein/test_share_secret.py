"""Dataset-level proportion secrets (attribute privacy, Zhang, Ohrimenko & Cummings 2022) under the
Wasserstein mechanism: the exact binomial W∞ against a brute-force quantile comparison, Lemma D of the
family's PROOF.md recomputed independently, the refusals (DPS437), and a distinguishing test."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.diagnostics import SpecError
from dpspec.pufferfish.share import binomial_w_inf

SPECS = Path(__file__).resolve().parents[3] / "specs"

CHAIN = (
    "scenario s {{\n  data   synthetic(generator = markov_chain, size = {n}, seed = 2)\n"
    "  secret share = fraction(where = state == 1) in {{{p}}}\n  pairs  all_distinct\n  prior  {prior}\n}}\n"
    "release r {{\n  protect   s\n  mechanism {mech}\n  output    {output}\n  query     {query}\n"
    "  guarantee {guarantee}\n}}\n"
)


def chain(n=60, p="0.3, 0.5", prior="empirical", mech="wasserstein", output="aggregate", query=None, guarantee=None):
    query = query or "mean(state, bounds = [0, 1])"
    guarantee = guarantee or "pufferfish(epsilon = 1)"
    return CHAIN.format(n=n, p=p, prior=prior, mech=mech, output=output, query=query, guarantee=guarantee)


def compile_text(text):
    return dpspec.compile(dpspec.loads(text, name="t.dps"))


def brute_w_inf(n: int, p: Fraction, q: Fraction) -> int:
    """W∞ = sup_t |F_p^{-1}(t) − F_q^{-1}(t)| over every CDF level of either law (exact rationals)."""

    def cdf(r):
        acc, out = Fraction(0), []
        for k in range(n + 1):
            acc += math.comb(n, k) * r**k * (1 - r) ** (n - k)
            out.append(acc)
        return out

    Fp, Fq = cdf(p), cdf(q)

    def quantile(F, t):
        return next(k for k, v in enumerate(F) if v >= t)

    levels = {t for t in Fp + Fq if t > 0}
    return max((abs(quantile(Fp, t) - quantile(Fq, t)) for t in levels), default=0)


PROPS = ["0", "0.05", "0.1", "0.25", "0.3", "0.45", "0.5", "0.55", "0.7", "0.9", "1"]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 13])
def test_binomial_w_inf_matches_brute_force_quantiles(n):
    for i, a in enumerate(PROPS):
        for b in PROPS[i + 1 :]:
            assert binomial_w_inf(n, a, b) == brute_w_inf(n, Fraction(a), Fraction(b)), (n, a, b)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 60),
    a=st.integers(0, 20),
    b=st.integers(0, 20),
)
def test_binomial_w_inf_properties(n, a, b):
    p, q = Fraction(a, 20), Fraction(b, 20)
    m = binomial_w_inf(n, p, q)
    assert m == binomial_w_inf(n, q, p)  # symmetric
    assert n * abs(p - q) <= m <= n  # W∞ ≥ W1 = |mean difference|, and the support is {0..n}
    if n <= 25:
        assert m == brute_w_inf(n, p, q)


def test_indicator_release_is_calibrated_by_the_exact_binomial_shift():
    c = compile_text(chain(n=60))
    rec = c.certificate.results[0]
    m = binomial_w_inf(60, "0.3", "0.5")
    # the indicator's conditional laws are the points 1 and 0: w = 1 exactly, W = m / n
    assert 1.0 <= rec.mechanism.parameters["w_inf_conditional"] <= 1.0 + 1e-12
    assert rec.sensitivity.deltas[0] == pytest.approx(m / 60, rel=1e-12)
    assert rec.sensitivity.deltas[0] >= m / 60
    assert rec.sensitivity.secrets == {}  # the class counts would state the secret
    assert "proportion of records" in rec.protected.description


def test_spec_example_compiles_verifies_and_releases():
    from dpspec.compiler import scenario as S
    from dpspec.data.bind import load_table
    from dpspec.pufferfish.wasserstein import w_inf_exact

    c = dpspec.compile(dpspec.load(SPECS / "group_share_attribute.dps"))
    rec = c.certificate.results[0]
    sc = c.spec.ir.scenarios[0]
    table = load_table(sc.data, None)
    X, query = S.build_query(table, c.spec.ir.releases[0].query)
    labels = np.array(table.column("group"), dtype=object) == "A"
    G = np.asarray(query.per_record(X), float) / 10.0  # both coordinates have range 10
    w = w_inf_exact(G[labels], G[~labels], metric="cityblock")  # an independent exact W∞
    m = binomial_w_inf(len(X), "0.45", "0.55")
    W = rec.sensitivity.deltas[0]
    assert W >= m * w / len(X)
    assert W == pytest.approx(m * w / len(X), rel=1e-9)
    assert dpspec.verify(c.certificate.to_json(), raise_on_error=False).ok
    out = np.asarray(c.mechanisms["measurements"].release(table, rng=0).value)
    assert out.shape == (2,) and np.all(np.abs(out - query(X)) < 10)


@pytest.mark.parametrize(
    "text",
    [
        chain(output="per_record"),
        chain(prior="bernoulli(p in [0.2, 0.5])"),
        chain(
            mech="swm\n  slices    sphere(m = 8, seed = 1)",
            query="mean(state, t, bounds = [[0, 1], [0, 60]])",
            guarantee="ave_srpp(alpha = 4, epsilon = 1)",
        ),
    ],
    ids=["per_record", "prior", "mechanism"],
)
def test_configurations_outside_lemma_d_are_refused(text):
    with pytest.raises(SpecError) as e:
        compile_text(text)
    assert "DPS437" in {d.rule for d in e.value.diagnostics}


def test_predicate_on_one_side_only_is_refused():
    text = chain().replace("state == 1", "state == 7")
    with pytest.raises(SpecError) as e:
        compile_text(text)
    assert {"DPS409", "DPS437"} & {d.rule for d in e.value.diagnostics}  # no conditional law on one side


def test_bad_proportions_are_a_located_error():
    with pytest.raises(SpecError) as e:
        compile_text(chain(p="0.4, 1.5"))
    d = next(d for d in e.value.diagnostics if d.rule == "DPS104")
    assert d.span is not None


def test_verify_recomputes_the_binomial_shift():
    from dpspec.families.wasserstein.verify import reverify

    c = compile_text(chain(n=60))
    assert dpspec.verify(c.certificate.to_json(), raise_on_error=False).ok
    rec = c.certificate.results[0]

    def problems(r):
        out = []
        reverify(r, out.append, lambda *a: None, 1e-9)
        return out

    assert problems(rec) == []
    params = dict(rec.mechanism.parameters, w_inf_conditional=2.0)  # claims each instance is m · 2
    tampered = rec.model_copy(update={"mechanism": rec.mechanism.model_copy(update={"parameters": params})})
    assert any("m(n, p, p′)" in p for p in problems(tampered))


def _draws(X, labels, n, p, k, rng):
    """k datasets of n i.i.d. records under θ_p: each satisfies the predicate with probability p, its row drawn
    from the data's rows on that side."""
    T, F = X[labels], X[~labels]
    out = []
    for _ in range(k):
        K = rng.binomial(n, p)
        out.append(np.vstack([T[rng.integers(0, len(T), K)], F[rng.integers(0, len(F), n - K)]]))
    return out


@pytest.mark.parametrize("shrink", [1.0, 0.1])
def test_distinguishing_attack_respects_the_certificate(shrink):
    """The Pufferfish experiment: datasets drawn under p = 0.3 and p = 0.5, the certified Laplace release, the
    likelihood-ratio score of dpspec.pufferfish.attacks. The certified ε is never refuted; with the noise cut to a
    tenth (shrink = 0.1) the same test refutes it — it has the power to fail."""
    from dpspec.compiler import scenario as S
    from dpspec.data.bind import load_table
    from dpspec.pufferfish.attacks import distinguishing_epsilon, laplace_log_likelihood

    n, eps = 60, 1.0
    c = compile_text(chain(n=n))
    mech = c.mechanisms["r"]
    sc = c.spec.ir.scenarios[0]
    table = load_table(sc.data, None)
    X, query = S.build_query(table, c.spec.ir.releases[0].query)
    labels = np.asarray(table.column("state"), float) == 1.0
    rng = np.random.default_rng(11)
    scales = np.asarray(mech.scales) * shrink
    trials = 4000
    outs = {}
    comps = {}
    for p in (0.3, 0.5):
        Ds = _draws(X, labels, n, p, trials, rng)
        vals = np.array([np.asarray(query(D), float) for D in Ds])
        outs[p] = vals + rng.laplace(0.0, 1.0, size=vals.shape) * scales
        comps[p] = np.array([np.asarray(query(D), float) for D in _draws(X, labels, n, p, 300, rng)])

    def score(Y):
        return laplace_log_likelihood(Y, comps[0.3], scales) - laplace_log_likelihood(Y, comps[0.5], scales)

    lower = distinguishing_epsilon(score(outs[0.3]), score(outs[0.5]))
    if shrink == 1.0:
        assert lower <= eps
    else:
        assert lower > eps


def test_a_sum_release_is_bound_to_its_n_and_explicit_pairs_work():
    from dpspec.compiler import scenario as S
    from dpspec.data.bind import load_table
    from dpspec.mechanisms.ledger import DataMismatchError

    text = chain(query="sum(state, bounds = [0, 1])").replace("pairs  all_distinct", "pairs  [(0.3, 0.5)]")
    c = compile_text(text)
    rec = c.certificate.results[0]
    assert rec.sensitivity.pairs == [("0.3", "0.5")]
    assert rec.sensitivity.deltas[0] >= binomial_w_inf(60, "0.3", "0.5")  # c = 1: W = m · 1
    table = load_table(c.spec.ir.scenarios[0].data, None)
    X, _q = S.build_query(table, c.spec.ir.releases[0].query)
    with pytest.raises(DataMismatchError):  # m(n, p, p′) depends on n: another n is outside the certificate
        c.mechanisms["r"].release(X[:30])


def _law_of_mean(T, F, n, p):
    """{value: probability} of the mean of n i.i.d. records, each from T (uniform) with probability p, else from
    F (uniform) — by enumeration, in exact rationals."""
    import itertools

    atoms = [(Fraction(t), p / len(T)) for t in T] + [(Fraction(f), (1 - p) / len(F)) for f in F]
    law: dict[Fraction, Fraction] = {}
    for combo in itertools.product(atoms, repeat=n):
        v = sum(a for a, _w in combo) / n
        pr = math.prod(w for _a, w in combo)
        if pr:
            law[v] = law.get(v, Fraction(0)) + pr
    return law


def _w_inf_laws(a: dict, b: dict) -> Fraction:
    """W∞ of two finite laws on ℝ: sup over the merged CDF levels of the quantile difference (exact)."""

    def cdf(law):
        xs = sorted(law)
        acc, out = Fraction(0), []
        for x in xs:
            acc += law[x]
            out.append((acc, x))
        return out

    ca, cb = cdf(a), cdf(b)

    def q(c, t):
        return next(x for v, x in c if v >= t)

    return max(abs(q(ca, t) - q(cb, t)) for t in {v for v, _ in ca + cb if v > 0})


@settings(max_examples=25, deadline=None)
@given(
    T=st.lists(st.integers(0, 10), min_size=1, max_size=3),
    F=st.lists(st.integers(0, 10), min_size=1, max_size=3),
    n=st.integers(1, 4),
    a=st.integers(0, 10),
    b=st.integers(0, 10),
)
def test_lemma_d_bounds_the_exact_w_inf_of_the_mean(T, F, n, a, b):
    """Lemma D against an exact enumeration of the aggregate's two laws (independent of the coupling argument):
    W∞(mean | p, mean | p′) ≤ (1/n) · m(n, p, p′) · W∞(T, F)."""
    from dpspec.pufferfish.wasserstein import w_inf_1d

    p, q = Fraction(a, 10), Fraction(b, 10)
    exact = _w_inf_laws(_law_of_mean(T, F, n, p), _law_of_mean(T, F, n, q))
    w = Fraction(w_inf_1d(T, F))  # integers: exact
    assert exact <= Fraction(binomial_w_inf(n, p, q), n) * w
    if set(T) == {1} and set(F) == {0}:  # the predicate's indicator: equality
        assert exact == Fraction(binomial_w_inf(n, p, q), n)


@pytest.mark.parametrize("n", [1, 3, 6])
def test_lemma_d_is_exact_for_the_indicator(n):
    for a, b in (("0.1", "0.3"), ("0.45", "0.55"), ("0", "1")):
        p, q = Fraction(a), Fraction(b)
        exact = _w_inf_laws(_law_of_mean([1], [0], n, p), _law_of_mean([1], [0], n, q))
        assert exact == Fraction(binomial_w_inf(n, p, q), n)
