"""An MCP server that asks in the middle of a tool call (elicitation) asks the run: a durable
run waits for a person's answer (parking, surviving a worker's restart) and the server gets
it; a run in memory answers from `elicit=` or hears a ToolError naming the question; what
the server says of its progress is the run's stream's. Against a real server
(tests/mcp_asking_server.py), asked in place (protocol 2025-11-25) and by round trips
(2026-07-28)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forge import AgentLoop, Finish, Intent
from forge.events import ToolProgress
from forge.mcp import MCPServer
from forge.records.answers import AnswerRefused, Waiting, form_reply

SERVER = str(Path(__file__).with_name("mcp_asking_server.py"))
PROTOCOLS = ["legacy", "auto"]


def _ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _server(ledger: Path, protocol: str = "auto", **options) -> MCPServer:
    return MCPServer.stdio(sys.executable, SERVER, str(ledger), name="bank", timeout=30, protocol=protocol, **options)


def _transferring(goal, state):
    if not state.observations:
        return Intent.call("transfer", to="bob", amount=20)
    return Finish(state.observations[-1].payload)


def _finished(observation):
    return observation.tool_name == "finish"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_elicit_answers_a_servers_question_and_the_server_acts_on_it(tmp_path, protocol):
    asked: list[Waiting] = []
    with _server(tmp_path / "ledger", protocol, elicit=lambda question: asked.append(question) or "yes") as bank:
        result = AgentLoop(bank.tools(), _transferring, _finished).run("pay bob")
    assert result.outcome == "success" and result.answer == {"result": "transferred 20 to bob"}
    (question,) = asked
    assert (question.state, question.server, question.tool, question.prompt) == \
        ("input_required", "bank", "transfer", "Transfer 20 to bob?")
    assert question.contract["schema"]["properties"] == {"confirm": {"title": "Confirm", "type": "boolean"}}
    assert [line for line in _ledger(tmp_path / "ledger") if "did" in line] == \
        [{"did": "transfer", "to": "bob", "amount": 20}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_elicit_declining_sends_the_server_a_decline(tmp_path, protocol):
    with _server(tmp_path / "ledger", protocol, elicit=lambda question: None) as bank:
        assert bank.call("transfer", {"to": "bob", "amount": 20}) == {"result": "not transferred (decline)"}
    assert not [line for line in _ledger(tmp_path / "ledger") if "did" in line]


def test_a_question_nobody_answers_is_a_tool_error_naming_it_and_nothing_is_done(tmp_path):
    with _server(tmp_path / "ledger") as bank:
        result = AgentLoop(bank.tools(), _transferring, _finished, max_steps=1).run("pay bob")
    (observation,) = result.state.observations
    assert observation.status == "retryable_error"
    assert "MCP server 'bank' asks, in its transfer: Transfer 20 to bob?" in str(observation.payload)
    assert "nobody answers a run in memory" in str(observation.payload)
    assert not [line for line in _ledger(tmp_path / "ledger") if "did" in line]


def test_a_form_of_several_fields_takes_a_json_object_typed_as_the_form_says(tmp_path):
    with _server(tmp_path / "ledger", elicit=lambda question: '{"city": "Oslo", "copies": "3"}') as bank:
        assert bank.call("ship", {"book": "Dune"}) == {"result": "shipped 3 Dune to Oslo"}


def test_an_elicit_reply_that_does_not_fit_the_form_is_a_tool_error_naming_the_field(tmp_path):
    with _server(tmp_path / "ledger", elicit=lambda question: {"city": "Oslo", "copies": "many"}) as bank:
        result = AgentLoop(bank.tools(include=["ship"]), lambda goal, state: Intent.call("ship", book="Dune")
                           if not state.observations else Finish("x"), _finished, max_steps=1).run("ship")
    assert "'copies' takes a integer" in str(result.state.observations[0].payload)
    assert not _ledger(tmp_path / "ledger")


@pytest.mark.parametrize(("reply", "said"), [
    ("Oslo", "asks for 2 fields (city: string, copies: integer)"),
    ('{"city": "Oslo"}', "leaves out the form's required 'copies'"),
    ('{"city": "Oslo", "copies": 1, "gift": true}', "no field 'gift'"),
    ('{"city": "Oslo", "copies": true}', "'copies' takes a integer"),
    ('{"city": "Oslo",', "the reply to the form is not JSON"),
])
def test_a_reply_that_is_not_the_forms_fields_is_refused_naming_what_is_wrong(reply, said):
    question = Waiting("input_required", "ship", server="bank", contract={"schema": {
        "properties": {"city": {"type": "string"}, "copies": {"type": "integer"}}, "required": ["city", "copies"]}})
    with pytest.raises(AnswerRefused, match=said.replace("(", r"\(").replace(")", r"\)")):
        form_reply(question, reply)


def test_a_one_field_form_takes_the_value_alone_and_a_choice_must_be_one_of_its_choices():
    one = Waiting("input_required", "pick", server="s", contract={"schema": {"properties": {
        "color": {"type": "string", "enum": ["red", "blue"]}}}})
    assert form_reply(one, " blue ") == {"color": "blue"}
    with pytest.raises(AnswerRefused, match="one of red, blue"):
        form_reply(one, "green")


def test_a_servers_question_is_answered_with_text_or_declined_by_its_calls_fingerprint():
    question = Waiting("input_required", "transfer", {"to": "bob"}, "fp1", prompt="Sure?", server="bank",
                       contract={"schema": {"properties": {"confirm": {"type": "boolean"}}}})
    assert question.answers == ("text", "reject")
    assert question.asks == "MCP server 'bank' asks, in its transfer: Sure?"
    assert "confirm: boolean" in question.question and "Answer.reject(fp1)" in question.question
    assert Waiting.from_json(question.to_json()) == question
    assert "server" not in Waiting("input_required", prompt="Sure?").identity  # journals stored before keep theirs


def test_the_servers_progress_is_streamed_as_tool_progress_events(tmp_path):
    with _server(tmp_path / "ledger") as bank:
        loop = AgentLoop(bank.tools(include=["count"]), lambda goal, state: Intent.call("count", to=3)
                         if not state.observations else Finish(state.observations[-1].payload), _finished)
        told = [event for event in loop.stream("count") if isinstance(event, ToolProgress)]
    assert [(e.tool, e.progress, e.total, e.message) for e in told] == \
        [("count", 1, 3, "counted 1"), ("count", 2, 3, "counted 2"), ("count", 3, 3, "counted 3")]
    assert told[0].to_json() == {"type": "tool_progress", "tool": "count", "progress": 1, "total": 3,
                                 "message": "counted 1"}


def test_under_arun_elicit_answers_and_progress_is_told(tmp_path):
    import asyncio

    async def both(bank):
        result = await AgentLoop(bank.tools(), _transferring, _finished).arun("pay bob")
        told = [event async for event in AgentLoop(
            bank.tools(include=["count"]), lambda goal, state: Intent.call("count", to=2)
            if not state.observations else Finish("done"), _finished).astream("count")
            if isinstance(event, ToolProgress)]
        return result, told

    with _server(tmp_path / "ledger", elicit=lambda question: "yes") as bank:
        result, told = asyncio.run(both(bank))
    assert result.answer == {"result": "transferred 20 to bob"}
    assert [event.progress for event in told] == [1, 2]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_durable_run_waits_for_a_persons_answer_to_the_servers_question(tmp_path, make, protocol):
    from forge.durable import Answer

    ledger = tmp_path / "ledger"
    with _server(ledger, protocol) as bank:
        durable = make(AgentLoop(bank.tools(), _transferring, _finished))
        waiting = durable.run("pay bob", run_id=f"mcp-ask-{protocol}")
        assert (waiting.status, waiting.waiting.server, waiting.waiting.prompt) == \
            ("waiting", "bank", "Transfer 20 to bob?")
        assert not [line for line in _ledger(ledger) if "did" in line]
        with pytest.raises(AnswerRefused, match="takes a boolean"):
            durable.resume(waiting.run_id, Answer.text("perhaps"))
        done = durable.resume(waiting.run_id, Answer.text("yes"))
    assert (done.status, done.reason, done.answer) == ("finished", "verified_success", {"result": "transferred 20 to bob"})
    assert [line for line in _ledger(ledger) if "did" in line] == [{"did": "transfer", "to": "bob", "amount": 20}]


def test_a_durable_run_whose_question_is_declined_tells_the_server_so(tmp_path, make):
    from forge.durable import Answer

    with _server(tmp_path / "ledger") as bank:
        durable = make(AgentLoop(bank.tools(), _transferring, _finished))
        waiting = durable.run("pay bob", run_id="mcp-decline")
        done = durable.resume(waiting.run_id, Answer.reject(waiting.waiting.fingerprint))
    assert done.answer == {"result": "not transferred (decline)"}
    assert not [line for line in _ledger(tmp_path / "ledger") if "did" in line]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_servers_question_is_answered_after_a_worker_restart_and_the_server_acts_once(tmp_path, monkeypatch,
                                                                                         protocol):
    """Issue 52's done-when for MCP: the run waits on the server's question, parked; its
    worker is killed (SIGKILL); the person answers from the command line; a new worker
    takes the run on, makes the call again, and the server, asking again, gets the answer
    at once: the payment is made once."""
    import signal
    import subprocess

    from test_worker_stop import eventually, start_worker, stop

    from forge.durable.runs import StoredRuns

    db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
    loops = str(Path(__file__).with_name("mcp_worker_loops.py"))
    monkeypatch.setenv("FORGE_TEST_MCP_PROTOCOL", protocol)
    with StoredRuns(db, create=True) as runs:
        runs.submit("banker", "pay bob", "bank-1")
        first = start_worker(db, ledger, loops)
        try:
            asked = runs.wait("bank-1", timeout=120)
            eventually(lambda: str(runs.client.list_workflows(workflow_ids=["bank-1"], load_input=False)[0].status)
                       == "SUCCESS")  # parked: the run waits holding no worker
        finally:
            first.kill()
            first.wait(30)
        assert (asked.status, asked.waiting.server, asked.waiting.prompt) == ("waiting", "bank", "Transfer 20 to bob?")
        assert not [line for line in _ledger(ledger) if "did" in line]
        resumed = subprocess.run([sys.executable, "-m", "forge", "runs", "resume", "bank-1", "--db", db,
                                  "--text", "yes", "--wait", "0"], capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        second = start_worker(db, ledger, loops)
        try:
            done = runs.wait("bank-1", timeout=120, answers=1)
        finally:
            stop(second, signal.SIGTERM)
    assert (done.status, done.reason, done.answer) == ("finished", "verified_success", {"result": "transferred 20 to bob"})
    lines = _ledger(ledger)
    assert [line for line in lines if line.get("answered") == "accept"] == \
        [{"answered": "accept", "data": {"confirm": True}}]  # (asked in place, the parked call was told "cancel")
    assert [line for line in lines if "did" in line] == [{"did": "transfer", "to": "bob", "amount": 20}]


def _model(*replies):
    from forge.chat_server import ChatServer

    return ChatServer(list(replies))


def _summarizing(server, model):
    import openai

    from forge.models.chat import ChatPolicy

    policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=model.url, api_key="k", max_retries=0),
                        async_client=openai.AsyncOpenAI(base_url=model.url, api_key="k", max_retries=0))
    return AgentLoop(server.tools(include=["summarize"]), policy, lambda o: isinstance(o.payload, Finish))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_servers_sampling_is_made_by_the_runs_model_and_journaled_before_its_call(tmp_path, protocol):
    from forge.chat_server import reply

    with _model(reply(None, ("c1", "summarize", {"text": "a long story"})), reply("It is short."),
                reply("Done.")) as model, _server(tmp_path / "ledger", protocol) as bank:
        result = _summarizing(bank, model).run("summarize a long story")
    assert result.reason == "verified_success"
    assert model.requests[1]["messages"] == [{"role": "system", "content": "Be brief."},
                                             {"role": "user", "content": "Summarize: a long story"}]
    assert model.requests[1]["max_tokens"] == 50 and "tools" not in model.requests[1]
    kinds = [(entry.kind, entry.value if entry.kind == "tool" else None) for entry in result.journal]
    at = kinds.index(("sampling", None))
    assert kinds[at + 1] == ("tool", {"result": "summary: It is short."})
    assert {"sampled": "It is short.", "model": "test-model"} in _ledger(tmp_path / "ledger")
    assert len(result.usage.calls) == 3  # the two decisions and the sample: the run's model made all three


def test_a_replay_answers_the_sampling_with_its_call_and_asks_no_model(tmp_path):
    from forge.chat_server import reply

    with _model(reply(None, ("c1", "summarize", {"text": "a long story"})), reply("It is short."),
                reply("Done.")) as model, _server(tmp_path / "ledger") as bank:
        loop = _summarizing(bank, model)
        result = loop.run("summarize a long story")
        asked = len(model.requests)
        again = loop.replay(result.journal, goal="summarize a long story")
    assert len(model.requests) == asked
    assert list(again.journal) == list(result.journal)


def test_sampling_under_arun_is_made_by_the_runs_model(tmp_path):
    import asyncio

    from forge.chat_server import reply

    with _model(reply(None, ("c1", "summarize", {"text": "a long story"})), reply("It is short."),
                reply("Done.")) as model, _server(tmp_path / "ledger") as bank:
        result = asyncio.run(_summarizing(bank, model).arun("summarize a long story"))
    assert [entry.kind for entry in result.journal].count("sampling") == 1
    assert result.state.observations[0].payload == {"result": "summary: It is short."}


def test_sampling_for_a_run_whose_policy_asks_no_model_is_refused_naming_why(tmp_path):
    with _server(tmp_path / "ledger") as bank:
        result = AgentLoop(bank.tools(include=["summarize"]), lambda goal, state: Intent.call(
            "summarize", text="x") if not state.observations else Finish("x"), _finished, max_steps=1).run("go")
    assert "policy asks no model (a Python policy)" in str(result.state.observations[0].payload)


@pytest.mark.slow
def test_a_sample_stored_before_a_crash_answers_the_call_made_again_and_the_model_is_asked_once(tmp_path,
                                                                                                monkeypatch):
    """The worker dies after the server's sampling was made and stored, in the middle of the
    call; the next worker makes the call again and the server's sampling is answered from
    the store: the model is not asked again."""
    import signal

    from test_worker_stop import eventually, start_worker, stop

    from forge.chat_server import reply
    from forge.durable.runs import StoredRuns

    db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
    loops = str(Path(__file__).with_name("mcp_worker_loops.py"))
    with _model(reply(None, ("c1", "summarize", {"text": "slowly told"})), reply("It is short."),
                reply("Done.")) as model, StoredRuns(db, create=True) as runs:
        monkeypatch.setenv("FORGE_TEST_MODEL_URL", model.url)
        runs.submit("summarizer", "summarize it", "sum-1")
        first = start_worker(db, ledger, loops)
        try:
            eventually(lambda: any("sampled" in line for line in _ledger(ledger)))
        finally:
            first.kill()
            first.wait(30)
        assert len(model.requests) == 2  # the decision, the server's sample
        second = start_worker(db, ledger, loops)
        try:
            done = runs.wait("sum-1", timeout=180)
        finally:
            stop(second, signal.SIGTERM)
    assert (done.status, done.reason) == ("finished", "verified_success")
    assert len(model.requests) == 3  # and the last decision: neither the first nor the sample asked again
    assert [line["sampled"] for line in _ledger(ledger) if "sampled" in line] == ["It is short.", "It is short."]


def test_a_served_runs_server_question_is_asked_of_the_served_client_in_place():
    from eliciting_client import call_answering
    from test_serve import served

    reference = f"{Path(__file__).with_name('served_mcp_loops.py')}:banking"
    result, asked = call_answering(served(reference), "banking", {"goal": "pay bob"}, [("accept", {"reply": "yes"})],
                                   "legacy")
    assert not result.is_error and result.content[0].text == "{'result': 'transferred 20 to bob'}"
    assert asked[0].message == "MCP server 'bank' asks, in its transfer: Transfer 20 to bob?"


def test_a_served_runs_server_question_cannot_go_by_round_trips_and_the_call_says_why():
    from eliciting_client import call_answering
    from test_serve import served

    reference = f"{Path(__file__).with_name('served_mcp_loops.py')}:banking"
    result, _ = call_answering(served(reference), "banking", {"goal": "pay bob"}, [("accept", {"reply": "yes"})])
    assert result.is_error and "asks by round trips" in result.content[0].text


def test_a_sampling_request_of_anything_but_text_is_refused_naming_what_it_has():
    from mcp_types import CreateMessageRequestParams, ImageContent, SamplingMessage

    from forge.errors import UsageError
    from forge.mcp.asking import sampling_chat

    params = CreateMessageRequestParams(messages=[SamplingMessage(role="user", content=ImageContent(
        type="image", data="AAAA", mime_type="image/png"))], max_tokens=5)
    with pytest.raises(UsageError, match="forge samples text; this request has image content"):
        sampling_chat(params, "m")


def test_an_asynchronous_durable_run_waits_for_the_servers_question_too(tmp_path, make):
    """A durable loop with an `async def` part runs under arun: the server's question is
    asked from the awaited call, and the answer reaches the server as it does under run."""
    from forge.durable import Answer

    async def finished(observation):
        return observation.tool_name == "finish"

    import asyncio

    async def asked_and_answered(durable):
        waiting = await durable.arun("pay bob", run_id="mcp-async")
        assert (waiting.status, waiting.waiting.server) == ("waiting", "bank")
        return await durable.aresume(waiting.run_id, Answer.text('{"confirm": true}'))

    with _server(tmp_path / "ledger") as bank:
        done = asyncio.run(asked_and_answered(make(AgentLoop(bank.tools(), _transferring, finished))))
    assert (done.reason, done.answer) == ("verified_success", {"result": "transferred 20 to bob"})
    assert [line for line in _ledger(tmp_path / "ledger") if "did" in line] == \
        [{"did": "transfer", "to": "bob", "amount": 20}]


def test_a_blocking_call_from_a_thread_of_an_asynchronous_durable_run_is_refused_naming_why(tmp_path, make):
    """A plain tool of the user's that calls the server itself runs in a worker thread under
    arun: the durable run's wait can only be awaited on its loop, so the call says so
    instead of hanging or half-answering, and the server does nothing."""
    import asyncio

    from forge import tool as made_tool

    async def finished(observation):
        return observation.tool_name == "finish"

    with _server(tmp_path / "ledger") as bank:
        @made_tool(side_effect=True)
        def transfer(to: str, amount: int) -> str:
            """Transfer through the bank, blocking."""
            return str(bank.call("transfer", {"to": to, "amount": amount}))

        ended = asyncio.run(make(AgentLoop([transfer], _transferring, finished)).arun("pay bob", run_id="mcp-thread"))
    assert ended.reason == "fatal_error" and "blocks a thread of its own" in str(ended.error)
    assert not [line for line in _ledger(tmp_path / "ledger") if "did" in line]


def test_under_arun_elicit_may_be_a_coroutine_function_and_under_run_it_is_refused_naming_why(tmp_path):
    import asyncio

    async def confirming(question):
        await asyncio.sleep(0)
        return {"confirm": True}

    with _server(tmp_path / "ledger", elicit=confirming) as bank:
        awaited = asyncio.run(AgentLoop(bank.tools(), _transferring, _finished).arun("pay bob"))
        blocked = AgentLoop(bank.tools(), _transferring, _finished, max_steps=1).run("pay bob")
    assert awaited.answer == {"result": "transferred 20 to bob"}
    assert "elicit= is a coroutine function" in str(blocked.error or blocked.state.observations[0].payload)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_over_streamable_http_a_servers_question_and_sample_reach_the_run(tmp_path, protocol):
    """The same over a real HTTP server on 127.0.0.1: an in-place request comes on the
    call's own stream, a round trip in the call's answer."""
    import socket
    import subprocess
    import time

    from forge.chat_server import reply

    ledger = tmp_path / "ledger"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, SERVER, str(ledger), "http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP MCP server did not start"
                time.sleep(0.1)
        with MCPServer.http(f"http://127.0.0.1:{port}/mcp", name="bank", timeout=30, protocol=protocol,
                            elicit=lambda question: "yes") as bank:
            paid = AgentLoop(bank.tools(include=["transfer"]), _transferring, _finished).run("pay bob")
            with _model(reply(None, ("c1", "summarize", {"text": "a long story"})), reply("It is short."),
                        reply("Done.")) as model:
                summed = _summarizing(bank, model).run("summarize a long story")
    finally:
        process.terminate()
        process.wait(10)
    assert paid.answer == {"result": "transferred 20 to bob"}
    assert summed.state.observations[0].payload == {"result": "summary: It is short."}
    assert [line for line in _ledger(ledger) if "did" in line] == [{"did": "transfer", "to": "bob", "amount": 20}]
