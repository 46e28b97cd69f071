"""``dpspec.audit.audit``: run every registered auditor on a compiled spec or a certificate."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpspec.errors import DpspecError

from .base import (
    AUDITORS,
    MIN_TRIALS,
    AuditContext,
    AuditResult,
    AuditTarget,
    SkippedTarget,
    planned_trials,
    run_target,
    seconds_per_trial,
    skipped,
)

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
    #: the estimated duration of the audits (seconds, from timing a few outputs of each target), when one was made
    estimated_seconds: float | None = None
    #: the time budget given (``max_seconds``), None without one
    max_seconds: float | None = None

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
        return {
            "spec": self.spec,
            "seed": self.seed,
            "confidence": self.confidence,
            "ok": self.ok,
            "seconds": self.seconds,
            "estimated_seconds": self.estimated_seconds,
            "max_seconds": self.max_seconds,
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=_json_default)

    def rows(self) -> list[list[str]]:
        out = []
        for r in self.results:
            name = r.label or r.name
            if r.status == "skipped":
                out.append([name, r.mechanism, "—", "—", "—", "skipped", r.note])
                continue
            out.append(
                [
                    name,
                    r.mechanism,
                    f"{r.delta:g}",
                    _num(r.epsilon_certified),
                    _num(r.epsilon_lower),
                    r.status,
                    f"{r.trials_evaluation}/side, {r.statistic}",
                ]
            )
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
        if self.max_seconds is not None:
            cut = [r for r in self.results if r.budget_note]
            lines.append(
                f"time budget: {self.max_seconds:g} s"
                + (
                    f"; {len(cut)} target(s) ran fewer trials or none (see their notes): their lower "
                    "bounds are weaker, "
                    "still valid at the stated confidence"
                    if cut
                    else "; every target ran its full trial count"
                )
            )
        if not any(r.status != "skipped" for r in self.results):
            lines.append("verdict: nothing was audited (see the notes)")
            return "\n".join(lines) + "\n"
        lines.append(
            "verdict: "
            + (
                "no violation found"
                if self.ok
                else f"{len(self.violations)} VIOLATION(S): the mechanism leaks more than certified"
            )
        )
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        head = [
            "target",
            "mechanism",
            "δ",
            "certified ε",
            f"audited ε lower bound ({self.confidence:.0%})",
            "verdict",
            "details",
        ]
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

    if isinstance(subject, (str, Path)) and not str(subject).lstrip().startswith("{") and str(subject).endswith(".dps"):
        from dpspec.frontend import load

        return compile_spec(load(Path(subject), name=str(subject)), data=data)
    if isinstance(subject, str) and not subject.lstrip().startswith("{"):
        subject = Path(subject)  # verify reads a str as JSON text, a Path as a file
    rep = verify(subject, raise_on_error=False, data=data) if check else None
    if rep is not None and getattr(rep, "run", None) is not None:
        raise AuditError("this is a run certificate (what one run spent); audit the certificate it names")
    if rep is not None and not rep.ok:
        raise AuditError(
            "the certificate does not verify, so its mechanisms cannot be rebuilt:\n"
            + "\n".join(f"- {p}" for p in rep.problems)
        )
    cert = (
        rep.certificate
        if rep is not None
        else (
            subject
            if isinstance(subject, Certificate)
            else Certificate.model_validate_json(
                subject
                if isinstance(subject, str) and subject.lstrip().startswith("{")
                else Path(subject).read_text(encoding="utf-8")
            )
        )
    )
    assert cert is not None  # (a certificate that verified, and is not a run certificate, was read)
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


def audit(
    subject,
    *,
    mechanisms: dict[str, Any] | None = None,
    targets: Iterable[str] | None = None,
    trials: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    delta: float | None = None,
    selection_fraction: float = 0.2,
    options: dict[str, dict] | None = None,
    data: dict | None = None,
    progress: Callable[[str], None] | None = None,
    runtime: bool = True,
    max_seconds: float | None = None,
    estimate: Callable[[float, str], None] | None = None,
) -> AuditReport:
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

    ``estimate``: called once before any target runs with the estimated duration of the audits in seconds and
    a line that details it (from timing a few discarded outputs of each target,
    :func:`dpspec.audit.base.seconds_per_trial`; ``report.estimated_seconds`` keeps it).
    ``max_seconds``: a time budget (compiling the certificate's spec and timing included). The trial counts
    are planned before any target starts so that the whole audit fits: every target first gets MIN_TRIALS
    = 40 per neighbour (cheapest first, while the budget lasts; one that cannot is not run, nor is one
    reached after the budget is spent), then the rest goes to the cheapest targets first, each at most an
    equal share; each cut is stated in the result (``budget_note``). A count fixed before the outputs are
    drawn keeps the Clopper–Pearson bound valid: fewer trials only make it weaker.

    Returns an :class:`AuditReport`; ``report.ok`` is False iff some ε_lower exceeds the
    certified ε (a violation at the given confidence)."""
    t0 = time.perf_counter()
    if max_seconds is not None and not (
        isinstance(max_seconds, (int, float)) and max_seconds > 0 and math.isfinite(max_seconds)
    ):
        raise ValueError(f"max_seconds must be a positive number of seconds, got {max_seconds!r}")
    compiled = load_subject(subject, data=data)
    mechanisms = dict(mechanisms or {})
    wanted = set(targets) if targets is not None else None
    options = options or {}
    known = {r.name for r in compiled.certificate.results}
    if wanted is not None and wanted - known:
        raise AuditError(
            f"no target named {', '.join(sorted(wanted - known))}; the certificate has {', '.join(sorted(known))}"
        )
    unknown = set(mechanisms) - known
    if unknown:
        raise AuditError(f"mechanisms given for unknown target(s) {', '.join(sorted(unknown))}")
    report = AuditReport(
        seed=seed,
        confidence=confidence,
        spec=compiled.certificate.spec.source_name,
        max_seconds=None if max_seconds is None else float(max_seconds),
    )
    from dpspec.progress import progress as bar

    # 1. the audit targets of every entry, in certificate order (skipped entries hold their place)
    items: list[AuditResult | tuple[int, int, AuditTarget]] = []
    for i, rec in enumerate(compiled.certificate.results):
        if wanted is not None and rec.name not in wanted:
            continue
        if rec.kind == "compose":
            items.append(skipped(rec.name, "composition", "a composition is audited through its parts"))
            continue
        tgt = compiled.targets.get(rec.name)
        mech = mechanisms.get(rec.name, tgt.mechanism if tgt is not None else None)
        if mech is None:
            items.append(skipped(rec.name, rec.mechanism.name, "no runtime mechanism object"))
            continue
        opts = {**options.get(rec.mechanism.name, {}), **options.get(rec.name, {})}
        if not runtime:
            opts["runtime"] = False
        ctx = AuditContext(rec.name, rec, mech, compiled, opts, delta, data)
        try:
            tlist = _targets_for(ctx)
        except AuditError as e:
            items.append(skipped(rec.name, rec.mechanism.name, str(e)))
            continue
        if isinstance(tlist, str):
            items.append(skipped(rec.name, rec.mechanism.name, tlist))
            continue
        for j, t in enumerate(tlist):
            if isinstance(t, SkippedTarget):
                items.append(skipped(rec.name, rec.mechanism.name, t.reason, t.label))
            else:
                items.append((i, j, t))

    # 2. the plan: trials per target, and (when asked) the estimated duration and the budget's cut
    runs = [x for x in items if isinstance(x, tuple)]
    want = {id(t): planned_trials(t, trials) for _, _, t in runs}
    plan = dict(want)
    notes: dict[int, str] = {}
    if runs and (estimate is not None or max_seconds is not None):
        cost = {id(t): seconds_per_trial(t, seed) for _, _, t in runs}
        need = {k: 2.0 * want[k] * cost[k] for k in want}
        total = sum(need.values())
        report.estimated_seconds = total
        parts = ", ".join(f"{t.label()} {want[id(t)]} trials ≈ {_dur(need[id(t)])}" for _, _, t in runs)
        line = f"estimated duration: {_dur(total)} ({parts})"
        if max_seconds is not None:
            left = max_seconds - (time.perf_counter() - t0)
            if total > 0.9 * left:
                # every target first gets MIN_TRIALS per side (cheapest first, while the budget lasts); the
                # rest of the budget is water-filled: cheapest targets first, each at most an equal share
                pool = max(0.0, 0.9 * left)
                order = sorted(runs, key=lambda x: need[id(x[2])])
                live = []
                for _, _, t in order:
                    k = id(t)
                    base = 2.0 * min(MIN_TRIALS, want[k]) * cost[k]
                    if base <= pool:
                        pool -= base
                        live.append(k)
                    else:
                        plan[k] = 0
                for m, k in enumerate(live):
                    base = 2.0 * min(MIN_TRIALS, want[k]) * cost[k]
                    share = pool / (len(live) - m)
                    if need[k] - base <= share:
                        pool -= need[k] - base
                        continue
                    plan[k] = max(MIN_TRIALS, int((base + share) / (2.0 * cost[k])))
                    pool -= share
                for _, _, t in order:
                    k = id(t)
                    if plan[k] < MIN_TRIALS:
                        notes[k] = (
                            f"not run: the time budget of {max_seconds:g} s leaves fewer than {MIN_TRIALS} "
                            f"trials per neighbour for it (all {want[k]} would take ≈ {_dur(need[k])})"
                        )
                    elif plan[k] < want[k]:
                        notes[k] = (
                            f"time budget {max_seconds:g} s: {plan[k]} of {want[k]} trials per neighbour "
                            f"(all would take ≈ {_dur(need[k])}); fewer trials give a weaker lower bound, "
                            "still valid at the stated confidence"
                        )
                line += f"; budget {max_seconds:g} s ({max(0.0, left):.0f} s left after compiling and timing)"
        if estimate is not None:
            estimate(total, line)

    # 3. the audits
    for x in bar(items, desc="audit", unit="target"):
        if not isinstance(x, tuple):
            report.results.append(x)
            continue
        i, j, t = x
        k = id(t)
        spent = time.perf_counter() - t0
        if k in notes and plan[k] < MIN_TRIALS or (max_seconds is not None and spent >= max_seconds):
            r = skipped(
                t.name,
                t.mechanism,
                notes.get(k)
                or f"not run: the time budget of {max_seconds:g} s was "
                f"spent ({spent:.0f} s) before this target started",
                t.label(),
            )
            r.budget_note = r.note
            report.results.append(r)
            continue
        if progress:
            progress(f"auditing {t.label()} ({t.mechanism})")
        r = run_target(
            t,
            trials=plan[k],
            seed=seed * 1_000_003 + i * 101 + j,
            confidence=confidence,
            selection_fraction=selection_fraction,
        )
        if k in notes:
            r.budget_note = notes[k]
            r.note = f"{r.note}; {notes[k]}" if r.note else notes[k]
        report.results.append(r)
    report.seconds = time.perf_counter() - t0
    return report


def _dur(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.2g} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
