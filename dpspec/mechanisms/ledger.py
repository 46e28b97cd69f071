"""The privacy ledger: what a runtime object has spent of its certificate, and the refusals.

A certificate states a guarantee for a fixed amount of use: a number of steps for a training, one
output for a release. The runtime object that carries the certificate keeps a ledger of what it
actually did and refuses to go beyond it:

- ``charge(n)`` is called *before* the n steps (or outputs) are produced; if the budget would be
  exceeded it raises :class:`BudgetExceededError` and nothing is released;
- ``privacy_spent(delta)`` answers "how much ε have I spent so far?" from the same accountant the
  certificate used, evaluated at the steps actually taken;
- ``state_dict()`` / ``load_state_dict()`` carry the ledger across a checkpoint, so a resumed run
  continues the same budget instead of starting a fresh one; a state from another certificate
  (another target, budget, fingerprint of the certified numbers or certificate hash) is refused.

The high-water mark (no rewind, no second copy of a budget). Every ledger belongs to one *run*, named
by a random run id that its states carry. The run's step count lives in one :class:`_Run` object per
process (``_RUNS``), shared by every copy of the ledger: ``copy.copy``, ``copy.deepcopy`` and a
``pickle`` round trip in the same process give the same count, so steps charged through any copy
count for all. The count never goes down: loading a state of the run with fewer steps than the run
has charged raises :class:`LedgerRewindError` (DPS167) and changes nothing; a later state moves the
count forward. A fresh ledger (nothing charged) may take a state of another run — the resume in a
new process — and then continues that run; a ledger that has charged steps of its own refuses to.
Across processes, memory is not shared: a run's high-water mark survives only in a *journal*
(:meth:`PrivacyLedger.attach_journal`, a JSON file written before each step's noise is drawn), and
a state older than the journal's count is refused there too. Without a journal, a new process that
loads an old checkpoint cannot know that later steps were taken (docs/threat-model.md §5).

:class:`BatchGuard` enforces the per-batch caps a step's sensitivity needs where a user's own loop
calls in: the records of a batch are named by their training-set indices, each record at most once
(unless the certificate samples with replacement), exactly B of them for fixed-size sampling, and
the batch the object drew for that step when it drew one.

The ledger never imports the compiler: the ``accountant`` callable it is given is built by the
runtime object from numbers in its certificate (dpspec.accounting only). The ledger guards against
running past the certificate by mistake; it is not a security boundary against whoever holds the
data and the code (they can always compile again).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpspec.mechanisms.errors import (  # noqa: E402,F401 - re-exported: raised and caught under these names
    BudgetExceededError,
    CapExceededError,
    CertificateGuardError,
    DataMismatchError,
    LedgerRewindError,
)


@dataclass(frozen=True)
class Spent:
    """Privacy spent after ``steps`` of ``budget_steps``: ``epsilon`` at ``delta`` (for an (ε, δ)
    notion) or ε(α) at ``alpha`` (RDP/SRPP notions). ``exact_for_run`` is False when the number is
    the full-run bound rather than one for the steps taken (one-shot mechanisms such as GCON).
    ``accountant`` names the accountant (the certificate's) that computed it."""

    target: str
    notion: str
    steps: int
    budget_steps: int
    epsilon: float
    delta: float | None = None
    alpha: float | None = None
    exact_for_run: bool = True
    note: str = ""
    accountant: str = ""

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != ""}


# (steps taken, δ or None) -> Spent. Built by the runtime object from its certificate.
Accountant = Callable[[int, float | None], Spent]


def fingerprint(**numbers) -> str:
    """A short digest of the certified numbers a runtime object runs with (σ, rate, steps, …): two
    objects with the same fingerprint spend privacy identically, so a ledger state may move between
    them; any other ledger state is refused."""
    text = json.dumps({k: _plain(v) for k, v in numbers.items()}, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _plain(v):
    if isinstance(v, (np.floating, float)):
        return repr(float(v))
    if isinstance(v, (np.integer, int, bool)) or v is None or isinstance(v, str):
        return v if not isinstance(v, np.integer) else int(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return (
            [_plain(x) for x in np.asarray(v, dtype=object).ravel().tolist()]
            if isinstance(v, np.ndarray)
            else [_plain(x) for x in v]
        )
    return str(v)


class _Run:
    """The step count of one run, shared by every copy of its ledger in this process (copies and
    unpickled objects resolve to the one object in ``_RUNS``)."""

    __slots__ = ("run_id", "steps")

    def __init__(self, run_id: str, steps: int):
        self.run_id, self.steps = run_id, int(steps)

    def __reduce__(self):
        _RUNS.setdefault(self.run_id, self)  # an unpickled copy in this process resolves to this count
        return (_run, (self.run_id, self.steps))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


# run id -> its step count in this process; never shrinks (a run's high-water mark outlives its objects).
# A run is entered when a state of it leaves its ledger (state_dict, pickle): a run whose state never left
# cannot be rewound by one, and copies share its _Run object directly.
_RUNS: dict[str, _Run] = {}


def _run(run_id: str, steps: int = 0) -> _Run:
    """The process's count for ``run_id`` (created at ``steps``; an existing one is never lowered)."""
    r = _RUNS.get(run_id)
    if r is None:
        r = _RUNS[run_id] = _Run(run_id, steps)
    elif steps > r.steps:
        r.steps = int(steps)
    return r


class LedgerJournal:
    """A JSON file holding each run's high-water mark (run id -> steps charged), written before a
    step's noise is drawn (write to a temporary file, fsync, rename). It carries a run's count across
    processes: a state of the run older than the journal's count is refused. It guards against
    resuming from a stale checkpoint by mistake; whoever deletes or edits the file can defeat it."""

    VERSION = 1

    def __init__(self, path):
        self.path = Path(path)

    def _read(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            doc = json.loads(text)
            runs = doc["runs"]
            if doc.get("dpspec_ledger_journal") != self.VERSION or not isinstance(runs, dict):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise DataMismatchError(
                f"{self.path} is not a dpspec ledger journal (or it was damaged): the steps "
                "already charged cannot be read, so no run is continued from it"
            ) from None
        return runs

    def high_water(self, run_id: str) -> int:
        entry = self._read().get(run_id)
        return int(entry.get("steps", 0)) if isinstance(entry, dict) else 0

    def record(self, ledger: PrivacyLedger, steps: int, held: int | None = None) -> None:
        """Write ``steps`` for the ledger's run; refused when the journal already holds more than ``held``
        (the count the ledger holds before this write: default ``steps``) — another copy of the run, in
        another process, went further."""
        runs = self._read()
        old = runs.get(ledger.run_id)
        held = steps if held is None else held
        if isinstance(old, dict) and int(old.get("steps", 0)) > held:
            raise LedgerRewindError(ledger._rewind_text(held, int(old["steps"]), f"the journal {self.path}"))
        runs[ledger.run_id] = {
            "target": ledger.target,
            "fingerprint": ledger.fingerprint,
            "certificate": ledger.certificate_hash,
            "budget_steps": ledger.budget_steps,
            "steps": int(steps),
        }
        text = json.dumps({"dpspec_ledger_journal": self.VERSION, "runs": runs}, indent=1, sort_keys=True)
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class PrivacyLedger:
    """Steps taken against a certified budget, and ε spent so far (see the module docstring)."""

    def __init__(
        self, target: str, budget_steps: int, accountant: Accountant, *, unit: str = "step", fingerprint: str = ""
    ):
        if budget_steps < 0:
            raise ValueError("a step budget cannot be negative")
        self.target = target
        self.budget_steps = int(budget_steps)
        self.unit = unit
        self.fingerprint = fingerprint
        self._accountant = accountant
        self._run = _Run(uuid.uuid4().hex, 0)
        self._journal: LedgerJournal | None = None
        # set by bind_certificate when the object was compiled from a spec
        self.certificate_hash: str | None = None
        self.certificate_source: str | None = None
        self.record: Any = None  # the TargetCertificate this object runs under

    @property
    def steps_taken(self) -> int:
        """Steps charged against this run (by this object or any copy of it): never lowered."""
        return self._run.steps

    @property
    def run_id(self) -> str:
        """The run this ledger charges (states carry it; see the module docstring)."""
        return self._run.run_id

    @property
    def remaining(self) -> int:
        return self.budget_steps - self.steps_taken

    def attach_journal(self, path) -> None:
        """Keep the run's high-water mark in the JSON file ``path`` too (shared by the processes that
        resume the run: give the same path every time). Raises :class:`LedgerRewindError` if the journal
        already records more steps for this run than the ledger holds."""
        journal = LedgerJournal(path)
        high = journal.high_water(self.run_id)
        if high > self.steps_taken:
            raise LedgerRewindError(self._rewind_text(self.steps_taken, high, f"the journal {journal.path}"))
        self._journal = journal
        if self.steps_taken:
            journal.record(self, self.steps_taken)

    def _rewind_text(self, taken: int, high: int, where: str) -> str:
        return (
            f"`{self.target}`: this state of the run holds {taken} {self.unit}(s), but {high} were already "
            f"charged against it ({where}). Loading it would take noisy {self.unit}s the certificate does not "
            "cover: resume from the run's latest checkpoint (a run's count never goes down; a fresh run "
            "needs a fresh compile and its own privacy budget)."
        )

    def require(self, n: int) -> None:
        """Raise :class:`BudgetExceededError` unless ``n`` more steps fit (records nothing)."""
        if n < 0:
            raise ValueError("cannot charge a negative number of steps")
        if self.steps_taken + n > self.budget_steps:
            raise BudgetExceededError(
                f"`{self.target}`: the certificate covers {self.budget_steps} {self.unit}(s); "
                f"{self.steps_taken} taken, {n} more requested. Compile a spec with a larger budget "
                "(and a correspondingly larger ε or more noise) to go further."
            )

    def charge(self, n: int = 1) -> None:
        """Record ``n`` more steps, or raise :class:`BudgetExceededError` (recording nothing)."""
        self.require(n)
        if self._journal is not None:  # persisted before the step's noise is drawn
            self._journal.record(self, self.steps_taken + n, held=self.steps_taken)
        self._run.steps += n

    def privacy_spent(self, delta: float | None = None) -> Spent:
        """ε spent after the steps taken so far, from the certificate's own accountant."""
        return self._accountant(self.steps_taken, delta)

    def spent_at(self, steps: int, delta: float | None = None) -> Spent:
        """ε the certificate's accountant gives for ``steps`` steps (0 ≤ steps ≤ budget)."""
        if not 0 <= int(steps) <= self.budget_steps:
            raise BudgetExceededError(
                f"`{self.target}`: {steps} {self.unit}(s) is outside the certified budget of {self.budget_steps}"
            )
        return self._accountant(int(steps), delta)

    def bind_certificate(self, content_hash: str, source_name: str, record: Any = None) -> None:
        self.certificate_hash = content_hash
        self.certificate_source = source_name
        self.record = record

    def consensus_token(self) -> int:
        """An integer every rank of a distributed run must agree on (steps taken, certified numbers)."""
        h = hashlib.sha256(f"{self.fingerprint}|{self.certificate_hash}|{self.steps_taken}".encode()).digest()
        return int.from_bytes(h[:6], "big")

    def state_dict(self) -> dict:
        _RUNS.setdefault(self.run_id, self._run)  # the state leaves the object: the run's count must outlive it
        out = {
            "target": self.target,
            "budget_steps": self.budget_steps,
            "steps_taken": self.steps_taken,
            "fingerprint": self.fingerprint,
            "run": self.run_id,
        }
        if self.certificate_hash is not None:
            out["certificate"] = self.certificate_hash
        return out

    def load_state_dict(self, state: dict) -> None:
        """Resume a ledger; refuses a state from another target, budget, set of certified numbers or
        certificate."""
        if not isinstance(state, dict):
            raise DataMismatchError("a ledger state is a dict (from `state_dict()`)")
        if state.get("target") != self.target or _int_or(state.get("budget_steps")) != self.budget_steps:
            raise DataMismatchError(
                f"this ledger state belongs to `{state.get('target')}` with a budget of "
                f"{state.get('budget_steps')} {self.unit}(s), not to `{self.target}` with {self.budget_steps}"
            )
        if state.get("fingerprint", "") != self.fingerprint:
            raise DataMismatchError(
                f"this ledger state of `{self.target}` was written by a run with other certified numbers (σ, rate, "
                "clip, …): it cannot be continued by this object. Resume with the mechanism compiled from the same "
                "certificate."
            )
        theirs = state.get("certificate")
        if theirs is not None and self.certificate_hash is not None and theirs != self.certificate_hash:
            raise DataMismatchError(
                f"this ledger state belongs to the certificate {theirs}, not to {self.certificate_hash}: "
                "resume with the mechanism compiled from the same certificate"
            )
        taken = _int_or(state.get("steps_taken"))
        if taken is None or not 0 <= taken <= self.budget_steps:
            raise DataMismatchError(
                f"a ledger state with {state.get('steps_taken')} {self.unit}(s) taken is outside "
                f"the budget of {self.budget_steps}"
            )
        rid = state.get("run")
        if not isinstance(rid, str) or not rid:
            rid = None  # a state written before runs were named: a run of its own
        if rid != self.run_id and self.steps_taken > 0:
            raise LedgerRewindError(
                f"`{self.target}`: this ledger has charged {self.steps_taken} {self.unit}(s) of its own run; a state "
                "of another run would hand out a second copy of the budget. Load a checkpoint into a freshly "
                "made object (before any step), or continue this run."
            )
        rid = rid or uuid.uuid4().hex
        if rid == self.run_id:
            _RUNS.setdefault(rid, self._run)
        known = _RUNS.get(rid)
        high, where = (known.steps, "in this process") if known is not None else (0, "")
        if self._journal is not None:
            j = self._journal.high_water(rid)
            if j > high:
                high, where = j, f"the journal {self._journal.path}"
        if taken < high:
            raise LedgerRewindError(self._rewind_text(taken, high, where))
        self._run = _run(rid, taken)  # this process's count of the run, moved forward to the state's
        if self._journal is not None:
            self._journal.record(self, self._run.steps)


def _int_or(x) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    return None


# --- per-batch caps where a user's loop calls in ----------------------------------------------------


class BatchGuard:
    """The batch a private step may use, named by training-set indices (see the module docstring).

    ``issue(idx)`` is called by the object's own sampler for every batch it draws (in order);
    ``resolve(idx, rows)`` is called by the step: with ``idx=None`` it takes the oldest batch the
    sampler drew and has not been used; an explicit ``idx`` must be that batch when one was drawn,
    and in any case satisfy the caps. Refusals are :class:`CapExceededError` (or
    :class:`DataMismatchError` when the rows and the indices disagree)."""

    def __init__(
        self,
        target: str,
        *,
        batch_size: int | None = None,
        population: int | None = None,
        repeats_allowed: bool = False,
        what: str = "record",
    ):
        self.target = target
        self.batch_size = None if batch_size is None else int(batch_size)
        self.population = None if population is None else int(population)
        self.repeats_allowed = repeats_allowed
        self.what = what
        self._issued: deque = deque()

    def issue(self, idx):
        self._issued.append(np.asarray(idx))
        return idx

    def clear(self) -> None:
        self._issued.clear()

    def resolve(self, idx, rows: int, population: int | None = None) -> np.ndarray:
        """The step's batch, checked; a refused batch leaves the drawn batches untouched."""
        drawn = self._issued[0] if self._issued else None
        if idx is None:
            if drawn is None:
                raise CapExceededError(
                    f"`{self.target}`: this step's batch was not drawn by the object's own sampler, so the runtime "
                    f"cannot see which {self.what}s it holds. Draw batches with `.batches()` or pass "
                    f"`idx=` (the training-set indices of the batch's rows) so the per-batch caps can be checked."
                )
            idx = drawn
        else:
            idx = np.asarray(idx)
            if drawn is not None and (drawn.shape != idx.shape or not np.array_equal(drawn, idx)):
                raise CapExceededError(
                    f"`{self.target}`: the batch passed to this step is not the one `.batches()` drew for it; the "
                    "certificate's amplification holds only for batches drawn as accounted. Pass the drawn "
                    "indices (or draw no batch when you sample yourself)."
                )
        if drawn is None:  # a batch from the user's own sampler: every cap is checked
            check_batch_indices(
                idx,
                rows,
                target=self.target,
                batch_size=self.batch_size,
                population=population if population is not None else self.population,
                repeats_allowed=self.repeats_allowed,
                what=self.what,
            )
        elif drawn.size != int(rows):  # the object's own draw meets the caps by construction
            raise DataMismatchError(
                f"`{self.target}`: the batch has {rows} rows but `.batches()` drew "
                f"{drawn.size} {self.what}s for this step"
            )
        if drawn is not None:
            self._issued.popleft()
        return idx


def check_batch_indices(
    idx,
    rows: int,
    *,
    target: str,
    batch_size: int | None = None,
    population: int | None = None,
    repeats_allowed: bool = False,
    what: str = "record",
) -> None:
    """The caps a step's per-record sensitivity needs (see :class:`BatchGuard`)."""
    a = np.asarray(idx)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise CapExceededError(f"`{target}`: idx must be a 1-D array of integer training-set indices")
    if a.size != int(rows):
        raise DataMismatchError(f"`{target}`: the batch has {rows} rows but idx names {a.size} {what}s")
    if a.size and (a.min() < 0 or (population is not None and a.max() >= population)):
        raise CapExceededError(f"`{target}`: idx holds indices outside 0..{(population or 0) - 1}")
    if batch_size is not None and a.size != batch_size:
        raise CapExceededError(
            f"`{target}`: a batch of {a.size} {what}s, but the certificate samples exactly {batch_size} per step; "
            "draw batches with `.batches()`"
        )
    if not repeats_allowed and a.size:
        uniq, counts = np.unique(a, return_counts=True)
        if counts.max() > 1:
            worst = int(uniq[np.argmax(counts)])
            raise CapExceededError(
                f"`{target}`: {what} {worst} appears {int(counts.max())} times in one batch; the certificate bounds "
                f"what one {what} changes in a step by one clipped contribution (sensitivity C), which repeats "
                "multiply. Use each index at most once per batch (draw batches with `.batches()`)."
            )


# --- the privacy API every runtime object exposes ------------------------------------------------------


class LedgerOwner:
    """Mixin for runtime objects that hold a :class:`PrivacyLedger` as ``self.ledger``."""

    ledger: PrivacyLedger

    def privacy_spent(self, delta: float | None = None) -> Spent:
        """ε spent so far (steps actually taken), from the accountant the certificate used."""
        return self.ledger.privacy_spent(delta)

    def ledger_state(self) -> dict:
        """The ledger's checkpoint state (store it with the model; :meth:`load_ledger_state` resumes it)."""
        return self.ledger.state_dict()

    def load_ledger_state(self, state: dict) -> None:
        """Continue a run from a checkpoint: the ledger resumes at the steps already taken (a state older
        than the run's high-water mark raises :class:`LedgerRewindError`)."""
        self.ledger.load_state_dict(state)

    def attach_journal(self, path) -> None:
        """Keep the run's high-water mark in a journal file (:meth:`PrivacyLedger.attach_journal`)."""
        self.ledger.attach_journal(path)

    def bind_certificate(self, certificate, name: str) -> None:
        """Attach the sealed certificate this object was compiled with (called by the compiler)."""
        rec = next((r for r in certificate.results if r.name == name), None)
        self.ledger.bind_certificate(certificate.content_hash, certificate.spec.source_name, rec)

    def run_certificate(self, *, embed=None):
        """A run certificate for the run so far (:mod:`dpspec.certificate.run`): steps taken and ε spent at
        the certificate's δ values (or α). ``embed``: the original certificate, to include it."""
        from dpspec.certificate.run_record import build_run_certificate

        return build_run_certificate(self, embed=embed)
