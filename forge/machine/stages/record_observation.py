"""record_observation: `LoopState.record` the call's outcome, or the outcomes of calls made
together in the order asked (the engine records the observations the stage returns).
Verdict: `Recording`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from enum import StrEnum
from typing import Any

from forge.agent.stopping import StopController
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.fingerprint import NotFingerprintable, request_fingerprint
from forge.output import AnswerInvalid
from forge.policy import Finish
from forge.records.abstract import NEEDS, AbstractRun
from forge.records.effects import Steps
from forge.records.outcome import StageOutcome

__all__ = ['GUARDS', 'SPEC', 'Recording', 'repeat_key']


class Recording(StrEnum):
    """record_observation's verdict."""

    RECORDED = "recorded"


def _record_observation(run: Run) -> Steps[StageOutcome]:
    facts = run.facts
    if facts.batch:
        return _record_together(run)
    assert facts.action is not None and facts.status is not None, "record follows call_tool"
    name, payload = facts.action.tool_name, facts.payload
    action = repeat_key(run, name, payload, facts.intent.arguments if facts.intent else {})
    # the observation is recorded by the engine; its sequence is the record's step
    if facts.repeat_of is None:
        return StageOutcome(Recording.RECORDED, {"status": facts.status}, observe=(name, facts.status, payload, action))
    # a call answered from the registry: its observation says which step ran it (and the fact is spent)
    return StageOutcome(Recording.RECORDED, {"status": facts.status}, facts={"repeat_of": None},
                        observe=(name, facts.status, payload, action, facts.repeat_of))
    yield  # a generator like every action, though it needs nothing from outside


def repeat_key(run: Run, name: str, payload: Any, arguments: Mapping[str, Any]) -> str:
    """What repetition counts the call as: its tool (`repeat_by="tool"`), else the whole
    call, the same tool with the same canonical arguments (or the same answer)."""
    if run.config.repeat_by == "tool":
        return name
    finished = isinstance(payload, (Finish, AnswerInvalid))  # an answer, valid or not, counts as given
    shown = payload.answer if finished else arguments
    try:
        return f"{name}#{request_fingerprint(name, {'': shown} if finished else shown)[:12]}"
    except NotFingerprintable:  # no canonical form: each such call counts as its own
        return f"{name}#{id(payload):x}.{run.loop_state.step_count}"


def _record_together(run: Run) -> StageOutcome:
    """The calls made together, each observed in the order asked; none after one that failed
    for good (a fatal observation ends the state's record: the trace's call_tools record
    still says what each did)."""
    observed = []
    for (intent, action), (status, payload) in zip(run.facts.batch, run.facts.outcomes, strict=True):
        observed.append((action.tool_name, status, payload,
                         repeat_key(run, action.tool_name, payload, intent.arguments)))
        if status == "fatal_error":
            break
    return StageOutcome(Recording.RECORDED, {"statuses": [status for _, status, _, _ in observed]},
                        facts={"batch": run.facts.batch[:len(observed)], "outcomes": ()}, observe_all=tuple(observed))


def _record_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None or run.status is None:
        yield NEEDS, run
        return
    yield Recording.RECORDED, replace(
        run, steps=run.steps + max(run.batch, 1), pick=None, last=min(run.pick + 1, controller.repeat_limit),
        status=None, recorded=run.status, fatal=run.fatal or run.status == CallOutcome.FATAL_ERROR, batch=0,
    )


SPEC = ActionSpec("record_observation", _record_observation, frozenset(Recording), "LoopState.record the call's outcome",
                  _record_model, "an outcome to record (from call_tool, a rejected approval or a finish)")
GUARDS: tuple[GuardSpec, ...] = ()
