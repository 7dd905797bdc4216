"""A2A (issue 52, item 2, in memory): a forge loop served over A2A (`forge.protocols.a2a`) to
`a2a-sdk`'s own client on 127.0.0.1: the card it resolves, a task that completes with the
answer as its artifact (text, or JSON for a typed answer), a question that leaves the task
input-required until the same context's next message replies, a run that fails the task."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass

import pytest

pytest.importorskip("a2a", reason="the a2a extra is a test dependency: python3 tasks.py test installs it")

import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import Role, SendMessageRequest, TaskState
from google.protobuf.json_format import MessageToDict

from forge import AgentLoop, Ask, Finish, Intent, tool
from forge.protocols.a2a import a2a_app, a2a_tool


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"4 degrees in {city}"


def asking(goal, state):
    """Asks which city unless the goal names one ("in CITY"), then looks it up."""
    if state.observations and state.observations[-1].tool_name == "weather":
        return Finish(state.observations[-1].payload)
    if " in " not in f" {goal}" and len(goal.split()) != 1:
        return Ask("Which city?")
    return Intent.call("weather", city=goal.split()[-1])


@pytest.fixture
def served():
    running = []

    def serve(loop):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = f"http://127.0.0.1:{port}/"
        server = uvicorn.Server(uvicorn.Config(a2a_app(loop, url), host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        running.append((server, thread))
        return url

    serve.running = running
    yield serve
    for server, thread in running:
        server.should_exit = True
        thread.join(10)


def send(url, text, task=None):
    """Send `text` (in `task`'s context, when given) with a2a-sdk's client: the task as the
    server left it, and the card the client resolved."""
    updates, card = _sent(url, text, task, streaming=False)
    return updates[-1].task, card


def _sent(url, text, task, streaming):
    """Every update a2a-sdk's client read for `text` sent (in `task`'s context, when given),
    in order, as a stream (A2A's message/stream) or not; and the card it resolved."""
    async def sent():
        import httpx
        from a2a.client.card_resolver import A2ACardResolver

        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, url).get_agent_card()
        client = await create_client(card, ClientConfig(streaming=streaming))
        message = new_text_message(text, role=Role.ROLE_USER)
        if task is not None:
            message.task_id, message.context_id = task.id, task.context_id
        try:
            return [each async for each in client.send_message(SendMessageRequest(message=message))], card
        finally:
            await client.close()
    return asyncio.run(sent())


def test_a_task_is_a_run_whose_answer_is_its_artifact_and_the_card_names_the_loop(served):
    url = served(AgentLoop([weather], asking, lambda o: o.tool_name == "finish"))
    task, card = send(url, "weather in Oslo")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [part.text for part in task.artifacts[0].parts] == ["4 degrees in Oslo"]
    assert card.name == "forge: single-agent tool loop" and list(card.skills[0].tags) == ["weather"]
    assert card.supported_interfaces[0].url == url


def test_a_question_leaves_the_task_input_required_and_the_reply_goes_on_in_its_context(served):
    url = served(AgentLoop([weather], asking, lambda o: o.tool_name == "finish"))
    asked, _ = send(url, "what is the weather?")
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "Which city?"
    done, _ = send(url, "Rome", task=asked)
    assert (done.id, done.status.state) == (asked.id, TaskState.TASK_STATE_COMPLETED)
    assert done.artifacts[0].parts[0].text == "4 degrees in Rome"


def test_a_typed_answer_is_a_json_artifact(served):
    @dataclass
    class Forecast:
        city: str
        degrees: int

    loop = AgentLoop([weather], lambda goal, state: Finish(Forecast("Oslo", 4)), lambda o: True, output=Forecast)
    task, card = send(served(loop), "forecast")
    assert MessageToDict(task.artifacts[0].parts[0])["data"] == {"city": "Oslo", "degrees": 4}
    (extension,) = card.capabilities.extensions
    assert extension.uri == "urn:forge-fsm:answer-schema"
    assert MessageToDict(extension.params)["schema"]["properties"].keys() == {"city", "degrees"}
    assert list(card.skills[0].output_modes) == list(card.default_output_modes) == ["application/json"]


def test_a_run_that_fails_fails_its_task_naming_the_reason(served):
    def broken(goal, state):
        raise RuntimeError("no idea")

    task, _ = send(served(AgentLoop([weather], broken, lambda o: False)), "go")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == "the run ended in fatal_error: RuntimeError: no idea"


@pytest.mark.slow
def test_a_durable_task_waits_for_its_approval_through_a_worker_restart_and_pays_once(served, db, tmp_path,
                                                                                     monkeypatch):
    """Issue 52's done-when for A2A: the task is a durable run (its id the task's) that waits
    for a person's approval, input-required; the worker is killed once the run parked; the
    client's "approve" goes to the task, a new worker takes the run on, the task completes
    with the answer: the payment made once."""
    import signal

    from protocol_workers import LOOPS, payer_on
    from test_worker_stop import eventually, start_worker, stop

    from forge.durable.runs import StoredRuns

    db, ledger = str(db), tmp_path / "ledger"  # this process's runs database (one DBOS per process)
    with payer_on(db, ledger, monkeypatch) as payer, StoredRuns(db) as runs:
        url = served(payer)
        first = start_worker(db, ledger, LOOPS)
        try:
            asked, _ = send(url, "pay bob")
            eventually(lambda: str(runs.client.list_workflows(workflow_ids=[asked.id], load_input=False)[0].status)
                       == "SUCCESS")  # parked: the run waits holding no worker
        finally:
            first.kill()
            first.wait(30)
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert asked.status.message.parts[0].text == 'may it call pay({"to": "bob", "amount": 20})?'
        assert not ledger.exists()
        second = start_worker(db, ledger, LOOPS)
        try:
            done, _ = send(url, "approve", task=asked)
        finally:
            stop(second, signal.SIGTERM)
    assert (done.id, done.status.state) == (asked.id, TaskState.TASK_STATE_COMPLETED)
    assert done.artifacts[0].parts[0].text == "paid bob 20"
    assert ledger.read_text().splitlines() == ["pay bob 20"]


def test_a_forge_loop_calls_an_a2a_agent_as_a_tool_and_its_replay_calls_nothing(served):
    from forge.protocols.a2a import a2a_tool

    url = served(AgentLoop([weather], asking, lambda o: o.tool_name == "finish"))
    remote = a2a_tool(url, "forecaster", side_effect=False)
    assert remote.description.startswith("ask the agent 'forge: single-agent tool loop': ")

    def delegating(goal, state):
        return Finish(state.observations[-1].payload) if state.observations else Intent.call("forecaster", goal=goal)

    caller = AgentLoop([remote], delegating, lambda o: o.tool_name == "finish")
    result = caller.run("weather in Oslo")
    assert result.answer == "4 degrees in Oslo"
    again = caller.replay(result.journal)  # answered from the journal: no task sent
    assert (again.answer, again.trace) == (result.answer, result.trace)


def test_an_a2a_agent_that_asks_is_a_tool_error_the_policy_hears(served):
    from forge.protocols.a2a import a2a_tool

    remote = a2a_tool(served(AgentLoop([weather], asking, lambda o: o.tool_name == "finish")), "forecaster",
                      side_effect=False)

    def delegating(goal, state):
        return Finish(str(state.observations[-1].payload)) if state.observations else \
            Intent.call("forecaster", goal="what is the weather?")

    result = AgentLoop([remote], delegating, lambda o: o.tool_name == "finish").run("go")
    assert result.state.observations[0].status == "retryable_error"
    assert "agent 'forecaster' left the task input-required: Which city?" in str(result.state.observations[0].payload)


def test_no_agent_card_at_the_url_is_refused_naming_it():
    from forge import UsageError
    from forge.protocols.a2a import a2a_tool

    with pytest.raises(UsageError, match=r"no A2A agent card at 'http://127.0.0.1:9/'"):
        a2a_tool("http://127.0.0.1:9/")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["--a2a", "--ag-ui"])
def test_forge_serve_serves_a_loop_over_a2a_or_ag_ui(protocol, tmp_path):
    """`forge serve --a2a MODULE:LOOP` (and `--ag-ui`) in a real process, asked by a client."""
    import http.client
    import json
    import subprocess
    import sys

    (tmp_path / "weather_agent.py").write_text(
        "from forge import AgentLoop, Finish, Intent, tool\n\n"
        "@tool\ndef weather(city: str) -> str:\n    '''Today's weather in a city.'''\n    return f'rain in {city}'\n\n"
        "agent = AgentLoop([weather], lambda goal, state: Finish(state.observations[-1].payload) if state.observations"
        " else Intent.call('weather', city=goal), lambda o: o.tool_name == 'finish')\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "forge", "serve", protocol, "--port", str(port),
                               str(tmp_path / "weather_agent.py") + ":agent"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        said = server.stdout.readline()
        assert f"at http://127.0.0.1:{port}/" in said, said + server.stderr.read()
        for _ in range(200):  # the line is said before uvicorn binds: wait for the port
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/"
        if protocol == "--a2a":
            task, card = send(url, "Oslo")
            assert task.artifacts[0].parts[0].text == "rain in Oslo" and list(card.skills[0].tags) == ["weather"]
        else:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            body = {"threadId": "t", "runId": "r", "state": None, "tools": [], "context": [], "forwardedProps": None,
                    "messages": [{"id": "m", "role": "user", "content": "Oslo"}]}
            connection.request("POST", "/", json.dumps(body), {"Content-Type": "application/json"})
            events = [json.loads(line[6:]) for line in connection.getresponse().read().decode().splitlines()
                      if line.startswith("data: ")]
            assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"] == "rain in Oslo"
    finally:
        server.terminate()
        server.wait(30)


def test_forge_serve_speaks_one_protocol_at_a_time(capsys):
    from forge.cli import main

    assert main(["serve", "--a2a", "--ag-ui", "examples/writer.py:writer"]) == 1
    assert "one protocol at a time: --a2a or --ag-ui, not both" in capsys.readouterr().err


def streamed(url, text, task=None):
    """Send `text` as a stream (A2A's message/stream) with a2a-sdk's client: every update
    the client read, in order."""
    return _sent(url, text, task, streaming=True)[0]


def _working(updates):
    """The working statuses a streamed task told: each one's words and its record's trigger."""
    told = []
    for update in updates:
        if update.HasField("status_update") and update.status_update.status.state == TaskState.TASK_STATE_WORKING \
                and update.status_update.status.HasField("message"):
            text, data = update.status_update.status.message.parts
            told.append((text.text, MessageToDict(data)["data"]["trigger"]))
    return told


def test_a_streamed_task_tells_each_transition_as_its_working_status_then_completes(served):
    url = served(AgentLoop([weather], asking, lambda o: o.tool_name == "finish"))
    updates = streamed(url, "Oslo")
    told = _working(updates)
    assert [trigger for _, trigger in told] == ["choose", "call", "record", "replan", "finish", "record", "stop"]
    assert "select ─choose→ execute" in told[0][0] and "chose weather" in told[0][0]
    final = [u for u in updates if u.HasField("status_update")][-1].status_update.status.state
    assert final == TaskState.TASK_STATE_COMPLETED


@pytest.mark.slow
def test_a_streamed_durable_task_tells_its_run_from_the_database_each_turn_from_where_it_was(served, db, tmp_path,
                                                                                            monkeypatch):
    """A durable task read as a stream: its run's transitions as a worker fires them, read
    from the runs' database; the reply's stream goes on from the answer, not from the start."""
    import signal

    from protocol_workers import LOOPS, payer_on
    from test_worker_stop import start_worker, stop

    db, ledger = str(db), tmp_path / "ledger"
    with payer_on(db, ledger, monkeypatch) as payer:
        url = served(payer)
        worker = start_worker(db, ledger, LOOPS)
        try:
            asking_updates = streamed(url, "pay bob")
            task = next(update.task for update in asking_updates if update.HasField("task"))
            answered_updates = streamed(url, "approve", task=task)
        finally:
            stop(worker, signal.SIGTERM)
    asked = [trigger for _, trigger in _working(asking_updates)]
    assert asked[0] == "choose" and "answer" not in asked
    assert [update.status_update.status.state for update in asking_updates if update.HasField("status_update")][-1] \
        == TaskState.TASK_STATE_INPUT_REQUIRED
    went_on = [trigger for _, trigger in _working(answered_updates)]
    assert went_on[0] == "answer" and went_on[-1] == "stop" and went_on.count("answer") == 1
    assert ledger.read_text().splitlines() == ["pay bob 20"]


def test_an_a2a_agent_tool_is_drawn_beside_the_loop_as_a_child_run_is(served):
    from forge.diagram import diagram, mermaid
    from forge.machine.child import RemoteAgent, remote_agents_of

    url = served(AgentLoop([weather], asking, lambda o: o.tool_name == "finish"))
    remote = a2a_tool(url, "forecaster", side_effect=False)
    caller = AgentLoop([remote], lambda goal, state: Finish("x"), lambda o: True)
    assert remote_agents_of(caller) == {"forecaster": RemoteAgent("forge: single-agent tool loop", url)}
    dot = diagram(caller).source
    assert f'"forecaster/__remote" [label="forecaster: A2A agent forge: single-agent tool loop\\n{url}"' in dot
    assert 'execute -> "forecaster/__remote" [label="forecaster (A2A task)"' in dot
    text = mermaid(caller)
    assert f'state "forecaster: A2A agent forge: single-agent tool loop ({url})" as forecaster__remote' in text
    assert "execute --> forecaster__remote: forecaster (A2A task)" in text


@pytest.mark.slow
def test_a_durable_task_outlives_the_app_and_the_next_app_takes_its_answer(served, db, tmp_path, monkeypatch):
    """A durable loop's A2A app keeps its tasks in the runs' database: the app that made a
    task is stopped while the task is input-required, and the reply sent to a new app on
    the same database answers the run; the payment is made once."""
    import signal

    from protocol_workers import LOOPS, payer_on
    from test_worker_stop import start_worker, stop

    from forge.protocols.a2a import TASKS_TABLE

    db, ledger = str(db), tmp_path / "ledger"
    with payer_on(db, ledger, monkeypatch) as payer:
        worker = start_worker(db, ledger, LOOPS)
        try:
            first = served(payer)
            asked, _ = send(first, "pay bob")
            _stop_serving(served, first)
            done, _ = send(served(payer), "approve", task=asked)
        finally:
            stop(worker, signal.SIGTERM)
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert (done.id, done.status.state) == (asked.id, TaskState.TASK_STATE_COMPLETED)
    assert done.artifacts[0].parts[0].text == "paid bob 20"
    assert ledger.read_text().splitlines() == ["pay bob 20"]
    import sqlite3

    with sqlite3.connect(db) as stored:
        assert stored.execute(f"select count(*) from {TASKS_TABLE} where id = ?", (asked.id,)).fetchone() == (1,)


def _stop_serving(served, url):
    """Stop the app `served` serves at `url`, as a process restart would."""
    for server, thread in served.running:
        if str(server.config.port) in url:
            server.should_exit = True
            thread.join(10)
