"""The Wasserstein mechanism for ε-Pufferfish privacy (Song, Wang & Chaudhuri 2017, "Pufferfish Privacy
Mechanisms for Correlated Data", SIGMOD, §3): Laplace noise scaled by the ∞-Wasserstein distance
between the query's conditional output laws given each discriminative pair of secrets, maximised
over the scenario's priors.

Modules: :mod:`.compile` (calibration and the certificate), :mod:`.runtime` (the mechanism object),
:mod:`.rules` (check rules DPS430–DPS436), :mod:`.verify` (``dpspec verify``'s re-check). The proof
of the vector form and of the aggregate bound is ``PROOF.md`` beside this file.
"""
