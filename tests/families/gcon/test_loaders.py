"""Cora / CiteSeer loaders: counts on the real files (skipped when the data root is absent)."""

from __future__ import annotations

import numpy as np
import pytest

from dpspec.data import DataNotFoundError, data_root


def _root():
    try:
        root = data_root()
    except DataNotFoundError as exc:
        pytest.skip(f"data root absent: {exc}")
    return root


def test_cora_counts():
    root = _root()
    if not (root / "cora").is_dir():
        pytest.skip(f"{root}/cora absent")
    from dpspec.data.graphs import load_cora

    ds = load_cora()
    r = ds.report
    assert ds.num_nodes == 2708 and r.node_lines == 2708 and r.duplicate_node_ids == 0
    assert ds.features.shape == (2708, 1433) and ds.features.nnz == 49216
    assert r.citation_lines == 5429 and r.self_loops == 0 and r.dangling_lines == 0
    assert r.duplicate_lines == 0 and r.reciprocal_merged == 151
    assert ds.num_edges == 5278 and r.edges == 5278
    assert r.components == 78 and r.isolated_nodes == 0
    assert ds.num_classes == 7
    assert r.label_counts["Neural_Networks"] == 818 and r.label_counts["Rule_Learning"] == 180
    e = ds.edges
    assert np.all(e[:, 0] < e[:, 1]) and len(np.unique(e, axis=0)) == len(e)


def test_citeseer_counts():
    root = _root()
    if not (root / "tag_citeseer").is_dir():
        pytest.skip(f"{root}/tag_citeseer absent")
    from dpspec.data.graphs import load_citeseer

    ds = load_citeseer()
    r = ds.report
    assert ds.num_nodes == 3186 and len(ds.texts) == 3186 and ds.features is None
    assert all(t.strip() for t in ds.texts)
    assert r.citation_lines == 4732 and r.self_loops == 124 and r.dangling_ids == 141
    assert r.dangling_lines == 331 and r.reciprocal_merged == 52 and r.duplicate_lines == 0
    assert ds.num_edges == 4225
    assert r.label_counts == {"AI": 239, "Agents": 562, "DB": 685, "HCI": 490, "IR": 641, "ML": 569}
    assert r.isolated_nodes == 86 and r.components == 472


def test_planetoid_split():
    from dpspec.data.graphs import planetoid_split

    lab = np.repeat(np.arange(4), 100)
    tr, va, te = planetoid_split(lab, per_class=20, num_val=50, num_test=100, seed=3)
    assert len(tr) == 80 and len(va) == 50 and len(te) == 100
    assert np.all(np.bincount(lab[tr]) == 20)
    assert not set(tr) & set(va) and not set(tr) & set(te) and not set(va) & set(te)
