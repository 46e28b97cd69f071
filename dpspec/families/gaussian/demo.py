"""The Gaussian release in ``python -m dpspec.demo`` (``Family.demo``)."""

from __future__ import annotations


def run(tname: str, name: str, mech, rng, quiet: bool) -> None:
    import numpy as np

    if mech.query is None or mech.data is None:
        return  # the answer is the caller's (release_answer), or the data arrives at run time
    noisy, report = mech.release(rng=rng)  # the report's counts are private: not printed
    print(
        f"  run {tname} ({name}): {report.query} on the bound data, released {np.round(noisy, 1)} "
        f"(σ = {mech.sigma:.3g}; ε spent {mech.privacy_spent().epsilon:.3g})"
    )
