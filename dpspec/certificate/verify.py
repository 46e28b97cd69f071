"""Re-verify a certificate: every number is recomputed, nothing is taken on trust, nothing is executed.

A certificate is meant to travel, so ``verify`` treats it as hostile data:

1. **Read** (:func:`read_certificate_file`): only a regular file of at most
   :data:`MAX_CERTIFICATE_BYTES`, read with that cap (never a device, FIFO or directory); the Python
   API takes a ``pathlib.Path`` for a file and a ``str`` for JSON *text* — never a str as a path.
2. **Strict structure**, before anything else: JSON without duplicate keys, NaN or ±Infinity, nested at
   most :data:`MAX_JSON_DEPTH` deep; a readable schema version; the certificate model in strict mode
   (no unknown keys, no type coercion); every field present (the document must be exactly the
   canonical serialisation of its model, so a deleted ``warnings`` or ``content_hash`` is an error,
   not a default); result names unique. A document with a top-level ``"kind": "run"`` is a run
   certificate and is handed to :func:`verify_run` (below).
3. ``content_hash`` matches the content, and the embedded spec text matches its sha256.
4. **No code**: the embedded spec is self-contained (no ``use``) and names no code hook
   (``sampler("m:f")`` worlds, ``callable(target = "m:f")`` queries) unless the reviewer passes
   ``trust_code=True`` (CLI ``--trust-code``); the recompilation runs with hooks switched off
   otherwise (:mod:`dpspec.compiler.hooks`). Formula texts are never parsed: each must equal the
   compiler's own text for its name, and only the compiler's expression is evaluated.
5. **Recompile and compare, direction-aware** (:data:`UP` / exact): a recorded privacy loss or bound
   (ε, δ, the ε(α) curve, the (ε, δ) points, sensitivities, caps, failure probabilities, stated error
   bounds) must be ≥ the recomputed value and may exceed it by rounding only (relative
   :data:`REL_TOL`); noise scales (σ, σ², σ/C, σC) likewise may only be rounded up — a larger σ than
   the compiler computes is a misstatement of what runs beyond that; every other number, string and
   list (rates, steps, sizes, orders, weights, names, texts) must be equal.
6. **Independent re-evaluation**, for results that recompiled equal: every formula with sympy/mpmath
   at 40 digits (bounded: :data:`dpspec.compiler.formulas.MAX_SUM_TERMS`), and the SWM guarantee from
   the recorded Δ with mpmath. A recorded bound below the exact value fails however small the gap.

``verify`` never raises on bad input (only ``VerificationError`` when asked to): every problem is a
line of the report.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dpspec.certificate.model import SCHEMA_VERSION, Certificate, content_hash, sha256_text
from dpspec.certificate.run_record import RUN_SCHEMA_VERSION, RunCertificate, SpentPoint, _points, run_content_hash
from dpspec.errors import CertificateReadError, DpspecError

#: a bound may be recorded above its recomputed value by this relative amount (rounding up), never below
REL_TOL = 1e-9
#: certificates above this size are refused unread (the largest example certificate is ~0.2 MB)
MAX_CERTIFICATE_BYTES = 16 * 1024 * 1024
#: JSON nesting deeper than this is refused (a certificate is about 7 levels deep)
MAX_JSON_DEPTH = 32
#: differences listed per result before the rest are summarised
MAX_LISTED_DIFFERENCES = 20
#: the exact value of a formula is known to this relative precision (40-digit evaluation)
EXACT_REL_ERROR = 1e-30

_VERSION = re.compile(r"(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})")

UP = "up"  # a bound or noise scale: recorded ≥ recomputed, at most REL_TOL above
EXACT = "exact"  # must be equal


class VerificationError(DpspecError):
    def __init__(self, report: VerifyReport):
        self.report = report
        super().__init__("certificate verification failed:\n" + "\n".join(f"- {p}" for p in report.problems))


#: problems listed in a report before the rest are only counted
MAX_PROBLEMS = 100


@dataclass
class VerifyReport:
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    certificate: Certificate | None = None

    def fail(self, msg: str):
        self.ok = False
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(msg)
        elif len(self.problems) == MAX_PROBLEMS:
            self.problems.append(f"… further problems not listed (more than {MAX_PROBLEMS})")


def printable(text: str) -> str:
    """``text`` with control characters escaped (newlines kept): a certificate's strings never reach a
    terminal as escape sequences."""
    return "".join(ch if ch.isprintable() or ch == "\n" else ch.encode("unicode_escape").decode("ascii") for ch in text)


# --- reading --------------------------------------------------------------------------------------


def read_certificate_file(path: str | os.PathLike, limit: int = MAX_CERTIFICATE_BYTES) -> str:
    """The text of a certificate file: a regular file of at most ``limit`` bytes, UTF-8. Devices,
    FIFOs, sockets and directories are refused without being opened for reading; the read itself is
    capped, so a file that grows (or lies about its size) is never read past the limit."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise CertificateReadError(f"cannot read {p}: {e.strerror or e}") from None
    _refuse_irregular(p, st, limit)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise CertificateReadError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        _refuse_irregular(p, os.fstat(fd), limit)  # the file opened is the file checked
        chunks, size = [], 0
        while size <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - size))
            if not b:
                break
            chunks.append(b)
            size += len(b)
    except OSError as e:
        raise CertificateReadError(f"cannot read {p}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise CertificateReadError(f"{p} is larger than {limit} bytes; certificates above that are refused")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CertificateReadError(f"{p} is not UTF-8 text (byte {e.start}); a certificate is JSON") from None


def _refuse_irregular(p: str, st: os.stat_result, limit: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise CertificateReadError(f"{p} is a directory, not a certificate file")
    if not stat.S_ISREG(st.st_mode):
        raise CertificateReadError(f"{p} is not a regular file (a device, FIFO or socket); refusing to read it")
    if st.st_size > limit:
        raise CertificateReadError(f"{p} is {st.st_size} bytes; certificates larger than {limit} bytes are refused")


class _StructureError(Exception):
    pass


def _no_duplicate_keys(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _StructureError(
                f"the key {k!r} appears twice in one JSON object (duplicate keys are refused: "
                "readers disagree on which one counts)"
            )
        out[k] = v
    return out


def _finite_float(s: str) -> float:
    x = float(s)
    if not math.isfinite(x):
        raise _StructureError(f"the number {s[:40]} is out of the range of a double")
    return x


def _no_constant(name: str):
    raise _StructureError(f"{name} is not a JSON number (NaN and Infinity are refused)")


def parse_certificate_json(text: str) -> dict:
    """Strict JSON: no duplicate keys, no NaN/Infinity, no number out of range, bounded nesting.
    Raises ``_StructureError`` with a one-line reason."""
    if len(text) > MAX_CERTIFICATE_BYTES:
        raise _StructureError(f"the certificate is larger than {MAX_CERTIFICATE_BYTES} bytes")
    try:
        data = json.loads(
            text, object_pairs_hook=_no_duplicate_keys, parse_float=_finite_float, parse_constant=_no_constant
        )
    except json.JSONDecodeError as e:
        raise _StructureError(
            f"the certificate is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
        ) from None
    except RecursionError:
        raise _StructureError(f"the certificate is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise _StructureError(f"the certificate is not valid JSON: {str(e)[:120]}") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise _StructureError(f"the certificate is nested more than {MAX_JSON_DEPTH} levels deep")
    if not isinstance(data, dict):
        raise _StructureError("the certificate must be a JSON object")
    return data


def _depth(x) -> int:
    deepest, stack = 0, [(x, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if d > MAX_JSON_DEPTH:
            break
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
    return deepest


def _text_of(doc) -> str:
    """JSON text of what the caller passed: a ``Path`` is a file, a ``str``/``bytes`` is JSON text."""
    if isinstance(doc, Certificate):
        return doc.model_dump_json()
    if isinstance(doc, dict):
        try:
            return json.dumps(doc, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as e:
            raise _StructureError(f"the certificate is not JSON data: {str(e)[:120]}") from None
    if isinstance(doc, os.PathLike):
        return read_certificate_file(doc)
    if isinstance(doc, (bytes, bytearray)):
        if len(doc) > MAX_CERTIFICATE_BYTES:
            raise _StructureError(f"the certificate is larger than {MAX_CERTIFICATE_BYTES} bytes")
        try:
            return bytes(doc).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _StructureError(f"the certificate is not UTF-8 text (byte {e.start})") from None
    if isinstance(doc, str):
        if not doc.lstrip().startswith("{"):
            raise _StructureError(
                "the certificate text is not a JSON object (a str is JSON text; to verify a file pass a pathlib.Path)"
            )
        return doc
    raise _StructureError(
        f"cannot verify a {type(doc).__name__}: pass a Certificate, a dict, JSON text or a pathlib.Path"
    )


def _version_problem(v: Any) -> str | None:
    if not isinstance(v, str) or not _VERSION.fullmatch(v):
        return f"unknown certificate schema version {str(v)[:40]!r}; this dpspec reads {SCHEMA_VERSION}"
    major, minor = v.split(".")
    mine_major, mine_minor = SCHEMA_VERSION.split(".")
    if major != mine_major:
        return (
            f"certificate schema version {v} is not readable by this dpspec (it reads {mine_major}.x); "
            f"verify it with the dpspec version that wrote it"
        )
    if int(minor) > int(mine_minor):
        return f"certificate schema version {v} is newer than this dpspec's {SCHEMA_VERSION}; upgrade dpspec"
    return None


#: result fields added by each schema minor version: an older version's certificate cannot hold them
RESULT_FIELDS_SINCE = {"1.1": ("accounting",)}


def _fields_newer_than(cert: Certificate) -> str | None:
    """Why ``cert`` cannot be of the schema version it states (a field a later version added), or None.
    A certificate is read as the version it claims; older ones are genuine when their content is."""
    minor = int(cert.schema_version.split(".")[1])
    for version, fields in RESULT_FIELDS_SINCE.items():
        if minor >= int(version.split(".")[1]):
            continue
        for r in cert.results:
            for f in fields:
                if getattr(r, f, None) is not None:
                    return (
                        f"result {r.name!r} has `{f}`, which schema version {version} added, but the certificate "
                        f"states version {cert.schema_version}"
                    )
    return None


def load_strict(doc) -> Certificate:
    """Steps 1–2: read ``doc`` and check its structure. Raises ``CertificateReadError`` or
    ``_StructureError`` (one-line reasons); the Certificate returned is complete and canonical."""
    text = _text_of(doc)
    data = parse_certificate_json(text)
    if data.get("kind") == "run":
        raise _RunCertificate(data)
    vp = _version_problem(data.get("schema_version"))
    if vp:
        raise _StructureError(vp)
    try:
        cert = Certificate.model_validate_json(text, strict=True)
    except ValidationError as e:
        first = e.errors()[0]
        loc = _location(data, first["loc"])
        raise _StructureError(
            f"the certificate does not match the schema: {loc}: {first['msg']} ({e.error_count()} problem(s))"
        ) from None
    canonical = json.loads(cert.model_dump_json())
    diff = _structure_difference(data, canonical, "")
    if diff:
        raise _StructureError(diff)
    newer = _fields_newer_than(cert)
    if newer:
        raise _StructureError(newer)
    counts = Counter(r.name for r in cert.results)
    dup = sorted(n for n, k in counts.items() if k > 1)[:5]
    if dup:
        raise _StructureError(
            f"result name(s) {', '.join(repr(n) for n in dup)} appear more than once; a certificate "
            "lists each release, training and composition exactly once"
        )
    return cert


class _RunCertificate(Exception):
    def __init__(self, data: dict):
        self.data = data


def _location(data, loc) -> str:
    """A readable location; result indices are shown with the result's name."""
    parts: list[str] = []
    node = data
    for x in loc:
        if isinstance(x, int) and isinstance(node, list) and 0 <= x < len(node):
            node = node[x]
            name = node.get("name") if isinstance(node, dict) else None
            parts[-1:] = [f"{parts[-1] if parts else ''}[{name if isinstance(name, str) else x}]"]
            continue
        parts.append(str(x))
        node = node.get(x) if isinstance(node, dict) else None
    return ".".join(parts)[:200]


def _structure_difference(doc, canonical, path: str) -> str | None:
    """The first place where the document is not the canonical serialisation of its model."""
    if isinstance(canonical, dict):
        if not isinstance(doc, dict):
            return f"{path or 'the certificate'}: not an object"
        missing = [k for k in canonical if k not in doc]
        if missing:
            return f"{path + '.' if path else ''}{missing[0]}: required field missing"
        extra = [k for k in doc if k not in canonical]
        if extra:
            return f"{path + '.' if path else ''}{extra[0]}: unknown field"
        for k in canonical:
            d = _structure_difference(doc[k], canonical[k], f"{path}.{k}" if path else k)
            if d:
                return d
        return None
    if isinstance(canonical, list):
        if not isinstance(doc, list) or len(doc) != len(canonical):
            return f"{path}: not in canonical form"
        for i, (a, b) in enumerate(zip(doc, canonical)):
            d = _structure_difference(a, b, f"{path}[{i}]")
            if d:
                return d
        return None
    if (
        type(doc) is bool
        or type(canonical) is bool
        or isinstance(doc, str)
        or isinstance(canonical, str)
        or doc is None
        or canonical is None
    ):
        return None if (type(doc) is type(canonical) and doc == canonical) else f"{path}: not in canonical form"
    return None if doc == canonical else f"{path}: {doc!r} is not exactly representable as {canonical!r}"


# --- the checks -----------------------------------------------------------------------------------


def verify(
    doc, *, raise_on_error: bool = True, data: dict | None = None, trust_code: bool = False, original=None
) -> VerifyReport:
    """Verify a certificate: a ``Certificate``, a dict, JSON text (``str``/``bytes``) or a file
    (``pathlib.Path``; a ``str`` is always text, never a path). Raises ``VerificationError`` on failure
    unless ``raise_on_error=False``; the report lists every problem found. ``data`` binds the datasets a
    spec names with ``dataset(name)`` (as for ``dpspec.compile``). ``trust_code=True`` lets the
    recompilation import and run the user code the embedded spec names (``sampler``/``callable``);
    without it such a certificate fails verification. ``original``: for a run certificate, the
    certificate it spends (default: the one embedded in it)."""
    rep = VerifyReport()
    try:
        _verify(doc, rep, data, trust_code, original)
    except Exception as e:  # a bug must still give a failing report, never a verified one or a traceback
        rep.fail(
            f"internal error while verifying ({type(e).__name__}: {str(e)[:200]}); the certificate is "
            "NOT verified — this is a bug in dpspec, please report it"
        )
    return _finish(rep, raise_on_error)


def _verify(doc, rep: VerifyReport, data, trust_code: bool, original=None) -> None:
    cert = load_structure(doc, rep, data=data, trust_code=trust_code, original=original)
    if cert is None:
        return
    from dpspec.progress import progress

    with progress(total=3, desc="verify", unit="stage") as bar:
        _formula_texts(cert, rep)
        clean = _recompile(cert, rep, data, trust_code)
        bar.update()
        _formulas(cert, rep, clean)
        bar.update()
        _family_checks(cert, rep, clean)
        _execution_checks(cert, rep)
        bar.update()


def load_structure(doc, rep: VerifyReport, *, data=None, trust_code: bool = False, original=None) -> Certificate | None:
    """Steps 1–3 (read, strict structure, content hash, spec hash) into ``rep``: the certificate if it
    is well formed, else None. Nothing is recomputed: ``dpspec explain --no-verify`` stops here.
    A run certificate is verified in full by its own module and None is returned."""
    try:
        cert = load_strict(doc)
    except (CertificateReadError, _StructureError) as e:
        rep.fail(str(e))
        return None
    except _RunCertificate as r:
        _verify_run(r.data, rep, data, trust_code, original)
        return None
    rep.certificate = cert
    rep.checks.append("structure: strict schema, no duplicate or unknown keys, every field present, unique names")
    if cert.content_hash != content_hash(cert):
        rep.fail("content_hash does not match the content: the certificate was edited after it was issued")
    else:
        rep.checks.append("content hash matches")
    if cert.spec.sha256 != sha256_text(cert.spec.canonical_text):
        rep.fail("the embedded spec text does not match its sha256")
    else:
        rep.checks.append("spec text matches its sha256")
    return cert


def _verify_run(doc: dict, rep: VerifyReport, data, trust_code: bool, original=None) -> None:
    """Run certificates (top-level ``"kind": "run"``, already read strictly) are verified by
    :func:`verify_run` against their original certificate, which is verified in full here."""
    rrep = verify_run(doc, original, data=data, raise_on_error=False, trust_code=trust_code)
    rep.checks.extend(rrep.checks)
    for p in rrep.problems:
        rep.fail(p)


def _execution_checks(cert: Certificate, rep: VerifyReport) -> None:
    """The recorded execution target is well formed (the recompilation above already checked that
    it is the spec's and that every privacy number was computed without it)."""
    for r in cert.results:
        e = r.execution
        if e is None:
            continue
        if e.target == "distributed" and (e.workers < 1 or e.backend not in ("gloo", "nccl")):
            rep.fail(
                f"{r.name}: execution target distributed(workers = {e.workers}, backend = {e.backend}) "
                "is not a valid target"
            )
        elif r.kind != "train":
            rep.fail(f"{r.name}: an execution target is recorded on a {r.kind} result")
        else:
            rep.checks.append(
                f"{r.name}: execution target {e.target}({e.workers} × {e.backend}) recorded; "
                "the privacy analysis does not depend on it"
            )


def _finish(rep: VerifyReport, raise_on_error: bool) -> VerifyReport:
    if not rep.ok and raise_on_error:
        raise VerificationError(rep)
    return rep


# --- recompilation --------------------------------------------------------------------------------


def _recompile(cert: Certificate, rep: VerifyReport, data: dict | None, trust_code: bool) -> set[str]:
    """Compile the embedded spec again (code hooks off unless trusted) and compare every result,
    direction-aware. Returns the names of the results that compared equal."""
    from dpspec.compiler.compile import compile_spec
    from dpspec.compiler.hooks import CodeHookRefused, code_hooks, find_hooks
    from dpspec.diagnostics import SpecError, render_all
    from dpspec.frontend import loads
    from dpspec.parse.parser import parse_text

    tree, _diags = parse_text(cert.spec.canonical_text, cert.spec.source_name)
    if tree is not None and tree.uses:
        rep.fail(
            f'the embedded spec includes other files (`use "{tree.uses[0].path[:80]}"`); a certificate\'s spec '
            "is self-contained, and verify reads no file a certificate names"
        )
        return set()
    spec = loads(cert.spec.canonical_text, name=cert.spec.source_name)
    if not spec.ok:
        rep.fail("the embedded spec no longer compiles:\n" + render_all(spec.diagnostics, spec.sources))
        return set()
    hooks = find_hooks(spec.ir)
    if hooks and not trust_code:
        h = hooks[0]
        where = f" (spec line {h.line})" if h.line else ""
        rep.fail(
            f'the embedded spec runs user code: {h.construct}("{h.target[:80]}"){where}'
            + (f" and {len(hooks) - 1} more" if len(hooks) > 1 else "")
            + "; verify runs no code named by a certificate — rerun with --trust-code (trust_code=True) only "
            "if you trust the certificate's author and have reviewed that code"
        )
        return set()
    if spec.canonical_text() != cert.spec.canonical_text:
        rep.fail("the embedded spec text is not in the canonical form dpspec writes (edited after compiling?)")
        return set()
    from dpspec.compiler.common import CERTIFIED_SIGMA

    # calibrated σ's as recorded: a family whose search is expensive recomputes at that σ (every number
    # is still recomputed and compared, and must meet the target there)
    recorded = {
        r.name: r.mechanism.parameters.get("noise_multiplier")
        for r in cert.results
        if r.mechanism.calibrated and isinstance(r.mechanism.parameters.get("noise_multiplier"), float)
    }
    token = CERTIFIED_SIGMA.set(recorded)
    try:
        with code_hooks(trust_code):
            fresh = compile_spec(spec, data=data)
    except SpecError as e:
        rep.fail("the embedded spec no longer compiles:\n" + render_all(e.diagnostics, e.sources))
        return set()
    except CodeHookRefused as e:  # defence in depth: find_hooks should have seen it
        rep.fail(f"the embedded spec runs user code `{e.target[:80]}`; rerun with --trust-code to allow it")
        return set()
    finally:
        CERTIFIED_SIGMA.reset(token)
    if hooks:
        rep.checks.append(f"code hooks run (trusted): {', '.join(h.target for h in hooks)}")
    old = [r.name for r in cert.results]
    new = [r.name for r in fresh.certificate.results]
    if old != new:
        rep.fail(f"the certificate lists results {_names(old)} but the spec defines {_names(new)}")
        return set()
    clean: set[str] = set()
    for rec, re_ in zip(cert.results, fresh.certificate.results):
        diffs: list[str] = []
        _compare(
            rec.model_dump(mode="json"), re_.model_dump(mode="json"), (), diffs, {f.name: f.check for f in re_.formulas}
        )
        for d in diffs[:MAX_LISTED_DIFFERENCES]:
            rep.fail(f"{rec.name}: {d}")
        if len(diffs) > MAX_LISTED_DIFFERENCES:
            rep.fail(f"{rec.name}: … and {len(diffs) - MAX_LISTED_DIFFERENCES} more differences")
        if not diffs:
            clean.add(rec.name)
            rep.checks.append(
                f"{rec.name}: all numbers recomputed; bounds equal or rounded up by at most "
                f"{REL_TOL:g}, everything else equal"
            )
    if fresh.certificate.tool.version != cert.tool.version:
        rep.checks.append(
            f"note: issued by dpspec {cert.tool.version[:40]!r}, verified with {fresh.certificate.tool.version}"
        )
    return clean


def _names(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(repr(n[:60]) for n in names[:limit])
    return f"[{shown}{f', … ({len(names)} in all)' if len(names) > limit else ''}]"


#: mechanism parameters that are privacy-loss-like bounds or noise scales: may only be rounded up
UP_PARAMETERS = frozenset(
    {
        "sigma",
        "sigma2",
        "noise_multiplier",
        "noise_std",
        "amp_sigma",
        "noise_multiplier_first",
        "gradient_noise_std_first",
        "gradient_noise_std_max",
        "gradient_noise_std_min",
        "mu",
        "sensitivity",
        "node_sensitivity",
        "sensitivity_psi",
        "delta_bar2",
        "delta_star2",
        "h_total",
        "discrepancy_cap",
        "failure_probability",
        "overflow_probability",
    }
)


def _rounded_up() -> frozenset[str]:
    """The formulas checked "close" whose value is a noise scale or a loss cap (may only be rounded up): each
    family's ``ROUNDED_UP`` (:func:`dpspec.compiler.formulas.rounded_up`)."""
    from dpspec.compiler import formulas as F

    return F.rounded_up()


def direction(path: tuple, formula_checks: dict[str, str] | None = None, formula_names: list | None = None) -> str:
    """How the number at ``path`` (inside one result) may differ from its recomputed value."""
    p = [x for x in path if not isinstance(x, int)]
    if p[:1] == ["guarantee"] and p[1:] in (
        ["epsilon"],
        ["delta"],
        ["rdp_epsilons"],
        ["dp", "epsilon"],
        ["dp", "delta"],
    ):
        return UP
    if p == ["numerics", "abs_error_bound"]:
        return UP
    if p[:1] == ["accounting"] and p[1:] in (
        ["candidates", "epsilon"],
        ["curve", "epsilon"],
        ["gdp_mu"],
        ["pld", "delta_error"],
    ):
        return UP
    if p[:3] == ["accounting", "pld", "by_direction"] and isinstance(path[-1], int) and path[-1] == 1:
        return UP
    if p[:2] == ["mechanism", "parameters"] and len(p) == 3 and (p[2] in UP_PARAMETERS or p[2].startswith("epsilon_")):
        return UP
    if p[:1] == ["sensitivity"] and p[1:] in (["deltas"], ["instance_deltas"]):
        return UP
    if p[:1] == ["formulas"] and p[1:] in (["value"], ["checks"]) and formula_names is not None:
        name = formula_names[path[1]] if isinstance(path[1], int) and path[1] < len(formula_names) else None
        kind = (formula_checks or {}).get(name) if name is not None else None
        if p[1:] == ["checks"] and path[-1] == 0:  # the order α of a check
            return EXACT
        if kind == "upper_bound" or name in _rounded_up():
            return UP
    return EXACT


def _compare(a, b, path: tuple, out: list[str], formula_checks: dict[str, str], formula_names=None) -> None:
    """Recorded ``a`` against recomputed ``b`` (JSON dumps of one result)."""
    if not path and isinstance(b, dict):
        formula_names = [f.get("name") for f in b.get("formulas", [])]
    where = _path_text(path)
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(
                    f"{_path_text(path + (k,))}: present on one side only ({'recorded' if k in a else 'recomputed'})"
                )
            else:
                _compare(a[k], b[k], path + (k,), out, formula_checks, formula_names)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items recorded, {len(b)} recomputed")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, path + (i,), out, formula_checks, formula_names)
    elif _is_number(a) and _is_number(b):
        if not (_is_float(a) and _is_float(b)):
            problem = None if (a == b and type(a) is type(b)) else "must be equal (not a double)"
        elif direction(path, formula_checks, formula_names) == UP:
            problem = up_problem(float(a), float(b))
        else:
            problem = None if (a == b and type(a) is type(b)) else "must be equal"
        if problem:
            out.append(f"{where}: recorded {a!r}, recomputed {b!r} — {problem}")
    elif type(a) is not type(b) or a != b:
        sa, sb = str(a), str(b)
        out.append(f"{where}: recorded {sa[:80]!r}, recomputed {sb[:80]!r}")


def up_problem(recorded: float, recomputed: float) -> str | None:
    """A bound or noise scale may be recorded equal to or above its recomputed value by rounding
    (relative REL_TOL); below it never."""
    if not (math.isfinite(recorded) and math.isfinite(recomputed)):
        return None if recorded == recomputed else "not finite"
    if recorded < recomputed:
        return (
            "recorded BELOW the recomputed value (a bound may only be rounded up: the certificate overstates privacy)"
        )
    if recorded > recomputed + REL_TOL * abs(recomputed):
        return f"recorded above the recomputed value by more than rounding (relative {REL_TOL:g})"
    return None


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_float(x) -> bool:
    """A number a double represents (an integer beyond ±1.8e308 is not)."""
    return isinstance(x, float) or (isinstance(x, int) and abs(x) < 2**1023)


def _path_text(path: tuple) -> str:
    out = ""
    for x in path:
        out += f"[{x}]" if isinstance(x, int) else (f".{x}" if out else str(x))
    return out


# --- independent re-evaluation ----------------------------------------------------------------------


def _formula_texts(cert: Certificate, rep: VerifyReport) -> None:
    """Every formula must be one the compiler emits, with the compiler's text and LaTeX for that name
    (the text is compared, never parsed)."""
    from dpspec.compiler import formulas as F

    for r in cert.results:
        for f in r.formulas:
            text = F.known_text(f.name)
            if text is None:
                rep.fail(f"{r.name}: formula {f.name[:60]!r} is not a formula dpspec emits")
            elif f.sympy != text:
                rep.fail(
                    f"{r.name}: formula {f.name}: its text is not dpspec's own formula for that name "
                    f"(recorded {f.sympy[:60]!r}); formula text from a certificate is never evaluated"
                )
            elif f.latex != F.latex(f.name):
                rep.fail(f"{r.name}: formula {f.name}: its LaTeX is not dpspec's rendering of the formula")


def _formulas(cert: Certificate, rep: VerifyReport, clean: set[str]) -> None:
    """Re-evaluate the compiler's formulas at the recorded variables (only for results whose numbers
    recompiled equal, so the inputs are the compiler's own and the work is bounded)."""
    import mpmath as mp

    from dpspec.compiler import formulas as F

    for r in cert.results:
        if r.name not in clean:
            continue
        tol_abs = r.numerics.abs_error_bound
        for f in r.formulas:
            if F.known_text(f.name) != f.sympy:
                continue
            try:
                for alpha, recorded in f.checks:
                    a = int(alpha) if float(alpha).is_integer() else alpha
                    exact = F.evaluate(f.name, {**f.variables, "alpha": a})
                    _bound_check(rep, r.name, f.name, f"α = {alpha:g}", recorded, exact, tol_abs)
                if f.value is None:
                    continue
                exact = F.evaluate(f.name, f.variables)
                if f.name == "delta_of_epsilon":
                    target = r.guarantee.delta
                    if target is not None and exact > mp.mpf(target):
                        rep.fail(
                            f"{r.name}: δ(ε) re-evaluated = {float(exact):.6g} exceeds the certified δ = {target:g}"
                        )
                    else:
                        rep.checks.append(f"{r.name}: {f.name} re-evaluated with sympy ({float(exact):.4g} ≤ δ)")
                elif f.check == "close" and f.name not in _rounded_up():
                    if abs(mp.mpf(f.value) - exact) > REL_TOL * abs(exact):
                        rep.fail(f"{r.name}: {f.name}: recorded {f.value!r}, re-evaluated {float(exact)!r}")
                    else:
                        rep.checks.append(f"{r.name}: {f.name} re-evaluated with sympy")
                else:
                    _bound_check(
                        rep, r.name, f.name, "value", f.value, exact, tol_abs if f.check == "upper_bound" else 0.0
                    )
            except F.FormulaError as e:
                rep.checks.append(
                    f"note: {r.name}: formula {f.name} not re-evaluated: {e} (its numbers were recomputed above)"
                )


def _family_checks(cert: Certificate, rep: VerifyReport, clean: set[str]) -> None:
    """The family's own independent re-check of each result that recompiled equal (``Family.reverify``
    in :mod:`dpspec.families`, e.g. the SWM guarantee from the recorded Δ with mpmath). The mechanism
    name only selects a registered family; nothing named by the certificate is imported or run."""
    from dpspec.families import family
    from dpspec.families.hooks import load_hook

    for r in cert.results:
        f = family(r.mechanism.name)
        if f is None or not f.reverify or r.name not in clean:
            continue
        load_hook(f.reverify, "reverify")(r, rep.fail, lambda *a: _bound_check(rep, *a), REL_TOL)


def _bound_check(rep, name, fname, where, recorded, exact, tol_abs):
    """``recorded`` must not be below ``exact`` (known to EXACT_REL_ERROR), nor above it by more than the
    stated error bound plus rounding."""
    import mpmath as mp

    rec = mp.mpf(recorded)
    if rec < exact - EXACT_REL_ERROR * abs(exact):
        rep.fail(
            f"{name}: {fname} at {where}: recorded {recorded!r} is BELOW the exact value {float(exact)!r} "
            "(the certificate overstates privacy)"
        )
    elif rec > exact + tol_abs + REL_TOL * max(1, abs(exact)):
        rep.fail(
            f"{name}: {fname} at {where}: recorded {recorded!r} differs from the exact value {float(exact)!r} "
            f"by more than the stated error bound {tol_abs:g}"
        )
    else:
        rep.checks.append(f"{name}: {fname} at {where} re-evaluated with sympy/mpmath")


# --- run certificates ------------------------------------------------------------------------------
#
# What a stopped (or finished) run spent of its certificate (the document: dpspec.certificate.run_record;
# writing one: dpspec.certificate.run). Verified against the original certificate, which is verified in
# full by ``verify`` above.


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


class RunVerificationError(DpspecError):
    def __init__(self, report: RunVerifyReport):
        self.report = report
        super().__init__("run certificate verification failed:\n" + "\n".join(f"- {p}" for p in report.problems))


def _load_json(doc, what: str) -> tuple[dict | None, str | None]:
    """Read strictly, as ``dpspec verify`` reads a certificate: a ``Path`` is a bounded regular file, a
    ``str``/``bytes`` is JSON text (never a path); duplicate keys, NaN and out-of-range numbers refused."""
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


def _close(a: float, b: float) -> bool:  # REL_TOL as for a certificate
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= REL_TOL * max(abs(a), abs(b)))


def _label(p: SpentPoint) -> str:
    return f"δ = {p.delta:g}" if p.delta is not None else f"α = {p.alpha:g}"


def verify_run(
    doc, certificate=None, *, data: dict | None = None, raise_on_error: bool = True, trust_code: bool = False
) -> RunVerifyReport:
    """Verify a run certificate (dict, JSON text or path) against its original certificate (``certificate``:
    a model, dict, JSON text or path; default: the embedded one). See the module docstring."""
    rep = RunVerifyReport()
    d, err = _load_json(doc, "run certificate")
    if err:
        rep.fail(err)
        return _finish_run(rep, raise_on_error)
    assert d is not None  # (a document, or the reason there is none)
    if d.get("kind") != "run":
        rep.fail('not a run certificate (no top-level "kind": "run")')
        return _finish_run(rep, raise_on_error)
    if d.get("schema_version") != RUN_SCHEMA_VERSION:
        rep.fail(
            f"unknown run certificate schema version {d.get('schema_version')!r}; this dpspec reads "
            f"{RUN_SCHEMA_VERSION}"
        )
        return _finish_run(rep, raise_on_error)
    try:
        rc = RunCertificate.model_validate(d, strict=True)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        rep.fail(f"the run certificate does not match its schema: {loc}: {first['msg']} ({e.error_count()} problem(s))")
        return _finish_run(rep, raise_on_error)
    rep.run = rc
    if rc.content_hash != run_content_hash(rc):
        rep.fail("content_hash does not match the content: the run certificate was edited after it was written")
    else:
        rep.checks.append("run certificate: content hash matches")
    found = _original(rc, certificate, rep)
    if found is None:
        return _finish_run(rep, raise_on_error)
    _check_against(rc, found, rep, data, trust_code)
    return _finish_run(rep, raise_on_error)


def _original(rc: RunCertificate, certificate, rep: RunVerifyReport):
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
        rep.fail(
            "the original certificate is needed: pass it (dpspec verify RUN.json --certificate CERT.json) or "
            "write the run certificate with it embedded (--embed)"
        )
        return None
    certs = []
    for where, c in docs:
        try:
            certs.append(Certificate.model_validate(c))
        except ValidationError as e:
            first = e.errors()[0]
            rep.fail(
                f"the {where} original certificate does not match the certificate schema: "
                f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}"
            )
            return None
    hashes = {c.content_hash for c in certs}
    if len(hashes) > 1:
        rep.fail("the given certificate and the embedded one differ")
        return None
    cert = certs[0]
    if cert.content_hash != rc.certificate.content_hash:
        rep.fail(
            f"the run certificate spends {rc.certificate.content_hash}, not the certificate given ({cert.content_hash})"
        )
        return None
    rep.checks.append(f"original certificate: {cert.content_hash} ({rc.certificate.source_name})")
    return cert, docs[0][1]  # the model, and the document as given (verified strictly, not re-serialised)


def _check_against(
    rc: RunCertificate, found, rep: RunVerifyReport, data: dict | None, trust_code: bool = False
) -> None:
    original, document = found
    orep = verify(document, raise_on_error=False, data=data, trust_code=trust_code)
    if not orep.ok:
        for problem in orep.problems:
            rep.fail(f"original certificate: {problem}")
        return
    rep.checks.append("original certificate verifies (spec compiled again, every number recomputed)")
    record = next((r for r in original.results if r.name == rc.target), None)
    if record is None:
        rep.fail(f"the original certificate has no target `{rc.target}`")
        return
    if record.mechanism.name != rc.mechanism or record.notion.name != rc.notion:
        rep.fail(
            f"`{rc.target}` is a {record.mechanism.name} ({record.notion.name}) in the certificate, not "
            f"{rc.mechanism} ({rc.notion})"
        )
        return
    try:
        mech = _compiled_mechanism(original, rc.target, data)
    except KeyError:
        rep.fail(f"`{rc.target}` has no runtime object with a privacy ledger")
        return
    led = mech.ledger
    if rc.budget_steps != led.budget_steps or rc.unit != led.unit:
        rep.fail(
            f"budget: the run certificate says {rc.budget_steps} {rc.unit}(s), the certificate covers "
            f"{led.budget_steps} {led.unit}(s)"
        )
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
            rep.fail(
                f"certified ε at {_label(c)}: recorded {c.epsilon!r}, the certificate states "
                f"{want[(c.delta, c.alpha)]!r}"
            )
    for p in rc.spent:
        s = led.spent_at(rc.steps_taken, p.delta)
        if p.epsilon < s.epsilon * (1 - 1e-12):
            rep.fail(
                f"ε spent at {_label(p)}: recorded {p.epsilon!r} is BELOW the recomputed {s.epsilon!r} "
                "(the run certificate understates what was spent)"
            )
        elif not _close(p.epsilon, s.epsilon):
            rep.fail(f"ε spent at {_label(p)}: recorded {p.epsilon!r}, recomputed {s.epsilon!r}")
        elif p.epsilon > want[(p.delta, p.alpha)] * (1 + 1e-12):
            rep.fail(f"ε spent at {_label(p)} ({p.epsilon!r}) exceeds the certificate's {want[(p.delta, p.alpha)]!r}")
        else:
            rep.checks.append(
                f"{rc.target}: ε spent at {_label(p)} recomputed ({p.epsilon:.6g} ≤ "
                f"{want[(p.delta, p.alpha)]:.6g} certified) with the certificate's accountant"
            )
        if s.exact_for_run != rc.exact_for_run:
            rep.fail(f"exact_for_run: recorded {rc.exact_for_run}, the mechanism's ledger says {s.exact_for_run}")
    # the descriptive fields are the ledger's own words too: a verified run certificate carries no text
    # its accountant did not write (a forged `note` or `accountant` would otherwise be sealed as verified)
    last = led.spent_at(rc.steps_taken, rc.spent[-1].delta) if rc.spent else None
    if last is not None:
        for name, recorded, recomputed in (
            ("accountant", rc.accountant, last.accountant),
            ("note", rc.note, last.note),
        ):
            if recorded != recomputed:
                rep.fail(f"{name}: recorded {recorded!r}, the certificate's accountant writes {recomputed!r}")


def _finish_run(rep: RunVerifyReport, raise_on_error: bool) -> RunVerifyReport:
    if not rep.ok and raise_on_error:
        raise RunVerificationError(rep)
    return rep
