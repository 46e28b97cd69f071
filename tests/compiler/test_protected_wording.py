"""Every certificate's "Protects:" names exactly the object its bound is about."""

import numpy as np
import pytest

import dpspec
from dpspec.certificate.explain import explain


def protected(text, **kw):
    c = dpspec.compile(text, **kw)
    return c, c.certificate.results[0]


@pytest.fixture(scope="module")
def relational():
    from dpspec.families.relational_dpsgd.rules import spec

    return dpspec.compile(spec(g="dp(delta = 1e-5)", extra="  noise_multiplier 1.0\n"))  # no calibration


@pytest.mark.slow
def test_relational_protects_a_node_of_the_capped_training_graph(relational):
    r = relational.certificate.results[0]
    d = r.protected.description
    assert "a node of the training graph after degree capping at K = 5" in d
    assert "one node of graph" not in d and "not a node of" in d
    scope = next(a for a in r.assumptions if a.id == "scope_original_graph")
    assert "more than K capped edges" in scope.statement and "held-out test nodes" in scope.statement
    text = explain(relational.certificate)
    assert "Scope:" in text and "degree capping at K = 5" in text


@pytest.mark.slow
def test_the_scope_statement_is_true_capping_is_not_stable(relational):
    """Removing one node before capping changes more than K capped edges for some node of this graph."""
    from dpspec.relational import cap_degrees

    mech = relational.mechanism
    tr = mech.split.train
    K = mech.degree_cap
    capped = {tuple(e) for e in cap_degrees(tr.edges, tr.num_nodes, K, 0).tolist()}
    worst = 0
    for v in np.unique(tr.edges)[:200]:
        kept = tr.edges[(tr.edges != v).all(axis=1)]
        after = {tuple(e) for e in cap_degrees(kept, tr.num_nodes, K, 0).tolist()}
        worst = max(worst, len(capped ^ after))
    assert worst > K


def test_gcon_names_the_public_node_attributes():
    from dpspec.families.gcon.rules import spec

    c, r = protected(spec())
    assert "one undirected edge of graph" in r.protected.description
    assert "features and labels are public" in r.protected.description
    assert any(a.id == "scope_public_attributes" for a in r.assumptions)
    assert "Scope:" in explain(c.certificate)


def test_srpp_names_its_discrepancy_model():
    from dpspec.families.srpp_sgd.rules import spec

    _, r = protected(spec())
    d = r.protected.description
    assert "the secret `share` ∈ {low, high}" in d and "differ in exactly Δ = 20 records" in d
    assert "1400" in d and "label_flip" in d


def test_swm_names_whose_secret_and_what_is_not_covered():
    from dpspec.check.rules_pufferfish import spec

    _, r = protected(spec(prior="[empirical, groups]"))
    d = r.protected.description
    assert "of one record drawn from the data or that selects the whole released group" in d
    assert "not membership" in d


@pytest.mark.parametrize("unit,data,words", [
    ("record", "", "one record (row) of the data handed to release(), inserted or removed"),
    ("record(relation = substitution)  dataset_size 600", "data synthetic(generator = two_blobs, size = 600)",
     "replaced by any other record (the number of records of n = 600 is public)"),
    ("group(size = 4)", "data dataset(survey)", "of the data the release reads (dataset(survey), bound at run time)"),
])
def test_gaussian_release_names_the_data_it_reads(unit, data, words):
    _, r = protected(f"privacy p {{ unit {unit}  {data} }}\nrelease r {{ mechanism gaussian  query count()  "
                     "guarantee dp(epsilon = 1, delta = 1e-6) }".replace("count()", "count()" if "substitution" not in
                                                                         unit else "sum(x1, bounds = [0, 1])"))
    assert words in r.protected.description


def test_dpsgd_names_the_training_examples():
    _, r = protected("privacy p { unit record  dataset_size 1000 }\ntrain t { mechanism dpsgd  sampling poisson(rate = 0.01)  "
                     "clipping flat(C = 1)  steps 10  guarantee dp(epsilon = 8, delta = 1e-6) }")
    assert r.protected.description == "one record (row) of the training data the loader samples from, inserted or removed"


def test_a_composition_names_each_part_reading_of_the_one_unit():
    c = dpspec.compile("privacy p { unit record  data dataset(rows) }\n"
                       "release a { mechanism gaussian  query count()  noise gaussian(sigma = 5)  guarantee dp(delta = 1e-6) }\n"
                       "train m { mechanism dpsgd  sampling poisson(rate = 0.01)  clipping flat(C = 1)  steps 10  dataset_size 1000  "
                       "noise_multiplier 1.1  guarantee dp(delta = 1e-6) }\n"
                       "compose both { parts [a, m]  guarantee dp(delta = 1e-6) }")
    d = c.certificate.results[-1].protected.description
    assert d.startswith("in every part, the same unit of `p`")
    assert "`a`: one record (row) of the data the release reads (dataset(rows)" in d
    assert "`m`: one record (row) of the training data" in d
