"""The `execution` setting: recorded in the certificate, checked by verify, never part of the analysis."""

import json

import pytest

import dpspec
from dpspec.certificate.model import Certificate, content_hash
from dpspec.check import rules_distributed
from dpspec.check.rules_distributed import spec as rule_spec
from tests.conftest import SPECS
from tests.guards import cpu_budget

SPEC = SPECS / "dpsgd_distributed.dps"


def _rules(text):
    s = dpspec.loads(text, name="x.dps")
    return s, {d.rule: d for d in s.diagnostics}


def test_spec_compiles_quickly_records_the_target_and_changes_nothing_else():
    with cpu_budget(60, "compiling the distributed spec"):  # compiles, calibrates, never trains
        c = dpspec.compile(dpspec.load(SPEC))
    r = c.certificate.results[0]
    assert r.execution.target == "distributed" and r.execution.workers == 2 and r.execution.backend == "gloo"
    assert "once per step on rank 0" in r.execution.noise
    # the same spec without the execution line: every other field is identical
    text = SPEC.read_text(encoding="utf-8").replace("  execution     distributed(workers = 2, backend = gloo)\n", "")
    assert "execution " not in text.split("train classifier")[1]
    base = dpspec.compile(dpspec.loads(text, name=SPEC.name, base_dir=SPEC.parent))
    a = r.model_dump(mode="json")
    b = base.certificate.results[0].model_dump(mode="json")
    assert a.pop("execution") is not None and b.pop("execution") is None
    assert a == b
    assert c.mechanism == base.mechanism  # the same runtime object (sampling, σ, C, steps)
    rep = dpspec.verify(c.certificate.model_dump(mode="json"))
    assert rep.ok and any("execution target distributed(2 × gloo)" in x for x in rep.checks)


@pytest.mark.parametrize("edit", [dict(workers=3), dict(backend="nccl"), dict(noise="noise on every rank")])
def test_verify_catches_an_edited_execution_record(edit):
    c = dpspec.compile(dpspec.load(SPEC))
    d = json.loads(c.certificate.model_dump_json())
    d["results"][0]["execution"].update(edit)
    cert = Certificate.model_validate(d)
    d["content_hash"] = content_hash(cert)  # resealed: only the recompilation can notice
    rep = dpspec.verify(d, raise_on_error=False)
    assert not rep.ok and any("execution" in p for p in rep.problems)


def test_single_target_and_lowering_errors():
    s, r = _rules(rule_spec("single"))
    assert s.ok and not r
    c = dpspec.compile(s)
    assert c.certificate.results[0].execution.target == "single"
    s, r = _rules(rule_spec("cluster(workers = 2)"))
    assert not s.ok and "DPS111" in r and "unknown execution target" in r["DPS111"].message
    s, r = _rules(rule_spec("distributed(backend = gloo)"))
    assert not s.ok  # workers is required


def test_nccl_without_gpus_is_a_warning_with_a_hint(monkeypatch):
    monkeypatch.setattr(rules_distributed, "cuda_visible", lambda: False)
    s, r = _rules(rule_spec("distributed(workers = 4, backend = nccl)"))
    assert s.ok and r["DPS803"].severity == "warning" and "gloo" in r["DPS803"].hint
    assert r["DPS803"].span is not None
    monkeypatch.setattr(rules_distributed, "cuda_visible", lambda: True)
    s, r = _rules(rule_spec("distributed(workers = 4, backend = nccl)"))
    assert s.ok and "DPS803" not in r


def test_runtime_target_check():
    from dpspec.distributed.comm import Comm, DistributedSoundnessError

    e = dpspec.compile(dpspec.load(SPEC)).certificate.results[0].execution
    Comm(0, 2, "gloo").check_target(e)
    Comm(1, 2, "gloo").check_target(None)
    for bad in (Comm(0, 1, "gloo"), Comm(0, 2, "nccl"), Comm(0, 4, "gloo")):
        with pytest.raises(DistributedSoundnessError, match="DPS807"):
            bad.check_target(e)
