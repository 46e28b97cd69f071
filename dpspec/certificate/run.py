"""Run certificates: what a stopped (or finished) run actually spent of its certificate.

A privacy certificate covers a whole training run (T steps, or one release). A *run certificate*
states what one run of it did: how many of the certified steps it took and the ε it spent, from
the same accountant as the certificate, at the certificate's δ values (or its α for Rényi and SRPP
notions). It names the original certificate by its content hash and may embed it::

    {"kind": "run", "schema_version": "1.0", "tool": {...},
     "certificate": {"content_hash": "sha256:…", "source_name": "specs/x.dps"},
     "target": "model", "mechanism": "dpsgd", "notion": "approximate_dp", "unit": "step",
     "steps_taken": 120, "budget_steps": 337, "accountant": "…", "exact_for_run": true,
     "spent":     [{"epsilon": 1.9, "delta": 1e-06}, …],
     "certified": [{"epsilon": 4.0, "delta": 1e-06}, …],
     "original": {…the original certificate, optional…}, "content_hash": "sha256:…"}

Writing one: ``mechanism.run_certificate(embed=compiled.certificate)`` from Python (the object's
ledger), or ``dpspec run-cert CERT.json --target NAME --steps N`` (or ``--ledger STATE.json``, a
saved ``ledger_state()``) from the command line.

Verifying one (:func:`verify_run`, ``dpspec verify RUN.json [--certificate CERT.json]``):

1. the document parses against the model below (unknown fields are refused; it is never evaluated
   as code) and its ``content_hash`` matches its content;
2. the original certificate — passed by the reviewer or embedded — has the content hash the run
   certificate names, and verifies on its own (``dpspec.certificate.verify``: its spec is compiled
   again and every number recomputed);
3. from that recompilation, whose numbers were just shown to be the original certificate's, the
   target's runtime object is rebuilt and its ledger's accountant recomputes ε at ``steps_taken``
   for every recorded point: the recorded ε must be that value (never below it);
4. ``steps_taken`` is within the certified budget, ``certified`` repeats the original certificate's
   numbers, and every ε spent is at most the full certificate's ε at the same δ (or α).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import ValidationError

from dpspec.certificate.run_record import (  # noqa: F401 - the document and its writer, re-exported
    RUN_SCHEMA_VERSION,
    OriginalRef,
    RunCertificate,
    SpentPoint,
    _points,
    build_run_certificate,
    run_content_hash,
)

REL_TOL = 1e-9

__all__ = ["RunCertificate", "SpentPoint", "OriginalRef", "build_run_certificate", "run_certificate_for",
           "verify_run", "RunVerifyReport", "RUN_SCHEMA_VERSION"]


def _compiled_mechanism(original, target: str, data: dict | None):
    """The runtime object of ``target`` compiled from the original certificate's embedded spec, bound to it."""
    from dpspec.compiler.compile import compile_spec
    from dpspec.frontend import loads

    spec = loads(original.spec.canonical_text, name=original.spec.source_name)
    compiled = compile_spec(spec, data=data)
    t = compiled.targets.get(target)
    if t is None or t.mechanism is None or not hasattr(t.mechanism, "ledger"):
        raise KeyError(target)
    mech = t.mechanism
    mech.bind_certificate(original, target)
    return mech


def run_certificate_for(certificate, target: str, *, steps: int | None = None, ledger_state: dict | None = None,
                        embed: bool = False, data: dict | None = None) -> RunCertificate:
    """A run certificate for a run of ``target`` that stopped after ``steps`` steps (or at a saved
    ``ledger_state``), recomputed from the certificate (which is verified first)."""
    from dpspec.certificate.verify import verify

    rep = verify(certificate, raise_on_error=False, data=data)
    if not rep.ok:
        raise ValueError("the certificate does not verify:\n" + "\n".join(f"- {p}" for p in rep.problems))
    cert = rep.certificate
    names = [r.name for r in cert.results if r.kind != "compose"]
    if target not in names:
        raise ValueError(f"no release or training named `{target}`; the certificate has {', '.join(names)}")
    mech = _compiled_mechanism(cert, target, data)
    if ledger_state is not None:
        mech.load_ledger_state(ledger_state)
    elif steps is not None:
        mech.ledger.load_state_dict({**mech.ledger.state_dict(), "steps_taken": int(steps)})
    else:
        raise ValueError("give the steps taken or a saved ledger state")
    return build_run_certificate(mech, embed=cert if embed else None)


# --- verifying ----------------------------------------------------------------------------------------


@dataclass
class RunVerifyReport:
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    run: RunCertificate | None = None
    certificate: None = None  # the interface of VerifyReport: a run certificate is not a Certificate

    def fail(self, msg: str) -> None:
        self.ok = False
        self.problems.append(msg)


class RunVerificationError(Exception):
    def __init__(self, report: RunVerifyReport):
        self.report = report
        super().__init__("run certificate verification failed:\n" + "\n".join(f"- {p}" for p in report.problems))


def _load_json(doc, what: str) -> tuple[dict | None, str | None]:
    """Read strictly, as ``dpspec verify`` reads a certificate: a ``Path`` is a bounded regular file, a
    ``str``/``bytes`` is JSON text (never a path); duplicate keys, NaN and out-of-range numbers refused."""
    from dpspec.certificate.verify import CertificateReadError, _StructureError, _text_of, parse_certificate_json

    if isinstance(doc, dict):
        return doc, None
    if hasattr(doc, "model_dump_json"):
        doc = doc.model_dump_json()
    try:
        data = parse_certificate_json(_text_of(doc))
    except (CertificateReadError, _StructureError) as e:
        return None, f"the {what}: {e}"
    if not isinstance(data, dict):
        return None, f"the {what} must be a JSON object"
    return data, None


def _close(a: float, b: float) -> bool:
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= REL_TOL * max(abs(a), abs(b)))


def _label(p: SpentPoint) -> str:
    return f"δ = {p.delta:g}" if p.delta is not None else f"α = {p.alpha:g}"


def verify_run(doc, certificate=None, *, data: dict | None = None, raise_on_error: bool = True,
               trust_code: bool = False) -> RunVerifyReport:
    """Verify a run certificate (dict, JSON text or path) against its original certificate (``certificate``:
    a model, dict, JSON text or path; default: the embedded one). See the module docstring."""
    rep = RunVerifyReport()
    d, err = _load_json(doc, "run certificate")
    if err:
        rep.fail(err)
        return _finish(rep, raise_on_error)
    if d.get("kind") != "run":
        rep.fail("not a run certificate (no top-level \"kind\": \"run\")")
        return _finish(rep, raise_on_error)
    if d.get("schema_version") != RUN_SCHEMA_VERSION:
        rep.fail(f"unknown run certificate schema version {d.get('schema_version')!r}; this dpspec reads "
                 f"{RUN_SCHEMA_VERSION}")
        return _finish(rep, raise_on_error)
    try:
        rc = RunCertificate.model_validate(d, strict=True)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        rep.fail(f"the run certificate does not match its schema: {loc}: {first['msg']} ({e.error_count()} problem(s))")
        return _finish(rep, raise_on_error)
    rep.run = rc
    if rc.content_hash != run_content_hash(rc):
        rep.fail("content_hash does not match the content: the run certificate was edited after it was written")
    else:
        rep.checks.append("run certificate: content hash matches")
    found = _original(rc, certificate, rep)
    if found is None:
        return _finish(rep, raise_on_error)
    _check_against(rc, found, rep, data, trust_code)
    return _finish(rep, raise_on_error)


def _original(rc: RunCertificate, certificate, rep: RunVerifyReport):
    from dpspec.certificate.model import Certificate

    docs = []
    if certificate is not None:
        c, err = _load_json(certificate, "certificate")
        if err:
            rep.fail(err)
            return None
        docs.append(("given", c))
    if rc.original is not None:
        docs.append(("embedded", rc.original))
    if not docs:
        rep.fail("the original certificate is needed: pass it (dpspec verify RUN.json --certificate CERT.json) or "
                 "write the run certificate with it embedded (--embed)")
        return None
    certs = []
    for where, c in docs:
        try:
            certs.append(Certificate.model_validate(c))
        except ValidationError as e:
            first = e.errors()[0]
            rep.fail(f"the {where} original certificate does not match the certificate schema: "
                     f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}")
            return None
    hashes = {c.content_hash for c in certs}
    if len(hashes) > 1:
        rep.fail("the given certificate and the embedded one differ")
        return None
    cert = certs[0]
    if cert.content_hash != rc.certificate.content_hash:
        rep.fail(f"the run certificate spends {rc.certificate.content_hash}, not the certificate given "
                 f"({cert.content_hash})")
        return None
    rep.checks.append(f"original certificate: {cert.content_hash} ({rc.certificate.source_name})")
    return cert, docs[0][1]  # the model, and the document as given (verified strictly, not re-serialised)


def _check_against(rc: RunCertificate, found, rep: RunVerifyReport, data: dict | None,
                   trust_code: bool = False) -> None:
    from dpspec.certificate.verify import verify

    original, document = found
    orep = verify(document, raise_on_error=False, data=data, trust_code=trust_code)
    if not orep.ok:
        for p in orep.problems:
            rep.fail(f"original certificate: {p}")
        return
    rep.checks.append("original certificate verifies (spec compiled again, every number recomputed)")
    record = next((r for r in original.results if r.name == rc.target), None)
    if record is None:
        rep.fail(f"the original certificate has no target `{rc.target}`")
        return
    if record.mechanism.name != rc.mechanism or record.notion.name != rc.notion:
        rep.fail(f"`{rc.target}` is a {record.mechanism.name} ({record.notion.name}) in the certificate, not "
                 f"{rc.mechanism} ({rc.notion})")
        return
    try:
        mech = _compiled_mechanism(original, rc.target, data)
    except KeyError:
        rep.fail(f"`{rc.target}` has no runtime object with a privacy ledger")
        return
    led = mech.ledger
    if rc.budget_steps != led.budget_steps or rc.unit != led.unit:
        rep.fail(f"budget: the run certificate says {rc.budget_steps} {rc.unit}(s), the certificate covers "
                 f"{led.budget_steps} {led.unit}(s)")
        return
    if not 0 <= rc.steps_taken <= led.budget_steps:
        rep.fail(f"{rc.steps_taken} {rc.unit}(s) taken is outside the certified budget of {led.budget_steps}")
        return
    rep.checks.append(f"{rc.target}: {rc.steps_taken} of {led.budget_steps} certified {rc.unit}(s)")
    want = {(d, a): e for d, a, e in _points(record)}
    got_keys = [(p.delta, p.alpha) for p in rc.certified]
    if sorted(want, key=repr) != sorted(got_keys, key=repr) or [(p.delta, p.alpha) for p in rc.spent] != got_keys:
        rep.fail("the run certificate's points are not the original certificate's δ values / α")
        return
    for c in rc.certified:
        if not _close(c.epsilon, want[(c.delta, c.alpha)]):
            rep.fail(f"certified ε at {_label(c)}: recorded {c.epsilon!r}, the certificate states "
                     f"{want[(c.delta, c.alpha)]!r}")
    for p in rc.spent:
        s = led.spent_at(rc.steps_taken, p.delta)
        if p.epsilon < s.epsilon * (1 - 1e-12):
            rep.fail(f"ε spent at {_label(p)}: recorded {p.epsilon!r} is BELOW the recomputed {s.epsilon!r} "
                     "(the run certificate understates what was spent)")
        elif not _close(p.epsilon, s.epsilon):
            rep.fail(f"ε spent at {_label(p)}: recorded {p.epsilon!r}, recomputed {s.epsilon!r}")
        elif p.epsilon > want[(p.delta, p.alpha)] * (1 + 1e-12):
            rep.fail(f"ε spent at {_label(p)} ({p.epsilon!r}) exceeds the certificate's {want[(p.delta, p.alpha)]!r}")
        else:
            rep.checks.append(f"{rc.target}: ε spent at {_label(p)} recomputed ({p.epsilon:.6g} ≤ "
                              f"{want[(p.delta, p.alpha)]:.6g} certified) with the certificate's accountant")
        if s.exact_for_run != rc.exact_for_run:
            rep.fail(f"exact_for_run: recorded {rc.exact_for_run}, the mechanism's ledger says {s.exact_for_run}")
    # the descriptive fields are the ledger's own words too: a verified run certificate carries no text
    # its accountant did not write (a forged `note` or `accountant` would otherwise be sealed as verified)
    last = led.spent_at(rc.steps_taken, rc.spent[-1].delta) if rc.spent else None
    if last is not None:
        for name, recorded, recomputed in (("accountant", rc.accountant, last.accountant), ("note", rc.note, last.note)):
            if recorded != recomputed:
                rep.fail(f"{name}: recorded {recorded!r}, the certificate's accountant writes {recomputed!r}")


def _finish(rep: RunVerifyReport, raise_on_error: bool) -> RunVerifyReport:
    if not rep.ok and raise_on_error:
        raise RunVerificationError(rep)
    return rep
