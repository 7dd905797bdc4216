"""A conversation's journal grows with the conversation, not with its square (issue 50, item
2): each model request keeps the messages it shares with the request before it once, in
memory and in files; what a request is (its identity and hash) and replay are unchanged,
and files written whole (every earlier release's) still read."""

import json
import tracemalloc

import pytest

from forge.errors import UsageError
from forge.records.journal import Journal, JournalEntry, SharedRequests
from forge.records.trace import read_journal, write_trace

TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]


def conversation(exchanges, size=200):
    """The requests of a conversation of `exchanges` model calls, each one's messages the
    last one's and two more (the reply and a tool's result, `size` characters each)."""
    messages, requests = [{"role": "user", "content": "read every page"}], []
    for n in range(exchanges):
        requests.append({"model": "m", "messages": list(messages), "tools": TOOLS})
        messages += [{"role": "assistant", "content": f"{n}:" + "r" * size},
                     {"role": "tool", "tool_call_id": f"c{n}", "content": f"{n}:" + "t" * size}]
    return requests, messages


def journal_of(requests):
    journal = Journal(run_id="talk")
    for n, request in enumerate(requests):
        journal.add(2 * n + 1, n + 1, "model", "m", request, {"message": {"role": "assistant"}})
    return journal


def test_a_conversations_journal_file_keeps_each_message_once(tmp_path):
    requests, messages = conversation(100)
    path = write_trace([], tmp_path / "talk.jsonl", journal=journal_of(requests))
    assert path.stat().st_size < 2 * len(json.dumps(messages))  # whole, it would be 50 times the messages
    read = read_journal(path)
    assert [entry.identity for entry in read] == requests
    assert [entry.args_sha256 for entry in read] == [entry.args_sha256 for entry in journal_of(requests)]


def test_a_requests_model_and_tools_unchanged_since_the_last_are_written_once(tmp_path):
    requests, _ = conversation(3)
    lines = [json.loads(line) for line in write_trace([], tmp_path / "t.jsonl", journal=journal_of(requests))
             .read_text().splitlines()]
    assert "tools" in lines[0]["request"] and lines[2]["request"]["$same"] == ["model", "tools"]
    assert lines[2]["request"]["messages"]["$shared"] == 3 and "tools" not in lines[2]["request"]


def test_in_memory_a_conversations_requests_share_their_messages():
    requests, messages = conversation(200, size=1000)
    tracemalloc.start()
    journal = journal_of([{**r, "messages": [dict(m) for m in r["messages"]]} for r in requests])  # copies, as sent
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert journal[199].identity == requests[199]
    assert held < 8 * len(json.dumps(messages))  # whole, the copies would be 100 times the messages


def test_a_journal_written_whole_still_reads(tmp_path):
    requests, _ = conversation(4)
    lines = [{**JournalEntry("talk", 2 * n + 1, n + 1, "model", "m", request, {"message": {}}).to_json()}
             for n, request in enumerate(requests)]
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [entry.identity for entry in read_journal(tmp_path / "old.jsonl")] == requests


def test_a_request_sharing_messages_the_journal_does_not_have_is_refused_naming_why():
    reader = SharedRequests()
    with pytest.raises(UsageError, match="shares 3 messages with the request before it, which the journal does not"):
        reader.read({"kind": "model", "request": {"messages": {"$shared": 3, "then": []}}})
