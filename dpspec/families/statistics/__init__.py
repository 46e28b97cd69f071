"""The statistics releases: counts, sums, means and quantiles of tabular data, with Laplace, discrete
Laplace, Gaussian or discrete Gaussian noise (``mechanism auto`` picks the most accurate), grouped over
declared keys or by DP partition selection, filtered by ``where``, and sharing one budget through
``compose … split``. Modules: ``accountant`` (numbers), ``compile`` (certificate, composition), ``split``
(joint calibration), ``runtime`` (the release object), ``rules``, ``audit``; derivations in PROOF.md."""


def docs() -> list[str]:
    """This family's section of docs/language.md."""
    return [
        "## Statistics releases",
        "",
        "`mechanism laplace`, `discrete_laplace`, `discrete_gaussian` or `auto` (the default when a release has no "
        "`mechanism`: the noise with the lowest expected |error| at the release's budget — discrete Laplace for "
        "counts, Laplace for sums and means, or Gaussian where it is more accurate) release a statistic of the "
        "data that dpspec evaluates itself: it filters, groups and clamps, so Δ is derived, never declared. Unit: "
        "`record` with add/remove. Each certificate records the noise distribution and its 95 % error bound "
        "(`explain` prints them; `release()` returns them in its report). `release(data)` takes a dict of columns, "
        "a pandas or polars DataFrame, a polars LazyFrame, which is evaluated out of core by polars' streaming "
        "engine (counts and integer sums aggregated in the engine; float sums, means and quantiles batch by "
        "batch), or a Dask DataFrame, evaluated partition by partition; both give the in-memory results bit for "
        "bit (integer counts, exact sums rounded once, quantile utilities, combined across partitions).",
        "",
        "| query | one record moves | noise |",
        "|---|---|---|",
        "| `count()` | the count by 1 | pure ε-DP (Laplace, discrete Laplace), μ-GDP (Gaussian), or the discrete "
        "Gaussian's exact privacy profile (its (ε, δ) points; Δ²/(2σ²)-zCDP) |",
        "| `sum(c, bounds = [lo, hi])` | the sum by max(\\|lo\\|, \\|hi\\|) | as above (discrete: integer bounds) |",
        "| `mean(c, bounds = [lo, hi])` | with `dataset_size n`: the sum / n; without: a noisy sum over a noisy "
        "count, each with half the budget, clamped to the bounds | as above |",
        "| `quantile(c, q = 0.5, bounds = [lo, hi])` | the rank utility by ≤ 1 | exponential mechanism over the "
        "integers of integer bounds (≤ 1001) or 1001 grid points; 95 % bound in ranks (Dwork & Roth Thm 3.11) |",
        "",
        'Options: `by = column, keys = ["a", "b"]` gives one answer per declared key (a record touches one '
        "group: Δ of the vector is that of one group; rows of other groups are dropped); `by` without `keys` "
        "(counts only) finds the groups by DP partition selection — a key is released when its noisy count "
        'reaches 1 + b·ln(1/(2δ)), which spends the release\'s δ; `where = sex == "Female"` or '
        "`where = age >= 30` (`==`, `!=`, `<`, `<=`, `>`, `>=`; categories with `==`/`!=` only) keeps the rows that "
        "satisfy it.",
        "",
        "```",
        'release race_counts { query count(by = race, keys = ["White", "Black", "Other"]) }',
        'release women_hours { query mean(hours-per-week, bounds = [0, 99], where = sex == "Female") }',
        "compose survey {",
        "  parts     [race_counts, women_hours]",
        "  guarantee dp(epsilon = 1, delta = 1e-6)",
        "  split     optimal   # or: evenly; or weights [1, 2]",
        "}",
        "```",
        "",
        "`split` (compose blocks): the parts carry no guarantee of their own (one that has is DPS152) and are "
        "calibrated together so that their composition meets the target: the certified ε is the smaller of "
        "basic composition (pure parts add, Dwork & Roth Thm 3.16; μ-GDP parts combine as √Σμ², Dong, Roth & "
        "Su Cor. 3.3; with discrete Gaussian parts, those and the Gaussian ones in zCDP, Canonne, Kamath & "
        "Steinke 2020 Thm 4 and Prop. 12) and PLD composition of every part's dominating pair (Zhu, Dong & "
        "Wang 2022 Thm 10; Laplace and Gaussian parts together, ~3 % more budget per part than basic "
        "composition; a discrete Gaussian by its exact pair, the mass beyond its truncated support on the "
        "loss +∞ with a proven bound; a partition selection by the four-output pair of its (ε, δ), Kairouz, "
        "Oh & Viswanath 2015 Thm 2.4), within 0.1 % of the target. The composition's certificate names each "
        "part's dominating pair and its theorem, and `verify` recompiles them and re-evaluates the discrete "
        "Gaussians' truncation bounds (dpspec/families/statistics/PROOF.md §3.3–§3.5). `evenly` gives each "
        "part the same ε; `weights [w1, …]` (or `weights(w1, …)`) ε_i ∝ w_i; `optimal` ε_i ∝ a_i^{1/3}, which "
        "minimises the summed expected squared error *relative to each statistic's sensitivity* (Σ_i "
        "E[err_i²]/Δ_i², a quantile's in ranks) — exactly for pure noise. See specs/adult_statistics.dps.",
        "",
    ]
