"""Cassettes (`forge.testing`, a pytest plugin): a ChatPolicy run recorded against a real
chat-completions server on 127.0.0.1, then replayed with the server gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from chat_server import ChatServer, reply

pytest.importorskip("openai", reason="the llm extra is a test dependency: python3 tasks.py test installs it")

PROJECT = Path(__file__).with_name("cassette_project")
SECRET = "s3cr3t-token"


def _pytest(folder: Path, url: str, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "CHAT_URL": url, "CASSETTE_OUT": str(out)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder), *options],
                          capture_output=True, text=True, timeout=120, env=environment, cwd=folder)


def _script() -> list[dict]:
    return [reply(None, ("call-1", "read_note", {"path": "todo.md", "token": SECRET})),
            reply("todo.md says: buy milk")]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "test_notes_agent.py").write_text((PROJECT / "agent_with_a_cassette.py").read_text())
    return folder


def _tool_calls(out: Path) -> int:
    """How many times the project's tool was called so far (every call, as it was made)."""
    calls = Path(f"{out}.calls")
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def _runs(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_cassette_records_once_then_replays_the_same_trace_with_the_server_gone(project, tmp_path):
    out = tmp_path / "runs.jsonl"
    with ChatServer(_script()) as server:
        recording = _pytest(project, server.url, out)
        url = server.url
    assert recording.returncode == 0, recording.stdout + recording.stderr
    assert len(server.requests) == 2
    cassette = project / "cassettes" / "notes.jsonl"
    text = cassette.read_text()
    assert SECRET not in text and "***" in text
    for line in text.splitlines():
        assert list(json.loads(line)) == sorted(json.loads(line))  # stable key order, one object per line
    tool_calls = _tool_calls(out)
    replaying = _pytest(project, url, out)  # the server is gone: a connection would fail the run
    assert replaying.returncode == 0, replaying.stdout + replaying.stderr
    assert tool_calls == 1 and _tool_calls(out) == tool_calls  # the replay called no tool
    first, second = _runs(out)
    assert (first["recorded"], second["recorded"]) == (True, False)
    assert first["trace"] == second["trace"]
    assert SECRET not in json.dumps(first["trace"])
    assert cassette.read_text() == text


def test_a_replay_that_diverges_fails_naming_the_diverging_call_and_can_be_rerecorded_from_there(project, tmp_path):
    out = tmp_path / "runs.jsonl"
    with ChatServer(_script()) as server:
        assert _pytest(project, server.url, out).returncode == 0
    source = project / "test_notes_agent.py"
    source.write_text(source.read_text().replace("hooks=Hooks(redact=redact))", "hooks=Hooks(redact=redact), max_steps=1)"))
    diverged = _pytest(project, "http://127.0.0.1:9/v1", out)
    assert diverged.returncode == 1
    assert "the run diverged from its cassette" in diverged.stdout
    assert "journal miss: the run ended in 'step_budget_exhausted' without making a request to model" in diverged.stdout


def test_forge_record_none_fails_a_test_whose_cassette_is_missing(project, tmp_path):
    done = _pytest(project, "http://127.0.0.1:9/v1", tmp_path / "out", "--forge-record=none")
    assert done.returncode == 1 and "no forge cassette at" in done.stdout


def test_forge_record_all_records_again_and_rerecord_from_divergence_goes_live_from_there(project, tmp_path):
    out = tmp_path / "runs.jsonl"
    with ChatServer(_script()) as server:
        assert _pytest(project, server.url, out).returncode == 0
    with ChatServer([reply("the note is empty")]) as server:
        source = project / "test_notes_agent.py"
        source.write_text(source.read_text().replace("@tool\n", "@tool(side_effect=True)\n").replace(
            "hooks=Hooks(redact=redact))", "hooks=Hooks(redact=redact), definition='approval', approver=lambda request: True)"))
        again = _pytest(project, server.url, out, "--forge-rerecord-from-divergence")
        assert again.returncode == 0, again.stdout + again.stderr
        assert len(server.requests) == 1  # the first decision replayed; only the one after the divergence asked
    rerecorded = (project / "cassettes" / "notes.jsonl").read_text()
    assert '"kind":"approver"' in rerecorded and SECRET not in rerecorded
    assert _runs(out)[-1]["recorded"] is True
    with ChatServer(_script()) as server:
        everything = _pytest(project, server.url, out, "--forge-record=all")
        assert everything.returncode == 0 and len(server.requests) == 2


def test_a_replay_that_makes_another_call_fails_with_the_call_expected_against_the_call_made(project, tmp_path):
    out = tmp_path / "runs.jsonl"
    with ChatServer(_script()) as server:
        assert _pytest(project, server.url, out).returncode == 0
    source = project / "test_notes_agent.py"
    source.write_text(source.read_text().replace("@tool\n", "@tool(side_effect=True)\n").replace(
        "hooks=Hooks(redact=redact))", "hooks=Hooks(redact=redact), definition='approval', approver=lambda request: True)"))
    diverged = _pytest(project, "http://127.0.0.1:9/v1", out)
    assert diverged.returncode == 1
    assert "journal miss: expected tool 'read_note' at transition 2 (step 1) with sha256" in diverged.stdout
    assert "but the run made approver at transition 2 (step 1)" in diverged.stdout
