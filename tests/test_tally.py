"""One count of steps everywhere, and a run's time split into working and waiting
(`forge.records.tally`, issue 54 item 4): the count read back from a run's transitions is
the run's own `LoopResult.steps` whatever the run did, and the time after each transition
into a needs-input state is waiting."""

from dataclasses import replace

import pytest

from forge import AgentLoop, Finish, Intent, tool
from forge.machine.loader import load_definition
from forge.records.tally import Timing, seconds_text, steps_taken, timing


@tool
def look(n: int) -> int:
    """Look at n."""
    return n


@tool(side_effect=True)
def send(to: str) -> str:
    """Send to someone."""
    return f"sent to {to}"


def _taken(loop, goal="g"):
    result = loop.run(goal)
    return result, steps_taken(loop.definition, result.trace)


def test_a_run_of_single_calls_counts_one_step_per_call_and_one_for_the_answer():
    def policy(goal, state):
        return Intent.call("look", n=len(state.observations)) if len(state.observations) < 3 else Finish("done")

    result, taken = _taken(AgentLoop([look], policy, lambda o: o.tool_name == "finish"))
    assert (result.reason, result.steps, taken) == ("verified_success", 4, 4)


def test_a_batch_of_calls_counts_one_step_per_call_though_its_transitions_share_one_step_number():
    def policy(goal, state):
        return [Intent.call("look", n=1), Intent.call("look", n=2), Intent.call("look", n=3)] \
            if not state.observations else Finish("done")

    result, taken = _taken(AgentLoop([look], policy, lambda o: o.tool_name == "finish"))
    assert (result.steps, taken) == (4, 4)
    assert max(record.step for record in result.trace) == 4  # the answer's step: the batch was steps 1 to 3


def test_a_run_waiting_for_approval_has_taken_the_steps_before_the_one_it_waits_in():
    def policy(goal, state):
        return Intent.call("look", n=1) if not state.observations else Intent.call("send", to="bob")

    result, taken = _taken(AgentLoop([look, send], policy, lambda o: False, definition="approval", approver=lambda r: None))
    assert (result.reason, result.steps, taken) == ("approval_required", 1, 1)
    assert result.trace[-1].step == 2  # it waits in step 2


def test_a_run_whose_policy_fails_counts_only_the_steps_it_finished():
    def policy(goal, state):
        if state.observations:
            raise RuntimeError("the policy broke")
        return Intent.call("look", n=1)

    result, taken = _taken(AgentLoop([look], policy, lambda o: False))
    assert (result.reason, result.steps, taken) == ("fatal_error", 1, 1)


def _records(*moves):
    """Transitions of the approval definition at the given wall-clock times."""
    from forge.records.trace import TransitionRecord

    return [TransitionRecord(n, 1, source, "t", dest, at=at) for n, (source, dest, at) in enumerate(moves, 1)]


APPROVAL = load_definition("approval")


def test_the_time_after_a_transition_into_a_state_that_needs_input_is_waiting():
    records = _records(("select", "approve", 100.0), ("approve", "approval_required", 100.5),
                       ("approval_required", "select", 160.5), ("select", "observe", 161.0))
    assert timing(APPROVAL, records) == Timing(working=1.0, waiting=60.0)


def test_a_run_that_never_waited_spent_all_its_time_working():
    records = _records(("select", "execute", 10.0), ("execute", "observe", 10.25))
    assert timing(APPROVAL, records) == Timing(working=0.25, waiting=0.0)


def test_transitions_without_wall_clock_times_have_no_timing():
    assert timing(APPROVAL, [replace(record, at=0.0) for record in _records(("select", "execute", 1.0))]) is None
    assert timing(APPROVAL, []) is None


@pytest.mark.parametrize(("seconds", "text"), [(0.04, "40 ms"), (12.46, "12.5 s"), (185, "3 min 5 s"),
                                               (7800, "2 h 10 min"), (3600, "1 h")])
def test_durations_read_as_people_say_them(seconds, text):
    assert seconds_text(seconds) == text


def test_a_timing_says_waiting_only_when_the_run_waited():
    assert (str(Timing(1.2, 0.0)), str(Timing(1.2, 185.0))) == ("1.2 s working", "1.2 s working, 3 min 5 s waiting")


def test_working_time_kept_up_as_the_trace_grows_leaves_the_waits_out():
    from forge.records.tally import WorkingTime

    records = _records(("select", "approve", 100.0), ("approve", "approval_required", 100.5),
                       ("approval_required", "select", 160.5), ("select", "observe", 161.0))
    working = WorkingTime(frozenset({"approval_required"}))
    assert working.of(records[:2], now=101.0) == 0.5  # waiting now: the time since it began waiting is not work
    assert working.of(records, now=162.0) == pytest.approx(2.0)  # 62 s in all, 60 of them waiting
    assert working.of(records, now=163.0) == pytest.approx(3.0)  # read again: each wait counted once


def test_a_run_past_its_time_budget_asks_its_policy_nothing_more_and_ends_in_budget_exhausted():
    import time

    from forge import Limits
    from forge.records.tally import TimeBudgetExhausted

    asked: list[int] = []

    @tool
    def slow(n: int) -> int:
        """Take a fifth of a second."""
        time.sleep(0.2)
        return n

    def policy(goal, state):
        asked.append(len(state.observations))
        return Intent.call("slow", n=len(state.observations))

    loop = AgentLoop([slow], policy, lambda o: False, max_steps=50, limits=Limits(time_budget=0.5, repeat_limit=99))
    result = loop.run("work")
    assert result.reason == "budget_exhausted" and isinstance(result.error, TimeBudgetExhausted)
    assert result.error.worked >= 0.5 and "the time budget is 500 ms of work" in str(result.error)
    assert result.steps <= 3 and len(asked) == result.steps  # each call takes 0.2 s: asked nothing after
    assert (result.trace[-1].dest, result.trace[-1].detail["time_budget_s"]) == ("budget_exhausted", 0.5)


def test_a_time_budget_is_a_number_of_seconds_above_zero():
    from forge import Limits, UsageError

    with pytest.raises(UsageError, match="time_budget is a number of seconds above 0, got 0"):
        Limits(time_budget=0)
