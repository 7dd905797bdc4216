"""A side effect decided twice with the same arguments runs once by default, and the policy
is told so; a `repeatable` tool makes each decision a new act; `side_effects_run` counts
side effects that completed."""

from __future__ import annotations

import pytest

from forge import AgentLoop, Finish, Intent, PermanentToolError, Retry, Tool, TransientToolError


def reboot_loop(repeatable: bool, seen: list, handler_calls: list, fail_first: bool = False) -> AgentLoop:
    def reboot(device: str) -> str:
        handler_calls.append(device)
        if fail_first and len(handler_calls) == 1:
            raise TransientToolError("busy")
        return f"rebooted {device} (#{len(handler_calls)})"

    def policy(goal, state):
        seen.append(list(state.observations))
        return Intent.call("reboot", device="router") if len(state.observations) < 2 else Finish("done")

    return AgentLoop([Tool("reboot", {"reboot"}, reboot, required={"device"}, side_effect=True, repeatable=repeatable)],
                     policy, lambda o: o.tool_name == "finish")


def test_a_repeated_side_effect_runs_once_and_the_observation_names_the_step_that_ran_it():
    seen, calls = [], []
    result = reboot_loop(False, seen, calls).run("reboot twice")
    assert calls == ["router"]
    first, second = result.state.observations[:2]
    assert (first.repeat_of, second.repeat_of) == (None, 1)
    assert second.payload == first.payload
    assert (result.side_effects_run, result.side_effects_replayed) == (1, 1)


def test_a_repeatable_side_effect_runs_at_each_decision():
    seen, calls = [], []
    result = reboot_loop(True, seen, calls).run("reboot twice")
    assert calls == ["router", "router"]
    assert [o.repeat_of for o in result.state.observations[:2]] == [None, None]
    assert result.side_effects_run == 2 and result.side_effects_replayed == 0


def test_a_retried_attempt_of_a_repeatable_side_effect_is_still_one_decision():
    seen, calls = [], []
    result = reboot_loop(True, seen, calls, fail_first=True).run("reboot twice")
    assert calls == ["router", "router", "router"]  # decision 1: a transient failure, then its retry; decision 2
    assert result.side_effects_run == 2


def test_a_chat_policy_is_told_that_a_repeated_side_effect_was_not_run_again():
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    calls: list[str] = []

    def reboot(device: str) -> str:
        calls.append(device)
        return "rebooted"

    with ChatServer([reply(None, ("c1", "reboot", {"device": "r"})), reply(None, ("c2", "reboot", {"device": "r"})),
                     reply("done")]) as server:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="k"))
        AgentLoop([Tool("reboot", {"reboot"}, reboot, required={"device"}, side_effect=True)], policy,
                  lambda o: o.tool_name == "finish").run("reboot it twice")
        told = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert calls == ["r"]
    assert told[0]["content"] == "rebooted"
    assert told[1]["content"].startswith("not run again: this exact call already ran at step 1")
    assert told[1]["content"].endswith("what it returned then: rebooted")


@pytest.mark.parametrize("error", [PermanentToolError("denied"), TransientToolError("down")], ids=["permanent", "transient"])
def test_a_side_effect_whose_only_attempt_failed_is_not_counted_as_run(error):
    def write(text: str) -> str:
        raise error

    loop = AgentLoop([Tool("write", {"write"}, write, required={"text"}, side_effect=True)],
                     lambda goal, state: Intent.call("write", text="x") if not state.observations else Finish("no"),
                     lambda o: o.tool_name == "finish", retry=Retry(max_attempts=1))
    result = loop.run("write")
    assert result.side_effects_run == 0


def test_repeatable_without_side_effect_is_refused_saying_why():
    with pytest.raises(ValueError, match="repeatable=True .* needs side_effect=True"):
        Tool("x", {"x"}, lambda: 1, repeatable=True)


def test_a_schema_tool_gets_a_whole_float_as_an_int_and_refuses_a_fraction():
    got: list = []
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "ids": {"type": "array", "items": {"type": "integer"}}},
              "required": ["n"]}
    tool = Tool("take", {"take"}, lambda n, ids=(): got.append((n, list(ids))) or "ok", schema=schema)

    def policy(goal, state):
        if not state.observations:
            return Intent.call("take", n=2.0, ids=[1.0, 3])
        if len(state.observations) == 1:
            return Intent.call("take", n=2.5)
        return Finish("done")

    result = AgentLoop([tool], policy, lambda o: o.tool_name == "finish").run("take")
    assert got == [(2, [1, 3])] and all(type(v) is int for v in (got[0][0], *got[0][1]))
    assert result.state.observations[1].status == "retryable_error"
    assert "2.5 is not of type 'integer'" in str(result.state.observations[1].payload)


def test_a_tool_without_capabilities_is_called_by_name():
    tool = Tool("echo", handler=lambda text: text, required={"text"})
    loop = AgentLoop([tool], lambda goal, state: Intent.call("echo", text="hi") if not state.observations
                     else Finish(state.observations[0].payload), lambda o: o.answer == "hi")
    assert tool.capabilities == frozenset()
    assert loop.run("echo").reason == "verified_success"
