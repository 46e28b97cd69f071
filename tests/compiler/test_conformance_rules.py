"""Settings that disagree (DPS140–DPS147, DPS130): each is a located error, at check time and, where the
compiler could be reached without the checker, again while compiling."""

import pytest

import dpspec
from dpspec.check import framework
from dpspec.check.rules_conformance import release_spec
from dpspec.families.gcon.rules import spec as gcon_spec
from dpspec.families.relational_dpsgd.rules import spec as rel_spec
from dpspec.families.srpp_sgd.rules import FLIP, two_runs


def diags(text):
    return dpspec.loads(text, name="s.dps").diagnostics


def rules(text):
    return {d.rule for d in diags(text)}


@pytest.fixture
def without_check(monkeypatch):
    """Compile as if the checker had not run rule `rid` (the compiler must refuse on its own)."""

    def drop(rid):
        monkeypatch.setattr(framework, "CHECKS", [(i, f) for i, f in framework.CHECKS if i != rid])

    return drop


def test_two_srpp_runs_of_one_scenario_cannot_compose_under_different_discrepancy_models():
    bad = two_runs(FLIP, "label_flip(differing = 2)")
    d = [d for d in diags(bad) if d.rule == "DPS143"]
    assert d and "differing = 20)" in d[0].message and "differing = 2)" in d[0].message
    assert d[0].span.line == bad.splitlines().index(next(x for x in bad.splitlines() if x.startswith("compose"))) + 1
    size = two_runs(FLIP, FLIP).replace("dataset_size  1400", "dataset_size  1000", 1)
    assert "DPS143" in rules(size)  # the label-flip model counts in N: another N is another model
    assert "DPS143" not in rules(two_runs(FLIP, FLIP))


def test_the_compiler_refuses_the_composition_without_the_checker(without_check):
    without_check("DPS143")
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(two_runs(FLIP, "label_flip(differing = 2)"))
    assert {d.rule for d in e.value.diagnostics} == {"DPS143"}
    assert dpspec.compile(two_runs(FLIP, FLIP)).certificate.results[-1].kind == "compose"


def test_the_compiler_refuses_a_low_declared_sensitivity_without_the_checker(without_check):
    without_check("DPS140")
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(release_spec(sens="1.0"))
    assert {d.rule for d in e.value.diagnostics} == {"DPS140"}


def test_dataset_sizes_that_disagree():
    unit = "privacy people {{ unit record  dataset_size {n} }}\n"
    train = ("train t {{ mechanism dpsgd  {size} sampling poisson(expected_batch = 64)  clipping flat(C = 1)  "
             "steps 10  guarantee dp(epsilon = 8, delta = 1e-6) }}\n")
    assert "DPS142" in rules(unit.format(n=1000) + train.format(size="dataset_size 2000"))
    assert "DPS142" not in rules(unit.format(n=1000) + train.format(size="dataset_size 1000"))
    assert "DPS142" not in rules(unit.format(n=1000) + train.format(size=""))


def test_srpp_dataset_size_must_match_the_scenario_data():
    from dpspec.families.srpp_sgd.rules import spec

    data = "scenario prevalence {\n  data synthetic(generator = two_blobs, size = 1400)\n"
    bad = spec(n="1000").replace("scenario prevalence {\n", data)
    assert "DPS142" in rules(bad)
    ok = spec(n="1400").replace("scenario prevalence {\n", data)
    assert "DPS142" not in rules(ok)


def test_srpp_dataset_size_is_checked_against_data_bound_at_compile_time():
    from dpspec.data.synthetic import generate
    from dpspec.families.srpp_sgd.rules import spec

    text = spec(n="1000").replace("scenario prevalence {\n", "scenario prevalence {\n  data dataset(rows)\n")
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(text, data={"rows": generate("two_blobs", 1400)})
    d = e.value.diagnostics[0]
    assert d.rule == "DPS142" and "1400 rows" in d.message and d.span is not None
    c = dpspec.compile(text.replace("1000", "1400"), data={"rows": generate("two_blobs", 1400)})
    assert c.certificate.results[0].mechanism.parameters["dataset_size"] == 1400


def test_steps_and_epochs_both_given():
    d = [d for d in diags(two_runs(FLIP, FLIP, extra="  epochs        3\n")) if d.rule == "DPS144"]
    assert d and "epochs" in d[0].message and d[0].span is not None
    assert "DPS144" in rules(rel_spec(extra="  epochs     2\n"))


def test_a_unit_or_query_that_does_not_fit_its_data():
    assert "DPS145" in rules("privacy a { unit record  graph cora }\nrelease r { mechanism gaussian  "
                             "query count()  guarantee dp(epsilon = 1, delta = 1e-6) }")
    assert "DPS145" in rules("privacy a { unit node  data csv(\"adult/adult.data\", schema = adult) }\n"
                             "release r { mechanism gaussian  sensitivity 1  guarantee dp(epsilon = 1, delta = 1e-6) }")
    node = ("privacy a { unit node  graph cora }\nrelease r { mechanism gaussian  query sum(x, bounds = [0, 1])  "
            "sensitivity 1  guarantee dp(epsilon = 1, delta = 1e-6) }")
    d = [d for d in diags(node) if d.rule == "DPS145"]
    assert d and "graph" in d[0].message and d[0].span.line == 2


def test_a_group_larger_than_the_dataset_is_a_warning():
    spec = dpspec.loads("privacy u { unit group(size = 50)  dataset_size 10 }\n"
                        "release r { mechanism gaussian  query count()  guarantee dp(epsilon = 1, delta = 1e-6) }")
    d = [d for d in spec.diagnostics if d.rule == "DPS146"]
    assert d and d[0].severity == "warning" and spec.ok


@pytest.mark.parametrize("text,setting", [
    (gcon_spec(extra="steps 100\n  "), "steps"),
    (gcon_spec(extra="learning_rate 0.1\n  "), "learning_rate"),
    (gcon_spec(extra="dataset_size 600\n  "), "dataset_size"),
    (gcon_spec(extra="noise_multiplier 1.0\n  ", g="dp(delta = 1e-4)"), "noise"),
    (rel_spec(extra="  momentum 0.9\n"), "momentum"),
    (rel_spec(extra="  dataset_size 300\n"), "dataset_size"),
])
def test_a_setting_the_mechanism_ignores_is_an_error(text, setting):
    d = [d for d in diags(text) if d.rule == "DPS130"]
    assert d and f"`{setting}`" in d[0].message and d[0].span is not None
    assert setting in text.splitlines()[d[0].span.line - 1]


def test_a_training_size_against_the_unit_data():
    text = ("privacy p { unit record  data synthetic(generator = two_blobs, size = 600) }\n"
            "train t { mechanism dpsgd  dataset_size {n}  sampling poisson(expected_batch = 64)  clipping flat(C = 1)  "
            "steps 10  guarantee dp(epsilon = 8, delta = 1e-6) }\n")
    d = [d for d in diags(text.replace("{n}", "6000")) if d.rule == "DPS142"]
    assert d and "600 rows" in d[0].message and d[0].span.line == 2
    assert "DPS142" not in rules(text.replace("{n}", "600"))


def test_a_relation_given_twice():
    bad = ("privacy p { unit record(relation = substitution)  relation add_remove }\n"
           "release r { mechanism gaussian  sensitivity 1  guarantee dp(epsilon = 1, delta = 1e-6) }")
    d = [d for d in diags(bad) if d.rule == "DPS103"]
    assert d and "`substitution`" in d[0].message and "`add_remove`" in d[0].message and d[0].span.line == 1
    assert not diags(bad.replace("record(relation = substitution)", "record"))


def test_a_run_that_reads_its_size_from_the_scenario_data_composes_with_one_that_states_it():
    text = two_runs(FLIP, FLIP).replace("  secret share", "  data synthetic(generator = two_blobs, size = 1400)\n"
                                           "  secret share", 1).replace("  dataset_size  1400\n", "", 1)
    assert "DPS143" not in rules(text) and "DPS142" not in rules(text)
