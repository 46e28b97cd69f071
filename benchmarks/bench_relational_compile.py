"""Relational DP-SGD compile / verify speed: today's code against a baseline commit, same run.

The baseline is loaded from git (``--base``, default the commit before the vectorised group
polynomial): its ``dpspec/accounting`` package is written to a temporary directory and imported
under another name, and its whole ``dpspec`` tree is extracted for the command-line runs, so
both implementations run on the same machine, interleaved, on the same inputs.

1. Accounting of ``dpspec compile specs/cora_relational.dps``: the sigma search plus the
   certificate's evaluation (old: ``calibrate_relational_sigma`` + ``relational_accountants`` on
   SEARCH_ALPHAS; new: ``calibrate_relational_sigma`` + ``certify_relational``), memo cleared
   before each new run.  Target: >= 5x.
2. One evaluation at the certified sigma (``certify_relational``, memo cleared), which a
   verifier can run instead of the search, against today's verify path (the old accounting of
   a compile, which ``dpspec verify`` repeats; and the whole old ``dpspec verify`` command).
   Target: >= 10x.
3. The commands end to end: ``dpspec compile`` and ``dpspec verify`` with each tree.
4. Identical numbers: sigma, epsilon and the RDP curves (accounting level, bit for bit) and the
   certificates' ``results`` (JSON equality) of both trees, for cora and (not with --quick) for
   specs/citeseer_minilm_relational.dps and the relational tests' spec variants.  Exit status 1
   if anything differs.
5. Where the time goes: the CPU time of the main parts of today's accounting in one more run.

    python benchmarks/bench_relational_compile.py [--base REV] [--reps N] [--quick]

Prints a markdown report and writes it to benchmarks/results/bench_relational_compile.md
(``--quick``: 1 repetition, no command-line verify runs, written to ..._quick.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
BASE = "cde369f4897376827b88912c000fdb40e2ea09c6"   # before the vectorised group polynomial
SPEC = "specs/cora_relational.dps"
OLD_PKG = "dpspec_baseline_accounting"


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout


def load_baseline(rev: str, tmp: Path):
    """(old accounting package imported as OLD_PKG, path of the old source tree)."""
    pkg = tmp / "pkgs" / OLD_PKG
    pkg.mkdir(parents=True)
    for name in _git("ls-tree", "--name-only", rev, "dpspec/accounting/").decode().split():
        if name.endswith(".py"):
            (pkg / Path(name).name).write_bytes(_git("show", f"{rev}:{name}"))
    sys.path.insert(0, str(tmp / "pkgs"))
    old = importlib.import_module(f"{OLD_PKG}.relational")
    tree = tmp / "tree"
    tree.mkdir()
    archive = tmp / "tree.tar"
    archive.write_bytes(_git("archive", rev, "dpspec", "grammar"))   # dpspec.lark links to grammar/
    subprocess.run(["tar", "-xf", str(archive), "-C", str(tree)], check=True)
    return old, tree


def _cli(pythonpath: Path, cwd: Path, *args: str) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python -m dpspec ARGS`` importing dpspec from ``pythonpath`` (run
    in ``cwd``, not in the repository: ``-m`` puts the working directory first on sys.path)."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath), DPSPEC_DATA_DIR=str(_data_dir()))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dpspec", *args], cwd=cwd, env=env, check=True,
                   capture_output=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _timed(fn):
    """(result, (wall, CPU) seconds) of fn() in this process."""
    c, t = time.process_time(), time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t, time.process_time() - c)


def _data_dir() -> Path:
    """The data folder today's tree resolves (the baseline tree, elsewhere, is pointed to it)."""
    from dpspec.data import data_root
    return data_root()


def _which_dpspec(pythonpath: Path, cwd: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    return subprocess.run([sys.executable, "-c", "import dpspec; print(dpspec.__file__)"], cwd=cwd,
                          env=env, check=True, capture_output=True, text=True).stdout.strip()


def _config_from(cert_path: Path, R):
    res = json.loads(cert_path.read_text())["results"][0]
    p = res["mechanism"]["parameters"]
    cfg = R.RelationalConfig(int(p["num_edges"]), int(p["num_nodes"]), float(p["sample_rate"]),
                             int(p["degree_cap"]), int(p["negatives_per_positive"]),
                             p["clipping"], p["negatives"], "poisson")
    return cfg, int(p["steps"]), float(p["delta_accounted"]), float(res["guarantee"]["target"]
                                                                    ["epsilon"]), p


def _same_accounting(a, b) -> bool:
    if a.best != b.best or a.epsilon != b.epsilon or set(a.accountants) != set(b.accountants):
        return False
    arrays = [(a.curve.rdp, b.curve.rdp), (a.curve.abs_errors, b.curve.abs_errors)]
    arrays += [(a.accountants[n].curve.rdp, b.accountants[n].curve.rdp) for n in a.accountants]
    return all(np.array_equal(x, y) for x, y in arrays) and a.statement == b.statement


def _med(xs):
    return statistics.median(xs)


#: parts of today's relational accounting timed by _where_time_goes (private functions)
_PARTS = (("_poly_d", "exact removal polynomial of Thm C.1 (`_poly_d`, D_j recursion)"),
          ("_mixture_quads", "Thm C.1 quadratures, all l-nodes of an evaluation at once "
                             "(`_mixture_quads`)"),
          ("_sgm_log_bounds", "Eq. (3) node values (`_sgm_log_bounds`, one l-node at a time)"))


def _where_time_goes(R, run) -> dict:
    """CPU seconds of run() and of the _PARTS of today's accounting within it."""
    spent = dict.fromkeys([k for k, _ in _PARTS], 0.0)
    saved = {k: getattr(R, k) for k in spent}

    def timed(name, fn):
        def wrapped(*a, **kw):
            c = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.process_time() - c
        return wrapped

    for k, fn in saved.items():
        setattr(R, k, timed(k, fn))
    try:
        _, (_, total) = _timed(run)
    finally:
        for k, fn in saved.items():
            setattr(R, k, fn)
    return {**spent, "total": total}


def _certified_numbers(doc: dict) -> list:
    """What a certificate certifies, per result: the guarantee record (ε, δ, the RDP curve, the (ε, δ)
    points) and the noise multiplier. Texts (wording, assumptions) may change between the trees."""
    return [(r["name"], r["guarantee"], r["mechanism"]["parameters"].get("noise_multiplier"))
            for r in doc["results"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=BASE, help="baseline git revision (default: %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps = 1 if args.quick else args.reps
    from dpspec.accounting import relational as R

    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench_relcompile_") as td:
        tmp = Path(td)
        O, old_tree = load_baseline(args.base, tmp)
        new_cert, old_cert = tmp / "new.json", tmp / "old.json"
        spec = str(ROOT / SPEC)
        run_dir = tmp / "run"
        run_dir.mkdir()
        assert _which_dpspec(old_tree, run_dir).startswith(str(old_tree))
        assert _which_dpspec(ROOT, run_dir).startswith(str(ROOT))
        # command-line compile (each run also writes the certificate compared below)
        cli = {"compile old": [], "compile new": [], "verify old": [], "verify new": []}
        for i in range(reps):
            cli["compile old"].append(_cli(old_tree, run_dir, "compile", spec, "-o", str(old_cert)))
            cli["compile new"].append(_cli(ROOT, run_dir, "compile", spec, "-o", str(new_cert)))
            if not args.quick:
                cli["verify old"].append(_cli(old_tree, run_dir, "verify", str(old_cert)))
                cli["verify new"].append(_cli(ROOT, run_dir, "verify", str(new_cert)))
        old_doc, new_doc = json.loads(old_cert.read_text()), json.loads(new_cert.read_text())
        certs_equal = _certified_numbers(old_doc) == _certified_numbers(new_doc)
        cfg, steps, delta, target, params = _config_from(new_cert, R)
        ocfg = O.RelationalConfig(cfg.num_edges, cfg.num_nodes, cfg.rate, cfg.degree_cap,
                                  cfg.negatives_per_positive, cfg.clipping, cfg.negatives,
                                  cfg.positives)

        def old_compile():
            s = O.calibrate_relational_sigma(target, delta, ocfg, steps)
            return s, O.relational_accountants(ocfg, s, steps, delta, O.SEARCH_ALPHAS)

        def new_compile():
            R.clear_memo()
            s = R.calibrate_relational_sigma(target, delta, cfg, steps)
            return s, R.certify_relational(cfg, s, steps, delta)

        def new_single(sigma):
            R.clear_memo()
            return R.certify_relational(cfg, sigma, steps, delta)

        t = {"old compile": [], "new compile": [], "new single": []}
        same = True
        for i in range(reps):
            (s_old, acc_old), dt = _timed(old_compile)
            t["old compile"].append(dt)
            (s_new, acc_new), dt = _timed(new_compile)
            t["new compile"].append(dt)
            acc_one, dt = _timed(lambda: new_single(s_new))
            t["new single"].append(dt)
            same &= (s_old == s_new and _same_accounting(acc_old, acc_new)
                     and _same_accounting(acc_old, acc_one)
                     and s_new == params["noise_multiplier"])

        # certificates of the other relational specs: the example with text encoders and the
        # relational tests' graphs (tests/families/relational_dpsgd/test_relational_specs.py, spec variants of
        # dpspec.families.relational_dpsgd.rules.spec); each compiled once with each tree
        extra = []
        if not args.quick:
            from dpspec.families.relational_dpsgd.rules import spec as rel_spec
            noise = ("  guarantee  dp(epsilon = 4, delta = 1e-5)",
                     "  noise_multiplier 1.0\n  guarantee  dp(delta = 1e-5)")
            standard = "per_tuple(C = 1.0, threshold = standard)"
            variants = {
                "tests: static, calibrated": rel_spec(),
                "tests: standard, calibrated": rel_spec(clip=standard),
                "tests: static, noise given": rel_spec().replace(*noise),
                "tests: FREQ-CLIP corrected, noise given":
                    rel_spec(clip="frequency_adaptive(C = 1.0)").replace(*noise),
                "tests: standard, noise given": rel_spec(clip=standard).replace(*noise),
            }
            cs = "specs/citeseer_minilm_relational.dps"
            files = {cs: ROOT / cs}
            for i, (name, text) in enumerate(variants.items()):
                f = tmp / f"variant{i}.dps"
                f.write_text(text)
                files[name] = f
            for name, f in files.items():
                o, nw = tmp / "o.json", tmp / "n.json"
                try:
                    to = _cli(old_tree, run_dir, "compile", str(f), "-o", str(o))
                    tn = _cli(ROOT, run_dir, "compile", str(f), "-o", str(nw))
                except subprocess.CalledProcessError as e:
                    extra.append((name, None, None, f"does not compile here: {e.stderr[-200:]!r}"))
                    continue
                eq = _certified_numbers(json.loads(o.read_text())) == _certified_numbers(json.loads(nw.read_text()))
                certs_equal &= eq
                extra.append((name, to[1], tn[1], "yes" if eq else "NO"))

    shares = _where_time_goes(R, new_compile)
    m = {k: (_med([w for w, _ in v]), _med([c for _, c in v]))
         for k, v in {**t, **cli}.items() if v}

    def row(what, old, new, target=""):
        (wo, co), (wn, cn) = m[old], m[new]
        return (f"| {what} | {wo:.2f} | {wn:.2f} | {wo / wn:.1f}x | {co:.2f} | {cn:.2f} | "
                f"{co / cn:.1f}x | {target} |")

    lines += [
        "# Relational DP-SGD: compile and verify speed against the baseline (same run)", "",
        f"Machine: {os.cpu_count()} cores shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f} at the end), Python {platform.python_version()}, numpy "
        f"{np.__version__}. Baseline: `{args.base[:10]}` (loaded from git). Spec: `{SPEC}` "
        f"(m = {cfg.num_edges}, n = {cfg.num_nodes}, rate = {cfg.rate:.6g}, K = {cfg.degree_cap}, "
        f"k_neg = {cfg.negatives_per_positive}, {cfg.clipping} clipping, T = {steps}, target "
        f"ε = {target:g}, δ = {delta:g}). Medians of {reps} interleaved repetition(s); wall "
        "seconds, and CPU seconds (user + system: less sensitive to the other jobs).", "",
        "| what | baseline wall s | now wall s | ratio | baseline CPU s | now CPU s | ratio | "
        "target |", "|---|---|---|---|---|---|---|---|",
        row("accounting of a compile (σ search + certificate evaluation)", "old compile",
            "new compile", ">= 5x"),
        row("one evaluation at the certified σ (`certify_relational`) vs the baseline's verify "
            "accounting (the search again)", "old compile", "new single", ">= 10x"),
        row(f"`dpspec compile {SPEC}` (whole command)", "compile old", "compile new", ">= 5x"),
    ]
    rest_old = m["compile old"][1] - m["old compile"][1]
    rest_new = m["compile new"][1] - m["new compile"][1]
    lines += ["| (estimate: whole command minus accounting, CPU s; imports, graph loading, "
              f"mechanism) | | | | {rest_old:.2f} | {rest_new:.2f} | | |"]
    if "verify old" in m:
        lines += [
            row("`dpspec verify` (whole command; recompiles at the certified σ, no second search)",
                "verify old", "verify new", ">= 10x"),
            row("`certify_relational` vs the baseline's whole `dpspec verify`", "verify old",
                "new single", ">= 10x"),
        ]
    if extra:
        lines += ["", "Other relational certificates (one compile each; certified numbers — `guarantee` and σ — equal):", "",
                  "| spec | baseline compile CPU s | now CPU s | ratio | identical |",
                  "|---|---|---|---|---|"]
        for name, to, tn, eq in extra:
            if to is None:
                lines.append(f"| {name} | | | | {eq} |")
            else:
                lines.append(f"| {name} | {to:.2f} | {tn:.2f} | {to / tn:.1f}x | {eq} |")
    lines += [
        "",
        f"Identical numbers: σ, ε and every RDP curve of the accounting bit for bit: "
        f"**{'yes' if same else 'NO'}** (σ = {s_new!r}, ε = {acc_new.epsilon!r}); "
        f"certified numbers of both trees equal (every result's `guarantee` and σ, JSON, every spec above): "
        f"**{'yes' if certs_equal else 'NO'}**.",
        "",
        "Where the time goes now (CPU of one more accounting run of a compile, memo cleared; "
        f"{shares['total']:.2f} s in all): " + "; ".join(
            f"{what} {shares[key]:.2f} s ({shares[key] / shares['total']:.0%})"
            for key, what in _PARTS) + "; the rest in the certified binomial brackets and the "
        "search.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / ("bench_relational_compile_quick.md" if args.quick else
                     "bench_relational_compile.md")
    out.write_text(text)
    print(f"wrote {out}")
    if not (same and certs_equal):
        sys.exit(1)


if __name__ == "__main__":
    main()
