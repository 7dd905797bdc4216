"""check_input: the loop's guards (`forge.guardrails`) on the run's input, its goal, before
the policy is asked anything: when the run starts, and each time it goes on after a
person's answer (a reply to a question is the goal from then on). A fix changes the goal
the policy is given; a trip ends the run in `guardrail_tripped` (there is no call to
refuse, so an input guard always stops). Verdicts: `InputGuarding`."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from forge.agent.stopping import StopController
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.check_call import TRIPPED_STATE, VALUE_LIMIT, guarded, tripped
from forge.records.abstract import AbstractRun
from forge.records.effects import Steps
from forge.records.outcome import StageOutcome
from forge.records.trace import summary

__all__ = ["GUARDS", "SPEC", "InputGuarding"]


class InputGuarding(StrEnum):
    """check_input's verdicts."""

    INPUT_PASSED = "input_passed"
    TRIPPED = "tripped"


def _check_input(run: Run) -> Steps[StageOutcome]:
    goal = run.goal  # as given: a guard of the input checks it afresh each time the run starts or goes on
    value, checked, trip = yield from guarded(run, "input", None, goal)
    detail = {"guards": checked}
    if trip is not None:
        return tripped(trip, None, goal, detail, (InputGuarding.TRIPPED, None))
    if value is goal:
        return StageOutcome(InputGuarding.INPUT_PASSED, detail)
    if not isinstance(value, str):
        from forge.errors import WrongType

        raise WrongType(f"a guard of the input fixed the goal to {value!r:.200}: a goal is text")
    return StageOutcome(InputGuarding.INPUT_PASSED, {**detail, "goal": summary(value, VALUE_LIMIT)},
                        facts={"goal": value})


def _input_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    yield InputGuarding.INPUT_PASSED, run
    yield InputGuarding.TRIPPED, run


SPEC = ActionSpec("check_input", _check_input, frozenset(InputGuarding),
                  "the loop's guards on the run's goal, before the policy is asked", _input_model)
GUARDS = (
    GuardSpec("input_passed", "check_input", InputGuarding.INPUT_PASSED),
    GuardSpec("input_tripped", "check_input", InputGuarding.TRIPPED, TRIPPED_STATE),
)
