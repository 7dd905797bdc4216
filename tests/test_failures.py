"""A failure is a state: whatever raises inside a transition ends the run in fatal_error,
consistently, with the exception in result.error and the trace's last record naming the
state and the hook that failed."""

from pathlib import Path

import pytest
from builders import intent, scripted_loop, tool

from forge import AgentLoop, Hooks, LoopObserver, ScriptedPolicy, Stage, TransitionCallbacks, read_trace, write_trace
from forge.diagram import diagram_text
from forge.machine.stages import BUILTIN_STAGES

BUDGETED = Path(__file__).parent / "definitions" / "budgeted.toml"


class Boom(Exception):
    pass


def _assert_failed(result, state, hook_prefix):
    assert result.reason == "fatal_error" and result.outcome == "failure"
    assert isinstance(result.error, Boom)
    last = result.trace[-1]
    assert (last.source, last.trigger, last.dest) == (state, "fail", "fatal_error")
    assert last.detail["failed"].startswith(hook_prefix), last.detail
    assert last.detail["error"] == "Boom: bang"
    assert [r.sequence for r in result.trace] == list(range(1, len(result.trace) + 1))
    for earlier, later in zip(result.trace, result.trace[1:], strict=False):
        assert later.source == earlier.dest  # the records chain: nothing half-recorded


def test_a_user_stage_action_that_raises_ends_in_fatal_error_named_in_the_trace():
    def broken(run):
        raise Boom("bang")

    loop = AgentLoop([tool("a")], ScriptedPolicy([intent("a")]), lambda o: True, definition=BUDGETED,
                     stages={"check_budget": Stage(broken, {"within", "over"},
                                                   guards={"within_budget": "within", "over_budget": "over"},
                                                   stops_in={"over_budget": "budget_exceeded"})})
    _assert_failed(loop.run("goal"), "budget", "action check_budget")


def test_a_guard_that_raises_ends_in_fatal_error_named_in_the_trace():
    def raising(verdict):
        raise Boom("bang")

    stages = BUILTIN_STAGES.with_guard_test("tool_choice_ambiguous", raising)
    result = AgentLoop([tool("a")], ScriptedPolicy([intent("a")]), lambda o: True, stages=stages).run("goal")
    _assert_failed(result, "select", "guard tool_choice_ambiguous")
    assert result.state.observations == []  # the tool never ran


def _raiser(event):
    raise Boom("bang")


@pytest.mark.parametrize(("callbacks", "state", "hook"), [
    (TransitionCallbacks.of(before={"call": _raiser}), "execute", "before call"),
    (TransitionCallbacks.of(on_exit={"execute": _raiser}), "execute", "on_exit execute"),
    (TransitionCallbacks.of(on_enter={"observe": _raiser}), "observe", "on_enter observe"),
    (TransitionCallbacks.of(after={"call": _raiser}), "observe", "after call"),
])
def test_a_user_callback_that_raises_ends_in_fatal_error_named_in_the_trace(callbacks, state, hook):
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True, hooks=Hooks(callbacks=callbacks))
    result = loop.run("goal")
    _assert_failed(result, state, hook)
    if state == "observe":  # it failed after the state changed: that transition is recorded first
        assert (result.trace[-2].source, result.trace[-2].dest) == ("execute", "observe")


@pytest.mark.parametrize("hook", ["transition_started", "transition_finished", "tool_attempt_started", "tool_attempt"])
def test_an_observer_that_raises_ends_in_fatal_error_named_in_the_trace(hook):
    class Failing(LoopObserver):
        pass

    def fail(self, run, *args):
        if run.state == "execute":  # transition_finished: just after select -> execute
            raise Boom("bang")

    setattr(Failing, hook, fail)
    result = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True).run("goal", observers=[Failing()])
    _assert_failed(result, "execute", f"observer Failing.{hook}")


def test_an_observer_failing_while_told_of_a_failure_is_noted_on_the_error():
    class Noisy(LoopObserver):
        def transition_failed(self, run, record, error):
            raise RuntimeError("and me")

    result = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True,
                           hooks=Hooks(callbacks=TransitionCallbacks.of(before={"call": _raiser}))).run(
        "goal", observers=[Noisy()])
    assert isinstance(result.error, Boom)
    assert any("and me" in note for note in result.error.__notes__)


def test_a_failed_run_still_draws_replays_and_round_trips(tmp_path):
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition

    result = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True,
                           hooks=Hooks(callbacks=TransitionCallbacks.of(on_enter={"observe": _raiser}))).run("goal")
    path = write_trace(result.trace, tmp_path / "run.jsonl")
    assert read_trace(path) == result.trace
    dot = diagram_text("single_agent", "dot", result.trace)
    assert 'observe -> fatal_error [label="fail ×1"' in dot
    session = ReplaySession(load_definition(), result.trace)
    while not session.done:
        session.step()
    assert session.state == "fatal_error"


def test_keyboard_interrupt_is_not_turned_into_a_run_failure():
    def interrupted(**kwargs):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        scripted_loop([tool("a", handler=interrupted)], [intent("a")]).run("goal")


def test_a_user_stage_returning_an_undeclared_verdict_is_a_clear_failure():
    loop = AgentLoop([tool("a")], ScriptedPolicy([intent("a")]), lambda o: True, definition=BUDGETED,
                     stages={"check_budget": Stage(lambda run: "maybe", {"within", "over"},
                                                   guards={"within_budget": "within", "over_budget": "over"})})
    result = loop.run("goal")
    assert result.reason == "fatal_error"
    assert "returned 'maybe', not one of its declared verdicts (over, within)" in str(result.error)
