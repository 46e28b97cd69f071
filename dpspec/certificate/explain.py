"""A human summary of a certificate: what is protected, against what, the guarantee, the
assumptions and the noise."""

from __future__ import annotations

import textwrap

from dpspec.certificate.model import Certificate, TargetCertificate


def _accuracy(p: dict) -> str:
    """The release's noise distribution and 95 % error bound, where its certificate records them."""
    if "error_95" not in p:
        return ""
    dist = str(p.get("distribution", p.get("noise")))
    unit = " ranks" if p.get("error_unit") == "ranks" else ""
    what = "the sum's " if "count_error_95" in p else ""
    text = (
        f"{what}noise {dist}; |error| ≤ {_fmt(p['error_95'])}{unit} with probability ≥ 95 % per answer, "
        f"E|error| = {_fmt(p['expected_abs_error'])}{unit}"
    )
    if "count_error_95" in p:
        text += (
            f"; the mean's denominator: noise scale {_fmt(p['count_scale'])}, |error| ≤ "
            f"{_fmt(p['count_error_95'])} with probability ≥ 95 %"
        )
    return text


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 64:
        return f"<an integer of {x.bit_length()} bits>"  # `explain --no-verify` shows unverified documents
    return str(x)


def _g4(x) -> str:
    if isinstance(x, float) or (isinstance(x, int) and not isinstance(x, bool) and x.bit_length() <= 64):
        return f"{x:.4g}"
    return _fmt(x)


def summary_line(r: TargetCertificate) -> str:
    g = r.guarantee
    if g.epsilon is not None and g.delta is not None:
        head = f"(ε = {g.epsilon:.4g}, δ = {g.delta:g})"
    elif g.epsilon is not None and g.alpha is None:
        head = f"ε = {g.epsilon:.4g}"
    elif g.epsilon is not None and g.alpha is not None:
        head = f"ε({g.alpha:g}) = {g.epsilon:.4g}"
    else:
        head = r.notion.name
    noise = r.mechanism.parameters
    extra = ""
    if "noise_multiplier" in noise:
        extra = f", σ/C = {_g4(noise['noise_multiplier'])}, {_fmt(noise.get('steps'))} steps"
    elif "sigma" in noise:
        extra = f", σ = {_g4(noise['sigma'])}"
    elif "scale_factor" in noise:
        extra = f", Laplace scale (W/ε)·range = {_g4(noise['scale_factor'])}·range"
    return f"{r.name:<20} {r.kind:<8} {r.notion.name:<15} {head}{extra}"


def explain(cert: Certificate) -> str:
    out = [
        f"dpspec certificate (schema {cert.schema_version}, dpspec {cert.tool.version})",
        f"spec: {cert.spec.source_name}  [{cert.spec.sha256[:23]}…]",
        "",
    ]
    for r in cert.results:
        out.extend(explain_result(r))
        out.append("")
    from dpspec.certificate.verify import printable

    return printable("\n".join(out).rstrip() + "\n")  # no terminal escapes from a certificate's strings


def explain_result(r: TargetCertificate) -> list[str]:
    g = r.guarantee
    p = r.protected
    lines = [f"== {r.kind} `{r.name}` =="]
    lines.append(
        f"Protects: {p.description} — definition `{p.definition}` ({p.unit} unit"
        + (f", {p.relation}" if p.relation else "")
        + ")"
    )
    for a in r.assumptions:
        if a.id.startswith("scope_"):
            lines.extend(
                textwrap.wrap(
                    f"Scope:    {a.statement} [{a.source.paper}, {a.source.ref}]",
                    width=100,
                    subsequent_indent="          ",
                )
            )
    if p.unit == "secret":
        lines.append(
            "Against:  an adversary who sees the output and whose prior is one of the declared worlds; "
            f"notion: {r.notion.description}" + _NOTION_SCOPE.get(_notion_kind(r.notion.name), "")
        )
    else:
        lines.append(
            f"Against:  any adversary who sees the output and knows everything else; notion: {r.notion.description}"
        )
    if g.epsilon is not None and g.delta is not None:
        lines.append(
            f"Guarantee: ε = {g.epsilon:.6g} at δ = {g.delta:g}"
            + (
                f" (optimal Rényi order α = {g.best_alpha:g})"
                if g.best_alpha and not (r.accounting is not None and r.accounting.accountant != "rdp")
                else ""
            )
        )
    elif g.epsilon is not None and g.alpha is not None:
        lines.append(f"Guarantee: ε(α = {g.alpha:g}) = {g.epsilon:.6g}")
    elif g.epsilon is not None:
        lines.append(f"Guarantee: ε = {g.epsilon:.6g} (pure ε: no δ, no Rényi order)")
    if g.target:
        lines.append("Target:    " + ", ".join(f"{k} = {_fmt(v)}" for k, v in g.target.items()))
    if g.reading:
        lines.append(f"Reading:   {g.reading}")
    if g.pairs_notion != "approximate_dp" and g.dp:
        lines.append(f"As {g.pairs_notion}:")
        lines.append("           " + "; ".join(f"ε′ = {d.epsilon:.4g} at δ = {d.delta:g}" for d in g.dp))
    elif len(g.dp) > 1:
        lines.append("Also:      " + "; ".join(f"ε = {d.epsilon:.4g} at δ = {d.delta:g}" for d in g.dp[1:]))
    if r.accounting is not None:
        lines.extend(_accounting_lines(r.accounting, g.delta))
    if r.query is not None:
        lines.extend(_query_lines(r.query))
    m = r.mechanism
    lines.append(
        f"Mechanism: {m.name} — {m.description}"
        + (" (noise calibrated by dpspec)" if m.calibrated else " (noise given by the spec)")
    )
    lines.append("           " + ", ".join(f"{k} = {_fmt(v)}" for k, v in m.parameters.items()))
    acc = _accuracy(m.parameters)
    if acc:
        lines.append("Accuracy:  " + acc)
    lines.append("Theorems:  " + "; ".join(g.theorems))
    lines.append("Assumptions:")
    for a in r.assumptions:
        if a.id.startswith("scope_"):
            continue  # printed under Scope
        lines.extend(
            textwrap.wrap(
                f"- {a.statement} [{a.source.paper}, {a.source.ref}]",
                width=100,
                initial_indent="  ",
                subsequent_indent="    ",
            )
        )
    n = r.numerics
    lines.append(f"Numerics:  {n.method}; error bound {n.abs_error_bound:.2g}; α grid: {n.alpha_grid}")
    if r.sensitivity is not None and r.notion.name == "pufferfish":
        sv = r.sensitivity
        lines.append(
            f"Data:      {sv.records} records {sv.data_sha256[:23]}…; W∞ = {max(sv.deltas):.4g} over "
            f"{len(sv.instance_deltas)} (prior, pair) instances, {sv.aggregation} [{sv.estimator}]"
        )
    elif r.sensitivity is not None:
        sv = r.sensitivity
        lines.append(
            f"Data:      {sv.records} records {sv.data_sha256[:23]}…; Δ over {len(sv.deltas)} slices "
            f"(max {max(sv.deltas):.4g}) [{sv.deltas_sha256[:23]}…], estimator {sv.estimator}"
        )
    if n.calibration:
        lines.append(f"Calibration: {n.calibration}")
    for w in r.warnings:
        lines.append(f"Warning:   {w}")
    if r.execution is not None and r.execution.target == "distributed":
        e = r.execution
        lines.append(f"Runs on:   {e.workers} workers ({e.backend}); {e.noise}; privacy analysis unchanged")
    return lines


_FAMILY = {"rdp": "RDP", "pld": "PLD", "analytic_gaussian": "analytic Gaussian"}


def _notion_kind(name: str) -> str:
    if name == "pufferfish":
        return "pufferfish"
    if name.endswith("srpp"):
        return "sliced"
    return ""


#: what each Pufferfish notion bounds and what it does not, appended to the `Against:` line so that a
#: sliced ε is never read as the same number in an unsliced notion (docs/pufferfish.md, measured case)
_NOTION_SCOPE = {
    "sliced": (
        "; what it bounds: the Rényi divergence of one-dimensional projections (slices) of the output, "
        "averaged (Ave) or mixed (Joint) over the slice profile — a sliced ε is weaker than the same ε in "
        "Rényi Pufferfish privacy of the whole output or in DP (a Bayes attack can exceed what an unsliced "
        "bound of that size allows)"
    ),
    "pufferfish": (
        "; what it bounds: the whole output law, for every set of outputs (pure ε, unsliced) — it is not "
        "a bound for priors, pairs or secrets outside the scenario"
    ),
}


def _accounting_lines(a, delta) -> list[str]:
    """Which accountant certified, every candidate at the spec's δ, the GDP μ and the (ε, δ) curve."""
    at = [c for c in a.candidates if delta is not None and c.delta == delta] or a.candidates[:2]
    cands = "; ".join(f"{_FAMILY[c.accountant]} ε = {c.epsilon:.6g} at δ = {c.delta:g}" for c in at)
    lines = [f"Accountant: {_FAMILY[a.accountant]} certified" + (f" (candidates: {cands})" if cands else "")]
    lines.extend(textwrap.wrap(f"Rule:      {a.rule}", width=100, subsequent_indent="           "))
    if a.gdp_mu is not None:
        lines.append(f"GDP:       μ = {a.gdp_mu:.6g} (exact μ-GDP; {a.tight or 'tight'})"[:300])
    if a.pld is not None:
        pn = a.pld
        lines.append(
            f"PLD:       grid d = {pn.discretization:g}, numerical error {pn.delta_error:.2g} included in δ, "
            f"FFT length {pn.fft_length}, relation {pn.relation}"
        )
    if a.curve:
        lines.extend(
            textwrap.wrap(
                "Curve:     " + "; ".join(f"ε = {p.epsilon:.4g} at δ = {p.delta:g}" for p in a.curve),
                width=100,
                subsequent_indent="           ",
            )
        )
    return lines


def _query_lines(q) -> list[str]:
    cols = ", ".join(f"{c} ∈ [{lo:g}, {hi:g}]" for c, (lo, hi) in zip(q.columns, q.bounds)) or ", ".join(q.columns)
    if q.bins:
        cols += f", {q.bins} bins"
    how = (
        "evaluated by dpspec on the data, every value clamped to its bounds"
        if q.evaluated_on == "data"
        else "answer computed by the caller (release_answer); its sensitivity is declared, not checked"
    )
    text = (
        f"Query:     {q.function}({cols})" + (f" on {q.data}" if q.data else "") + f"; {how}. "
        f"Δ = {q.sensitivity:.6g}: {q.derivation}"
    )
    return textwrap.wrap(text, width=100, subsequent_indent="           ")
