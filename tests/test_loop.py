from builders import Recorder, intent, scripted_loop, tool
from hypothesis import given, settings
from hypothesis import strategies as st

from forge import (
    AgentLoop,
    IdempotencyRegistry,
    Intent,
    PermanentToolError,
    ScriptedPolicy,
    ScriptExhausted,
    TransientToolError,
)
from forge.agent.actions import AmbiguousToolChoice, NoMatchingTool
from forge.agent.execution import ArgumentContractError
from forge.agent.runner import run_agent
from forge.options import Clocks, Limits, Retry


def test_verified_observation_ends_in_verified_success():
    loop = scripted_loop([tool("read")], [intent("read")], verify=lambda o: True)
    result = loop.run("read it")
    assert (result.reason, result.steps, result.outcome, result.error) == ("verified_success", 1, "success", None)


def test_unverified_runs_end_when_the_step_budget_is_spent():
    loop = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b")] * 2, max_steps=3)
    result = loop.run("goal")
    assert (result.reason, result.steps) == ("step_budget_exhausted", 3)


def test_repeating_the_same_tool_ends_in_repeated_action():
    loop = scripted_loop([tool("a")], [intent("a")] * 5, limits=Limits(repeat_limit=2))
    assert loop.run("goal").reason == "repeated_action"


def test_tied_tools_end_in_clarification_required_with_the_tie_as_error():
    loop = scripted_loop([tool("x", {"read"}), tool("y", {"read"})], [intent("read")])
    result = loop.run("goal")
    assert (result.reason, result.outcome, result.steps) == ("clarification_required", "needs_input", 0)
    assert isinstance(result.error, AmbiguousToolChoice)
    assert result.error.tied == ("x", "y")


def test_no_fitting_tool_ends_in_capability_gap():
    result = scripted_loop([tool("read")], [intent("smtp")]).run("send mail")
    assert result.reason == "capability_gap"
    assert isinstance(result.error, NoMatchingTool)


def test_transient_error_after_retry_budget_is_retryable_and_the_loop_replans():
    flaky = Recorder(*[TransientToolError("503")] * 3)
    loop = scripted_loop([tool("fetch", handler=flaky), tool("other")], [intent("fetch"), intent("other")],
                         verify=lambda o: o.tool_name == "other", retry=Retry(max_attempts=3))
    result = loop.run("goal")
    assert [o.status for o in result.state.observations] == ["retryable_error", "ok"]
    assert len(flaky.calls) == 3
    assert result.reason == "verified_success"
    assert result.retries == 2


def test_transient_error_recovered_within_budget_is_ok():
    flaky = Recorder(TransientToolError("503"), "body")
    result = scripted_loop([tool("fetch", handler=flaky)], [intent("fetch")], verify=lambda o: True).run("g")
    assert result.state.observations[0].payload == "body"
    assert result.trace[1].detail["attempts"] == 2


def test_permanent_error_ends_in_fatal_error_after_one_call():
    denied = Recorder(PermanentToolError("permission denied"))
    result = scripted_loop([tool("write", handler=denied)], [intent("write")]).run("goal")
    assert result.reason == "fatal_error"
    assert [o.status for o in result.state.observations] == ["fatal_error"]
    assert len(denied.calls) == 1
    assert isinstance(result.error, PermanentToolError)


def test_contract_violation_is_retryable_naming_the_arguments_and_the_handler_never_runs():
    handler = Recorder()
    loop = scripted_loop([tool("read", handler=handler, required={"path"})],
                         [intent("read", path="a", sudo=True)], max_steps=1)
    result = loop.run("goal")
    observation = result.state.observations[0]
    assert observation.status == "retryable_error"
    assert isinstance(observation.payload, ArgumentContractError)
    assert "unexpected: sudo" in str(observation.payload)
    assert handler.calls == []


def test_other_handler_exception_ends_in_fatal_error_with_error_and_trace():
    boom = ValueError("handler bug")
    result = scripted_loop([tool("read", handler=Recorder(boom))], [intent("read")]).run("goal")
    assert result.reason == "fatal_error"
    assert result.error is boom
    assert result.trace[-1].dest == "fatal_error"


def test_policy_exception_ends_in_fatal_error():
    def policy(goal, state):
        raise KeyError("policy bug")

    result = AgentLoop([tool("a")], policy, verify=lambda o: True).run("goal")
    assert result.reason == "fatal_error"
    assert isinstance(result.error, KeyError)
    assert [(r.source, r.dest) for r in result.trace] == [("select", "fatal_error")]


def test_policy_returning_a_non_intent_ends_in_fatal_error():
    result = AgentLoop([tool("a")], lambda g, s: "read", verify=lambda o: True).run("goal")
    assert result.reason == "fatal_error"
    assert "not an Intent" in str(result.error)


def test_verify_exception_ends_in_fatal_error():
    def verify(observation):
        raise RuntimeError("verify bug")

    result = scripted_loop([tool("a")], [intent("a")], verify=verify).run("goal")
    assert (result.reason, result.steps) == ("fatal_error", 1)
    assert str(result.error) == "verify bug"


def test_exhausted_script_fails_loudly_as_fatal_error():
    result = scripted_loop([tool("a"), tool("b")], [intent("a")], max_steps=5).run("goal")
    assert result.reason == "fatal_error"
    assert isinstance(result.error, ScriptExhausted)


def test_repeated_identical_write_is_replayed_not_run_again():
    writer = Recorder("wrote 5 bytes", "second write!")
    write = tool("write", handler=writer, required={"path", "text"}, side_effect=True)
    loop = scripted_loop([write, tool("other")],
                         [intent("write", path="a", text="hello"), intent("other"),
                          intent("write", path="a", text="hello")], max_steps=3)
    result = loop.run("goal")
    assert len(writer.calls) == 1
    assert [o.payload for o in result.state.observations][::2] == ["wrote 5 bytes", "wrote 5 bytes"]
    assert (result.side_effects_run, result.side_effects_replayed) == (1, 1)
    replays = [r.detail.get("replayed") for r in result.trace if r.source == "execute"]
    assert replays == [False, None, True]


def test_shared_registry_keeps_a_side_effect_done_across_runs():
    writer = Recorder("ok")
    registry = IdempotencyRegistry()
    write = tool("write", handler=writer, side_effect=True)
    for _ in range(2):
        scripted_loop([write], [Intent({"write"}, {}, "job-42")], verify=lambda o: True,
                      registry=registry).run("goal")
    assert len(writer.calls) == 1


def test_reused_idempotency_key_for_another_request_is_fatal():
    write = tool("write", handler=Recorder(), required={"text"}, side_effect=True)
    loop = scripted_loop([write, tool("other")],
                         [Intent({"write"}, {"text": "a"}, "k"), intent("other"), Intent({"write"}, {"text": "b"}, "k")])
    result = loop.run("goal")
    assert result.reason == "fatal_error"
    assert "fingerprint" in str(result.error)


def test_trace_lists_every_guard_of_each_source_state():
    result = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True).run("goal")
    select, execute, observe, verify = result.trace
    assert [g.name for g in select.guards] == ["tool_selected", "tool_choice_ambiguous", "no_tool_fits", "policy_raised",
                                              "policy_finished", "policy_asked", "token_budget_exhausted",
                                              "answer_invalid", "tools_batched"]
    assert [g.value for g in select.guards] == [True, False, False, False, False, False, False, False, False]
    assert execute.guards == () and observe.guards == ()
    assert sum(g.value for g in verify.guards) == 1
    assert {g.name for g in verify.guards} == {
        "decided_continue", "decided_verified_success", "decided_fatal_error", "verify_raised",
        "decided_step_budget_exhausted", "decided_repeated_action",
    }


def test_trace_records_sequence_step_source_trigger_destination_and_time():
    result = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b")], verify=lambda o: o.tool_name == "b").run("g")
    assert [r.sequence for r in result.trace] == list(range(1, 9))
    assert [r.step for r in result.trace] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert [(r.source, r.trigger, r.dest) for r in result.trace[:4]] == [
        ("select", "choose", "execute"), ("execute", "call", "observe"),
        ("observe", "record", "verify"), ("verify", "replan", "select"),
    ]
    assert all(r.duration_s >= 0 for r in result.trace)


def test_blank_goal_is_rejected_before_anything_runs():
    import pytest

    policy = ScriptedPolicy([intent("a")])
    with pytest.raises(ValueError, match="goal"):
        AgentLoop([tool("a")], policy, verify=lambda o: True).run("  ")
    assert policy.consumed == 0


step_scripts = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 9), st.booleans()), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(step_scripts, st.integers(1, 8), st.integers(1, 4))
def test_machine_driven_loop_agrees_with_run_agent(script, max_steps, repeat_limit):
    script = (script * 8)[:max_steps]
    verified_outputs = {(n, out) for n, (_, out, ok) in enumerate(script, 1) if ok}

    def step(n):
        action, output, _ = script[n - 1]
        return action, (n, output)

    expected = run_agent(step, lambda out: out in verified_outputs, max_steps, repeat_limit)

    calls = iter(range(1, len(script) + 1))
    handlers = {name: (lambda: (n := next(calls), script[n - 1][1])) for name in "abc"}
    tools = [tool(name, handler=handlers[name]) for name in "abc"]
    loop = scripted_loop(tools, [intent(action) for action, _, _ in script],
                         verify=lambda o: o.payload in verified_outputs,
                         max_steps=max_steps, limits=Limits(repeat_limit=repeat_limit))
    actual = loop.run("goal")

    assert (actual.reason, actual.steps) == (expected.reason, expected.steps)
    assert actual.state.observations == expected.state.observations
    assert (actual.reason, actual.steps) == _by_the_seed(script, verified_outputs, max_steps, repeat_limit)


def _by_the_seed(script, verified_outputs, max_steps, repeat_limit):
    """How the run ends by the seed's stop rules, worked out here and not by StopController
    (which both sides above use): after each step, verified first, then the step budget,
    then the last action seen `repeat_limit` times."""
    history: list[str] = []
    for n, (action, output, _) in enumerate(script, 1):
        history.append(action)
        if (n, output) in verified_outputs:
            return "verified_success", n
        if n >= max_steps:
            return "step_budget_exhausted", n
        if history.count(action) >= repeat_limit:
            return "repeated_action", n
    raise AssertionError("the script is max_steps long: the budget ends it")


def test_each_run_gets_its_own_registry_by_default():
    writer = Recorder("ok", "ok")
    loop = scripted_loop([tool("write", handler=writer, side_effect=True)], [intent("write"), intent("write")],
                         verify=lambda o: True)
    loop.run("first")
    loop.run("second")
    assert len(writer.calls) == 2


def test_trace_counts_the_attempts_a_deadline_allowed():
    flaky = Recorder(*[TransientToolError("503", retry_after=1.0)] * 5)
    clock = iter(range(100)).__next__
    loop = scripted_loop([tool("fetch", handler=flaky)], [intent("fetch")], max_steps=1,
                         retry=Retry(max_attempts=5, deadline=2.5),
                         clocks=Clocks(sleep=lambda s: None, clock=lambda: float(clock())))
    result = loop.run("goal")
    execute = next(r for r in result.trace if r.source == "execute")
    assert execute.detail["attempts"] == len(flaky.calls) < 5
