"""call_tools: the calls without side effects that the policy asked for at once, run at the
same time (at most `Limits.max_parallel`), each exactly as call_tool runs one
(`execute_tool` under bounded retry); their outcomes kept in the order asked, for
record_observation. A side effect never runs here (select_tool batches only calls without
one), so no call here waits for an approval or needs an idempotency key.

Verdicts: `CallOutcome`, said of the batch: `fatal_error` when any call failed for good,
else `ok` when any call returned, else `retryable_error`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from typing import Any

from forge.agent.stopping import StopController
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome, outcome_of, retries_in
from forge.records.abstract import NEEDS, AbstractRun
from forge.records.effects import Steps, Together
from forge.records.outcome import CountChanges, FactChanges, StageOutcome
from forge.records.trace import error_text

__all__ = ['GUARDS', 'SPEC']


def _call_tools(run: Run) -> Steps[StageOutcome]:
    config, batch = run.config, run.facts.batch
    assert len(batch) > 1, "call_tools fires only after select_tool chose calls to make together"
    tools = [config.tools[action.tool_name] for _, action in batch]
    branches = tuple(partial(outcome_of, run, tool, intent.arguments, intent.call_id)
                     for (intent, _), tool in zip(batch, tools, strict=True))
    outcomes = yield Together(branches, config.max_parallel, tuple(t.name in config.asynchronous for t in tools))
    statuses = [status for status, _, _ in outcomes]
    verdict = (CallOutcome.FATAL_ERROR if CallOutcome.FATAL_ERROR in statuses
               else CallOutcome.OK if CallOutcome.OK in statuses else CallOutcome.RETRYABLE_ERROR)
    detail: dict[str, Any] = {"tools": [tool.name for tool in tools], "statuses": [str(s) for s in statuses],
                              "attempts": [tally[0] for _, _, tally in outcomes],
                              "parallel": min(config.max_parallel, len(batch))}
    if any(status is not CallOutcome.OK for status in statuses):
        detail["errors"] = [None if status is CallOutcome.OK else error_text(payload)
                            for status, payload, _ in outcomes]
    facts: FactChanges = {"outcomes": tuple((str(status), payload) for status, payload, _ in outcomes)}
    fatal = next((payload for status, payload, _ in outcomes if status is CallOutcome.FATAL_ERROR), None)
    if fatal is not None:
        facts["error"] = fatal
    retries = sum(retries_in(tally) for _, _, tally in outcomes)
    counts: CountChanges = {"retries": retries} if retries else {}
    return StageOutcome(verdict, detail, facts=facts, counts=counts)


def _calls_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None or run.batch < 2:
        yield NEEDS, run
        return
    for status in CallOutcome:
        yield status, replace(run, status=status)


SPEC = ActionSpec("call_tools", _call_tools, frozenset(CallOutcome),
                  "the calls without side effects asked for at once, run at the same time (at most max_parallel); "
                  "their outcomes in the order asked",
                  _calls_model, "calls select_tool chose to make together", observes=True)
GUARDS: tuple[GuardSpec, ...] = ()
