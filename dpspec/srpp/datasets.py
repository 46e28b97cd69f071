"""Small datasets for the SRPP-SGD tests, benchmarks and evaluation (numpy arrays; no torch).

* :func:`digits` — sklearn's bundled 8×8 digits (1,797 images), features scaled to [0, 1], a fixed
  train/test split. Needs scikit-learn (a test/bench dependency).
* :func:`adult` — UCI Adult from the data root (:func:`dpspec.data.data_root`): 6 standardised
  numeric columns + one-hot categoricals (train-split categories), income > 50K as the label; the
  standardisation uses train-split statistics. Raises :class:`dpspec.data.DataNotFoundError` if absent.
"""

from __future__ import annotations

import numpy as np

__all__ = ["digits", "adult"]

ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
ADULT_CATEGORICAL = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native-country",
)


def digits(n_train: int = 1400, seed: int = 0):
    """(X_train, y_train, X_test, y_test) as float32 / int64 arrays."""
    from sklearn.datasets import load_digits

    d = load_digits()
    X = (d.data / 16.0).astype(np.float32)
    perm = np.random.default_rng(seed).permutation(len(X))
    tr, te = perm[:n_train], perm[n_train:]
    return X[tr], d.target[tr].astype(np.int64), X[te], d.target[te].astype(np.int64)


def adult(root=None):
    """(X_train, y_train, X_test, y_test): 30,162 / 15,060 rows after dropping missing values."""
    from dpspec.data.tabular import load_adult

    tr = load_adult("train", root=root)
    te = load_adult("test", root=root)
    Xn_tr, Xn_te = tr.matrix(ADULT_NUMERIC), te.matrix(ADULT_NUMERIC)
    for j in (3, 4):  # capital gain / loss: heavy tails
        Xn_tr[:, j] = np.log1p(Xn_tr[:, j])
        Xn_te[:, j] = np.log1p(Xn_te[:, j])
    mu, sd = Xn_tr.mean(axis=0), Xn_tr.std(axis=0) + 1e-12
    parts_tr, parts_te = [(Xn_tr - mu) / sd], [(Xn_te - mu) / sd]
    for c in ADULT_CATEGORICAL:
        cats = tuple(dict.fromkeys(tr.column(c).tolist()))
        idx = {v: i for i, v in enumerate(cats)}
        for tab, parts in ((tr, parts_tr), (te, parts_te)):
            codes = np.array([idx.get(v, -1) for v in tab.column(c).tolist()])
            oh = np.zeros((len(codes), len(cats)), dtype=np.float64)
            ok = codes >= 0
            oh[np.flatnonzero(ok), codes[ok]] = 1.0
            parts.append(oh)
    ytr = (tr.column("income") == ">50K").astype(np.int64)
    yte = (te.column("income") == ">50K").astype(np.int64)
    return (np.hstack(parts_tr).astype(np.float32), ytr, np.hstack(parts_te).astype(np.float32), yte)
