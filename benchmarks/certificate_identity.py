"""Certificate identity across a refactoring: compile every spec in specs/ and compare the
certificates' ``results`` JSON with a snapshot taken at another commit.

A refactoring of the compiler must not move a single certified number. Take a snapshot at the
base commit, refactor, and compare at HEAD:

    python benchmarks/certificate_identity.py snapshot /tmp/base.json     # at the base commit
    python benchmarks/certificate_identity.py compare  /tmp/base.json     # at HEAD

Specs whose data is not on this machine (DPS419) are recorded as skipped on both sides.
Only ``results`` is compared: the certificate header carries the tool version and a content hash
of the whole document, which would differ for unrelated reasons.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snapshot() -> dict[str, object]:
    import re

    import dpspec
    from dpspec.diagnostics import SpecError

    out: dict[str, object] = {}
    for p in sorted((ROOT / "specs").rglob("*.dps")):
        text = p.read_text(encoding="utf-8")
        if re.search(r"^\s*(release|train|compose)\s", text, re.M) is None:
            continue  # an included fragment, no targets
        rel = str(p.relative_to(ROOT))
        try:
            compiled = dpspec.compile(dpspec.load(p, name=rel))
        except SpecError as e:
            out[rel] = {"skipped": sorted({d.rule for d in e.diagnostics})}
            continue
        out[rel] = json.loads(compiled.certificate.to_json())["results"]
        print(f"compiled {rel}", file=sys.stderr)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("snapshot", "compare"):
        print(__doc__)
        return 2
    mode, path = argv
    now = snapshot()
    if mode == "snapshot":
        Path(path).write_text(json.dumps(now, indent=1, sort_keys=True), encoding="utf-8")
        print(f"wrote {path}: {len(now)} specs")
        return 0
    base = json.loads(Path(path).read_text(encoding="utf-8"))
    bad = 0
    for name in sorted(set(base) | set(now)):
        same = json.dumps(base.get(name), sort_keys=True) == json.dumps(now.get(name), sort_keys=True)
        skipped = isinstance(now.get(name), dict)
        print(f"{'=' if same else '≠'} {name}{'  (skipped: data absent)' if skipped and same else ''}")
        bad += not same
    print(f"{len(base)} specs: {'identical' if not bad else f'{bad} differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
