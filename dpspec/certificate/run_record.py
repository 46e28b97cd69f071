"""The run-certificate document and how a runtime object writes one (see ``dpspec.certificate.run`` for
the format and its verification). Kept apart from the verification, which recompiles the spec, so
that the runtime's ledger writes run certificates without reaching the compiler."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dpspec.certificate.model import Tool, canonical_json

RUN_SCHEMA_VERSION = "1.0"


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class SpentPoint(_M):
    """ε at δ (an (ε, δ) notion) or ε(α) (Rényi / SRPP notions)."""

    epsilon: float = Field(ge=0)
    delta: float | None = Field(default=None, gt=0, lt=1)
    alpha: float | None = Field(default=None, gt=1)


class OriginalRef(_M):
    content_hash: str
    source_name: str


class RunCertificate(_M):
    kind: Literal["run"] = "run"
    schema_version: str = RUN_SCHEMA_VERSION
    tool: Tool
    certificate: OriginalRef
    target: str
    mechanism: str
    notion: str
    unit: str = "step"
    steps_taken: int = Field(ge=0)
    budget_steps: int = Field(ge=0)
    accountant: str
    exact_for_run: bool = True
    spent: list[SpentPoint]
    certified: list[SpentPoint]
    note: str = ""
    original: dict | None = None
    content_hash: str = ""

    def sealed(self) -> RunCertificate:
        return self.model_copy(update={"content_hash": run_content_hash(self)})

    def to_json(self) -> str:
        return (
            json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False, allow_nan=False)
            + "\n"
        )


def run_content_hash(rc: RunCertificate) -> str:
    import hashlib

    payload = rc.model_dump(mode="json", exclude={"content_hash"}, exclude_none=True)
    return "sha256:" + hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


# --- writing ------------------------------------------------------------------------------------------


def _points(record) -> list[tuple[float | None, float | None, float]]:
    """(δ, α, certified ε) of every number the original certificate states for the target."""
    g = record.guarantee
    out: list[tuple[float | None, float | None, float]] = [(float(p.delta), None, float(p.epsilon)) for p in g.dp]
    if g.alpha is not None and g.epsilon is not None and not g.dp:
        out.append((None, float(g.alpha), float(g.epsilon)))
    elif g.alpha is not None and g.epsilon is not None and record.notion.name == "renyi_dp":
        out.append((None, float(g.alpha), float(g.epsilon)))
    return out


def build_run_certificate(mechanism, *, embed=None) -> RunCertificate:
    """The run certificate of ``mechanism``'s run so far (its ledger); ``embed``: the original certificate
    (a ``Certificate``) to include. The object must have been compiled from a certificate."""
    from dpspec import __version__
    from dpspec.mechanisms.errors import DataMismatchError

    led = mechanism.ledger
    rec = led.record
    if rec is None or led.certificate_hash is None:
        raise DataMismatchError(
            "this runtime object was not compiled from a certificate (dpspec.compile binds "
            "it); a run certificate names the certificate it spends"
        )
    if embed is not None and getattr(embed, "content_hash", None) != led.certificate_hash:
        raise DataMismatchError("the certificate to embed is not the one this object runs under")
    spent, certified = [], []
    last = None
    for delta, alpha, eps_cert in _points(rec):
        s = led.privacy_spent(delta)
        if alpha is not None and s.alpha != alpha:
            raise AssertionError(f"the ledger reported ε at α = {s.alpha}, the certificate states α = {alpha}")
        if s.epsilon > eps_cert * (1 + 1e-12):  # would mean the ledger's accountant is not the certificate's
            raise AssertionError(f"ε spent {s.epsilon} exceeds the certificate's {eps_cert}")
        spent.append(SpentPoint(epsilon=s.epsilon, delta=delta, alpha=alpha))
        certified.append(SpentPoint(epsilon=eps_cert, delta=delta, alpha=alpha))
        last = s
    if last is None:
        raise DataMismatchError(f"the certificate of `{led.target}` states no ε to spend")
    rc = RunCertificate(
        tool=Tool(version=__version__),
        certificate=OriginalRef(content_hash=led.certificate_hash, source_name=led.certificate_source or ""),
        target=led.target,
        mechanism=rec.mechanism.name,
        notion=rec.notion.name,
        unit=led.unit,
        steps_taken=led.steps_taken,
        budget_steps=led.budget_steps,
        accountant=last.accountant,
        exact_for_run=last.exact_for_run,
        spent=spent,
        certified=certified,
        note=last.note,
        original=None if embed is None else embed.model_dump(mode="json"),
    )
    return rc.sealed()
