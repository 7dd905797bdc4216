import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge.agent.stopping import StopController, StopDecision, StopReason


def decide(step_count=1, verified=False, fatal_error=False, history=("a",), max_steps=5, repeat=3):
    return StopController(max_steps, repeat).decide(step_count, verified, fatal_error, list(history))


def test_answer_without_verification_continues():
    assert decide(history=["answer"]) == StopDecision(False, "continue")


def test_verified_stops_with_verified_success():
    assert decide(verified=True) == StopDecision(True, "verified_success")


def test_verified_outranks_every_other_reason():
    assert decide(5, True, True, ["a"] * 5).reason == "verified_success"


def test_fatal_error_outranks_budget_and_repetition():
    assert decide(5, False, True, ["a"] * 5).reason == "fatal_error"


def test_step_budget_is_exhausted_at_max_steps():
    assert decide(step_count=5, history=["a", "b", "c", "d", "e"]) == StopDecision(
        True, "step_budget_exhausted"
    )


def test_step_budget_outranks_repetition():
    assert decide(step_count=5, history=["a"] * 5).reason == "step_budget_exhausted"


def test_last_action_occurring_repeat_limit_times_stops():
    assert decide(3, history=["a", "b", "a", "c", "a"]).reason == "repeated_action"


def test_repetition_counts_only_the_last_action():
    assert decide(4, history=["a", "a", "a", "b"]).reason == "continue"


def test_empty_history_continues():
    assert decide(0, history=[]).reason == "continue"


@pytest.mark.parametrize("max_steps, repeat", [(0, 3), (3, 0), (-1, 1)])
def test_limits_below_one_are_rejected(max_steps, repeat):
    with pytest.raises(ValueError):
        StopController(max_steps, repeat)


def test_reason_compares_equal_to_its_plain_string():
    assert StopReason.REPEATED_ACTION == "repeated_action"
    assert [reason.value for reason in StopReason] == [
        "verified_success", "fatal_error", "step_budget_exhausted", "repeated_action", "continue"
    ]


@given(st.integers(0, 20), st.booleans(), st.lists(st.sampled_from("ab"), max_size=20))
def test_only_verified_ever_yields_success(steps, fatal, history):
    decision = StopController(10, 3).decide(steps, False, fatal, history)
    assert decision.reason != "verified_success"
    assert decision.stop == (decision.reason != "continue")
