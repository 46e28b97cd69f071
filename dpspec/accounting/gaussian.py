"""The Gaussian mechanism without subsampling."""

from __future__ import annotations

import numpy as np

from . import _validate as V


def gaussian_rdp(alpha, sigma, sensitivity=1.0):
    """RDP of the Gaussian mechanism: alpha * Delta^2 / (2 sigma^2) (Mironov 2017 Prop 7).

    ``sigma`` is the noise standard deviation and ``sensitivity`` the l2-sensitivity
    Delta (with sensitivity=1, sigma is the noise multiplier).  Exact; the float
    result is rounded up by 4 ulps.  Raises ValueError for alpha <= 1, sigma <= 0 or
    sensitivity < 0.
    """
    a = V.alphas("alpha", alpha)
    s = V.real("sigma", sigma, lo=0.0, lo_open=True)
    d = V.real("sensitivity", sensitivity, lo=0.0)
    with np.errstate(over="ignore"):
        val = a * (d * d) / (2.0 * s * s) * (1.0 + 1e-15)
    return float(val[0]) if np.ndim(alpha) == 0 else val
