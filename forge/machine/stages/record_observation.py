"""record_observation: `LoopState.record` the call's outcome (the engine records the
observation the stage returns). Verdict: `Recording`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from enum import StrEnum

from forge.agent.stopping import StopController
from forge.machine.abstract import NEEDS, AbstractRun
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.effects import Steps
from forge.machine.outcome import StageOutcome
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.fingerprint import NotFingerprintable, request_fingerprint
from forge.policy import Finish

__all__ = ['GUARDS', 'SPEC', 'Recording']


class Recording(StrEnum):
    """record_observation's verdict."""

    RECORDED = "recorded"


def _record_observation(run: Run) -> Steps[StageOutcome]:
    facts = run.facts
    assert facts.action is not None and facts.status is not None, "record follows call_tool"
    name, payload = facts.action.tool_name, facts.payload
    if run.config.repeat_by == "tool":
        action = name
    else:  # the whole call: the same tool with the same canonical arguments (or the same answer)
        finished = isinstance(payload, Finish)
        shown = payload.answer if finished else (facts.intent.arguments if facts.intent else {})
        try:
            action = f"{name}#{request_fingerprint(name, {'': shown} if finished else shown)[:12]}"
        except NotFingerprintable:  # no canonical form: each such call counts as its own
            action = f"{name}#{id(payload):x}.{run.loop_state.step_count}"
    # the observation is recorded by the engine; its sequence is the record's step
    if facts.repeat_of is None:
        return StageOutcome(Recording.RECORDED, {"status": facts.status}, observe=(name, facts.status, payload, action))
    # a call answered from the registry: its observation says which step ran it (and the fact is spent)
    return StageOutcome(Recording.RECORDED, {"status": facts.status}, facts={"repeat_of": None},
                        observe=(name, facts.status, payload, action, facts.repeat_of))
    yield  # a generator like every action, though it needs nothing from outside


def _record_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None or run.status is None:
        yield NEEDS, run
        return
    yield Recording.RECORDED, replace(
        run, steps=run.steps + 1, pick=None, last=min(run.pick + 1, controller.repeat_limit), status=None,
        recorded=run.status, fatal=run.fatal or run.status == CallOutcome.FATAL_ERROR,
    )


SPEC = ActionSpec("record_observation", _record_observation, frozenset(Recording), "LoopState.record the call's outcome",
                  _record_model, "an outcome to record (from call_tool, a rejected approval or a finish)")
GUARDS: tuple[GuardSpec, ...] = ()
