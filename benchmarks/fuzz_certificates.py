"""Fuzz ``dpspec verify`` with mutated, resealed certificates for a fixed time (long budget).

    python benchmarks/fuzz_certificates.py --minutes 30             # the long run
    python benchmarks/fuzz_certificates.py --minutes 5 --save       # add every finding to the corpus
    python benchmarks/fuzz_certificates.py --minutes 10 --dpspec-root /path/to/old/checkout
                                                                    # measure another version of dpspec

Each case is a certificate compiled from specs/ or a small generated spec, mutated (tests/fuzz/certmut.py),
resealed (content hash and spec sha256 recomputed) and verified. A finding is a crash (verify raised),
an internal error, a hang (more than --case-seconds), code executed (the canary hook ran), a verified
certificate whose spec names code hooks, or an accepted semantic edit (a verified document that is
neither the original up to bounds rounded up nor dpspec's own certificate of its edited spec:
"ok_reissued" counts the latter, which are not forgeries). The summary is printed as text
and written as JSON (--json). Exit status 1 if anything was found.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0, help="first case seed (cases are seed, seed + 1, …)")
    ap.add_argument("--case-seconds", type=float, default=30.0, help="a case slower than this is a hang")
    ap.add_argument("--save", action="store_true", help="write every finding to tests/fuzz/corpus/certificates/")
    ap.add_argument("--dpspec-root", type=Path, default=None,
                    help="import dpspec from this checkout instead of this one (to measure an older version)")
    ap.add_argument("--json", type=Path, default=None, help="write the summary here")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    if args.dpspec_root is not None:
        sys.path.insert(0, str(args.dpspec_root.resolve()))
    sys.path.insert(1 if args.dpspec_root is not None else 0, str(ROOT))
    import dpspec  # noqa: F401  (the version under test)
    from tests.fuzz import certmut

    t0 = time.perf_counter()
    bases = certmut.base_certificates()
    if not args.quiet:
        print(f"dpspec from {Path(dpspec.__file__).parent}; {len(bases)} base certificates "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    deadline = t0 + 60.0 * args.minutes
    counts: collections.Counter = collections.Counter()
    per_base: collections.Counter = collections.Counter()
    examples: dict[str, list] = collections.defaultdict(list)
    seed, slowest = args.seed, 0.0
    while time.perf_counter() < deadline:
        case = certmut.make_case(seed)
        out = certmut.run_case(case, seconds=args.case_seconds)
        outcome = out.finding or ("rejected" if not out.ok else "ok_reissued" if out.reissued else "ok_verified")
        counts[outcome] += 1
        per_base[case.base] += 1
        slowest = max(slowest, out.seconds)
        if out.finding:
            if len(examples[out.finding]) < 5:
                examples[out.finding].append({"seed": seed, "base": case.base, "mutations": case.mutations,
                                              "detail": out.detail})
            if args.save:
                certmut.save_to_corpus(out)
            if not args.quiet:
                print(f"  seed {seed}: {out.finding} ({case.base}: {'; '.join(case.mutations)[:160]}) {out.detail[:160]}",
                      flush=True)
        seed += 1
        if not args.quiet and (seed - args.seed) % 200 == 0:
            print(f"  {seed - args.seed} cases, {time.perf_counter() - t0:.0f} s: {dict(counts)}", flush=True)
    total = seed - args.seed
    findings = {k: v for k, v in counts.items() if k not in ("ok_verified", "ok_reissued", "rejected")}
    summary = {"cases": total, "seconds": round(time.perf_counter() - t0, 1), "outcomes": dict(counts),
               "findings": findings, "per_base": dict(per_base), "slowest_case_seconds": round(slowest, 2),
               "examples": examples, "dpspec": str(Path(dpspec.__file__).parent)}
    print(f"{total} cases in {summary['seconds']} s; outcomes {dict(counts)}; slowest case {slowest:.2f} s")
    print("findings: " + (", ".join(f"{k} {v}" for k, v in findings.items()) or "none"))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
