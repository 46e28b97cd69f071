"""Pictures of a certificate: the ε(δ) curve, ε against training steps, and the ε(α) curve.

A certificate is read as data only: the file is size-capped, parsed as strict JSON and validated by
the certificate model; only its numbers are plotted, and text taken from it (names, notions) is
shown as plain text (no mathtext). Nothing in it is evaluated.

What each panel shows, per result of the certificate:

- ``curve``: the certified (ε, δ) pairs as markers. Through them, a line computed with
  ``dpspec.accounting`` from the certificate's own numbers: the analytic Gaussian δ(ε) for a
  Gaussian release (from its μ = Δ/σ), else the RDP → (ε, δ) conversion (Balle et al. 2020 Thm 21)
  of the recorded ε(α) curve. Pairs that are not (ε, δ)-DP (sliced Pufferfish) are drawn as recorded
  and labelled as what they are.
- ``steps``: ε after t steps, recomputed from the recorded parameters (σ, sampling rate, group
  size, …) for DP-SGD and relational DP-SGD, with the certified value at the last step as a
  marker. A one-shot mechanism (Gaussian, SWM, GCON) has no steps; SRPP-SGD records its per-step
  caps only as a hash, so its curve cannot be recomputed: the panel says so.
- ``rdp``: the recorded ε(α) curve (Rényi DP, or sliced Rényi Pufferfish), target order marked.

What a family adds (the analytic Gaussian line, DP-SGD's min(RDP, PLD), ε after t steps) is in its
own module of this package, named by its entry in :mod:`dpspec.families` (``curve``,
``steps_curve``); this module names no family.

``panels(cert)`` returns the data (``Panel``/``Series``) without importing matplotlib;
``figure(cert)`` draws them on a matplotlib ``Figure`` (no pyplot, no display needed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from dpspec.errors import CertificateReadError
from dpspec.families import FAMILIES, family
from dpspec.families.hooks import load_hook
from dpspec.plot.model import Panel, Series

MAX_CERTIFICATE_BYTES = 64 * 1024 * 1024
KINDS = ("curve", "steps", "rdp")
FORMATS = (".png", ".svg", ".pdf")
_STEP_POINTS = 200  # points of the ε-vs-steps line
_DELTA_POINTS = 60  # points of the ε(δ) line


# --- reading ---------------------------------------------------------------------------------------


def read_certificate(path: str | Path):
    """A certificate from a file: a regular file of at most ``MAX_CERTIFICATE_BYTES``, strict JSON
    (no duplicate keys, no NaN/Infinity), valid against the certificate model."""
    from pydantic import ValidationError

    from dpspec.certificate.model import Certificate
    from dpspec.certificate.verify import MAX_JSON_DEPTH, _depth

    p = Path(path)
    try:
        if not p.is_file():
            raise CertificateReadError(
                f"cannot read {path}: " + ("no such file" if not p.exists() else "not a regular file")
            )
        with open(p, "rb") as fh:
            data = fh.read(MAX_CERTIFICATE_BYTES + 1)
    except OSError as e:
        raise CertificateReadError(f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > MAX_CERTIFICATE_BYTES:
        raise CertificateReadError(f"{path} is larger than {MAX_CERTIFICATE_BYTES // 2**20} MiB: not a certificate")
    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise CertificateReadError(f"{path} is not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise CertificateReadError(f"{path} is not JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except ValueError as e:
        raise CertificateReadError(f"{path}: {e}") from None
    except RecursionError:  # e.g. 100,000 nested brackets: refused like `dpspec verify` refuses them
        raise CertificateReadError(
            f"{path} is nested more than {MAX_JSON_DEPTH} levels deep: not a certificate"
        ) from None
    if _depth(obj) > MAX_JSON_DEPTH:
        raise CertificateReadError(f"{path} is nested more than {MAX_JSON_DEPTH} levels deep: not a certificate")
    try:
        return Certificate.model_validate(obj)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top level)"
        raise CertificateReadError(f"{path} is not a dpspec certificate: {where}: {first['msg']}") from None


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"duplicate key {dup!r}")
    return dict(pairs)


def _no_constant(name):
    raise ValueError(f"{name} is not a number a certificate may hold")


# --- the data of each panel ----------------------------------------------------------------------


def panels(
    cert,
    kinds: Sequence[str] = KINDS,
    targets: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Panel]:
    """One panel per (result, kind), results in certificate order. Raises KeyError for an unknown target."""
    results = list(cert.results)
    if targets:
        known = {r.name for r in results}
        unknown = [t for t in targets if t not in known]
        if unknown:
            raise KeyError(", ".join(unknown))
        results = [r for r in results if r.name in set(targets)]
    build = {"curve": _curve_panel, "steps": _steps_panel, "rdp": _rdp_panel}
    out = []
    for r in results:
        for k in kinds:
            if k == "steps" and progress is not None and r.mechanism.name in _STEPPED:
                progress(f"{r.name}: recomputing ε after each step")
            out.append(build[k](r))
    return out


def _pairs_are_dp(r) -> bool:
    return r.guarantee.pairs_notion == "approximate_dp"


def _curve_panel(r) -> Panel:
    g = r.guarantee
    dp = _pairs_are_dp(r)
    common = dict(
        target=r.name,
        kind="curve",
        title=f"{r.name}: ε(δ)",
        xlabel="δ",
        ylabel="ε" if dp else "ε′ (sliced Pufferfish)",
        xlog=True,
    )
    if not g.dp:
        why = g.pairs_notion[len("none: ") :] if g.pairs_notion.startswith("none: ") else g.pairs_notion
        return Panel(**common, note=f"no (ε, δ) pairs: {_text(why, 300)}")
    deltas = tuple(p.delta for p in g.dp)
    points = Series(
        "certified (ε, δ)" if dp else "certified (ε′, δ), not DP",
        deltas,
        tuple(p.epsilon for p in g.dp),
        certified=True,
    )
    line, note = _recomputed_epsilon_of_delta(r, deltas) if dp else (None, None)
    if not dp:
        note = _text(g.pairs_notion, 300)
    extra: tuple[Series, ...] = ()
    a = getattr(r, "accounting", None)
    if dp and a is not None and a.curve and a.accountant != "analytic_gaussian":
        fam = "min(RDP, PLD) per δ" if a.pld is not None else "RDP"
        extra = (
            Series(
                f"certified curve, {fam}",
                tuple(p.delta for p in a.curve),
                tuple(p.epsilon for p in a.curve),
                certified=True,
            ),
        )
    return Panel(**common, series=(points,) + extra + ((line,) if line else ()), note=note)


def _delta_grid(deltas: Sequence[float]) -> np.ndarray:
    lo, hi = min(deltas) / 100.0, min(0.5, max(deltas) * 100.0)
    return np.unique(np.concatenate([np.geomspace(lo, hi, _DELTA_POINTS), deltas]))


def _recomputed_epsilon_of_delta(r, deltas) -> tuple[Series | None, str | None]:
    """The family's own line (``Family.curve``) if it has one for this result, else the RDP → (ε, δ)
    conversion of the recorded ε(α) curve."""
    g = r.guarantee
    grid = _delta_grid(deltas)
    f = family(r.mechanism.name)
    try:
        if f is not None and f.curve:
            line = load_hook(f.curve, "curve")(r, grid, deltas)
            if line is not None:
                return line, None
        if g.rdp_alphas:
            return _rdp_line(r, grid), None
    except (ValueError, TypeError, ArithmeticError) as e:
        return None, f"cannot recompute ε(δ): {_text(str(e))}"
    return None, "no ε(α) curve recorded: the certified pairs only"


def _rdp_line(r, grid: np.ndarray, paid: float = 0.0) -> Series:
    """ε(δ) from the certified ε(α) curve, at δ − ``paid`` (a probability the family pays from δ first)."""
    from dpspec.accounting.conversion import rdp_to_dp

    g = r.guarantee
    grid = grid[grid > paid]
    eps = [rdp_to_dp(g.rdp_alphas, g.rdp_epsilons, float(d) - paid)[0] for d in grid]
    return Series("from the certified ε(α) curve (Balle et al. 2020, Thm 21)", tuple(grid), tuple(eps), False)


# RDP-accounted step-by-step trainings (dpspec.families: `stepped`), whose ε after t steps is recomputed
_STEPPED = tuple(k for k, f in FAMILIES.items() if f.stepped)


def _steps_panel(r) -> Panel:
    g, mech = r.guarantee, r.mechanism.name
    rdp_target = r.notion.name == "renyi_dp" and g.alpha is not None
    if g.alpha is not None and r.notion.name != "approximate_dp":
        ylabel = f"ε(α = {g.alpha:g})" + (" (Rényi DP)" if rdp_target else "")
    else:
        ylabel = f"ε at δ = {g.delta:g}" if g.delta else "ε"
    common = dict(target=r.name, kind="steps", title=f"{r.name}: ε vs steps", xlabel="steps", ylabel=ylabel)
    steps = r.mechanism.parameters.get("steps")
    if r.kind == "compose":
        return Panel(**common, note="a composition: its parts' panels show their steps")
    f = family(mech)
    if f is None or not f.steps_curve:
        return Panel(**common, note=f"{mech} is a one-shot mechanism: ε does not depend on a number of steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1 or g.epsilon is None:
        return Panel(**common, note="no step count or ε recorded")
    certified = Series("certified", (float(steps),), (g.epsilon,), certified=True)
    return load_hook(f.steps_curve, "steps_curve")(r, common, certified, steps, rdp_target)


def _step_counts(steps: int) -> np.ndarray:
    """The step counts t at which ε after t steps is recomputed (at most ``_STEP_POINTS``)."""
    return np.unique(np.linspace(1, steps, min(steps, _STEP_POINTS)).round().astype(np.int64))


def _agreement(recomputed: float, certified: float) -> str | None:
    if math.isclose(recomputed, certified, rel_tol=1e-9, abs_tol=1e-12):
        return None
    return f"recomputed ε = {recomputed:.6g} after the last step differs from the certified {certified:.6g}"


def _rdp_panel(r) -> Panel:
    g = r.guarantee
    pufferfish = r.notion.name.endswith("srpp")
    common = dict(
        target=r.name,
        kind="rdp",
        title=f"{r.name}: ε(α)",
        xlabel="order α",
        ylabel="ε(α) (sliced Rényi Pufferfish)" if pufferfish else "ε(α) (Rényi DP)",
        xlog=True,
        ylog=True,
    )
    if not g.rdp_alphas:
        return Panel(**common, note=f"no ε(α) curve recorded: {_text(r.numerics.alpha_grid)}")
    series = [Series("certified ε(α)", tuple(g.rdp_alphas), tuple(g.rdp_epsilons), certified=True)]
    alpha = g.alpha if g.alpha is not None else g.target.get("alpha")
    if isinstance(alpha, (int, float)) and alpha in g.rdp_alphas:
        i = g.rdp_alphas.index(alpha)
        series.append(Series(f"target order α = {alpha:g}", (alpha,), (g.rdp_epsilons[i],), certified=True))
    return Panel(**common, series=tuple(series))


def _text(s: str, limit: int = 120) -> str:
    """Certificate text shown in a figure: one line, bounded, dollar signs escaped (no mathtext)."""
    s = " ".join(str(s).split())
    s = s if len(s) <= limit else s[: limit - 1] + "…"
    return s.replace("$", r"\$")


# --- drawing -----------------------------------------------------------------------------------------


def figure(
    cert,
    kinds: Sequence[str] = KINDS,
    targets: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
):
    """A matplotlib Figure: one row per result, one column per kind (requires matplotlib)."""
    from matplotlib.figure import Figure

    ps = panels(cert, kinds, targets, progress)
    cols = len(kinds)
    rows = max(1, len(ps) // cols)
    fig = Figure(figsize=(4.6 * cols, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, panel in zip(axes.flat, ps):
        _draw(ax, panel)
    fig.suptitle(_text(f"{Path(cert.spec.source_name).name} — dpspec certificate", 80), fontsize=11)
    return fig


def _draw(ax, panel: Panel) -> None:
    ax.set_title(_text(panel.title, 60), fontsize=10)
    if panel.series:
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
    recomputed = any(not s.certified for s in panel.series)
    for s in panel.series:
        if s.certified:  # the certificate's own numbers: markers (joined when nothing else is drawn)
            ax.plot(
                s.x,
                s.y,
                "o" if recomputed or len(s.x) < 2 else "o-",
                ms=5 if len(s.x) < 20 else 3,
                label=_text(s.label, 60),
                zorder=3,
            )
        else:
            ax.plot(s.x, s.y, "-", lw=1.5, label=_text(s.label, 60), zorder=2)
    if panel.series:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        if panel.xlog:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks crowd short log ranges
            if panel.kind == "rdp":  # orders are read as plain numbers: 2, 8, 32, …
                ax.xaxis.set_major_locator(LogLocator(base=2, numticks=9))
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        if panel.ylog and all(v > 0 for s in panel.series for v in s.y):
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if panel.note:
        ax.text(
            0.5,
            0.5 if not panel.series else 0.02,
            _wrap(panel.note),
            transform=ax.transAxes,
            ha="center",
            va="center" if not panel.series else "bottom",
            fontsize=7,
            color="0.3",
            wrap=True,
        )


def _wrap(s: str, width: int = 55) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(s, width))


def save(
    cert,
    output: str | Path,
    kinds: Sequence[str] = KINDS,
    targets: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Draw and write ``output`` (.png, .svg or .pdf)."""
    out = Path(output)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"cannot write {out.suffix or 'a file without extension'}: use one of {', '.join(FORMATS)}")
    fig = figure(cert, kinds, targets, progress)
    fig.savefig(out, dpi=130)
    return out


__all__ = [
    "Panel",
    "Series",
    "CertificateReadError",
    "read_certificate",
    "panels",
    "figure",
    "save",
    "KINDS",
    "FORMATS",
    "MAX_CERTIFICATE_BYTES",
]
