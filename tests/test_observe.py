"""The observer seam: every driver tells the same story; logging and OpenTelemetry consume it."""

import asyncio
import logging

from builders import intent, scripted_loop, tool

from forge import Clocks, Hooks, LoggingObserver, LoopObserver, Retry, ToolAttempt, TransientToolError


class Story(LoopObserver):
    def __init__(self):
        self.events = []

    def run_started(self, run):
        self.events.append(("run_started", run.state))

    def transition_started(self, run, state):
        self.events.append(("transition_started", state))

    def tool_attempt(self, run, attempt):
        self.events.append(("tool_attempt", attempt.tool, attempt.number, type(attempt.error).__name__))

    def transition_finished(self, run, record):
        self.events.append(("transition_finished", record.source, record.dest))

    def transition_failed(self, run, record, error):
        self.events.append(("transition_failed", record.source, type(error).__name__))

    def run_finished(self, run, result):
        self.events.append(("run_finished", result.reason))


EXPECTED = [
    ("run_started", "select"),
    ("transition_started", "select"), ("transition_finished", "select", "execute"),
    ("transition_started", "execute"),
    ("tool_attempt", "a", 1, "TransientToolError"), ("tool_attempt", "a", 2, "NoneType"),
    ("transition_finished", "execute", "observe"),
    ("transition_started", "observe"), ("transition_finished", "observe", "verify"),
    ("transition_started", "verify"), ("transition_finished", "verify", "verified_success"),
    ("run_finished", "verified_success"),
]


def _flaky_loop(**options):
    return scripted_loop([tool("a", handler=_Flaky())], [intent("a")], verify=lambda o: True, **options)


class _Flaky:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls == 1:
            raise TransientToolError("503")
        return "ok"


def test_run_tells_observers_every_transition_and_attempt_in_order():
    story = Story()
    _flaky_loop(hooks=Hooks(observers=[story])).run("goal")
    assert story.events == EXPECTED


def test_arun_tells_the_same_story():
    story = Story()
    asyncio.run(_flaky_loop().arun("goal", observers=[story]))
    assert story.events == EXPECTED


def test_debug_tells_the_same_story_once_even_when_stepping_back():
    story = Story()
    session = _flaky_loop(hooks=Hooks(observers=[story])).debug("goal")
    session.continue_()
    session.back()
    session.step()
    assert story.events == EXPECTED


def test_tool_attempts_carry_the_delay_before_them():
    attempts: list[ToolAttempt] = []

    class Attempts(LoopObserver):
        def tool_attempt(self, run, attempt):
            attempts.append(attempt)

    _flaky_loop(retry=Retry(base_delay=0.5),
                clocks=Clocks(random=lambda: 1.0, sleep=lambda s: None)).run("goal", observers=[Attempts()])
    assert [(a.number, a.delay_before) for a in attempts] == [(1, 0.0), (2, 0.5)]
    assert isinstance(attempts[0].error, TransientToolError) and attempts[1].error is None


def test_on_transition_is_an_observer_among_others():
    story, seen = Story(), []
    _flaky_loop(hooks=Hooks(observers=[story])).run("goal", on_transition=lambda record: seen.append(record.sequence))
    assert seen == [1, 2, 3, 4]


def test_an_object_with_no_observer_hooks_is_refused():
    import pytest

    with pytest.raises(TypeError, match="is not a LoopObserver"):
        _flaky_loop(hooks=Hooks(observers=[object()]))


def test_logging_says_run_start_and_end_at_info_and_each_transition_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger="forge")
    _flaky_loop().run("goal")
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "forge"]
    assert records[0] == ("INFO", "run started: 'goal' on machine single_agent in state select")
    assert [level for level, _ in records[1:-1]] == ["DEBUG"] * 4
    assert "select ─choose→ execute" in records[1][1]
    assert records[-1] == ("INFO", "run ended in verified_success (success) after 1 steps, 4 transitions")


def test_forge_configures_no_logging_of_its_own():
    logger = logging.getLogger("forge")
    assert logger.handlers == [] and logger.level == logging.NOTSET


def test_a_logging_observer_can_use_another_logger(caplog):
    caplog.set_level(logging.INFO, logger="myapp.agent")
    _flaky_loop(hooks=Hooks(observers=[LoggingObserver(logging.getLogger("myapp.agent"))])).run("goal")
    assert sum(r.name == "myapp.agent" for r in caplog.records) == 2


def test_a_run_nobody_watches_makes_no_record_per_transition(monkeypatch, caplog):
    import forge.records.trace as trace  # records are made by the trace, when read

    made = []
    real = trace.TransitionRecord
    monkeypatch.delenv("FORGE_TRACE_DIR", raising=False)  # that keeps every trace, so it watches every run

    def counting(*args, **kwargs):
        made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(trace, "TransitionRecord", counting)
    caplog.set_level(logging.INFO, logger="forge")
    result = _flaky_loop().run("goal")
    assert made == []
    assert len(result.trace) == 4 and result.trace[-1].dest == "verified_success"
    made.clear()
    caplog.set_level(logging.DEBUG, logger="forge")
    _flaky_loop().run("goal")
    assert len(made) == 4  # at DEBUG the logging observer reads every transition's record


def test_a_runs_own_observer_does_not_wake_a_hook_the_loops_observers_skip(monkeypatch):
    told = []
    monkeypatch.setattr(LoggingObserver, "transition_finished", lambda self, run, record: told.append(record))
    forge_logger = logging.getLogger("forge")
    monkeypatch.setattr(forge_logger, "level", forge_logger.level)  # put back after the test
    forge_logger.setLevel(logging.INFO)  # the logging observer wants no line per transition

    class Attempts(LoopObserver):
        def tool_attempt(self, run, attempt):
            pass

    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True)
    loop.run("goal", observers=[Attempts()])
    assert told == []
    forge_logger.setLevel(logging.DEBUG)
    loop.run("goal", observers=[Attempts()])
    assert told
