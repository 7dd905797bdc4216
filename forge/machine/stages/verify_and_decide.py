"""verify_and_decide: verify an ok observation (of calls made together, each ok one in the
order asked, until one is accepted), then `StopController.decide`. Verdicts:
`Verification`, the stop controller's reasons and verify's failure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from enum import StrEnum
from typing import Any

from forge.agent.stopping import StopController, StopReason
from forge.errors import WrongType
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.select_tool import dropped_calls
from forge.records.abstract import NEEDS, AbstractRun
from forge.records.effects import Call, Steps
from forge.records.outcome import FactChanges, StageOutcome
from forge.records.trace import error_text

__all__ = ['GUARDS', 'SPEC', 'Verification']


class Verification(StrEnum):
    """verify_and_decide's verdicts: the stop controller's reasons, and verify's failure."""

    VERIFIED_SUCCESS = "verified_success"
    FATAL_ERROR = "fatal_error"
    STEP_BUDGET_EXHAUSTED = "step_budget_exhausted"
    REPEATED_ACTION = "repeated_action"
    CONTINUE = "continue"
    VERIFY_ERROR = "verify_error"


_VERDICTS: dict[str, Verification] = {verdict.value: verdict for verdict in Verification}
"""Each verdict by its value (a `StopReason` finds its own): an Enum call costs ten times more."""


def _verify_and_decide(run: Run) -> Steps[StageOutcome]:
    config, state, made = run.config, run.loop_state, len(run.facts.batch)
    verified = False
    for observation in state.observations[-made:] if made else state.observations[-1:]:
        if observation.status != "ok":
            continue
        try:
            said = yield Call(config.verify, (observation, state) if config.verify_takes_state else (observation,),
                              "verify", "verify", "verify", observation.sequence)
            if not isinstance(said, bool):
                raise WrongType(f"verify returned {said!r}; it must return True or False (a {type(said).__name__} "
                                "is never taken as success)")
            verified = said
        except Exception as error:  # verify is user code: its failure ends the run, recorded
            detail, facts = yield from _plan_dropped(run, {"error": error_text(error)}, {"error": error})
            return StageOutcome(Verification.VERIFY_ERROR, detail, facts=facts)
        if verified:
            break
    decision = config.controller.decide(
        step_count=state.step_count - state.turn_start,
        verified=verified,
        fatal_error=state.terminal,
        action_history=state.turn_history,
    )
    verdict = _VERDICTS.get(decision.reason) or Verification(str(decision.reason))
    detail = {"verified": verified, "decision": str(verdict)}
    facts = FactChanges(decision=decision)
    if made:  # the calls made together are decided on
        facts["batch"] = ()
    if decision.stop:
        detail, facts = yield from _plan_dropped(run, detail, facts)
    return StageOutcome(verdict, detail, facts=facts)


def _plan_dropped(run: Run, detail: dict[str, Any], facts: FactChanges) -> Steps[tuple[dict[str, Any], FactChanges]]:
    """`detail` and `facts` of a decision that ends the run, with the calls its policy
    planned and it will not make, if any, said in the trace (`dropped`)."""
    if not run.facts.plan:
        return detail, facts
    dropped = yield from dropped_calls(run, run.facts.plan)
    return {**detail, "dropped": dropped}, {**facts, "plan": ()}


def _decide_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.recorded is None:
        yield NEEDS, run
        return
    ok = run.recorded == CallOutcome.OK  # verify is asked only about an ok observation
    history = ["other"] * (run.steps - run.last) + ["last"] * run.last  # the last call made `last` times
    after = replace(run, last=0, recorded=None)
    if ok:
        yield Verification.VERIFY_ERROR, after
    for verified in (True, False) if ok else (False,):
        yield Verification(str(controller.decide(run.steps, verified, run.fatal, history).reason)), after


SPEC = ActionSpec("verify_and_decide", _verify_and_decide, frozenset(Verification),
                  "verify an ok observation, then StopController.decide",
                  _decide_model, "an observation recorded since the last decision (by record_observation)",
                  failures=frozenset({Verification.VERIFY_ERROR, Verification.FATAL_ERROR}))
GUARDS = (
    GuardSpec("verify_raised", "verify_and_decide", Verification.VERIFY_ERROR, StopReason.FATAL_ERROR.value),
    *(GuardSpec(f"decided_{reason.value}", "verify_and_decide", Verification(reason.value),
                None if reason is StopReason.CONTINUE else reason.value) for reason in StopReason),
)
