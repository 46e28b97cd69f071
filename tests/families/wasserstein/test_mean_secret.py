"""Dataset-level mean secrets (Lemma E of the Wasserstein PROOF.md: the location family of a column): the
bound against a brute-force enumeration of every dataset of small tables (exact W∞ of the two finite laws
by bottleneck matching), the compiled certificate, verify's re-check, the refusals (DPS437, DPS444, DPS104)
and the audit."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.diagnostics import SpecError
from dpspec.pufferfish.aggregate import weighted_l1_w_inf

SPEC = (
    "scenario s {{\n  data   dataset(t)\n  secret m = {secret}\n  prior  {prior}\n}}\n"
    "release r {{\n  protect   s\n  mechanism {mech}\n  output    {output}\n  query     {query}\n"
    "  guarantee pufferfish(epsilon = {eps})\n}}\n"
)


def spec(
    secret="mean(a, bounds = [0, 4]) in {1, 1.5}",
    prior="empirical",
    mech="wasserstein",
    output="aggregate",
    query="mean(a, b, bounds = [[0, 4], [0, 10]])",
    eps=1,
):
    return SPEC.format(secret=secret, prior=prior, mech=mech, output=output, query=query, eps=eps)


def compile_spec(text, table):
    return dpspec.compile(dpspec.loads(text, name="t.dps"), data={"t": table})


def brute_w_inf(rows, cols, lo, hi, fn, mu, mu2, w):
    """Exact W∞ (weighted ℓ1) between the laws of f under θ_μ and θ_μ′: every one of the N^n equally likely
    tuples of n i.i.d. draws of the table's records, column `a` (index 0) shifted by μ − ā, the query's
    columns clamped to their bounds, f the mean or the sum over the records."""
    R = np.asarray(rows, float)
    n = len(R)
    abar = R[:, 0].mean()
    out = []
    for mu_ in (mu, mu2):
        S = R.copy()
        S[:, 0] += mu_ - abar
        G = np.clip(S[:, cols], lo, hi)
        vals = []
        for idx in itertools.product(range(n), repeat=n):
            s = G[list(idx)].sum(0)
            vals.append(s / n if fn == "mean" else s)
        out.append(np.array(vals))
    return weighted_l1_w_inf(out[0], out[1], w)[0]


def lemma_e(n, fn, mu, mu2, w_on_a):
    return (1.0 / n if fn == "mean" else 1.0) * n * abs(mu - mu2) * w_on_a


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 4),
    seed=st.integers(0, 10**6),
    fn=st.sampled_from(["mean", "sum"]),
    shape=st.sampled_from(["a", "ab", "aab"]),
    mus=st.tuples(st.integers(0, 12), st.integers(0, 12)),
    tight=st.booleans(),
)
def test_lemma_e_is_never_below_the_enumerated_w_inf(n, seed, fn, shape, mus, tight):
    """Attribute domain {0, 1, 2} (and b in {0, 5}); the candidate means on a 1/4 grid; bounds wide
    (no clamping: the bound is exact) or tight (clamping binds: the bound stays above)."""
    rng = np.random.default_rng(seed)
    rows = np.column_stack([rng.integers(0, 3, n), 5 * rng.integers(0, 2, n)])
    cols = [0 if c == "a" else 1 for c in shape]
    lo = np.array([(-2.0 if not tight else 0.0) if c == 0 else 0.0 for c in cols])
    hi = np.array([(6.0 if not tight else 2.0) if c == 0 else 5.0 for c in cols])
    w = 1.0 / (hi - lo)
    mu, mu2 = mus[0] / 4, mus[1] / 4
    exact = brute_w_inf(rows, cols, lo, hi, fn, mu, mu2, w)
    bound = lemma_e(n, fn, mu, mu2, float(sum(w[k] for k, c in enumerate(cols) if c == 0)))
    assert exact <= bound * (1 + 1e-12) + 1e-12
    abar = rows[:, 0].mean()
    shifted = np.concatenate([rows[:, 0] + m - abar for m in (mu, mu2)])
    if np.all((shifted >= lo[cols.index(0)]) & (shifted <= hi[cols.index(0)])):
        assert exact == pytest.approx(bound, rel=1e-9, abs=1e-12)  # no clamp binds: equality


TABLE = {"a": [0.0, 1.0, 2.0, 2.0], "b": [5.0, 0.0, 5.0, 0.0]}


@pytest.mark.parametrize("fn", ["mean", "sum"])
def test_certificate_is_lemma_e_and_never_below_brute_force(fn):
    q = f"{fn}(a, b, bounds = [[0, 4], [0, 10]])"
    c = compile_spec(spec(query=q), TABLE)
    rec = c.certificate.results[0]
    p = rec.mechanism.parameters
    n, w_a = 4, 1 / 4
    want = lemma_e(n, fn, 1.0, 1.5, w_a)
    assert p["w_inf"] >= want and p["w_inf"] == pytest.approx(want, rel=1e-12)
    exact = brute_w_inf(
        np.column_stack([TABLE["a"], TABLE["b"]]),
        [0, 1],
        np.array([0.0, 0.0]),
        np.array([4.0, 10.0]),
        fn,
        1.0,
        1.5,
        np.array([1 / 4, 1 / 10]),
    )
    assert p["w_inf"] >= exact
    assert p["scale_0"] >= p["w_inf"] * 4 / 1.0 and p["scale_1"] >= p["w_inf"] * 10 / 1.0
    assert "the mean of `a`" in rec.protected.description and "location family" in rec.assumptions[1].statement
    assert rec.sensitivity.secrets == {}
    dpspec.verify(c.certificate.to_json(), data={"t": TABLE})
    mech = c.mechanisms["r"]
    out = mech.release(np.column_stack([TABLE["a"], TABLE["b"]]), rng=0).value
    assert np.all(np.isfinite(out))


def test_verify_catches_a_lowered_instance_or_weight():
    import json

    c = compile_spec(spec(), TABLE)
    doc = json.loads(c.certificate.to_json())
    res = doc["results"][0]
    res["mechanism"]["parameters"]["mean_shift_weight"] = 0.1  # below 1/4
    with pytest.raises(Exception, match="mean_shift_weight"):
        dpspec.verify(json.dumps(doc), data={"t": TABLE})


def test_verify_recomputes_the_instances():
    from dpspec.families.wasserstein.verify import reverify

    c = compile_spec(spec(), TABLE)
    rec = c.certificate.results[0]
    problems = []
    reverify(rec, problems.append, lambda *a: None, 1e-9)
    assert problems == []
    sens = rec.sensitivity.model_copy(
        update={"instance_deltas": [[0.5 * v[0]] for v in rec.sensitivity.instance_deltas]}
    )
    bad = rec.model_copy(update={"sensitivity": sens})
    problems = []
    reverify(bad, problems.append, lambda *a: None, 1e-9)
    assert any("below n·|μ − μ′|" in x for x in problems)


@pytest.mark.parametrize(
    "kw, rule",
    [
        ({"output": "per_record"}, "DPS437"),
        ({"prior": "balanced(seed = 1)"}, "DPS437"),
        ({"query": "mean(b, bounds = [0, 10])"}, "DPS437"),  # the query does not use the secret's column
        ({"query": "histogram(a, bins = 4, bounds = [0, 4])"}, "DPS437"),
        ({"secret": "mean(zz) in {1, 2}"}, "DPS416"),
        ({"mech": "swm", "eps": "1"}, "DPS437"),
    ],
)
def test_outside_lemma_e_is_refused(kw, rule):
    text = spec(**kw)
    if kw.get("mech") == "swm":
        text = text.replace("pufferfish(epsilon = 1)", "ave_srpp(alpha = 4, epsilon = 1)").replace(
            "  query", "  slices    axes\n  query"
        )
    with pytest.raises(SpecError) as e:
        compile_spec(text, TABLE)
    assert rule in {d.rule for d in e.value.diagnostics}


@pytest.mark.parametrize("secret", ["mean(a) in {1}", "mean(a, bounds = [0, 4]) in {1, 5}", "mean(a, b) in {1, 2}"])
def test_malformed_mean_secrets_are_dps104(secret):
    with pytest.raises(SpecError) as e:
        dpspec.loads(spec(secret=secret), name="t.dps").raise_for_errors()
    assert "DPS104" in {d.rule for d in e.value.diagnostics}


@pytest.mark.parametrize("secret", ["mean(a) > 1", "mean(a, bounds = [0, 4]) <= 2", 'fraction(where = a == "1") > 0.5'])
def test_threshold_secrets_are_dps444_with_a_hint(secret):
    with pytest.raises(SpecError) as e:
        dpspec.loads(spec(secret=secret), name="t.dps").raise_for_errors()
    d = [x for x in e.value.diagnostics if x.rule == "DPS444"]
    assert d and d[0].span is not None and "in {40, 45}" in d[0].hint


def test_exact_decimal_shift_is_used():
    """n·|μ − μ′| is taken from the decimal texts exactly: 0.1 vs 0.3 on 4 records is 4/5, not 0.8000000000000002."""
    c = compile_spec(spec(secret="mean(a, bounds = [0, 4]) in {0.1, 0.3}"), TABLE)
    inst = c.certificate.results[0].sensitivity.instance_deltas
    assert Fraction(inst[0][0]) >= Fraction(4, 5) * Fraction(1, 4)


def test_audit_passes_and_a_tenth_of_the_noise_is_caught():
    """The distinguishing test draws n i.i.d. records of the table with `a` shifted to each secret mean."""
    import dataclasses

    from dpspec.audit import audit

    table = {"a": [float(x % 5) for x in range(40)], "b": [float(x % 3) for x in range(40)]}
    c = compile_spec(spec(secret="mean(a, bounds = [0, 4]) in {1.5, 2.5}", query="mean(a, bounds = [0, 4])"), table)
    ok = audit(c, trials=3000, seed=1, runtime=False, data={"t": table})
    assert ok.ok and ok.results[0].status == "pass"
    mech = c.mechanisms["r"]
    weak = dataclasses.replace(mech, scales=tuple(s / 10 for s in mech.scales))
    bad = audit(c, mechanisms={"r": weak}, trials=3000, seed=1, runtime=False, data={"t": table})
    assert not bad.ok and bad.results[0].status == "VIOLATION"
