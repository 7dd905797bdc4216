"""Deadlines: a waiting state's `timeout` and its `timeout` edge. In memory an approver that
does not answer in time takes the edge; a durable run waits for an absolute deadline that a
restart does not reset; definitions that get it wrong are refused."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forge import AgentLoop, Finish, Intent, RunStart, tool
from forge.check import check_definition
from forge.machine.loader import load_definition, parse_definition, parse_duration
from forge.records.definition import DefinitionError

HERE = Path(__file__).parent
DEADLINE = HERE / "definitions" / "approval_deadline.toml"
APPROVAL = Path(load_definition("approval").path).read_text()


@tool(side_effect=True)
def publish(text: str) -> str:
    """Publish a text."""
    return f"published {text}"


def policy(goal, state):
    return Intent.call("publish", text="news") if not state.observations else Finish("done")


def finished(observation):
    return observation.tool_name == "finish"


def approve_state_with_deadline(tmp_path, dest_block, edge_dest, timeout='"200ms"'):
    text = APPROVAL.replace("[states.approve]\n", f"[states.approve]\ntimeout = {timeout}\n", 1) + dest_block + f'''
[[transitions]]
source = "approve"
trigger = "timeout"
dest = "{edge_dest}"
guard = "approval_timed_out"
'''
    path = tmp_path / "deadline.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "seconds"), [("15m", 900.0), ("3s", 3.0), ("1.5h", 5400.0), ("2d", 172800.0),
                                               ("500ms", 0.5), (7, 7.0)])
def test_durations_read_as_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "-3s", "0s", "", True])
def test_a_duration_that_is_not_one_is_refused_naming_the_forms(bad):
    with pytest.raises(ValueError, match="a timeout"):
        parse_duration(bad)


def test_an_approver_that_does_not_answer_in_time_takes_the_timeout_edge(tmp_path):
    path = approve_state_with_deadline(tmp_path, '\n[states.approval_expired]\nterminal = true\noutcome = "failure"\n',
                                       "approval_expired")

    def slow(request):
        time.sleep(5)
        return True

    result = AgentLoop([publish], policy, finished, definition=path, approver=slow).run("publish")
    assert result.reason == "approval_expired" and result.side_effects_run == 0
    last = result.trace[-1]
    assert (last.source, last.trigger, last.verdict) == ("approve", "timeout", "timed_out")
    assert "did not answer about publish within 0.2 s" in last.detail["error"]


def test_an_approver_that_answers_in_time_is_not_timed_out(tmp_path):
    path = approve_state_with_deadline(tmp_path, '\n[states.approval_expired]\nterminal = true\noutcome = "failure"\n',
                                       "approval_expired", '"30s"')
    result = AgentLoop([publish], policy, finished, definition=path, approver=lambda request: True).run("publish")
    assert result.reason == "verified_success" and result.side_effects_run == 1


def test_a_timeout_edge_to_the_observation_replans_like_a_rejection(tmp_path):
    path = approve_state_with_deadline(tmp_path, "", "observe")
    asked = []

    def slow(request):
        asked.append(request)
        if len(asked) == 1:
            time.sleep(5)
        return True

    def replanning(goal, state):
        if not state.observations:
            return Intent.call("publish", text="news")
        last = state.observations[-1]
        return Intent.call("publish", text="again") if last.status != "ok" else Finish("done")

    result = AgentLoop([publish], replanning, finished, definition=path, approver=slow).run("publish")
    assert result.reason == "verified_success"
    assert [o.status for o in result.state.observations] == ["retryable_error", "ok", "ok"]
    assert type(result.state.observations[0].payload).__name__ == "ApprovalTimedOut"


def test_an_async_approver_that_does_not_answer_in_time_takes_the_timeout_edge(tmp_path):
    import asyncio

    path = approve_state_with_deadline(tmp_path, '\n[states.approval_expired]\nterminal = true\noutcome = "failure"\n',
                                       "approval_expired")

    async def slow(request):
        await asyncio.sleep(5)
        return True

    result = asyncio.run(AgentLoop([publish], policy, finished, definition=path, approver=slow).arun("publish"))
    assert result.reason == "approval_expired"


def test_a_waiting_state_whose_deadline_passed_starts_a_run_by_its_timeout_edge():
    loop = AgentLoop([publish], policy, finished, definition=DEADLINE, approver=lambda request: None)
    result = loop.run(RunStart("publish", timed_out="approval_required"))
    (record,) = result.trace
    assert (record.source, record.trigger, record.dest) == ("approval_required", "timeout", "approval_expired")
    assert result.reason == "approval_expired" and record.detail["timed_out"] == "no answer in approval_required within 3 s"


def test_the_diagram_draws_the_timeout_edge():
    from forge.diagram import diagram

    source = diagram(str(DEADLINE)).source
    assert "approval_required -> approval_expired" in source and "timeout" in source


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t.replace("[states.approval_required]\ntimeout = \"3s\"\n", "[states.approval_required]\n"),
     "leaves a state with a deadline"),
    (lambda t: t.replace('trigger = "timeout"\ndest = "approval_expired"', 'trigger = "expire"\ndest = "approval_expired"'),
     "needs exactly one transition from it with trigger = 'timeout'"),
    (lambda t: t.replace("[states.select]\n", "[states.select]\ntimeout = \"1m\"\n"), "only a waiting state has a deadline"),
    (lambda t: t.replace('timeout = "3s"', 'timeout = "later"'), "a timeout is a duration"),
])
def test_a_deadline_without_its_edge_or_in_the_wrong_place_is_refused(tmp_path, change, message):
    path = tmp_path / "broken.toml"
    path.write_text(change(DEADLINE.read_text()))
    _, problems = parse_definition(path)
    assert any(message in p.message for p in problems), problems
    with pytest.raises(DefinitionError):
        AgentLoop([publish], policy, finished, definition=path, approver=lambda request: None)


def test_forge_check_accepts_a_definition_with_deadlines():
    assert check_definition(DEADLINE).ok


@pytest.mark.slow
def test_a_run_killed_during_a_3_second_wait_and_restarted_after_it_takes_the_timeout_edge_at_once(tmp_path):
    command = [sys.executable, str(HERE / "durable_deadline.py"), str(tmp_path / "runs.sqlite"), "deadline-run"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        waiting = json.loads(first.stdout.readline())
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert waiting["status"] == "waiting" and first.returncode == -9
    time.sleep(max(0.0, waiting["deadline"] - time.time()) + 0.5)  # the deadline passes while nothing runs
    again = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    end = json.loads(again.stdout.splitlines()[-1])
    assert end["status"] == "finished" and end["reason"] == "approval_expired"
    assert end["left_the_wait_by"] == ["timeout"]  # the run left its wait by the timeout edge, in the same trace
    assert end["deadlines"] == [waiting["deadline"]]  # one deadline, stored once: the restart did not reset it
