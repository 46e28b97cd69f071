"""Check rules on values that other rules already refuse: they must not fail (DPS011) on them."""

import pytest

import dpspec

TRAIN = ("privacy people {{ unit record  dataset_size {n} }}\ntrain t {{ mechanism dpsgd  sampling poisson(rate = 0.01)"
         "  clipping flat(C = 1)  steps 100  guarantee dp(epsilon = 8, delta = 0.5) }}")


@pytest.mark.parametrize("n", ["-5", "0", "9007199254740992"])
def test_the_delta_rule_survives_any_dataset_size(n):
    rules = {d.rule for d in dpspec.loads(TRAIN.format(n=n)).diagnostics}
    assert "DPS011" not in rules
    assert ("DPS131" in rules) == (n == "9007199254740992")  # δ = 0.5 ≥ 1/n only for a real size
