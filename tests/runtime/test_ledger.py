import pytest

from dpspec.mechanisms.ledger import BudgetExceededError, DataMismatchError, PrivacyLedger, Spent


def _acc(steps, delta):
    return Spent(target="t", notion="approximate_dp", steps=steps, budget_steps=3, epsilon=0.5 * steps, delta=delta)


def test_charge_refuses_beyond_budget_and_records_nothing():
    led = PrivacyLedger("t", 3, _acc)
    led.charge(2)
    with pytest.raises(BudgetExceededError, match="covers 3 step"):
        led.charge(2)
    assert led.steps_taken == 2 and led.remaining == 1
    led.charge()
    assert led.privacy_spent(1e-5).epsilon == 1.5


def test_resume_continues_the_same_ledger():
    led = PrivacyLedger("t", 3, _acc)
    led.charge(2)
    other = PrivacyLedger("t", 3, _acc)
    other.load_state_dict(led.state_dict())
    with pytest.raises(BudgetExceededError):
        other.charge(2)
    with pytest.raises(DataMismatchError):
        PrivacyLedger("u", 3, _acc).load_state_dict(led.state_dict())
    with pytest.raises(DataMismatchError):
        PrivacyLedger("t", 3, _acc).load_state_dict({"target": "t", "budget_steps": 3, "steps_taken": 4})
