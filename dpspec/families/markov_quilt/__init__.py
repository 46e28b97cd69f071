"""The Markov Quilt Mechanism for Markov chains (Song, Wang & Chaudhuri 2017, "Pufferfish Privacy
Mechanisms for Correlated Data", SIGMOD, §4): ε-Pufferfish privacy for a statistic of a correlated
sequence, with Laplace noise scaled by the best Markov quilt of each node.

:mod:`.mqm` holds the max-influence computations (exact over an explicit class of chains; a bound for
the class of reversible chains with a spectral gap and a minimum stationary probability) and the
calibration; :mod:`.compile` wires them into the language (`prior markov(...)`, `mechanism
markov_quilt`). :mod:`.baselines` holds the comparison baselines of Song et al.'s experiments (GK16 and
their MQMApprox bound) for the benchmark — not certified mechanisms.
"""

from .mqm import (
    MarkovChain,
    MqmCalibration,
    calibrate_mqm,
    calibrate_mqm_reversible,
    group_dp_scale,
    max_influence,
    reversible_influence_bound,
)

__all__ = [
    "MarkovChain",
    "MqmCalibration",
    "calibrate_mqm",
    "calibrate_mqm_reversible",
    "group_dp_scale",
    "max_influence",
    "reversible_influence_bound",
]
