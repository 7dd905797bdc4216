"""Tools from real MCP servers: the reference time and git servers (PyPI), the reference
filesystem server (npm, where node exists), and an SDK-built server over stdio and
streamable HTTP whose ledger shows what reached it."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is a test dependency: python3 tasks.py test installs it")

from forge import AgentLoop, ArgumentContractError, Intent, Limits, ScriptedPolicy, ToolError
from forge.cli import main as forge_main
from forge.mcp import MCPError, MCPServer

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LEDGER_SERVER = Path(__file__).with_name("mcp_ledger_server.py")
FILESYSTEM_SERVER = ROOT / ".mcp-servers" / "node_modules" / ".bin" / "mcp-server-filesystem"


def _installed(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed beside this Python; python3 tasks.py test installs it")
    return str(path)


def _processes_running(marker: str) -> list[int]:
    """Pids whose command line mentions `marker` (this test's own temporary path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _gone(marker: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while _processes_running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _ledger_server(tmp_path: Path) -> tuple[MCPServer, Path]:
    ledger = tmp_path / "ledger.jsonl"
    return MCPServer.stdio(sys.executable, str(LEDGER_SERVER), str(ledger), "stdio"), ledger


# the reference time server


def test_the_time_servers_tools_become_typed_read_only_forge_tools():
    with MCPServer.stdio(_installed("mcp-server-time")) as server:
        tools = {tool.name: tool for tool in server.tools()}
    assert set(tools) == {"get_current_time", "convert_time"}
    current = tools["get_current_time"]
    assert (current.required, current.optional, current.side_effect) == ({"timezone"}, frozenset(), False)
    assert current.schema["properties"]["timezone"]["type"] == "string"
    assert "timezone" in current.description.lower()


def test_a_loop_calls_the_time_server_and_gets_a_real_answer():
    with MCPServer.stdio(_installed("mcp-server-time")) as server:
        loop = AgentLoop(server.tools(), ScriptedPolicy([Intent.call("get_current_time", timezone="Asia/Tokyo")]),
                         verify=lambda o: o.payload["timezone"] == "Asia/Tokyo")
        result = loop.run("what time is it in Tokyo?")
    assert result.reason == "verified_success"
    assert result.state.observations[0].payload["datetime"].endswith("+09:00")


def test_a_server_error_is_a_retryable_observation_carrying_the_servers_text():
    with MCPServer.stdio(_installed("mcp-server-time")) as server:
        loop = AgentLoop(server.tools(), ScriptedPolicy([Intent.call("get_current_time", timezone="Nowhere/Land"),
                                                         Intent.call("get_current_time", timezone="UTC")]),
                         verify=lambda o: o.status == "ok")
        result = loop.run("what time is it?")
    first = result.state.observations[0]
    assert first.status == "retryable_error" and isinstance(first.payload, ToolError)
    assert "Invalid timezone" in str(first.payload) and "Nowhere/Land" in str(first.payload)
    assert result.reason == "verified_success" and result.trace[5].detail["attempts"] == 1  # told, not retried


def test_a_wrongly_typed_argument_is_refused_by_forge_not_by_the_server():
    with MCPServer.stdio(_installed("mcp-server-time")) as server:
        loop = AgentLoop(server.tools(), ScriptedPolicy([Intent.call("get_current_time", timezone=9)]),
                         verify=lambda o: True, max_steps=1)
        result = loop.run("goal")
    (observation,) = result.state.observations
    assert isinstance(observation.payload, ArgumentContractError)
    assert "timezone: 9 is not of type 'string'" in str(observation.payload)


# an SDK-built server whose ledger shows what reached it


def test_only_well_typed_calls_reach_the_server(tmp_path):
    server, ledger = _ledger_server(tmp_path)
    with server:
        loop = AgentLoop(server.tools(), ScriptedPolicy([
            Intent.call("add", a="1", b=2), Intent.call("shout", words=["a", 3]), Intent.call("add", a=1, b=2),
        ]), verify=lambda o: o.status == "ok" and o.payload == {"result": 3})
        result = loop.run("add")
    assert [o.status for o in result.state.observations] == ["retryable_error", "retryable_error", "ok"]
    assert result.reason == "verified_success"  # the structured result, as the server's output schema declares it
    assert "words[1]: 3 is not of type 'string'" in str(result.state.observations[1].payload)
    assert _ledger(ledger) == [{"tool": "add", "arguments": {"a": 1, "b": 2}}]


def test_an_identical_side_effecting_mcp_call_reaches_the_server_once(tmp_path):
    server, ledger = _ledger_server(tmp_path)
    with server:
        loop = AgentLoop(server.tools(), ScriptedPolicy([Intent.call("add", a=2, b=2)] * 2),
                         verify=lambda o: o.sequence == 2, limits=Limits(repeat_limit=5))
        result = loop.run("add twice")
    assert (result.side_effects_run, result.side_effects_replayed) == (1, 1)
    assert len(_ledger(ledger)) == 1


def test_mcp_tools_work_under_arun_concurrently(tmp_path):
    server, ledger = _ledger_server(tmp_path)
    with server:
        tools = [t for t in server.tools() if t.name == "add"]

        def policy(goal, state):
            return Intent.call("add", a=int(goal), b=1)

        loop = AgentLoop(tools, policy, verify=lambda o: o.status == "ok")

        async def all_runs():
            return await asyncio.gather(*(loop.arun(str(n)) for n in range(20)))

        results = asyncio.run(all_runs())
    assert sorted(r.state.observations[0].payload["result"] for r in results) == list(range(1, 21))
    assert len(_ledger(ledger)) == 20


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_over_streamable_http(tmp_path):
    ledger, port = tmp_path / "ledger.jsonl", _free_port()
    process = subprocess.Popen([sys.executable, str(LEDGER_SERVER), str(ledger), "http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP MCP server did not start"
                time.sleep(0.1)
        with MCPServer.http(f"http://127.0.0.1:{port}/mcp") as server:
            loop = AgentLoop(server.tools(), ScriptedPolicy([Intent.call("divide", a=1, b=0),
                                                             Intent.call("divide", a=1, b="two"),
                                                             Intent.call("divide", a=1, b=4)]),
                             verify=lambda o: o.payload == {"result": 0.25})
            result = loop.run("divide")
        assert result.reason == "verified_success"
        assert "cannot divide by zero" in str(result.state.observations[0].payload)
        assert [entry["arguments"] for entry in _ledger(ledger)] == [{"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 4.0}]
    finally:
        process.terminate()
        process.wait(10)


# the reference git server


def test_a_loop_commits_through_the_git_server(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for command in (["init", "-q"], ["config", "user.name", "t"], ["config", "user.email", "t@t.invalid"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True)
    (repo / "a.md").write_text("a\n")
    with MCPServer.stdio(_installed("mcp-server-git")) as server:
        loop = AgentLoop(server.tools(include=["git_add", "git_commit", "git_status"]), ScriptedPolicy([
            Intent.call("git_add", repo_path=str(repo), files=["a.md"]),
            Intent.call("git_commit", repo_path=str(repo), message="add a"),
        ]), verify=lambda o: o.tool_name == "git_commit" and o.status == "ok")
        result = loop.run("commit a.md")
        assert {t.name: t.side_effect for t in loop.tools} == {"git_status": False, "git_add": True, "git_commit": True}
    assert result.reason == "verified_success"
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s", "--name-only"], capture_output=True, text=True)
    assert log.stdout.split() == ["add", "a", "a.md"]


# the reference filesystem server (npm)


def test_the_filesystem_server_is_confined_to_its_folder(tmp_path):
    if not FILESYSTEM_SERVER.exists():
        pytest.skip("the npm filesystem server is not installed (needs node and npm; python3 tasks.py test "
                    "installs it into .mcp-servers/)")
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "in.txt").write_text("inside")
    with MCPServer.stdio(str(FILESYSTEM_SERVER), str(allowed)) as server:
        loop = AgentLoop(server.tools(include=["read_text_file", "write_file"]), ScriptedPolicy([
            Intent.call("read_text_file", path=str(allowed / "in.txt")),
            Intent.call("write_file", path=str(tmp_path / "outside.txt"), content="x"),
            Intent.call("write_file", path=str(allowed / "out.txt"), content=3),
            Intent.call("write_file", path=str(allowed / "out.txt"), content="written"),
        ]), verify=lambda o: o.sequence == 4 and o.status == "ok")
        result = loop.run("copy")
    read, outside, mistyped, written = result.state.observations
    assert (read.status, read.payload.get("content") if isinstance(read.payload, dict) else read.payload) in {
        ("ok", "inside")}
    assert outside.status == "retryable_error" and isinstance(outside.payload, ToolError)
    assert not (tmp_path / "outside.txt").exists()
    assert isinstance(mistyped.payload, ArgumentContractError)
    assert written.status == "ok" and (allowed / "out.txt").read_text() == "written"
    assert result.reason == "verified_success"


# lifecycle: no server outlives its use


def test_no_server_process_outlives_the_with_block(tmp_path):
    server, _ = _ledger_server(tmp_path)
    with server:
        assert _processes_running(str(tmp_path))
        server.call("add", {"a": 1, "b": 1})
    assert _gone(str(tmp_path))
    assert not server.is_open


def test_no_server_process_outlives_a_crash_inside_the_with_block(tmp_path):
    server, _ = _ledger_server(tmp_path)
    with pytest.raises(RuntimeError, match="the loop crashed"), server:
        loop = AgentLoop(server.tools(), ScriptedPolicy([Intent.call("add", a=1, b=1)]), verify=lambda o: True)
        loop.run("goal")
        raise RuntimeError("the loop crashed")
    assert _gone(str(tmp_path))


def test_a_forgotten_server_is_closed_when_collected(tmp_path):
    import gc

    server, _ = _ledger_server(tmp_path)
    server.open()
    assert _processes_running(str(tmp_path))
    del server
    gc.collect()
    assert _gone(str(tmp_path))


def test_a_server_that_cannot_start_is_a_clear_error(tmp_path):
    with pytest.raises(MCPError, match="could not be started or reached: FileNotFoundError"):
        MCPServer.stdio(str(tmp_path / "no-such-server")).open()


@pytest.mark.parametrize("given", [{"timeout": 0}, {"start_timeout": -1}, {"timeout": float("nan")}])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused_and_named(given):
    label = next(iter(given))
    with pytest.raises(MCPError, match=f"MCPServer {label} must be a positive number of seconds"):
        MCPServer.stdio(sys.executable, "-c", "pass", **given)


@pytest.mark.parametrize(("make", "wrong"), [
    (lambda: MCPServer.stdio(sys.executable, "-c", "pass", timout=5), "'timout'"),
    (lambda: MCPServer.http("http://127.0.0.1:9/mcp", errlog=sys.stderr), "'errlog'"),
])
def test_an_option_a_server_does_not_take_is_refused_and_named(make, wrong):
    with pytest.raises(TypeError, match=f"unknown MCPServer.(stdio|http) option {wrong}; the options are .*start_timeout"):
        make()


def test_the_options_stdio_and_http_pass_on_reach_the_server():
    served = MCPServer.http("http://127.0.0.1:9/mcp", name="ledger", timeout=3, start_timeout=9, protocol="legacy")
    assert (served.name, served.timeout, served.start_timeout, served.protocol) == ("ledger", 3, 9, "legacy")
    started = MCPServer.stdio(sys.executable, "-c", "pass", errlog=sys.stderr, timeout=2)
    assert (started.errlog, started.timeout, started.start_timeout) == (sys.stderr, 2, 2)


def test_start_timeout_bounds_starting_and_defaults_to_timeout():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        server = MCPServer.http(f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", timeout=600, start_timeout=1)
        assert (server.timeout, server.start_timeout) == (600, 1)
        with pytest.raises(MCPError, match="did not start within 1 s"):
            server.open()
    finally:
        silent.close()
    assert MCPServer.http("http://127.0.0.1:1/mcp", timeout=7).start_timeout == 7


def test_a_closed_server_refuses_calls_and_unknown_tools_are_named(tmp_path):
    server, _ = _ledger_server(tmp_path)
    with pytest.raises(MCPError, match="is not open"):
        server.call("add", {"a": 1, "b": 2})
    with server, pytest.raises(ValueError, match="has no tool nope; it has add, shout, divide"):
        server.tools(include=["nope"])


# forge tools


def test_forge_tools_lists_a_servers_tools_as_forge_sees_them(tmp_path, capsys):
    ledger = tmp_path / "ledger.jsonl"
    assert forge_main(["tools", "--", sys.executable, str(LEDGER_SERVER), str(ledger), "stdio"]) == 0
    out = capsys.readouterr().out
    assert ": 3 tools" in out.splitlines()[0]
    assert "add  side effect\n  required: a (integer), b (integer)\n  optional: —\n  Add two integers." in out
    assert "shout  side effect\n  required: words (array of string)" in out
    assert _ledger(ledger) == []  # listing calls nothing


def test_forge_tools_says_what_is_wrong_in_one_line(capsys):
    assert forge_main(["tools", "--", "/no/such/server"]) == 1
    assert forge_main(["tools"]) == 1
    err = capsys.readouterr().err
    assert "could not be started or reached" in err and "name one MCP server" in err and "Traceback" not in err


@pytest.mark.skipif(not os.path.exists("/proc"), reason="platform: process checks read /proc")
def test_the_demo_over_the_git_server_ends_verified_and_leaves_no_server(tmp_path):
    from io import StringIO

    from forge.demo import run_demo

    _installed("mcp-server-git")
    out = StringIO()
    report = run_demo(tmp_path / "demo", "mcp", out=out)
    assert report.result.reason == "verified_success", out.getvalue()
    refused, told = report.result.state.observations[1:3]
    assert "max_count: '5' is not of type 'integer'" in str(refused.payload)  # refused before the server saw it
    assert isinstance(told.payload, ToolError)  # the empty repository's history: an error told to the planner
    assert _gone(str(tmp_path))
