"""``dpspec.audit.audit``: run every registered auditor on a compiled spec or a certificate."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from dpspec.errors import DpspecError

from .base import AUDITORS, AuditContext, AuditResult, AuditTarget, SkippedTarget, run_target, skipped

__all__ = ["audit", "AuditReport", "AuditError", "load_subject"]


class AuditError(DpspecError, ValueError):
    """The subject cannot be audited (not a certificate, does not verify, unknown target, …)."""


@dataclass
class AuditReport:
    """Audit results, one per audited certificate entry (skipped entries say why)."""

    results: list[AuditResult] = field(default_factory=list)
    seed: int = 0
    confidence: float = 0.95
    spec: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no audited entry shows ε_lower > certified ε."""
        return not any(r.violation for r in self.results)

    @property
    def violations(self) -> list[AuditResult]:
        return [r for r in self.results if r.violation]

    def __getitem__(self, name: str) -> AuditResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {"spec": self.spec, "seed": self.seed, "confidence": self.confidence, "ok": self.ok,
                "seconds": self.seconds, "results": [r.to_dict() for r in self.results]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=_json_default)

    def rows(self) -> list[list[str]]:
        out = []
        for r in self.results:
            name = r.label or r.name
            if r.status == "skipped":
                out.append([name, r.mechanism, "—", "—", "—", "skipped", r.note])
                continue
            out.append([name, r.mechanism, f"{r.delta:g}", _num(r.epsilon_certified), _num(r.epsilon_lower),
                        r.status, f"{r.trials_evaluation}/side, {r.statistic}"])
        return out

    def to_text(self) -> str:
        head = ["target", "mechanism", "δ", "certified ε", f"ε ≥ ({self.confidence:.0%})", "verdict", "details"]
        lines = _table(head, self.rows())
        for r in self.results:
            if r.status == "skipped":
                continue
            lines.append(f"  {r.label or r.name}: {r.neighbours}")
            if r.note:
                lines.append(f"    note: {r.note}")
            if r.ceiling is not None:
                lines.append(f"    ceiling of this sample size: ε_lower ≤ {r.ceiling:.3g}; notion: {r.notion}")
        lines.append("verdict: " + ("no violation found" if self.ok else
                                    f"{len(self.violations)} VIOLATION(S): the mechanism leaks more than certified"))
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        head = ["target", "mechanism", "δ", "certified ε", f"audited ε lower bound ({self.confidence:.0%})",
                "verdict", "details"]
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in self.rows():
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        return "\n".join(out) + "\n"


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def _num(x) -> str:
    if x is None:
        return "—"
    return f"{x:.4g}" if math.isfinite(x) else str(x)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    widths[-1] = len(head[-1])
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(head)] + [fmt(r) for r in rows]


def load_subject(subject, *, data: dict | None = None, check: bool = True):
    """A ``Compiled`` for a Compiled, a Spec, a certificate (model, dict, JSON text or path).

    A certificate is re-verified (``dpspec.verify``) and its embedded spec compiled again to obtain
    the runtime mechanisms; an edited or stale certificate is refused."""
    from dpspec.compiler.compile import Compiled, compile_spec
    from dpspec.frontend import Spec, loads

    if isinstance(subject, Compiled):
        return subject
    if isinstance(subject, Spec):
        return compile_spec(subject, data=data)
    from dpspec.certificate.model import Certificate
    from dpspec.certificate.verify import verify

    if isinstance(subject, (str, Path)) and not str(subject).lstrip().startswith("{") and \
            str(subject).endswith(".dps"):
        from dpspec.frontend import load

        return compile_spec(load(Path(subject), name=str(subject)), data=data)
    if isinstance(subject, str) and not subject.lstrip().startswith("{"):
        subject = Path(subject)  # verify reads a str as JSON text, a Path as a file
    rep = verify(subject, raise_on_error=False, data=data) if check else None
    if rep is not None and getattr(rep, "run", None) is not None:
        raise AuditError("this is a run certificate (what one run spent); audit the certificate it names")
    if rep is not None and not rep.ok:
        raise AuditError("the certificate does not verify, so its mechanisms cannot be rebuilt:\n"
                         + "\n".join(f"- {p}" for p in rep.problems))
    cert = rep.certificate if rep is not None else (
        subject if isinstance(subject, Certificate) else Certificate.model_validate_json(
            subject if isinstance(subject, str) and subject.lstrip().startswith("{") else
            Path(subject).read_text(encoding="utf-8")))
    spec = loads(cert.spec.canonical_text, name=cert.spec.source_name)
    compiled = compile_spec(spec, data=data)
    # audit against the numbers of the certificate given, not the fresh compile (they verified equal)
    compiled.certificate = cert
    return compiled


def _targets_for(ctx: AuditContext) -> list[AuditTarget] | str:
    factory = AUDITORS.get(ctx.record.mechanism.name)
    if factory is None:
        return f"no auditor is registered for mechanism `{ctx.record.mechanism.name}`"
    out = factory(ctx)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def audit(subject, *, mechanisms: dict[str, Any] | None = None, targets: Iterable[str] | None = None,
          trials: int | None = None, seed: int = 0, confidence: float = 0.95, delta: float | None = None,
          selection_fraction: float = 0.2, options: dict[str, dict] | None = None, data: dict | None = None,
          progress: Callable[[str], None] | None = None, runtime: bool = True) -> AuditReport:
    """Empirically lower-bound the privacy loss of every release/training in ``subject``.

    ``subject``: a ``Compiled``, a ``Spec``, a ``.dps`` path, or a certificate (model, dict, JSON
    text or path; it is verified and its spec recompiled to obtain the mechanisms).
    ``mechanisms``: replace runtime objects by name (e.g. a mutated mechanism for a power check);
    the certificate's numbers stay those of ``subject``. ``targets``: audit only these names.
    ``trials``: outputs per neighbour (default: per mechanism); ``selection_fraction`` of them
    choose the test, the rest evaluate it. ``confidence``: of the one-sided Clopper–Pearson bound.
    ``delta``: the δ at which ε is bounded (default: the certificate's). ``options``: per target
    name or mechanism name, e.g. ``{"dpsgd": {"steps": 4, "canary_scale": 10}}``. ``runtime``: also
    run the runtime audits of each training (:mod:`dpspec.audit.runtime`: normaliser, non-finite
    gradients, step budget, per-batch caps).

    Returns an :class:`AuditReport`; ``report.ok`` is False iff some ε_lower exceeds the
    certified ε (a violation at the given confidence)."""
    t0 = time.perf_counter()
    compiled = load_subject(subject, data=data)
    mechanisms = dict(mechanisms or {})
    wanted = set(targets) if targets is not None else None
    options = options or {}
    known = {r.name for r in compiled.certificate.results}
    if wanted is not None and wanted - known:
        raise AuditError(f"no target named {', '.join(sorted(wanted - known))}; the certificate has "
                         f"{', '.join(sorted(known))}")
    unknown = set(mechanisms) - known
    if unknown:
        raise AuditError(f"mechanisms given for unknown target(s) {', '.join(sorted(unknown))}")
    report = AuditReport(seed=seed, confidence=confidence, spec=compiled.certificate.spec.source_name)
    from dpspec.progress import progress as bar

    for i, rec in enumerate(bar(compiled.certificate.results, desc="audit", unit="target")):
        if wanted is not None and rec.name not in wanted:
            continue
        if rec.kind == "compose":
            report.results.append(skipped(rec.name, "composition", "a composition is audited through its parts"))
            continue
        tgt = compiled.targets.get(rec.name)
        mech = mechanisms.get(rec.name, tgt.mechanism if tgt is not None else None)
        if mech is None:
            report.results.append(skipped(rec.name, rec.mechanism.name, "no runtime mechanism object"))
            continue
        opts = {**options.get(rec.mechanism.name, {}), **options.get(rec.name, {})}
        if not runtime:
            opts["runtime"] = False
        ctx = AuditContext(rec.name, rec, mech, compiled, opts, delta, data)
        if progress:
            progress(f"auditing {rec.name} ({rec.mechanism.name})")
        try:
            tlist = _targets_for(ctx)
        except AuditError as e:
            report.results.append(skipped(rec.name, rec.mechanism.name, str(e)))
            continue
        if isinstance(tlist, str):
            report.results.append(skipped(rec.name, rec.mechanism.name, tlist))
            continue
        for j, t in enumerate(tlist):
            if isinstance(t, SkippedTarget):
                report.results.append(skipped(rec.name, rec.mechanism.name, t.reason, t.label))
                continue
            if progress and j:
                progress(f"auditing {t.label()}")
            report.results.append(run_target(t, trials=trials, seed=seed * 1_000_003 + i * 101 + j,
                                             confidence=confidence, selection_fraction=selection_fraction))
    report.seconds = time.perf_counter() - t0
    return report
