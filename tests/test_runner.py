import pytest

from forge.agent.runner import LoopResult, run_agent


class Steps:
    def __init__(self, *actions):
        self.actions = actions
        self.calls = []

    def __call__(self, n):
        self.calls.append(n)
        return self.actions[(n - 1) % len(self.actions)], f"output {n}"


def test_runner_stops_immediately_after_verified_output():
    step = Steps("search", "answer")
    result = run_agent(step, verify=lambda out: out == "output 2", max_steps=5)
    assert step.calls == [1, 2]
    assert (result.reason, result.steps) == ("verified_success", 2)


def test_runner_never_calls_step_more_than_max_steps():
    step = Steps("a", "b", "c", "d")
    result = run_agent(step, verify=lambda out: False, max_steps=3)
    assert step.calls == [1, 2, 3]
    assert result.reason == "step_budget_exhausted"


def test_runner_stops_on_repeated_action():
    step = Steps("same")
    result = run_agent(step, verify=lambda out: False, max_steps=10, repeat_limit=2)
    assert (result.reason, result.steps) == ("repeated_action", 2)


def test_runner_records_every_step_as_ok_observation():
    result = run_agent(Steps("a", "b"), verify=lambda out: out == "output 2", max_steps=5)
    assert [(o.tool_name, o.status, o.payload) for o in result.state.observations] == [
        ("a", "ok", "output 1"), ("b", "ok", "output 2"),
    ]


def test_answer_action_without_verification_does_not_stop():
    step = Steps("answer", "answer2", "answer3")
    result = run_agent(step, verify=lambda out: False, max_steps=3)
    assert result.reason == "step_budget_exhausted"


def test_invalid_budget_is_rejected_before_any_step():
    step = Steps("a")
    with pytest.raises(ValueError):
        run_agent(step, verify=lambda out: True, max_steps=0)
    assert step.calls == []


def test_loop_result_is_frozen():
    result = run_agent(Steps("a"), verify=lambda out: True, max_steps=1)
    assert isinstance(result, LoopResult)
    with pytest.raises(AttributeError):
        result.reason = "x"  # type: ignore[misc]
