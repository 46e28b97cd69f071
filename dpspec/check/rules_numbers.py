"""Compile-stage rules about the numbers a certificate can hold (DPS205–DPS207).

They are raised while calibrating (``dpspec.compiler.compile``: ``check_magnitudes`` and
``check_certified_numbers``) and listed here so that ``dpspec rules`` and docs/rules.md show them.
"""

from __future__ import annotations

from dpspec.check.framework import register_front_end

_UNIT = "privacy people { unit record }\n"


def _release(settings: str) -> str:
    return _UNIT + f"release r {{ mechanism gaussian  {settings} }}\n"


register_front_end(
    "DPS205",
    "a number outside the range dpspec computes in",
    "compile",
    bad=_release("sensitivity 1.0  noise gaussian(sigma = 1e-200)  guarantee dp(delta = 1e-6)"),
    good=_release("sensitivity 1.0  noise gaussian(sigma = 0.5)  guarantee dp(delta = 1e-6)"),
    explanation="Every positive scale or target — the target ε, σ, the noise multiplier, the clip norm C, a "
    "sensitivity, a query bound and the width of the bounds — must lie in [1e-100, 1e100], so that their squares, "
    "products and quotients stay normal doubles. Outside it a noise scale can underflow to 0 (a noise-free "
    "certificate) or a privacy loss overflow to infinity; rescale the units instead.",
)
register_front_end(
    "DPS206",
    "a target finer than the accountant's numerical error",
    "compile",
    bad=_release("sensitivity 1.0  guarantee dp(epsilon = 1e-12, delta = 1e-6)"),
    good=_release("sensitivity 1.0  guarantee dp(epsilon = 1e-3, delta = 1e-6)"),
    explanation="The (ε, δ) accountants state their numerical error (up to 1e-10 for the analytic Gaussian); a "
    "certified ε is that much above the exact value. A target ε below 1e-9 cannot be certified to its precision.",
)
register_front_end(
    "DPS207",
    "a certified number that overflows, underflows or would certify zero noise",
    "compile",
    bad=_release("sensitivity 1e100  noise gaussian(sigma = 1e-100)  guarantee dp(delta = 1e-6)"),
    good=_release("sensitivity 1e100  noise gaussian(sigma = 1e100)  guarantee dp(delta = 1e-6)"),
    explanation="A safety net behind every mechanism: the compiler refuses to emit a certificate holding a "
    "non-finite number, a zero or subnormal noise scale for a nonzero sensitivity, or a certified ε of 0 for a "
    'nonzero sensitivity (a noise-free, "perfectly private" release is always a numerical accident). '
    "Each number is fine on its own here; their combination is not.",
)
