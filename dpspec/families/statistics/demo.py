"""The statistics releases in ``python -m dpspec.demo`` (``Family.demo``): each release on its bound data,
with its noise and 95 % error bound."""

from __future__ import annotations


def run(tname: str, name: str, mech, rng, quiet: bool) -> None:
    if mech.data is None:
        return  # the data arrives at run time
    value, report = mech.release(rng=None if mech.noise.startswith("discrete") else rng)  # counts: private
    if isinstance(value, dict):
        shown = ", ".join(f"{k}: {v:.1f}" for k, v in list(value.items())[:6]) + (", …" if len(value) > 6 else "")
        shown = "{" + shown + "}"
    else:
        shown = f"{value:.4g}"
    unit = " ranks" if report.noise == "exponential" else ""
    print(
        f"  run {tname} ({name}): {report.query} released {shown} ({report.noise}, |error| ≤ "
        f"{report.error_95:.3g}{unit} at 95 %; ε spent {mech.privacy_spent().epsilon:.3g})"
    )
