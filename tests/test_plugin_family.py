"""A mechanism family is one declaration: a family written entirely in this file (settings model,
accountant, compile function, runtime class) plus one entry in the family table goes through every
stage — lowering, checking, compiling, the certificate, ``verify`` and the runtime's step budget —
without an edit to shared code. The family: full-batch noisy gradient descent ("noisy_gd"), T
steps of the Gaussian mechanism on a clipped gradient sum (sensitivity 1 in units of the clip):
ε(α) = T α / (2 σ²) (Mironov 2017, Prop. 7, composed over T steps, Prop. 1)."""

from __future__ import annotations

import json
from typing import ClassVar, Literal

import numpy as np
import pytest

import dpspec
from dpspec.families import FAMILIES, Family, allowed_settings
from dpspec.ir import models as ir
from dpspec.ir.settings import TrainingSettings

UNIT = "privacy people { unit record  relation add_remove  dataset_size 1000 }\n"
SPEC = UNIT + ("train gd { protect people  mechanism noisy_gd  steps 50  noise_multiplier 4.0  "
               "guarantee dp(delta = 1e-6) }\n")


# ---------------------------------------------------------------- the family, all in this file


class NoisyGdSettings(TrainingSettings):
    family: Literal["noisy_gd"] = "noisy_gd"
    common_after: ClassVar[dict[str, tuple[str, ...]]] = {"noise": ("steps", "guarantee")}
    noise: ir.GaussianNoise | None = None


def noisy_gd_rdp(alphas, sigma: float, steps: int):
    """ε(α) = T α / (2 σ²): Mironov 2017 Prop. 7 (Gaussian, Δ = 1), composed T times (Prop. 1)."""
    return steps * np.asarray(alphas, float) / (2.0 * sigma * sigma)


class NoisyGd:
    """The runtime: takes σ and the step budget from its certificate and stops there."""

    def __init__(self, sigma: float, steps: int):
        self.sigma, self.steps, self.taken = sigma, steps, 0

    @classmethod
    def from_certificate(cls, cert):
        p = cert.mechanism.parameters
        return cls(float(p["noise_multiplier"]), int(p["steps"]))

    def step(self, grad_sum, rng):
        if self.taken >= self.steps:
            raise RuntimeError("the certificate's step budget is spent")
        self.taken += 1
        return grad_sum + rng.normal(0.0, self.sigma, np.shape(grad_sum))


def compile_noisy_gd(ctx, t, data):
    from dpspec.certificate.model import DpPoint, GuaranteeRecord, MechanismRecord, Numerics, TargetCertificate
    from dpspec.compiler.common import CompiledTarget, _alpha_grid, _conversion, _deltas, _grid_text, _notion, \
        _protected, _target

    s = t.settings_as(NoisyGdSettings)
    sigma, steps = s.noise.noise_multiplier, t.schedule.steps
    protected, _d, _u = _protected(ctx, t)
    alphas = _alpha_grid(ctx.spec)
    rdp = noisy_gd_rdp(alphas, sigma, steps)
    points = [DpPoint(epsilon=_conversion(alphas, rdp, dl)[0], delta=dl) for dl in _deltas(t.guarantee)]
    guarantee = GuaranteeRecord(target=_target(t.guarantee), rdp_alphas=list(map(float, alphas)),
                                rdp_epsilons=list(map(float, rdp)), dp=points,
                                theorems=["Mironov 2017, Prop. 7 and Prop. 1"],
                                epsilon=points[0].epsilon, delta=points[0].delta)
    cert = TargetCertificate(
        name=t.name, kind="train", protected=protected, notion=_notion(t.guarantee),
        mechanism=MechanismRecord(name="noisy_gd", description="full-batch noisy gradient descent",
                                  parameters={"noise_multiplier": sigma, "steps": steps}, calibrated=False),
        guarantee=guarantee,
        numerics=Numerics(method="closed form", abs_error_bound=0.0, alpha_grid=_grid_text(alphas),
                          conversion="RDP to (ε, δ)"))
    return CompiledTarget(t.name, "train", cert, NoisyGd.from_certificate(cert), alphas, rdp)


ENTRY = Family(
    name="noisy_gd", block="train", units=("record",), relations=("add_remove",), notions=("dp", "rdp"),
    summary="full-batch noisy gradient descent", source="Mironov 2017, Prop. 7",
    settings_model=f"{__name__}:NoisyGdSettings", compile=f"{__name__}:compile_noisy_gd",
    runtime=f"{__name__}:NoisyGd")


@pytest.fixture
def noisy_gd(monkeypatch):
    monkeypatch.setitem(FAMILIES, "noisy_gd", ENTRY)  # the one registry line
    yield


# ---------------------------------------------------------------------------------- the proof


def test_the_family_compiles_certifies_and_verifies_from_one_entry(noisy_gd):
    spec = dpspec.load(SPEC)
    assert spec.ok, spec.diagnostics
    assert allowed_settings(ENTRY) == ("protect", "mechanism", "noise", "steps", "guarantee", "description")
    compiled = dpspec.compile(spec)
    (target,) = compiled.targets.values()
    cert = target.certificate
    assert cert.mechanism.name == "noisy_gd" and cert.guarantee.theorems == ["Mironov 2017, Prop. 7 and Prop. 1"]
    eps = cert.guarantee.epsilon
    # an independent reading of the same bound: min over orders of T α/(2σ²) + log(1/δ)/(α-1) is
    # a standard (looser-or-equal) conversion, the certificate's must not be above it
    a = np.linspace(1.01, 200, 200_000)
    assert 0 < eps <= float(np.min(50 * a / 32 + np.log(1e-6 ** -1) / (a - 1))) + 1e-9
    report = dpspec.verify(compiled.certificate.to_json())
    assert report.ok and report.checks, report.problems


def test_a_forged_epsilon_fails_verify(noisy_gd):
    compiled = dpspec.compile(dpspec.load(SPEC))
    doc = json.loads(compiled.certificate.to_json())
    doc["results"][0]["guarantee"]["epsilon"] *= 0.5
    report = dpspec.verify(json.dumps(doc), raise_on_error=False)
    assert not report.ok
    assert any("epsilon" in p or "ε" in p for p in report.problems), report.problems


def test_the_runtime_stops_at_the_certified_steps(noisy_gd):
    compiled = dpspec.compile(dpspec.load(SPEC))
    mech = compiled.mechanism
    assert isinstance(mech, NoisyGd) and mech.steps == 50 and mech.sigma == 4.0
    rng = np.random.default_rng(0)
    for _ in range(50):
        mech.step(np.zeros(3), rng)
    with pytest.raises(RuntimeError, match="budget"):
        mech.step(np.zeros(3), rng)


def test_without_the_entry_the_mechanism_is_unknown():
    assert "noisy_gd" not in FAMILIES
    spec = dpspec.load(SPEC)
    assert not spec.ok and any("noisy_gd" in d.message for d in spec.diagnostics)


def test_a_setting_only_the_new_family_holds_is_refused_elsewhere(noisy_gd):
    """DPS130 covers settings by name: a GCON training given the plug-in's `noise_multiplier` is refused."""
    text = UNIT.replace("unit record  relation add_remove  dataset_size 1000", "unit edge  graph cora") + \
        "train g { mechanism gcon  noise_multiplier 1.0  guarantee dp(epsilon = 1, delta = 1e-6) }\n"
    diags = [d for d in dpspec.load(text).diagnostics if d.rule == "DPS130"]
    assert [d.message for d in diags] == ["`noise` has no effect for mechanism `gcon`"]
