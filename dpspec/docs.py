"""Generate the reference docs from the code's own tables, so docs and code cannot drift.

    python -m dpspec.docs      # rewrites docs/rules.md and docs/language.md

The test-suite fails when the committed files differ from what this prints.
"""

from __future__ import annotations

import re
from pathlib import Path

from dpspec.check import catalogue

CATALOGUE = catalogue()  # every rule id, the accountants' included


def _code(text: str) -> str:
    # control characters (DPS006's example holds a NUL byte) are shown escaped: a raw one would
    # make the markdown file binary to git and invisible to a reader
    shown = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text.rstrip("\n"))
    return "```\n" + shown + "\n```"


def rules_markdown() -> str:
    out = [
        "# Rule catalogue",
        "",
        "Every diagnostic dpspec prints names one of these rules. Each rule below shows a spec that raises it",
        "and a corrected spec that does not; the test-suite runs both. `dpspec rules ID` prints one rule.",
        "",
        "| id | severity | stage | title |",
        "|---|---|---|---|",
    ]
    for r in sorted(CATALOGUE.values(), key=lambda r: r.id):
        out.append(f"| [{r.id}](#{r.id.lower()}) | {r.severity} | {r.stage} | {r.title} |")
    out.append("")
    for r in sorted(CATALOGUE.values(), key=lambda r: r.id):
        out += [f"## {r.id}", "", f"**{r.title}** ({r.severity}, raised by the {r.stage} stage)", ""]
        if r.explanation:
            out += [r.explanation, ""]
        out += ["Raised by:", "", _code(r.bad), "", "Fixed:", "", _code(r.good), ""]
    return "\n".join(out).rstrip() + "\n"


def language_markdown() -> str:
    from dpspec.lower.lowering import (
        BLOCK_DOCS,
        BLOCK_SETTINGS,
        CLIPPINGS,
        DATA,
        GUARANTEES,
        NEGATIVES,
        NOISES,
        QUERIES,
        SAMPLINGS,
        SLICES,
        UNITS,
        WORLDS,
    )
    from dpspec.mechanisms.registry import MECHANISMS

    out = [
        "# The dpspec language reference",
        "",
        "Generated from the compiler's own tables (`python -m dpspec.docs`). A guided tour with complete",
        "examples is in the README; every file in `specs/` is compiled by the tests.",
        "",
        "## Lexical structure",
        "",
        '- A file is a sequence of `use "other.dps"` lines and blocks `kind name { settings }`.',
        "- A setting is `key value`. Newlines are not significant: `unit node  graph cora` is two settings.",
        "- Values: names (`record`, `Asian-Pac-Islander` — dashes allowed inside), numbers (`7`, `1e-6`,",
        '  `-2.5`, `5%` = 0.05), strings (`"adult/adult.data"`), sets `{a, b}`, lists `[1, 2]`, tuples',
        "  `(a, b)`, calls `dp(epsilon = 1, delta = 1e-6)` with positional and keyword arguments,",
        "  membership `race in {White, Black}` and named sub-blocks `coupled { positive ... negative ... }`.",
        "- Comments run from `#` to the end of the line. `nan` and `inf` are rejected, and so is a whole",
        "  number above 2^53 = 9007199254740992 (a float cannot hold it exactly; write `9.1e15` if an",
        "  approximate value is meant).",
        '- `use "path.dps"` makes that file\'s `scenario` and `privacy` blocks visible; its releases and',
        "  trainings are not compiled again. Cycles are errors (DPS005). See *Includes* below.",
        "- `dpspec fmt` lays a spec out canonically and keeps every comment and blank-line group; the",
        "  formatted spec compiles to the same IR. Certificates embed the comment-free canonical text.",
        "- Every size is bounded; see *Limits* below.",
        "",
        "## Includes",
        "",
        "```",
        'use "shared/people.dps"          # relative to this file\'s folder',
        'use "../shared/people.dps"       # fine if it stays inside the root spec\'s folder',
        "```",
        "",
        "An included path is relative to the including file, uses `/` between folders and names a `.dps`",
        "file; absolute paths are refused. Resolved, symbolic links followed, it must stay inside the",
        "*include root*: the folder of the spec given to dpspec (for a spec given as text, `base_dir` or the",
        "working folder). Only regular files are read (never a folder, FIFO or device), each at most the",
        "`source_bytes` limit. A symbolic-link loop, a missing file or a refused one is DPS004 at the `use`",
        "line. A spec recompiled from a certificate is self-contained (its canonical text is flattened), and",
        "`dpspec.loads(text, includes=False)` refuses every `use`.",
        "",
        "## Data paths",
        "",
        "```",
        'scenario s { data csv("student/student-mat.csv", separator = ";")  secret sex }',
        "```",
        "",
        "A data path is relative to the data root (`$DPSPEC_DATA_DIR`, else the shared data folder), uses",
        "`/` between folders and has no `..` part: `dpspec check` reports any other path as DPS010, e.g.",
        '`csv("/etc/passwd")`. When compiling, the path must resolve, symbolic links followed, to a regular',
        "file inside the data root, no larger than the `data_file_bytes` limit; a folder, FIFO, device or",
        "a link out of the root is DPS010 and its content is never read or quoted. The built-in loaders",
        "(`schema = adult`, `graph cora`, …) read through the same checks.",
        "",
        "## Limits",
        "",
        "Every size that drives memory or work is checked before anything is allocated; a size above its",
        "limit is DPS009, at the value, with the limit and the variable that raises it. Each limit can be",
        "changed for one run with its environment variable (a value that is not a positive whole number is",
        "ignored), e.g. `DPSPEC_MAX_SLICES=1000000 dpspec compile big.dps`. `work` is an estimate of a compile",
        "step's operations (the sliced sensitivity: slices × records × (dimension + pair instances + log",
        "records)); `memory_mb` caps what one compile allocates beyond what dpspec itself holds (an",
        "allocation past it fails cleanly, as DPS009).",
        "",
        "| limit | default | variable | what is counted |",
        "|---|---|---|---|",
    ]
    from dpspec.limits import LIMITS

    for lim in LIMITS.values():
        out.append(f"| `{lim.name}` | {lim.default:,} | `{lim.env}` | {lim.what} |")
    out += ["", "## Blocks", ""]
    for kind, settings in BLOCK_SETTINGS.items():
        out += [
            f"### `{kind}` — {BLOCK_DOCS[kind]}",
            "",
            "| setting | required | meaning | example |",
            "|---|---|---|---|",
        ]
        for s in settings:
            al = f" (also: {', '.join(s.aliases)})" if s.aliases else ""
            out.append(f"| `{s.key}`{al} | {'yes' if s.required else ''} | {s.doc} | `{s.example}` |")
        out.append("")

    def table(title, tab, intro=""):
        lines = [f"### {title}", ""]
        if intro:
            lines += [intro, ""]
        lines += ["| form | arguments | meaning | example |", "|---|---|---|---|"]
        for name, sig in tab.items():
            args = ", ".join((p.name + ("" if p.required else "?")) for p in sig.params)
            if sig.variadic is not None:
                args = (f"{sig.variadic_name}…, " + args) if args else f"{sig.variadic_name}…"
            ex = sig.example.replace("|", "\\|")
            doc = (getattr(sig, "doc", "") or "").replace("|", "\\|")
            lines.append(f"| `{name}` | {args or '—'} | {doc} | `{ex}` |")
        return lines + [""]

    out += [
        "## Values of settings",
        "",
        "`?` marks an optional argument. A bare name is a call with no arguments. A setting's value written "
        "`name [a, b, …]` is the call `name([a, b, …])` (`split weights [1, 1, 2]` is `split weights(1, 1, 2)`).",
        "",
    ]
    out += table(
        "`guarantee`",
        GUARANTEES,
        "Omit `epsilon` to report ε for noise given in the spec; give it to "
        "calibrate the noise. The `sa_` variants are on-average notions and are labelled so.",
    )
    out += table("`unit` (privacy blocks)", UNITS)
    out += table(
        "`sampling`",
        SAMPLINGS,
        "Also `coupled { positive poisson(...)  negative SAMPLER }` for relational learning, with negatives:",
    )
    out += table("negative samplers (inside `coupled`)", NEGATIVES)
    out += table("`clipping`", CLIPPINGS)
    out += table("`noise`", NOISES, "In `train` blocks `noise_multiplier 1.1` is a shortcut.")
    out += table("`query`", QUERIES)
    out += table("`slices`", SLICES)
    out += table("`data`", DATA)
    out += table("`prior` (one or a list)", WORLDS)
    from dpspec.lower.lowering import EXECUTIONS

    out += table(
        "`execution` (train blocks)",
        EXECUTIONS,
        "Where a training runs, never what it guarantees: `backend` is `gloo` (CPU, the default) or "
        "`nccl` (GPUs). The certificate records the target and every other number is computed without "
        "it. Example: `execution distributed(workers = 2, backend = gloo)`, launched with `torchrun "
        "--nproc_per_node=2` (see docs/distributed.md). DP-SGD-family mechanisms only (DPS804).",
    )
    from dpspec.lower.lowering import DISCREPANCIES, ENCODERS, LOSSES, LR_SCHEDULES, PROPAGATIONS, SPLITS

    out += table(
        "`discrepancy` (srpp_sgd)",
        DISCREPANCIES,
        "How many records the secret can change between the coupled worlds (Zhang & Vorobeychik App. D); "
        "with `noise_units gradient|parameter` and `accountant huc|sa_huc|amplified` (default: `sa_huc` "
        "for `sa_…` guarantees, else `huc`).",
    )
    out += table("`lr_schedule` (srpp_sgd)", LR_SCHEDULES)
    out += table("`encoder`", ENCODERS, "GCON's edge-free encoder, or relational DP-SGD's node encoder.")
    out += table("`split`", SPLITS)
    out += table("`loss`", LOSSES)
    out += table("`propagation` (gcon)", PROPAGATIONS)
    from dpspec.lower.lowering import DRAWS, RANGES, RUNS, SELECTS, TUNABLE

    out += table(
        "`runs` (tune blocks)",
        RUNS,
        "How many training runs a tuning makes; a bare number is a fixed "
        "count. A random count (Poisson or truncated negative binomial) makes the selection cheap: the "
        "whole procedure costs a few times one run's ε, not the sum (see docs/tuning.md).",
    )
    out += table(
        "`select` (tune blocks)",
        SELECTS,
        "`on = private` (default): the score is a sum of per-record "
        "values in [0, 1] released with Gaussian noise (`score_noise`, its standard deviation; default: "
        "the smallest with at most 10 % of a run's RDP) and covered by the certificate; `on = public`: "
        "computed on public data, free, and stated so. `release_score = true` outputs the best run's "
        "noisy score too.",
    )
    out += table("`draw` (tune blocks)", DRAWS)
    out += table(
        "candidate values: ranges (tune blocks)",
        RANGES,
        "Inside `candidates { ... }` each tunable "
        f"setting ({', '.join(f'`{k}`' for k in TUNABLE)}) takes a list of values as its train-block "
        "setting would take one, or (for numbers) a range, e.g. `candidates { learning_rate log_range(0.01, "
        "1, count = 5)  clipping [flat(C = 0.5), flat(C = 1.0)] }`. The candidates are the grid (product) "
        "of the lists.",
    )
    out += [
        "### `degree_cap` (relational_dpsgd)",
        "",
        "`degree_cap 5`: every node keeps at most K edges "
        "before training (removing a node then changes at most K capped edges).",
        "",
    ]
    out += [
        "### `secret`",
        "",
        "`secret race in {White, Black, Other}`, `secret quantile_bins(G3, bins = 5)`, or "
        "`secret race` (values read from the data); a predicate on a record, `secret disease = num > 0` "
        "(values true/false); membership, `secret member(record)`; or a secret about the whole dataset, "
        '`secret share = fraction(where = sex == "Female") in {0.45, 0.55}` — the proportion of records '
        "satisfying the predicate is one of the listed values (attribute privacy, Zhang, Ohrimenko & Cummings "
        "2022; `mechanism wasserstein`, `output aggregate`, `prior empirical` read as i.i.d. records; "
        "`specs/group_share_attribute.dps`, docs/pufferfish.md) — or the mean of a numeric column, "
        "`secret avg_age = mean(age, bounds = [17, 90]) in {40, 45}` (`prior empirical` read as the data's law "
        "with the column shifted to each candidate mean). Threshold forms (`mean(age) > 40`) are refused "
        "(DPS444: no useful bound).",
        "",
        "### `pairs`",
        "",
        "`pairs all_distinct` (default) or `pairs [(White, Black), (White, Other)]`.",
        "",
        *release_sections(),
        *family_sections(),
        "## Mechanisms",
        "",
        "| mechanism | block | protects | certifies | available | source |",
        "|---|---|---|---|---|---|",
    ]
    for m in MECHANISMS.values():
        out.append(
            f"| `{m.name}` | {m.block} | {', '.join(m.units)} | {', '.join(m.notions)} | "
            f"{'yes' if m.available else 'not yet'} | {m.source} |"
        )
    return "\n".join(out).rstrip() + "\n"


def family_sections() -> list[str]:
    """The sections the families write themselves (their ``docs`` hook), each once."""
    from dpspec.families import FAMILIES
    from dpspec.families.hooks import load_hook

    out: list[str] = []
    for path in dict.fromkeys(f.docs for f in FAMILIES.values() if f.docs):
        out += load_hook(path, "docs")()
    return out


def release_sections() -> list[str]:
    """How a release's sensitivity is derived, and the table of settings that can disagree."""
    from dpspec.check.rules_conformance import DECISIONS

    out = [
        "## Sensitivity of a release",
        "",
        "A Gaussian release whose query states its bounds is evaluated by dpspec itself: "
        "`compiled.mechanism.release(data)` reads the columns, clamps every value of column c to "
        "[lo_c, hi_c] (a missing value to the bound nearest 0) and adds the certified noise, once. The "
        "certificate's `query` record carries the function, columns, bounds and the derived Δ with its "
        "formula (`verify` re-evaluates it). A declared `sensitivity` may exceed the derived Δ, never fall "
        "below it (DPS140). K is the group size (1 for a record unit), n the declared `dataset_size`.",
        "",
        "| query | add/remove | substitution |",
        "|---|---|---|",
        "| `sum(c1, …, bounds = …)` | K·√(Σ_c max(\\|lo_c\\|, \\|hi_c\\|)²) | K·√(Σ_c (hi_c − lo_c)²) |",
        "| `mean(…)` (needs `dataset_size n`) | the sum's Δ / n — released as clamped sum / n, never / the "
        "row count | the sum's Δ / n; the data must have n rows |",
        "| `count()` | K | none (the size is public): DPS129 |",
        "| `histogram(c, bins = B, bounds = [lo, hi])` | K | K·√2 |",
        "",
        "Without bounds (or for `vector(dimension, sensitivity)`) the caller computes the answer and "
        "releases it with `release_answer(answer)`; the declared sensitivity is then an assumption the "
        "certificate states.",
        "",
        "Example: `query sum(hours-per-week, bounds = [0, 99])` under `unit record` has Δ = 99; adding "
        "`sensitivity 1.0` is DPS140.",
        "",
        "## Settings that can disagree",
        "",
        "Every pair of settings (or a setting and the data) that can contradict each other, and what dpspec does:",
        "",
        "| settings | rule | decision |",
        "|---|---|---|",
    ]
    out += [f"| {what} | {rid} | {why} |" for what, rid, why in DECISIONS]
    return out + [""]


def write(root: Path | None = None) -> None:
    root = root or Path(__file__).resolve().parent.parent / "docs"
    root.mkdir(exist_ok=True)
    (root / "rules.md").write_text(rules_markdown(), encoding="utf-8")
    (root / "language.md").write_text(language_markdown(), encoding="utf-8")


if __name__ == "__main__":
    write()
    print("wrote docs/rules.md and docs/language.md")
