"""SRPP-SGD in ``python -m dpspec.demo`` (``Family.demo``)."""

from __future__ import annotations

import time


def run(tname: str, name: str, mech, rng, quiet: bool) -> None:
    if name.endswith("digits_srpp.dps"):
        _train_srpp_digits(tname, mech)


def _train_srpp_digits(tname: str, mech) -> None:
    """SRPP-SGD on sklearn's bundled digits (1,400 training images), all certified steps."""
    try:
        import torch

        from dpspec.srpp import datasets, evaluate_accuracy

        Xtr, ytr, Xte, yte = datasets.digits(n_train=mech.plan.sampling.dataset_size)
    except ImportError:
        print(f"  ({tname}: torch or scikit-learn not installed: skipping the SRPP-SGD run)")
        return
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    t0 = time.perf_counter()
    mech.train(model, torch.from_numpy(Xtr), torch.from_numpy(ytr), seed=0)
    acc = evaluate_accuracy(model, torch.from_numpy(Xte), torch.from_numpy(yte))
    print(
        f"  run {tname} (digits_srpp.dps): {mech.steps} SRPP-SGD steps on sklearn digits in "
        f"{time.perf_counter() - t0:.1f} s, gradient noise std {mech.gradient_noise_std[0]:.3g}; "
        f"test accuracy {acc:.3f}"
    )
