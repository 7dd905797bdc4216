"""Issue 24's reproductions (hardening, third pass), one test each, named by item."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from forge import AgentLoop, Finish, Hooks, Intent, Limits, ScriptedPolicy, tool


@tool
def noop() -> str:
    """Do nothing."""
    return ""


def _finishing_loop(verify: Any) -> AgentLoop:
    return AgentLoop([noop], ScriptedPolicy([Finish("done")]), verify)


def test_item_19_a_verify_with_a_defaulted_parameter_is_called_with_the_observation_alone():
    seen: list[Any] = []

    def verify(observation, expected=1):
        seen.append(expected)
        return True

    assert _finishing_loop(verify).run("finish").reason == "verified_success" and seen == [1]


def test_item_19_a_verify_method_is_called_with_the_observation_alone():
    class Checker:
        def verify(self, observation):
            return isinstance(observation.payload, Finish)

    assert _finishing_loop(Checker().verify).run("finish").reason == "verified_success"


def test_item_19_a_verify_that_needs_the_state_still_gets_it():
    class Checker:
        def __call__(self, observation, state):
            return len(state.observations) == 1

    assert _finishing_loop(Checker()).run("finish").reason == "verified_success"
    assert _finishing_loop(lambda o, state: state is not None).run("finish").reason == "verified_success"


def test_item_2_arun_talks_to_the_endpoint_of_the_client_it_was_given(monkeypatch):
    import asyncio

    import openai
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    with ChatServer([reply("from the configured endpoint")]) as configured, \
            ChatServer(lambda body: reply("from the environment's endpoint")) as environment:
        monkeypatch.setenv("OPENAI_BASE_URL", environment.url)
        monkeypatch.setenv("OPENAI_API_KEY", "the-environments-key")
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=configured.url, api_key="the-users-key"))
        result = asyncio.run(AgentLoop([noop], policy, lambda o: True).arun("say something"))
    assert result.state.observations[0].payload == Finish("from the configured endpoint")
    assert len(configured.requests) == 1 and environment.requests == []


def test_item_2_a_client_whose_endpoint_cannot_be_read_is_refused_for_arun():
    import asyncio

    from forge.models.chat import ChatPolicy

    result = asyncio.run(AgentLoop([noop], ChatPolicy("m", client=object()), lambda o: True).arun("go"))
    assert result.reason == "fatal_error" and "pass async_client= as well" in str(result.error)


class _RawServer:
    """An HTTP server on 127.0.0.1 answering every POST with `body` (bytes) as JSON or text."""

    def __init__(self, body: bytes, content_type: str = "application/json") -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def __enter__(self) -> _RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.mark.parametrize(("body", "content_type", "said"), [
    (b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m"}', "application/json", "without choices"),
    (b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}', "application/json",
     "an empty list of choices"),
    (b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
     b'"message": null, "finish_reason": "stop"}]}', "application/json", "a choice that has no message"),
    (b"<html>gateway error</html>", "application/json", "not JSON"),
    (b"<html>gateway error</html>", "text/html", "without choices"),
])
def test_item_12_a_malformed_model_response_ends_the_run_with_a_model_error(body, content_type, said):
    import openai

    from forge.models.chat import ChatPolicy, ModelError

    with _RawServer(body, content_type) as server:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0))
        result = AgentLoop([noop], policy, lambda o: True).run("go")
    assert result.reason == "fatal_error" and isinstance(result.error, ModelError), repr(result.error)
    assert said in str(result.error)


def _chat_loop(server: Any, *tools: Any) -> AgentLoop:
    import openai

    from forge.models.chat import ChatPolicy

    policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0))
    return AgentLoop(list(tools) or [echo], policy, lambda o: isinstance(o.payload, Finish))


@tool
def echo(text: str) -> str:
    """Say text back."""
    return text


def test_item_13_tool_call_arguments_sent_as_an_object_are_used():
    from chat_server import ChatServer, reply

    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": {"text": "hi"}}}]}
    with ChatServer([call, reply("done")]) as server:
        result = _chat_loop(server).run("echo hi")
    assert result.reason == "verified_success" and result.state.observations[0].payload == "hi"


def test_item_17_a_refusal_is_not_an_answer():
    from chat_server import ChatServer

    from forge.models.chat import ModelRefused

    with ChatServer([{"role": "assistant", "content": None, "refusal": "I can't help with that."}]) as server:
        result = _chat_loop(server).run("do something bad")
    assert result.reason == "fatal_error" and isinstance(result.error, ModelRefused)
    assert "the model refused: I can't help with that." in result.summary
    assert result.state.messages[-1]["refusal"] == "I can't help with that."


def test_item_18_huge_arguments_that_are_not_json_are_told_and_kept_capped():
    from chat_server import ChatServer, reply

    from forge.models.chat import ECHO_LIMIT
    from forge.records.trace import PAYLOAD_LIMIT

    junk = "x" * 1_000_000
    with ChatServer([reply(None, ("c1", "echo", junk)), reply("gave up")]) as server:
        result = _chat_loop(server).run("echo")
    told = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert told.startswith("error: the arguments are not valid JSON") and len(told) < ECHO_LIMIT + 200
    assert all(len(line) < 10 * PAYLOAD_LIMIT for line in [str(r.detail) for r in result.trace])


class _StartBreaks:
    def run_started(self, run: Any) -> None:
        raise RuntimeError("started broke")


class _FinishBreaks:
    def run_finished(self, run: Any, result: Any) -> None:
        raise RuntimeError("finished broke")


def test_item_14_an_observer_raising_in_run_started_ends_the_run_in_fatal_error():
    import asyncio

    from forge import LoopObserver

    class Breaks(_StartBreaks, LoopObserver):
        pass

    for run in (lambda loop: loop.run("go"), lambda loop: asyncio.run(loop.arun("go"))):
        result = run(_finishing_loop(lambda o: True).replace(hooks=Hooks(observers=[Breaks()])))
        assert result.reason == "fatal_error" and str(result.error) == "started broke"
        assert (result.trace[-1].trigger, result.trace[-1].detail["failed"]) == ("fail", "observer Breaks.run_started")


def test_item_14_an_observer_raising_in_run_finished_is_logged_and_the_run_keeps_its_end(caplog):
    import asyncio

    from forge import LoopObserver

    class Breaks(_FinishBreaks, LoopObserver):
        pass

    for run in (lambda loop: loop.run("go"), lambda loop: asyncio.run(loop.arun("go"))):
        result = run(_finishing_loop(lambda o: True).replace(hooks=Hooks(observers=[Breaks()])))
        assert result.reason == "verified_success"
    assert "observer Breaks.run_finished raised; the run had ended in verified_success" in caplog.text
    assert "finished broke" in caplog.text


def test_item_22_repetition_counts_the_calls_of_this_turn_only():
    @tool
    def now() -> str:
        """The time."""
        return "12:00"

    def policy(goal: str, state: Any) -> Any:
        return Intent.call("now") if state.step_count == state.turn_start else Finish("it is 12:00")

    loop = AgentLoop([now], policy, lambda o: isinstance(o.payload, Finish), limits=Limits(repeat_limit=2))
    first = loop.run("what time is it?")
    second = loop.run("and now?", state=first.state)
    third = loop.run("and now?", state=second.state)
    assert [r.reason for r in (first, second, third)] == ["verified_success"] * 3
    assert third.steps == 2 and len(third.state.action_history) == 6


def test_item_24_an_unknown_tool_with_no_close_name_says_nothing_is_close():
    from forge import UnknownTool

    result = AgentLoop([noop, echo], ScriptedPolicy([Intent.call("zzzzzz")]), lambda o: True).run("go")
    assert isinstance(result.error, UnknownTool) and result.error.suggestions == ()
    assert "no tool named 'zzzzzz'; no tool's name is close to it; the tools are: echo, noop" in str(result.error)
    close = AgentLoop([noop, echo], ScriptedPolicy([Intent.call("ecoh")]), lambda o: True).run("go")
    assert close.error.suggestions == ("echo",)


def test_item_20_a_tuple_is_an_array_and_a_json_array_becomes_the_tuple_a_hint_asks_for():
    seen: list[Any] = []

    @tool
    def move(point: tuple[float, float]) -> str:
        """Move to a point."""
        seen.append(point)
        return "moved"

    for given in ((1.0, 2.0), [3.0, 4.0]):
        result = AgentLoop([move], ScriptedPolicy([Intent.call("move", point=given), Finish("ok")]),
                           lambda o: isinstance(o.payload, Finish)).run("move")
        assert result.reason == "verified_success", result.summary
    assert seen == [(1.0, 2.0), (3.0, 4.0)] and all(type(p) is tuple for p in seen)


def test_item_21_a_whole_float_for_an_int_reaches_a_tool_function_as_an_int_and_a_fraction_is_refused():
    seen: list[Any] = []

    @tool
    def last(items: list[str], n: int) -> list[str]:
        """The last n items."""
        seen.append(n)
        return items[-n:]

    ok = AgentLoop([last], ScriptedPolicy([Intent.call("last", items=["a", "b", "c"], n=2.0), Finish("ok")]),
                   lambda o: isinstance(o.payload, Finish)).run("last two")
    assert ok.state.observations[0].payload == ["b", "c"] and type(seen[0]) is int
    refused = AgentLoop([last], ScriptedPolicy([Intent.call("last", items=["a"], n=2.5), Finish("ok")]),
                        lambda o: isinstance(o.payload, Finish)).run("last")
    assert refused.state.observations[0].status == "retryable_error" and seen == [2]


def test_item_3_a_schema_with_a_remote_ref_is_never_fetched_and_the_call_is_refused_clearly():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from forge import Tool

    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"type": "string"}')

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/internal.json"
        schema = {"type": "object", "properties": {"q": {"$ref": url}}, "required": ["q"]}
        lookup = Tool("lookup", {"lookup"}, lambda q: q, schema=schema)
        result = AgentLoop([lookup], ScriptedPolicy([Intent.call("lookup", q="x"), Finish("ok")]),
                           lambda o: isinstance(o.payload, Finish)).run("look up")
    finally:
        server.shutdown()
        server.server_close()
    assert asked == []
    assert result.state.observations[0].status == "retryable_error"
    assert f"the tool's schema refers to '{url}', which forge does not retrieve" in str(result.state.observations[0].payload)


def test_item_6_forge_inspect_writes_a_page_for_text_with_a_lone_surrogate(tmp_path):
    import subprocess
    import sys

    from forge import write_trace

    @tool
    def broken() -> str:
        """Text decoded from broken bytes."""
        return "bad \ud800 text"

    result = AgentLoop([broken], ScriptedPolicy([Intent.call("broken"), Finish("ok")]),
                       lambda o: isinstance(o.payload, Finish)).run("go")
    trace = write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal)
    page = tmp_path / "run.html"
    page.write_text("the page from before")
    done = subprocess.run([sys.executable, "-m", "forge", "inspect", str(trace), "-o", str(page)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "\\ud800" in page.read_text(encoding="utf-8")


def test_item_6_an_output_file_is_written_whole_or_not_at_all(tmp_path):
    from forge.files import write_atomically

    page = tmp_path / "run.html"
    page.write_text("the page from before")

    def pieces():
        yield "half a page"
        raise RuntimeError("failed halfway")

    with pytest.raises(RuntimeError):
        write_atomically(page, pieces())
    assert page.read_text() == "the page from before" and [p.name for p in tmp_path.iterdir()] == ["run.html"]


def test_item_30_a_scenario_file_imports_the_modules_beside_it(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "helpers.py").write_text("GOAL = 'say hi'\n")
    (tmp_path / "agent.py").write_text(
        "from helpers import GOAL\n"
        "from forge import AgentLoop, Finish, ScriptedPolicy, tool\n\n"
        "@tool\ndef noop() -> str:\n    '''Nothing.'''\n    return ''\n\n"
        "loop = AgentLoop([noop], ScriptedPolicy([Finish('hi')]), lambda o: True)\ngoal = GOAL\n")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    beside = f"{tmp_path.name}/agent.py"  # from the folder above, as `python project/agent.py` would be
    for command in (["run", beside, "--trace", str(tmp_path / "run.jsonl")], ["debug", beside]):
        done = subprocess.run([sys.executable, "-m", "forge", *command], cwd=tmp_path.parent, capture_output=True,
                              text=True, timeout=60, env=environment, input="continue\nquit\n")
        assert done.returncode == 0 and "ModuleNotFoundError" not in done.stderr + done.stdout, done.stderr
        assert "verified_success" in done.stdout


def test_item_29_the_debugger_takes_obs_n_back_n_show_k_and_ctrl_c_cancels_the_line(tmp_path):
    import os
    import signal
    import sys

    import pexpect

    long_text = "word " * 60
    (tmp_path / "agent.py").write_text(
        "from forge import AgentLoop, Finish, Intent, tool\n\n"
        f"@tool\ndef read() -> str:\n    '''Read.'''\n    return {long_text!r} + 'END'\n\n"
        "def policy(goal, state):\n"
        "    return Intent.call('read') if state.step_count < 2 else Finish('done')\n\n"
        "loop = AgentLoop([read], policy, lambda o: isinstance(o.payload, Finish), repeat_limit=5)\n"
        "goal = 'read twice'\n")
    prompt = r"\(forge (\w+) step (\d+)\) "
    def as_a_shell_starts_it() -> None:  # Ctrl-C's default, whatever a library in this test process did with it
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    child = pexpect.spawn(sys.executable, ["-m", "forge", "debug", str(tmp_path / "agent.py")],
                          env=dict(os.environ, NO_COLOR="1"), encoding="utf-8", timeout=60, dimensions=(50, 400),
                          preexec_fn=as_a_shell_starts_it)
    try:
        child.expect(prompt)

        def command(line: str) -> str:
            child.sendline(line)
            child.expect(prompt)
            return child.before

        command("step 8")
        shown = command("obs 2")
        assert "#2 read: ok" in shown and "END" in shown  # the whole payload, not cut
        assert "there is no observation #9: 2 recorded so far" in command("obs 9")
        assert '"payload"' in command("show 7") and "END" in child.before
        backed = command("back 3")
        assert backed.count("back over") == 3 and child.match.groups() == ("execute", "2")
        child.send("step 1")
        child.expect_exact("step 1")  # the terminal echoed it: it is being typed
        child.sendintr()  # Ctrl-C while typing: the line is dropped, the session goes on
        child.expect_exact("^C")
        child.expect(prompt)
        assert child.isalive()
        assert child.match.groups() == ("execute", "2")
    finally:
        child.close(force=True)


def test_item_11_forge_tools_lists_a_tool_with_an_invalid_schema_and_flags_it():
    import subprocess
    import sys
    from pathlib import Path

    server = str(Path(__file__).with_name("mcp_odd_server.py"))
    done = subprocess.run([sys.executable, "-m", "forge", "tools", "--", sys.executable, server],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(": 3 tools") and lines[1].startswith("good")
    assert any(line.startswith("bad — INVALID SCHEMA, forge cannot call it") and "'strnig'" in line for line in lines)


def test_item_11_a_loop_asking_for_every_tool_is_told_which_to_leave_out():
    import sys
    from pathlib import Path

    from forge import UsageError
    from forge.mcp import MCPServer

    with MCPServer.stdio(sys.executable, str(Path(__file__).with_name("mcp_odd_server.py")), timeout=60) as server:
        with pytest.raises(UsageError, match=r"tool 'bad': its schema is not valid .*leave that tool out with "
                                             r"tools\(include=\['good', 'slow'\]\)"):
            server.tools()
        assert [t.name for t in server.tools(include=["good"])] == ["good"]


@pytest.mark.slow
def test_item_7_an_mcp_server_that_never_answers_fails_within_its_timeout_and_leaves_no_process():
    import socket
    import subprocess
    import sys
    import threading

    from forge.mcp import MCPError, MCPServer

    with pytest.raises(MCPError, match="did not start within 3 s"), \
            MCPServer.stdio(sys.executable, "-c", "import time; time.sleep(600)  # forge-item-7", timeout=3):
        pass  # the timeout fired: the error says so (its speed is not this test's to claim)
    survivors = subprocess.run(["pgrep", "-f", "forge-item-7"], capture_output=True, text=True).stdout.split()
    assert survivors == []

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    accepted: list[Any] = []

    def accept_until_closed() -> None:
        with contextlib.suppress(OSError):  # the test closes the socket while this waits in accept
            for _ in range(5):
                accepted.append(silent.accept())

    threading.Thread(target=accept_until_closed, daemon=True).start()
    with pytest.raises(MCPError, match="did not start within 3 s"), \
            MCPServer.http(f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", timeout=3):
        pass
    assert accepted  # it connected, and gave up on the silent server by its timeout
    silent.close()


@pytest.mark.slow
def test_item_7_a_call_the_server_never_answers_fails_within_the_timeout():
    import sys
    from pathlib import Path

    from forge.mcp import MCPServer

    odd_server = str(Path(__file__).with_name("mcp_odd_server.py"))
    with MCPServer.stdio(sys.executable, odd_server, timeout=3, start_timeout=120) as server:  # a busy machine starts slowly
        loop = AgentLoop(server.tools(include=["slow", "good"]),
                         ScriptedPolicy([Intent.call("slow"), Intent.call("good", x="y"), Finish("ok")]),
                         lambda o: isinstance(o.payload, Finish))
        result = loop.run("call slow")
    assert isinstance(result.error, TimeoutError) and "did not answer slow within 3 s" in str(result.error)


def test_item_9_an_unreachable_postgresql_database_is_named_without_its_password(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "forge", "runs", "list", "--db",
                           "postgresql://forge:s3cret@127.0.0.1:1/runs"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "postgresql://forge:***@127.0.0.1:1/runs" in done.stderr and "s3cret" not in done.stderr


def _readme() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_item_31_the_readme_opens_with_a_quickstart_agent_made_with_tool():
    import re

    readme = _readme()
    first_section = re.search(r"^## (.+)$", readme, re.M)
    assert first_section is not None and first_section.group(1) == "Quickstart"
    first_block = re.search(r"^```(\w+)\n(.*?)^```", readme, re.S | re.M)
    assert first_block is not None and first_block.group(1) == "python" and "@tool" in first_block.group(2)
    assert "Tool(" not in readme or readme.index("@tool") < readme.index("Tool(")  # the rest lives in docs/ now


def test_item_31_every_python_fragment_of_the_readme_is_a_whole_program():
    import ast
    import re

    for language, body in re.findall(r"^```(\w+)\n(.*?)^```", _readme(), re.S | re.M):
        if language in ("py", "python"):
            tree = ast.parse(body)  # an IndentationError or SyntaxError fails here
            assert not any(isinstance(node, ast.Name) and node.id == "args" for node in ast.walk(tree)), body


def test_item_31_mermaid_diagrams_flow_top_to_bottom_as_the_readme_says():
    from forge.diagram import diagram_text

    assert "direction TB" in diagram_text("single_agent", "mermaid")
    assert "top to bottom" in (__import__("forge.diagram.dot", fromlist=["x"]).__doc__ or "")


def test_item_16_run_works_with_a_chat_policy_and_mcp_tools_where_an_event_loop_runs(tmp_path):
    """As in a Jupyter cell: `loop.run()` called from code an event loop is running."""
    import asyncio
    import sys
    from pathlib import Path

    import openai
    from chat_server import ChatServer, reply

    from forge.mcp import MCPServer
    from forge.models.chat import ChatPolicy

    ledger = tmp_path / "ledger.jsonl"
    server = str(Path(__file__).with_name("mcp_ledger_server.py"))
    with MCPServer.stdio(sys.executable, server, str(ledger), "stdio", timeout=60) as mcp, \
            ChatServer([reply(None, ("c1", "add", {"a": 2, "b": 3})), reply("5")]) as chat:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=chat.url, api_key="k"))
        loop = AgentLoop(mcp.tools(include=["add"]), policy, lambda o: isinstance(o.payload, Finish))

        async def cell() -> Any:
            return loop.run("add 2 and 3")  # not awaited: a notebook's plain call

        result = asyncio.run(cell())
    assert result.reason == "verified_success", result.summary
    assert result.state.observations[0].payload in (5, {"result": 5})


def test_item_1_a_secret_redact_masks_never_reaches_the_trace_or_the_inspector_page(tmp_path):
    import openai
    from chat_server import ChatServer, reply

    from forge.inspect import html
    from forge.models.chat import ChatPolicy

    @tool
    def login(user: str, token: str) -> str:
        """Sign in."""
        return f"welcome {user}"

    def redact(tool_name: str, field: str, value: Any) -> Any:
        return {**value, "token": "***"} if field == "arguments" and "token" in value else value

    with ChatServer([reply(None, ("c1", "login", {"user": "ada", "token": "s3cr3t-t0ken"})), reply("signed in")]) as server:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="k"))
        result = AgentLoop([login], policy, lambda o: isinstance(o.payload, Finish), hooks=Hooks(redact=redact)).run("sign in")
    assert result.reason == "verified_success"
    assert "s3cr3t-t0ken" not in str([record.detail for record in result.trace])
    assert "s3cr3t-t0ken" not in html(result)
    assert '\\\\"token\\\\": \\\\"***\\\\"' in html(result) or '"token": "***"' in str(result.trace[0].detail["messages"])
