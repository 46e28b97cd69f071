"""Pufferfish worlds θ: a prior over secrets and, per secret, the conditional law of the dataset.

A world answers, for a query f, "what is the law of f(X) given S = s?" by returning rows whose
uniform empirical distribution is either *exactly* that law (``exact = True``) or an i.i.d. sample
from it (``exact = False``, which needs the DKW estimator and support bounds; rule DPS401).

* :class:`EmpiricalWorld` — θ_D of ZV25 App. W.1: the empirical joint law of (record, secret); X is
  one record drawn uniformly among those with S = s. Exact.
* :class:`BalancedSubsampleWorld` — θ_D restricted to a stratified subsample with n′ = min_s n_s
  records per secret (ZV25 App. W.1.2/W.1.3). Exact for the subsample.
* :class:`DeterministicWorld` — the secret selects a whole dataset (point mass per secret): "one
  aggregate per secret" reading of the experiments (digest §9.1 ⚠18). Exact.
* :class:`SamplerWorld` — a user sampler of datasets (or outputs) given the secret. Sampled, unless
  the user declares that the returned rows enumerate the law (``exhaustive=True``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np

__all__ = [
    "World",
    "EmpiricalWorld",
    "BalancedSubsampleWorld",
    "DeterministicWorld",
    "SamplerWorld",
    "ProductFamilyWorld",
    "all_distinct_pairs",
]


def all_distinct_pairs(secrets: Sequence[Hashable]) -> list[tuple]:
    """𝒬 = {(s_i, s_j) : s_i ≠ s_j}, all ordered pairs (the experiments' choice, ZV25 §6.1)."""
    secrets = list(dict.fromkeys(secrets))
    if len(secrets) < 2:
        raise ValueError(f"the secret needs at least two values to form a pair, got {secrets!r}")
    return [(a, b) for a in secrets for b in secrets if a != b]


class World(ABC):
    """A world θ ∈ Θ̂."""

    name: str
    exact: bool

    @property
    @abstractmethod
    def secrets(self) -> tuple: ...

    @abstractmethod
    def prior(self) -> dict:
        """P_θ^S as {secret: probability}."""

    @abstractmethod
    def query_outputs(self, query, secret, *, n: int | None = None, rng=None) -> np.ndarray:
        """Rows (k, d) representing P_θ(f(X) | S = secret) (exactly, or as i.i.d. draws)."""

    def describe(self) -> dict:
        return {
            "type": type(self).__name__,
            "name": self.name,
            "exact": self.exact,
            "prior": {str(k): float(v) for k, v in self.prior().items()},
        }


def _check_records_secrets(records, secrets, name):
    R = np.asarray(records, dtype=float)
    if R.ndim == 1:
        R = R[:, None]
    if R.ndim != 2:
        raise ValueError(f"{name}: records must be a 2-D array (N, p)")
    S = np.asarray(secrets)
    if S.ndim != 1 or S.shape[0] != R.shape[0]:
        raise ValueError(
            f"{name}: secrets must be a vector with one value per record ({R.shape[0]}), got shape {S.shape}"
        )
    if R.shape[0] == 0:
        raise ValueError(f"{name}: no records")
    if not np.all(np.isfinite(R)):
        raise ValueError(f"{name}: records contain non-finite values (drop or impute missing values first)")
    return R, S


class EmpiricalWorld(World):
    """θ_D: the empirical joint law of (record, secret); X | s is one record uniform among S = s.

    ``secret_values``: the declared secret domain (default: the observed values). A declared value
    with no record is an error (an empty secret class would silently drop its pairs).
    """

    exact = True

    def __init__(self, records, secrets, *, secret_values: Sequence | None = None, name: str = "empirical"):
        R, S = _check_records_secrets(records, secrets, name)
        values = list(dict.fromkeys(S.tolist())) if secret_values is None else list(dict.fromkeys(secret_values))
        counts = {v: int(np.sum(S == v)) for v in values}
        empty = [v for v, c in counts.items() if c == 0]
        if empty:
            raise ValueError(f"world {name!r}: secret value(s) {empty!r} have no records (empty secret class)")
        stray = set(S.tolist()) - set(values)
        if stray:
            raise ValueError(f"world {name!r}: records carry undeclared secret value(s) {sorted(map(str, stray))}")
        if len(values) < 2:
            raise ValueError(f"world {name!r}: the secret has a single value {values!r}; no pair can be formed")
        self.records, self.labels, self.name = R, S, name
        self._values = tuple(values)
        self._counts = counts

    @property
    def secrets(self) -> tuple:
        return self._values

    def prior(self) -> dict:
        n = sum(self._counts.values())
        return {v: c / n for v, c in self._counts.items()}

    def records_of(self, secret) -> np.ndarray:
        if secret not in self._counts:
            raise ValueError(f"world {self.name!r}: unknown secret {secret!r}")
        return self.records[self.labels == secret]

    def query_outputs(self, query, secret, *, n=None, rng=None) -> np.ndarray:
        return np.asarray(query.per_record(self.records_of(secret)), dtype=float)


class BalancedSubsampleWorld(EmpiricalWorld):
    """θ_D on a stratified subsample: ``n_per_secret`` (default min_s n_s) records per secret,
    drawn uniformly without replacement with ``seed`` (ZV25 App. W.1.2/W.1.3). Uniform prior."""

    def __init__(
        self,
        records,
        secrets,
        *,
        n_per_secret: int | None = None,
        seed: int = 0,
        secret_values: Sequence | None = None,
        name: str = "balanced",
    ):
        R, S = _check_records_secrets(records, secrets, name)
        values = list(dict.fromkeys(S.tolist())) if secret_values is None else list(dict.fromkeys(secret_values))
        counts = {v: int(np.sum(S == v)) for v in values}
        empty = [v for v, c in counts.items() if c == 0]
        if empty:
            raise ValueError(f"world {name!r}: secret value(s) {empty!r} have no records (empty secret class)")
        k = min(counts.values()) if n_per_secret is None else int(n_per_secret)
        if k < 1 or k > min(counts.values()):
            raise ValueError(f"world {name!r}: n_per_secret must lie in [1, {min(counts.values())}], got {k}")
        rng = np.random.default_rng(seed)
        idx = np.concatenate([np.sort(rng.choice(np.flatnonzero(S == v), size=k, replace=False)) for v in values])
        self.subsample_index = idx
        self.seed = seed
        super().__init__(R[idx], S[idx], secret_values=values, name=name)

    def describe(self) -> dict:
        out = super().describe()
        out.update(seed=self.seed, n_per_secret=int(len(self.subsample_index) // len(self.secrets)))
        return out


class DeterministicWorld(World):
    """The secret selects a whole dataset: X | s = datasets[s] with probability one.

    P_θ^{f,s} is the point mass at f(datasets[s]); on a slice, W∞ = |⟨f(D_i) − f(D_j), u⟩|.
    """

    exact = True

    def __init__(
        self, datasets: Mapping[Hashable, np.ndarray], *, prior: Mapping | None = None, name: str = "deterministic"
    ):
        if not datasets or len(datasets) < 2:
            raise ValueError(f"world {name!r}: needs datasets for at least two secret values")
        self.datasets = {k: np.asarray(v, dtype=float) for k, v in datasets.items()}
        for k, v in self.datasets.items():
            if v.ndim != 2 or v.shape[0] == 0:
                raise ValueError(f"world {name!r}: dataset of secret {k!r} must be a non-empty 2-D array")
        if prior is None:
            n = sum(v.shape[0] for v in self.datasets.values())
            prior = {k: v.shape[0] / n for k, v in self.datasets.items()}
        _check_prior(prior, self.datasets.keys(), name)
        self._prior = {k: float(prior.get(k, 0.0)) for k in self.datasets}
        self.name = name

    @classmethod
    def from_groups(cls, records, secrets, *, secret_values=None, prior="empirical", name: str = "per_group"):
        """D_s = all records with S = s; prior empirical (group sizes) or ``"uniform"``."""
        w = EmpiricalWorld(records, secrets, secret_values=secret_values, name=name)
        datasets = {s: w.records_of(s) for s in w.secrets}
        pr = (
            w.prior()
            if prior == "empirical"
            else ({s: 1.0 / len(datasets) for s in datasets} if prior == "uniform" else prior)
        )
        return cls(datasets, prior=pr, name=name)

    @property
    def secrets(self) -> tuple:
        return tuple(self.datasets)

    def prior(self) -> dict:
        return dict(self._prior)

    def query_outputs(self, query, secret, *, n=None, rng=None) -> np.ndarray:
        if secret not in self.datasets:
            raise ValueError(f"world {self.name!r}: unknown secret {secret!r}")
        return np.asarray(query(self.datasets[secret]), dtype=float).reshape(1, -1)


def _check_prior(prior: Mapping, secrets, name):
    p = {k: float(v) for k, v in prior.items()}
    if any(k not in set(secrets) for k in p):
        raise ValueError(f"world {name!r}: prior names unknown secrets")
    if any(not np.isfinite(v) or v < 0 for v in p.values()) or abs(sum(p.values()) - 1.0) > 1e-9:
        raise ValueError(f"world {name!r}: prior must be non-negative and sum to 1")


class SamplerWorld(World):
    """A world given by a user sampler of X | s.

    ``sampler(secret, n, rng)`` returns n datasets (a sequence of 2-D arrays, or an array whose first
    axis indexes datasets) — or, with ``returns="outputs"``, an (n, d) array of query outputs.
    ``exhaustive=True`` declares that the returned rows enumerate the conditional law exactly
    (each row one equally likely outcome); otherwise the rows are i.i.d. draws (``exact = False``).
    """

    def __init__(
        self,
        sampler: Callable,
        secrets: Sequence,
        *,
        prior: Mapping | None = None,
        returns: str = "datasets",
        exhaustive: bool = False,
        name: str = "sampler",
    ):
        if not callable(sampler):
            raise ValueError(f"world {name!r}: sampler must be callable")
        secrets = tuple(dict.fromkeys(secrets))
        if len(secrets) < 2:
            raise ValueError(f"world {name!r}: the secret has fewer than two values {secrets!r}")
        if returns not in ("datasets", "outputs"):
            raise ValueError("returns must be 'datasets' or 'outputs'")
        prior = {s: 1.0 / len(secrets) for s in secrets} if prior is None else dict(prior)
        _check_prior(prior, secrets, name)
        self.sampler, self._secrets, self._prior = sampler, secrets, {s: float(prior.get(s, 0.0)) for s in secrets}
        self.returns, self.exact, self.name = returns, bool(exhaustive), name

    @property
    def secrets(self) -> tuple:
        return self._secrets

    def prior(self) -> dict:
        return dict(self._prior)

    def query_outputs(self, query, secret, *, n=None, rng=None) -> np.ndarray:
        if secret not in self._prior:
            raise ValueError(f"world {self.name!r}: unknown secret {secret!r}")
        if n is None and not self.exact:
            raise ValueError(f"world {self.name!r}: n_samples must be given for a (non-exhaustive) sampler world")
        if n is not None and int(n) < 1:
            raise ValueError(f"world {self.name!r}: n_samples must be ≥ 1, got {n!r}")
        rng = np.random.default_rng(rng)
        draws = self.sampler(secret, None if n is None else int(n), rng)
        if self.returns == "outputs":
            out = np.asarray(draws, dtype=float)
            if out.ndim == 1:
                out = out[:, None]
        else:
            out = np.vstack([np.asarray(query(x), dtype=float).reshape(1, -1) for x in draws])
        if out.shape[0] == 0:
            raise ValueError(f"world {self.name!r}: sampler returned no draws for secret {secret!r}")
        return out


class ProductFamilyWorld(EmpiricalWorld):
    """A family of independent product priors (``bernoulli(p in [a, b])``, ``categorical(...)``): each
    record's secret takes value v with probability p_v, p_v anywhere in ``ranges[v]``; given its secret
    a record's values follow the data's conditional law (θ_D's). The conditional law of one record
    given its secret is the same for every member, so every per-record or aggregate W∞ (Lemma A of
    :mod:`dpspec.pufferfish.aggregate`) is the same for the whole family: the sup over the family is
    the computed number, and p only decides which secrets have positive mass (``prior`` reports the
    normalised upper ends; a value whose range reaches 0 is unprotected only in the members that
    give it no mass, as Pufferfish requires)."""

    def __init__(
        self, records, secrets, *, ranges: Mapping, secret_values: Sequence | None = None, name: str = "product"
    ):
        super().__init__(records, secrets, secret_values=secret_values, name=name)
        r = {k: (float(lo), float(hi)) for k, (lo, hi) in ranges.items()}
        if set(r) != set(self.secrets):
            raise ValueError(f"world {name!r}: ranges must name every secret value {list(self.secrets)}")
        for k, (lo, hi) in r.items():
            if not (0.0 <= lo <= hi <= 1.0):
                raise ValueError(f"world {name!r}: the range of P(secret = {k}) must satisfy 0 ≤ low ≤ high ≤ 1")
        if sum(lo for lo, _ in r.values()) > 1.0 + 1e-12 or sum(hi for _, hi in r.values()) < 1.0 - 1e-12:
            raise ValueError(f"world {name!r}: no distribution has probabilities in these ranges")
        if any(hi <= 0.0 for _, hi in r.values()):
            raise ValueError(f"world {name!r}: a secret value has zero probability in every member")
        self.ranges = r

    def prior(self) -> dict:
        tot = sum(hi for _, hi in self.ranges.values())
        return {k: hi / tot for k, (_, hi) in self.ranges.items()}

    def describe(self) -> dict:
        out = super().describe()
        out["prior_ranges"] = {str(k): [lo, hi] for k, (lo, hi) in self.ranges.items()}
        return out
