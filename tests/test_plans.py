"""A policy's list is a plan: every call in it is made, in order — the leading calls without
side effects together, each side effect alone with its approval and key — and a planned call
the run does not make is said in the trace and the result, never dropped silently. A batch
never takes a run past its repeat limit, as single calls would not."""

from __future__ import annotations

from typing import Any

from forge import AgentLoop, Finish, Intent, Limits, ScriptedPolicy, Tool, tool

made: list[Any] = []


@tool
def read(n: int) -> str:
    """Read item n."""
    made.append(("read", n))
    return f"item {n}"


def _write_tool(log: list[Any]) -> Tool:
    return Tool("write", {"write"}, lambda text: log.append(("write", text)) or text, {"text"}, side_effect=True)


def _finished(observation):
    return observation.tool_name == "finish"


def _reads_then_writes(plan: list[Intent]) -> Any:
    """The policy of the issue: its plan when nothing is observed yet, then its answer."""
    def policy(goal, state):
        return plan if not state.observations else Finish("done")
    return policy


def test_a_write_planned_after_reads_is_made_before_the_policy_answers():
    log: list[Any] = []
    plan = [Intent.call("read", n=1), Intent.call("read", n=2), Intent.call("write", text="report")]
    result = AgentLoop([read, _write_tool(log)], _reads_then_writes(plan), _finished).run("report")
    assert result.reason == "verified_success"
    assert [o.tool_name for o in result.state.observations] == ["read", "read", "write", "finish"]
    assert log == [("write", "report")] and result.dropped == ()


def test_a_plan_of_one_read_and_one_write_makes_both():
    log: list[Any] = []
    plan = [Intent.call("read", n=1), Intent.call("write", text="x")]
    result = AgentLoop([read, _write_tool(log)], _reads_then_writes(plan), _finished).run("report")
    assert [o.tool_name for o in result.state.observations] == ["read", "write", "finish"] and log == [("write", "x")]


def test_each_planned_side_effect_is_approved_on_its_own():
    log: list[Any] = []
    asked: list[str] = []
    plan = [Intent.call("read", n=1), Intent.call("write", text="a"), Intent.call("write", text="b")]
    loop = AgentLoop([read, _write_tool(log)], _reads_then_writes(plan), _finished, definition="approval",
                     approver=lambda request: asked.append(request.arguments["text"]) or True)
    assert loop.run("write").reason == "verified_success"
    assert asked == ["a", "b"] and log == [("write", "a"), ("write", "b")]


def test_a_plan_longer_than_the_steps_left_says_which_calls_it_did_not_make():
    log: list[Any] = []
    plan = [Intent.call("read", n=1), Intent.call("read", n=2), Intent.call("write", text="late")]
    result = AgentLoop([read, _write_tool(log)], _reads_then_writes(plan), _finished, max_steps=2).run("report")
    assert result.reason == "step_budget_exhausted" and log == []
    assert [call["tool"] for call in result.dropped] == ["write"]
    assert "late" in str(result.dropped[0]["arguments"])
    assert "1 planned call not made: write" in result.summary
    assert result.trace[-1].detail["dropped"] == list(result.dropped)


def test_a_planned_call_after_an_accepted_answer_is_dropped_and_said():
    log: list[Any] = []
    verified = AgentLoop([read, _write_tool(log)],
                         _reads_then_writes([Intent.call("read", n=1), Intent.call("write", text="never")]),
                         lambda observation: observation.tool_name == "read").run("read")
    assert verified.reason == "verified_success" and log == []
    assert [call["tool"] for call in verified.dropped] == ["write"]


def test_a_dropped_calls_arguments_go_through_redact():
    log: list[Any] = []
    plan = [Intent.call("read", n=1), Intent.call("write", text="secret")]
    loop = AgentLoop([read, _write_tool(log)], _reads_then_writes(plan), _finished, max_steps=1,
                     hooks=__import__("forge").Hooks(redact=lambda tool, field, value: "***" if tool == "write" else value))
    result = loop.run("report")
    assert result.dropped and "secret" not in str(result.dropped) and "***" in str(result.dropped)


def test_a_batch_of_identical_calls_stops_at_the_repeat_limit():
    made.clear()
    five = [Intent.call("read", n=7)] * 5
    result = AgentLoop([read], ScriptedPolicy([five, Finish("done")]), _finished,
                       limits=Limits(repeat_limit=3)).run("read")
    assert result.reason == "repeated_action"
    assert made == [("read", 7)] * 3 and len(result.dropped) == 2


def test_a_batch_stops_at_the_repeat_limit_counting_the_calls_made_before_it():
    made.clear()
    script = ScriptedPolicy([Intent.call("read", n=7), [Intent.call("read", n=7)] * 4, Finish("done")])
    result = AgentLoop([read], script, _finished, max_steps=10, limits=Limits(repeat_limit=3)).run("read")
    assert result.reason == "repeated_action" and made == [("read", 7)] * 3


def test_different_calls_in_a_batch_each_count_towards_their_own_repeat_limit():
    made.clear()
    plan = [Intent.call("read", n=1), Intent.call("read", n=2), Intent.call("read", n=1), Intent.call("read", n=2)]
    result = AgentLoop([read], ScriptedPolicy([plan, Finish("done")]), _finished,
                       limits=Limits(repeat_limit=3)).run("read")
    assert result.reason == "verified_success" and len(made) == 4
