"""Edge-free feature encoder of GCON (Wei et al. 2024, Sec. IV-C1, Alg. 3, App. Q).

The encoder reads node features and the training labels only -- never the edges -- so it is
identical on edge-neighbouring graphs and costs no edge-privacy budget (assumption A4). Under
GCON's model the features X and labels Y of all nodes are public (eq. (8)); if they are not public
in a deployment, the encoder's use of them is *not* covered by the certificate.

Pieces:
* ``tfidf_features``: raw text -> TF-IDF bag of words (label-free, edge-free), for CiteSeer's text.
* ``MLPEncoder``: a 2-layer MLP trained on the labelled nodes (Alg. 3); ``transform`` returns the
  hidden layer (``output="hidden"``, d1 = hidden width) or the class logits (``"logits"``, d1 = c)
  -- the paper is ambiguous ("by W1* (or W2*)"), both are offered. ``predict`` gives the
  pseudo-labels of App. Q. Torch is imported lazily.
* ``normalise_rows``: unit L2 rows, the input condition of Lemma 2 (rule DPS715).

Ambiguities resolved here (digest §8.6): activation ReLU, loss softmax cross-entropy (the encoder
is not the private model, so the separability requirement of Lemma 7 does not apply to it), Adam,
hard (argmax) pseudo-labels because Lemma 4 assumes y in {0, 1}.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpspec.accounting.gcon import GconError

__all__ = ["normalise_rows", "check_row_normalised", "tfidf_features", "MLPEncoder"]


def normalise_rows(X: Any, *, zero_rows: str = "error") -> np.ndarray:
    """Rows scaled to unit L2 norm (Sec. IV-C1; Lemma 2 needs ``||x_i||_2 = 1``, at least <= 1).

    ``zero_rows``: ``"error"`` (DPS715) or ``"uniform"`` (replace an all-zero row by the constant
    unit vector ``1/sqrt(d1)``; an edge-free, data-independent choice). Rows whose float norm ends
    up above 1 are scaled down by one more rounding step so that ``||x_i|| <= 1`` holds in floats.
    """
    X = X.toarray() if sp.issparse(X) else np.array(X, dtype=np.float64, copy=True)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise GconError("DPS715", f"features must be a non-empty 2-d array, got shape {X.shape}", "")
    if not np.all(np.isfinite(X)):
        raise GconError("DPS715", "features contain NaN or inf", "clean the encoder output")
    norms = np.linalg.norm(X, axis=1)
    zero = norms == 0.0
    if np.any(zero):
        if zero_rows != "uniform":
            raise GconError(
                "DPS715",
                f"{int(zero.sum())} feature row(s) are all zero and cannot be normalised",
                "pass zero_rows='uniform' or fix the encoder",
            )
        X[zero] = 1.0 / np.sqrt(X.shape[1])
        norms[zero] = 1.0
    X /= norms[:, None]
    n2 = np.linalg.norm(X, axis=1)
    over = n2 > 1.0
    if np.any(over):
        X[over] /= (n2[over] * (1.0 + 2.0**-50))[:, None]
    return X


def check_row_normalised(X: Any, tol: float = 1e-9) -> None:
    """Raise DPS715 unless every row has L2 norm in [1 - tol, 1 + tol]."""
    if sp.issparse(X):
        X = X.toarray()
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or not np.all(np.isfinite(X)):
        raise GconError("DPS715", "features must be a finite 2-d array", "")
    norms = np.linalg.norm(X, axis=1)
    worst = float(np.max(np.abs(norms - 1.0))) if norms.size else 0.0
    if worst > tol:
        i = int(np.argmax(np.abs(norms - 1.0)))
        raise GconError(
            "DPS715",
            f"features are not row-normalised: row {i} has L2 norm {norms[i]:.6g} (Lemma 2 assumes ||x_i||_2 = 1)",
            "apply dpspec.families.gcon.encoder.normalise_rows after the encoder",
        )


# ------------------------------------------------------------------------------ text

_TOKEN = re.compile(r"[a-z][a-z0-9]+")
_STOP = frozenset(
    """a about above after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours ourselves
out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while
who whom why will with would you your yours yourself yourselves paper we this our which these using
based used use one two new show also may however thus et al""".split()
)


def tfidf_features(
    texts: Sequence[str], *, max_features: int = 3000, min_df: int = 3, max_df: float = 0.5, sublinear_tf: bool = True
) -> tuple[sp.csr_matrix, list[str]]:
    """TF-IDF bag of words (label-free, edge-free): lowercase, ``[a-z][a-z0-9]+`` tokens, English
    stop words removed, vocabulary = the ``max_features`` most frequent terms by document frequency
    among those with ``min_df <= df <= max_df * n``; ``idf = log((1 + n)/(1 + df)) + 1``; rows are
    L2-normalised (all-zero rows stay zero). Returns ``(X, vocabulary)``."""
    docs = [[t for t in _TOKEN.findall(str(s).lower()) if t not in _STOP] for s in texts]
    n = len(docs)
    df: Counter[str] = Counter()
    for toks in docs:
        df.update(set(toks))
    cand = [(w, f) for w, f in df.items() if f >= min_df and f <= max_df * n]
    cand.sort(key=lambda wf: (-wf[1], wf[0]))
    vocab = [w for w, _ in cand[:max_features]]
    index = {w: k for k, w in enumerate(vocab)}
    rows, cols, vals = [], [], []
    for i, toks in enumerate(docs):
        tf = Counter(t for t in toks if t in index)
        for w, f in tf.items():
            rows.append(i)
            cols.append(index[w])
            vals.append((1.0 + np.log(f)) if sublinear_tf else float(f))
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, len(vocab)), dtype=np.float64)
    idf = np.log((1.0 + n) / (1.0 + np.array([df[w] for w in vocab], dtype=np.float64))) + 1.0
    X = (X @ sp.diags(idf)).tocsr()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0.0] = 1.0
    X = (sp.diags(1.0 / norms) @ X).tocsr()
    return X, vocab


# ------------------------------------------------------------------------------ MLP


@dataclass
class MLPEncoder:
    """2-layer MLP ``x -> ReLU(x W1 + b1) -> (.) W2 + b2`` trained on the labelled nodes only
    (Alg. 3). No edges are read. ``output``: ``"hidden"`` (d1 = ``hidden``) or ``"logits"`` (d1 = c).
    """

    hidden: int = 64
    output: str = "hidden"
    epochs: int = 200
    lr: float = 0.01
    weight_decay: float = 5e-4
    dropout: float = 0.5
    seed: int = 0
    num_threads: int | None = None

    def fit(self, X: Any, labels: np.ndarray, train_idx: np.ndarray, num_classes: int | None = None) -> MLPEncoder:
        import torch

        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        labels = np.asarray(labels)
        train_idx = np.asarray(train_idx, dtype=np.int64)
        y = labels[train_idx]
        c = int(num_classes if num_classes is not None else labels[labels >= 0].max() + 1)
        if np.any(y < 0) or np.any(y >= c):
            raise GconError(
                "DPS718", "a training node has no label in {0..c-1}", "drop unlabelled nodes from train_idx"
            )
        self.num_classes_ = c
        gen = torch.Generator().manual_seed(self.seed)
        Xt = self._tensor(X)
        d0 = Xt.shape[1]
        self.w1_ = torch.nn.Linear(d0, self.hidden)
        self.w2_ = torch.nn.Linear(self.hidden, c)
        with torch.no_grad():
            for lin in (self.w1_, self.w2_):
                bound = 1.0 / np.sqrt(lin.in_features)
                lin.weight.copy_((torch.rand(lin.weight.shape, generator=gen) * 2 - 1) * bound)
                lin.bias.copy_((torch.rand(lin.bias.shape, generator=gen) * 2 - 1) * bound)
        params = list(self.w1_.parameters()) + list(self.w2_.parameters())
        opt = torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay)
        xb = Xt[torch.as_tensor(train_idx)]
        yb = torch.as_tensor(y, dtype=torch.long)
        from dpspec.progress import progress

        for _ in progress(range(self.epochs), desc="GCON encoder", unit="epoch"):
            opt.zero_grad()
            h = torch.relu(self.w1_(xb))
            if self.dropout > 0:
                keep = (torch.rand(h.shape, generator=gen) >= self.dropout).to(device=h.device, dtype=h.dtype)
                h = h * keep / (1.0 - self.dropout)
            loss = torch.nn.functional.cross_entropy(self.w2_(h), yb)
            loss.backward()
            opt.step()
        return self

    @staticmethod
    def _tensor(X: Any):
        import torch

        if sp.issparse(X):
            X = X.toarray()
        return torch.as_tensor(np.asarray(X, dtype=np.float32))

    def _forward(self, X: Any):
        import torch

        with torch.no_grad():
            h = torch.relu(self.w1_(self._tensor(X)))
            return h, self.w2_(h)

    def transform(self, X: Any) -> np.ndarray:
        """Encoded features (not yet normalised): hidden activations or logits."""
        h, logits = self._forward(X)
        out = h if self.output == "hidden" else logits
        return out.numpy().astype(np.float64)

    def predict(self, X: Any) -> np.ndarray:
        """Hard labels (argmax of the logits): the pseudo-labels of App. Q."""
        _, logits = self._forward(X)
        return logits.argmax(dim=1).numpy().astype(np.int64)
