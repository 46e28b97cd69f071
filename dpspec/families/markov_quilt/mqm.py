"""The Markov Quilt Mechanism (MQM) on Markov chains (Song, Wang & Chaudhuri 2017, §4).

**Setting.** A sequence X_0, …, X_{T−1} on k states, a Markov chain θ = (q, P): X_0 ~ q, transitions P;
Θ is a class of chains. The secrets are the values of each X_i; the pairs (X_i = x, X_i = x′) for
x ≠ x′ with positive probability. F is L-Lipschitz in each X_j (the frequency of a state: L = 1/T).

**Markov quilts of node i** (for a chain): a set X_Q of nodes that separates a "nearby" set X_N ∋ X_i
from the rest: two-sided {X_{i−a}, X_{i+b}} (X_N = X_{i−a+1..i+b−1}, a + b − 1 nodes), one-sided
{X_{i−a}} (X_N = X_{i−a+1..T−1}) or {X_{i+b}} (X_N = X_{0..i+b−1}), or empty (X_N = everything, T nodes).
Its max-influence is

    e_Θ(X_Q | X_i) = sup_{θ ∈ Θ} max_{x ≠ x′} max_{x_Q} log P_θ(X_Q = x_Q | X_i = x) / P_θ(X_Q = x_Q | X_i = x′).

**Mechanism.** σ_i = min over quilts with e < ε of card(X_N) / (ε − e) (the empty quilt gives T/ε);
release F(X) + L · max_i σ_i · Z with Z ~ Laplace(1). Song et al. prove it ε-Pufferfish private
(§4, the MQM privacy theorem: given the quilt, X_N carries at most card(X_N)·L of F and the remote
part at most e of information about X_i).

**Max-influence on a chain (closed form).** Given X_i, past and future are independent (Markov
property), so P(X_{i−a} = u, X_{i+b} = v | X_i = x) = P(X_{i−a} = u | x) · P^b(x, v) and
P(X_{i−a} = u | x) = p_{i−a}(u) P^a(u, x) / p_i(x), p_t = q P^t. Hence

    e = max_{x ≠ x′} [ max_u log(P^a(u, x) / P^a(u, x′)) + log(p_i(x′) / p_i(x)) + max_v log(P^b(x, v) / P^b(x′, v)) ]

(u over the support of p_{i−a}; a ratio whose two terms are 0 is an event of probability 0 under both
and is skipped; a positive term over 0 is +∞). :func:`max_influence` evaluates it exactly for an
explicit finite class of chains; the tests compare it with a brute-force enumeration of all state
sequences of short chains.

**A class by its mixing (the MQMApprox idea, §4.4).** For the class of *reversible* chains started at
their stationary law π, with π(x) ≥ π_min for every state and second-largest absolute eigenvalue
λ* ≤ λ, the spectral representation P^t(x, y)/π(y) = Σ_j λ_j^t f_j(x) f_j(y) (f_j orthonormal in
L²(π), f_1 = 1; Levin, Peres & Wilmer, *Markov Chains and Mixing Times*, §12.1) and Cauchy–Schwarz
with Σ_j f_j(x)² = 1/π(x) give |P^t(x, y)/π(y) − 1| ≤ λ^t / √(π(x)π(y)) ≤ δ_t := λ^t / π_min. With
reversibility P(X_{i−a} = u | X_i = x) = P^a(x, u), so each side's ratio lies in
[(1 − δ)/(1 + δ), (1 + δ)/(1 − δ)] and

    e ≤ log((1 + δ_a)/(1 − δ_a)) + log((1 + δ_b)/(1 − δ_b))   (while δ_a, δ_b < 1; one term for one side)

for every chain of the class (:func:`reversible_influence_bound`); the tests check it against the exact
influence of random reversible chains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

__all__ = [
    "MarkovChain",
    "MqmCalibration",
    "max_influence",
    "calibrate_mqm",
    "reversible_influence_bound",
    "calibrate_mqm_reversible",
    "calibrate_by_bound",
    "group_dp_scale",
]


@dataclass(frozen=True)
class MarkovChain:
    """θ = (q, P); ``initial = None`` means the stationary law of P (which must then be unique)."""

    transition: np.ndarray
    initial: np.ndarray | None = None
    stationary_start: bool = field(init=False, default=False)

    def __post_init__(self):
        P = np.asarray(self.transition, dtype=float)
        if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] < 2:
            raise ValueError("the transition matrix must be square with at least two states")
        if np.any(P < 0) or not np.allclose(P.sum(1), 1.0, atol=1e-12):
            raise ValueError("each row of the transition matrix must be a probability vector")
        object.__setattr__(self, "transition", P)
        object.__setattr__(self, "stationary_start", self.initial is None)
        q = stationary(P) if self.initial is None else np.asarray(self.initial, dtype=float)
        if q.shape != (P.shape[0],) or np.any(q < 0) or abs(q.sum() - 1.0) > 1e-12:
            raise ValueError("the initial law must be a probability vector over the states")
        object.__setattr__(self, "initial", q)

    @property
    def k(self) -> int:
        return self.transition.shape[0]

    @property
    def start(self) -> np.ndarray:
        """The law of the first state: ``initial``, or the stationary law, which ``__post_init__`` stores there."""
        assert self.initial is not None
        return self.initial


def _closed_classes(pos: list[list[bool]]) -> list[list[int]]:
    """The closed communicating classes of the transition graph ``pos`` (pos[i][j]: i → j possible), each
    sorted: the classes C with no transition leaving C (Tarjan-free: k is small, reachability by search)."""
    k = len(pos)
    reach = []
    for i in range(k):
        seen, stack = {i}, [i]
        while stack:
            u = stack.pop()
            for v in range(k):
                if pos[u][v] and v not in seen:
                    seen.add(v)
                    stack.append(v)
        reach.append(seen)
    out = []
    for i in range(k):
        # i is recurrent iff every state it reaches reaches it back; its class is then closed
        if all(i in reach[j] for j in reach[i]):
            cls = sorted(reach[i])
            if cls not in out:
                out.append(cls)
    return out


def stationary_exact(P: np.ndarray) -> list[Fraction]:
    """The stationary law of the chain, in exact rational arithmetic (GTH elimination).

    The chain is the stochastic matrix whose off-diagonal entries are P's entries read as the exact
    binary fractions they are (the diagonal is implied, 1 − the row's other entries). A stationary law
    is unique iff the chain has exactly one closed class C; it is then supported on C and is the
    stationary law of the irreducible chain restricted to C. On C the Grassmann–Taksar–Heyman
    elimination (Grassmann, Taksar & Heyman 1985, Operations Research 33(5), §2) censors the states one
    at a time: eliminating state n replaces p_ij by p_ij + p_in p_nj / s_n with s_n = Σ_{j<n} p_nj > 0
    (irreducibility), and back-substitution gives π_n = Σ_{i<n} π_i p_in / s_n. No subtraction occurs and
    every operation is exact in ``Fraction``, so the result has no error: a nearly reducible chain
    (a tiny eigengap, where an eigenvector solver loses the digits) is handled like any other."""
    A = np.asarray(P, dtype=float)
    k = A.shape[0]
    F = [[Fraction(float(A[i, j])) if i != j else Fraction(0) for j in range(k)] for i in range(k)]
    classes = _closed_classes([[F[i][j] > 0 for j in range(k)] for i in range(k)])
    if len(classes) != 1:
        raise ValueError(
            f"the chain has {len(classes)} closed classes, so no unique stationary law: give the initial law"
        )
    C = classes[0]
    m = len(C)
    M = [[F[C[i]][C[j]] for j in range(m)] for i in range(m)]
    s = [Fraction(0)] * m
    for n in range(m - 1, 0, -1):
        s[n] = sum(M[n][:n], Fraction(0))
        if s[n] == 0:  # impossible on a closed class (irreducible): a guard, not a branch
            raise ValueError("the chain's recurrent class is not irreducible")
        for i in range(n):
            if M[i][n]:
                f = M[i][n] / s[n]
                for j in range(n):
                    if M[n][j]:
                        M[i][j] += f * M[n][j]
    x = [Fraction(1)] + [Fraction(0)] * (m - 1)
    for n in range(1, m):
        x[n] = sum((x[i] * M[i][n] for i in range(n)), Fraction(0)) / s[n]
    tot = sum(x, Fraction(0))
    out = [Fraction(0)] * k
    for i, c in enumerate(C):
        out[c] = x[i] / tot
    return out


#: the most states for which the exact stationary law is computed (GTH in rationals is O(k³) operations
#: on fractions whose size grows with k)
MAX_STATES = 64


def stationary(P: np.ndarray) -> np.ndarray:
    """The stationary law of P as float64 (:func:`stationary_exact` rounded to nearest: each entry has a
    relative error of at most 2⁻⁵³, whatever the chain's eigengap); refused when it is not unique."""
    k = np.asarray(P).shape[0]
    if k > MAX_STATES:
        raise ValueError(f"the exact stationary law is computed for at most {MAX_STATES} states, the chain has {k}")
    pi = np.array([float(v) for v in stationary_exact(P)])
    if np.any((pi > 0) & (pi < TINY)):
        raise ValueError("a stationary probability is below float64's normal range: no certified rounding bound")
    return pi


def _log_ratio_max(M: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """R[x, x′] = max over rows u (``rows`` mask) of log(M[u, x] / M[u, x′]); rows where both are 0 are
    skipped, a positive entry over 0 gives +∞, no admissible row gives −∞."""
    A = M[rows][:, :, None]  # (u, x, 1)
    B = M[rows][:, None, :]  # (u, 1, x′)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where((A == 0) & (B == 0), -np.inf, np.log(A) - np.log(B))
    r = np.where((A > 0) & (B == 0), np.inf, r)
    return r.max(axis=0) if r.shape[0] else np.full(M.shape[1:] * 2, -np.inf)


#: the smallest positive entry a computed matrix power may have: below it, a further product may underflow
#: (float64's normal range ends near 2.2e-308) and the componentwise error bound no longer holds
TINY = 1e-290


class _Powers:
    """P^t by repeated multiplication. P and its powers are non-negative, so each product has a
    componentwise relative error of at most γ_k = k·u/(1 − k·u) (Higham 2002, §3.5) and the computed P^t
    is within a factor (1 ± δ_t), δ_t = (1 + γ_k)^t − 1, of the exact one entry by entry (exact zeros stay
    exact zeros) — as long as nothing underflows: a positive entry below TINY, or a zero where the
    exact power is positive (tracked by the boolean pattern), is refused."""

    def __init__(self, P: np.ndarray):
        self.P = P
        self.pw = [np.eye(P.shape[0])]
        self.pattern = P > 0
        self.pat = [np.eye(P.shape[0], dtype=bool)]
        self.left: dict = {}  # (a, support of p_{i−a}) → max_u log ratio matrix
        self.right: dict = {}  # b → max_v log ratio matrix
        self._check(P, self.pattern)

    @staticmethod
    def _check(M: np.ndarray, pattern: np.ndarray) -> None:
        if np.any((M > 0) & (M < TINY)) or np.any(pattern & (M == 0)):
            raise ValueError(
                "the chain's transition probabilities are so small that their powers leave float64's range, "
                "where the max-influence has no certified rounding bound"
            )

    def __call__(self, t: int) -> np.ndarray:
        while len(self.pw) <= t:
            M = self.pw[-1] @ self.P
            pat = (self.pat[-1].astype(np.int64) @ self.pattern.astype(np.int64)) > 0
            self._check(M, pat)
            self.pw.append(M)
            self.pat.append(pat)
        return self.pw[t]


def rounding_slack(T: int, k: int) -> float:
    """An absolute bound on the float64 error of a max-influence of a chain of T steps on k states: each
    of the at most three log-ratio terms (two from powers P^a, P^b with a, b < T, one from the
    stationary law, rounded to nearest from its exact value) is off by at most log((1 + δ)/(1 − δ)),
    δ = (1 + γ_k)^T − 1 (:class:`_Powers`), and the logs and their sums by a few units of their
    magnitude (at most |log TINY| < 700, so 2e-12 covers them)."""
    u = 2.0**-53
    g = k * u / (1 - k * u)
    d = math.expm1(T * math.log1p(g))
    if d >= 1:
        return math.inf
    return 3 * (math.log1p(d) - math.log1p(-d)) + 2e-12


def _laws(chain: MarkovChain, T: int) -> np.ndarray:
    if chain.stationary_start:  # p_t = π for every t, exactly (iterating π P^t would drift by rounding)
        return np.tile(chain.start, (T, 1))
    p = np.empty((T, chain.k))
    p[0] = chain.start
    pat = np.empty((T, chain.k), dtype=bool)
    pat[0] = chain.start > 0
    step = (chain.transition > 0).astype(np.int64)
    for t in range(1, T):
        p[t] = p[t - 1] @ chain.transition
        pat[t] = (pat[t - 1].astype(np.int64) @ step) > 0
    _Powers._check(p, pat)  # the laws p_t are products of non-negative numbers too (same error bound)
    return p


def max_influence(chains, T: int, i: int, a: int | None, b: int | None) -> float:
    """e_Θ(X_Q | X_i) of the quilt {X_{i−a}, X_{i+b}} (``a`` or ``b`` None for a one-sided quilt) over the
    explicit class ``chains`` (a MarkovChain or a sequence of them), exactly (closed form above)."""
    chains = [chains] if isinstance(chains, MarkovChain) else list(chains)
    best = -np.inf
    for ch in chains:
        pw = _Powers(ch.transition)
        p = _laws(ch, T)
        best = max(best, _influence(ch, pw, p, i, a, b))
    return float(best)


def _influence(ch: MarkovChain, pw, p: np.ndarray, i: int, a: int | None, b: int | None) -> float:
    k = ch.k
    pos = p[i] > 0
    total = np.zeros((k, k))
    if a is not None:
        key = (a, (p[i - a] > 0).tobytes())
        left = pw.left.get(key)
        if left is None:
            left = pw.left[key] = _log_ratio_max(pw(a), p[i - a] > 0)
        with np.errstate(divide="ignore"):
            lp = np.log(p[i])
        total = total + left + (lp[None, :] - lp[:, None])
    if b is not None:
        right = pw.right.get(b)
        if right is None:
            right = pw.right[b] = _right(pw(b))
        total = total + right
    mask = pos[:, None] & pos[None, :] & ~np.eye(k, dtype=bool)
    if not mask.any():
        return -np.inf
    e = float(np.max(total[mask]))
    # rounded up: the matrix powers and logs are float64, so the influence is raised by a slack at least
    # their proven rounding error (rounding_slack; far below 1e-9 for the chains dpspec takes)
    T = p.shape[0]
    return e + max(INFLUENCE_SLACK * max(1.0, abs(e)), rounding_slack(T, k))


#: relative slack added to every float64 max-influence (an upper bound must not be rounded down)
INFLUENCE_SLACK = 1e-9


def _right(Pb: np.ndarray) -> np.ndarray:
    """R[x, x′] = max_v log(P^b(x, v) / P^b(x′, v))."""
    return _log_ratio_max(Pb.T, np.ones(Pb.shape[0], bool))


@dataclass
class MqmCalibration:
    """σ_i per node, the Laplace scale L·max σ_i, and the best quilt of the node that sets it."""

    epsilon: float
    lipschitz: float
    sigma: np.ndarray
    scale: float
    worst_node: int
    worst_quilt: tuple
    method: str
    worst_influence: float = 0.0  # e of the quilt that sets σ at the worst node (0 for the empty quilt)
    notes: list[str] = field(default_factory=list)


def calibrate_mqm(chains, T: int, epsilon: float, *, lipschitz: float | None = None) -> MqmCalibration:
    """MQM over an explicit class of chains (MQMExact): for every node the exact minimum of card/(ε − e)
    over all its quilts. Two-sided quilts are searched by increasing card = a + b − 1; a quilt with
    card ≥ σ·ε cannot beat a σ already found, so the search stops there — the minimum is exact."""
    chains = [chains] if isinstance(chains, MarkovChain) else list(chains)
    if not chains:
        raise ValueError("the class of chains is empty")
    eps = float(epsilon)
    if not eps > 0:
        raise ValueError("epsilon must be > 0")
    L = 1.0 / T if lipschitz is None else float(lipschitz)
    sig = np.full(T, T / eps)
    infl = np.zeros(T)
    quilt: list[tuple] = [("empty",)] * T
    data = [(ch, _Powers(ch.transition), _laws(ch, T)) for ch in chains]

    def e_of(i, a, b):
        return max(_influence(ch, pw, p, i, a, b) for ch, pw, p in data)

    def search(i: int) -> None:
        # one-sided quilts: card = T − 1 − i + a (left) or i + b (right)
        for b in range(1, T - i):
            card = i + b
            if card >= sig[i] * eps:
                break
            e = e_of(i, None, b)
            if e < eps and card / (eps - e) < sig[i]:
                sig[i], quilt[i], infl[i] = card / (eps - e), ("right", b), e
        for a in range(1, i + 1):
            card = T - 1 - i + a
            if card >= sig[i] * eps:
                break
            e = e_of(i, a, None)
            if e < eps and card / (eps - e) < sig[i]:
                sig[i], quilt[i], infl[i] = card / (eps - e), ("left", a), e
        s = 2
        while s - 1 < sig[i] * eps and s <= T:
            for a in range(1, s):
                b = s - a
                if i - a < 0 or i + b > T - 1:
                    continue
                e = e_of(i, a, b)
                if e < eps and (s - 1) / (eps - e) < sig[i]:
                    sig[i], quilt[i], infl[i] = (s - 1) / (eps - e), ("both", a, b), e
            s += 1

    todo: Sequence[int] = range(T)
    done: set[int] = set()
    if all(ch.stationary_start for ch, _pw, _p in data):
        # stationary starts: p_t = π for every t, so a node's influences depend on i only through which
        # quilts fit. With D = ⌊σ_m·ε⌋ + 1 for the middle node m, every node at distance ≥ D from both
        # ends has the same two-sided quilts of card < σ_m·ε (a, b < D) and one-sided ones of card > D,
        # which cannot win: its σ, quilt and e are exactly m's (the same float operations).
        m = T // 2
        search(m)
        done.add(m)
        D = math.floor(sig[m] * eps) + 1
        if min(m, T - 1 - m) >= D:
            sig[D : T - D], infl[D : T - D] = sig[m], infl[m]
            for i in range(D, T - D):
                quilt[i] = quilt[m]
            todo = [i for i in range(T) if i < D or i >= T - D]
    for i in todo:
        if i not in done:
            search(i)
    j = int(np.argmax(sig))
    return MqmCalibration(
        eps, L, sig, float(np.nextafter(L * sig[j], np.inf)), j, quilt[j], "exact (explicit class)", float(infl[j])
    )


def reversible_influence_bound(pi_min: float, lam: float, a: int | None, b: int | None) -> float:
    """Upper bound on the max-influence of quilt {X_{i−a}, X_{i+b}} over every reversible stationary chain
    with π ≥ ``pi_min`` and λ* ≤ ``lam`` (module docstring); +∞ when a side's δ_t = λ^t/π_min ≥ 1."""
    if not (0 < pi_min <= 0.5) or not (0 <= lam < 1):
        raise ValueError("need 0 < pi_min ≤ 1/2 and 0 ≤ lambda < 1")
    out = 0.0
    for t in (a, b):
        if t is None:
            continue
        d = lam**t / pi_min
        if d >= 1.0:
            return math.inf
        out += math.log1p(d) - math.log1p(-d)
    return out


def calibrate_mqm_reversible(
    pi_min: float, lam: float, T: int, epsilon: float, *, lipschitz: float | None = None
) -> MqmCalibration:
    """MQM for the class of reversible stationary chains with π ≥ π_min and λ* ≤ λ: the influence bound
    depends only on the quilt's distances, so σ_i is the minimum over quilts of card/(ε − bound)."""
    return calibrate_by_bound(
        lambda a, b: reversible_influence_bound(pi_min, lam, a, b),
        T,
        epsilon,
        lipschitz=lipschitz,
        method=f"reversible class (π_min = {pi_min:g}, λ* ≤ {lam:g})",
    )


def calibrate_by_bound(bound, T: int, epsilon: float, *, lipschitz: float | None = None, method: str) -> MqmCalibration:
    """MQM with a max-influence bound ``bound(a, b)`` that depends only on the quilt's distances a (left)
    and b (right; None for a one-sided quilt), not on the node: σ_i is the minimum over the quilts of
    node i of card/(ε − bound). Two-sided windows are searched once for the interior, keeping only those
    that improved the interior optimum (near the ends a node may get a σ_i above its minimum: sound,
    PROOF.md §3.3)."""
    eps = float(epsilon)
    L = 1.0 / T if lipschitz is None else float(lipschitz)
    # two-sided: best (a, b) for every window, ignoring the ends (valid where i − a ≥ 0, i + b ≤ T − 1)
    best2 = []  # (sigma, a, b)
    s = 2
    cur = T / eps
    while s - 1 < cur * eps and s <= T:
        for a in range(1, s):
            e = bound(a, s - a)
            if e < eps and (s - 1) / (eps - e) < cur:
                cur = (s - 1) / (eps - e)
                best2.append((cur, a, s - a, e))
        s += 1
    sig = np.full(T, T / eps)
    infl = np.zeros(T)
    quilt: list[tuple] = [("empty",)] * T
    ts = np.arange(1, T)
    er_all = np.array([bound(None, int(t)) for t in ts], dtype=float)  # right quilt {X_{i+t}}
    el_all = np.array([bound(int(t), None) for t in ts], dtype=float)  # left quilt {X_{i−t}}
    for i in range(T):
        for val, a, b, e2 in best2:
            if i - a >= 0 and i + b <= T - 1 and val < sig[i]:
                sig[i], quilt[i], infl[i] = val, ("both", a, b), e2
        # one-sided quilts in the order t = 1, 2, … (right, then left), each replacing the best when strictly
        # smaller: the first occurrence of the smallest candidate below the current σ_i. A candidate has
        # σ ≥ card/ε, so t with card ≥ σ_i·ε on both sides cannot win and is not evaluated.
        cap = min(T - 1, max(math.ceil(sig[i] * eps) - i, math.ceil(sig[i] * eps) - (T - 1 - i), 0))
        if cap <= 0:
            continue
        t, er, el = ts[:cap], er_all[:cap], el_all[:cap]
        with np.errstate(divide="ignore", invalid="ignore"):
            right = np.where((er < eps) & (i + t <= T - 1), (i + t) / (eps - er), np.inf)
            left = np.where((el < eps) & (i - t >= 0), (T - 1 - i + t) / (eps - el), np.inf)
        cand = np.empty(2 * cap)
        cand[0::2], cand[1::2] = right, left
        k = int(np.argmin(cand))
        if cand[k] < sig[i]:
            tk = int(t[k // 2])
            if k % 2 == 0:
                sig[i], quilt[i], infl[i] = cand[k], ("right", tk), er[k // 2]
            else:
                sig[i], quilt[i], infl[i] = cand[k], ("left", tk), el[k // 2]
    j = int(np.argmax(sig))
    return MqmCalibration(
        eps,
        L,
        sig,
        float(np.nextafter(L * sig[j], np.inf)),
        j,
        quilt[j],
        method,
        float(infl[j]),
    )


def group_dp_scale(T: int, epsilon: float, lipschitz: float | None = None) -> float:
    """Laplace scale of group DP with the whole (fully correlated) chain as one group: L·T/ε."""
    L = 1.0 / T if lipschitz is None else float(lipschitz)
    return L * T / float(epsilon)
