"""Reproduce the static Gaussian SWM experiments of ZV25 §6.1 / App. W.1 on real data.

Datasets and secrets (read from the data root, never copied):
  * Adult (adult.data, rows with '?' dropped: 30,162) — secret race (5 values);
  * Cleveland heart (303 rows; the query columns have no '?') — secret sex (2 values);
  * Student performance, mat (395 rows) — secret = quintile group of the final grade G3 (5 values).
Worlds: "full" (θ_D = empirical joint law, natural prior) and "balanced" (stratified subsample with
n′ = min_s n_s records per secret, uniform prior). For Adult we balance *race* by stratified
subsampling, as in the main text; App. W.1's hash-based synthetic groups would not be race
(digest §9.1 ⚠17).

Two readings of the query (digest §9.1 ⚠18), both run:
  * per-record: X | s is one record with S = s; the release is that record's query vector plus noise
    (App. W.1's "per-record query vector", MSE over records, attack on each y_i). Summary-statistics
    vector per record: the 3 features, their squared deviations from the (data-independent) centre
    of the declared range, and the 3 indicators — its group average is (means, second moments, rates).
  * per-group: the secret selects the group's dataset; the release is one aggregate per group: the
    summary statistics (means, sds, rates) or fitted logistic regression / linear SVM parameters
    (Adult; 9 features + intercept, features scaled to [0, 1] by declared bounds, L2 λ = 1e-2).
All query coordinates are scaled to [0, 1] by declared bounds (the paper does not say how it scaled).

Mechanisms at α = 4, m = 200 uniform directions (finite-profile reading), ε ∈ [0.05, 60]:
  ave (Thm 4.5), ave* (per-instance "max outside" Ave, digest §4.1 [D]), joint (Thm 4.6 closed form),
  joint_exact (eq. 11 / F11), gwm (unsliced General Wasserstein Mechanism, exact ℓ2 W∞, full RPP).
Attacks: the paper's prior-aware Gaussian MAP attack and the Bayes-optimal attack under the world
(mixture likelihood over the exact conditional outputs); prior baseline max_s π(s).

    .venv/bin/python benchmarks/swm_evaluation.py --quick
    .venv/bin/python benchmarks/swm_evaluation.py
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpspec import pufferfish as pf  # noqa: E402
from dpspec.accounting.swm import gwm_sigma2, swm_sigma2  # noqa: E402
from dpspec.data.tabular import load_adult, load_heart_cleveland, load_student  # noqa: E402

ALPHA = 4.0
M_DIRS = 200
EPS_FULL = [0.05, 0.1, 0.2, 0.4, 0.8, 1, 2, 4, 8, 10, 12, 14, 18, 20, 25, 30, 35, 40, 45, 50, 55, 60]
EPS_QUICK = [0.05, 0.2, 1, 4, 10, 30, 60]
MECHS = ["ave", "ave*", "joint_exact", "joint", "gwm"]
COLORS = {"ave": "tab:blue", "ave*": "tab:cyan", "joint_exact": "tab:orange", "joint": "tab:red", "gwm": "tab:gray"}
RESULTS = Path(__file__).resolve().parent / "results"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# datasets → (feature matrix, secret labels, queries)
# ----------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    name: str
    X: np.ndarray
    S: np.ndarray
    secrets: tuple
    record_query: pf.Query
    group_queries: dict = field(default_factory=dict)
    note: str = ""


def summary_queries(cols_lo_hi, rate_specs, offset=0):
    """per-record and per-group summary-statistics queries on columns 0..2 (+ rate columns)."""
    cols = [0, 1, 2]
    lo = [c[0] for c in cols_lo_hi]
    hi = [c[1] for c in cols_lo_hi]
    rates = [pf.Rate(c, op, t) for (c, op, t) in rate_specs]
    rec = pf.Concat([pf.Mean(cols, lo, hi, normalize=True), pf.SecondMoment(cols, lo, hi, normalize=True)] + rates,
                    name="summary/record")
    grp = pf.Concat([pf.Mean(cols, lo, hi, normalize=True), pf.Std(cols, lo, hi, normalize=True)] + rates,
                    name="summary/group")
    return rec, grp


def load_adult_ds() -> Dataset:
    t = load_adult("train")  # '?' rows dropped (2,399) → 30,162 as in the paper
    inc = (t.column("income") == ">50K").astype(float)
    X = np.column_stack([
        t.column("age"), t.column("education-num"), t.column("hours-per-week"),
        t.column("capital-gain"), t.column("capital-loss"), inc,
        # model features (cols 6..14)
        t.column("age"), t.column("fnlwgt"), t.column("education-num"), t.column("capital-gain"),
        t.column("capital-loss"), t.column("hours-per-week"), (t.column("sex") == "Male").astype(float),
        np.array([str(m).startswith("Married-civ") or str(m).startswith("Married-AF") for m in t.column("marital-status")], float),
        (t.column("native-country") == "United-States").astype(float),
    ])
    rec, grp = summary_queries([(17, 90), (1, 16), (1, 99)], [(3, ">", 0), (4, ">", 0), (5, ">", 0.5)])
    feat = list(range(6, 15))
    flo = [17, 0, 1, 0, 0, 1, 0, 0, 0]
    fhi = [90, 1.5e6, 16, 99999, 4356, 99, 1, 1, 1]
    groups = {
        "summary": grp,
        "logreg": pf.LogisticRegressionQuery(feat, 5, l2=1e-2, feature_lo=flo, feature_hi=fhi),
        "svm": pf.LinearSVMQuery(feat, 5, l2=1e-2, feature_lo=flo, feature_hi=fhi),
    }
    races = ("White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other")
    return Dataset("Adult (race)", X, t.column("race").astype(str), races, rec, groups,
                   f"{len(t)} rows after dropping {t.n_dropped} rows with '?'")


def load_heart_ds() -> Dataset:
    h = load_heart_cleveland(missing="keep")
    X = np.column_stack([h.column("age"), h.column("trestbps"), h.column("chol"), h.column("chol"),
                         h.column("trestbps"), h.column("num")])
    assert np.all(np.isfinite(X))  # the 6 '?' are in ca/thal, which the query does not use
    rec, grp = summary_queries([(20, 90), (80, 220), (100, 600)], [(3, ">=", 240), (4, ">=", 140), (5, ">", 0.5)])
    S = np.where(h.column("sex") == 1.0, "male", "female")
    return Dataset("Cleveland (sex)", X, S, ("female", "male"), rec, {"summary": grp},
                   f"{len(h)} rows ({h.rows_with_missing} rows have '?' in ca/thal, unused, kept)")


def load_student_ds() -> Dataset:
    s = load_student("mat")
    g3 = s.column("G3")
    edges = np.quantile(g3, [0.2, 0.4, 0.6, 0.8])
    grp_idx = np.searchsorted(edges, g3, side="left")  # G1 ≤ q20 < G2 ≤ q40 < ...
    S = np.array([f"Q{i + 1}" for i in grp_idx])
    X = np.column_stack([s.column("G1"), s.column("G2"), g3, s.column("studytime"), s.column("failures"),
                         s.column("absences")])
    rec, grp = summary_queries([(0, 20), (0, 20), (0, 20)], [(3, ">=", 3), (4, ">", 0), (5, ">", 10)])
    return Dataset("Student (G3 quintile)", X, S, tuple(f"Q{i}" for i in range(1, 6)), rec, {"summary": grp},
                   f"{len(s)} rows; G3 quintile edges {edges.tolist()}")


# ----------------------------------------------------------------------------------------------
# configurations
# ----------------------------------------------------------------------------------------------


@dataclass
class Config:
    dataset: str
    world: str  # full | balanced
    query: str  # summary | logreg | svm
    reading: str  # per-record | per-group
    prior: dict
    cond: dict  # secret -> (k, d) exact conditional outputs (per-record) or (1, d) (per-group)
    targets: np.ndarray | None = None  # per-record: target outputs
    target_secret: np.ndarray | None = None
    d: int = 0

    @property
    def label(self):
        return f"{self.dataset} · {self.world} · {self.query} · {self.reading}"


def build_configs(ds: Dataset, max_targets: int, seed: int) -> list[Config]:
    rng = np.random.default_rng(seed)
    worlds = {
        "full": pf.EmpiricalWorld(ds.X, ds.S, secret_values=ds.secrets, name="full"),
        "balanced": pf.BalancedSubsampleWorld(ds.X, ds.S, secret_values=ds.secrets, seed=seed, name="balanced"),
    }
    out = []
    for wname, w in worlds.items():
        prior = w.prior()
        cond = {s: ds.record_query.per_record(w.records_of(s)) for s in w.secrets}
        # targets: a stratified random sample of the world's records, proportional to the prior
        # (so the target set's majority share equals the prior baseline)
        T = min(max_targets, sum(len(v) for v in cond.values()))
        tz, ts = [], []
        for i, s in enumerate(w.secrets):
            k = min(len(cond[s]), max(1, int(round(T * prior[s]))))
            pick = rng.choice(len(cond[s]), size=k, replace=False)
            tz.append(cond[s][pick])
            ts.append(np.full(k, i))
        tz, ts = np.vstack(tz), np.concatenate(ts)
        out.append(Config(ds.name, wname, "summary", "per-record", prior, cond, tz, ts, tz.shape[1]))
        gw = pf.DeterministicWorld({s: w.records_of(s) for s in w.secrets}, prior=prior, name=wname)
        for qname, q in ds.group_queries.items():
            cond_g = {s: gw.query_outputs(q, s) for s in gw.secrets}
            out.append(Config(ds.name, wname, qname, "per-group", prior, cond_g, None, None, q.dim))
    return out


# ----------------------------------------------------------------------------------------------
# sensitivities and σ²
# ----------------------------------------------------------------------------------------------


def sensitivities(cfg: Config, seed: int):
    samples = {("θ", s): z for s, z in cfg.cond.items()}
    pairs = pf.all_distinct_pairs(list(cfg.cond))
    prof = pf.sphere_profile(M_DIRS, cfg.d, seed=seed)
    rep = pf.sliced_sensitivity_report(samples, pairs, prof.directions)
    return rep


def gwm_delta(cfg: Config, sliced_lower: float) -> tuple[float, str]:
    """Exact ℓ2 W∞ sensitivity max over pairs (the GWM's Δ∞)."""
    secrets = list(cfg.cond)
    if cfg.reading == "per-group":
        return max(float(np.linalg.norm(cfg.cond[a][0] - cfg.cond[b][0])) for a in secrets for b in secrets), "exact"
    # per-record: exact bottleneck per unordered pair, pruned: a pair only needs a full search when
    # it exceeds the current maximum (one max-flow check).
    pairs = [(a, b) for i, a in enumerate(secrets) for b in secrets[i + 1:]]
    pairs.sort(key=lambda p: len(cfg.cond[p[0]]) * len(cfg.cond[p[1]]))
    best = max(sliced_lower, 0.0)
    for a, b in pairs:
        if best > 0 and not pf.w_inf_exceeds(cfg.cond[a], cfg.cond[b], best):
            continue
        best = pf.w_inf_exact(cfg.cond[a], cfg.cond[b], lower=best)
    return best, "exact"


def sigma2_table(rep, delta_inf, eps_list):
    out = {}
    for e in eps_list:
        row = {
            "ave": swm_sigma2(rep.deltas, None, ALPHA, e, "ave"),
            "ave*": swm_sigma2(rep.instance_deltas, None, ALPHA, e, "ave"),
            "joint_exact": swm_sigma2(rep.deltas, None, ALPHA, e, "joint_exact"),
            "joint": swm_sigma2(rep.deltas, None, ALPHA, e, "joint"),
            "gwm": gwm_sigma2(delta_inf, ALPHA, e),
        }
        out[e] = row
    return out


# ----------------------------------------------------------------------------------------------
# attacks
# ----------------------------------------------------------------------------------------------


class RecordAttack:
    """Per-record reading: y_t = x_t + σ z_t; MAP (paper) and Bayes-optimal (mixture) attacks.

    Precomputes A = ‖x_t − c_j‖², B = ⟨z_t, x_t − c_j⟩ over deduplicated conditional atoms c_j, so
    ‖y_t − c_j‖² = A + 2σB + σ²‖z_t‖² is cheap for every σ (the last term cancels)."""

    def __init__(self, cfg: Config, z: np.ndarray):
        self.cfg, self.z = cfg, z
        X = cfg.targets
        self.secrets = list(cfg.cond)
        self.lp = np.log(np.array([cfg.prior[s] for s in self.secrets]))
        self.blocks = []
        for s in self.secrets:
            C, cnt = np.unique(cfg.cond[s], axis=0, return_counts=True)
            A = (X**2).sum(1)[:, None] - 2 * X @ C.T + (C**2).sum(1)[None, :]
            B = (z * X).sum(1)[:, None] - z @ C.T
            self.blocks.append((np.maximum(A, 0), B, np.log(cnt) - np.log(cnt.sum())))
        self.means = np.vstack([cfg.cond[s].mean(0) for s in self.secrets])
        self.xm = X[:, None, :] - self.means[None]  # (T, k, d)
        self.zm = np.einsum("td,tkd->tk", z, self.xm)
        self.am = (self.xm**2).sum(-1)

    def accuracies(self, sigma2: float) -> tuple[float, float, float]:
        s = math.sqrt(sigma2)
        truth = self.cfg.target_secret
        score_map = self.lp[None] - (self.am + 2 * s * self.zm) / (2 * sigma2)
        acc_map = float(np.mean(np.argmax(score_map, 1) == truth))
        score = np.column_stack([lp + logsumexp(-(A + 2 * s * B) / (2 * sigma2) + lc[None], axis=1)
                                 for lp, (A, B, lc) in zip(self.lp, self.blocks)])
        acc_bayes = float(np.mean(np.argmax(score, 1) == truth))
        mse = float(sigma2 * np.mean((self.z**2).sum(1)))
        return mse, acc_map, acc_bayes


class GroupAttack:
    """Per-group reading: the secret s ~ π selects f(D_s); y = f(D_s) + σz. MAP = Bayes here (the
    conditionals are point masses); accuracy = Σ_s π(s) P(ŝ(y) = s | s), by Monte Carlo with common
    random numbers across σ."""

    def __init__(self, cfg: Config, z: np.ndarray):
        self.secrets = list(cfg.cond)
        self.F = np.vstack([cfg.cond[s][0] for s in self.secrets])
        self.pi = np.array([cfg.prior[s] for s in self.secrets])
        self.lp = np.log(self.pi)
        self.z = z  # (R, d)
        diff = self.F[:, None, :] - self.F[None, :, :]  # (k_true, k_guess, d)
        self.a = (diff**2).sum(-1)
        self.b = np.einsum("rd,ijd->rij", z, diff)  # ⟨z, f_i − f_j⟩

    def accuracies(self, sigma2):
        s = math.sqrt(sigma2)
        # ‖f_i + σz − f_j‖² = a_ij + 2σ b_rij + σ²‖z‖²
        score = self.lp[None, None, :] - (self.a[None] + 2 * s * self.b) / (2 * sigma2)
        correct = np.argmax(score, axis=2) == np.arange(len(self.secrets))[None, :]
        acc = float((correct.mean(0) * self.pi).sum())
        mse = float(sigma2 * np.mean((self.z**2).sum(1)))
        return mse, acc, acc


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------


def run(quick: bool, trials: int, max_targets: int, draws: int, seed: int):
    eps_list = EPS_QUICK if quick else EPS_FULL
    datasets = [load_adult_ds(), load_heart_ds(), load_student_ds()]
    results = []
    for ds in datasets:
        log(f"{ds.name}: {ds.note}")
        for cfg in build_configs(ds, max_targets, seed):
            t0 = time.time()
            per_trial = []
            info = {}
            for tr in range(trials):
                rep = sensitivities(cfg, seed=seed + 100 * tr)
                if tr == 0:
                    dinf, how = gwm_delta(cfg, float(rep.deltas.max()))
                    info = {"delta_inf": dinf, "delta_inf_how": how}
                sig = sigma2_table(rep, info["delta_inf"], eps_list)
                rng = np.random.default_rng(seed + 7 + tr)
                if cfg.reading == "per-record":
                    att = RecordAttack(cfg, rng.standard_normal(cfg.targets.shape))
                else:
                    att = GroupAttack(cfg, rng.standard_normal((draws, cfg.d)))
                metr = {e: {m: att.accuracies(sig[e][m]) for m in MECHS} for e in eps_list}
                per_trial.append({"deltas": rep.deltas, "inst": rep.instance_deltas, "sigma2": sig, "metrics": metr})
            results.append((cfg, info, per_trial))
            d = per_trial[0]["deltas"]
            log(f"  {cfg.label}: d={cfg.d}, max Δ^u={d.max():.4f}, √Δ̄²={math.sqrt(np.mean(d ** 2)):.4f}, "
                f"Δ∞={info['delta_inf']:.4f} ({time.time() - t0:.1f}s)")
    return eps_list, results


def mean_metric(per_trial, e, m, k):
    return float(np.mean([t["metrics"][e][m][k] for t in per_trial]))


def write_markdown(eps_list, results, path: Path, args, elapsed):
    L = []
    L.append("# Gaussian SWM evaluation (ZV25 §6.1, App. W.1) — dpspec reproduction\n")
    L.append(f"α = {ALPHA:g}, m = {M_DIRS} uniform directions (finite-profile reading, exact), "
             f"{args.trials} trial(s) (direction seeds and noise), ε grid {eps_list}. "
             f"Per-record attacks on {args.max_targets} random target records per world; per-group attacks "
             f"with {args.draws} noise draws per secret. Run time {elapsed:.0f} s"
             f"{' (--quick)' if args.quick else ''}.\n")
    L.append("Mechanisms: **ave** Thm 4.5 (Δ̄² = Σω max(·)²); **ave*** per-instance Ave (max over (θ,pair) "
             "outside the average, digest §4.1 [D]); **joint_exact** eq. (11)/F11; **joint** Thm 4.6 "
             "(Δ★²); **gwm** unsliced General Wasserstein Mechanism (exact ℓ2 W∞; certifies full RPP — a "
             "stronger notion, shown as the unsliced baseline). Attack accuracies: MAP = the paper's "
             "prior-aware Gaussian MAP attack; Bayes = Bayes-optimal attack under the world (per-group: "
             "identical to MAP). Baseline = max_s π(s).\n")
    L.append("## Sensitivities and noise\n")
    L.append("| configuration | d | baseline | max_u Δ^u | √Δ̄² | √(ave*) | Δ∞ (GWM) | σ ave / ave* / joint_exact / joint / gwm at ε = 1 |")
    L.append("|---|---|---|---|---|---|---|---|")
    for cfg, info, pt in results:
        t = pt[0]
        d = t["deltas"]
        s1 = t["sigma2"][1 if 1 in t["sigma2"] else eps_list[0]]
        avestar = math.sqrt(max((t["inst"] ** 2).mean(1)))
        L.append(f"| {cfg.label} | {cfg.d} | {pf.prior_baseline(cfg.prior):.3f} | {d.max():.4f} | "
                 f"{math.sqrt(np.mean(d ** 2)):.4f} | {avestar:.4f} | {info['delta_inf']:.4f} | "
                 + " / ".join(f"{math.sqrt(s1[m]):.4g}" for m in MECHS) + " |")
    L.append("\n## Smallest ε (on the grid) at which the Bayes-optimal attack beats the prior by ≥ 0.05\n")
    L.append("| configuration | " + " | ".join(MECHS) + " |")
    L.append("|---|" + "---|" * len(MECHS))
    for cfg, info, pt in results:
        base = pf.prior_baseline(cfg.prior)
        cells = []
        for m in MECHS:
            hit = [e for e in eps_list if mean_metric(pt, e, m, 2) >= base + 0.05]
            cells.append(f"{hit[0]:g}" if hit else f"> {eps_list[-1]:g}")
        L.append(f"| {cfg.label} | " + " | ".join(cells) + " |")
    show = [e for e in (0.1, 1, 4, 10, 30, 60) if e in eps_list] or eps_list
    L.append("\n## Attack accuracy (Bayes-optimal; MAP in parentheses where it differs) and MSE vs ε\n")
    for cfg, info, pt in results:
        L.append(f"### {cfg.label} (baseline {pf.prior_baseline(cfg.prior):.3f})\n")
        L.append("| ε | " + " | ".join(f"{m} acc" for m in MECHS) + " | " + " | ".join(f"{m} MSE" for m in MECHS) + " |")
        L.append("|---|" + "---|" * (2 * len(MECHS)))
        rows_eps = eps_list if args.quick else sorted(set(show) | {x for x in eps_list if x in (0.05, 0.4, 2, 20, 45)})
        for e in rows_eps:
            accs = []
            for m in MECHS:
                b, mp = mean_metric(pt, e, m, 2), mean_metric(pt, e, m, 1)
                accs.append(f"{b:.3f}" + (f" ({mp:.3f})" if abs(b - mp) > 5e-4 else ""))
            mses = [f"{mean_metric(pt, e, m, 0):.4g}" for m in MECHS]
            L.append(f"| {e:g} | " + " | ".join(accs) + " | " + " | ".join(mses) + " |")
        L.append("")
    path.write_text("\n".join(L) + "\n")


def plot(eps_list, results, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    ncols = 4
    nrows = math.ceil(2 * n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 2.9 * nrows))
    axes = axes.ravel()
    for i, (cfg, info, pt) in enumerate(results):
        ax_m, ax_a = axes[2 * i], axes[2 * i + 1]
        for m in MECHS:
            ax_m.plot(eps_list, [mean_metric(pt, e, m, 0) for e in eps_list], color=COLORS[m], label=m, lw=1.4)
            ax_a.plot(eps_list, [mean_metric(pt, e, m, 2) for e in eps_list], color=COLORS[m], label=m, lw=1.4)
            if cfg.reading == "per-record":
                ax_a.plot(eps_list, [mean_metric(pt, e, m, 1) for e in eps_list], color=COLORS[m], ls=":", lw=1.0)
        ax_a.axhline(pf.prior_baseline(cfg.prior), color="k", ls="--", lw=0.8, label="prior")
        for ax in (ax_m, ax_a):
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
        ax_m.set_yscale("log")
        title = f"{cfg.dataset.split(' ')[0]} {cfg.world} {cfg.query} {cfg.reading}"
        ax_m.set_title(f"MSE — {title}", fontsize=8)
        ax_a.set_title(f"attack acc — {title}", fontsize=8)
        ax_a.set_ylim(0, 1.02)
    for ax in axes[2 * n:]:
        ax.axis("off")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.supxlabel("SRPP budget ε (α = 4); solid: Bayes-optimal attack, dotted: MAP attack (per-record)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--max-targets", type=int, default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    a.trials = a.trials or (1 if a.quick else 3)
    a.max_targets = a.max_targets or (400 if a.quick else 2000)
    a.draws = a.draws or (500 if a.quick else 4000)
    t0 = time.time()
    eps_list, results = run(a.quick, a.trials, a.max_targets, a.draws, a.seed)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    write_markdown(eps_list, results, a.out_dir / "swm_evaluation.md", a, time.time() - t0)
    plot(eps_list, results, a.out_dir / "swm_evaluation.png")
    log(f"wrote {a.out_dir / 'swm_evaluation.md'} and .png in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
