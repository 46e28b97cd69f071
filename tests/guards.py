"""Hang guards for tests that must not assert a wall-clock duration.

A test that guards against a hang or a blow-up fails on a budget of *CPU time* used by this process
(`cpu_budget`), not on seconds of wall clock: a loaded machine stretches wall time, not the work done.
Subprocesses are guarded by `subprocess.run(..., timeout=...)`, which fails the test when it expires.
Speed itself is measured in `benchmarks/`, against a baseline timed in the same run.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def cpu_budget(seconds: float, what: str = "the block") -> Iterator[None]:
    """Fail the test when the block uses more than `seconds` of this process's CPU time.

    In the main thread a SIGPROF timer (ITIMER_PROF counts process CPU time) interrupts Python code that
    runs past the budget, so a hang fails instead of blocking the run; on exit the CPU time used is
    checked as well (for work done in C that the signal could only interrupt once it returned).
    Budgets nest: an inner one never outlives the enclosing one, which resumes with what is left.
    """
    start = time.process_time()
    armed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if armed:

        def _fail(signum, frame):  # noqa: ARG001
            pytest.fail(f"{what} used more than {seconds} s of CPU time (a hang or a blow-up)")

        previous = signal.signal(signal.SIGPROF, _fail)
        outer, _ = signal.setitimer(signal.ITIMER_PROF, seconds)  # an enclosing budget's time left, or 0
        if 0 < outer < seconds:
            signal.setitimer(signal.ITIMER_PROF, outer)
    try:
        yield
    finally:
        used = time.process_time() - start
        if armed:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
            if outer > 0:  # the enclosing budget goes on with what is left of it
                signal.setitimer(signal.ITIMER_PROF, max(outer - used, 1e-3))
    if used > seconds:
        pytest.fail(f"{what} used {used:.1f} s of CPU time, more than its budget of {seconds} s")
