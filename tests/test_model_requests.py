"""Every boundary is a call: a request a policy sends to a model is an entry of the run's
journal whose identity is the request itself, and a policy's own code runs again on replay,
so a replay fails at the first request or decision that changed, naming it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the llm extra is a test dependency: python3 tasks.py test installs it")

from chat_server import ChatServer, reply  # noqa: E402

from forge import AgentLoop, Finish, Intent, Patch, RecordedPolicy, ScriptedPolicy, Tool, tool, write_trace  # noqa: E402
from forge.models.chat import ChatPolicy  # noqa: E402
from forge.records.journal import DecidedAsCode, JournalMiss  # noqa: E402
from forge.testing import write_cassette  # noqa: E402

GONE = "http://127.0.0.1:9/v1"
"""An endpoint nothing listens on: a replay that reached the model would fail."""

READS: list[str] = []


@tool
def read_note(path: str) -> str:
    """Read a note by its path."""
    READS.append(path)
    return "buy milk"


def _script() -> list[dict[str, Any]]:
    return [reply(None, ("c1", "read_note", {"path": "todo.md"})), reply("The note says: buy milk.")]


def _loop(url: str, system: str = "You keep notes.", model: str = "test-model", description: str | None = None,
          **options: Any) -> AgentLoop:
    policy = ChatPolicy(model, client=openai.OpenAI(base_url=url, api_key="test", max_retries=0),
                        async_client=openai.AsyncOpenAI(base_url=url, api_key="test", max_retries=0),
                        system=system, options={"temperature": 0})
    reader = read_note if description is None else Tool(read_note.name, handler=read_note.handler,
                                                        description=description, schema=read_note.schema)
    return AgentLoop([reader], policy, lambda o: isinstance(o.payload, Finish), **options)


def _recorded(tmp_path: Path) -> tuple[Path, Any]:
    with ChatServer(_script()) as server:
        result = _loop(server.url).run("what does todo.md say?", run_id="notes")
        assert len(server.requests) == 2
    return write_cassette(tmp_path / "notes.jsonl", result), result


def test_each_request_to_the_model_is_a_journal_entry_holding_the_request_and_the_reply():
    with ChatServer(_script()) as server:
        result = _loop(server.url).run("what does todo.md say?")
    models = [entry for entry in result.journal if entry.kind == "model"]
    assert [entry.name for entry in models] == ["test-model", "test-model"]
    assert [entry.identity for entry in models] == server.requests
    assert models[0].value["message"]["tool_calls"][0]["function"]["name"] == "read_note"
    assert models[1].value["message"]["content"] == "The note says: buy milk."
    decisions = [entry for entry in result.journal if entry.kind == "policy"]
    assert len(decisions) == 2 and all(isinstance(entry.identity, DecidedAsCode) for entry in decisions)


def test_a_cassette_replays_with_the_model_gone_and_calls_no_tool(tmp_path):
    path, recorded = _recorded(tmp_path)
    READS.clear()
    replayed = _loop(GONE).replay(path)
    assert replayed.reason == recorded.reason == "verified_success"
    assert replayed.answer == "The note says: buy milk." and READS == []
    assert [(r.source, r.verdict, r.dest) for r in replayed.trace] == [(r.source, r.verdict, r.dest) for r in recorded.trace]


@pytest.mark.parametrize(("change", "field"), [
    ({"system": "You keep notes tidy."}, "messages[0].content"),
    ({"description": "Read one note."}, "tools[0].function.description"),
    ({"model": "other-model"}, "model"),
], ids=["system prompt", "tool description", "model"])
def test_a_replay_fails_when_the_request_changed_naming_the_first_field_that_differs(tmp_path, change, field):
    path, _ = _recorded(tmp_path)
    READS.clear()
    with pytest.raises(JournalMiss) as miss:
        _loop(GONE, **change).replay(path)
    assert f"request field {field}" in str(miss.value)
    assert "record the run again" in str(miss.value)
    assert READS == []


def test_a_changed_prompt_is_a_miss_in_memory_too():
    with ChatServer(_script()) as server:
        recorded = _loop(server.url).run("what does todo.md say?")
    with pytest.raises(JournalMiss, match=r"request field messages\[0\]\.content"):
        _loop(GONE, system="Be brief.").replay(recorded.journal)


def test_an_async_run_journals_the_requests_a_sync_run_does_and_replays_from_either():
    with ChatServer(_script()) as server:
        synced = _loop(server.url).run("what does todo.md say?", run_id="r")
    with ChatServer(_script()) as server:
        awaited = asyncio.run(_loop(server.url).arun("what does todo.md say?", run_id="r"))
    assert [e.identity for e in awaited.journal if e.kind == "model"] == \
        [e.identity for e in synced.journal if e.kind == "model"]
    assert asyncio.run(_loop(GONE).arun("what does todo.md say?", run_id="r")).reason == "fatal_error"
    assert _loop(GONE).replay(awaited.journal).answer == synced.answer


def test_a_fork_at_a_later_transition_asks_the_model_nothing_before_it(tmp_path):
    path, recorded = _recorded(tmp_path)
    last_select = max(record.sequence for record in recorded.trace if record.source == "select")
    with ChatServer([reply("Forked: buy milk.")]) as server:
        forked = _loop(server.url).fork(path, at=last_select)
        assert len(server.requests) == 1  # only the request at the fork's transition, live
    assert forked.answer == "Forked: buy milk."


def test_a_fork_can_patch_a_model_policy_s_decision(tmp_path):
    path, recorded = _recorded(tmp_path)
    last_select = max(record.sequence for record in recorded.trace if record.source == "select")
    forked = _loop(GONE).fork(path, at=last_select, patch=Patch.decision(Finish("patched answer")))
    assert forked.answer == "patched answer" and forked.reason == "verified_success"
    assert forked.trace[last_select - 1].detail["patched"] == {"decision": {"finish": "patched answer"}}


def test_a_recorded_chat_policy_replays_its_decisions_whole_from_the_journal():
    with ChatServer(_script()) as server:
        loop = _loop(server.url)
        recorded = loop.replace(policy=RecordedPolicy(loop.policy)).run("what does todo.md say?")
    assert [e.kind for e in recorded.journal].count("model") == 0
    (first, *_) = [e for e in recorded.journal if e.kind == "policy"]
    assert not isinstance(first.identity, DecidedAsCode) and first.messages  # its conversation, kept with it
    loop = _loop(GONE)
    assert loop.replace(policy=RecordedPolicy(loop.policy)).replay(recorded.journal).answer == recorded.answer


def test_a_journal_written_before_model_requests_were_calls_still_replays(tmp_path):
    """Lines of an older forge: the chat policy's decision one `policy` call with the messages
    the model added, no `model` calls. They are answered as recorded."""
    path, _ = _recorded(tmp_path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    old: list[dict[str, Any]] = []
    added: list[dict[str, Any]] = []
    for line in lines:
        if line.get("type") == "call" and line["kind"] == "model":
            added.append(line["value"]["message"])
            continue
        if line.get("type") == "call" and line["kind"] == "policy":
            line = {**line, "asked": {k: v for k, v in line["asked"].items() if k != "code"}, "messages": [*added]}
            added = []
        old.append(line)
    older = tmp_path / "older.jsonl"
    older.write_text("".join(json.dumps(line) + "\n" for line in old))
    assert _loop(GONE).replay(older).answer == "The note says: buy milk."


def inc(x: int) -> int:
    """Add one."""
    return x + 1


def _counter(decide: Any) -> AgentLoop:
    return AgentLoop([tool(inc)], decide, lambda o: isinstance(o.payload, Finish))


def _once(x: int) -> Any:
    def decide(goal: str, state: Any) -> Intent | Finish:
        return Intent.call("inc", x=x) if not state.observations else Finish(state.observations[-1].payload)
    return decide


def test_a_replay_fails_when_a_python_policy_now_decides_otherwise_naming_both_decisions(tmp_path):
    recorded = _counter(_once(1)).run("count")
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    for source in (recorded.journal, path):
        with pytest.raises(JournalMiss) as miss:
            _counter(_once(99)).replay(source)
        message = str(miss.value)
        assert "the policy decided to call tool 'inc' with {\"x\": 99}" in message
        assert "the journal records to call tool 'inc' with {\"x\": 1}" in message
        assert "RecordedPolicy(policy)" in message


def test_the_same_python_policy_replays_cleanly_from_memory_and_from_a_file(tmp_path):
    recorded = _counter(_once(1)).run("count")
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    assert _counter(_once(1)).replay(recorded.journal).answer == 2
    assert _counter(_once(1)).replay(path).answer == 2


def test_a_recorded_policy_replays_its_recorded_decisions_without_being_called():
    recorded = _counter(RecordedPolicy(_once(1))).run("count")
    called: list[Any] = []

    def never(goal: str, state: Any) -> Any:
        called.append(goal)
        return Intent.call("inc", x=99)

    assert _counter(RecordedPolicy(never)).replay(recorded.journal).answer == 2
    assert called == []


def test_a_scripted_policy_replays_cleanly_with_the_loop_that_recorded_it():
    loop = _counter(ScriptedPolicy([Intent.call("inc", x=1), Finish("done")]))
    recorded = loop.run("count")
    assert loop.replay(recorded.journal).reason == recorded.reason == "verified_success"


def test_a_policy_that_now_raises_where_it_decided_is_a_miss_naming_the_error():
    recorded = _counter(_once(1)).run("count")

    def broken(goal: str, state: Any) -> Any:
        raise RuntimeError("a bug in the new policy")

    with pytest.raises(JournalMiss, match="the policy decided to raise RuntimeError: a bug in the new policy"):
        _counter(broken).replay(recorded.journal)


def test_a_fork_from_the_divergence_goes_live_at_the_decision_that_changed():
    recorded = _counter(_once(1)).run("count")
    forked = _counter(_once(5)).fork(recorded, at=None)
    assert forked.answer == 6 and forked.reason == "verified_success"
    assert forked.journal.forked_from is not None and forked.journal.forked_from.transition == 1  # live from there
    first = next(entry for entry in forked.journal if entry.kind == "policy")
    assert first.value == Intent.call("inc", x=5) and isinstance(first.identity, DecidedAsCode)
    unchanged = _counter(_once(1)).fork(recorded, at=None)
    assert unchanged.journal.forked_from is not None and unchanged.journal.forked_from.transition == len(recorded.trace)
