"""Durable forks, for real: a stored 20-step run forked at K in a new process, killed with
SIGKILL midway, recovered; the parent untouched, nothing before K called again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forge import TransitionRecord

AGENT = str(Path(__file__).with_name("durable_counter.py"))

pytestmark = pytest.mark.slow


def counter(db: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, AGENT, *arguments[:1], str(db), *arguments[1:]], capture_output=True,
                          text=True, timeout=180)


def trace_of(stdout: str) -> tuple[list[TransitionRecord], dict]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [TransitionRecord.from_json(line) for line in lines[:-1]], lines[-1]


def calls_of(db: Path) -> list[str]:
    path = Path(str(db) + ".calls")
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    db = tmp_path_factory.mktemp("fork") / "runs.sqlite"
    done = counter(db, "run", "parent")
    assert done.returncode == 0, done.stderr[-3000:]
    trace, end = trace_of(done.stdout)
    assert end["reason"] == "verified_success" and len(calls_of(db)) == 39
    return db, trace


def _tool_transition(trace: list[TransitionRecord], n: int) -> int:
    return next(r.sequence for r in trace if r.source == "execute" and r.step == n)


def test_a_durable_fork_killed_midway_recovers_calling_nothing_before_k_and_leaves_its_parent_alone(parent):
    db, parent_trace = parent
    at = 10
    assert (parent_trace[at - 1].source, parent_trace[at - 1].step) == ("execute", 3)  # step 3's tool call
    before = len(calls_of(db))
    killed = counter(db, "fork", "parent", str(at), "child", "--patch", '{"tool_result": 999}',
                     "--crash-at", str(at + 12))
    assert killed.returncode == -9, killed.stderr[-3000:]
    recovered = counter(db, "fork", "parent", str(at), "child", "--patch", '{"tool_result": 999}')
    assert recovered.returncode == 0, recovered.stderr[-3000:]
    trace, end = trace_of(recovered.stdout)
    assert end["reason"] == "verified_success"
    assert end["forked_from"] == {"run_id": "parent", "transition": at, "patch": {"tool_result": 999}}
    made = calls_of(db)[before:]
    assert not any(line in made for line in [f"tool {n}" for n in range(1, 4)])  # 1, 2 replayed; 3 patched
    assert not any(line in made for line in [f"policy {n}" for n in range(1, 4)])  # decided before K: replayed
    assert {f"tool {n}" for n in range(4, 20)} <= set(made)  # live after K (some twice: the kill)
    assert trace[at - 1].detail["patched"] == {"tool_result": 999}
    assert trace[at].detail["payload"] == "999"
    assert [r.detail for r in trace[: at - 1]] == [r.detail for r in parent_trace[: at - 1]]
    again = counter(db, "run", "parent")  # the parent, as stored: untouched
    assert trace_of(again.stdout)[0] == parent_trace


def test_forge_runs_fork_queues_a_fork_a_worker_runs_and_forge_diff_finds_the_divergence(parent, tmp_path):
    db, parent_trace = parent
    at = _tool_transition(parent_trace, 5)
    patch = tmp_path / "patch.json"
    patch.write_text('{"tool_result": -5}')
    forked = subprocess.run([sys.executable, "-m", "forge", "runs", "fork", "parent", "--at", str(at), "--patch",
                             str(patch), "--run-id", "queued-fork", "--db", str(db)], capture_output=True, text=True,
                            timeout=120)
    assert forked.returncode == 0, forked.stderr
    assert "queued-fork" in forked.stdout
    worker = subprocess.Popen([sys.executable, AGENT, "worker", str(db)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        from forge.durable.runs import StoredRuns

        with StoredRuns(db) as runs:
            result = runs.wait("queued-fork", timeout=120)
        assert result.status == "finished" and result.reason == "verified_success"
        assert result.trace[at - 1].detail["patched"] == {"tool_result": -5}
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    shown = subprocess.run([sys.executable, "-m", "forge", "diff", "parent", "queued-fork", "--db", str(db)],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 1, shown.stderr
    assert shown.stdout.splitlines()[0].startswith(f"the runs diverge at transition {at} ")
