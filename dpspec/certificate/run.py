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

Verifying one (:func:`dpspec.certificate.verify.verify_run`, re-exported here; ``dpspec verify RUN.json
[--certificate CERT.json]``):

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

from dpspec.certificate.run_record import (  # noqa: F401 - the document and its writer, re-exported
    RUN_SCHEMA_VERSION,
    OriginalRef,
    RunCertificate,
    SpentPoint,
    build_run_certificate,
)
from dpspec.certificate.verify import (  # noqa: F401 - run certificates are verified there, re-exported
    RunVerificationError,
    RunVerifyReport,
    _compiled_mechanism,
    verify,
    verify_run,
)

__all__ = [
    "RunCertificate",
    "SpentPoint",
    "OriginalRef",
    "build_run_certificate",
    "run_certificate_for",
    "verify_run",
    "RunVerifyReport",
    "RUN_SCHEMA_VERSION",
]


def run_certificate_for(
    certificate,
    target: str,
    *,
    steps: int | None = None,
    ledger_state: dict | None = None,
    embed: bool = False,
    data: dict | None = None,
) -> RunCertificate:
    """A run certificate for a run of ``target`` that stopped after ``steps`` steps (or at a saved
    ``ledger_state``), recomputed from the certificate (which is verified first)."""
    rep = verify(certificate, raise_on_error=False, data=data)
    if not rep.ok:
        raise ValueError("the certificate does not verify:\n" + "\n".join(f"- {p}" for p in rep.problems))
    cert = rep.certificate
    if cert is None:  # a run certificate verifies without one
        raise ValueError("expected a certificate, got a run certificate")
    names = [r.name for r in cert.results if r.kind != "compose"]
    if target not in names:
        raise ValueError(f"no release or training named `{target}`; the certificate has {', '.join(names)}")
    try:
        mech = _compiled_mechanism(cert, target, data)
    except KeyError:
        raise ValueError(
            f"`{target}` has no runtime object with a privacy ledger of steps (a tuning's run "
            "certificate is written by its `run`)"
        ) from None
    if ledger_state is not None:
        mech.load_ledger_state(ledger_state)
    elif steps is not None:
        mech.ledger.load_state_dict({**mech.ledger.state_dict(), "steps_taken": int(steps)})
    else:
        raise ValueError("give the steps taken or a saved ledger state")
    return build_run_certificate(mech, embed=cert if embed else None)
