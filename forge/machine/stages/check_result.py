"""check_result: the loop's guards (`forge.guardrails`) on a call's result, after the call
and before it is observed (the policy never sees a result a guard refused or before it is
fixed). A call that failed is passed on as it is: there is no result to check. Verdicts:
`ResultGuarding`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from enum import StrEnum

from forge.agent.stopping import StopController
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.check_call import TRIPPED_STATE, VALUE_LIMIT, guarded, tripped
from forge.records.abstract import NEEDS, AbstractRun
from forge.records.effects import Steps
from forge.records.outcome import StageOutcome
from forge.records.trace import summary

__all__ = ["GUARDS", "SPEC", "ResultGuarding"]


class ResultGuarding(StrEnum):
    """check_result's verdicts."""

    RESULT_PASSED = "result_passed"
    TRIPPED = "tripped"
    TOLD = "told"


def _check_result(run: Run) -> Steps[StageOutcome]:
    facts = run.facts
    assert facts.action is not None and facts.status is not None, "check_result follows call_tool"
    tool = facts.action.tool_name
    if facts.status != CallOutcome.OK:
        return StageOutcome(ResultGuarding.RESULT_PASSED, {"tool": tool, "guards": []})
    value, checked, trip = yield from guarded(run, "result", tool, facts.payload)
    detail = {"tool": tool, "guards": checked}
    if trip is not None:
        return tripped(trip, tool, facts.payload, detail, (ResultGuarding.TRIPPED, ResultGuarding.TOLD))
    if value is facts.payload:
        return StageOutcome(ResultGuarding.RESULT_PASSED, detail)
    return StageOutcome(ResultGuarding.RESULT_PASSED, {**detail, "payload": summary(value, VALUE_LIMIT)},
                        facts={"payload": value})


def _result_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None or run.status is None:
        yield NEEDS, run
        return
    yield ResultGuarding.RESULT_PASSED, run
    yield ResultGuarding.TRIPPED, run
    yield ResultGuarding.TOLD, replace(run, status=CallOutcome.RETRYABLE_ERROR)


SPEC = ActionSpec("check_result", _check_result, frozenset(ResultGuarding),
                  "the loop's guards on a call's result, before it is observed", _result_model,
                  "a call's outcome (from call_tool)")
GUARDS = (
    GuardSpec("result_passed", "check_result", ResultGuarding.RESULT_PASSED),
    GuardSpec("result_tripped", "check_result", ResultGuarding.TRIPPED, TRIPPED_STATE),
    GuardSpec("result_told", "check_result", ResultGuarding.TOLD),
)
