"""Forking in the debugger: `fork` at the current transition (optionally with a patched
observation) then stepping on live, and `forge debug RUN.jsonl --at K`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

from forge import Finish, Patch, write_trace
from forge.machine.fork import PatchRefused
from forge.scenario import load_scenario

COUNTER = str(Path(__file__).parents[1] / "examples" / "counter.py")
PROMPT = r"\(forge (\w+) step (\d+)\) "


@pytest.fixture
def counter():
    scenario = load_scenario(COUNTER)
    calls = scenario.loop.tools[0].handler.__globals__["calls"]
    calls.clear()
    yield scenario.loop, calls
    scenario.close()


def test_a_session_forked_with_a_payload_answers_the_next_tool_call_with_it_then_runs_live(counter):
    loop, calls = counter
    session = loop.debug("count to three")
    for _ in range(5):  # step 1, then select of step 2: the next transition calls the tool
        session.step()
    assert session.state == "execute" and calls == [1]
    forked = session.fork(Patch.tool_result(99))
    assert forked.state == "execute" and len(forked.trace) == 5 and calls == [1]  # replayed, not run again
    record = forked.step()
    assert record.detail["patched"] == {"tool_result": 99} and calls == [1]
    forked.continue_()
    assert forked.done and forked.result.reason == "verified_success"
    assert calls == [1, 3] and forked.loop_state.observations[1].payload == 99
    assert session.state == "execute"  # the session forked from is left as it was


def test_a_patch_that_does_not_fit_the_next_transition_is_refused(counter):
    loop, _ = counter
    session = loop.debug("count to three")
    with pytest.raises(PatchRefused, match="runs select_tool, which calls the policy; a tool_result patch does not fit"):
        session.fork(Patch.tool_result(1))


def test_a_session_stepped_back_forks_with_the_call_it_recorded_ahead(counter):
    loop, _ = counter
    session = loop.debug("count to three")
    session.continue_()
    for _ in range(10):  # back to just before step 2's tool call
        session.back()
    assert session.state == "execute" and session.replayable == 10
    forked = session.fork(Patch.tool_error("disk full", retryable=True))
    forked.continue_()
    assert forked.loop_state.observations[1].status == "retryable_error"
    assert forked.result.reason == "verified_success"


def _spawn(*arguments: str) -> pexpect.spawn:
    env = dict(os.environ, NO_COLOR="1")
    child = pexpect.spawn(sys.executable, ["-m", "forge", "debug", *arguments], env=env, encoding="utf-8",
                          timeout=60, dimensions=(50, 220))
    child.expect(PROMPT)
    return child


def _command(child: pexpect.spawn, line: str) -> str:
    child.sendline(line)
    child.expect(PROMPT)
    return child.before


def test_forge_debug_forks_with_a_payload_and_steps_on_live():
    child = _spawn(COUNTER)
    try:
        _command(child, "step 5")
        said = _command(child, 'fork payload {"n": 40}')
        assert "forked at transition 6, its tool call answered with {'tool_result': {'n': 40}}" in said
        _command(child, "step")
        assert child.match.groups() == ("observe", "2")
        _command(child, "step")
        assert '"n": 40' in _command(child, "obs")
        assert "run ended in verified_success" in _command(child, "continue")
    finally:
        child.close(force=True)


@pytest.fixture
def recorded(tmp_path, counter):
    loop, _ = counter
    result = loop.run("count to three")
    return write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal), result


def test_forge_debug_opens_a_recorded_run_positioned_at_k(recorded):
    path, result = recorded
    child = _spawn(str(path), "--at", "6")
    try:
        assert child.match.groups() == (result.trace[4].dest, str(result.trace[4].step))
        assert "fork goes on live, which needs the loop's code" in _command(child, "fork") + child.before
    finally:
        child.close(force=True)


def test_forge_debug_with_the_scenario_replays_the_recording_then_forks_live(recorded):
    path, _ = recorded
    child = _spawn(str(path), "--at", "6", "--scenario", COUNTER)
    try:
        assert child.match.groups() == ("execute", "2")
        _command(child, "fork error try again")
        said = _command(child, "continue")
        assert "run ended in verified_success" in said
        assert "retryable_error" in _command(child, "obs")
    finally:
        child.close(force=True)


def test_forge_debug_at_past_the_run_says_which_transitions_it_has(recorded, capsys):
    path, result = recorded
    from forge.cli import main

    assert main(["debug", str(path), "--at", "999"]) == 1
    assert f"has transitions 1 to {len(result.trace)}, not 999" in capsys.readouterr().err
    assert isinstance(result.state.observations[-1].payload, Finish)
