#!/usr/bin/env python3
"""Benchmark dpspec.accounting against Opacus 1.6 and dp_accounting 0.6 (same run).

Prints four tables (values and wall times; ratio = ours / theirs, < 1 is faster):

1. epsilon of DP-SGD for T = 10^5 steps (Poisson, add/remove, delta = 1e-5):
   ours on DEFAULT_ALPHAS (225 orders, 1.01 ... 8192) vs Opacus RDPAccountant on its
   default grid (150 orders, 1.1 ... 63) vs dp_accounting RdpAccountant (its default
   grid, 1.1 ... 1024).  "ours@op" is ours restricted to the Opacus grid (must equal
   Opacus to ~1e-6 where Opacus' float series is accurate).
2. noise calibration: calibrate_dpsgd_sigma vs opacus get_noise_multiplier(accountant="rdp")
   and dp_accounting calibrate_dp_mechanism (RDP).
3. group amplification (Schuchardt et al. 2024 Thm 4.2), K = 2, 4, 8: the whole
   curve for orders <= 256 and for the full default grid, and epsilon vs the
   "amplify then group property" baseline.
4. tiny RDP values vs mpmath (relative error), where float log-sums fail.

Timings: median of ``REPEATS`` calls after one warm-up call (2-core VM; +-50 % noise).
Run:  .venv/bin/python benchmarks/bench_accounting.py
"""

from __future__ import annotations

import logging
import statistics
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore")
logging.getLogger("absl").setLevel(logging.ERROR)
logging.disable(logging.WARNING)

from dpspec import accounting as acc  # noqa: E402

REPEATS = 7
DELTA = 1e-5


def timed(fn, repeats=REPEATS):
    fn()  # warm-up (imports, caches)
    ts, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return out, statistics.median(ts)


def opacus_eps(q, s, T, delta=DELTA):
    from opacus.accountants import RDPAccountant
    a = RDPAccountant()
    a.history = [(s, q, T)]
    return a.get_privacy_spent(delta=delta)[0]


def dpa_eps(q, s, T, delta=DELTA):
    import dp_accounting as dpa
    from dp_accounting.rdp import RdpAccountant
    a = RdpAccountant()
    a.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), T))
    return a.get_epsilon(delta)


OPACUS_ALPHAS = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), float)


def ours_on_opacus_grid(q, s, T, delta=DELTA):
    c = acc.dpsgd_rdp_curve(s, q, T, alphas=OPACUS_ALPHAS)
    return acc.rdp_to_dp(c.alphas, c.rdp, delta)[0]


def table_epsilon():
    print("1. DP-SGD epsilon, T = 100000 steps, delta = 1e-5 (time in ms)")
    hdr = (f"{'q':>7} {'sigma':>6} | {'ours':>8} {'t_ours':>7} | {'ours@op':>8} | {'opacus':>8} "
           f"{'t_op':>7} {'ratio':>6} | {'dp_acc':>8} {'t_dpa':>7} {'ratio':>6}")
    print(hdr)
    print("-" * len(hdr))
    T = 100_000
    for q, s in [(1e-3, 1.1), (4e-3, 1.1), (1e-2, 2.0), (2e-2, 1.5), (1e-3, 5.0), (1e-4, 20.0)]:
        e, t = timed(lambda: acc.dpsgd_epsilon(s, q, T, DELTA))
        eo, to = timed(lambda: opacus_eps(q, s, T))
        ed, td = timed(lambda: dpa_eps(q, s, T), repeats=3)
        e_op = ours_on_opacus_grid(q, s, T)
        print(f"{q:>7g} {s:>6g} | {e:>8.4f} {t * 1e3:>7.1f} | {e_op:>8.4f} | {eo:>8.4f} "
              f"{to * 1e3:>7.1f} {t / to:>6.2f} | {ed:>8.4f} {td * 1e3:>7.1f} {t / td:>6.2f}")
    print()


def table_calibration():
    from opacus.accountants.utils import get_noise_multiplier
    import dp_accounting as dpa
    from dp_accounting.rdp import RdpAccountant

    def dpa_cal(target, q, T):
        def event(s):
            return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), T)
        return dpa.calibrate_dp_mechanism(RdpAccountant, event, target, DELTA,
                                          dpa.LowerEndpointAndGuess(0.3, 1.0), tol=1e-4)

    print("2. Noise calibration, delta = 1e-5 (sigma; time in ms; eps = certified epsilon "
          "of our sigma)")
    hdr = (f"{'target':>6} {'q':>6} {'T':>6} | {'ours':>8} {'t_ours':>7} {'eps':>9} | "
           f"{'opacus':>8} {'t_op':>7} {'ratio':>6} | {'dp_acc':>8} {'t_dpa':>7} {'ratio':>6}")
    print(hdr)
    print("-" * len(hdr))
    for target, q, T in [(1.0, 0.01, 1000), (3.0, 0.01, 1000), (8.0, 0.01, 1000),
                         (1.0, 0.004, 100_000), (0.5, 0.001, 10_000)]:
        s, t = timed(lambda: acc.calibrate_dpsgd_sigma(target, DELTA, q, T), repeats=3)
        so, to = timed(lambda: get_noise_multiplier(target_epsilon=target, target_delta=DELTA,
                                                    sample_rate=q, steps=T, accountant="rdp"),
                       repeats=3)
        sd, td = timed(lambda: dpa_cal(target, q, T), repeats=1)
        e = acc.dpsgd_epsilon(s, q, T, DELTA)
        print(f"{target:>6g} {q:>6g} {T:>6} | {s:>8.5f} {t * 1e3:>7.1f} {e:>9.6f} | {so:>8.5f} "
              f"{to * 1e3:>7.1f} {t / to:>6.2f} | {sd:>8.5f} {td * 1e3:>7.1f} {t / td:>6.2f}")
    print()


def table_group():
    from dpspec.accounting.group import baseline_curve
    from dpspec.accounting.poisson import poisson_gaussian_curve
    print("3. Group amplification (Thm 4.2): curve time (ms) and epsilon after T steps, "
          "delta = 1e-8, orders <= 256")
    hdr = (f"{'sigma':>5} {'q':>6} {'K':>2} {'T':>6} | {'t<=256':>7} {'t_full':>7} | "
           f"{'tight eps':>10} {'baseline':>10} {'ratio':>6}")
    print(hdr)
    print("-" * len(hdr))
    g256 = acc.DEFAULT_ALPHAS[acc.DEFAULT_ALPHAS <= 256]
    for s, q, K, T in [(1.0, 0.01, 2, 100), (2.0, 0.001, 4, 1000), (1.0, 0.001, 4, 10_000),
                       (2.0, 0.01, 8, 100), (5.0, 0.01, 8, 100), (1.0, 0.01, 8, 100)]:
        _, t256 = timed(lambda: poisson_gaussian_curve(g256, s, q, K), repeats=3)
        _, tfull = timed(lambda: poisson_gaussian_curve(acc.DEFAULT_ALPHAS, s, q, K), repeats=1)
        c = acc.dpsgd_rdp_curve(s, q, T, group_size=K, alphas=g256)
        e = acc.dp_from_curve(c, 1e-8).epsilon
        b = baseline_curve(g256, s, q, K, envelope=True)
        eb = acc.rdp_to_dp(g256, b.rdp * T, 1e-8)[0]
        print(f"{s:>5g} {q:>6g} {K:>2} {T:>6} | {t256 * 1e3:>7.1f} {tfull * 1e3:>7.1f} | "
              f"{e:>10.5f} {eb:>10.5f} {e / eb:>6.3f}")
    print()


def table_tiny():
    import mpmath as mp
    from dp_accounting.rdp import rdp_privacy_accountant as R
    from opacus.accountants.analysis.rdp import _compute_rdp

    def exact(q, s, a):
        with mp.workdps(40):
            q, s, a = mp.mpf(q), mp.mpf(s), mp.mpf(a)

            def f(z):
                u = q * mp.expm1((z - mp.mpf(1) / 2) / s ** 2)
                return mp.npdf(z, 0, s) * ((1 + u) ** a - 1 - a * u)
            hi = float(a) + 12 * float(s)
            pts = [-mp.inf] + list(np.linspace(-12 * float(s), hi, 30)) + [mp.inf]
            return float(mp.log1p(mp.quad(f, pts)) / (a - 1))

    print("4. Tiny RDP values: relative error vs mpmath (40 digits); negative = under-report")
    hdr = (f"{'q':>6} {'sigma':>5} {'alpha':>5} | {'exact':>11} | {'ours':>9} {'opacus':>9} "
           f"{'dp_acc':>9}")
    print(hdr)
    print("-" * len(hdr))
    for q, s, a in [(1e-4, 50.0, 2.0), (1e-4, 50.0, 1.5), (1e-5, 100.0, 2.0), (1e-3, 1.1, 10.5)]:
        ex = exact(q, s, a)
        ours = acc.poisson_gaussian_rdp(a, s, q)
        op = _compute_rdp(q, s, a)
        dp = R._compute_rdp_poisson_subsampled_gaussian(q, s, [a])[0]
        print(f"{q:>6g} {s:>5g} {a:>5g} | {ex:>11.4e} | {ours / ex - 1:>9.1e} "
              f"{op / ex - 1:>9.1e} {dp / ex - 1:>9.1e}")
    print()


def main():
    import opacus
    from importlib.metadata import version
    print(f"dpspec.accounting benchmark | opacus {opacus.__version__} | dp-accounting "
          f"{version('dp-accounting')} | numpy {np.__version__}\n")
    table_epsilon()
    table_calibration()
    table_group()
    table_tiny()


if __name__ == "__main__":
    main()
