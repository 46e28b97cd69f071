"""ε(α) of full-batch noisy gradient descent: pure numerics (numpy only).

T steps, each the Gaussian mechanism on a gradient sum whose ℓ2 sensitivity is 1 in units of the
clipping norm, with noise N(0, σ² I) in the same units:

    ε(α) = T · α / (2 σ²)        (Mironov 2017, Prop. 7, composed over T steps by Prop. 1)
"""

from __future__ import annotations

import numpy as np


def rdp(alphas: np.ndarray, sigma: float, steps: int) -> np.ndarray:
    """ε(α) at every order of ``alphas`` (exact: a closed form, no numerical error)."""
    return steps * np.asarray(alphas, float) / (2.0 * sigma * sigma)
