"""Long conversations (issue 33, item 5): `ChatPolicy(..., context=ContextLimit(...))` keeps
every request within a context limit — the oldest exchanges left out whole (a tool call
never without its result) with a note, or summarised by the model in a journaled call —
and says so in a marker message the trace keeps. Against the local chat server."""

import asyncio

import pytest

openai = pytest.importorskip("openai", reason="the llm extra is a test dependency: python3 tasks.py test installs it")

from chat_server import ChatServer, reply  # noqa: E402

from forge import AgentLoop, Finish, tool  # noqa: E402
from forge.models.chat import ChatPolicy  # noqa: E402
from forge.models.compaction import COMPACTED, ContextLimit  # noqa: E402


@tool
def look(n: int) -> str:
    """Look at item n."""
    return f"item {n} is fine"


def _per_message(request):
    """Ten tokens a message: a count every test can work out."""
    return 10 * len(request["messages"])


def _loop(server, context):
    policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0),
                        async_client=openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0),
                        system="You check items.", count_tokens=_per_message, context=context)
    return AgentLoop([look], policy, lambda o: isinstance(o.payload, Finish), max_steps=10)


def _looks(count):
    return [reply(None, (f"call_{n}", "look", {"n": n})) for n in range(1, count + 1)]


def _paired(messages):
    """Every tool message answers a call an assistant message before it made."""
    called = set()
    for message in messages:
        called |= {call["id"] for call in message.get("tool_calls") or ()}
        if message["role"] == "tool" and message["tool_call_id"] not in called:
            return False
    return True


def test_a_conversation_past_the_limit_leaves_out_its_oldest_exchanges_whole():
    with ChatServer([*_looks(5), reply("all fine")]) as server:
        result = _loop(server, ContextLimit(60)).run("check the items")
    assert result.reason == "verified_success" and result.answer == "all fine"
    assert all(_per_message(request) <= 60 for request in server.requests)
    assert all(_paired(request["messages"]) for request in server.requests)
    last = server.requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": "You check items."}
    assert last[1] == {"role": "user", "content": "check the items"}  # the task is always sent
    assert "left out to fit the context limit" in last[2]["content"]
    assert last[-2]["tool_calls"][0]["id"] == "call_5" and last[-1]["tool_call_id"] == "call_5"


def test_nothing_is_deleted_and_the_marker_is_in_the_trace():
    with ChatServer([*_looks(5), reply("all fine")]) as server:
        result = _loop(server, ContextLimit(60)).run("check the items")
    markers = [m for m in result.state.messages if COMPACTED in m]
    assert markers and markers[-1][COMPACTED]["strategy"] == "trim"
    assert len([m for m in result.state.messages if m["role"] == "tool"]) == 5  # the whole conversation kept
    traced = [m for record in result.trace for m in record.detail.get("messages", ()) if COMPACTED in m]
    assert traced == [{**m} for m in markers]


def test_under_the_limit_everything_is_sent():
    with ChatServer([*_looks(2), reply("all fine")]) as server:
        _loop(server, ContextLimit(1000)).run("check the items")
    assert [len(r["messages"]) for r in server.requests] == [2, 4, 6]


def test_summarise_asks_the_model_and_sends_the_summary_in_their_place():
    def answer(body):
        if "tools" not in body:  # the summary request offers no tools
            return {"role": "assistant", "content": "items 1 to 3 are fine"}
        return script.pop(0)

    script = [*_looks(5), reply("all fine")]
    with ChatServer(answer) as server:
        result = _loop(server, ContextLimit(60, "summarise")).run("check the items")
    summaries = [r for r in server.requests if "tools" not in r]
    assert summaries and "call_1" in summaries[0]["messages"][1]["content"]
    later = server.requests[server.requests.index(summaries[0]) + 1]["messages"]
    assert later[1] == {"role": "user", "content": "check the items"}
    assert later[2] == {"role": "system", "content": "Summary of the conversation so far: items 1 to 3 are fine"}
    assert result.reason == "verified_success"
    assert any(e.kind == "model" and "tools" not in e.identity for e in result.journal)


def test_a_summarised_run_replays_from_its_journal_calling_nothing():
    def answer(body):
        return {"role": "assistant", "content": "so far fine"} if "tools" not in body else script.pop(0)

    script = [*_looks(5), reply("all fine")]
    with ChatServer(answer) as server:
        recorded = _loop(server, ContextLimit(60, "summarise")).run("check the items")
    with ChatServer([]) as nobody:
        replayed = _loop(nobody, ContextLimit(60, "summarise")).replay(recorded.journal)
    assert nobody.requests == [] and replayed.answer == "all fine"


def test_arun_keeps_the_limit_too():
    with ChatServer([*_looks(5), reply("all fine")]) as server:
        result = asyncio.run(_loop(server, ContextLimit(60)).arun("check the items"))
    assert result.answer == "all fine" and all(_per_message(r) <= 60 for r in server.requests)


@pytest.mark.parametrize(("tokens", "strategy", "named"), [(0, "trim", "tokens"), (True, "trim", "tokens"),
                                                          (100, "drop", "strategy")])
def test_a_bad_limit_is_refused_naming_what_is_wrong(tokens, strategy, named):
    with pytest.raises(ValueError, match=named):
        ContextLimit(tokens, strategy)


# --- what is really sent is what is sized (no count_tokens: the estimate) ---------------------


def _estimated_loop(server, context, system="You check items.", max_steps=12):
    policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0),
                        system=system, context=context)
    return AgentLoop([look], policy, lambda o: isinstance(o.payload, Finish), max_steps=max_steps)


def _sent_size(request):
    from forge.models.compaction import size_of

    return size_of(request, None)


@pytest.mark.parametrize("limit", [340, 380, 420])
def test_a_trimmed_request_with_its_note_is_within_the_limit_as_estimated(limit):
    with ChatServer([*_looks(8), reply("all fine")]) as server:
        result = _estimated_loop(server, ContextLimit(limit)).run("check the items")
    assert result.reason == "verified_success"
    assert [_sent_size(r) for r in server.requests if _sent_size(r) > limit] == []


@pytest.mark.parametrize("limit", [340, 380])
def test_a_summarised_request_with_its_summary_is_within_the_limit_as_estimated(limit):
    long_summary = "items so far: " + ", ".join(f"item {n} is fine and was looked at" for n in range(1, 9))

    def answer(body):
        return {"role": "assistant", "content": long_summary} if "tools" not in body else script.pop(0)

    script = [*_looks(8), reply("all fine")]
    with ChatServer(answer) as server:
        result = _estimated_loop(server, ContextLimit(limit, "summarise")).run("check the items")
    assert result.reason == "verified_success"
    assert [_sent_size(r) for r in server.requests if "tools" in r and _sent_size(r) > limit] == []


def test_a_limit_nothing_can_be_left_out_to_meet_is_an_error_and_nothing_is_sent():
    from forge.models.compaction import ContextOverflow

    with ChatServer([reply("never sent")]) as server:
        result = _estimated_loop(server, ContextLimit(10)).run("check the items")
    assert result.reason == "fatal_error" and isinstance(result.error, ContextOverflow)
    assert server.requests == [] and "over the context limit of 10" in result.summary


def test_the_task_is_sent_with_every_request_however_much_is_left_out():
    with ChatServer([*_looks(8), reply("all fine")]) as server:
        _estimated_loop(server, ContextLimit(340)).run("check the items")
    assert len(server.requests[-1]["messages"]) < 2 + 2 * 8  # something was left out
    assert all(r["messages"][1] == {"role": "user", "content": "check the items"} for r in server.requests)


def test_without_keep_task_the_task_may_be_left_out_too():
    with ChatServer([*_looks(8), reply("all fine")]) as server:
        _estimated_loop(server, ContextLimit(340, keep_task=False)).run("check the items")
    last = server.requests[-1]["messages"]
    assert all(m.get("content") != "check the items" for m in last)


def test_a_reply_with_two_calls_is_never_sent_apart_from_either_result():
    pairs = [reply(None, (f"call_{n}a", "look", {"n": n}), (f"call_{n}b", "look", {"n": n + 100}))
             for n in range(1, 7)]
    with ChatServer([*pairs, reply("all fine")]) as server:
        result = _estimated_loop(server, ContextLimit(420), max_steps=20).run("check the items")
    assert result.reason == "verified_success"
    for request in server.requests:
        messages = request["messages"]
        called = {c["id"] for m in messages for c in m.get("tool_calls") or ()}
        answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert called == answered  # every call sent with its result, every result with its call
    assert any(len(r["messages"]) < 2 + 3 * 6 for r in server.requests[-2:])  # something was left out


def test_keep_task_must_be_a_bool():
    with pytest.raises(ValueError, match="keep_task"):
        ContextLimit(100, keep_task="yes")


def test_a_context_overflow_says_how_far_over_what_is_always_sent_and_the_two_ways_out():
    from forge.models.compaction import ContextOverflow

    said = str(ContextOverflow(12_345, 8_000))
    assert said == ("the request is 12,345 tokens, over the context limit of 8,000 even after leaving out everything "
                    "that may be left out (the system prompt, the task and the latest exchange are always sent): "
                    "raise ContextLimit(tokens=...), or shorten what is always sent")


def test_a_summary_request_asks_the_model_alone_with_the_left_out_messages_as_json_text():
    from forge.models.compaction import summary_request

    left_out = [{"role": "user", "content": "the café's notes", "_usage": {"total_tokens": 9}},
                {"role": "user", "content": "an earlier summary", COMPACTED: True},
                {"role": "assistant", "content": "read them"}]
    request = summary_request("small-model", left_out, {"temperature": 0})
    assert set(request) == {"model", "messages", "temperature"}  # no tools: the model only summarises
    assert (request["model"], request["temperature"]) == ("small-model", 0)
    system, user = request["messages"]
    assert system == {"role": "system", "content": "Summarise this earlier part of a conversation for yourself, to go "
                      "on from it: keep every fact, value, decision and open question; leave out pleasantries. "
                      "Answer with the summary only."}  # what the model is told to do is the summary's contract
    assert user == {"role": "user", "content": '[{"role": "user", "content": "the café\'s notes"}, '
                                               '{"role": "assistant", "content": "read them"}]'}
