import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge.agent.observations import LoopState, Observation


def test_first_observation_has_sequence_one():
    assert LoopState().record("read", "ok", "text") == Observation(1, "read", "ok", "text")


def test_retryable_error_never_sets_terminal():
    state = LoopState()
    state.record("fetch", "retryable_error", "503")
    assert state.terminal is False


def test_fatal_error_sets_terminal():
    state = LoopState()
    state.record("write", "fatal_error", "permission denied")
    assert state.terminal is True


def test_recording_after_terminal_raises_and_records_nothing():
    state = LoopState()
    state.record("write", "fatal_error", "denied")
    with pytest.raises(ValueError, match="terminal"):
        state.record("read", "ok", None)
    assert state.step_count == 1


def test_unknown_status_raises_and_records_nothing():
    state = LoopState()
    with pytest.raises(ValueError, match="unknown observation status 'error'"):
        state.record("read", "error", None)
    assert state.observations == []
    assert state.terminal is False


def test_action_history_lists_tool_names_in_order():
    state = LoopState()
    for name in ["a", "b", "a"]:
        state.record(name, "ok", None)
    assert state.action_history == ("a", "b", "a")
    assert state.step_count == 3


def test_action_history_and_step_count_are_read_only():
    state = LoopState()
    with pytest.raises(AttributeError):
        state.step_count = 4  # type: ignore[misc]
    with pytest.raises(AttributeError):
        state.action_history = ()  # type: ignore[misc]


def test_observation_is_frozen():
    with pytest.raises(AttributeError):
        Observation(1, "a", "ok", None).status = "fatal_error"  # type: ignore[misc]


@given(st.lists(st.tuples(st.text(max_size=3), st.sampled_from(["ok", "retryable_error"]))))
def test_observation_sequences_are_one_to_n(calls):
    state = LoopState()
    for name, status in calls:
        state.record(name, status, None)
    assert [o.sequence for o in state.observations] == list(range(1, len(calls) + 1))
    assert state.terminal is False


def test_action_history_counts_each_tool_name():
    state = LoopState()
    for name in ["a", "b", "a"]:
        state.record(name, "ok", None)
    assert state.action_history.count("a") == 2
    assert state.action_history.count("zzz") == 0
    assert list(state.action_history) == ["a", "b", "a"]
    assert state.action_history[-1] == "a"


def test_action_history_follows_observations_given_at_construction():
    state = LoopState([Observation(1, "a", "ok", None)])
    state.record("a", "ok", None)
    assert state.action_history == ["a", "a"]
    assert state.action_history.count("a") == 2
