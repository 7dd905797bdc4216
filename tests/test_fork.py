"""Forks: a recorded run made again up to transition K with no call to the world, one
outcome changed at K, then live."""

from __future__ import annotations

from typing import Any

import pytest

from forge import (
    AgentLoop,
    Finish,
    Intent,
    LoopState,
    Patch,
    PermanentToolError,
    ToolError,
    TransientToolError,
    read_trace,
    tool,
    write_trace,
)
from forge.machine.fork import PatchRefused
from forge.options import Hooks, Limits, Retry
from forge.records.journal import JournalMiss


class Counting:
    """A policy that counts its calls and decides from the observations alone: count up to
    `steps`, then finish with the last count."""

    def __init__(self, steps: int = 20) -> None:
        self.steps, self.calls = steps, 0

    def __call__(self, goal: str, state: LoopState) -> Intent | Finish:
        self.calls += 1
        done = state.step_count
        if done >= self.steps - 1:
            return Finish(state.observations[-1].payload if state.observations else 0)
        return Intent.call("count", n=done + 1)


def _counting_loop(policy: Counting, calls: list[int], max_steps: int = 20) -> AgentLoop:
    @tool
    def count(n: int) -> int:
        """Count to n."""
        calls.append(n)
        return n

    return AgentLoop([count], policy, verify=lambda o: isinstance(o.payload, Finish), max_steps=max_steps)


def _recorded(steps: int = 20) -> tuple[AgentLoop, Any]:
    loop = _counting_loop(Counting(steps), [])
    result = loop.run("count to twenty")
    assert result.reason == "verified_success" and result.steps == steps
    return loop, result


def _first_tool_transition(result: Any, n: int) -> int:
    """The transition (1-based) in which the tool was called with n."""
    return next(e.transition for e in result.journal if e.kind == "tool" and e.step == n)


def test_a_fork_replays_transitions_before_k_with_no_call_to_the_world_then_goes_live():
    _, source = _recorded()
    at = 10
    assert (source.trace[at - 1].source, source.trace[at - 1].step) == ("execute", 3)  # step 3's tool call
    policy, calls = Counting(), []
    fork = _counting_loop(policy, calls).fork(source, at=at, patch=Patch.tool_result(999))
    calls_after = [e for e in fork.journal if e.transition > at]
    assert calls == list(range(4, 20))  # the tool: 0 calls before K, live after it
    decided_before = len([e for e in source.journal if e.kind == "policy" and e.transition < at])
    assert decided_before == 3  # the policy is code: run again before K, each decision checked; live after K
    assert policy.calls == decided_before + len([e for e in calls_after if e.kind == "policy"]) == 20
    assert fork.trace[at - 1].detail["patched"] == {"tool_result": 999}
    assert fork.trace[at].detail["payload"] == "999"  # the observation the patched result made
    assert [r.detail for r in fork.trace[: at - 1]] == [r.detail for r in source.trace[: at - 1]]
    assert fork.reason == "verified_success"


def test_a_fork_answers_a_recorded_policy_s_decisions_before_k_without_calling_it():
    from forge import RecordedPolicy

    _, source = _recorded()
    policy, calls = Counting(), []
    fork = _counting_loop(policy, calls).replace(policy=RecordedPolicy(policy)).fork(
        source, at=10, patch=Patch.tool_result(999))
    assert fork.reason == "verified_success"
    assert policy.calls == len([e for e in fork.journal if e.kind == "policy" and e.transition > 10]) == 17


def test_a_fork_whose_policy_now_decides_otherwise_before_k_stops_naming_both_decisions():
    _, source = _recorded()

    class Skipping(Counting):
        def __call__(self, goal: str, state: LoopState) -> Intent | Finish:
            decision = super().__call__(goal, state)
            return Intent.call("count", n=99) if state.step_count == 1 else decision

    with pytest.raises(JournalMiss) as miss:
        _counting_loop(Skipping(), []).fork(source, at=10, patch=Patch.tool_result(999))
    assert "the policy decided to call tool 'count' with {\"n\": 99}" in str(miss.value)
    assert "where the journal records to call tool 'count' with {\"n\": 2}" in str(miss.value)


def test_a_fork_records_where_it_came_from_in_its_journal_and_trace_file(tmp_path):
    loop, source = _recorded(5)
    at = _first_tool_transition(source, 2)
    fork = loop.fork(source, at=at, patch=Patch.tool_result(7), run_id="child")
    origin = fork.journal.forked_from
    assert (origin.run_id, origin.transition, origin.patch) == (source.journal.run_id, at, {"tool_result": 7})
    path = write_trace(fork.trace, tmp_path / "fork.jsonl", journal=fork.journal)
    assert read_trace(path) == tuple(fork.trace)
    from forge.records.trace import read_journal

    assert read_journal(path).forked_from == origin
    assert fork.trace.forked_from == origin
    trace_only = write_trace(fork.trace, tmp_path / "trace-only.jsonl")
    assert read_journal(trace_only).forked_from == origin
    again = loop.fork(path, at=at + 2)  # a fork of a fork, from its file
    assert again.journal.forked_from.run_id == "child"


def test_a_fork_without_a_patch_is_a_plain_continuation():
    loop, source = _recorded(6)
    fork = loop.fork(source, at=_first_tool_transition(source, 3))
    assert [(r.source, r.dest, r.detail) for r in fork.trace] == [(r.source, r.dest, r.detail) for r in source.trace]
    assert "patched" not in str([r.detail for r in fork.trace])


def test_a_patched_policy_decision_changes_the_run_from_k():
    loop, source = _recorded(6)
    at = next(e.transition for e in source.journal if e.kind == "policy" and e.step == 3)
    fork = loop.fork(source, at=at, patch=Patch.decision(Finish("stopped early")))
    assert fork.trace[at - 1].detail["finish"] == "'stopped early'"
    assert fork.state.observations[-1].payload == Finish("stopped early")
    assert fork.steps == 3


def test_a_patched_tool_error_is_observed_as_the_tool_failing():
    loop, source = _recorded(4)
    at = _first_tool_transition(source, 2)
    fork = loop.fork(source, at=at, patch=Patch.tool_error("disk full"))
    assert fork.reason == "fatal_error" and isinstance(fork.error, PermanentToolError)
    retry = loop.fork(source, at=at, patch=Patch.tool_error("try n=3", retryable=True))
    assert retry.state.observations[1].status == "retryable_error"
    assert isinstance(retry.state.observations[1].payload, ToolError)


def test_a_patched_verify_answer_decides_the_run():
    _, source = _recorded(3)
    last_verify = max(e.transition for e in source.journal if e.kind == "verify")
    policy = Counting(3)
    fork = _counting_loop(policy, []).fork(source, at=last_verify, patch=Patch.verified(False))
    assert fork.trace[last_verify - 1].detail["verified"] is False
    assert fork.trace[last_verify - 1].detail["patched"] == {"verified": False}
    asked_before = len([e for e in source.journal if e.kind == "policy" and e.transition < last_verify])
    assert policy.calls - asked_before == 1  # not verified: the policy is asked again (before K it ran as code)
    assert fork.steps == source.steps + 1


def test_side_effects_recorded_before_k_never_run_again():
    written: list[str] = []

    @tool(side_effect=True)
    def save(text: str) -> str:
        """Save text."""
        written.append(text)
        return "saved"

    def policy(goal: str, state: LoopState) -> Intent | Finish:
        return Intent.call("save", text="a") if state.step_count == 0 else Finish("done")

    loop = AgentLoop([save], policy, verify=lambda o: True)
    source = loop.run("save a")
    written.clear()
    fork = loop.fork(source, at=len(source.trace))
    assert written == [] and fork.reason == "verified_success"


@pytest.mark.parametrize(("patch", "words"), [
    (Patch.decision(Finish("x")), "called tool 'count'; a decision patch"),
    (Patch.verified(True), "called tool 'count'; a verified patch"),
])
def test_a_patch_of_another_kind_of_call_is_refused_before_anything_runs(patch, words):
    _, source = _recorded(3)
    calls: list[int] = []
    with pytest.raises(PatchRefused, match=words):
        _counting_loop(Counting(), calls).fork(source, at=_first_tool_transition(source, 2), patch=patch)
    assert calls == []


def test_a_patch_at_a_transition_that_called_nothing_is_refused_naming_the_ones_that_did():
    loop, source = _recorded(3)
    quiet = next(r.sequence for r in source.trace if not any(e.transition == r.sequence for e in source.journal))
    with pytest.raises(PatchRefused, match=f"transition {quiet} made no call to the world, so there is no outcome "
                                           "to patch; calls were made at transitions 1, 2"):
        loop.fork(source, at=quiet, patch=Patch.tool_result(1))


def test_a_patched_decision_for_a_tool_the_loop_lacks_or_with_refused_arguments_is_refused():
    loop, source = _recorded(3)
    at = next(e.transition for e in source.journal if e.kind == "policy" and e.step == 2)
    with pytest.raises(PatchRefused, match="selects no tool of this loop: no tool named 'cont'"):
        loop.fork(source, at=at, patch=Patch.decision(Intent.call("cont", n=1)))
    with pytest.raises(PatchRefused, match="arguments for count break its contract; missing: n"):
        loop.fork(source, at=at, patch=Patch.decision(Intent.call("count", m=1)))


@pytest.mark.parametrize("at", [0, -1, 10_000, "3", True])
def test_a_fork_at_a_transition_the_run_does_not_have_is_refused(at):
    loop, source = _recorded(3)
    with pytest.raises(PatchRefused, match="cannot fork at transition"):
        loop.fork(source, at=at)


def test_a_fork_whose_definition_makes_other_calls_before_k_stops_with_a_journal_miss_calling_nothing():
    _, source = _recorded(4)
    calls: list[int] = []

    def other(goal: str, state: LoopState) -> Intent:
        raise AssertionError("called")

    @tool
    def count(n: int, by: int = 2) -> int:
        """Count."""
        calls.append(n)
        return n

    changed = AgentLoop([count], other, verify=lambda o: True, max_steps=20, limits=Limits(repeat_limit=99))
    # same calls, but the run's limits make it stop sooner: the journal is not spent when it ends
    short = changed.replace(max_steps=2)
    with pytest.raises(JournalMiss):
        short.fork(source, at=len(source.trace))
    assert calls == []


def test_patches_read_from_json_say_what_is_wrong():
    assert Patch.from_json({"tool_result": [1, 2]}) == Patch.tool_result([1, 2])
    assert Patch.from_json({"decision": {"tool": "count", "arguments": {"n": 3}}}).value == Intent.call("count", n=3)
    assert Patch.from_json({"decision": {"finish": "ok"}}).value == Finish("ok")
    assert Patch.from_json({"approved": False}).value is False
    with pytest.raises(ValueError, match="a patch names exactly one of: tool_result, tool_error, decision"):
        Patch.from_json({"result": 1})
    with pytest.raises(ValueError, match="'verified'"):
        Patch.from_json({"verified": "yes"})
    with pytest.raises(ValueError, match="a tool_result patch takes no retryable"):
        Patch.from_json({"tool_result": 1, "retryable": True})


def test_a_chat_policys_patched_decision_replaces_its_recorded_reply_in_the_conversation():
    class Chatty(Counting):
        def __call__(self, goal: str, state: LoopState) -> Intent | Finish:
            decision = super().__call__(goal, state)
            state.messages.append({"role": "assistant", "content": f"decided {decision!r}"})
            return decision

    loop = _counting_loop(Chatty(4), [])
    source = loop.run("count")
    at = next(e.transition for e in source.journal if e.kind == "policy" and e.step == 2)
    fork = loop.fork(source, at=at, patch=Patch.decision(Intent.call("count", n=40)))
    said = [m for m in fork.state.messages if m.get("tool_calls")]
    assert said[0]["tool_calls"][0]["function"] == {"name": "count", "arguments": '{"n": 40}'}
    assert fork.state.observations[1].payload == 40


def _flaky_loop(calls: list[int], flaky: bool, max_attempts: int) -> AgentLoop:
    """Counts to six; with `flaky`, the first call with n=4 fails for a moment."""
    failed: set[int] = set()

    @tool
    def count(n: int) -> int:
        """Count to n."""
        calls.append(n)
        if flaky and n == 4 and n not in failed:
            failed.add(n)
            raise TransientToolError("busy")
        return n

    return AgentLoop([count], Counting(6), verify=lambda o: isinstance(o.payload, Finish), max_steps=20,
                     retry=Retry(max_attempts=max_attempts))


def test_a_fork_from_the_divergence_replays_while_the_calls_match_then_goes_live():
    calls: list[int] = []
    source = _flaky_loop(calls, flaky=True, max_attempts=1).run("count to six")
    assert source.state.observations[3].status == "retryable_error"
    calls.clear()
    same = _flaky_loop(calls, flaky=False, max_attempts=1).fork(source, at=None)
    assert calls == [] and same.journal.forked_from.transition == len(source.trace)
    retried = _flaky_loop(calls, flaky=False, max_attempts=2).fork(source, at=None)  # now it retries: a wait
    assert retried.journal.forked_from.transition == _first_tool_transition(source, 4)
    assert calls == [4, 5] and retried.state.observations[3].payload == 4


def test_a_patch_needs_a_transition_to_patch_at():
    loop, source = _recorded(3)
    with pytest.raises(PatchRefused, match="pass at=K with it"):
        loop.fork(source, at=None, patch=Patch.tool_result(1))


def test_trace_messages_pass_through_redact():
    from forge.cover.stubs import Stub

    def chatty(goal: str, state: LoopState) -> Intent | Finish:
        if state.step_count:
            state.messages.append({"role": "tool", "tool_call_id": "c1", "content": "token=abc"})
            return Finish("done")
        state.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "plain", "arguments": '{"n": 1, "key": "abc"}'}}]})
        return Intent.call("plain", n=1)

    def redact(tool_name: str, field: str, value: Any) -> Any:
        if field == "arguments" and isinstance(value, dict) and "key" in value:
            return {**value, "key": "***"}
        return "***" if field == "payload" and isinstance(value, str) and "abc" in value else value

    stub = Stub("plain", {"plain"}, ["ok"])
    result = AgentLoop([stub.tool], chatty, verify=lambda o: True, hooks=Hooks(redact=redact), max_steps=3).run("go")
    assert "abc" not in str([record.detail for record in result.trace])
    assert '"key": "***"' in str(result.trace[0].detail["messages"])


@pytest.mark.parametrize("data", [
    {"tool_error": "x", "retryable": "false"},
    {"tool_error": "x", "retryable": 0},
    {"decision": {"tool": "a", "argumentz": {}}},
    {"decision": {"capabilities": "read"}},
    {"decision": {"capabilities": ["read", 3]}},
    {"decision": {"tool": "a", "capabilities": ["read"]}},
    {"decision": {"finish": "done", "tool": "a"}},
    {"decision": {"tool": ""}},
])
def test_a_patch_of_the_wrong_type_is_refused_naming_the_field(data):
    with pytest.raises(ValueError, match="retryable|decision"):
        Patch.from_json(data)


def test_a_patch_says_retryable_only_with_true():
    from forge import ToolError

    assert not isinstance(Patch.from_json({"tool_error": "x", "retryable": False}).error, ToolError)
    assert isinstance(Patch.from_json({"tool_error": "x", "retryable": True}).error, ToolError)
