#!/usr/bin/env python3
"""Few-step PLD accounting with a large epsilon (issue 22): the automatic grid sized to the answer
against the fixed 1e-4 grid it replaced, in the same run.

Cases: Poisson group DP-SGD, delta 1e-5 -- (sigma 0.344, q 0.522, T 3, K 9) and
(sigma 0.457, q 0.0182, T 2, K 16), whose FFTs were 3.5 M and 4.1 M points on the 1e-4 grid.
Printed per case: epsilon, grid, FFT length and process time of each, and the ratios
(time new / old, epsilon new / old - 1). ``--full`` adds delta 1e-10 and two more groups.

Run:  python benchmarks/bench_pld_few_steps.py [--full]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dpspec.accounting import pld_dpsgd  # noqa: E402
from dpspec.accounting.pld import _pmfs_cached  # noqa: E402

QUICK = [(0.344, 0.522, 3, 9, 1e-5), (0.457, 0.0182, 2, 16, 1e-5)]
MORE = [(0.344, 0.522, 3, 9, 1e-10), (0.457, 0.0182, 2, 16, 1e-10), (0.5, 0.1, 4, 8, 1e-6), (0.6, 0.3, 2, 12, 1e-6)]


def run(sigma, q, steps, k, delta, d=None):
    _pmfs_cached.cache_clear()
    t0 = time.process_time()
    r = pld_dpsgd(sigma, q, steps, group_size=k, discretization=d).epsilon(delta)
    return r, time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    print(
        "| sigma | q | T | K | delta | eps (sized grid) | d | FFT | s | eps (1e-4 grid) | FFT | s | time ratio "
        "| eps new/old - 1 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for sigma, q, steps, k, delta in QUICK + (MORE if args.full else []):
        new, tn = run(sigma, q, steps, k, delta)
        old, to = run(sigma, q, steps, k, delta, 1e-4)
        print(
            f"| {sigma} | {q} | {steps} | {k} | {delta:g} | {new.epsilon:.6f} | {new.discretization:g} | "
            f"{new.fft_length} | {tn:.3f} | {old.epsilon:.6f} | {old.fft_length} | {to:.2f} | {tn / to:.4f} | "
            f"{new.epsilon / old.epsilon - 1:.2e} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
