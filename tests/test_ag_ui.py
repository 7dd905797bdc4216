"""AG-UI (issue 52, item 1): a forge loop served over AG-UI (`forge.protocols.ag_ui`) to a
client on 127.0.0.1 that reads the server-sent events back with the protocol's own types
(`ag_ui.core.Event`); the sequence keeps the protocol's rules (a run started first and ended
last, each message and tool call started before its content and ended after, each result
paired with a call announced before it); a question is an interrupt answered by `resume`."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

pytest.importorskip("ag_ui", reason="the ag-ui extra is a test dependency: python3 tasks.py test installs it")
openai = pytest.importorskip("openai", reason="the llm extra is a test dependency")

import uvicorn  # noqa: E402
from ag_ui.core import Event  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

from forge import AgentLoop, Ask, Finish, Intent, tool  # noqa: E402
from forge.chat_server import ChatServer, reply  # noqa: E402
from forge.models.chat import ChatPolicy  # noqa: E402
from forge.protocols.ag_ui import ag_ui_app  # noqa: E402

EVENTS = TypeAdapter(Event)


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"4 degrees in {city}"


def _serving(loop, **options):
    from socket import socket

    with socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(ag_ui_app(loop, **options), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return server, thread, port


@pytest.fixture
def serve():
    running = []

    def started(loop, **options):
        running.append(_serving(loop, **options))
        return running[-1][2]

    yield started
    for server, thread, _ in running:
        server.should_exit = True
        thread.join(10)


def post(port, body):
    """POST a run input; the events read back as the protocol's own types."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", "/", body=json.dumps(body), headers={"Content-Type": "application/json",
                                                                    "Accept": "text/event-stream"})
    response = connection.getresponse()
    text = response.read().decode()
    if response.status != 200:
        return response.status, text
    return response.status, [EVENTS.validate_json(line[len("data: "):]) for line in text.splitlines()
                             if line.startswith("data: ")]


def run_input(text, thread="t1", run="r1", **more):
    return {"threadId": thread, "runId": run, "state": None, "messages": [{"id": "m1", "role": "user", "content": text}],
            "tools": [], "context": [], "forwardedProps": None, **more}


def kept_the_rules(events):
    """The protocol's ordering rules, as a client relies on them."""
    kinds = [event.type.value for event in events]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] in ("RUN_FINISHED", "RUN_ERROR")
    open_messages, open_calls, announced = set(), set(), set()
    for event in events:
        kind = event.type.value
        if kind == "TEXT_MESSAGE_START":
            open_messages.add(event.message_id)
        elif kind == "TEXT_MESSAGE_CONTENT":
            assert event.message_id in open_messages
        elif kind == "TEXT_MESSAGE_END":
            open_messages.remove(event.message_id)
        elif kind == "TOOL_CALL_START":
            assert event.tool_call_id not in announced
            open_calls.add(event.tool_call_id)
            announced.add(event.tool_call_id)
        elif kind == "TOOL_CALL_ARGS":
            assert event.tool_call_id in open_calls
        elif kind == "TOOL_CALL_END":
            open_calls.remove(event.tool_call_id)
        elif kind == "TOOL_CALL_RESULT":
            assert event.tool_call_id in announced and event.tool_call_id not in open_calls
    assert not open_messages and not open_calls
    return kinds


def chat_loop(server):
    model = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0),
                       async_client=openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0))
    return AgentLoop([weather], model, verify=lambda o: isinstance(o.payload, Finish))


def test_a_model_run_streams_its_text_its_calls_and_each_result_paired_by_the_models_call_id(serve):
    with ChatServer([reply(None, ("call_1", "weather", {"city": "Oslo"})), reply("It is 4 degrees.")]) as model:
        status, events = post(serve(chat_loop(model)), run_input("Weather in Oslo?"))
    assert status == 200
    kinds = kept_the_rules(events)
    started = next(e for e in events if e.type.value == "TOOL_CALL_START")
    assert (started.tool_call_id, started.tool_call_name) == ("call_1", "weather")
    args = "".join(e.delta for e in events if e.type.value == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"city": "Oslo"}
    (result,) = [e for e in events if e.type.value == "TOOL_CALL_RESULT"]
    assert (result.tool_call_id, result.content) == ("call_1", "4 degrees in Oslo")
    text = "".join(e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT")
    assert text == "It is 4 degrees."
    assert events[-1].result == "It is 4 degrees." and events[-1].outcome.type == "success"
    assert events[-1].usage[0].input_tokens == 1
    assert "STEP_STARTED" in kinds and kinds.index("TOOL_CALL_RESULT") > kinds.index("TOOL_CALL_END")


def test_calls_no_model_named_are_announced_from_the_machines_choice_each_with_its_result(serve):
    def both(goal, state):
        if state.observations:
            return Finish("done")
        return [Intent.call("weather", city="Oslo"), Intent.call("weather", city="Rome")]

    status, events = post(serve(AgentLoop([weather], both, lambda o: o.tool_name == "finish")), run_input("go"))
    assert status == 200
    kept_the_rules(events)
    starts = [e for e in events if e.type.value == "TOOL_CALL_START"]
    assert [e.tool_call_id for e in starts] == ["r1/1/weather/1", "r1/1/weather/2"]
    results = {e.tool_call_id: e.content for e in events if e.type.value == "TOOL_CALL_RESULT"}
    assert results == {"r1/1/weather/1": "4 degrees in Oslo", "r1/1/weather/2": "4 degrees in Rome"}


def test_a_question_is_an_interrupt_and_the_resume_is_the_reply_the_thread_goes_on_with(serve):
    asked = reply(None, ("call_q", "ask_user", {"question": "Which city?"}))
    with ChatServer([asked, reply("4 degrees in Oslo.")]) as model:
        port = serve(chat_loop(model))
        status, events = post(port, run_input("What is the weather?"))
        assert status == 200 and kept_the_rules(events)[-1] == "RUN_FINISHED"
        (interrupt,) = events[-1].outcome.interrupts
        assert (interrupt.reason, interrupt.message) == ("input_required", "Which city?")
        status, events = post(port, run_input("", run="r2", resume=[{"interruptId": interrupt.id,
                                                                     "status": "resolved", "payload": "Oslo"}]))
    assert status == 200 and events[-1].result == "4 degrees in Oslo."
    assert model.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_q", "content": "Oslo"}


def asking_for_a_city(goal, state):
    return Finish(f"weather in {goal}") if state.turn_start else Ask("Which city?")


@pytest.mark.parametrize(("threads", "resumed"), [(2, 200), (1, 422)])
def test_an_app_keeps_the_last_threads_it_is_told_to_and_forgets_older_ones(serve, threads, resumed):
    port = serve(AgentLoop([weather], asking_for_a_city, lambda o: True), threads=threads)
    _, asked = post(port, run_input("What is the weather?", thread="t1"))
    (interrupt,) = asked[-1].outcome.interrupts
    post(port, run_input("What is the weather?", thread="t2"))
    status, said = post(port, run_input("", thread="t1", run="r2", resume=[
        {"interruptId": interrupt.id, "status": "resolved", "payload": "Oslo"}]))
    assert status == resumed
    if threads == 1:
        assert "thread 't1' waits for nothing" in said
    else:
        assert said[-1].result == "weather in Oslo"


def test_a_run_that_fails_ends_in_a_run_error_naming_its_reason(serve):
    def broken(goal, state):
        raise RuntimeError("no idea")

    _, events = post(serve(AgentLoop([weather], broken, lambda o: False)), run_input("go"))
    assert events[-1].type.value == "RUN_ERROR"
    assert events[-1].code == "fatal_error" and "RuntimeError: no idea" in events[-1].message


@pytest.mark.parametrize(("body", "said"), [
    ({"threadId": "t"}, "not an AG-UI run input"),
    (run_input("  "), "needs a user message with text"),
    (run_input("", resume=[{"interruptId": "x", "status": "resolved", "payload": "hi"}]), "waits for nothing"),
])
def test_a_bad_input_is_refused_with_a_422_naming_what_is_wrong(serve, body, said):
    port = serve(AgentLoop([weather], lambda goal, state: Finish("x"), lambda o: True))
    status, text = post(port, body)
    assert status == 422 and said in text


@pytest.mark.slow
def test_a_client_follows_a_durable_run_through_a_worker_restart_and_answers_its_approval(serve, db, tmp_path,
                                                                                         monkeypatch):
    """Issue 52's done-when for AG-UI: the run waits for its approval (an interrupt naming the
    call); the worker is killed once the run parked; the client's resume approves it, a new
    worker takes the run on, and the client reads it to its end: the payment made once."""
    import signal

    from protocol_workers import LOOPS, payer_on
    from test_worker_stop import eventually, start_worker, stop

    from forge.durable.runs import StoredRuns

    db, ledger, loops = str(db), tmp_path / "ledger", LOOPS  # this process's runs database (one DBOS per process)
    with payer_on(db, ledger, monkeypatch) as payer, StoredRuns(db) as runs:
        port = serve(payer)
        first = start_worker(db, ledger, loops)
        try:
            status, events = post(port, run_input("pay bob", thread="t", run="pay-1"))
            eventually(lambda: str(runs.client.list_workflows(workflow_ids=["pay-1"], load_input=False)[0].status)
                       == "SUCCESS")  # parked: the run waits holding no worker
        finally:
            first.kill()
            first.wait(30)
        assert status == 200 and kept_the_rules(events)[-1] == "RUN_FINISHED"
        (interrupt,) = events[-1].outcome.interrupts
        assert (interrupt.id, interrupt.reason, interrupt.tool_call_id) == \
            ("pay-1~1", "approval_required", "pay-1/1/pay")
        assert interrupt.response_schema["properties"]["answer"] == {"enum": ["approve", "reject"]}
        assert not ledger.exists()
        second = start_worker(db, ledger, loops)
        try:
            status, events = post(port, run_input("", thread="t", run="pay-2", resume=[
                {"interruptId": interrupt.id, "status": "resolved", "payload": "approve"}]))
        finally:
            stop(second, signal.SIGTERM)
    assert status == 200, events
    kinds = kept_the_rules(events)
    assert kinds[0] == "RUN_STARTED" and events[0].run_id == "pay-2"
    assert [e.content for e in events if e.type.value == "TOOL_CALL_RESULT"] == ["paid bob 20"]
    assert events[-1].type.value == "RUN_FINISHED" and events[-1].outcome.type == "success"
    assert ledger.read_text().splitlines() == ["pay bob 20"]


def test_a_resume_naming_no_waiting_question_of_a_durable_run_is_refused(serve, make):
    payer = make(AgentLoop([weather], lambda goal, state: Finish("x"), lambda o: True))
    status, text = post(serve(payer), run_input("", resume=[{"interruptId": "nobody~1", "status": "resolved",
                                                              "payload": "approve"}]))
    assert status == 422 and "nobody" in text


def test_a_child_run_is_a_subagent_paired_with_the_call_that_made_it(serve):
    from forge import tool as made_tool

    @made_tool
    def look(topic: str) -> str:
        """Look a topic up."""
        return f"facts about {topic}"

    child = AgentLoop([look], lambda goal, state: Intent.call("look", topic=goal) if not state.observations
                      else Finish(state.observations[-1].payload), lambda o: o.tool_name == "finish")
    parent = AgentLoop([child.as_tool("research")], lambda goal, state: Intent.call("research", goal="otters")
                       if not state.observations else Finish(state.observations[-1].payload),
                       lambda o: o.tool_name == "finish")
    status, events = post(serve(parent), run_input("write"))
    assert status == 200 and kept_the_rules(events)[-1] == "RUN_FINISHED"
    (started,) = [e for e in events if e.type.value == "SUBAGENT_STARTED"]
    (ended,) = [e for e in events if e.type.value == "SUBAGENT_FINISHED"]
    assert (started.subagent_run_id, started.name, started.parent_tool_call_id) == ("r1/research.1", "research",
                                                                                    "r1/1/research")
    assert ended.subagent_run_id == "r1/research.1" and ended.outcome.type == "success"
    assert events[-1].result == "facts about otters"


def test_a_tools_progress_is_a_custom_event_in_forges_own_form():
    from forge.events import ToolProgress
    from forge.protocols.ag_ui import AGUIEvents

    (made,) = AGUIEvents("t", "r", AgentLoop([weather], lambda goal, state: Finish("x"), lambda o: True).definition
                         ).of(ToolProgress("count", 2, 3, "counted 2"))
    assert (made.type.value, made.name) == ("CUSTOM", "forge.tool_progress")
    assert made.value == {"type": "tool_progress", "tool": "count", "progress": 2, "total": 3, "message": "counted 2"}


def test_each_step_ends_with_a_snapshot_of_the_runs_state(serve):
    def looking(goal, state):
        return Finish(state.observations[-1].payload) if state.observations else Intent.call("weather", city="Oslo")

    _, events = post(serve(AgentLoop([weather], looking, lambda o: isinstance(o.payload, Finish))), run_input("go"))
    kinds = kept_the_rules(events)
    snapshots = [e.snapshot for e in events if e.type.value == "STATE_SNAPSHOT"]
    assert snapshots == [{"run_id": "r1", "state": "select", "step": 1, "observations": 1},
                         {"run_id": "r1", "state": "verified_success", "step": 2, "observations": 2}]
    assert [kinds[kinds.index("STATE_SNAPSHOT", i) + 1] for i in range(len(kinds)) if kinds[i] == "STATE_SNAPSHOT"] \
        == ["STEP_FINISHED", "STEP_FINISHED"]


@pytest.mark.slow
def test_a_client_reconnecting_to_a_waiting_durable_run_reads_it_again_to_where_it_waits(serve, db, tmp_path,
                                                                                        monkeypatch):
    """A client that lost its stream posts the same input again (same run id): it reads the
    run from its start as the runs' database has it, up to the interrupt it waits on, and
    the run is not started again: answered once, it pays once."""
    import signal

    from protocol_workers import LOOPS, payer_on
    from test_worker_stop import start_worker, stop

    db, ledger = str(db), tmp_path / "ledger"
    with payer_on(db, ledger, monkeypatch) as payer:
        port = serve(payer)
        worker = start_worker(db, ledger, LOOPS)
        try:
            _, first = post(port, run_input("pay bob", thread="t", run="again-1"))
            _, again = post(port, run_input("pay bob", thread="t", run="again-1"))
            (interrupt,) = again[-1].outcome.interrupts
            _, answered = post(port, run_input("", thread="t", run="again-2", resume=[
                {"interruptId": interrupt.id, "status": "resolved", "payload": "approve"}]))
        finally:
            stop(worker, signal.SIGTERM)
    assert kept_the_rules(again) == kept_the_rules(first)
    assert interrupt.id == first[-1].outcome.interrupts[0].id == "again-1~1"
    assert answered[-1].type.value == "RUN_FINISHED" and answered[-1].result == "paid bob 20"
    assert ledger.read_text().splitlines() == ["pay bob 20"]
