"""DP-SGD in ``python -m dpspec.demo`` (``Family.demo``)."""

from __future__ import annotations

import time


def run(tname: str, name: str, mech, rng, quiet: bool) -> None:
    if tname == "classifier":
        _train_demo(mech, quiet, name)


def _train_demo(mech, quiet: bool, name: str = "") -> None:
    """A few hundred private steps of logistic regression on generated data, vs the same steps non-private."""
    import numpy as np

    try:
        import torch
    except ImportError:
        print("  (torch not installed: skipping the DP-SGD run)")
        return
    n, d = mech.dataset_size or 60000, 20
    g = np.random.default_rng(1)
    w = g.normal(size=d)
    X = g.normal(size=(n, d)).astype(np.float32)
    y = (X @ w + 0.5 * g.normal(size=n) > 0).astype(np.int64)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    torch.manual_seed(0)
    model = torch.nn.Linear(d, 2)
    steps = min(mech.steps, 300)
    t0 = time.perf_counter()
    rep = mech.train(model, Xt, yt, seed=0, steps=steps, progress=False)
    dt = time.perf_counter() - t0
    with torch.no_grad():
        acc = (model(Xt).argmax(1) == yt).float().mean().item()
    print(
        f"  run classifier ({name}): {steps} private steps (of {mech.steps} certified) in {dt:.1f} s, "
        f"mean batch {np.mean(rep.batch_sizes):.0f}, noise std {mech.noise_std:.3g}; training accuracy {acc:.3f}"
    )
