"""Strict structure before anything else: reading limits, strict JSON, the strict schema, every field
required, unique result names, path versus text, and the run-certificate dispatch."""

import json
import os
import sys
import threading
import types
from pathlib import Path

import pytest

import dpspec
from dpspec.certificate import verify as V
from dpspec.certificate.model import Certificate, json_schema
from tests.fuzz.certmut import _paths


def failing(doc, *words, **kw):
    rep = dpspec.verify(doc, raise_on_error=False, **kw)
    assert not rep.ok, "verified, but must fail"
    text = " | ".join(rep.problems)
    for w in words:
        assert w in text, rep.problems
    assert "internal error" not in text, rep.problems
    return rep


def test_a_genuine_certificate_verifies_as_text_dict_model_and_file(certs, tmp_path):
    text = certs["gaussian_release"]
    path = tmp_path / "c.json"
    path.write_text(text, encoding="utf-8")
    for doc in (text, text.encode(), json.loads(text), Certificate.model_validate_json(text), path):
        assert dpspec.verify(doc, raise_on_error=False).ok


# --- forged and incomplete certificates (the list), each resealed ---------------------------


def test_a_forged_copy_before_the_genuine_result_is_refused(doc, resealed):
    d = doc()
    forged = json.loads(json.dumps(d["results"][0]))
    forged["guarantee"]["epsilon"] = 0.01
    forged["mechanism"]["parameters"]["sigma"] *= 100
    d["results"].insert(0, forged)
    failing(resealed(d), "appear more than once")


@pytest.mark.parametrize("path", [("content_hash",), ("results", 0, "warnings"), ("results", 0, "execution"),
                                  ("results", 0, "guarantee", "reading"), ("results", 0, "numerics", "calibration"),
                                  ("results", 0, "formulas", 0, "check")])
def test_a_deleted_field_is_missing_not_defaulted(doc, resealed, path):
    d = doc()
    node = d
    for k in path[:-1]:
        node = node[k]
    del node[path[-1]]
    failing(resealed(d), "required field missing")


def test_every_field_of_a_certificate_is_required(doc, resealed):
    """Delete each key of a real certificate in turn (resealed): every deletion fails at the structure stage."""
    base = doc("gen_two_releases")
    keys = [p for p, _ in _paths(base) if p and isinstance(p[-1], str)]
    assert len(keys) > 150
    for p in keys:
        d = json.loads(json.dumps(base))
        node = d
        for k in p[:-1]:
            node = node[k]
        del node[p[-1]]
        rep = dpspec.verify(resealed(d), raise_on_error=False)
        assert not rep.ok, p
        assert "internal error" not in rep.problems[0], p


@pytest.mark.parametrize("where", [(), ("results", 0), ("results", 0, "guarantee"), ("results", 0, "mechanism"),
                                   ("spec",), ("results", 0, "formulas", 0)])
def test_an_unknown_key_is_refused(doc, resealed, where):
    d = doc()
    node = d
    for k in where:
        node = node[k]
    node["epsilon_override"] = 0.01
    failing(resealed(d), "epsilon_override")


@pytest.mark.parametrize("dup", ['"content_hash": "sha256:0", ', '"results": [], ', '"schema_version": "1.0", '])
def test_duplicate_json_keys_are_refused(certs, dup):
    text = certs["gaussian_release"]
    failing("{" + dup + text.lstrip()[1:], "appears twice")


def test_a_nested_duplicate_key_is_refused(certs):
    text = certs["gaussian_release"].replace('"epsilon": ', '"epsilon": 0.01, "epsilon": ', 1)
    failing(text, "appears twice")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_non_finite_numbers_are_refused(certs, token):
    text = certs["gaussian_release"].replace('"delta": 1e-06', f'"delta": {token}', 1)
    assert text != certs["gaussian_release"]
    failing(text)


def test_a_python_dict_with_nan_is_refused(doc):
    d = doc()
    d["results"][0]["guarantee"]["epsilon"] = float("nan")
    failing(d, "not JSON data")


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"a": ' + "[" * 40 + "]" * 40 + "}", '{"a": ' * 50 + "1" + "}" * 50,
                                  '{"n": ' + "9" * 10_000 + "}", "", "   ", "{", "\ufeff{}", "null", '"x"'])
def test_malformed_json_fails_cleanly(text):
    failing(text)


def test_a_number_where_a_string_is_expected_is_not_coerced(doc, resealed):
    d = doc()
    d["results"][0]["mechanism"]["parameters"]["sigma"] = str(d["results"][0]["mechanism"]["parameters"]["sigma"])
    failing(resealed(d))
    d = doc()
    d["results"][0]["guarantee"]["epsilon"] = True
    failing(resealed(d), "schema")


@pytest.mark.parametrize("version", ["1.00", "01.0", "1.0 ", " 1.0", "1", "1.0.0", "1e0.0", "9" * 5000 + ".0", 1.0])
def test_only_well_formed_schema_versions_are_read(doc, resealed, version):
    d = doc()
    d["schema_version"] = version
    failing(resealed(d), "schema version")


# --- path versus text; files ------------------------------------------------------------------------


def test_a_str_is_text_unless_it_names_an_existing_json_file(certs, tmp_path):
    # dpspec.verify("cert.json") reads the file, as dpspec.compile("x.dps") does (a certificate's JSON text
    # begins with `{`, so the two cannot be confused); dpspec.certificate.verify itself keeps a str as text
    path = tmp_path / "c.json"
    path.write_text(certs["gaussian_release"], encoding="utf-8")
    assert dpspec.verify(str(path)).ok
    assert not V.verify(str(path), raise_on_error=False).ok
    failing(str(tmp_path / "absent.json"), "pass a pathlib.Path")  # names no file: text, with the hint
    holder = tmp_path / "holder.json"          # a file holding only the path of a valid certificate
    holder.write_text(str(path), encoding="utf-8")
    failing(holder, "not valid JSON")          # a path inside a file is never followed
    failing(str(holder), "not valid JSON")


def test_directories_devices_and_fifos_are_refused_unread(tmp_path):
    failing(tmp_path, "is a directory")
    failing(Path("/dev/zero"), "not a regular file")
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    failing(link, "not a regular file")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    result = {}
    t = threading.Thread(target=lambda: result.update(rep=dpspec.verify(fifo, raise_on_error=False)), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "verify blocked on a FIFO"
    assert not result["rep"].ok and "not a regular file" in result["rep"].problems[0]


def test_an_oversized_file_is_refused_without_reading_it(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: no disk used
        f.truncate(V.MAX_CERTIFICATE_BYTES + 1)
    failing(big, "larger than")


def test_the_read_is_capped(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{" + " " * 200 + "}", encoding="utf-8")
    with pytest.raises(V.CertificateReadError, match="larger than 100 bytes"):
        V.read_certificate_file(p, limit=100)
    assert V.read_certificate_file(p, limit=1000).startswith("{")


def test_non_utf8_and_missing_files_fail_cleanly(tmp_path):
    p = tmp_path / "latin.json"
    p.write_bytes(b'{"x": "\xe9"}')
    failing(p, "not UTF-8")
    failing(tmp_path / "missing.json", "cannot read")


def test_oversized_text_is_refused():
    failing("{" + " " * (V.MAX_CERTIFICATE_BYTES + 1) + "}", "larger than")


@pytest.mark.parametrize("obj", [42, None, ["{}"], object()])
def test_other_python_objects_are_refused(obj):
    failing(obj, "cannot verify")


# --- the schema -----------------------------------------------------------------------------------


def test_the_published_schema_requires_every_property_and_forbids_others():
    schema = json_schema()
    objects = [schema, *schema["$defs"].values()]
    for obj in objects:
        if obj.get("type") == "object" and "properties" in obj:
            # schema 1.1: `accounting` is omitted for results certified by their own accountant (SRPP, relational,
            # GCON, SWM), so that those results read exactly as in 1.0; every other property is required
            optional = {"accounting"} if obj.get("title") == "TargetCertificate" else set()
            assert set(obj.get("required", [])) == set(obj["properties"]) - optional, obj.get("title")
            assert obj.get("additionalProperties") is False, obj.get("title")


def test_the_json_schema_rejects_a_certificate_without_warnings(doc):
    import jsonschema

    d = doc()
    jsonschema.validate(d, json_schema())
    del d["results"][0]["warnings"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(d, json_schema())


def test_every_model_forbids_unknown_keys_and_non_finite_floats():
    from dpspec.certificate import model as M

    models = [v for v in vars(M).values() if isinstance(v, type) and issubclass(v, M._M) and v is not M._M]
    assert len(models) >= 15
    for m in models:
        assert m.model_config.get("extra") == "forbid", m
        assert m.model_config.get("allow_inf_nan") is False, m


# --- run certificates are dispatched --------------------------------------------------------------


def test_a_run_certificate_goes_to_the_run_verifier(monkeypatch):
    from dpspec.certificate import verify as verifier

    seen = {}

    def verify_run(doc, original, *, data=None, raise_on_error=True, trust_code=False):
        seen["doc"], seen["trust"] = doc, trust_code
        rep = verifier.RunVerifyReport()
        rep.checks.append("run checked")
        return rep

    monkeypatch.setattr(verifier, "verify_run", verify_run)
    rep = dpspec.verify('{"kind": "run", "x": 1}', raise_on_error=False)
    assert rep.ok and seen == {"doc": {"kind": "run", "x": 1}, "trust": False} and "run checked" in rep.checks


def test_a_forged_run_certificate_fails_with_a_reason_not_an_internal_error():
    rep = failing('{"kind": "run"}', "run certificate")
    assert not any("internal error" in p for p in rep.problems)
    failing('{"kind": "run", "kind": "run"}', "duplicate")


def test_many_results_fail_with_a_bounded_report(doc, resealed):
    d = doc()
    r = d["results"][0]
    d["results"] = [dict(json.loads(json.dumps(r)), name=f"r{i}") for i in range(300)]
    rep = failing(resealed(d), "300 in all")
    assert len(rep.problems) == 1 and len(rep.problems[0]) < 1000


def test_the_number_of_problems_listed_is_bounded():
    rep = V.VerifyReport()
    for i in range(1000):
        rep.fail(f"problem {i}")
    assert len(rep.problems) == V.MAX_PROBLEMS + 1 and not rep.ok


def test_an_older_schema_version_is_read_as_that_version(doc, resealed):
    """A certificate stating schema 1.0 is what dpspec 1.0 wrote: accepted when its content is (an SRPP
    result has no `accounting` record), refused when it holds a field 1.1 added."""
    import dpspec

    srpp = doc("digits_srpp")
    assert srpp["schema_version"] == "1.1"
    srpp["schema_version"] = "1.0"
    assert dpspec.verify(resealed(srpp), raise_on_error=False).ok
    dp = doc("dpsgd_records")
    assert dp["results"][0]["accounting"] is not None
    dp["schema_version"] = "1.0"
    rep = dpspec.verify(resealed(dp), raise_on_error=False)
    assert not rep.ok and any("schema version 1.1 added" in p for p in rep.problems), rep.problems
