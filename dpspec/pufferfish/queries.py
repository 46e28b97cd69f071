"""Queries f: dataset → ℝ^d for the SWM, with declared output supports.

A *dataset* is a 2-D float array (n_records, p); columns are addressed by index. Every query is a
function of a dataset (``query(dataset)``). In a per-record world (θ_D of ZV25 App. W.1, where X is
one record drawn from the records with S = s) the dataset has one row; ``per_record(records)``
evaluates the query on each row as its own one-record dataset, vectorised where possible.

Supports: a query that clips its inputs to declared bounds has a known output support
(:class:`BoxSupport` or :class:`BallSupport`). Supports give the bound Δ0 ≥ Δ^u for all u (the
support's diameter) needed by the PAC reading, and the projected tail bounds that make the DKW
estimator sound (digest §4.1 ⚠).

Fitted models: L2-regularised logistic regression and linear SVM (squared hinge) fitted with
``scipy.optimize`` (L-BFGS from w = 0). With objective F(w) = loss(w) + (λ/2)‖w‖² (intercept
included), any iterate with F(ŵ) ≤ F(0) satisfies ‖ŵ‖² ≤ 2F(0)/λ, so the output lies in a ball of
radius √(2 log 2/λ) (logistic) or √(2/λ) (squared hinge) whatever the data [D]; the fit checks
F(ŵ) ≤ F(0).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BoxSupport",
    "BallSupport",
    "Query",
    "Mean",
    "Sum",
    "Std",
    "SecondMoment",
    "Rate",
    "Histogram",
    "Concat",
    "LogisticRegressionQuery",
    "LinearSVMQuery",
    "CallableQuery",
    "fit_logistic_regression",
    "fit_linear_svm",
]


# ----------------------------------------------------------------------------------------------
# supports
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BoxSupport:
    """Output support ⊆ ∏_k [lo_k, hi_k]."""

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self):
        lo = np.asarray(self.lo, dtype=float).reshape(-1)
        hi = np.asarray(self.hi, dtype=float).reshape(-1)
        if lo.shape != hi.shape or lo.size == 0:
            raise ValueError("BoxSupport lo and hi must be non-empty vectors of equal length")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi):
            raise ValueError("BoxSupport needs finite bounds with lo ≤ hi")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def dim(self) -> int:
        return int(self.lo.size)

    def project(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Support of ⟨Y, u⟩ for each row u of U: [Σ_k min(u_k lo_k, u_k hi_k), Σ_k max(...)]."""
        U = np.asarray(U, dtype=float)
        a, b = U * self.lo, U * self.hi
        return np.minimum(a, b).sum(axis=1), np.maximum(a, b).sum(axis=1)

    def diameter(self) -> float:
        """sup_u width of the projected support = ‖hi − lo‖₂ (a valid Δ0)."""
        return float(np.linalg.norm(self.hi - self.lo))

    def contains(self, Y: np.ndarray, tol: float = 1e-9) -> bool:
        Y = np.atleast_2d(Y)
        return bool(np.all(Y >= self.lo - tol) and np.all(Y <= self.hi + tol))

    def describe(self) -> dict:
        return {"type": "box", "lo": self.lo.tolist(), "hi": self.hi.tolist()}


@dataclass(frozen=True, eq=False)
class BallSupport:
    """Output support ⊆ {y : ‖y − center‖₂ ≤ radius}."""

    center: np.ndarray
    radius: float

    def __post_init__(self):
        c = np.asarray(self.center, dtype=float).reshape(-1)
        if c.size == 0 or not np.all(np.isfinite(c)):
            raise ValueError("BallSupport center must be a finite non-empty vector")
        if not math.isfinite(float(self.radius)) or float(self.radius) < 0:
            raise ValueError("BallSupport radius must be finite and ≥ 0")
        object.__setattr__(self, "center", c)
        object.__setattr__(self, "radius", float(self.radius))

    @property
    def dim(self) -> int:
        return int(self.center.size)

    def project(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = np.asarray(U, dtype=float) @ self.center
        return c - self.radius, c + self.radius

    def diameter(self) -> float:
        return 2.0 * self.radius

    def contains(self, Y: np.ndarray, tol: float = 1e-9) -> bool:
        Y = np.atleast_2d(Y)
        return bool(np.all(np.linalg.norm(Y - self.center, axis=1) <= self.radius * (1 + 1e-12) + tol))

    def describe(self) -> dict:
        return {"type": "ball", "center": self.center.tolist(), "radius": self.radius}


# ----------------------------------------------------------------------------------------------
# base class
# ----------------------------------------------------------------------------------------------


def _as_dataset(X) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2:
        raise ValueError(f"a dataset must be a 2-D array (n_records, p), got shape {X.shape}")
    return X


def _check_bounds(lo, hi, k: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    lo = np.broadcast_to(np.asarray(lo, dtype=float), (k,)).copy()
    hi = np.broadcast_to(np.asarray(hi, dtype=float), (k,)).copy()
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo >= hi):
        raise ValueError(f"{name}: bounds must be finite with lo < hi")
    return lo, hi


def _check_columns(columns, name: str) -> tuple[int, ...]:
    if isinstance(columns, (int, np.integer)):
        columns = [columns]
    cols = tuple(int(c) for c in columns)
    if not cols:
        raise ValueError(f"{name}: at least one column is needed")
    if any(c < 0 for c in cols):
        raise ValueError(f"{name}: column indices must be ≥ 0")
    return cols


class Query(ABC):
    """A query f: dataset (n, p) → ℝ^d with an optional declared output support."""

    dim: int
    name: str = "query"

    @abstractmethod
    def __call__(self, dataset) -> np.ndarray: ...

    @property
    def support(self):
        return None

    def per_record(self, records) -> np.ndarray:
        """f applied to each record as a one-record dataset: (N, p) → (N, d)."""
        R = _as_dataset(records)
        return np.vstack([self(R[i : i + 1]) for i in range(R.shape[0])]) if R.shape[0] else np.zeros((0, self.dim))

    def describe(self) -> dict:
        return {
            "type": type(self).__name__,
            "name": self.name,
            "dim": self.dim,
            "support": None if self.support is None else self.support.describe(),
        }


class _ColumnwiseQuery(Query):
    def __init__(self, columns, lo, hi, *, normalize: bool = False, name: str | None = None):
        self.columns = _check_columns(columns, type(self).__name__)
        self.lo, self.hi = _check_bounds(lo, hi, len(self.columns), type(self).__name__)
        self.normalize = bool(normalize)
        self.dim = len(self.columns)
        self.name = name or type(self).__name__.lower()

    def _clip(self, X: np.ndarray) -> np.ndarray:
        if X.shape[1] <= max(self.columns):
            raise ValueError(f"{self.name}: dataset has {X.shape[1]} columns, query uses column {max(self.columns)}")
        V = X[:, self.columns]
        if not np.all(np.isfinite(V)):
            raise ValueError(f"{self.name}: dataset contains non-finite values in the query columns")
        V = np.clip(V, self.lo, self.hi)
        if self.normalize:
            V = (V - self.lo) / (self.hi - self.lo)
        return V

    def _unit_box(self):
        if self.normalize:
            return np.zeros(self.dim), np.ones(self.dim)
        return self.lo, self.hi

    def describe(self) -> dict:
        out = super().describe()
        out.update(columns=list(self.columns), lo=self.lo.tolist(), hi=self.hi.tolist(), normalize=self.normalize)
        return out


class Mean(_ColumnwiseQuery):
    """Column means of values clipped to [lo, hi] (optionally rescaled to [0, 1]). Support: the box."""

    def __call__(self, dataset) -> np.ndarray:
        X = _as_dataset(dataset)
        if X.shape[0] == 0:
            raise ValueError(f"{self.name}: the mean of an empty dataset is undefined")
        return self._clip(X).mean(axis=0)

    def per_record(self, records) -> np.ndarray:
        return self._clip(_as_dataset(records))

    @property
    def support(self):
        return BoxSupport(*self._unit_box())


class Sum(_ColumnwiseQuery):
    """Column sums of clipped values over datasets of at most ``max_records`` rows."""

    def __init__(self, columns, lo, hi, *, max_records: int, normalize: bool = False, name: str | None = None):
        super().__init__(columns, lo, hi, normalize=normalize, name=name)
        if int(max_records) < 1:
            raise ValueError("Sum: max_records must be ≥ 1")
        self.max_records = int(max_records)

    def __call__(self, dataset) -> np.ndarray:
        X = _as_dataset(dataset)
        if X.shape[0] > self.max_records:
            raise ValueError(f"{self.name}: dataset has {X.shape[0]} > max_records = {self.max_records} rows")
        return self._clip(X).sum(axis=0)

    def per_record(self, records) -> np.ndarray:
        return self._clip(_as_dataset(records))

    @property
    def support(self):
        lo, hi = self._unit_box()
        n = self.max_records
        return BoxSupport(np.minimum(0.0, n * lo), np.maximum(0.0, n * hi))


class Std(_ColumnwiseQuery):
    """Population standard deviation of clipped values; in [0, (hi − lo)/2] (Popoviciu)."""

    def __call__(self, dataset) -> np.ndarray:
        X = _as_dataset(dataset)
        if X.shape[0] == 0:
            raise ValueError(f"{self.name}: the sd of an empty dataset is undefined")
        return self._clip(X).std(axis=0)

    def per_record(self, records) -> np.ndarray:
        return np.zeros((_as_dataset(records).shape[0], self.dim))

    @property
    def support(self):
        lo, hi = self._unit_box()
        return BoxSupport(np.zeros(self.dim), (hi - lo) / 2.0)


class SecondMoment(_ColumnwiseQuery):
    """Mean of (v − c)² for clipped v and a fixed, data-independent centre c (default: (lo+hi)/2).

    Per record this is a well-defined spread feature whose group average is the second moment
    about c (hence sd via E(v−c)² − (E v − c)²). With ``normalize`` the output is divided by
    max((lo−c)², (hi−c)²) so it lies in [0, 1].
    """

    def __init__(self, columns, lo, hi, *, center=None, normalize: bool = False, name: str | None = None):
        super().__init__(columns, lo, hi, normalize=False, name=name)
        self.center = (
            (self.lo + self.hi) / 2.0
            if center is None
            else np.broadcast_to(np.asarray(center, dtype=float), (self.dim,)).copy()
        )
        self.scale_out = bool(normalize)
        self._max = np.maximum((self.lo - self.center) ** 2, (self.hi - self.center) ** 2)

    def _feat(self, X):
        F = (self._clip(X) - self.center) ** 2
        return F / self._max if self.scale_out else F

    def __call__(self, dataset) -> np.ndarray:
        X = _as_dataset(dataset)
        if X.shape[0] == 0:
            raise ValueError(f"{self.name}: empty dataset")
        return self._feat(X).mean(axis=0)

    def per_record(self, records) -> np.ndarray:
        return self._feat(_as_dataset(records))

    @property
    def support(self):
        return BoxSupport(np.zeros(self.dim), np.ones(self.dim) if self.scale_out else self._max)


_OPS = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal, "==": np.equal, "!=": np.not_equal}


class Rate(Query):
    """Fraction of records with ``column <op> threshold``; in [0, 1]."""

    def __init__(self, column: int, op: str, threshold: float, *, name: str | None = None):
        (self.column,) = _check_columns([column], "Rate")
        if op not in _OPS:
            raise ValueError(f"Rate: op must be one of {sorted(_OPS)}, got {op!r}")
        self.op, self.threshold = op, float(threshold)
        self.dim = 1
        self.name = name or f"rate(col{self.column}{op}{threshold:g})"

    def _ind(self, X):
        if X.shape[1] <= self.column:
            raise ValueError(f"{self.name}: dataset has only {X.shape[1]} columns")
        v = X[:, self.column]
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{self.name}: non-finite values in column {self.column}")
        return _OPS[self.op](v, self.threshold).astype(float)[:, None]

    def __call__(self, dataset) -> np.ndarray:
        X = _as_dataset(dataset)
        if X.shape[0] == 0:
            raise ValueError(f"{self.name}: empty dataset")
        return self._ind(X).mean(axis=0)

    def per_record(self, records) -> np.ndarray:
        return self._ind(_as_dataset(records))

    @property
    def support(self):
        return BoxSupport([0.0], [1.0])


class Histogram(Query):
    """Normalised histogram (frequencies in [0, 1]) of one column over fixed bin ``edges``.

    Values outside [edges[0], edges[-1]] are clipped into the end bins (declared bounds).
    """

    def __init__(self, column: int, edges: Sequence[float] | np.ndarray, *, name: str | None = None):
        (self.column,) = _check_columns([column], "Histogram")
        e = np.asarray(edges, dtype=float)
        if e.ndim != 1 or e.size < 2 or not np.all(np.diff(e) > 0) or not np.all(np.isfinite(e)):
            raise ValueError("Histogram: edges must be a strictly increasing finite vector of ≥ 2 values")
        self.edges = e
        self.dim = e.size - 1
        self.name = name or f"hist(col{self.column})"

    def _onehot(self, X):
        v = X[:, self.column]
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{self.name}: non-finite values")
        idx = np.clip(np.searchsorted(self.edges, v, side="right") - 1, 0, self.dim - 1)
        out = np.zeros((v.size, self.dim))
        out[np.arange(v.size), idx] = 1.0
        return out

    def __call__(self, dataset) -> np.ndarray:
        X = _as_dataset(dataset)
        if X.shape[0] == 0:
            raise ValueError(f"{self.name}: empty dataset")
        return self._onehot(X).mean(axis=0)

    def per_record(self, records) -> np.ndarray:
        return self._onehot(_as_dataset(records))

    @property
    def support(self):
        # frequencies lie on the probability simplex: a ball of radius 1 around 0 contains it, and so
        # does the unit box; the box's diameter √B is larger than the simplex's √2, use the ball
        # centred at the barycentre with radius √(1 − 1/B).
        B = self.dim
        return BallSupport(np.full(B, 1.0 / B), math.sqrt(max(0.0, 1.0 - 1.0 / B)))


class Concat(Query):
    """Concatenation of several queries (dimension = sum). Support: product of boxes when all are boxes."""

    def __init__(self, parts: Sequence[Query], *, name: str = "concat"):
        self.parts = list(parts)
        if not self.parts:
            raise ValueError("Concat needs at least one part")
        self.dim = sum(p.dim for p in self.parts)
        self.name = name

    def __call__(self, dataset) -> np.ndarray:
        return np.concatenate([np.asarray(p(dataset), dtype=float).reshape(-1) for p in self.parts])

    def per_record(self, records) -> np.ndarray:
        return np.hstack([p.per_record(records) for p in self.parts])

    @property
    def support(self):
        sups = [p.support for p in self.parts]
        if any(s is None for s in sups):
            return None
        lo, hi = [], []
        for s in sups:
            if isinstance(s, BoxSupport):
                lo.append(s.lo)
                hi.append(s.hi)
            else:  # ball → enclosing box
                lo.append(s.center - s.radius)
                hi.append(s.center + s.radius)
        return BoxSupport(np.concatenate(lo), np.concatenate(hi))

    def describe(self) -> dict:
        out = super().describe()
        out["parts"] = [p.describe() for p in self.parts]
        return out


# ----------------------------------------------------------------------------------------------
# fitted linear models (scipy.optimize; no scikit-learn)
# ----------------------------------------------------------------------------------------------


def _design(X, y, feature_lo, feature_hi):
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).reshape(-1)
    if X.ndim != 2 or X.shape[0] != y.size:
        raise ValueError("features must be (n, p) and labels (n,)")
    if X.shape[0] == 0:
        raise ValueError("cannot fit a model on an empty dataset")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("non-finite values in the training data")
    if feature_lo is not None:
        lo, hi = _check_bounds(feature_lo, feature_hi, X.shape[1], "model features")
        X = (np.clip(X, lo, hi) - lo) / (hi - lo)
    s = np.where(y > 0.5, 1.0, -1.0)
    A = np.hstack([X, np.ones((X.shape[0], 1))])
    return A, s


def _fit(obj_grad, dim: int, f0: float, maxiter: int) -> np.ndarray:
    from scipy.optimize import minimize

    w0 = np.zeros(dim)
    res = minimize(
        obj_grad, w0, jac=True, method="L-BFGS-B", options={"maxiter": maxiter, "gtol": 1e-10, "ftol": 1e-15}
    )
    w = res.x
    if not (np.all(np.isfinite(w)) and obj_grad(w)[0] <= f0 + 1e-15):
        w = w0  # never return a point worse than the start (keeps the norm bound valid)
    return w


def fit_logistic_regression(
    X, y, *, l2: float = 1e-2, feature_lo=None, feature_hi=None, maxiter: int = 500
) -> np.ndarray:
    """argmin_w (1/n) Σ log(1 + exp(−s_i ⟨w, (x_i, 1)⟩)) + (l2/2)‖w‖², s_i = ±1; returns (w, b).

    Features are clipped/rescaled to [0, 1] by the declared bounds when given. ‖(w, b)‖ ≤ √(2 log 2/l2).
    """
    if not l2 > 0:
        raise ValueError("l2 must be > 0 (it bounds the output norm)")
    A, s = _design(X, y, feature_lo, feature_hi)
    n = A.shape[0]

    def fg(w):
        z = -s * (A @ w)
        loss = np.logaddexp(0.0, z).mean() + 0.5 * l2 * w @ w
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid(z), stable
        g = -(A.T @ (s * p)) / n + l2 * w
        return loss, g

    return _fit(fg, A.shape[1], math.log(2.0), maxiter)


def fit_linear_svm(X, y, *, l2: float = 1e-2, feature_lo=None, feature_hi=None, maxiter: int = 500) -> np.ndarray:
    """argmin_w (1/n) Σ max(0, 1 − s_i ⟨w, (x_i, 1)⟩)² + (l2/2)‖w‖² (squared hinge, as LinearSVC's
    default loss); returns (w, b). ‖(w, b)‖ ≤ √(2/l2)."""
    if not l2 > 0:
        raise ValueError("l2 must be > 0 (it bounds the output norm)")
    A, s = _design(X, y, feature_lo, feature_hi)
    n = A.shape[0]

    def fg(w):
        m = np.maximum(0.0, 1.0 - s * (A @ w))
        loss = (m**2).mean() + 0.5 * l2 * w @ w
        g = -2.0 * (A.T @ (s * m)) / n + l2 * w
        return loss, g

    return _fit(fg, A.shape[1], 1.0, maxiter)


class _ModelQuery(Query):
    _fitter: Callable[..., np.ndarray] | None = None  # each model query sets its fitting function
    _f0 = 1.0

    def __init__(
        self,
        feature_columns,
        label_column: int,
        *,
        l2: float = 1e-2,
        feature_lo=None,
        feature_hi=None,
        name: str | None = None,
    ):
        self.feature_columns = _check_columns(feature_columns, type(self).__name__)
        (self.label_column,) = _check_columns([label_column], type(self).__name__)
        if not l2 > 0:
            raise ValueError("l2 must be > 0")
        self.l2 = float(l2)
        self.feature_lo, self.feature_hi = feature_lo, feature_hi
        self.dim = len(self.feature_columns) + 1
        self.name = name or type(self).__name__

    def __call__(self, dataset) -> np.ndarray:
        X = _as_dataset(dataset)
        fit = type(self)._fitter
        assert fit is not None  # LogisticRegressionQuery and LinearSVMQuery set theirs
        return fit(
            X[:, self.feature_columns],
            X[:, self.label_column],
            l2=self.l2,
            feature_lo=self.feature_lo,
            feature_hi=self.feature_hi,
        )

    @property
    def support(self):
        return BallSupport(np.zeros(self.dim), math.sqrt(2.0 * self._f0 / self.l2))

    def describe(self) -> dict:
        out = super().describe()
        out.update(feature_columns=list(self.feature_columns), label_column=self.label_column, l2=self.l2)
        return out


class LogisticRegressionQuery(_ModelQuery):
    """Fitted L2-logistic-regression parameters (p weights + intercept); support ball √(2 log 2/l2)."""

    _fitter = staticmethod(fit_logistic_regression)
    _f0 = math.log(2.0)


class LinearSVMQuery(_ModelQuery):
    """Fitted L2 linear SVM (squared hinge) parameters (p weights + intercept); support ball √(2/l2)."""

    _fitter = staticmethod(fit_linear_svm)
    _f0 = 1.0


class CallableQuery(Query):
    """A user function dataset → ℝ^dim, with an optional declared support (BoxSupport/BallSupport).

    The support is a *declaration*: outputs are checked against it when it is used (DPS404).
    """

    def __init__(self, fn: Callable, dim: int, *, support=None, name: str = "callable"):
        if not callable(fn):
            raise ValueError("CallableQuery needs a callable")
        if int(dim) < 1:
            raise ValueError("dim must be ≥ 1")
        if support is not None and support.dim != int(dim):
            raise ValueError(f"support has dimension {support.dim}, query has {dim}")
        self.fn, self.dim, self._support, self.name = fn, int(dim), support, name

    def __call__(self, dataset) -> np.ndarray:
        out = np.asarray(self.fn(dataset), dtype=float).reshape(-1)
        if out.size != self.dim:
            raise ValueError(f"{self.name}: returned {out.size} values, declared dim = {self.dim}")
        return out

    @property
    def support(self):
        return self._support
