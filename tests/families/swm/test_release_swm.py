"""The SWM release object: one output per certificate, its columns checked, a private run report."""

import numpy as np
import pytest

import dpspec
from dpspec.data.synthetic import generate
from dpspec.mechanisms.ledger import BudgetExceededError, DataMismatchError

SPEC = """scenario s {
  data   synthetic(generator = secret_groups, size = 1200, seed = 4)
  secret group in {A, B, C}
  prior  groups
}
release r {
  mechanism swm
  query     mean(x1, x3, bounds = [0, 5])
  slices    axes
  guarantee ave_srpp(alpha = 4, epsilon = 1)
}
"""


@pytest.fixture(scope="module")
def compiled():
    return dpspec.compile(SPEC)


def test_an_swm_release_releases_once(compiled):
    mech = dpspec.compile(SPEC).mechanism
    t = generate("secret_groups", 500, seed=1)
    assert mech.privacy_spent().epsilon == 0
    value, report = mech.release(t, rng=0)
    assert np.shape(value) == (2,) and report.rows == 500
    assert report.clamped == int((t.matrix(["x1", "x3"]) > 5).sum()) > 0
    spent = mech.privacy_spent()
    r = compiled.certificate.results[0]
    assert spent.alpha == 4 and spent.epsilon == pytest.approx(r.guarantee.epsilon) and spent.notion == "ave_srpp"
    assert mech.privacy_spent(delta=1e-6).epsilon == pytest.approx(r.guarantee.dp[1].epsilon)
    with pytest.raises(BudgetExceededError):
        mech.release(t)
    with pytest.raises(BudgetExceededError):
        mech.release_records(t)


def test_an_swm_release_checks_its_columns_before_charging():
    mech = dpspec.compile(SPEC).mechanism
    with pytest.raises(DataMismatchError, match=r"`x3`.*did you mean"):
        mech.release({"x1": [1.0, 2.0], "x_3": [1.0, 2.0]})
    with pytest.raises(DataMismatchError, match="shape"):
        mech.release(np.zeros((4, 3)))
    assert mech.privacy_spent().steps == 0
    value, _ = mech.release({"x1": [1.0, 2.0], "x3": [1.0, 9.0]}, rng=0)
    assert np.shape(value) == (2,)


def test_simulate_is_the_same_noise_outside_the_ledger(compiled):
    mech = compiled.mechanism
    t = generate("secret_groups", 300, seed=2)
    a = mech.simulate(t, rng=5)
    b = mech.simulate(t, rng=5)
    assert np.array_equal(a, b) and mech.privacy_spent().steps == 0
