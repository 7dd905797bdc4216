"""What a real agent needs from the loop: final answers, errors told to the policy,
repetition by call, a strict verify, conversations."""

import pytest
from builders import Recorder, intent, scripted_loop, tool

from forge import AgentLoop, Finish, Intent, Limits, LoopState, ScriptedPolicy, Tool, ToolError
from forge.diagram import diagram_text


def test_a_policy_finishes_with_an_answer_that_verify_accepts():
    loop = AgentLoop([tool("a")], ScriptedPolicy([Finish("42")]), verify=lambda o: o.payload == Finish("42"))
    result = loop.run("what is six times seven?")
    assert (result.reason, result.steps) == ("verified_success", 1)
    (answer,) = result.state.observations
    assert (answer.tool_name, answer.status, answer.payload.answer) == ("finish", "ok", "42")
    assert [(r.source, r.trigger, r.dest) for r in result.trace] == [
        ("select", "finish", "observe"), ("observe", "record", "verify"), ("verify", "stop", "verified_success")]
    assert result.trace[0].detail["finish"] == "'42'"


def test_a_rejected_answer_replans_within_the_budget():
    answers = ScriptedPolicy([Finish("41"), intent("a"), Finish("42")])
    result = AgentLoop([tool("a")], answers, verify=lambda o: o.payload == Finish("42")).run("goal")
    assert result.reason == "verified_success" and result.steps == 3
    only_wrong = AgentLoop([tool("a")], ScriptedPolicy([Finish(str(n)) for n in range(3)]),
                           verify=lambda o: False, max_steps=3).run("goal")
    assert only_wrong.reason == "step_budget_exhausted"


def test_the_finish_route_is_drawn_checked_and_replayed(tmp_path):
    from forge.check import check_definition
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition

    assert "select -> observe [label=\"finish\\n[policy_finished]\"" in diagram_text("single_agent", "dot")
    assert check_definition("single_agent").ok and check_definition("approval").ok
    result = AgentLoop([tool("a")], ScriptedPolicy([Finish("x")]), verify=lambda o: True).run("goal")
    session = ReplaySession(load_definition(), result.trace)
    session.continue_()
    assert session.state == "verified_success"


def test_a_handler_raising_tool_error_is_told_to_the_policy_and_the_run_goes_on():
    seen = []

    def policy(goal, state):
        if state.observations:
            seen.append(state.observations[-1])
        return Intent.call("lookup", key="b" if state.observations else "a")

    def lookup(key):
        if key == "a":
            raise ToolError("no entry 'a'; try 'b'")
        return "found b"

    loop = AgentLoop([Tool("lookup", {"lookup"}, lookup, required={"key"})], policy,
                     verify=lambda o: o.payload == "found b")
    result = loop.run("find it")
    assert result.reason == "verified_success"
    assert seen[0].status == "retryable_error" and str(seen[0].payload) == "no entry 'a'; try 'b'"
    assert result.trace[1].detail["attempts"] == 1  # told, not retried


def test_a_tool_that_reports_errors_turns_any_exception_into_a_retryable_observation():
    calls = Recorder(KeyError("missing"), "ok")
    loop = scripted_loop([tool("a", handler=calls, errors="report")], [intent("a"), intent("a")],
                         verify=lambda o: o.status == "ok")
    result = loop.run("goal")
    first = result.state.observations[0]
    assert first.status == "retryable_error" and "KeyError: 'missing'" in str(first.payload)
    assert result.reason == "verified_success"
    default = scripted_loop([tool("a", handler=Recorder(KeyError("missing")))], [intent("a")]).run("goal")
    assert default.reason == "fatal_error"  # without errors="report", an unexpected exception still ends the run


def test_is_error_classifies_error_values_as_retryable():
    loop = scripted_loop([tool("a", handler=Recorder({"error": "quota"}, {"rows": 3}), is_error=lambda v: "error" in v)],
                         [intent("a"), intent("a")], verify=lambda o: o.status == "ok")
    result = loop.run("goal")
    first = result.state.observations[0]
    assert first.status == "retryable_error" and first.payload.value == {"error": "quota"}
    assert result.state.observations[1].payload == {"rows": 3}


def test_different_calls_of_one_tool_are_not_repetition_by_default():
    touch = Tool("touch", {"touch"}, Recorder(), required={"path"})
    policy = ScriptedPolicy([Intent.call("touch", path=p) for p in "abc"] + [Finish("done")])
    result = AgentLoop([touch], policy, verify=lambda o: o.tool_name == "finish").run("touch a, b, c")
    assert result.reason == "verified_success" and result.steps == 4


def test_the_same_call_three_times_is_repetition():
    touch = Tool("touch", {"touch"}, Recorder(), required={"path"})
    result = AgentLoop([touch], ScriptedPolicy([Intent.call("touch", path="a")] * 3), verify=lambda o: False).run("g")
    assert (result.reason, result.steps) == ("repeated_action", 3)


def test_repeat_by_tool_keeps_the_per_tool_count():
    touch = Tool("touch", {"touch"}, Recorder(), required={"path"})
    policy = ScriptedPolicy([Intent.call("touch", path=p) for p in "abc"])
    result = AgentLoop([touch], policy, verify=lambda o: False, limits=Limits(repeat_by="tool")).run("goal")
    assert (result.reason, result.steps) == ("repeated_action", 3)
    with pytest.raises(ValueError, match="repeat_by must be 'call' or 'tool'"):
        AgentLoop([touch], policy, verify=lambda o: False, limits=Limits(repeat_by="name"))


def test_the_same_wrong_answer_three_times_is_repetition():
    result = AgentLoop([tool("a")], ScriptedPolicy([Finish("no")] * 3), verify=lambda o: False).run("goal")
    assert result.reason == "repeated_action"


def test_verify_may_read_the_whole_run():
    def verify(observation, state):
        return len(state.observations) == 2 and observation.tool_name == "b"

    result = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b")], verify=verify).run("goal")
    assert (result.reason, result.steps) == ("verified_success", 2)


@pytest.mark.parametrize("answer", ["no", "false", 1, None, [True]])
def test_verify_returning_anything_but_a_bool_is_an_error_never_success(answer):
    result = scripted_loop([tool("a")], [intent("a")], verify=lambda o: answer).run("goal")
    assert result.reason == "fatal_error"
    assert isinstance(result.error, TypeError) and "must return True or False" in str(result.error)


def test_a_conversation_continues_from_the_previous_turn():
    def policy(goal, state):
        state.messages.append({"role": "user", "content": goal})
        return Intent.call("note", text=goal)

    loop = AgentLoop([Tool("note", {"note"}, lambda text: text.upper(), required={"text"})], policy,
                     verify=lambda o, state: o.tool_name == "note", max_steps=1)
    first = loop.run("hello")
    second = loop.run("again", state=first.state)
    assert [o.payload for o in second.state.observations] == ["HELLO", "AGAIN"]
    assert [m["content"] for m in second.state.messages] == ["hello", "again"]
    assert (second.steps, second.reason) == (1, "verified_success")  # the budget is per turn
    assert [o.payload for o in first.state.observations] == ["HELLO"]  # the earlier turn is untouched


def test_a_conversation_cannot_continue_from_a_fatal_error():
    failed = scripted_loop([tool("a", handler=Recorder(RuntimeError("boom")))], [intent("a")]).run("goal")
    with pytest.raises(ValueError, match="ended in a fatal error"):
        scripted_loop([tool("a")], [intent("a")]).run("goal", state=failed.state)


def test_the_trace_records_the_messages_a_policy_added_and_the_debugger_restores_them():
    def policy(goal, state):
        state.messages.append({"role": "assistant", "content": f"step {state.step_count + 1}"})
        return intent("a")

    loop = AgentLoop([tool("a")], policy, verify=lambda o: o.sequence == 2)
    result = loop.run("goal")
    selects = [r for r in result.trace if r.source == "select"]
    assert [r.detail["messages"] for r in selects] == [[{"role": "assistant", "content": "step 1"}],
                                                       [{"role": "assistant", "content": "step 2"}]]
    session = loop.debug("goal")
    session.continue_()
    assert len(session.loop_state.messages) == 2
    while not (session.state == "select" and session.loop_state.step_count == 1):
        session.back()
    assert [m["content"] for m in session.loop_state.messages] == ["step 1"]  # step 2's select has not fired
    session.step()  # replayed from the recording: the policy is not asked again
    assert [m["content"] for m in session.loop_state.messages] == ["step 1", "step 2"]


def test_scripted_policy_takes_finish_and_intent_call():
    policy = ScriptedPolicy([Intent.call("a"), Finish("done")])
    assert policy("g", LoopState()) == Intent.call("a") and policy("g", LoopState()) == Finish("done")
    with pytest.raises(ValueError, match="not an Intent, Finish or Ask"):
        ScriptedPolicy(["done"])
