"""The SWM release in ``python -m dpspec.demo`` (``Family.demo``)."""

from __future__ import annotations


def run(tname: str, name: str, mech, rng, quiet: bool) -> None:
    import numpy as np

    from dpspec.data.synthetic import generate

    data = generate("secret_groups", 5000, seed=1)
    if not set(mech.columns) <= set(data.columns):
        return  # a release over a real dataset: compiled and certified above
    group_a = data.select(data.column("group") == "A")
    true = np.asarray(mech.mechanism.query(group_a.matrix(mech.columns)))
    noisy = mech.release(group_a, rng=rng).value
    print(
        f"  run {tname} ({name}): group A's query {np.round(true, 3).tolist()} released as "
        f"{np.round(noisy, 3).tolist()} (σ = {mech.sigma:.3g})"
    )
