"""DP-SGD's ``tune_pld`` hook: a compiled training's certified PLD, for a ``tune`` block's run profile."""

from __future__ import annotations

from typing import Any


def tune_pld(mechanism: Any) -> Any:
    """The training's privacy-loss distribution rebuilt from the compiled mechanism's certified numbers (noise
    multiplier, sample rate, steps, sampling scheme and relation, group size), as the family's compile builds it
    (``dpspec.accounting.pld_select.dpsgd_pld``); None where a number is missing or the scheme has no PLD."""
    from dpspec.accounting.pld_select import dpsgd_pld

    m = mechanism
    try:
        scheme, rel = m.sampling, m.relation
        acc = "poisson" if scheme != "without_replacement" else ("wor_substitution" if rel == "substitution" else "wor")
        return dpsgd_pld(
            m.noise_multiplier,
            m.sample_rate,
            m.steps,
            acc,
            m.group_size,
            m.dataset_size if acc != "poisson" else None,
        )
    except (AttributeError, TypeError, ValueError):
        return None
