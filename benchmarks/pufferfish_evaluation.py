"""Pufferfish evaluation (issue 26): what the aggregate reading and the Markov Quilt Mechanism buy.

Part 1 — aggregate releases on the real data (Cleveland, Student, Adult): the noise of a mean released
under the per-record reading (the only reading before `output aggregate`) and under `output aggregate`
(Lemma A: the aggregate's W∞ is the per-record one over n), for the sliced Gaussian mechanism (SWM,
Ave-SRPP α = 4) and the Wasserstein mechanism (ε-Pufferfish), at ε = 1. The error is the expected
absolute error of each released coordinate (σ·√(2/π) for Gaussian noise, the scale for Laplace),
as a percentage of the coordinate's range; the target is below 10 %.

Part 2 — Song, Wang & Chaudhuri 2017's synthetic Markov-chain comparison: the expected L1 error of the
released frequency of a state (L = 1/T) for MQM (exact, for the explicit chain; and the bound for the
class of reversible chains with π_min and λ*) against group DP (the whole chain one group), over ε and
the chain length T (the frequency itself is exact, so the L1 error is the Laplace scale). The GK16
baseline (Ghosh & Kleinberg 2016) is absent: its bound is not stated here from the paper's theorem
(the paper is not among the project's sources, and its conditions on the influence matrix of a chain
were not checked), and a baseline whose guarantee is unverified would not be a fair comparison.

Part 4 — dataset-level proportion secrets (attribute privacy, Zhang, Ohrimenko & Cummings 2022):
the exact binomial shift m(n, p, p′) = W∞(Binomial(n, p), Binomial(n, p′)) of Lemma D against its
lower bound n·|p − p′| (W∞ ≥ W1), and the Wasserstein release of Cleveland means protecting the
share of women (0.3 vs 0.35) at ε = 1.

    python benchmarks/pufferfish_evaluation.py          # quick (about a minute)
    python benchmarks/pufferfish_evaluation.py --full   # more ε and lengths, exact MQM at T = 1000
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

SPECS = {
    "cleveland": (
        'scenario s {{ data csv("heart_cleveland/processed.cleveland.data", schema = heart_cleveland) '
        "secret disease = num > 0  prior [empirical, bernoulli(p in [0.2, 0.5])] }}\n",
        "mean(age, trestbps, chol, thalach, bounds = [[20, 90], [80, 220], [100, 600], [60, 210]])",
        [70, 140, 500, 150],
    ),
    "student": (
        'scenario s {{ data csv("student/student-mat.csv", schema = student) secret quantile_bins(G3, bins = 5) '
        "prior empirical }}\n",
        "mean(studytime, failures, absences, bounds = [[1, 4], [0, 4], [0, 93]])",
        [3, 4, 93],
    ),
    "adult": (
        'scenario s {{ data csv("adult/adult.data", schema = adult) '
        "secret race in {{White, Black, Asian-Pac-Islander, Amer-Indian-Eskimo, Other}} prior empirical }}\n",
        "mean(age, education-num, hours-per-week, bounds = [[17, 90], [1, 16], [1, 99]])",
        [73, 15, 98],
    ),
}


def _release(mech: str, output: str, query: str) -> str:
    if mech == "swm":
        return (
            f"release r {{ protect s mechanism swm output {output} query {query} slices sphere(m = 64, seed = 3) "
            "guarantee ave_srpp(alpha = 4, epsilon = 1) }\n"
        )
    return (
        f"release r {{ protect s mechanism wasserstein output {output} query {query} "
        "guarantee pufferfish(epsilon = 1) }\n"
    )


def aggregate_table() -> list[str]:
    import dpspec
    from dpspec.diagnostics import SpecError

    lines = [
        "Part 1: expected |error| of each released mean, % of its range, ε = 1",
        f"{'data':<10} {'mechanism':<12} {'reading':<11} {'max % of range':>15} {'per coordinate':>40}  {'time':>6}",
    ]
    for name, (scenario, query, ranges) in SPECS.items():
        for mech in ("swm", "wasserstein"):
            for output in ("per_record", "aggregate"):
                t0 = time.perf_counter()
                try:
                    c = dpspec.compile(dpspec.loads(scenario.format() + _release(mech, output, query), name=name))
                except SpecError as e:
                    lines.append(
                        f"{name:<10} {mech:<12} {output:<11} skipped "
                        f"({', '.join(sorted({d.rule for d in e.diagnostics}))})"
                    )
                    continue
                p = c.certificate.results[0].mechanism.parameters
                if mech == "swm":
                    err = np.full(len(ranges), p["sigma"] * math.sqrt(2 / math.pi))
                else:
                    err = np.array([p[f"scale_{k}"] for k in range(len(ranges))])
                pct = 100 * err / np.asarray(ranges, float)
                lines.append(
                    f"{name:<10} {mech:<12} {output:<11} {pct.max():>14.3f}% "
                    f"{' '.join(f'{x:8.3f}' for x in pct):>40}  {time.perf_counter() - t0:5.1f}s"
                )
    return lines


def markov_table(full: bool) -> list[str]:
    from dpspec.families.markov_quilt import MarkovChain, calibrate_mqm, calibrate_mqm_reversible, group_dp_scale

    P = np.array([[0.75, 0.25], [0.25, 0.75]])  # reversible, π = (1/2, 1/2), λ* = 0.5
    chain = MarkovChain(P)
    eps_grid = (0.2, 0.5, 1.0, 2.0, 5.0) if full else (0.5, 1.0, 2.0)
    lengths = (100, 1000, 10000) if full else (100, 1000)
    lines = [
        "",
        "Part 2: expected L1 error of the released state-1 frequency (Laplace scale), chain P = "
        "[[0.75, 0.25], [0.25, 0.75]]; class bound: reversible, π_min = 0.3, λ* ≤ 0.5",
        f"{'T':>6} {'ε':>5} {'group DP':>10} {'MQM class':>10} {'MQM exact':>10} {'ratio DP/MQM':>13}",
    ]
    for T in lengths:
        for eps in eps_grid:
            gdp = group_dp_scale(T, eps)
            cls = calibrate_mqm_reversible(0.3, 0.5, T, eps).scale
            exact = calibrate_mqm(chain, T, eps).scale if (T <= 100 or (full and T <= 1000)) else float("nan")
            lines.append(f"{T:>6} {eps:>5g} {gdp:>10.4g} {cls:>10.4g} {exact:>10.4g} {gdp / cls:>12.1f}x")
    lines.append(
        "GK16 (Ghosh & Kleinberg 2016) baseline: absent — its inferential-privacy bound for Markov chains is not "
        "stated here from the paper's theorem (paper not among the project's sources; conditions unchecked)."
    )
    return lines


SHARE = (
    'scenario s {{ data csv("heart_cleveland/processed.cleveland.data", schema = heart_cleveland) '
    "secret women = fraction(where = sex == 0) in {{0.3, 0.35}} prior empirical }}\n"
    "release r {{ protect s mechanism wasserstein output aggregate "
    "query mean({cols}, bounds = {bounds}) guarantee pufferfish(epsilon = 1) }}\n"
)


def share_table(full: bool) -> list[str]:
    import dpspec
    from dpspec.diagnostics import SpecError
    from dpspec.pufferfish.share import binomial_w_inf

    lines = [
        "",
        "Part 4: proportion secrets — m(n, p, p′) exact vs the lower bound n·|p − p′|",
        f"{'n':>7} {'p':>5} {'p′':>5} {'m':>7} {'n|p−p′|':>9} {'m / n|p−p′|':>12}",
    ]
    sizes = (100, 1000, 10000, 32561) if full else (100, 1000, 10000)
    for n in sizes:
        for p, q in (("0.3", "0.35"), ("0.45", "0.55")):
            m = binomial_w_inf(n, p, q)
            low = n * abs(float(p) - float(q))
            lines.append(f"{n:>7} {p:>5} {q:>5} {m:>7} {low:>9.1f} {m / low:>12.3f}")
    lines.append("Cleveland (n = 297), secret: share of women in {0.3, 0.35}, ε = 1, Wasserstein mechanism:")
    lines.append(f"{'query':<32} {'W':>9} {'error % of range':>17}")
    for cols, bounds in (("age", "[20, 90]"), ("age, chol", "[[20, 90], [100, 600]]")):
        try:
            c = dpspec.compile(dpspec.loads(SHARE.format(cols=cols, bounds=bounds), name="share.dps"))
        except SpecError as e:
            lines.append(f"{cols:<32} skipped ({', '.join(sorted({d.rule for d in e.diagnostics}))})")
            continue
        p = c.certificate.results[0].mechanism.parameters
        lines.append(f"{'mean(' + cols + ')':<32} {p['w_inf']:>9.4g} {100 * p['scale_factor']:>16.1f}%")
    return lines


ATTACK = (
    'scenario s {{ data csv("heart_cleveland/processed.cleveland.data", schema = heart_cleveland) '
    "secret sex in {{0, 1}} prior balanced(seed = 3) }}\n"
    "release r {{ protect s mechanism {mech} output per_record "
    "query mean(age, trestbps, chol, bounds = [[20, 90], [80, 220], [100, 600]]) {rest} }}\n"
)


def attack_table(trials: int) -> list[str]:
    """Part 3: a sliced ε is weaker than the same ε unsliced. Per-record releases of Cleveland (secret: sex,
    balanced prior) at ε = 0.05: the Bayes-optimal attack on the Ave-SRPP (α = 4) release against the
    bound an order-4 Rényi divergence of 0.05 on the *whole* output would impose (Pinsker: accuracy ≤
    1/2 + √(ε/2)/2), and on the ε-Pufferfish (Wasserstein) release, whose bound is e^ε/(1 + e^ε).
    This setting does not reproduce the 0.593 reported in issue 26 (its exact query and slices are not
    stated): measured here ≈ 0.51 (sex) and ≈ 0.53 (disease = num > 0, 4 vitals), within the bound."""
    import dpspec
    from dpspec.data.bind import load_table
    from dpspec.diagnostics import SpecError
    from dpspec.pufferfish.attacks import bayes_attack, laplace_log_likelihood

    eps = 0.05
    lines = [
        "",
        f"Part 3: Bayes attack on per-record releases, Cleveland, secret sex, balanced prior, ε = {eps} "
        f"({trials} releases per mechanism)",
    ]
    rest = {
        "swm": "slices sphere(m = 128, seed = 11) guarantee ave_srpp(alpha = 4, epsilon = 0.05)",
        "wasserstein": "guarantee pufferfish(epsilon = 0.05)",
    }
    try:
        comp = {m: dpspec.compile(dpspec.loads(ATTACK.format(mech=m, rest=r), name="attack")) for m, r in rest.items()}
    except SpecError as e:
        return lines + [f"skipped ({', '.join(sorted({d.rule for d in e.diagnostics}))})"]
    from dpspec.pufferfish import BalancedSubsampleWorld

    sc = comp["swm"].spec.ir.scenarios[0]
    table = load_table(sc.data, None)
    X = table.matrix(("age", "trestbps", "chol"))
    lab = np.array([str(int(v)) for v in table.column("sex")], dtype=object)
    world = BalancedSubsampleWorld(X, lab, seed=3, secret_values=["0", "1"])
    laws = {s: np.clip(world.records_of(s), [20, 80, 100], [90, 220, 600]) for s in ("0", "1")}
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, trials)
    Z = np.vstack([laws[str(t)][rng.integers(0, len(laws[str(t)]))] for t in truth])
    sig = comp["swm"].certificate.results[0].mechanism.parameters["sigma"]
    guess = bayes_attack(Z + sig * rng.standard_normal(Z.shape), laws, {"0": 0.5, "1": 0.5}, sig**2)
    acc_swm = float(np.mean(guess == truth))
    p = comp["wasserstein"].certificate.results[0].mechanism.parameters
    b = np.array([p["scale_0"], p["scale_1"], p["scale_2"]])
    Y = Z + rng.laplace(size=Z.shape) * b
    ll = np.column_stack([laplace_log_likelihood(Y, laws[s], b) for s in ("0", "1")])
    acc_w = float(np.mean(np.argmax(ll, 1) == truth))
    se = 1.96 * math.sqrt(0.25 / trials)
    lines += [
        f"Ave-SRPP (α = 4) release:   accuracy {acc_swm:.3f} ± {se:.3f}; an order-4 Rényi bound of {eps} on the "
        f"whole output would allow ≤ {0.5 + math.sqrt(eps / 2) / 2:.3f}",
        f"ε-Pufferfish (Wasserstein): accuracy {acc_w:.3f} ± {se:.3f}; its bound e^ε/(1 + e^ε) = "
        f"{math.exp(eps) / (1 + math.exp(eps)):.3f}",
    ]
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args(argv)
    print("\n".join(aggregate_table()))
    print("\n".join(markov_table(args.full)))
    print("\n".join(attack_table(40_000 if args.full else 8_000)))
    print("\n".join(share_table(args.full)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
