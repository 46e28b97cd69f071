"""GCON in ``python -m dpspec.demo`` (``Family.demo``)."""

from __future__ import annotations

import time


def run(tname: str, name: str, mech, rng, quiet: bool) -> None:
    if getattr(mech.graph, "source", "") != "synthetic":
        return
    t0 = time.perf_counter()
    run = mech.train(rng=0)
    print(
        f"  run {tname} ({name}): GCON trained on the generated graph in {time.perf_counter() - t0:.1f} s; "
        f"test accuracy {run.test_accuracy():.3f} ({run.inference} inference)"
    )
