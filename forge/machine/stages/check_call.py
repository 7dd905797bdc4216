"""check_call: the loop's guards (`forge.guardrails`) on the call just chosen (its arguments,
before any approval) or on the final answer just given. Verdicts: `Guarding`.

Each guard that covers the call (its tool) or the answer checks the value in turn, as a
call of the run's journal (kind `guard`): a fix hands the next guard, and the call or the
answer, the changed value; a trip stops there. A call no guard covers passes as
`call_unguarded`, an edge of its own: `forge check --require guarded-side-effects` finds a
side-effecting tool that reaches a call that way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from enum import StrEnum
from typing import Any

from forge.agent.stopping import StopController
from forge.guardrails import Guard, GuardTripped, judged
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.policy import Finish, Intent
from forge.records.abstract import NEEDS, AbstractRun
from forge.records.effects import Call, Steps
from forge.records.outcome import StageOutcome
from forge.records.trace import summary

__all__ = ["GUARDS", "SPEC", "TRIPPED_STATE", "Guarding", "covering", "guarded", "tripped"]

TRIPPED_STATE = "guardrail_tripped"
"""The terminal state a guard that stops the run ends it in."""

VALUE_LIMIT = 300
"""How much of a checked value the trace keeps in a guard's detail."""


class Guarding(StrEnum):
    """check_call's verdicts."""

    CALL_PASSED = "call_passed"
    CALL_UNGUARDED = "call_unguarded"
    ANSWER_PASSED = "answer_passed"
    TRIPPED = "tripped"
    TOLD = "told"


def guarded(run: Run, on: str, tool: str | None, value: Any) -> Steps[tuple[Any, list[str], tuple[str, str, bool] | None]]:
    """Run every guard of the loop that covers `on` of `tool` over `value`, in order: the
    value after their fixes, the names of the guards that checked it (each fix said as
    `name: why`), and the trip, if one did, as (guard, reason, whether it stops the run)."""
    checked: list[str] = []
    for guard in covering(run, on, tool):
        verdict = yield Call(judged, (guard, value), guard.called, "guard", guard.name,
                             (tool, value))  # what it is asked: hashed only if written
        if "trip" in verdict:
            return value, checked, (guard.name, str(verdict["trip"]), guard.on_trip == "stop")
        if "fix" in verdict:
            value = verdict["fix"]
            checked.append(f"{guard.name}: fixed" + (f" ({verdict.get('why')})" if verdict.get("why") else ""))
        else:
            checked.append(guard.name)
    return value, checked, None


def covering(run: Run, on: str, tool: str | None) -> tuple[Guard, ...]:
    """The loop's guards that check `on` of a call of `tool` (or the answer), in order."""
    config = run.config
    key = (on, tool)
    found = config.covering.get(key)
    if found is None:
        found = config.covering[key] = tuple(guard for guard in config.guards if guard.covers(on, tool))
    return found


def tripped(trip: tuple[str, str, bool], tool: str | None, value: Any, detail: dict[str, Any],
            verdicts: tuple[str, str | None] = (Guarding.TRIPPED, Guarding.TOLD)) -> StageOutcome:
    """The outcome of a guard that refused `value`, with the stage's own `verdicts`: the
    run ends in `guardrail_tripped` (the first), or the refusal is recorded as the call's
    retryable observation (the second; a stage with none always stops)."""
    guard, reason, stops = trip
    stopped, told = verdicts
    error = GuardTripped(guard, reason, tool)
    detail = {**detail, "guard": guard, "tripped": reason, "value": summary(value, VALUE_LIMIT)}
    if stops or told is None:
        return StageOutcome(stopped, detail, facts={"error": error})
    return StageOutcome(told, {**detail, "status": "retryable_error"},
                        facts={"status": "retryable_error", "payload": error})


def _check_call(run: Run) -> Steps[StageOutcome]:
    facts = run.facts
    assert facts.action is not None, "check_call follows select_tool's choice or answer"
    if isinstance(facts.payload, Finish) and facts.intent is None:
        answer = facts.payload.answer
        value, checked, trip = yield from guarded(run, "answer", None, answer)
        detail: dict[str, Any] = {"guards": checked}
        if trip is not None:
            return tripped(trip, None, answer, detail)
        changed = {"payload": Finish(value)} if value is not answer else {}
        return StageOutcome(Guarding.ANSWER_PASSED, detail, facts=changed)  # type: ignore[arg-type]
    intent = facts.intent
    assert intent is not None, "check_call follows select_tool's choice of a call"
    tool = facts.action.tool_name
    if not covering(run, "arguments", tool):
        return StageOutcome(Guarding.CALL_UNGUARDED, {"tool": tool, "guards": []})
    given = dict(intent.arguments)  # a guard's own copy: it may change it, the intent's stays
    value, checked, trip = yield from guarded(run, "arguments", tool, given)
    detail = {"tool": tool, "guards": checked}
    if trip is not None:
        return tripped(trip, tool, intent.arguments, detail)
    if value is given and given == intent.arguments:
        return StageOutcome(Guarding.CALL_PASSED, detail)
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        from forge.errors import WrongType

        raise WrongType(f"a guard of {tool}'s arguments fixed them to {value!r:.200}: arguments are a dict by name")
    fixed = Intent(intent.capabilities, value, intent.idempotency_key, tool=intent.tool, call_id=intent.call_id)
    return StageOutcome(Guarding.CALL_PASSED, {**detail, "arguments": summary(value, VALUE_LIMIT)},
                        facts={"intent": fixed})


def _check_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None:
        yield NEEDS, run
        return
    if run.status is None:  # a call chosen, not yet made
        yield Guarding.CALL_PASSED, run
        yield Guarding.CALL_UNGUARDED, run
    else:  # an answer given
        yield Guarding.ANSWER_PASSED, run
    yield Guarding.TRIPPED, run
    yield Guarding.TOLD, replace(run, status=CallOutcome.RETRYABLE_ERROR)  # recorded as an observation next


SPEC = ActionSpec("check_call", _check_call, frozenset(Guarding),
                  "the loop's guards on the call chosen (before approval) or the answer given",
                  _check_model, "a call chosen or an answer given by select_tool")
GUARDS = (
    GuardSpec("guards_passed", "check_call", Guarding.CALL_PASSED),
    GuardSpec("call_unguarded", "check_call", Guarding.CALL_UNGUARDED),
    GuardSpec("answer_passed", "check_call", Guarding.ANSWER_PASSED),
    GuardSpec("guard_tripped", "check_call", Guarding.TRIPPED, TRIPPED_STATE),
    GuardSpec("guard_told", "check_call", Guarding.TOLD),
)
