"""The demo: compile every spec in specs/, print each certificate summary, write the
certificates to out/certificates/, verify them, and run the compiled mechanisms on generated data.

    python -m dpspec.demo [--specs specs] [--out out/certificates] [--quiet]

Specs that bind real datasets are compiled when the data root is found (``$DPSPEC_DATA_DIR``
or the shared data folder) and reported as skipped otherwise.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from dpspec.certificate.explain import summary_line


def _has_targets(text: str) -> bool:
    import re

    return re.search(r"^\s*(release|train|compose)\s", text, re.M) is not None


def run(specs_dir: Path, out_dir: Path, quiet: bool = False) -> int:
    import dpspec
    from dpspec.diagnostics import SpecError, render_all

    out_dir.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in specs_dir.rglob("*.dps") if _has_targets(p.read_text(encoding="utf-8")))
    failures = skipped = 0
    compiled_all = {}
    print(f"dpspec {dpspec.__version__} demo: {len(files)} specs in {specs_dir}/\n")
    for p in files:
        rel = p.relative_to(specs_dir.parent) if specs_dir.parent in p.parents else p
        t0 = time.perf_counter()
        spec = dpspec.load(p, name=str(rel))
        if not spec.ok:
            failures += 1
            print(f"✗ {rel}: invalid spec\n{render_all(spec.diagnostics, spec.sources)}\n")
            continue
        try:
            compiled = dpspec.compile(spec)
        except SpecError as e:
            rules = {d.rule for d in e.diagnostics}
            # a real dataset that is not on this machine (and the compositions of the parts that read it)
            if "DPS419" in rules and rules <= {"DPS419", "DPS108"}:
                missing = next(d for d in e.diagnostics if d.rule == "DPS419")
                print(f"- {rel}: skipped ({missing.message}; set DPSPEC_DATA_DIR)\n")
                skipped += 1
                continue
            failures += 1
            print(f"✗ {rel}: compile failed\n{render_all(e.diagnostics, e.sources)}\n")
            continue
        cert_path = out_dir / (p.stem + ".cert.json")
        cert_path.write_text(compiled.certificate.to_json() + "\n", encoding="utf-8")
        rep = dpspec.verify(cert_path, raise_on_error=False)
        dt = time.perf_counter() - t0
        mark = "✓" if rep.ok else "✗"
        failures += not rep.ok
        print(f"{mark} {rel}  →  {cert_path}  ({dt:.2f} s, verified: {'yes' if rep.ok else 'NO'})")
        for r in compiled.certificate.results:
            print(f"    {summary_line(r)}")
        for prob in rep.problems:
            print(f"    verify: {prob}")
        print()
        compiled_all[str(rel)] = compiled
    _run_mechanisms(compiled_all, quiet)
    print(
        f"{len(files) - failures - skipped}/{len(files)} specs compiled and verified"
        + (f", {skipped} skipped (data not available)" if skipped else "")
        + f"; certificates in {out_dir}/"
    )
    return 1 if failures else 0


def _run_mechanisms(compiled_all: dict, quiet: bool) -> None:
    """Use the compiled mechanism objects on generated data (no dataset download needed): each family's
    own demo run (``Family.demo`` in :mod:`dpspec.families`)."""
    import numpy as np

    from dpspec.families import FAMILIES
    from dpspec.families.hooks import load_hook

    rng = np.random.default_rng(0)
    for name, c in compiled_all.items():
        for tname, mech in c.mechanisms.items():
            f = next(
                (f for f in FAMILIES.values() if f.runtime and type(mech) is load_hook(f.runtime, "runtime")), None
            )
            if f is not None and f.demo:
                load_hook(f.demo, "demo")(tname, name, mech, rng, quiet)
    print()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpspec.demo")
    root = Path(__file__).resolve().parents[2]  # dpspec/demo/__init__.py -> the repository
    ap.add_argument("--specs", type=Path, default=root / "specs")
    ap.add_argument("--out", type=Path, default=root / "out" / "certificates")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    return run(args.specs, args.out, args.quiet)
