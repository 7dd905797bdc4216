"""call_tool: `execute_tool` inside bounded retry, side effects through the idempotency registry.
Verdicts: `CallOutcome`, the observation status of the call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from enum import StrEnum
from functools import lru_cache
from itertools import count
from typing import Any

from forge.agent.execution import ArgumentContractError, ToolContract, check_arguments, execute_tool
from forge.agent.retry import ToolError, TransientToolError, retry_delay
from forge.agent.stopping import StopController
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.fingerprint import request_fingerprint
from forge.observe import Bound, ToolAttempt
from forge.records.abstract import NEEDS, AbstractRun
from forge.records.effects import Call, ObserverFailed, Once, Sleep, Steps
from forge.records.outcome import CountChanges, FactChanges, StageOutcome
from forge.records.trace import error_text, quoted
from forge.tools import Tool

__all__ = ['GUARDS', 'SPEC', 'CallOutcome', 'classified', 'outcome_of', 'retries_in']


class CallOutcome(StrEnum):
    """call_tool's verdicts: the observation status of the call."""

    OK = "ok"
    RETRYABLE_ERROR = "retryable_error"
    FATAL_ERROR = "fatal_error"


def _attempts(run: Run, tool: Tool, arguments: Mapping[str, Any], tally: list[Any], call_id: str | None = None
              ) -> Steps[Any]:
    """The handler called under bounded retry (`retry_delay` decides, as in
    `run_with_retry`); each attempt is told to the observers, with the model's `call_id` of
    the call when it has one. `tally[0]` counts attempts;
    each failed attempt adds `(error text, delay before the next)` to `tally[1:]`.
    A tool that reports its errors has every non-transient failure become a `ToolError`,
    and a value its `is_error` flags is one too."""
    config, observers, contract = run.config, run.observers, tool.contract
    what = f"tool {contract.name!r}"
    threaded = not tool.inline and contract.name not in config.asynchronous
    started, delay = config.clock(), 0.0
    told_started, told = observers.bound("tool_attempt_started"), observers.bound("tool_attempt")
    for number in count(1):
        tally[0] = number
        attempt = None
        if told_started:
            attempt = first_attempt(contract.name) if number == 1 and call_id is None else \
                ToolAttempt(contract.name, number, delay, call_id=call_id)
            _tell(run, "tool_attempt_started", told_started, attempt)
        try:
            value = yield Call(_invoke, (contract, arguments), what, "tool", contract.name, arguments,
                               check=check_arguments, threaded=threaded)
        except Exception as error:
            if told:
                _tell(run, "tool_attempt", told, ToolAttempt(contract.name, number, delay, error, call_id))
            if not isinstance(error, TransientToolError):
                if tool.errors == "report" and not isinstance(error, (ToolError, ArgumentContractError)):
                    raise ToolError(error_text(error)) from error
                raise
            waited = retry_delay(number, error, max_attempts=config.max_attempts, elapsed=config.clock() - started,
                                 **config.retry_options)
            tally.append((error_text(error), waited))
            if waited is None:
                raise
            delay = waited
            if delay > 0:
                yield Sleep(delay)
            continue
        if told:  # the attempt as started, when it returned: a value, told twice
            _tell(run, "tool_attempt", told, attempt or ToolAttempt(contract.name, number, delay, call_id=call_id))
        if tool.is_error is not None and tool.is_error(value):
            failure = ToolError(quoted(repr(value), 200))
            failure.value = value  # type: ignore[attr-defined]
            raise failure
        return value
    raise AssertionError("unreachable")  # pragma: no cover


def _tell(run: Run, hook: str, bound: Bound, attempt: ToolAttempt) -> None:
    """Tell the observers of `attempt` through their `bound` methods of `hook`, where the
    attempt is made: as `Observers.notify` inside `forge.records.effects.tell` do (the
    observer that raised named in `run.hook`; its failure leaves the action as
    `ObserverFailed`), in one call instead of two: a streamed run tells two per step."""
    for name, method in bound:
        try:
            method(run, attempt)
        except Exception as error:
            run.hook = name
            raise ObserverFailed(hook, error) from error
        except BaseException:
            run.hook = name
            raise


@lru_cache(maxsize=1024)
def first_attempt(tool: str) -> ToolAttempt:
    """A tool's first attempt, one value for every call (made once, not each step: an
    observed step is told of it twice)."""
    return ToolAttempt(tool, 1, 0.0)


def classified(failure: Exception) -> CallOutcome:
    """The observation status of a call that raised `failure`: a broken argument contract,
    a transient error retried to its bound or a `ToolError` the policy can replan around is
    retryable; anything else (`PermanentToolError`, `IdempotencyConflict`, a handler's own
    failure) is fatal."""
    if isinstance(failure, (ArgumentContractError, TransientToolError, ToolError)):
        return CallOutcome.RETRYABLE_ERROR
    return CallOutcome.FATAL_ERROR


def outcome_of(run: Run, tool: Tool, arguments: Mapping[str, Any], call_id: str | None = None
               ) -> Steps[tuple[CallOutcome, Any, list[Any]]]:
    """A call without side effects under bounded retry, and what it came to: its status,
    its value or failure, and its tally (`_attempts`); it never raises for the tool."""
    tally: list[Any] = [0]
    try:
        value = yield from _attempts(run, tool, arguments, tally, call_id)
    except Exception as failure:
        return classified(failure), failure, tally
    return CallOutcome.OK, value, tally


def retries_in(tally: list[Any]) -> int:
    """How many of a call's failed attempts were retried."""
    return sum(1 for _, waited in tally[1:] if waited is not None)


def _invoke(contract: ToolContract, arguments: Mapping[str, Any]) -> Any:
    return execute_tool(contract, arguments).value


def _call_tool(run: Run) -> Steps[StageOutcome]:
    config, facts = run.config, run.facts
    intent, action = facts.intent, facts.action
    assert intent is not None and action is not None, "call_tool fires only after select_tool"
    tool = config.tools[action.tool_name]
    arguments = intent.arguments
    tally: list[Any] = [0]
    replayed = False
    error: BaseException | None = None
    key = ""
    try:
        if tool.side_effect:
            fingerprint = request_fingerprint(tool.name, arguments)
            key = intent.idempotency_key or f"{tool.name}:{fingerprint}"
            if tool.repeatable and not intent.idempotency_key:
                # each decision a new act, with a key of its own that ends, as every key the loop makes, in the fingerprint
                key = f"{tool.name}:{run.journal.run_id}:{facts.step}:{fingerprint}"
            value, replayed = yield Once(run.registry, key, fingerprint,
                                         lambda: _attempts(run, tool, arguments, tally, intent.call_id))
        else:
            value = yield from _attempts(run, tool, arguments, tally, intent.call_id)
        status: CallOutcome = CallOutcome.OK
        payload: Any = value
    except Exception as failure:
        status, payload = classified(failure), failure
        if status is CallOutcome.FATAL_ERROR:
            error = failure
    detail: dict[str, Any] = {"tool": tool.name, "status": str(status), "attempts": tally[0]}
    counts: CountChanges = {}
    facts_now: FactChanges = {"status": str(status), "payload": payload}
    if tool.side_effect:
        detail["replayed"] = replayed
        if replayed:
            counts["side_effects_replayed"] = 1
            detail["repeat_of"] = facts_now["repeat_of"] = facts.ran.get(key, 0)
        elif status is CallOutcome.OK:  # a side effect completed: a failed call did nothing to count
            counts["side_effects_run"] = 1
            facts_now["ran"] = {**facts.ran, key: facts.step}
    if len(tally) > 1:
        counts["retries"] = retries_in(tally)
    if status is not CallOutcome.OK:
        detail["error"] = error_text(payload)
    if tally[0] > 1:
        detail["tries"] = _tries(tally)
    if error is not None:
        facts_now["error"] = error
    return StageOutcome(status, detail, facts=facts_now, counts=counts)


def _tries(tally: list[Any]) -> list[dict[str, Any]]:
    """Each attempt with the wait before it and what it raised (None: it returned)."""
    failures = tally[1:]
    tries, delay = [], 0.0
    for number in range(1, tally[0] + 1):
        error, waited = failures[number - 1] if number <= len(failures) else (None, None)
        tries.append({"attempt": number, "delay_s": delay, "error": error})
        delay = waited or 0.0
    return tries


def _call_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None:
        yield NEEDS, run
        return
    for status in CallOutcome:
        yield status, replace(run, status=status)


SPEC = ActionSpec("call_tool", _call_tool, frozenset(CallOutcome),
                  "execute_tool inside bounded retry; side effects through the idempotency registry",
                  _call_model, "a tool selected by select_tool", observes=True)
GUARDS = (
    GuardSpec("call_ok", "call_tool", CallOutcome.OK),
    GuardSpec("call_retryable", "call_tool", CallOutcome.RETRYABLE_ERROR),
    GuardSpec("call_fatal", "call_tool", CallOutcome.FATAL_ERROR),
)
