"""No test asserts a wall-clock duration.

A loaded machine stretches wall time, so such an assertion turns CI red for no fault of the code. Hangs are
guarded by a timeout that fails the test (`subprocess.run(timeout=...)`, a SIGALRM fixture) or by a CPU-time
budget (`tests.guards.cpu_budget`, `time.process_time`); speed lives in `benchmarks/`.
This scan finds every `assert` in `tests/` whose expression reads a wall clock, directly or through a
variable computed from one (`t0 = time.perf_counter()` … `assert time.perf_counter() - t0 < 5`).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# calls that read a wall clock (time.process_time / thread_time are CPU time and allowed)
WALL_CLOCKS = {
    "time",
    "perf_counter",
    "monotonic",
    "time_ns",
    "perf_counter_ns",
    "monotonic_ns",
    "now",
    "utcnow",
    "default_timer",
}


def _reads_wall_clock(node: ast.AST, tainted: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in WALL_CLOCKS:
                return True
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
    return False


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        out = []
        for t in targets:
            out += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
            out += [n.value.id for n in ast.walk(t) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)]
        return out
    return []


def _own_nodes(scope: ast.AST):
    """The nodes of a module or function, without those of the functions defined inside it."""
    for child in ast.iter_child_nodes(scope):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield child
            yield from _own_nodes(child)


def wall_clock_assertions(source: str, filename: str = "<test>") -> list[str]:
    """`file:line` of every assert on a wall-clock reading in `source`."""
    tree = ast.parse(source, filename)
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))]
    for scope in scopes:
        body = list(_own_nodes(scope))
        tainted: set[str] = set()
        changed = True
        while changed:  # names assigned from a clock, or from a name assigned from one, and so on
            changed = False
            for node in body:
                value = getattr(node, "value", None)
                if value is not None and _targets(node) and _reads_wall_clock(value, tainted):
                    new = set(_targets(node)) - tainted
                    if new:
                        tainted |= new
                        changed = True
        for node in body:
            if isinstance(node, ast.Assert) and _reads_wall_clock(node.test, tainted):
                found.append(f"{filename}:{node.lineno}")
    return sorted(set(found))


def test_the_scan_finds_wall_clock_assertions():
    bad = [
        "import time\ndef test():\n    t0 = time.perf_counter()\n    f()\n    assert time.perf_counter() - t0 < 5\n",
        "import time\ndef test():\n    t = time.monotonic()\n    f()\n"
        "    dt = time.monotonic() - t\n    assert dt < 1\n",
        "import time\ndef test():\n    t0 = time.time()\n    f()\n    times = {}\n    times[1] = time.time() - t0\n"
        "    assert times[1] < 2\n",
        "from time import perf_counter\ndef test():\n    t0 = perf_counter()\n"
        "    assert f() and perf_counter() - t0 < 3\n",
    ]
    for src in bad:
        assert wall_clock_assertions(src), src
    good = [
        "import time\ndef test():\n    t0 = time.process_time()\n    f()\n    assert time.process_time() - t0 < 5\n",
        "from tests.guards import cpu_budget\ndef test():\n    with cpu_budget(5):\n        r = f()\n    assert r\n",
        "import subprocess\ndef test():\n    r = subprocess.run(['x'], timeout=60)\n    assert r.returncode == 0\n",
    ]
    for src in good:
        assert not wall_clock_assertions(src), src


def test_no_test_asserts_a_wall_clock_duration():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += wall_clock_assertions(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))
    assert not found, "wall-clock assertions (use tests.guards.cpu_budget or a subprocess timeout): " + ", ".join(found)


def test_cpu_budget_stops_a_hang_and_restores_the_enclosing_budget():
    import signal

    import pytest

    from tests.guards import cpu_budget

    with pytest.raises(pytest.fail.Exception, match="CPU time"), cpu_budget(0.2, "a busy loop"):
        while True:  # a hang in Python code: the SIGPROF timer interrupts it
            pass
    assert signal.getitimer(signal.ITIMER_PROF)[0] == 0  # disarmed afterwards
    with cpu_budget(30, "outer"):
        with cpu_budget(5, "inner"):
            pass
        assert 0 < signal.getitimer(signal.ITIMER_PROF)[0] <= 30.1  # the outer budget goes on
