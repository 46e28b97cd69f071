"""The Markov Quilt Mechanism's re-check for ``dpspec verify`` (``Family.reverify``): from the recorded
numbers only, in exact rationals. The worst node's quilt has card(X_N) nodes and max-influence e (both
recomputed by the recompilation that ``verify`` compares against); the Laplace scale b then certifies
ε = e + card · L / b (σ = card / (ε − e), b = L σ; Song, Wang & Chaudhuri 2017, §4)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any


def _card(quilt: str, node: int, T: int) -> int:
    kind, *d = quilt.split()
    if kind == "empty":
        return T
    if kind == "both":
        return int(d[0]) + int(d[1]) - 1
    if kind == "right":
        return node + int(d[0])
    return T - 1 - node + int(d[0])


def reverify(r: Any, problem: Callable[[str], None], bound: Callable[..., None], rel_tol: float) -> None:
    p = r.mechanism.parameters
    T, node = int(p["records"]), int(p["worst_node"])
    card = _card(str(p["worst_quilt"]), node, T)
    if not 0 < card <= T:
        problem(f"{r.name}: the recorded quilt {p['worst_quilt']!r} at node {node} does not fit a chain of {T} steps")
        return
    b, L, e = Fraction(p["scale_0"]), Fraction(p["lipschitz"]), Fraction(p["worst_influence"])
    if b <= 0:
        problem(f"{r.name}: no noise")
        return
    eps = e + card * L / b
    bound(
        r.name,
        "ε of the worst node's quilt for the recorded Laplace scale (exact rationals)",
        f"node {node}, quilt {p['worst_quilt']}",
        r.guarantee.epsilon,
        float(eps),
        rel_tol * max(1.0, float(eps)),
    )
