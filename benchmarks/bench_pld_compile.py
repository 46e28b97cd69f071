"""What `dpspec compile` certifies for the issue-15 DP-SGD examples, and how long compile and verify take.

Each spec in benchmarks/pld_specs/ is compiled and verified by the CLI in a fresh process (so no cache is
shared); the table lists the RDP and PLD candidates at the spec's δ, the certified ε (their minimum), σ and
the wall-clock times. Writes benchmarks/results/pld_compile.md.

    python benchmarks/bench_pld_compile.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPECS = sorted((HERE / "pld_specs").glob("*.dps"))


def run(*args) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dpspec", *args], check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    rows = ["| spec | σ | δ | RDP ε | PLD ε | certified ε (accountant) | compile s | verify s |",
            "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for spec in SPECS:
            out = Path(tmp) / (spec.stem + ".json")
            tc = run("compile", str(spec), "-o", str(out))
            tv = run("verify", str(out))
            r = json.loads(out.read_text())["results"][0]
            g, a = r["guarantee"], r["accounting"]
            c = {x["accountant"]: x["epsilon"] for x in a["candidates"] if x["delta"] == g["delta"]}
            rows.append(f"| {spec.name} | {r['mechanism']['parameters']['noise_multiplier']:.4f} | {g['delta']:g} | "
                        f"{c.get('rdp', float('nan')):.4f} | {c.get('pld', float('nan')):.4f} | "
                        f"{g['epsilon']:.4f} ({a['accountant']}) | {tc:.2f} | {tv:.2f} |")
            print(rows[-1], flush=True)
    text = "# dpspec compile: min(RDP, PLD) on the issue-15 examples\n\n" + "\n".join(rows) + "\n"
    (HERE / "results" / "pld_compile.md").write_text(text)


if __name__ == "__main__":
    main()
