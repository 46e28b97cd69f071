"""Re-verify a certificate: every number is recomputed, nothing is taken on trust.

1. The document parses against the certificate model and its schema version is readable.
2. ``content_hash`` matches the content (any edit anywhere is detected).
3. The embedded spec text matches its sha256.
4. The spec is compiled again from the embedded text, and every field of every result must
   agree (numbers to a relative 1e-9).
5. Independently of the accountants, every formula carried in the certificate is re-evaluated
   with sympy at 40 significant digits: recorded values must be upper bounds of the exact value
   and within the stated numerical error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpspec.certificate.model import SCHEMA_VERSION, Certificate, content_hash, sha256_text

REL_TOL = 1e-9


class VerificationError(Exception):
    def __init__(self, report: "VerifyReport"):
        self.report = report
        super().__init__("certificate verification failed:\n" + "\n".join(f"- {p}" for p in report.problems))


@dataclass
class VerifyReport:
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    certificate: Certificate | None = None

    def fail(self, msg: str):
        self.ok = False
        self.problems.append(msg)


def _load(doc) -> tuple[dict | None, str | None]:
    if isinstance(doc, Certificate):
        return doc.model_dump(mode="json"), None
    if isinstance(doc, dict):
        return doc, None
    if isinstance(doc, Path) or (isinstance(doc, str) and not doc.lstrip().startswith("{")):
        try:
            text = Path(doc).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            return None, f"cannot read the certificate: {e}"
    else:
        text = doc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"the certificate is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
    if not isinstance(data, dict):
        return None, "the certificate must be a JSON object"
    return data, None


def _version_problem(v: Any) -> str | None:
    if not isinstance(v, str) or v.count(".") != 1 or not all(p.isdigit() for p in v.split(".")):
        return f"unknown certificate schema version {v!r}; this dpspec reads {SCHEMA_VERSION}"
    major, minor = v.split(".")
    mine_major, mine_minor = SCHEMA_VERSION.split(".")
    if major != mine_major:
        return (f"certificate schema version {v} is not readable by this dpspec (it reads {mine_major}.x); "
                f"verify it with the dpspec version that wrote it")
    if int(minor) > int(mine_minor):
        return f"certificate schema version {v} is newer than this dpspec's {SCHEMA_VERSION}; upgrade dpspec"
    return None


def verify(doc, *, raise_on_error: bool = True, data: dict | None = None) -> VerifyReport:
    """Verify a certificate (model, dict, JSON text or path). Raises ``VerificationError`` on failure
    unless ``raise_on_error=False``; the report lists every problem found. ``data`` binds the
    datasets a spec names with ``dataset(name)`` (as for ``dpspec.compile``)."""
    rep = VerifyReport()
    doc_data, err = _load(doc)
    if err:
        rep.fail(err)
        return _finish(rep, raise_on_error)
    if doc_data.get("kind") == "run":  # a run certificate: dpspec.certificate.run checks it
        from dpspec.certificate.run import verify_run

        return verify_run(doc_data, data=data, raise_on_error=raise_on_error)
    vp = _version_problem(doc_data.get("schema_version"))
    if vp:
        rep.fail(vp)
        return _finish(rep, raise_on_error)
    from pydantic import ValidationError

    try:
        cert = Certificate.model_validate(doc_data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        rep.fail(f"the certificate does not match the schema: {loc}: {first['msg']} ({e.error_count()} problem(s))")
        return _finish(rep, raise_on_error)
    rep.certificate = cert
    if cert.content_hash != content_hash(cert):
        rep.fail("content_hash does not match the content: the certificate was edited after it was issued")
    else:
        rep.checks.append("content hash matches")
    if cert.spec.sha256 != sha256_text(cert.spec.canonical_text):
        rep.fail("the embedded spec text does not match its sha256")
    else:
        rep.checks.append("spec text matches its sha256")
    _recompile(cert, rep, data)
    _formulas(cert, rep)
    _swm_checks(cert, rep)
    _execution_checks(cert, rep)
    return _finish(rep, raise_on_error)


def _execution_checks(cert: Certificate, rep: VerifyReport) -> None:
    """The recorded execution target is well formed (the recompilation above already checked that
    it is the spec's and that every privacy number was computed without it)."""
    for r in cert.results:
        e = r.execution
        if e is None:
            continue
        if e.target == "distributed" and (e.workers < 1 or e.backend not in ("gloo", "nccl")):
            rep.fail(f"{r.name}: execution target distributed(workers = {e.workers}, backend = {e.backend}) "
                     "is not a valid target")
        elif r.kind != "train":
            rep.fail(f"{r.name}: an execution target is recorded on a {r.kind} result")
        else:
            rep.checks.append(f"{r.name}: execution target {e.target}({e.workers} × {e.backend}) recorded; "
                              "the privacy analysis does not depend on it")


def _finish(rep: VerifyReport, raise_on_error: bool) -> VerifyReport:
    if not rep.ok and raise_on_error:
        raise VerificationError(rep)
    return rep


def _recompile(cert: Certificate, rep: VerifyReport, data: dict | None = None) -> None:
    from dpspec.compiler.compile import compile_spec
    from dpspec.diagnostics import SpecError, render_all
    from dpspec.frontend import loads

    spec = loads(cert.spec.canonical_text, name=cert.spec.source_name)
    if not spec.ok:
        rep.fail("the embedded spec no longer compiles:\n" + render_all(spec.diagnostics, spec.sources))
        return
    try:
        fresh = compile_spec(spec, data=data)
    except SpecError as e:
        rep.fail("the embedded spec no longer compiles:\n" + render_all(e.diagnostics, e.sources))
        return
    old = {r.name: r for r in cert.results}
    new = {r.name: r for r in fresh.certificate.results}
    if set(old) != set(new):
        rep.fail(f"the certificate lists results {sorted(old)} but the spec defines {sorted(new)}")
    for name in sorted(set(old) & set(new)):
        diffs: list[str] = []
        _diff(old[name].model_dump(mode="json"), new[name].model_dump(mode="json"), f"results[{name}]", diffs)
        for d in diffs[:20]:
            rep.fail(d)
        if len(diffs) > 20:
            rep.fail(f"… and {len(diffs) - 20} more differences in {name}")
        if not diffs:
            rep.checks.append(f"{name}: all numbers recomputed and equal")
    if fresh.certificate.tool.version != cert.tool.version:
        rep.checks.append(f"note: issued by dpspec {cert.tool.version}, verified with {fresh.certificate.tool.version}")


def _close(a: float, b: float) -> bool:
    if a == b:
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b)) + 1e-300


def _diff(a, b, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: present on one side only")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items recorded, {len(b)} recomputed")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if not _close(float(a), float(b)):
            out.append(f"{path}: recorded {a!r}, recomputed {b!r}")
    elif a != b:
        sa, sb = str(a), str(b)
        out.append(f"{path}: recorded {sa[:80]!r}, recomputed {sb[:80]!r}")


def _formulas(cert: Certificate, rep: VerifyReport) -> None:
    from dpspec.compiler import formulas as F

    for r in cert.results:
        tol_abs = r.numerics.abs_error_bound
        for f in r.formulas:
            try:
                if f.checks:
                    for alpha, recorded in f.checks:
                        exact = F.evaluate(f.sympy, {**f.variables, "alpha": int(alpha) if alpha == int(alpha) else alpha})
                        _bound_check(rep, r.name, f.name, f"α = {alpha:g}", recorded, exact, tol_abs)
                if f.value is not None:
                    exact = F.evaluate(f.sympy, f.variables)
                    if f.name == "delta_of_epsilon":
                        target = r.guarantee.delta
                        if target is not None and exact > target * (1 + 1e-9):
                            rep.fail(f"{r.name}: δ(ε) re-evaluated = {exact:.6g} exceeds the certified δ = {target:g}")
                        else:
                            rep.checks.append(f"{r.name}: {f.name} re-evaluated with sympy ({exact:.4g} ≤ δ)")
                    elif f.check == "close":
                        if abs(f.value - exact) > 1e-9 * max(abs(exact), 1e-300):
                            rep.fail(f"{r.name}: {f.name}: recorded {f.value!r}, re-evaluated {exact!r}")
                        else:
                            rep.checks.append(f"{r.name}: {f.name} re-evaluated with sympy")
                    else:
                        _bound_check(rep, r.name, f.name, "value", f.value, exact, tol_abs)
            except Exception as e:  # a formula that cannot be evaluated is itself a failure
                rep.fail(f"{r.name}: formula {f.name} could not be re-evaluated: {e}")


def _swm_checks(cert: Certificate, rep: VerifyReport) -> None:
    """Re-evaluate the SWM guarantee from the recorded Δ with mpmath, independently of the accountant:
    Ave (Thm 4.5 / eq. 10), Joint exact (eq. 11), and their Monte-Carlo forms (Thms 4.7/4.8)."""
    import mpmath as mp

    for r in cert.results:
        sv = r.sensitivity
        if sv is None or r.mechanism.name != "swm":
            continue
        p = r.mechanism.parameters
        alpha, sigma2 = mp.mpf(r.guarantee.alpha), mp.mpf(p["sigma2"])
        rows = sv.instance_deltas or [sv.deltas]
        w = [mp.mpf(x) for x in sv.weights]
        flavour = p["flavour"]
        with mp.workdps(30):
            if sigma2 == 0:
                continue
            c = alpha * (alpha - 1) / (2 * sigma2)
            if flavour == "ave":
                vals = [alpha * mp.fsum(wi * mp.mpf(d) ** 2 for wi, d in zip(w, row)) / (2 * sigma2) for row in rows]
            else:
                vals = [mp.log(mp.fsum(wi * mp.exp(c * mp.mpf(d) ** 2) for wi, d in zip(w, row))) / (alpha - 1)
                        for row in rows]
            if "gamma" in p:
                gamma, d0 = mp.mpf(p["gamma"]), mp.mpf(p["delta0"])
                t = mp.sqrt(mp.log(4 * len(rows) / gamma) / (2 * len(w)))
                if flavour == "ave":
                    vals = [v + alpha * d0 ** 2 * t / (2 * sigma2) for v in vals]
                else:
                    vals = [mp.log(mp.exp(v * (alpha - 1)) + mp.expm1(c * d0 ** 2) * t) / (alpha - 1) for v in vals]
                vals = [min(v, alpha * d0 ** 2 / (2 * sigma2)) for v in vals]
            exact = float(max(vals))
        _bound_check(rep, r.name, f"{flavour} SRPP level from the recorded Δ (mpmath)", f"α = {float(alpha):g}",
                     r.guarantee.epsilon, exact, 1e-9 * max(1.0, exact))


def _bound_check(rep, name, fname, where, recorded, exact, tol_abs):
    slack = 1e-12 * max(1.0, abs(exact))
    if recorded < exact - slack:
        rep.fail(f"{name}: {fname} at {where}: recorded {recorded!r} is BELOW the exact value {exact!r} "
                 "(the certificate overstates privacy)")
    elif recorded > exact + tol_abs + 1e-9 * max(1.0, abs(exact)):
        rep.fail(f"{name}: {fname} at {where}: recorded {recorded!r} differs from the exact value {exact!r} by more "
                 f"than the stated error bound {tol_abs:g}")
    else:
        rep.checks.append(f"{name}: {fname} at {where} re-evaluated with sympy/mpmath")
