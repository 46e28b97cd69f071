"""Edge-free encoder pieces: row normalisation (DPS715), TF-IDF, MLP encoder."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpspec.accounting.gcon import GconError
from dpspec.families.gcon.encoder import MLPEncoder, check_row_normalised, normalise_rows, tfidf_features


def test_normalise_rows():
    X = normalise_rows(np.array([[3.0, 4.0], [0.1, 0.0]]))
    assert np.all(np.linalg.norm(X, axis=1) <= 1.0)
    check_row_normalised(X)
    with pytest.raises(GconError) as info:
        normalise_rows(np.array([[0.0, 0.0], [1.0, 1.0]]))
    assert info.value.rule == "DPS715"
    Y = normalise_rows(sp.csr_matrix(np.array([[0.0, 0.0], [1.0, 1.0]])), zero_rows="uniform")
    assert np.allclose(np.linalg.norm(Y, axis=1), 1.0)
    with pytest.raises(GconError):
        check_row_normalised(np.array([[0.5, 0.0]]))
    with pytest.raises(GconError):
        normalise_rows(np.array([[np.nan, 1.0]]))


def test_tfidf():
    texts = ["graph neural networks for citation graphs", "privacy of graph edges",
             "differential privacy of neural networks", "unrelated words only here"]
    X, vocab = tfidf_features(texts, min_df=2, max_df=1.0)
    assert set(vocab) == {"graph", "neural", "networks", "privacy"}
    assert X.shape == (4, 4)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    assert np.allclose(norms[:3], 1.0) and norms[3] == 0.0


def test_mlp_encoder_learns_and_reads_no_edges():
    rng = np.random.default_rng(0)
    lab = rng.integers(0, 3, 300)
    X = np.eye(3)[lab] * 2 + rng.standard_normal((300, 3)) * 0.5
    train = np.arange(90)
    enc = MLPEncoder(hidden=16, output="logits", epochs=150, seed=1).fit(X, lab, train)
    assert np.mean(enc.predict(X) == lab) > 0.9
    assert enc.transform(X).shape == (300, 3)
    enc2 = MLPEncoder(hidden=8, output="hidden", epochs=5, seed=1).fit(X, lab, train)
    assert enc2.transform(X).shape == (300, 8)
    bad = lab.copy()
    bad[0] = -1
    with pytest.raises(GconError):
        MLPEncoder(epochs=1).fit(X, bad, train, num_classes=3)
