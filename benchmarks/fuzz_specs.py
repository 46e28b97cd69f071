"""The spec and data fuzzer, long run: grammar texts, language specs, byte, token and value
mutations of the example specs, mutated data files and mutated bound data, for N minutes.

    python benchmarks/fuzz_specs.py --minutes 30 [--memory-mb 3000] [--seed 1] [--save]

Every case runs in a worker process under ``resource.setrlimit(RLIMIT_AS)`` and a per-case time
bound; the parent restarts a worker that dies (killed, out of memory) or stops answering, and
records the case it was running. Findings (a traceback, the compiler's DPS011 fallback, an error
without a hint, a time-out, a MemoryError, a dead worker) are printed and, with ``--save``,
written to ``tests/fuzz/corpus/specs/``, where the test suite replays them. Exit status 1 when
anything was found. The engine is ``tests/fuzz/specfuzz.py``; the inputs
``tests/fuzz/spec_strategies.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def signature(kind: str, detail: str) -> str:
    """What makes two findings the same: the kind and the first line, numbers and names blurred."""
    import re

    first = detail.splitlines()[0] if detail else ""
    first = re.sub(r"`[^`]*`", "`…`", first)
    return kind + ": " + re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "#", first)[:160]


def worker(args) -> int:
    """Generate and run cases until the deadline; report each outcome as a JSON line on stdout."""
    import resource
    import warnings

    warnings.simplefilter("ignore")
    if args.memory_mb:
        lim = args.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from tests.fuzz import spec_strategies as S
    from tests.fuzz.specfuzz import Case, base_files, fuzz_environment, run_case

    deadline = time.time() + args.seconds
    current = Path(args.current)

    class Done(BaseException):
        pass

    data_files = {k: v for k, v in base_files().items()}

    @st.composite
    def cases(draw):
        kind = draw(st.sampled_from(["grammar", "language", "language", "bytes", "tokens", "values", "values",
                                     "values", "data", "bound"]))
        if kind == "grammar":
            return Case(draw(S.grammar_texts()), note=kind)
        if kind == "language":
            return Case(draw(S.language_specs()), note=kind)
        if kind in ("bytes", "tokens", "values"):
            text = draw(S.examples())
            mut = {"bytes": S.byte_mutations, "tokens": S.token_mutations, "values": S.value_mutations}[kind]
            return Case(draw(mut(text)), note=kind)
        if kind == "data":
            return draw(S.data_cases(data_files))
        return draw(S.bound_cases())

    @given(cases())
    @settings(max_examples=10**9, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    def loop(case):
        if time.time() > deadline:
            raise Done()
        current.write_text(case.to_json(), encoding="utf-8")
        relational = "relational_dpsgd" in case.spec
        compile_it = not relational or args.relational
        outcome = run_case(case, compile=compile_it,
                           time_limit=args.relational_time if relational else args.case_time)
        print(json.dumps({"kind": outcome.kind, "note": case.note, "seconds": round(outcome.seconds, 3),
                          "detail": outcome.detail[:2000], "case": case.to_json() if outcome.is_finding else None}),
              flush=True)

    from hypothesis import seed as hseed

    try:
        hseed(args.seed)(loop)()
    except Done:
        pass
    return 0


def parent(args) -> int:
    from tests.fuzz.specfuzz import Case, Outcome, save_finding

    end = time.time() + args.minutes * 60
    counts: collections.Counter = collections.Counter()
    by_note: collections.Counter = collections.Counter()
    findings = []
    signatures: collections.Counter = collections.Counter()
    seed = args.seed
    with tempfile.TemporaryDirectory() as tmp:
        current = Path(tmp) / "current.json"
        while time.time() < end - 1:
            remaining = int(end - time.time())
            cmd = [sys.executable, __file__, "--worker", "--seconds", str(remaining), "--seed", str(seed),
                   "--current", str(current), "--memory-mb", str(args.memory_mb), "--case-time", str(args.case_time),
                   "--relational-time", str(args.relational_time)] + (["--relational"] if args.relational else [])
            env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
            last = time.time()
            import selectors

            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            watchdog = max(args.case_time, args.relational_time) * 2 + 30
            killed = False
            while True:
                if sel.select(timeout=5):
                    line = proc.stdout.readline()
                    if not line:
                        break
                    last = time.time()
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    counts[rec["kind"]] += 1
                    by_note[rec["note"]] += 1
                    if rec["case"]:
                        sig = signature(rec["kind"], rec["detail"])
                        signatures[sig] += 1
                        if signatures[sig] <= 2:  # keep two examples of each distinct finding
                            case = Case.from_json(rec["case"])
                            findings.append((case, Outcome(rec["kind"], rec["detail"], rec["seconds"])))
                            print(f"FINDING {rec['kind']} ({rec['note']}): {rec['detail'][:400]}", flush=True)
                elif time.time() - last > watchdog:
                    proc.kill()
                    killed = True
                    break
            proc.wait()
            err = proc.stderr.read()
            if killed or proc.returncode not in (0, None):
                what = "hang (worker stopped answering)" if killed else f"worker died (exit {proc.returncode})"
                counts["dead-worker"] += 1
                if current.exists():
                    case = Case.from_json(current.read_text(encoding="utf-8"))
                    findings.append((case, Outcome("timeout" if killed else "memory", what + "\n" + err[-1500:])))
                    print(f"FINDING {what}: {err[-400:]}", flush=True)
            seed += 1
    total = sum(v for k, v in counts.items() if k != "dead-worker")
    print(f"\ncases run: {total} in {args.minutes:g} min; outcomes: {dict(counts)}")
    print(f"by generator: {dict(by_note)}")
    print(f"findings: {sum(signatures.values()) + counts['dead-worker']} cases, {len(signatures)} distinct")
    for sig, n in signatures.most_common():
        print(f"  {n:6d}  {sig}")
    if args.save:
        for case, outcome in findings:
            print("saved", save_finding(case, outcome, *([Path(args.corpus)] if args.corpus else [])))
    return 1 if findings else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=None, help="(worker) run for this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory-mb", type=int, default=3000, help="address-space limit of the worker (0: none)")
    ap.add_argument("--case-time", type=float, default=30.0, help="time bound of one case, in seconds")
    ap.add_argument("--relational", action="store_true",
                    help="also compile relational DP-SGD specs (their accountant takes about a minute each)")
    ap.add_argument("--relational-time", type=float, default=240.0)
    ap.add_argument("--save", action="store_true", help="write findings to the corpus folder")
    ap.add_argument("--corpus", default=None, help="the corpus folder (default: tests/fuzz/corpus/specs/)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--current", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.seconds is not None:
        args.minutes = args.seconds / 60
    return parent(args)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
