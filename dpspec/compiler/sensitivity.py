"""ℓ2 sensitivity of a Gaussian release's query w.r.t. the protected unit.

Sum of d columns with bounds [lo_c, hi_c]:
  add/remove one record:   Δ = √(Σ_c max(|lo_c|, |hi_c|)²)   (the record's own contribution)
  substitute one record:   Δ = √(Σ_c (hi_c − lo_c)²)
A group of K records multiplies either by K (the K contributions can align). Mean over a public
size n (substitution only): the sum's Δ / n. Count: 1 under add/remove (K for a group), 0 under
substitution (the size is public). Histogram: 1 under add/remove, √2 under substitution (× K).
Node and edge units have no generic rule: the sensitivity must be declared.
"""

from __future__ import annotations

import math

from dpspec.ir import models as ir

Problem = tuple[str, str | None, str | None]  # (message, field, hint)


def derive_sensitivity(r: ir.Release, unit, n: int | None) -> tuple[float | None, Problem | None]:
    q = r.query
    declared = r.sensitivity
    if q is not None and q.sensitivity is not None:
        if declared is not None and declared != q.sensitivity:
            return None, (f"two different sensitivities are declared ({declared:g} and {q.sensitivity:g})",
                          "sensitivity", "keep one of them")
        declared = q.sensitivity
    if declared is not None:
        return declared, None
    if q is None:
        return None, ("the release has neither a `query` nor a `sensitivity`", None,
                      "add `sensitivity 1.0` or `query sum(x, bounds = [0, 1])`")
    if q.function == "vector":
        return None, ("a `vector` query needs its sensitivity", "sensitivity",
                      "write vector(dimension = 10, sensitivity = 1.0)")
    if q.function in ("logistic_regression", "linear_svm"):
        return None, (f"`{q.function}` has no derived sensitivity for the Gaussian release", "function",
                      "declare `sensitivity`, or release it with `mechanism swm` under a scenario")
    if unit.kind not in ("record", "group"):
        return None, (f"the sensitivity of `{q.function}` w.r.t. a {unit.kind} unit is not derived", None,
                      "declare it with `sensitivity ...`")
    K = unit.size if unit.kind == "group" else 1
    rel = unit.relation
    if q.function == "count":
        if rel == "substitution":
            return None, ("a count has sensitivity 0 under substitution (the dataset size is public)", "function",
                          "release the size without noise, or protect with relation add_remove")
        return float(K), None
    if q.function == "histogram":
        return float(K) * (math.sqrt(2.0) if rel == "substitution" else 1.0), None
    if not q.columns:
        return None, (f"`{q.function}` names no columns", "columns", f"write {q.function}(age, bounds = [17, 90])")
    if not q.bounds:
        return None, (f"`{q.function}` needs declared bounds to have a bounded sensitivity", "function",
                      f"write {q.function}({', '.join(q.columns)}, bounds = [lo, hi])")
    if len(q.bounds) not in (1, len(q.columns)):
        return None, (f"{len(q.bounds)} bounds for {len(q.columns)} columns", "bounds",
                      "give one [lo, hi] for all columns or one per column")
    bounds = q.bounds if len(q.bounds) == len(q.columns) else q.bounds * len(q.columns)
    if any(not lo < hi for lo, hi in bounds):
        return None, None  # reported by the range rule
    # hypot: no intermediate overflow of the squares (bounds near 1e200 stay finite)
    if rel == "substitution":
        s = math.hypot(*((hi - lo) for lo, hi in bounds))
    else:
        s = math.hypot(*(max(abs(lo), abs(hi)) for lo, hi in bounds))
    s *= K
    if not math.isfinite(s):
        return None, ("the derived sensitivity overflows", "bounds", "rescale the column so that its bounds are "
                      "nearer to 1 (see `dpspec rules DPS205`)")
    if q.function == "mean":
        if rel != "substitution":
            return None, ("a mean has no bounded sensitivity under add/remove", "function",
                          "release sum(...) and count(), or protect with relation substitution and a dataset_size")
        if not n:
            return None, ("a mean needs the (public) dataset size", "function",
                          "add `dataset_size N` to the privacy block")
        s /= n
    if s <= 0:
        return None, ("the derived sensitivity is 0", "bounds", "check the bounds")
    return s, None
