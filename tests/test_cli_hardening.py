"""The command line at its edges: a loop no worker serves, a busy port, a file that is not a
trace. Each refusal is one line that names what was wrong."""

from __future__ import annotations

import signal
import socket
import subprocess

import pytest
from builders import forge
from test_worker_stop import start_worker


def stopped(worker: subprocess.Popen[str]) -> str:
    worker.send_signal(signal.SIGTERM)
    return worker.communicate(timeout=60)[1]


@pytest.mark.slow
def test_forge_submit_refuses_a_loop_no_live_worker_serves_naming_those_they_do(tmp_path):
    db = str(tmp_path / "runs.sqlite")
    worker = start_worker(db, tmp_path / "ledger")
    try:
        done = forge("submit", "do it", "--loop", "nosuch", "--db", db)
    finally:
        stopped(worker)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no live worker serves a loop named 'nosuch'" in done.stderr
    assert "filing" in done.stderr


@pytest.mark.slow
def test_a_queued_run_of_a_loop_the_worker_lacks_ends_in_fatal_error_saying_why(tmp_path):
    db = str(tmp_path / "runs.sqlite")
    assert forge("submit", "do it", "--loop", "nosuch", "--db", db, "--run-id", "lost").returncode == 0  # none live
    worker = start_worker(db, tmp_path / "ledger")
    try:
        from forge.durable.runs import StoredRuns

        with StoredRuns(db) as runs:
            ended = runs.wait("lost", timeout=60)
    finally:
        log = stopped(worker)
    assert (ended.status, ended.reason, ended.outcome) == ("finished", "fatal_error", "failure")
    shown = forge("runs", "show", "lost", "--db", db).stdout
    assert "fatal_error" in shown and "no durable loop named 'nosuch'" in shown
    assert "Traceback" not in log


def test_forge_ui_on_a_busy_port_says_so_in_one_line_and_exits_2(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = forge("ui", "--db", str(tmp_path / "runs.sqlite"), "--port", str(port), timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"forge: error: port {port} on 127.0.0.1 is in use: choose another with --port N " \
                          "(or --port 0 for any free one)\n"
    assert not (tmp_path / "runs.sqlite").exists()


def test_forge_cover_refuses_a_named_file_that_is_not_a_trace_in_one_line(tmp_path):
    (tmp_path / "bad.jsonl").write_text("not json\n")
    done = forge("cover", "single_agent", str(tmp_path / "bad.jsonl"))
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr == (f"forge: error: not a trace: {tmp_path / 'bad.jsonl'}:1: not a JSON line (expecting value "
                           "at column 1); a trace holds one JSON object per line\n")


def test_a_file_that_is_not_json_lines_is_named_with_its_line_in_plain_words(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"v": 2}\n{oops\n')
    done = forge("inspect", str(path), "-o", str(tmp_path / "page.html"))
    assert done.returncode != 0
    assert f"{path}:" in done.stderr and "Expecting" not in done.stderr and "char " not in done.stderr


def test_forge_check_takes_a_loop_as_forge_diagram_does(tmp_path):
    """`forge check PATH.py:LOOP` checks the loop's definition with its own limits (issue 54, item 6)."""
    from builders import forge

    (tmp_path / "shop.py").write_text(
        "from forge import AgentLoop, Finish, Tool\n"
        "loop = AgentLoop([Tool('read', {'read'}, lambda: 1)], lambda goal, state: Finish('ok'), lambda o: True,\n"
        "                 max_steps=5)\n"
        "notaloop = 3\n")
    checked = forge("check", "shop.py:loop", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "max_steps=5" in checked.stdout and checked.stdout.rstrip().endswith("ok")
    refused = forge("check", "shop.py:notaloop", cwd=tmp_path)
    assert refused.returncode == 1 and "forge check 'shop.py:notaloop': that is a int, not an AgentLoop" in refused.stderr
