"""`forge serve MODULE:LOOP` (issue 34, item 4): a loop served as an MCP tool over stdio, called
by the MCP SDK's own client and by a second forge loop through `forge.mcp.MCPServer`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import mcp
import pytest
from eliciting_client import call_answering
from mcp.client.stdio import StdioServerParameters

from forge import AgentLoop, Finish, Intent
from forge.mcp import MCPServer
from forge.policy import FINISH

ROOT = Path(__file__).resolve().parents[1]
WRITER = f"{ROOT / 'examples' / 'writer.py'}:writer"
SERVED = Path(__file__).with_name("served_loops.py")

pytestmark = pytest.mark.slow  # each test starts a real server process


def served(*references: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "forge", "serve", *references], cwd=str(ROOT))


def call(references: tuple[str, ...], tool: str, arguments: dict) -> tuple[list, object, list]:
    """Call `tool` with the SDK's client; its listing, its result and the progress it told."""
    progress: list[tuple[float, str | None]] = []

    async def session() -> tuple[list, object]:
        async def told(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, message))

        async with mcp.Client(served(*references), read_timeout_seconds=60) as client:
            listing = (await client.list_tools()).tools
            result = await client.call_tool(tool, arguments, progress_callback=told)
        return listing, result

    listing, result = anyio.run(session)
    return listing, result, progress


def test_a_served_loop_is_listed_as_a_tool_that_takes_a_goal():
    listing, _, _ = call((WRITER,), "writer", {"goal": "an article"})
    assert [tool.name for tool in listing] == ["writer"]
    assert listing[0].input_schema["required"] == ["goal"]


def test_the_sdks_client_calls_a_served_loop_and_gets_its_answer_with_progress_per_transition():
    _, result, progress = call((WRITER,), "writer", {"goal": "a short article on how marine mammals sleep"})
    assert not result.is_error
    assert result.content[0].text.startswith("Sea otters hold hands while they sleep")
    assert [done for done, _ in progress] == list(range(1, 12))  # the writer's 11 transitions
    assert progress[0][1] == "select -choose-> execute"


def test_a_run_that_does_not_succeed_is_an_error_result_naming_its_stop_reason():
    _, result, _ = call((f"{SERVED}:endless",), "endless", {"goal": "never done"})
    assert result.is_error
    assert result.content[0].text == "the run ended in step_budget_exhausted"


def test_a_run_that_waits_for_a_person_says_where_it_waits():
    _, result, _ = call((f"{SERVED}:asking",), "asking", {"goal": "help"})
    assert result.is_error
    assert result.content[0].text.startswith("the run waits in input_required: which file?")


def test_arguments_that_do_not_fit_are_refused_before_the_loop_runs():
    _, result, progress = call((WRITER,), "writer", {"topic": "otters"})
    assert result.is_error and "goal" in result.content[0].text and progress == []


def test_a_typed_loop_answers_with_structured_content():
    listing, result, _ = call((f"{SERVED}:typed",), "typed", {"goal": "count"})
    assert listing[0].output_schema["properties"]["count"]["type"] == "integer"
    assert result.structured_content == {"count": 3, "unit": "notes"}


def test_a_second_forge_loop_uses_the_served_loop_as_an_mcp_tool():
    with MCPServer.stdio(sys.executable, "-m", "forge", "serve", WRITER, cwd=ROOT) as server:
        tools = server.tools()

        def policy(goal, state):
            if not state.observations:
                return Intent.call("writer", goal=goal)
            return Finish(f"edited: {state.observations[-1].payload}")

        editor = AgentLoop(tools, policy, lambda observation: observation.tool_name == FINISH)
        result = editor.run("a short article on how marine mammals sleep")
    assert result.reason == "verified_success"
    assert result.answer.startswith("edited: Sea otters hold hands")


def test_forge_serve_refuses_what_is_not_a_loop_naming_it():
    done = subprocess.run([sys.executable, "-m", "forge", "serve", f"{ROOT / 'examples' / 'writer.py'}:LIBRARY"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1
    assert "'LIBRARY' is a dict, not an AgentLoop, a durable loop (loop.durable(...)) or a tool loop.as_tool made" in done.stderr


def test_a_loop_served_over_streamable_http_answers_the_sdks_client():
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "forge", "serve", WRITER, "--http", "--port", str(port)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as knock:
                if knock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, server.communicate()
            time.sleep(0.1)

        async def session():
            async with mcp.Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
                return await client.call_tool("writer", {"goal": "an article"})

        result = anyio.run(session)
        assert not result.is_error and result.content[0].text.startswith("Sea otters hold hands")
    finally:
        server.terminate()
        server.wait(timeout=30)


def elicited(reference: str, tool: str, arguments: dict, replies: list, mode: str = "auto") -> tuple[object, list]:
    """Call `tool` of the loop `reference` names, served by `forge serve`, answering
    `replies` (`eliciting_client.call_answering`)."""
    return call_answering(served(reference), tool, arguments, replies, mode)


def test_a_question_is_asked_of_the_clients_user_by_elicitation_and_the_run_goes_on():
    result, asked = elicited(f"{SERVED}:asking", "asking", {"goal": "help"}, [("accept", {"reply": "notes.md"})])
    assert not result.is_error and result.content[0].text == "looked at notes.md"
    assert asked[0].message == "which file?" and list(asked[0].requested_schema["properties"]) == ["reply"]


def test_an_approval_is_asked_by_elicitation_and_a_yes_approves_that_call():
    result, asked = elicited(f"{SERVED}:careful", "careful", {"goal": "old.md"}, [("accept", {"approve": True})])
    assert result.content[0].text == "ok: old.md removed"
    assert asked[0].message == 'may it call remove({"path": "old.md"})?'


def test_a_declined_approval_rejects_the_call_and_the_policy_hears_of_it():
    result, _ = elicited(f"{SERVED}:careful", "careful", {"goal": "old.md"}, [("decline", None)])
    assert result.content[0].text.startswith("retryable_error")


def test_a_declined_question_ends_the_call_with_an_error_result_saying_so():
    result, _ = elicited(f"{SERVED}:asking", "asking", {"goal": "help"}, [("decline", None)])
    assert result.is_error
    assert result.content[0].text == "the run waits in input_required: which file? (the client's user declined to answer)"


def test_a_child_runs_approval_is_asked_of_the_client_naming_the_child():
    result, asked = elicited(f"{SERVED}:delegating", "delegating", {"goal": "old.md"}, [("accept", {"approve": True})])
    assert result.content[0].text == "ok: old.md removed"
    assert asked[0].message.startswith("child run ") and "/clean.1 asks: may it call remove(" in asked[0].message


def test_a_client_on_the_older_protocol_is_asked_in_place_and_the_run_goes_on():
    result, asked = elicited(f"{SERVED}:delegating", "delegating", {"goal": "old.md"}, [("accept", {"approve": True})],
                             mode="legacy")
    assert result.content[0].text == "ok: old.md removed" and len(asked) == 1


def test_a_tool_that_ran_before_the_question_is_not_run_again_by_the_retried_call(tmp_path):
    log = tmp_path / "touched.log"
    result, _ = elicited(f"{SERVED}:touching", "touching", {"goal": str(log)}, [("accept", {"reply": "done"})])
    assert result.content[0].text == "touched once? yes"
    assert log.read_text() == "touched\n"
