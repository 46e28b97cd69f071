"""Soundness of the statistics releases on neighbouring data (PROOF.md §1–§3): what the runtime evaluates moves
by at most the certificate's Δ when one record is inserted, partition selection releases a key of one record
with probability ≤ the certified δ, the quantile's exponential mechanism has the certified log-ratio, the
discrete Gaussian's certified μ dominates its exact profile, ``auto`` never looks at the data, and the ledger
stops a second release."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpspec
from dpspec.data.bind import as_table
from dpspec.mechanisms.errors import BudgetExceededError, DataMismatchError

UNIT = "privacy people { unit record  data dataset(t) }\n"
G = "guarantee dp(epsilon = 1, delta = 1e-6)"

RELEASES = f"""
release c0 {{ mechanism laplace  query count()  {G} }}
release c1 {{ query count(by = race, keys = ["A", "B"], where = age >= 40)  {G} }}
release s1 {{ mechanism laplace
              query sum(hours, bounds = [-5, 50], by = sex, keys = ["Male"], where = race != "C")  {G} }}
release s2 {{ mechanism discrete_laplace  query sum(hours, bounds = [-5, 50])  {G} }}
release m1 {{ mechanism laplace  query mean(hours, bounds = [0, 99], by = sex, keys = ["Male", "Female"])  {G} }}
release m2 {{ mechanism discrete_gaussian  query mean(age, bounds = [17, 90], where = sex == "Female")  {G} }}
release p1 {{ query count(by = race, where = hours < 60)  {G} }}
release p2 {{ mechanism laplace  query count(by = age)  {G} }}
release q1 {{ query quantile(age, q = 0.3, bounds = [17, 90], where = sex == "Male")  {G} }}
release q2 {{ mechanism laplace  query quantile(hours, q = 0.9, bounds = [0, 99.5])  {G} }}
"""

AGES = [float("nan"), 10.0, 17.0, 39.5, 40.0, 63.0, 90.0, 120.0]
HOURS = [float("nan"), -20.0, -5.0, 0.0, 7.4, 50.0, 59.9, 60.0, 99.5, 300.0]
SEXES = ["Male", "Female", "Other"]
RACES = ["A", "B", "C", "D"]  # D is declared nowhere


@pytest.fixture(scope="module")
def compiled():
    return dpspec.compile(dpspec.loads(UNIT + RELEASES))


row = st.tuples(st.sampled_from(AGES), st.sampled_from(HOURS), st.sampled_from(SEXES), st.sampled_from(RACES))


def _table(rows):
    cols = list(zip(*rows)) if rows else [(), (), (), ()]
    return as_table(
        {
            "age": np.array(cols[0], dtype=float),
            "hours": np.array(cols[1], dtype=float),
            "sex": np.array(cols[2], dtype=object),
            "race": np.array(cols[3], dtype=object),
        },
        "t",
    )


def _em_logprob(u: np.ndarray, scale: float) -> np.ndarray:
    z = u / scale
    return z - (z.max() + np.log(np.exp(z - z.max()).sum()))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(row, min_size=0, max_size=12), extra=row)
def test_one_inserted_record_moves_each_answer_by_at_most_the_certified_sensitivity(compiled, rows, extra):
    """Neighbours D and D + r (r anywhere: outside the declared keys, filtered out, missing, out of bounds):
    the vector the noise is added to moves by ≤ Δ in ℓ1 (hence ℓ2), a noisy denominator's count by ≤ 1,
    partition selection gains at most r's key (with count 1), and the quantile's utility by ≤ 1 — so the
    exponential mechanism's log-ratio is ≤ its certified ε."""
    d, d2 = _table(rows), _table(rows + [extra])
    for r in compiled.certificate.results:
        m = compiled.mechanisms[r.name]
        p = r.mechanism.parameters
        delta_ = float(p["sensitivity"])
        if m.plan.function == "quantile":
            _, u, _, _ = m.plan.quantile_utility(d)
            _, u2, _, _ = m.plan.quantile_utility(d2)
            assert np.max(np.abs(u - u2)) <= 1.0 + 1e-12
            ratio = np.max(np.abs(_em_logprob(u, m.scale) - _em_logprob(u2, m.scale)))
            assert ratio <= float(p["pure_epsilon"]) * (1 + 1e-9), r.name
            continue
        s, c, keys, *_ = m.plan.evaluate(d)
        s2, c2, keys2, *_ = m.plan.evaluate(d2)
        if m.threshold is not None:  # partition selection: r adds its own key at most, with count 1
            new = set(keys2) - set(keys)
            assert set(keys) <= set(keys2) and len(new) <= 1, r.name
            old = {k: x for k, x in zip(keys, s)}
            moved = sum(abs(x - old.get(k, 0.0)) for k, x in zip(keys2, s2) if k in old)
            assert moved <= 1.0
            for k in new:
                assert dict(zip(keys2, s2))[k] == 1.0
            continue
        assert keys == keys2  # declared keys (or none): the same coordinates
        assert np.abs(s2 - s).sum() <= delta_ * (1 + 1e-12), r.name
        if m.count_scale is not None:  # the noisy denominator: counts of kept rows per group
            assert np.abs(c2 - c).sum() <= 1.0
        if m.plan.integer:
            assert np.all(s == np.round(s)) and np.all(s2 == np.round(s2))


def _dl_tail(b: float, k: int) -> mp.mpf:
    """P[X ≥ k] for the discrete Laplace P(x) ∝ exp(−|x|/b), by mpmath summation."""
    r = mp.e ** (-1 / mp.mpf(b))
    return (1 - r) / (1 + r) * mp.nsum(lambda j: r**j, [k, mp.inf])


@pytest.mark.parametrize("mechanism", ["laplace", "discrete_laplace"])
@pytest.mark.parametrize("eps,delta", [(1.0, 1e-6), (0.1, 1e-9), (3.0, 1e-5)])
def test_partition_selection_releases_a_single_records_key_with_probability_at_most_delta(mechanism, eps, delta):
    """A key held by one record only appears when 1 + X ≥ T: P ≤ the certified δ (exact, mpmath), the
    runtime thresholds at the certificate's T, and the certified δ is the release's."""
    g = f"guarantee dp(epsilon = {eps}, delta = {delta})"
    text = UNIT + f"release f {{ mechanism {mechanism}  query count(by = race)  {g} }}"
    c = dpspec.compile(dpspec.loads(text))
    p = c.certificate.results[0].mechanism.parameters
    b, thr = float(p["scale"]), float(p["threshold"])
    assert c.mechanism.threshold == thr and c.mechanism.scale == b
    with mp.workdps(40):
        if mechanism == "laplace":
            prob = mp.e ** (-(mp.mpf(thr) - 1) / mp.mpf(b)) / 2
        else:
            prob = _dl_tail(b, math.ceil(thr - 1))
        assert prob <= mp.mpf(float(p["approx_delta"])) <= mp.mpf(delta)
        assert prob > mp.mpf(delta) * mp.e ** (-2 / mp.mpf(b)) / 2  # and the threshold is not needlessly high
    assert float(p["pure_epsilon"]) <= eps * (1 + 1e-12)


def test_quantile_sampler_draws_the_exponential_mechanism():
    """The Gumbel-max sampler picks candidate j with probability ∝ exp(u_j / scale) (chi-square, fixed seed)."""
    rows = [(float(a), 1.0, "Male", "A") for a in (17, 20, 20, 21, 25, 30, 31, 31, 33, 40)]
    c = dpspec.compile(
        dpspec.loads(
            UNIT
            + "release q { query quantile(age, q = 0.5, bounds = [17, 37])  guarantee dp(epsilon = 0.5, delta = 1e-6) }"
        )
    )
    m = c.mechanism
    cand, u, _, _ = m.plan.quantile_utility(_table(rows))
    prob = np.exp(_em_logprob(u, m.scale))
    gen = np.random.default_rng(7)
    n = 20000
    draws = np.argmax(u / m.scale + gen.gumbel(size=(n, len(cand))), axis=1)
    obs = np.bincount(draws, minlength=len(cand))
    chi2 = float(np.sum((obs - n * prob) ** 2 / (n * prob)))
    assert chi2 < len(cand) - 1 + 6 * math.sqrt(2 * (len(cand) - 1))  # ≈ 6σ above the chi-square mean
    v, _ = m.release(_table(rows), rng=1)
    assert v in set(cand.tolist())


def _dg_profile(eps: float, sigma: float, sens: int) -> mp.mpf:
    """δ(ε) of N_ℤ(0, σ²) for integer shift Δ (CKS20 Thm 7) by direct mpmath summation over the integers."""
    s2 = mp.mpf(sigma) ** 2
    top = int(sigma * 60) + 10
    w = [mp.e ** (-(mp.mpf(y) ** 2) / (2 * s2)) for y in range(top + 1)]
    z = w[0] + 2 * mp.fsum(w[1:])

    def tail(t):  # P[Y > t] = P[Y ≥ k], k = ⌊t⌋ + 1; by symmetry 1 − P[Y ≥ 1 − k] when k ≤ 0
        k = math.floor(t) + 1
        return mp.fsum(w[k:]) / z if k >= 1 else 1 - mp.fsum(w[1 - k :]) / z

    a = mp.mpf(eps) * s2 / sens
    return tail(a - mp.mpf(sens) / 2) - mp.e ** mp.mpf(eps) * tail(a + mp.mpf(sens) / 2)


@pytest.mark.parametrize("eps", [0.3, 2.0])
def test_the_discrete_gaussians_certified_mu_dominates_its_exact_profile(eps):
    """Independent of ``secure_noise``: the exact profile of the certified σ (mpmath, CKS20 Thm 7) is ≤ the
    μ-GDP profile of the certified μ at ε between and beyond any grid, down to δ_G = 1e-14."""
    g = f"guarantee dp(epsilon = {eps}, delta = 1e-6)"
    text = UNIT + f"release c {{ mechanism discrete_gaussian  query count()  {g} }}"
    p = dpspec.compile(dpspec.loads(text)).certificate.results[0].mechanism.parameters
    sigma, mu = float(p["scale"]), float(p["gdp_mu"])
    with mp.workdps(40):

        def gauss(e):
            e, m = mp.mpf(e), mp.mpf(mu)
            return mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2)

        e_max = float(mp.findroot(lambda e: mp.log(gauss(e)) - mp.log(mp.mpf("1e-14")), 8 * mu))
        for e in np.linspace(0.0, e_max, 37)[1:]:
            assert _dg_profile(float(e), sigma, 1) <= gauss(e), e


def test_auto_and_every_certified_number_ignore_the_data():
    """Compiled with two unrelated datasets, every certificate's mechanism parameters are identical: the noise
    ``auto`` picks, scales, thresholds and grids come from public parameters only."""
    g = np.random.default_rng(0)
    t1 = {
        "age": g.integers(17, 91, 500).astype(float),
        "hours": g.integers(0, 100, 500).astype(float),
        "sex": g.choice(["Male", "Female"], 500),
        "race": g.choice(list("ABC"), 500),
    }
    t2 = {
        "age": np.full(7, 90.0),
        "hours": np.full(7, 1e6),
        "sex": np.array(["Female"] * 7),
        "race": np.array(["D"] * 7),
    }
    a = dpspec.compile(dpspec.loads(UNIT + RELEASES), data={"t": t1}).certificate.results
    b = dpspec.compile(dpspec.loads(UNIT + RELEASES), data={"t": t2}).certificate.results
    assert [r.mechanism.parameters for r in a] == [r.mechanism.parameters for r in b]
    assert any(r.mechanism.name == "auto" for r in a)


def test_the_ledger_refuses_a_second_release_and_charges_nothing_for_refused_data(compiled):
    m = compiled.mechanisms["c1"]
    with pytest.raises(DataMismatchError):
        m.release({"age": np.array([1.0]), "sex": np.array(["Male"])})  # no `race` column: nothing charged
    rows = [(50.0, 1.0, "Male", "A")] * 5
    m.release(_table(rows))
    with pytest.raises(BudgetExceededError):
        m.release(_table(rows))


def test_the_quantile_needs_the_two_in_its_exponential_mechanism(compiled):
    """Neighbours on which the utility shifts by −0.9 at some candidates and +0.9 at others (q = 0.9, the record
    above them all): the log-ratio is 0.74 ε at the certified scale 2/ε — within ε, and more than ε/2, so a
    scale of 1/ε (Δu/ε without the 2) would exceed the certified ε there."""
    m = compiled.mechanisms["q2"]
    eps = float(compiled.certificate.results[-1].mechanism.parameters["pure_epsilon"])
    rows = [(40.0, h, "Male", "A") for h in (10, 20, 30, 40, 50, 60, 70, 80, 90, 95)]
    _, u, _, _ = m.plan.quantile_utility(_table(rows))
    _, u2, _, _ = m.plan.quantile_utility(_table(rows + [(40.0, 99.5, "Male", "A")]))
    assert np.ptp(u2 - u) == pytest.approx(1.8)
    ratio = np.max(np.abs(_em_logprob(u, m.scale) - _em_logprob(u2, m.scale)))
    assert eps / 2 < ratio <= eps
    assert m.scale == pytest.approx(2 / eps, rel=1e-12)


def test_numeric_groups_are_never_merged_by_their_printed_form():
    """Distinct numeric group values keep distinct groups: declared keys 1000000 and 1000001 (equal at six
    significant digits) and 0.1 vs 0.1000001 each count their own rows, with and without declared keys."""
    t = as_table({"zip": np.array([1e6] * 5 + [1000001.0] * 7 + [0.1] * 2 + [0.1000001] * 3)}, "t")
    g = "guarantee dp(epsilon = 1, delta = 1e-6)"
    keyed = dpspec.compile(
        dpspec.loads(
            UNIT
            + f'release c {{ mechanism laplace  query count(by = zip, keys = ["1000000", "1000001", "0.1"])  {g} }}'
        )
    )
    counts, _, keys, *_ = keyed.mechanism.plan.evaluate(t)
    assert dict(zip(keys, counts.tolist())) == {"1000000": 5.0, "1000001": 7.0, "0.1": 2.0}
    found = dpspec.compile(dpspec.loads(UNIT + f"release c {{ mechanism laplace  query count(by = zip)  {g} }}"))
    counts, _, keys, *_ = found.mechanism.plan.evaluate(t)
    assert sorted(counts.tolist()) == [2.0, 3.0, 5.0, 7.0] and "1e+06" in keys and "0.1" in keys
