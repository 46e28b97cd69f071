"""Dataset-level attribute secrets: the proportion of records with an attribute (Zhang, Ohrimenko &
Cummings 2022, "Attribute privacy: framework and mechanisms", FAccT, §3 — distributional attribute
privacy as a Pufferfish instance).

The secret is the parameter p of a prior under which the n records are i.i.d.: each satisfies the
predicate with probability p, and a record's values given the predicate follow fixed laws P_T, P_F
(here the data's conditional laws). The count K of records satisfying it is Binomial(n, p).

**Lemma D** (PROOF.md). For a decomposable query f(X) = c·Σ_j g(x_j) and proportions p, p′,

    W∞(P_p(f), P_p′(f)) ≤ c · m(n, p, p′) · W∞(P_T(g), P_F(g)),

where m(n, p, p′) = W∞(Binomial(n, p), Binomial(n, p′)) (an integer), with equality when g is the
predicate's indicator (f = c·K). m is computed here exactly, in rational arithmetic: p and p′ are
the decimal proportions of the spec, so every CDF value is an integer over d^n (d a common
denominator) and no rounding enters.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["binomial_w_inf", "proportion"]

#: the largest dataset for which m(n, p, p′) is computed (O(n) big-integer steps of O(n log d) bits)
MAX_RECORDS = 100_000


def proportion(text: str) -> Fraction:
    """A proportion's decimal text ("0.45") as an exact fraction in [0, 1]."""
    p = Fraction(text)
    if not 0 <= p <= 1:
        raise ValueError(f"a proportion is in [0, 1], got {text}")
    return p


def _cdf_stream(n: int, a: int, b: int):
    """Yield d^n · P(Binomial(n, a/d) ≤ k) for k = 0..n as integers (b = d − a)."""
    term = b**n  # C(n, 0) a^0 b^n
    total = term
    yield total
    for k in range(n):
        # C(n, k+1) a^{k+1} b^{n-k-1} = C(n, k) a^k b^{n-k} · (n-k) a / ((k+1) b), an exact division
        if b == 0:
            term = 0 if k + 1 < n else a**n
        else:
            num = term * (n - k) * a
            term = num // ((k + 1) * b)
        total += term
        yield total


def binomial_w_inf(n: int, p: Fraction | str, q: Fraction | str) -> int:
    """m(n, p, q) = W∞(Binomial(n, p), Binomial(n, q)), exactly.

    On ℤ with an integer shift m, W∞(μ, ν) ≤ m iff F_ν(k) ≤ F_μ(k + m) and F_μ(k) ≤ F_ν(k + m) for every
    k (the quantile characterisation: F_μ^{-1}(t) ≤ y ⟺ t ≤ F_μ(y), so F_μ^{-1} ≤ F_ν^{-1} + m pointwise
    iff F_ν(k) ≤ F_μ(k + m) for all k). For p ≤ q, Binomial(n, p) is stochastically smaller
    (F_p ≥ F_q), so only F_p(k) ≤ F_q(k + m) binds, and m = max_k (ℓ(k) − k) with
    ℓ(k) = min{l : F_q(l) ≥ F_p(k)}, nondecreasing in k: one merged pass over both CDFs."""
    n = int(n)
    if n < 0 or n > MAX_RECORDS:
        raise ValueError(f"n must be in [0, {MAX_RECORDS}], got {n}")
    p, q = (
        proportion(str(p)) if not isinstance(p, Fraction) else p,
        proportion(str(q)) if not isinstance(q, Fraction) else q,
    )
    if not (0 <= p <= 1 and 0 <= q <= 1):
        raise ValueError("proportions are in [0, 1]")
    if p > q:
        p, q = q, p
    if p == q or n == 0:
        return 0
    d = p.denominator * q.denominator
    ap, aq = p.numerator * q.denominator, q.numerator * p.denominator
    Fp = _cdf_stream(n, ap, d - ap)
    Fq = _cdf_stream(n, aq, d - aq)
    m = 0
    l_idx, fq = 0, next(Fq)
    for k, fp in enumerate(Fp):
        while fq < fp:  # F_q(n) = d^n ≥ F_p(k): the loop stops by l = n
            l_idx += 1
            fq = next(Fq)
        m = max(m, l_idx - k)
    return m
