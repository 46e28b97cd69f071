"""The training families' typed settings: one model per family (its folder's settings.py), no shared
optional fields on ``ir.Training``, and the allowed settings of a family derived from its model."""

from pathlib import Path
from typing import ClassVar, Literal

import pytest

import dpspec
from dpspec import families
from dpspec.families import FAMILIES, Family, allowed_settings
from dpspec.families.dpsgd.settings import DpsgdSettings
from dpspec.families.gcon.settings import GconSettings
from dpspec.ir import models as ir
from dpspec.ir.settings import COMMON_SETTINGS, TrainingSettings

ROOT = Path(__file__).resolve().parents[1]

# What every training has; everything a family reads is in its settings model.
TRAINING_FIELDS = {"span", "field_spans", "name", "protects", "mechanism", "schedule", "guarantee", "execution",
                   "settings", "ignored"}

# The hand-kept lists the families had before their settings were derived (DPS130's hint shows them):
# the derived lists must say the same, in the same order.
BEFORE = {
    "dpsgd": ("protect", "mechanism", "sampling", "clipping", "steps", "epochs", "learning_rate", "momentum",
              "noise", "guarantee", "dataset_size", "model", "description"),
    "srpp_sgd": ("protect", "mechanism", "sampling", "clipping", "steps", "epochs", "learning_rate", "momentum",
                 "lr_schedule", "noise_units", "accountant", "discrepancy", "dataset_size", "noise", "guarantee",
                 "model", "execution", "description"),
    "relational_dpsgd": ("protect", "mechanism", "sampling", "degree_cap", "clipping", "loss", "encoder", "split",
                         "steps", "epochs", "learning_rate", "noise", "guarantee", "execution", "description"),
    "gcon": ("protect", "mechanism", "propagation", "loss", "regularization", "encoder", "pseudo_labels", "split",
             "inference", "guarantee", "description"),
}

UNIT = "privacy people { unit record  dataset_size 60000 }\n"
DPSGD = (UNIT.replace("{", "{{").replace("}", "}}") + "train t {{ mechanism dpsgd  sampling poisson(rate = 0.01)  clipping flat(C = 1)  steps 100  "
         "{extra}guarantee dp(epsilon = 8, delta = 1e-6) }}\n")
GCON = ("privacy links {{ unit edge  graph cora }}\n"
        "train g {{ mechanism gcon  propagation appr(restart = 0.6, steps = [2, inf])  regularization 0.2  "
        "{extra}guarantee dp(epsilon = 1, delta = 1e-4) }}\n")


def test_training_holds_no_family_setting():
    assert set(ir.Training.model_fields) == TRAINING_FIELDS
    for f in FAMILIES.values():
        if f.settings_model:
            model = families.load(f.settings_model)
            assert not set(model.setting_fields()) & TRAINING_FIELDS, f.name


def test_every_training_family_names_a_settings_model_of_its_own():
    models = [families.load(f.settings_model) for f in FAMILIES.values() if f.block == "train"]
    assert len(models) == len(set(models)) == 4
    for f in FAMILIES.values():
        if f.block == "train":
            model = families.load(f.settings_model)
            assert issubclass(model, TrainingSettings) and model.model_fields["family"].default == f.name
            assert TrainingSettings.model_for(f.name) is model
            assert not f.settings  # derived, not hand-kept
        else:
            assert not f.settings_model and f.settings


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_allowed_settings_are_the_models_fields_and_the_common_ones(name):
    model = families.load(FAMILIES[name].settings_model)
    common = [c for cs in model.common_after.values() for c in cs]
    assert set(model.common_after) <= set(model.setting_fields())
    assert set(common) <= set(COMMON_SETTINGS)
    allowed = allowed_settings(FAMILIES[name])
    assert set(allowed) == {"protect", "mechanism", "description", *model.setting_fields(), *common}
    assert len(allowed) == len(set(allowed))
    assert allowed == BEFORE[name]  # the DPS130 hint is unchanged


def _diags(text):
    return dpspec.load(text).diagnostics


def test_lowering_builds_the_family_model_and_reads_it_typed():
    spec = dpspec.load(DPSGD.format(extra=""))
    assert spec.ok
    (t,) = spec.ir.trainings
    assert type(t.settings) is DpsgdSettings and t.ignored == ()
    s = t.settings_as(DpsgdSettings)
    assert isinstance(s.sampling, ir.PoissonSampling) and s.clipping.C == 1
    assert s.span_of("clipping") == t.span_of("clipping") != t.span  # the value's own span
    with pytest.raises(TypeError, match="DpsgdSettings, not GconSettings"):
        t.settings_as(GconSettings)


@pytest.mark.parametrize("path", sorted((ROOT / "specs").glob("*.dps")), ids=lambda p: p.name)
def test_the_ir_round_trips_through_json_with_each_familys_model(path):
    spec = dpspec.load(path)
    if spec.ir is None:
        pytest.skip("does not lower")
    back = ir.SpecIR.model_validate_json(spec.ir.model_dump_json())
    assert back == spec.ir
    for a, b in zip(back.trainings, spec.ir.trainings):
        assert type(a.settings) is type(b.settings) is TrainingSettings.model_for(b.mechanism)


def test_a_serialised_ir_reads_back_in_a_fresh_process():
    """No family's settings module is imported before the IR is read: the IR finds each model through the
    family table (dpspec.families), which it may read, and not by importing a family's folder itself."""
    import subprocess
    import sys

    spec = dpspec.load(ROOT / "specs" / "sbm_gcon.dps")
    dumped = spec.ir.model_dump_json()
    code = (
        "import sys\n"
        "from dpspec.ir import SpecIR\n"
        "assert not [m for m in sys.modules if m.endswith('.settings') and m.startswith('dpspec.families.')]\n"
        "ir = SpecIR.model_validate_json(sys.stdin.read())\n"
        "print(type(ir.trainings[0].settings).__module__, type(ir.trainings[0].settings).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=dumped, capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert out.stdout.split() == ["dpspec.families.gcon.settings", "GconSettings"]


@pytest.mark.parametrize("text, key, mech, where", [
    (DPSGD.format(extra="propagation appr(restart = 0.6, steps = [2])  "), "propagation", "dpsgd",
     "appr(restart = 0.6, steps = [2])"),
    (DPSGD.format(extra="degree_cap 5  "), "degree_cap", "dpsgd", "5"),
    (DPSGD.format(extra="discrepancy label_flip(differing = 2)  "), "discrepancy", "dpsgd",
     "label_flip(differing = 2)"),
    (GCON.format(extra="sampling poisson(rate = 0.1)  "), "sampling", "gcon", "poisson(rate = 0.1)"),
    (GCON.format(extra="noise_multiplier 1.0  "), "noise", "gcon", "1.0"),
    (GCON.format(extra="steps 10  "), "steps", "gcon", "10"),
])
def test_a_setting_of_another_family_is_refused_where_it_is_written(text, key, mech, where):
    found = [d for d in _diags(text) if d.rule == "DPS130"]
    assert len(found) == 1
    d = found[0]
    uses = ", ".join(s for s in BEFORE[mech] if s not in ("protect", "mechanism", "description"))
    assert d.message == f"`{key}` has no effect for mechanism `{mech}`"
    assert d.hint == f"remove it (mechanism `{mech}` uses: {uses})"
    line = text.splitlines()[d.span.line - 1]
    assert line[d.span.col - 1:d.span.end_col - 1] == where


def test_momentum_is_refused_for_relational_training():
    text = ("privacy users { unit node  graph cora }\ntrain r { mechanism relational_dpsgd  sampling coupled { "
            "positive poisson(expected_batch = 64)  negative without_replacement(per_positive = 4) }  degree_cap 5  "
            "clipping per_tuple(C = 1.0)  steps 20  momentum 0.9  guarantee dp(epsilon = 4, delta = 1e-5) }\n")
    assert [d.message for d in _diags(text) if d.rule == "DPS130"] == [
        "`momentum` has no effect for mechanism `relational_dpsgd`"]


# --- a family added by its settings model and one entry, without editing shared code -----------------


class ToySettings(TrainingSettings):
    family: Literal["toy"] = "toy"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {"sampling": ("steps",), "noise": ("guarantee",)}
    sampling: ir.Sampling | None = None
    noise: ir.GaussianNoise | None = None


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(FAMILIES, "toy", Family(
        name="toy", block="train", units=("record",), relations=("add_remove",), notions=("dp", "rdp"),
        summary="a toy training family", source="(a test)", settings_model=f"{__name__}:ToySettings"))
    yield


def test_a_new_family_is_lowered_and_checked_from_its_model_and_entry(toy):
    text = UNIT + "train t { mechanism toy  sampling poisson(rate = 0.01)  steps 10  noise_multiplier 1.0  " \
                  "guarantee dp(delta = 1e-6) }\n"
    spec = dpspec.load(text)
    assert spec.ok, spec.diagnostics
    (t,) = spec.ir.trainings
    s = t.settings_as(ToySettings)
    assert s.noise.noise_multiplier == 1.0 and t.schedule.steps == 10
    assert allowed_settings(FAMILIES["toy"]) == ("protect", "mechanism", "sampling", "steps", "noise", "guarantee",
                                                 "description")
    bad = text.replace("steps 10", "steps 10  clipping flat(C = 1)  epochs 2")
    found = sorted((d.message, d.hint) for d in _diags(bad) if d.rule == "DPS130")
    hint = "remove it (mechanism `toy` uses: sampling, steps, noise, guarantee)"
    assert found == [("`clipping` has no effect for mechanism `toy`", hint),
                     ("`epochs` has no effect for mechanism `toy`", hint)]
