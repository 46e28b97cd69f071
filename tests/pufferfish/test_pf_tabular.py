"""Loaders on the real files (counts from shared/data/README.md); skipped when the data root is absent."""

from collections import Counter

import numpy as np
import pytest

from dpspec.data import DataNotFoundError, data_root
from dpspec.data import tabular as tb

try:
    ROOT = data_root()
    _have = (ROOT / "adult" / "adult.data").is_file()
except DataNotFoundError:
    ROOT, _have = None, False

pytestmark = pytest.mark.skipif(not _have, reason="data root with adult/, heart_cleveland/, student/ not found "
                                                   "(set DPSPEC_DATA_DIR to shared/data)")


def test_adult_train_counts():
    t = tb.load_adult("train", missing="keep")
    assert len(t) == t.n_raw == 32561 and t.columns == tb.ADULT_COLUMNS
    assert t.rows_with_missing == 2399
    assert t.missing_counts == {"workclass": 1836, "occupation": 1843, "native-country": 583}
    assert Counter(t.column("income")) == {"<=50K": 24720, ">50K": 7841}
    assert np.isnan(t.column("age")).sum() == 0 and t.is_numeric("age") and not t.is_numeric("race")
    d = tb.load_adult("train")
    assert len(d) == 30162 and d.n_dropped == 2399
    assert Counter(d.column("race"))["White"] == 25933


def test_adult_test_banner_and_labels():
    t = tb.load_adult("test", missing="keep")
    assert len(t) == 16281 and t.rows_with_missing == 1221
    assert Counter(t.column("income")) == {"<=50K": 12435, ">50K": 3846}  # trailing '.' removed
    assert t.column("age")[0] == 25.0  # the banner line was skipped
    both = tb.load_adult("both", missing="keep")
    assert len(both) == 32561 + 16281


def test_heart_cleveland():
    h = tb.load_heart_cleveland(missing="keep")
    assert len(h) == 303 and h.missing_counts == {"ca": 4, "thal": 2} and h.rows_with_missing == 6
    assert Counter(h.column("num").tolist()) == {0.0: 164, 1.0: 55, 2.0: 36, 3.0: 35, 4.0: 13}
    assert np.isnan(h.column("ca")).sum() == 4
    assert len(tb.load_heart_cleveland()) == 297
    assert h.matrix(["age", "chol"]).shape == (303, 2)


@pytest.mark.parametrize("subject,n", [("mat", 395), ("por", 649)])
def test_student(subject, n):
    s = tb.load_student(subject)
    assert len(s) == n and len(s.columns) == 33 and s.n_dropped == 0
    assert s.is_numeric("G1") and s.is_numeric("G3") and not s.is_numeric("school")  # quoted "5" parsed
    assert s.column("school")[0] == "GP"
    codes, cats = s.codes("sex")
    assert set(cats) == {"F", "M"} and codes.max() == 1


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="split"):
        tb.load_adult("dev")
    with pytest.raises(ValueError, match="missing"):
        tb.load_heart_cleveland(missing="impute")
    with pytest.raises(DataNotFoundError):
        tb.load_student(root=tmp_path)
    with pytest.raises(ValueError, match="categorical"):
        tb.load_adult("train").matrix(["race"])
