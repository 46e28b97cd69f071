"""The privacy certificate: a versioned, machine-readable statement of what is guaranteed.

A certificate embeds the canonical (flattened) spec text and its sha256, and for every release,
training or composition in it: the protected unit and neighbouring relation, the privacy notion,
the calibrated mechanism parameters, the guarantee as an ε(α) curve and as (ε, δ) pairs, the
assumptions with their sources, the formulas (sympy text and LaTeX) and the numerical method
with its error bound. ``content_hash`` is the sha256 of everything else, so any edit is detected.

Versioning: ``schema_version`` is MAJOR.MINOR. A reader accepts the same MAJOR and a MINOR up to
its own; anything else is refused with a message that names both versions.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.1"  # 1.1: ``accounting`` (accountant candidates, (ε, δ) curve, GDP μ)

Scalar = float | int | str | bool | None


class _M(BaseModel):
    # Unknown keys and non-finite floats are refused; the published schema (serialization mode) lists
    # every field as required, because an emitted certificate always carries every field.
    model_config = ConfigDict(
        frozen=True, extra="forbid", allow_inf_nan=False, json_schema_serialization_defaults_required=True
    )


class Tool(_M):
    name: Literal["dpspec"] = "dpspec"
    version: str


class SpecRecord(_M):
    """The spec the certificate was compiled from, flattened (includes inlined) and canonical."""

    source_name: str
    canonical_text: str
    sha256: str


class Source(_M):
    """Where a statement comes from: a paper and a theorem/equation, or a dpspec derivation."""

    paper: str
    ref: str


class Assumption(_M):
    id: str
    statement: str
    source: Source


class Formula(_M):
    """A closed form the certificate relies on, as sympy text (re-evaluated by ``verify``) and LaTeX.

    ``variables`` binds the free symbols; ``value`` is the formula evaluated at them (for curves,
    ``checks`` holds (α, value) pairs evaluated at a few orders). ``check``: ``upper_bound`` — the
    recorded value must not be below the exact one (privacy losses); ``close`` — it must equal it to
    a relative 1e-9 (calibrated parameters such as a noise rate)."""

    name: str
    sympy: str
    latex: str
    variables: dict[str, Scalar] = Field(default_factory=dict)
    value: float | None = None
    checks: list[tuple[float, float]] = Field(default_factory=list)
    check: Literal["upper_bound", "close"] = "upper_bound"


class Protected(_M):
    definition: str
    unit: str
    relation: str | None = None
    group_size: int | None = None
    description: str


class Notion(_M):
    name: str  # "approximate_dp", "renyi_dp", "ave_srpp", "joint_srpp", "sa_ave_srpp", "sa_joint_srpp"
    description: str


class MechanismRecord(_M):
    name: str
    description: str
    parameters: dict[str, Scalar]
    calibrated: bool  # True when dpspec solved for the noise; False when the spec gave it


class DpPoint(_M):
    epsilon: float
    delta: float


class GuaranteeRecord(_M):
    """The certified guarantee. ``rdp_alphas``/``rdp_epsilons``: the ε(α) curve (upper bounds).
    ``dp``: (ε, δ) pairs read off the curve; the first is at the spec's δ. ``pairs_notion`` says
    what those pairs are: (ε, δ)-DP, or for SRPP certificates (ε′, δ)-sliced Pufferfish privacy,
    which is *not* a DP statement."""

    target: dict[str, Scalar] = Field(default_factory=dict)
    rdp_alphas: list[float] = Field(default_factory=list)
    rdp_epsilons: list[float] = Field(default_factory=list)
    dp: list[DpPoint] = Field(default_factory=list)
    best_alpha: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    alpha: float | None = None
    theorems: list[str] = Field(default_factory=list)
    pairs_notion: str = "approximate_dp"
    reading: str | None = None  # SRPP: "exact for the finite profile" or "PAC with failure probability γ=…"


class SensitivityRecord(_M):
    """Data-dependent sensitivities (Pufferfish mechanisms): the per-slice Δ^u, their weights,
    how they were estimated, and a fingerprint of the data they were computed from."""

    deltas: list[float]
    weights: list[float]
    instance_deltas: list[list[float]] = Field(default_factory=list)  # per (world, pair) when aggregated per instance
    deltas_sha256: str
    estimator: str
    aggregation: str
    data_source: str
    data_sha256: str
    records: int
    secrets: dict[str, int] = Field(default_factory=dict)  # secret value → number of records
    worlds: list[str] = Field(default_factory=list)
    pairs: list[tuple[str, str]] = Field(default_factory=list)


class QueryRecord(_M):
    """What a Gaussian release computes, read by its runtime (never by the caller).

    ``evaluated_on = "data"``: the runtime reads ``columns`` from the data, clamps column c to
    ``bounds[c]`` (a missing value to the bound nearest 0) and evaluates ``function``, so the
    ``derived_sensitivity`` holds by construction. ``"answer"``: the caller supplies the answer
    (``release_answer``) and ``sensitivity`` is an assumption about it. ``sensitivity`` is the Δ the
    noise is calibrated to (max of the declared and the derived one); ``derivation`` states the rule
    and its source, and the formula ``query_sensitivity`` carries it for ``verify``.
    ``dataset_size``: the public n a mean divides by (under substitution also the rows the data must
    have). ``data``: the data binding the query reads, as written in the spec."""

    function: str
    columns: list[str] = Field(default_factory=list)
    bounds: list[tuple[float, float]] = Field(default_factory=list)
    bins: int | None = None
    dimension: int
    evaluated_on: Literal["data", "answer"]
    sensitivity: float
    derived_sensitivity: float | None = None
    derivation: str
    dataset_size: int | None = None
    data: str | None = None


class Numerics(_M):
    method: str
    abs_error_bound: float
    alpha_grid: str
    conversion: str | None = None
    calibration: str | None = None


class AccountantCandidate(_M):
    """One valid accountant's certified ε at one δ (every candidate is itself an upper bound)."""

    accountant: Literal["rdp", "pld", "analytic_gaussian"]
    delta: float
    epsilon: float


class PldNumerics(_M):
    """How the PLD candidate was evaluated (at the spec's δ): the loss grid, the numerical error budget
    that is already *included* in the certified δ (FFT, window truncation, summation), the worst
    direction's ε per neighbouring direction, and the composition theorem."""

    relation: str
    discretization: float
    delta_error: float
    fft_length: int
    by_direction: list[tuple[str, float, float]] = Field(default_factory=list)
    theorem: str
    method: str


class AccountingRecord(_M):
    """Which accountant family certified the guarantee and what every valid one gives.

    ``accountant``: the family whose ε is the certified one at the spec's δ (the minimum over the
    candidates; every candidate is a valid upper bound, so the minimum is one too). ``candidates``: each
    valid accountant's ε at each δ of ``guarantee.dp``. ``curve``: the certified (ε, δ) curve (minimum over
    the candidates per δ) at δ ∈ {1e-3, …, 1e-10} and the spec's δ. ``gdp_mu``: the exact μ of μ-GDP when the
    mechanism is exactly a composition of Gaussian mechanisms (never a central-limit estimate)."""

    accountant: Literal["rdp", "pld", "analytic_gaussian"]
    rule: str
    candidates: list[AccountantCandidate] = Field(default_factory=list)
    curve: list[DpPoint] = Field(default_factory=list)
    gdp_mu: float | None = None
    tight: str | None = None
    pld: PldNumerics | None = None


class ExecutionRecord(_M):
    """Where a training is meant to run (the spec's ``execution`` setting). Recorded, never used by the
    analysis: the compiler computes every other field with the setting removed, and the distributed
    runtime keeps the certified mechanism (``sampling``, ``noise``; proof in docs/distributed.md)."""

    target: Literal["single", "distributed"]
    workers: int
    backend: str
    sampling: str
    noise: str
    privacy_analysis: str


class TargetCertificate(_M):
    name: str
    kind: Literal["release", "train", "compose"]
    protected: Protected
    notion: Notion
    mechanism: MechanismRecord
    guarantee: GuaranteeRecord
    assumptions: list[Assumption] = Field(default_factory=list)
    formulas: list[Formula] = Field(default_factory=list)
    numerics: Numerics
    sensitivity: SensitivityRecord | None = None
    query: QueryRecord | None = None
    warnings: list[str] = Field(default_factory=list)
    execution: ExecutionRecord | None = None
    # omitted when None (results certified by their own accountant: SRPP, relational, GCON, SWM), so those
    # results read exactly as in schema 1.0
    accounting: AccountingRecord | None = Field(default=None, exclude_if=lambda v: v is None)


class Certificate(_M):
    schema_version: str = SCHEMA_VERSION
    tool: Tool
    spec: SpecRecord
    results: list[TargetCertificate]
    content_hash: str = ""

    def payload_hash(self) -> str:
        return content_hash(self)

    def sealed(self) -> Certificate:
        return self.model_copy(update={"content_hash": content_hash(self)})

    def to_json(self) -> str:
        """Indented JSON with number arrays kept on one line (the ε(α) curve stays readable)."""
        return _compact_arrays(json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False, allow_nan=False))


_NUM = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"


def _compact_arrays(text: str) -> str:
    import re

    # innermost arrays whose items are all numbers: [\n  1,\n  2\n] → [1, 2]
    pat = re.compile(r"\[\s*(" + _NUM + r"(?:,\s*" + _NUM + r")*)\s*\]")
    return pat.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)


def canonical_json(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(cert: Certificate) -> str:
    payload = cert.model_dump(mode="json", exclude={"content_hash"})
    return "sha256:" + hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def sha256_text(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_schema() -> dict:
    schema = Certificate.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://dpspec.dev/schema/certificate-{SCHEMA_VERSION}.json"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
