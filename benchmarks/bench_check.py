"""`dpspec check` start-up speed on a 200-line spec, against `python -c pass` in the same run.

Target (issue: spine): under 0.3 s wall time including interpreter start, and torch, numpy,
scipy and sympy are never imported by `check`.

    python benchmarks/bench_check.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def spec_200_lines() -> str:
    lines = ["# generated: 200 lines of spec", "privacy people {", "  unit record", "  dataset_size 60000", "}"]
    i = 0
    while len(lines) < 192:
        lines += [f"release stat_{i} {{", "  protect   people", "  mechanism gaussian",
                  f"  query     sum(col_{i}, bounds = [0, {i + 1}])", "  guarantee dp(epsilon = 0.1, delta = 1e-7)", "}"]
        i += 1
    lines += ["train model {", "  protect people  mechanism dpsgd", "  sampling poisson(expected_batch = 256)",
              "  clipping flat(C = 1.0)  epochs 2", "  guarantee dp(epsilon = 8, delta = 1e-6)", "}"]
    return "\n".join(lines) + "\n"


def timed(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        spec = Path(d) / "big.dps"
        spec.write_text(spec_200_lines())
        n_lines = spec.read_text().count("\n")
        py = sys.executable
        subprocess.run([py, "-m", "dpspec", "check", str(spec)], check=True, capture_output=True)  # warm lark cache
        base = timed([py, "-c", "pass"], args.runs)
        check = timed([py, "-m", "dpspec", "check", str(spec)], args.runs)
        probe = subprocess.run([py, "-c", (
            "import sys; from dpspec.cli.main import main; main(['check', %r]); "
            "print('HEAVY:' + ','.join(m for m in ('torch','numpy','scipy','sympy') if m in sys.modules))") % str(spec)],
            capture_output=True, text=True)
        heavy = [ln for ln in probe.stdout.splitlines() if ln.startswith("HEAVY:")][0][len("HEAVY:"):]
    print(f"spec lines:                    {n_lines}")
    print(f"python -c pass (median):       {base * 1000:7.1f} ms")
    print(f"dpspec check (median):         {check * 1000:7.1f} ms   target < 300 ms")
    print(f"ratio check / bare interpreter: {check / base:6.2f}x")
    print(f"heavy modules imported:        {heavy or 'none'}")
    ok = check < 0.3 and not heavy.strip(",")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
