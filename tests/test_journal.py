"""The journal: every call a run makes to the world, and runs made again from it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from builders import Recorder, tool

from forge import (
    AgentLoop,
    Clocks,
    Finish,
    Hooks,
    Intent,
    RecordedPolicy,
    Retry,
    Tool,
    TransientToolError,
    read_trace,
    write_trace,
)
from forge.records.journal import JournalEncodeError, JournalMiss
from forge.records.trace import read_journal

CALLED: list[str] = []
"""Every call a replay made to a part of `_unreachable`'s loop: a replay that called one and
swallowed its error would pass a test that only relies on the error, so each is counted."""


@pytest.fixture(autouse=True)
def _nothing_called():
    CALLED.clear()
    yield
    assert CALLED == [], f"a replay called the world: {CALLED}"


def _raises(*args: Any, **kwargs: Any) -> Any:
    CALLED.append(repr((args, kwargs))[:200])
    raise AssertionError("a replay called the world")


class Chatty:
    """A policy deciding from the state alone that adds to the conversation as a chat policy does."""

    def __init__(self, plan: list[Intent | Finish]) -> None:
        self.plan = plan

    def __call__(self, goal: str, state: Any) -> Intent | Finish:
        decision = self.plan[state.step_count]
        state.messages.append({"role": "assistant", "content": f"step {state.step_count + 1}: {decision!r}"})
        return decision


def _recorded_loop(**options: Any) -> AgentLoop:
    flaky = Recorder(TransientToolError("503"), {"rows": [1, 2]})
    write = tool("write", {"write"}, Recorder("written"), required={"path"}, side_effect=True)
    plan = [Intent.call("fetch", url="a"), Intent.call("write", path="x.md"), Finish("all done")]
    return AgentLoop([tool("fetch", {"fetch"}, flaky, required={"url"}), write], Chatty(plan),
                     verify=lambda o: isinstance(o.payload, Finish), definition="approval",
                     approver=lambda request: True, **options)


def _unreachable(loop: AgentLoop) -> AgentLoop:
    """The same loop with every tool, verify and the approver raising: a replay calls none of
    them. The policy is code, run again and checked (a RecordedPolicy's raises too)."""
    policy = RecordedPolicy(_raises) if isinstance(loop.policy, RecordedPolicy) else loop.policy
    asks = any(state.action == "request_approval" for state in loop.definition.states)
    return loop.replace(policy=policy, verify=_raises, approver=_raises if asks else None,
                        tools=[Tool(t.name, t.capabilities, _raises, t.required, t.optional, t.side_effect)
                               for t in loop.tools])


def test_every_call_to_the_world_is_journaled_in_order_with_the_transition_it_fired_in():
    result = _recorded_loop().run("fetch and write")
    kinds = [(e.kind, e.name, e.step) for e in result.journal]
    assert kinds == [("policy", "policy", 1), ("tool", "fetch", 1), ("tool", "fetch", 1),
                     ("verify", "verify", 1), ("policy", "policy", 2), ("approver", "approver", 2),
                     ("tool", "write", 2), ("verify", "verify", 2), ("policy", "policy", 3), ("verify", "verify", 3)]
    for entry in result.journal:
        assert result.trace[entry.transition - 1].step == entry.step
    assert isinstance(result.journal[1].error, TransientToolError) and result.journal[2].value == {"rows": [1, 2]}
    assert result.journal[0].messages[0]["content"].startswith("step 1")


def test_a_replay_with_every_part_raising_makes_the_same_trace_and_journal():
    recorded = _recorded_loop().run("fetch and write")
    replayed = _unreachable(_recorded_loop()).replay(recorded.journal)
    assert replayed.reason == recorded.reason == "verified_success"
    assert replayed.trace == recorded.trace
    assert list(replayed.journal) == list(recorded.journal)
    assert replayed.state.messages == recorded.state.messages
    assert (replayed.retries, replayed.side_effects_run) == (recorded.retries, recorded.side_effects_run)


def test_a_replay_does_not_wait_between_retries():
    waited: list[float] = []
    recorded = _recorded_loop(retry=Retry(base_delay=0.5),
                              clocks=Clocks(sleep=waited.append, random=lambda: 1.0)).run("fetch and write")
    assert len(waited) == 1
    (wait,) = [entry for entry in recorded.journal if entry.kind == "wait"]
    assert (wait.transition, wait.identity) == (3, waited[0])  # select, approve, execute
    _unreachable(_recorded_loop(retry=Retry(base_delay=0.5),
                                clocks=Clocks(sleep=waited.append, random=lambda: 1.0))).replay(recorded.journal)
    assert len(waited) == 1


def test_a_changed_tool_argument_is_a_journal_miss_naming_the_call():
    recorded = _recorded_loop().run("fetch and write")
    entries = list(recorded.journal)
    changed = Intent.call("fetch", url="b")  # a decision the journal holds as the world's answer (a plain tuple)
    entries[0] = type(entries[0])(entries[0].run_id, 1, 1, "policy", "policy", tuple(entries[0].identity), changed,
                                  None, entries[0].messages)
    with pytest.raises(JournalMiss) as miss:
        _unreachable(_recorded_loop()).replay(entries)
    message = str(miss.value)
    assert "tool 'fetch' at transition 3" in message and '"url": "b"' in message and "arguments" in message
    assert miss.value.expected is not None and miss.value.expected.identity == {"url": "a"}
    assert miss.value.made is not None and miss.value.made.identity == {"url": "b"}


def test_a_journal_that_ends_early_is_a_miss_and_so_is_one_the_run_does_not_finish():
    recorded = _recorded_loop().run("fetch and write")
    with pytest.raises(JournalMiss, match="the journal has no more calls, but the run made tool 'write'"):
        _unreachable(_recorded_loop()).replay(recorded.journal[:6])
    longer = [*recorded.journal, recorded.journal[-1]]
    with pytest.raises(JournalMiss, match="the run ended in 'verified_success' without making verify"):
        _unreachable(_recorded_loop()).replay(longer)


def test_a_journal_miss_is_a_forge_error_and_calls_nothing():
    from forge import ForgeError

    recorded = _recorded_loop().run("fetch and write")
    assert issubclass(JournalMiss, ForgeError)
    with pytest.raises(ForgeError):
        _unreachable(_recorded_loop()).replay(recorded.journal[:1])


def test_a_trace_file_with_its_journal_replays_and_still_reads_as_a_trace(tmp_path):
    recorded = _recorded_loop().run("fetch and write")
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["transition"] for line in lines if line.get("type") == "call"] == [e.transition for e in recorded.journal]
    first_record = next(i for i, line in enumerate(lines) if line.get("type") != "call")
    assert lines[0]["type"] == "call" and first_record == 1  # the policy's call stands before select's record
    assert read_trace(path) == tuple(recorded.trace)
    replayed = _unreachable(_recorded_loop()).replay(path)
    assert replayed.trace == recorded.trace and replayed.state.messages == recorded.state.messages
    assert isinstance(read_journal(path)[1].error, TransientToolError)


def test_a_value_json_cannot_hold_is_refused_naming_the_call_unless_the_loop_has_a_codec(tmp_path):
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Point) and other.x == self.x

        def __repr__(self) -> str:
            return f"Point({self.x})"

    class PointCodec:
        def encode(self, value: Any) -> Any:
            if not isinstance(value, Point):
                raise TypeError(f"not a Point: {value!r}")
            return {"x": value.x}

        def decode(self, data: Any) -> Any:
            return Point(data["x"])

    def make(**options: Any) -> AgentLoop:
        return AgentLoop([tool("locate", {"locate"}, lambda: Point(3))],
                         Chatty([Intent.call("locate"), Finish("ok")]), verify=lambda o: isinstance(o.payload, Finish),
                         **options)

    plain = make().run("locate")
    with pytest.raises(JournalEncodeError, match=r"tool 'locate' at transition 2 .* returned a Point.* codec"):
        write_trace(plain.trace, tmp_path / "plain.jsonl", journal=plain.journal)
    assert not (tmp_path / "plain.jsonl").exists()
    coded = make(hooks=Hooks(codec=PointCodec())).run("locate")
    path = write_trace(coded.trace, tmp_path / "coded.jsonl", journal=coded.journal)
    assert read_journal(path, PointCodec())[1].value == Point(3)
    assert make(hooks=Hooks(codec=PointCodec())).replay(path).trace == coded.trace


def test_a_codec_without_encode_and_decode_is_refused():
    with pytest.raises(ValueError, match="codec must have encode"):
        AgentLoop([tool("a")], Chatty([Finish(1)]), verify=lambda o: True, hooks=Hooks(codec=object()))  # type: ignore[arg-type]


def test_an_async_run_journals_what_a_sync_run_does():
    sync = _recorded_loop().run("fetch and write", run_id="r")
    awaited = asyncio.run(_recorded_loop().arun("fetch and write", run_id="r"))
    assert list(awaited.journal) == list(sync.journal)
    assert [e.value for e in awaited.journal] == [e.value for e in sync.journal]


def test_stepping_back_in_the_debugger_cuts_the_journal_and_stepping_forward_replays_it():
    session = _recorded_loop().debug("fetch and write")
    for _ in range(4):
        session.step()
    calls = len(session.run.journal)
    session.step()
    session.back()
    assert len(session.run.journal) == calls
    session.step()
    session.continue_()
    assert session.result is not None
    assert list(session.result.journal) == list(_recorded_loop().run("fetch and write", run_id=session.run.trace.run_id).journal)


def test_an_async_tool_is_journaled_once_with_the_value_it_settled_to():
    async def fetch(url: str) -> dict:
        return {"rows": [1, 2], "url": url}

    def loop_with(handler: Any) -> AgentLoop:
        return AgentLoop([Tool("fetch", {"fetch"}, handler, required={"url"})],
                         lambda goal, state: Finish("ok") if state.observations else Intent.call("fetch", url="a"),
                         verify=lambda o: o.tool_name == "finish")

    awaited = asyncio.run(loop_with(fetch).arun("fetch", run_id="r"))
    synced = loop_with(lambda url: {"rows": [1, 2], "url": url}).run("fetch", run_id="r")
    assert [(e.kind, e.name) for e in awaited.journal] == [(e.kind, e.name) for e in synced.journal]
    assert [e.value for e in awaited.journal if e.kind == "tool"] == [{"rows": [1, 2], "url": "a"}]


def _talks_then_raises(goal: str, state: Any) -> Any:
    """Adds a message on each turn; finishes the first and raises on any other."""
    state.messages.append({"role": "assistant", "content": f"on {goal}"})
    if goal == "first":
        return Finish("done")
    raise RuntimeError("the model went away")


def test_a_policy_that_raises_is_journaled_with_the_messages_it_added_before():
    loop = AgentLoop([tool("a")], _talks_then_raises, verify=lambda o: True)
    first = loop.run("first")
    second = loop.run("second", state=first.state)  # the conversation holds the first turn's message already
    (entry,) = [e for e in second.journal if e.kind == "policy"]
    assert isinstance(entry.error, RuntimeError)
    assert entry.messages == ({"role": "assistant", "content": "on second"},)


def test_a_replayed_run_journals_each_call_as_recorded_with_its_error_and_messages():
    recorded = _recorded_loop().run("fetch and write")
    replayed = _unreachable(_recorded_loop()).replay(recorded.journal)
    assert [e.to_json() for e in replayed.journal] == [e.to_json() for e in recorded.journal]
    assert isinstance(replayed.journal[1].error, TransientToolError)


def test_a_replayed_tool_error_is_the_recorded_one_for_a_tool_that_declares_no_errors(tmp_path):
    def policy(goal: str, state: Any) -> Any:
        return Intent.call("fetch", url="a") if not state.observations else Finish("gave up")

    loop = AgentLoop([tool("fetch", {"fetch"}, Recorder(ValueError("no such page")), required={"url"})], policy,
                     verify=lambda o: True)
    recorded = loop.run("fetch")
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    for source in (recorded.journal, path):
        replayed = _unreachable(loop).replay(source)
        assert replayed.reason == recorded.reason
        assert str(replayed.journal[1].error) == "no such page"
        payload = replayed.state.observations[0].payload
        assert (type(payload).__name__, str(payload)) == ("ValueError", "no such page")


def test_a_replayed_verify_error_ends_the_replay_as_it_ended_the_run():
    def verify(observation: Any) -> bool:
        raise LookupError("the checker is down")

    loop = AgentLoop([tool("fetch")], lambda goal, state: Intent.call("fetch"), verify=verify)
    recorded = loop.run("fetch")
    replayed = _unreachable(loop).replay(recorded.journal)
    assert replayed.reason == recorded.reason
    (entry,) = [e for e in replayed.journal if e.kind == "verify"]
    assert isinstance(entry.error, LookupError) and str(entry.error) == "the checker is down"


def test_an_async_run_journals_only_the_messages_each_decision_added():
    loop = AgentLoop([tool("a")], _talks_then_raises, verify=lambda o: True)
    first = asyncio.run(loop.arun("first"))
    assert [e.messages for e in first.journal if e.kind == "policy"] == [({"role": "assistant", "content": "on first"},)]
    second = asyncio.run(loop.arun("second", state=first.state))
    (entry,) = [e for e in second.journal if e.kind == "policy"]
    assert isinstance(entry.error, RuntimeError)
    assert entry.messages == ({"role": "assistant", "content": "on second"},)


def test_a_question_to_the_user_is_written_to_a_file_and_replayed_from_it(tmp_path):
    from forge import Ask

    loop = AgentLoop([tool("lookup")], lambda goal, state: Ask("which one?"), verify=lambda o: False)
    asked = loop.run("look it up")
    path = write_trace(asked.trace, tmp_path / "run.jsonl", journal=asked.journal)
    assert read_journal(path)[0].value == Ask("which one?")
    replayed = loop.replay(path)
    assert (replayed.reason, replayed.question, replayed.trace) == ("input_required", "which one?", asked.trace)


def test_calls_asked_at_once_are_written_to_a_file_and_replayed_from_it(tmp_path):
    recorder = Recorder("A", "B")

    def together(goal, state):
        return [Intent.call("lookup", q="a"), Intent.call("lookup", q="b")] if not state.observations else Finish("ok")

    loop = AgentLoop([tool("lookup", handler=recorder, required={"q"})], together, verify=lambda o: True)
    ran = loop.run("look both up")
    path = write_trace(ran.trace, tmp_path / "run.jsonl", journal=ran.journal)
    assert read_journal(path)[0].value == [Intent.call("lookup", q="a"), Intent.call("lookup", q="b")]
    replayed = loop.replay(path)
    assert replayed.trace == ran.trace and len(recorder.calls) == 2


def test_a_replay_refuses_a_recorded_call_todays_contract_refuses_naming_it():
    """A journal recorded before a tool's argument was renamed (`path` → `filename`): a live
    run would refuse the call before the handler ran, so the replay fails there, naming the
    call, instead of answering it from the journal."""
    from forge.records.journal import ContractRefused

    def decide(goal, state):
        return Intent.call("read_file", path="a.md") if not state.observations else Finish("read")

    before = AgentLoop([Tool("read_file", {"read"}, lambda path: "text", {"path"})], decide,
                       lambda o: isinstance(o.payload, Finish))
    recorded = before.run("read a.md")
    assert recorded.reason == "verified_success"
    renamed = before.replace(tools=[Tool("read_file", {"read"}, _raises, {"filename"})])
    with pytest.raises(ContractRefused) as refused:
        renamed.replay(recorded.journal)
    assert isinstance(refused.value, JournalMiss)
    assert "the journal records tool 'read_file' at transition 2 (step 1)" in str(refused.value)
    assert "its argument contract refuses it today" in str(refused.value) and "filename" in str(refused.value)


def test_a_replay_still_answers_a_recorded_call_todays_contract_accepts():
    def decide(goal, state):
        return Intent.call("read_file", path="a.md") if not state.observations else Finish("read")

    loop = AgentLoop([Tool("read_file", {"read"}, lambda path: "text", {"path"})], decide,
                     lambda o: isinstance(o.payload, Finish))
    recorded = loop.run("read a.md")
    widened = loop.replace(tools=[Tool("read_file", {"read"}, _raises, {"path"}, {"encoding"})])
    assert widened.replay(recorded.journal).reason == "verified_success"
