"""ℓ2 sensitivity of a Gaussian release's query w.r.t. the protected unit, with its derivation.

The runtime clamps every value of column c to [lo_c, hi_c] before it evaluates the query
(:mod:`dpspec.families.gaussian.runtime`), so the bounds below hold for the released answer, not only
for data that happens to respect them. With d columns (Dwork & Roth 2014, Def. 3.8):

  sum, add/remove one record:  Δ = √(Σ_c max(|lo_c|, |hi_c|)²)  (the record's own clamped vector)
  sum, substitute one record:  Δ = √(Σ_c (hi_c − lo_c)²)        (each coordinate moves ≤ hi_c − lo_c)
  mean over the public n:      the sum's Δ / n                   (released as clamped sum / n, with the
                               declared ``dataset_size``, never the data's row count: a count that
                               depends on the data is not covered by the sum's Δ under add/remove)
  count, add/remove:           Δ = 1                             (substitution keeps the size: no rule)
  histogram, add/remove:       Δ = 1                             (one bin count moves by 1)
  histogram, substitution:     Δ = √2                            (one count −1, another +1)

A group of up to K records multiplies each Δ by K: the K contributions can align (triangle
inequality; for a histogram all K records may fall in one bin). Node and edge units have no
generic rule: their sensitivity must be declared.

Each derivation is returned as a sympy formula with its variables, so the certificate carries it
and ``dpspec verify`` re-evaluates it; the float Δ is the exact value rounded *up*.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction

from dpspec.ir import models as ir

Problem = tuple[str, str | None, str | None]  # (message, field, hint)

#: queries the runtime evaluates on the data (columns read, values clamped to the bounds)
DATA_QUERIES = ("sum", "mean", "count", "histogram")


@dataclass(frozen=True)
class Derivation:
    """Δ implied by a query for a unit: ``value`` (rounded up), the exact ``squared`` Δ², the sympy
    ``formula`` with its ``variables``, and the rule in words with its source (``statement``)."""

    value: float
    squared: Fraction
    formula: str
    variables: dict = field(default_factory=dict)
    statement: str = ""


def _sqrt_up(x: Fraction) -> float:
    """The smallest float whose square is ≥ x (an upper bound of √x)."""
    y, e = x, 0
    while y > 2**1000:  # float(x) would overflow (Δ² of bounds near 1e308 is above the largest double)
        y, e = y / 2**200, e + 100
    while 0 < y < Fraction(1, 2**1000):  # ... or underflow, and the steps below would be subnormal
        y, e = y * 2**200, e - 100
    s = math.ldexp(math.sqrt(float(y)), e)
    while Fraction(s) ** 2 < x:
        s = math.nextafter(s, math.inf)
    while s > 0 and Fraction(math.nextafter(s, 0.0)) ** 2 >= x:
        s = math.nextafter(s, 0.0)
    return s


def column_bounds(q: ir.BoundedQuery) -> list[tuple[float, float]] | None:
    """Per-column [lo, hi] (one pair given for all columns is repeated); None when they do not fit
    (DPS141) or are not given."""
    k = expected_bounds(q)
    if not q.bounds or not k or len(q.bounds) not in (1, k):
        return None
    return list(q.bounds) if len(q.bounds) == k else list(q.bounds) * k


def expected_bounds(q: ir.BoundedQuery) -> int | None:
    """How many [lo, hi] pairs a query takes: one per column, or per output coordinate of a callable."""
    if q.function == "callable":
        return q.dimension
    if q.function in ("sum", "mean", "histogram", "logistic_regression", "linear_svm"):
        return len(q.columns)
    return None


def query_text(q: ir.BoundedQuery) -> str:
    args = list(q.columns)
    if q.bins is not None:
        args.append(f"bins = {q.bins}")
    if q.bounds:
        args.append(
            "bounds = "
            + (
                "[" + ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in q.bounds) + "]"
                if len(q.bounds) > 1
                else f"[{q.bounds[0][0]:g}, {q.bounds[0][1]:g}]"
            )
        )
    return f"{q.function}({', '.join(args)})"


def implied_sensitivity(q: ir.BoundedQuery, unit, n: int | None) -> tuple[Derivation | None, Problem | None]:
    """The Δ a data query implies for ``unit`` (see the module docstring), or why there is none.
    ``(None, None)``: no generic rule applies (a declared sensitivity is then the only source), or
    the bounds are malformed (reported by DPS105/DPS141)."""
    if q.function not in DATA_QUERIES or unit.kind not in ("record", "group"):
        return None, None
    K = unit.size if unit.kind == "group" else 1
    sub = unit.relation == "substitution"
    who = f"a group of up to {K} records" if K > 1 else "one record"
    how = "replaced" if sub else "inserted or removed"
    group = " × K (the K contributions can align)" if K > 1 else ""
    if q.function == "count":
        if sub:
            return None, (
                "a count has sensitivity 0 under substitution (the dataset size is public)",
                "function",
                "release the size without noise, or protect with relation add_remove",
            )
        return Derivation(
            float(K),
            Fraction(K) ** 2,
            "K",
            {"K": K},
            f"Δ = K = {K}: {who} {how} changes the row count by at most {K}{group}",
        ), None
    if q.function == "histogram":
        if len(q.columns) != 1:
            return None, (
                f"a histogram counts one column, not {len(q.columns)}",
                "columns",
                "write histogram(age, bins = 10, bounds = [17, 90])",
            )
        if q.bins is None or not q.bounds:
            return None, (
                "a histogram needs its public bins: `bins` and `bounds` (equal-width bins over [lo, hi]; "
                "values outside are counted in the end bins)",
                "function",
                f"write histogram({q.columns[0]}, bins = 10, bounds = [lo, hi])",
            )
        if sub:
            return Derivation(
                _sqrt_up(Fraction(2 * K * K)),
                Fraction(2 * K * K),
                "K*sqrt(2)",
                {"K": K},
                f"Δ = K·√2: each of {K} replaced record(s) leaves one bin and enters another "
                "(one count −1, another +1)" + group,
            ), None
        return Derivation(
            float(K),
            Fraction(K) ** 2,
            "K",
            {"K": K},
            f"Δ = K = {K}: {who} {how} changes the counts by {K} at most, all in one bin in the worst case",
        ), None
    if not q.columns:
        return None, (f"`{q.function}` names no columns", "columns", f"write {q.function}(age, bounds = [17, 90])")
    if not q.bounds:
        return None, None  # a declared sensitivity is required (release_sensitivity says so)
    bounds = column_bounds(q)
    if bounds is None or any(not lo < hi for lo, hi in bounds):
        return None, None  # reported by DPS141 / DPS105
    names = {}
    terms = []
    sq = Fraction(0)
    for i, (lo, hi) in enumerate(bounds, start=1):
        names[f"lo{i}"], names[f"hi{i}"] = lo, hi
        if sub:
            terms.append(f"(hi{i} - lo{i})**2")
            sq += (Fraction(hi) - Fraction(lo)) ** 2
        else:
            terms.append(f"Max(Abs(lo{i}), Abs(hi{i}))**2")
            sq += max(abs(Fraction(lo)), abs(Fraction(hi))) ** 2
    expr = f"K*sqrt({' + '.join(terms)})"
    names["K"] = K
    sq *= K * K
    per = "√(Σ_c (hi_c − lo_c)²)" if sub else "√(Σ_c max(|lo_c|, |hi_c|)²)"
    statement = (
        (
            f"Δ = K·{per}: {who} {how} moves the sum of values clamped to [lo_c, hi_c] by at most this"
            f"{group} (Dwork & Roth 2014, Def. 3.8)"
        )
        if K > 1
        else (
            f"Δ = {per}: {who} {how} moves the sum of values clamped to [lo_c, hi_c] by at most this "
            "(Dwork & Roth 2014, Def. 3.8)"
        )
    )
    if q.function == "mean":
        if not n:
            return None, (
                "a mean needs the public dataset size n: it is released as (clamped sum) / n, and a "
                "row count read from the data is not covered by the sum's sensitivity",
                "function",
                "add `dataset_size N` to the privacy block, or release sum(...) and count() separately",
            )
        expr = f"({expr})/n"
        names["n"] = int(n)
        sq /= Fraction(int(n)) ** 2
        statement += (
            f"; the mean is released as that sum divided by the public n = {n} (the declared dataset_size, "
            "never the data's row count)"
        )
        if sub:
            statement += ", and the data must have exactly n rows"
    if sq > Fraction(sys.float_info.max) ** 2:  # exact, so no overflow here; the float Δ would be inf
        return None, (
            "the derived sensitivity overflows a double",
            "bounds",
            "rescale the column so that its bounds are nearer to 1 (see `dpspec rules DPS205`)",
        )
    value = _sqrt_up(sq)
    if value <= 0:
        return None, ("the derived sensitivity is 0", "bounds", "check the bounds")
    return Derivation(value, sq, expr, names, statement), None


@dataclass(frozen=True)
class ReleaseSensitivity:
    """The Δ a Gaussian release is calibrated to: ``used`` = max(declared, derived) (both upper
    bounds, so the larger is one too); ``problem`` is a DPS129 diagnostic's (message, field, hint)."""

    used: float | None
    declared: float | None = None
    derived: Derivation | None = None
    problem: Problem | None = None

    @property
    def declared_below_derived(self) -> bool:
        """A declared Δ smaller than the exact Δ the bounds imply (DPS140): the certificate would
        overstate privacy."""
        return (
            self.declared is not None
            and self.derived is not None
            and Fraction(self.declared) ** 2 < self.derived.squared
        )


def declared_sensitivity(r: ir.Release) -> tuple[float | None, Problem | None]:
    q = r.query
    declared = r.sensitivity
    if q is not None and q.sensitivity is not None:
        if declared is not None and declared != q.sensitivity:
            return None, (
                f"two different sensitivities are declared ({declared:g} and {q.sensitivity:g})",
                "sensitivity",
                "keep one of them",
            )
        declared = q.sensitivity
    return declared, None


def release_sensitivity(r: ir.Release, unit, n: int | None) -> ReleaseSensitivity:
    declared, problem = declared_sensitivity(r)
    if problem:
        return ReleaseSensitivity(None, problem=problem)
    q = r.query
    derived, problem = (None, None) if q is None else implied_sensitivity(q, unit, n)
    if problem and declared is None:
        return ReleaseSensitivity(None, problem=problem)
    if derived is not None:
        return ReleaseSensitivity(max(derived.value, declared or 0.0), declared, derived)
    if declared is not None:
        return ReleaseSensitivity(declared, declared)
    if q is None:
        return ReleaseSensitivity(
            None,
            problem=(
                "the release has neither a `query` nor a `sensitivity`",
                None,
                "add `sensitivity 1.0` or `query sum(x, bounds = [0, 1])`",
            ),
        )
    if q.function == "vector":
        return ReleaseSensitivity(
            None,
            problem=(
                "a `vector` query needs its sensitivity",
                "sensitivity",
                "write vector(dimension = 10, sensitivity = 1.0)",
            ),
        )
    if q.function in ("logistic_regression", "linear_svm", "callable"):
        return ReleaseSensitivity(
            None,
            problem=(
                f"`{q.function}` has no derived sensitivity for the Gaussian release",
                "function",
                "declare `sensitivity`, or release it with `mechanism swm` under a scenario",
            ),
        )
    if unit.kind not in ("record", "group"):
        return ReleaseSensitivity(
            None,
            problem=(
                f"the sensitivity of `{q.function}` w.r.t. a {unit.kind} unit is not derived",
                None,
                "declare it with `sensitivity ...`",
            ),
        )
    if q.function in ("sum", "mean") and q.columns and not q.bounds:
        return ReleaseSensitivity(
            None,
            problem=(
                f"`{q.function}` needs declared bounds to have a bounded sensitivity",
                "function",
                f"write {q.function}({', '.join(q.columns)}, bounds = [lo, hi])",
            ),
        )
    return ReleaseSensitivity(None)  # malformed bounds: reported by DPS105 / DPS141


def derive_sensitivity(r: ir.Release, unit, n: int | None) -> tuple[float | None, Problem | None]:
    """(Δ used for the noise, DPS129 problem). Kept for the rule DPS129; see :func:`release_sensitivity`."""
    s = release_sensitivity(r, unit, n)
    return s.used, s.problem


def evaluated_on_data(r: ir.Release, unit, n: int | None) -> bool:
    """Whether the runtime evaluates this release's query on the data: exactly when a rule above derives
    its Δ (columns read, values clamped, so that Δ holds by construction). Otherwise the caller supplies
    the answer and the declared sensitivity is an assumption about it (``release_answer``)."""
    return r.query is not None and implied_sensitivity(r.query, unit, n)[0] is not None
