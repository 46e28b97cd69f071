"""Relational DP-SGD in ``python -m dpspec.demo`` (``Family.demo``)."""

from __future__ import annotations

import time


def run(tname: str, name: str, mech, rng, quiet: bool) -> None:
    if mech.encoder.kind == "mlp":
        _train_relational(tname, name, mech)


def _train_relational(tname: str, name: str, mech, steps: int = 150) -> None:
    """A short relational DP-SGD run; zero-shot link prediction on the held-out nodes vs the untrained encoder."""
    try:
        import torch
    except ImportError:
        print(f"  ({tname}: torch not installed: skipping the relational run)")
        return
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    enc = mech.build_encoder()
    before = mech.evaluate(enc, enc.params())
    tr = mech.trainer(enc, seed=0)
    tr.train(min(steps, mech.steps))
    after = mech.evaluate(enc, tr.params)
    print(
        f"  run {tname} ({name}): {min(steps, mech.steps)} of {mech.steps} certified steps in "
        f"{time.perf_counter() - t0:.1f} s (σ/C = {mech.sigma:.3g}); held-out MRR {before['mrr']:.3f} → "
        f"{after['mrr']:.3f}, Hits@10 {before['hits@10']:.3f} → {after['hits@10']:.3f}"
    )
