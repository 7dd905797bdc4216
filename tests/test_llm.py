"""ChatPolicy over loopback: the real openai client against a scripted chat-completions
endpoint; the tests read what the client sent."""

import asyncio

import pytest

openai = pytest.importorskip("openai", reason="the llm extra is a test dependency: python3 tasks.py test installs it")

from chat_server import ChatServer, reply  # noqa: E402

from forge import AgentLoop, Finish, tool  # noqa: E402
from forge.models.chat import ChatPolicy, ModelError  # noqa: E402

NOTES = {"todo.md": "buy milk"}


@tool
def read_note(path: str) -> str:
    """Read a note by its path."""
    return NOTES[path]


@tool(side_effect=True)
def save(path: str, text: str, copies: int = 1) -> int:
    """Save text to a path."""
    return len(text) * copies


def _loop(server, verify=lambda o, state: isinstance(o.payload, Finish), **options):
    policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="test"),
                        async_client=openai.AsyncOpenAI(base_url=server.url, api_key="test"),
                        system="You keep notes.", options={"temperature": 0})
    return AgentLoop([read_note, save], policy, verify, **options)


def test_the_first_request_offers_the_tools_with_their_schemas():
    with ChatServer([reply("nothing to do")]) as server:
        result = _loop(server).run("say hi")
    (request,) = server.requests
    assert (request["model"], request["temperature"]) == ("test-model", 0)
    assert request["messages"] == [{"role": "system", "content": "You keep notes."},
                                   {"role": "user", "content": "say hi"}]
    offered = {t["function"]["name"]: t["function"] for t in request["tools"]}
    assert offered["read_note"]["description"] == "Read a note by its path."
    assert offered["read_note"]["parameters"] == read_note.schema
    assert offered["save"]["parameters"]["properties"]["copies"]["type"] == "integer"
    assert result.reason == "verified_success" and result.state.observations[0].payload == Finish("nothing to do")


def test_each_tool_call_is_a_step_and_its_observation_goes_back_paired_with_its_id():
    with ChatServer([reply(None, ("call_1", "read_note", {"path": "todo.md"})),
                     reply("It says: buy milk")]) as server:
        result = _loop(server).run("what does todo.md say?")
    assert [o.tool_name for o in result.state.observations] == ["read_note", "finish"]
    second = server.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_note", "arguments": '{"path": "todo.md"}'}}]}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "buy milk"}
    assert result.reason == "verified_success"


def test_several_calls_in_one_response_run_in_order_one_step_each():
    with ChatServer([reply(None, ("a", "read_note", {"path": "todo.md"}), ("b", "save", {"path": "x", "text": "hi"})),
                     reply("done")]) as server:
        result = _loop(server).run("copy")
    assert [o.tool_name for o in result.state.observations] == ["read_note", "save", "finish"]
    assert len(server.requests) == 2  # the model was not asked between the two calls
    tools = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [("a", "buy milk"), ("b", "2")]


def test_malformed_calls_are_told_to_the_model_as_errors_never_a_crash():
    with ChatServer([
        reply(None, ("u", "read_notes", {"path": "todo.md"})),   # no such tool
        reply(None, ("j", "read_note", "{path: todo.md")),      # not JSON
        reply(None, ("t", "save", {"path": "x", "text": "hi", "copies": "two"})),  # wrong type
        reply("I give up"),
    ]) as server:
        result = _loop(server).run("copy")
    told = {m["tool_call_id"]: m["content"] for r in server.requests for m in r["messages"] if m["role"] == "tool"}
    assert told["u"].startswith("error: there is no tool named 'read_notes'; the tools are ask_user, read_note, save")
    assert told["j"].startswith("error: the arguments are not valid JSON")
    assert "copies: 'two' is not of type 'integer'" in told["t"] and told["t"].startswith("error: ")
    assert [o.tool_name for o in result.state.observations] == ["save", "finish"]  # only the mistyped call was a step
    assert result.state.observations[0].status == "retryable_error"
    assert result.reason == "verified_success"


def test_a_final_answer_that_verify_rejects_is_told_and_a_later_one_accepted():
    with ChatServer([reply("milk"), reply("buy milk")]) as server:
        result = _loop(server, verify=lambda o: o.payload == Finish("buy milk")).run("what is on the list?")
    assert result.reason == "verified_success" and result.steps == 2
    assert server.requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": "milk"},
        {"role": "user", "content": "That answer was not accepted. Keep working on the goal."}]


def test_the_history_is_the_runs_state_and_is_written_to_the_trace():
    with ChatServer([reply(None, ("c", "read_note", {"path": "todo.md"})), reply("buy milk")]) as server:
        result = _loop(server).run("read")
    roles = [m["role"] for m in result.state.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    traced = [m["role"] for r in result.trace if r.source == "select" for m in r.detail.get("messages", [])]
    assert traced == roles


def test_arun_uses_the_async_client():
    with ChatServer([reply(None, ("c", "read_note", {"path": "todo.md"})), reply("buy milk")]) as server:
        nowhere = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="t", max_retries=0)  # must not be used
        policy = ChatPolicy("m", client=nowhere, async_client=openai.AsyncOpenAI(base_url=server.url, api_key="t"))
        result = asyncio.run(AgentLoop([read_note], policy, lambda o: isinstance(o.payload, Finish)).arun("read"))
    assert result.reason == "verified_success" and len(server.requests) == 2


def test_a_conversation_carries_the_history_into_the_next_turn():
    with ChatServer([reply("hello"), reply("you said hi")]) as server:
        loop = _loop(server)
        first = loop.run("hi")
        second = loop.run("what did I say?", state=first.state)
    assert second.reason == "verified_success"
    assert [(m["role"], m["content"]) for m in server.requests[1]["messages"]] == [
        ("system", "You keep notes."), ("user", "hi"), ("assistant", "hello"), ("user", "what did I say?")]


def test_a_model_that_only_makes_unusable_calls_ends_the_run_clearly():
    with ChatServer(lambda body: reply(None, ("x", "nope", {}))) as server:
        result = _loop(server).run("goal")
    assert result.reason == "fatal_error" and isinstance(result.error, ModelError)
    assert len(server.requests) == 4  # max_repairs=3: asked four times in all


def test_tools_are_offered_strict_when_asked():
    with ChatServer([reply("ok")]) as server:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="t"), strict=True)
        AgentLoop([read_note], policy, lambda o: True).run("goal")
    assert server.requests[0]["tools"][0]["function"]["strict"] is True


def _indexing_model(body):
    """Plays the model for the demo's index goal, deciding from the messages it is sent."""
    import json as _json

    from forge.demo.planner import render_index

    messages = body["messages"]
    calls = {c["id"]: c["function"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or ()}
    results = [(calls[m["tool_call_id"]], m["content"]) for m in messages if m["role"] == "tool"]
    done = {f["name"]: [] for f, _ in results}
    for function, content in results:
        if not content.startswith("error"):
            done[function["name"]].append(_json.loads(content))
    if "list_notes" not in done:
        return reply(None, ("l", "list_notes", {"folder": "notes"}))
    notes = done["list_notes"][0]
    texts = {r["path"]: r["text"] for r in done.get("read_note", [])}
    if len(texts) < len(notes):  # read them all in one response: several calls, one step each
        return reply(None, *((f"r{i}", "read_note", {"path": p}) for i, p in enumerate(notes)))
    facts = {r["path"]: r for r in done.get("analyse", [])}
    missing = [p for p in notes if p not in facts]
    if missing:
        return reply(None, (f"a{len(messages)}", "analyse", {"path": missing[0], "text": texts[missing[0]]}))
    if "write_file" not in done:
        return reply(None, ("w", "write_file", {"path": "INDEX.md", "text": render_index(facts, "notes")}))
    return reply("The index is written.")


def test_forge_demo_llm_runs_the_index_scenario_with_a_chat_policy(tmp_path, monkeypatch, capsys):
    from forge.cli import main

    with ChatServer(_indexing_model) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code = main(["demo", "--llm", "--model", "scripted", "--workspace", str(tmp_path / "demo")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "policy: ChatPolicy(model='scripted'" in out and "stopped: verified_success" in out
    assert all(r["model"] == "scripted" for r in server.requests)
    assert "analyse: ok after 3 attempts" in out  # the flaky service, retried by the loop, unseen by the model


def test_forge_demo_llm_without_an_endpoint_says_what_to_set(monkeypatch, capsys):
    from forge.cli import main

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["demo", "--llm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "set OPENAI_BASE_URL and OPENAI_API_KEY" in err[0]


def test_the_debugger_shows_the_conversation_live_and_replayed(tmp_path):
    from forge.debug.repl import DebugShell
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition

    with ChatServer([reply(None, ("c", "read_note", {"path": "todo.md"})), reply("buy milk")]) as server:
        loop = _loop(server)
        session = loop.debug("read")
        session.continue_()
    assert [m["role"] for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    replay = ReplaySession(load_definition(), session.trace)
    replay.continue_()
    assert replay.messages == session.messages
    assert [o.tool_name for o in replay.observations] == ["read_note", "finish"]
    lines = []
    shell = DebugShell(replay)
    shell.say = lines.append
    shell.onecmd("messages")
    assert lines[2] == 'assistant:  → read_note({"path": "todo.md"})'
    assert lines[3] == "tool: [c] buy milk"


def _unreachable_port() -> int:
    import socket

    with socket.socket() as probe:  # bound, never listening: a connection to it is refused at once
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_endpoint_that_cannot_be_reached_is_named_in_the_error_and_keeps_its_type():
    url = f"http://127.0.0.1:{_unreachable_port()}/v1"
    model = ChatPolicy("m", client=openai.OpenAI(base_url=url, api_key="k", max_retries=0))
    result = AgentLoop([read_note], model, lambda o: True).run("weather")
    assert result.reason == "fatal_error" and isinstance(result.error, openai.APIConnectionError)
    assert f"(the model endpoint at {url}/)" in str(result.error) and url in result.summary


def test_an_endpoint_that_cannot_be_reached_is_named_under_arun_too():
    url = f"http://127.0.0.1:{_unreachable_port()}/v1"
    model = ChatPolicy("m", async_client=openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0))
    result = asyncio.run(AgentLoop([read_note], model, lambda o: True).arun("weather"))
    assert isinstance(result.error, openai.APIConnectionError) and url in str(result.error)
