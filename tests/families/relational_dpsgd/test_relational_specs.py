"""Relational DP-SGD specs: every valid accountant is evaluated and the tightest certified, FREQ-CLIP only
with its corrected bound, unsound samplers are named errors, verify recomputes, the runtime uses the
certified noise."""

import pytest

import dpspec
from dpspec.accounting.relational import (SEARCH_ALPHAS, RelationalConfig, freq_clip_sensitivity,
                                          relational_accountants)
from dpspec.families.relational_dpsgd.rules import spec


def _noise(text, nm=1.0):
    return text.replace("  guarantee  dp(epsilon = 4, delta = 1e-5)",
                        f"  noise_multiplier {nm}\n  guarantee  dp(delta = 1e-5)")


@pytest.fixture(scope="module")
def calibrated():
    return dpspec.compile(spec())


def test_calibrated_certificate_is_the_tightest_valid_accountant(calibrated):
    r = calibrated.certificate.results[0]
    p = r.mechanism.parameters
    assert r.guarantee.epsilon <= 4.0
    cands = {k[len("epsilon_"):]: v for k, v in p.items() if k.startswith("epsilon_")}
    assert {"eq3", "thm_c1", "naive"} <= set(cands) and r.guarantee.epsilon <= min(cands.values()) * (1 + 1e-12)
    assert any("group not used" in w for w in r.warnings)      # with private negatives it does not apply
    cfg = RelationalConfig(p["num_edges"], p["num_nodes"], p["sample_rate"], 5, 4, "static")
    ref = relational_accountants(cfg, p["noise_multiplier"], p["steps"], p["delta_accounted"], SEARCH_ALPHAS)
    assert ref.epsilon == pytest.approx(r.guarantee.epsilon, rel=1e-12)
    # σ is (nearly) the smallest meeting the target
    assert relational_accountants(cfg, p["noise_multiplier"] * 0.99, p["steps"], 1e-5, SEARCH_ALPHAS).epsilon > 4.0


def test_verify_recomputes_and_catches_edits(calibrated):
    cert = calibrated.certificate
    assert dpspec.verify(cert).ok
    r = cert.results[0]
    pp = dict(r.mechanism.parameters)
    pp["noise_multiplier"] *= 0.5
    bad = cert.model_copy(update={"results": [r.model_copy(update={"mechanism": r.mechanism.model_copy(
        update={"parameters": pp})})]}).sealed()
    rep = dpspec.verify(bad, raise_on_error=False)
    # verify recomputes at the recorded σ (no second search): half the σ misses the target (DPS201)
    assert not rep.ok and any("noise_multiplier" in x or "DPS201" in x for x in rep.problems), rep.problems


def test_freq_clip_is_certified_only_with_the_corrected_bound():
    c = dpspec.compile(_noise(spec(clip="frequency_adaptive(C = 1.0)")))
    r = c.certificate.results[0]
    assert r.mechanism.parameters["node_sensitivity"] == pytest.approx(freq_clip_sensitivity(5, 4))
    assert r.mechanism.parameters["node_sensitivity"] > 1.0          # not Prop 4.1's C
    assert any("corrected node sensitivity" in w for w in r.warnings)
    assert "epsilon_thm_c1" not in r.mechanism.parameters            # not per-tuple additive


def test_standard_clipping_has_sensitivity_k_plus_2():
    c = dpspec.compile(_noise(spec(clip="per_tuple(C = 1.0, threshold = standard)")))
    assert c.certificate.results[0].mechanism.parameters["node_sensitivity"] == 7.0


@pytest.mark.parametrize("text, rule", [
    (spec(negative="with_replacement(per_positive = 4)"), "DPS602"),
    (spec(negative="in_batch()"), "DPS603"),
    (spec(negative="content_dependent(per_positive = 4)"), "DPS604"),
    (spec(clip="frequency_adaptive(C = 1.0, bound = paper)"), "DPS601"),
    (spec(cap="degree_cap 0\n  "), "DPS105"),                     # a range error: K ≥ 1
    (spec(cap=""), "DPS611"),
    (spec(positive="without_replacement(batch_size = 32)"), "DPS104"),  # positives must be Poisson
    (spec(clip="flat(C = 1.0)"), "DPS611"),
])
def test_unsound_configurations_are_named_errors(text, rule):
    s = dpspec.loads(text)
    assert not s.ok and any(d.rule == rule for d in s.diagnostics), s.diagnostics


@pytest.mark.parametrize("text, rule", [
    (spec(negative="without_replacement(per_positive = 40)", positive="poisson(expected_batch = 200)"), "DPS606"),
    (spec(extra="  encoder    minilm(max_len = 16)\n"), "DPS609"),
])
def test_data_dependent_problems_are_named_errors(text, rule):
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(_noise(text))
    assert rule in {d.rule for d in e.value.diagnostics}


torch = pytest.importorskip("torch")

from dpspec.mechanisms.ledger import BudgetExceededError  # noqa: E402


def test_runtime_trainer_uses_the_certified_noise_and_cap():
    torch.set_num_threads(1)
    c = dpspec.compile(_noise(spec(), nm=1.3))
    p = c.certificate.results[0].mechanism.parameters
    mech = c.mechanism
    tr = mech.trainer(seed=0)
    assert tr.cfg.sigma * tr.cfg.clip == pytest.approx(p["noise_std"])
    assert tr.config.num_edges == p["num_edges"] and tr.config.num_nodes == p["num_nodes"]
    assert tr.rate == pytest.approx(p["sample_rate"])
    tr.train(3)
    out = mech.evaluate(tr.encoder.parent, tr.params)
    assert 0 < out["mrr"] <= 1
    with pytest.raises(BudgetExceededError):  # the certificate's steps, 3 of which are spent
        mech.train(steps=p["steps"] - 2)
    assert mech.ledger.steps_taken == 3


ARRAYS = """privacy people {{ unit node  data dataset(g) }}
train links {{
  mechanism  relational_dpsgd
  sampling   coupled {{ positive poisson(expected_batch = 8)  negative without_replacement(per_positive = 2) }}
  degree_cap 3
  clipping   per_tuple(C = 1.0)
  split      node_disjoint(test = 0.2, seed = 0)
  steps      5
  noise_multiplier 2.0
  guarantee  dp(delta = 1e-5)
}}
"""


def _arrays(extra_edges=()):
    import numpy as np

    rng = np.random.default_rng(0)
    n = 200
    e = {tuple(sorted(rng.choice(n, 2, replace=False))) for _ in range(500)}
    edges = np.array(sorted(e) + list(extra_edges))
    return {"edges": edges, "features": rng.random((n, 16)), "num_nodes": n}


def test_graph_given_as_arrays_compiles():
    c = dpspec.compile(ARRAYS.format(), data={"g": _arrays()})
    p = c.certificate.results[0].mechanism.parameters
    assert p["num_nodes"] == 160 and p["degree_cap"] == 3
    assert dpspec.verify(c.certificate, data={"g": _arrays()}).ok


@pytest.mark.parametrize("bad_edge", [(5, 5), (1, 2000)])
def test_self_loops_and_dangling_edges_are_errors(bad_edge):
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(ARRAYS.format(), data={"g": _arrays([bad_edge])})
    assert "DPS608" in {d.rule for d in e.value.diagnostics}


def test_duplicate_edges_are_errors():
    g = _arrays()
    g["edges"] = __import__("numpy").concatenate([g["edges"], g["edges"][:1, ::-1]])
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(ARRAYS.format(), data={"g": g})
    assert "DPS608" in {d.rule for d in e.value.diagnostics}


def test_injected_noise_has_the_certified_scale():
    """An empty Poisson batch still adds the noise (Alg. 3): with plain SGD at step size 1 the parameter change
    is −N(0, σ²C²)/b, b the expected batch — measured over every parameter of the encoder."""
    import numpy as np

    from dpspec.relational.samplers import TupleBatch

    torch.set_num_threads(1)
    c = dpspec.compile(_noise(spec(), nm=1.3))
    p = c.certificate.results[0].mechanism.parameters
    tr = c.mechanism.trainer(seed=0)
    tr.opt = torch.optim.SGD(list(tr.params.values()), lr=1.0)
    before = torch.cat([v.detach().flatten().clone() for v in tr.params.values()])
    empty = TupleBatch(np.zeros((0, 2), np.int64), np.zeros((0, 4), np.int64), np.zeros((0, 4), np.int64))
    tr.step(empty)
    after = torch.cat([v.detach().flatten() for v in tr.params.values()])
    d = (after - before).numpy()
    want = p["noise_std"] / p["expected_batch"]
    assert np.std(d) == pytest.approx(want, rel=5 / np.sqrt(2 * d.size))


@pytest.mark.parametrize("clip,sens", [("per_tuple(C = 1.0)", 1.0),
                                       ("per_tuple(C = 1.0, threshold = standard)", 7.0)])
def test_certificate_is_below_the_unamplified_gaussian_by_hand(clip, sens):
    """Independent of the library: without any amplification, T steps of the Gaussian mechanism with node
    sensitivity S·C and noise σC give ε ≤ ρ + 2√(ρ log(1/δ)), ρ = T S²/(2σ²) (Mironov 2017 Prop 3 at the best
    order). The certified ε (amplified, tightest accountant) must not exceed it, and S is what the paper's
    clipping rule implies (static: C; standard: (K + 2)C with K = 5)."""
    import math

    c = dpspec.compile(_noise(spec(clip=clip), nm=2.0))
    r = c.certificate.results[0]
    p = r.mechanism.parameters
    assert p["node_sensitivity"] == sens
    rho = p["steps"] * sens ** 2 / (2 * 2.0 ** 2)
    bound = rho + 2 * math.sqrt(rho * math.log(1 / 1e-5))
    assert 0 < r.guarantee.epsilon <= bound
