"""wrap_up: one last call of the policy, for its answer from what the run has so far, before
the run ends in a budget state (`MachineDefinition.with_wrap_up`). Why: a run stopped by its
token, money or time budget has usually learnt something; without this its user gets
nothing but the reason. The answer is the run's `LoopResult.wrap_up` (not its verified
`answer`: nothing checked it, and the run still ends in its budget state).

The policy is asked through its `wrapping_up()` (a model policy's: the same conversation,
the calls it left open told they were not made, a note that the budget is spent, tools
offered but not to be called, its own budget not checked for this one call); a policy
without one is not asked. The call is journaled as any decision, so a replay, a fork or a
cassette answers it. Verdicts: `WrapUp`."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from forge.agent.stopping import StopController
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.select_tool import decided
from forge.policy import Finish
from forge.records.abstract import AbstractRun
from forge.records.effects import Steps
from forge.records.outcome import StageOutcome
from forge.records.trace import error_text, quoted

__all__ = ["GUARDS", "SPEC", "WrapUp"]


class WrapUp(StrEnum):
    """wrap_up's verdicts."""

    WRAPPED_UP = "wrapped_up"
    NOT_WRAPPED_UP = "not_wrapped_up"


def _wrap_up(run: Run) -> Steps[StageOutcome]:
    wrapping = getattr(run.config.policy, "wrapping_up", None)
    if not callable(wrapping):
        return StageOutcome(WrapUp.NOT_WRAPPED_UP, {"wrap_up": "the policy has no wrapping_up()"})
    step = run.facts.step or run.loop_state.step_count + 1
    try:
        answer = yield from decided(run, step, wrapping())
    except Exception as error:  # the policy is user code (or its model failed): the run still ends where it was going
        return StageOutcome(WrapUp.NOT_WRAPPED_UP, {"error": error_text(error)})
    if not isinstance(answer, Finish):
        return StageOutcome(WrapUp.NOT_WRAPPED_UP, {"wrap_up": f"the policy answered {answer!r:.200}, not a Finish"})
    return StageOutcome(WrapUp.WRAPPED_UP, {"answer": quoted(str(answer.answer), 200)},
                        facts={"wrap_up": answer.answer})


def _wrap_up_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    yield WrapUp.WRAPPED_UP, run
    yield WrapUp.NOT_WRAPPED_UP, run


SPEC = ActionSpec("wrap_up", _wrap_up, frozenset(WrapUp),
                  "one last call of the policy for its answer, before the run ends in a budget state", _wrap_up_model)
GUARDS = (
    GuardSpec("wrapped_up", "wrap_up", WrapUp.WRAPPED_UP),
    GuardSpec("not_wrapped_up", "wrap_up", WrapUp.NOT_WRAPPED_UP),
)
