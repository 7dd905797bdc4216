"""The built-in stages: the seven stage modules as the machine's actions and guards.

Each action is written once, as a generator of effects (`forge.machine.effects`), and runs
unchanged under `run()` and `arun()`. Actions never raise for anything a tool, the policy or
`verify` does: each such failure becomes a verdict (and `run.error` when it ends the run).
What does raise (a bug in a stage, an approver or user stage that fails, an observer) is the
engine's to turn into `fatal_error`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import count
from typing import Any

from forge.agent.actions import Action, AmbiguousToolChoice, NoMatchingTool, UnknownTool, select_action, select_named
from forge.agent.execution import ArgumentContractError, SchemaViolation, ToolContract, execute_tool
from forge.agent.retry import ToolError, TransientToolError, retry_delay
from forge.agent.stopping import StopReason
from forge.errors import ForgeError, UsageError, WrongType
from forge.machine.catalog import ActionSpec, GuardSpec, StageCatalog
from forge.machine.effects import Call, Notify, Once, Sleep, Steps
from forge.machine.run import Run
from forge.machine.trace import ARGUMENTS_LIMIT, ERROR_TEXT_LIMIT, error_text, quoted, summary
from forge.observe import ToolAttempt
from forge.policy import FINISH, Finish, Intent
from forge.tools import Tool

__all__ = ["ACTIONS", "BUILTIN_STAGES", "ERROR_TEXT_LIMIT", "GUARDS", "ApprovalRejected", "ApprovalRequest",
           "NotFingerprintable", "error_text", "request_fingerprint"]


class NotFingerprintable(ArgumentContractError):
    """A side-effecting call's arguments hold a value with no canonical form (an object whose
    `repr` changes from call to call), so the same call could not be recognised again and
    its side effect would run twice. Give side-effecting tools plain data."""

    def __init__(self, tool_name: str, path: str, value: Any) -> None:
        why = (f"has no canonical form (a {type(value).__name__}); a side-effecting tool takes plain data "
               "(str, int, float, bool, None, lists and dicts with string keys), so that a repeated call is "
               "recognised and not run twice")
        super().__init__(tool_name, (), (), (SchemaViolation(path, why),))


def _canonical(value: Any, path: str) -> Any:
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_canonical(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return {key: _canonical(item, f"{path}.{key}" if path else key) for key, item in value.items()}
    raise _Unfingerprintable(path or "(arguments)", value)


class _Unfingerprintable(Exception):
    def __init__(self, path: str, value: Any) -> None:
        self.path, self.value = path, value


def request_fingerprint(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """A canonical SHA-256 of a call: the tool name and its arguments with sorted keys.

    Raises:
        NotFingerprintable: (an ArgumentContractError) a value is not plain data: str,
            int, float, bool, None, or lists and string-keyed mappings of those.
    """
    try:
        plain = _canonical(arguments, "")
    except _Unfingerprintable as found:
        raise NotFingerprintable(tool_name, found.path, found.value) from None
    canonical = json.dumps([tool_name, plain], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approver is asked about: one call of a side-effecting tool.

    `fingerprint` is the call's `request_fingerprint`: an approval is of this exact call.
    """

    goal: str
    step: int
    tool: str
    arguments: Mapping[str, Any]
    fingerprint: str


class ApprovalRejected(ForgeError, RuntimeError):
    """The approver refused the call; recorded as a `retryable_error` observation so the
    policy can replan. `request` is what was refused."""

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(f"the approver rejected {request.tool} at step {request.step}")
        self.request = request


def _select_tool(run: Run) -> Steps[str]:
    config = run.config
    run.step = run.loop_state.step_count + 1
    run.action = None
    try:
        state = run.loop_state
        intent = yield Call(config.policy, (run.goal, state), "the policy", "policy", "policy",
                            {"goal": run.goal, "observations": state.step_count}, state.messages)
        if not isinstance(intent, (Intent, Finish)):
            raise WrongType(f"policy returned {intent!r}, not an Intent or a Finish")
    except Exception as error:  # the policy is user code: any failure ends the run, recorded
        run.error = error
        run.detail = {"error": error_text(error)}
        return "policy_error"
    run.detail = _new_messages(run)
    if isinstance(intent, Finish):
        run.intent = None
        run.action = Action(FINISH, "the policy gave its answer")
        run.status, run.payload = "ok", intent
        run.detail["finish"] = quoted(repr(intent.answer), 200)
        return "finished"
    run.intent = intent
    refused: UnknownTool | AmbiguousToolChoice | NoMatchingTool | None = None
    try:
        if intent.tool is not None:
            run.action = select_named(intent.tool, config.specs)
        else:
            chosen = config.chosen.get(intent.capabilities)
            if chosen is None:  # failures are not kept: they end the run
                chosen = config.chosen[intent.capabilities] = select_action(run.goal, intent.capabilities, config.specs)
            run.action = chosen
    except (UnknownTool, AmbiguousToolChoice, NoMatchingTool) as error:
        refused = run.error = error
    run.subject = yield from _arguments_text(run, run.action.tool_name if run.action else intent.tool or "", intent)
    if isinstance(refused, UnknownTool):
        run.detail.update(unknown_tool=refused.name, suggestions=list(refused.suggestions))
        return "no_tool"
    if isinstance(refused, AmbiguousToolChoice):
        run.detail["tied"] = list(refused.tied)
        return "ambiguous"
    if isinstance(refused, NoMatchingTool):
        run.detail["capabilities"] = sorted(refused.required)
        return "no_tool"
    assert run.action is not None
    run.detail["tool"] = run.action.tool_name
    return "selected"


def _arguments_text(run: Run, tool: str, intent: Intent) -> Steps[str]:
    """What the trace keeps of the intent's arguments: JSON text capped at ARGUMENTS_LIMIT,
    after the loop's `redact` hook (user code: its failure ends the run, recorded as "redact")."""
    arguments: Any = intent.arguments
    redact = run.config.redact
    if redact is not None:
        action, run.hook = run.hook, "redact"
        arguments = yield Call(redact, (tool, "arguments", arguments), "redact")
        run.hook = action
    return summary(arguments, ARGUMENTS_LIMIT)


def _new_messages(run: Run) -> dict[str, Any]:
    """The policy's messages added since the last step, for the trace (JSON-safe)."""
    messages = run.loop_state.messages
    if len(messages) <= run.messages_seen:
        return {}
    fresh = messages[run.messages_seen:]
    run.messages_seen = len(messages)
    return {"messages": json.loads(json.dumps(fresh, default=str))}


def _attempts(run: Run, tool: Tool, arguments: Mapping[str, Any], tally: list[Any]) -> Steps[Any]:
    """The handler called under bounded retry (`retry_delay` decides, as in
    `run_with_retry`); each attempt is told to the observers. `tally[0]` counts attempts;
    each failed attempt adds `(error text, delay before the next)` to `tally[1:]`.
    A tool that reports its errors has every non-transient failure become a `ToolError`,
    and a value its `is_error` flags is one too."""
    config, observers, contract = run.config, run.observers, tool.contract
    what = f"tool {contract.name!r}"
    started, delay = config.clock(), 0.0
    for number in count(1):
        tally[0] = number
        try:
            value = yield Call(_invoke, (contract, arguments), what, "tool", contract.name, arguments)
        except Exception as error:
            if observers.wants("tool_attempt"):
                yield Notify(observers.notify, (run, "tool_attempt", ToolAttempt(contract.name, number, delay, error)),
                             "tool_attempt")
            if not isinstance(error, TransientToolError):
                if tool.errors == "report" and not isinstance(error, (ToolError, ArgumentContractError)):
                    raise ToolError(error_text(error)) from error
                raise
            waited = retry_delay(number, error, max_attempts=config.max_attempts, elapsed=config.clock() - started,
                                 **config.retry_options)
            tally.append((error_text(error), waited))
            if waited is None:
                raise
            run.retries += 1
            delay = waited
            if delay > 0:
                yield Sleep(delay)
            continue
        if observers.wants("tool_attempt"):
            yield Notify(observers.notify, (run, "tool_attempt", ToolAttempt(contract.name, number, delay)),
                         "tool_attempt")
        if tool.is_error is not None and tool.is_error(value):
            failure = ToolError(quoted(repr(value), 200))
            failure.value = value  # type: ignore[attr-defined]
            raise failure
        return value
    raise AssertionError("unreachable")  # pragma: no cover


def _invoke(contract: ToolContract, arguments: Mapping[str, Any]) -> Any:
    return execute_tool(contract, arguments).value


def _call_tool(run: Run) -> Steps[str]:
    config, intent, action = run.config, run.intent, run.action
    assert intent is not None and action is not None, "call_tool fires only after select_tool"
    tool = config.tools[action.tool_name]
    arguments = intent.arguments
    tally: list[Any] = [0]
    replayed = False
    try:
        if tool.side_effect:
            fingerprint = request_fingerprint(tool.name, arguments)
            key = intent.idempotency_key or f"{tool.name}:{fingerprint}"
            value, replayed = yield Once(run.registry, key, fingerprint,
                                         lambda: _attempts(run, tool, arguments, tally))
            if replayed:
                run.side_effects_replayed += 1
            else:
                run.side_effects_run += 1
        else:
            value = yield from _attempts(run, tool, arguments, tally)
        run.status, run.payload = "ok", value
    except (ArgumentContractError, TransientToolError, ToolError) as error:
        run.status, run.payload = "retryable_error", error
    except Exception as error:  # PermanentToolError, IdempotencyConflict, or a handler's own failure
        run.status, run.payload, run.error = "fatal_error", error, error
    run.detail = {"tool": tool.name, "status": run.status, "attempts": tally[0]}
    if tool.side_effect:
        run.detail["replayed"] = replayed
    if run.status != "ok":
        run.detail["error"] = error_text(run.payload)
    if tally[0] > 1:
        run.detail["tries"] = _tries(tally)
    return run.status


def _tries(tally: list[Any]) -> list[dict[str, Any]]:
    """Each attempt with the wait before it and what it raised (None: it returned)."""
    failures = tally[1:]
    tries, delay = [], 0.0
    for number in range(1, tally[0] + 1):
        error, waited = failures[number - 1] if number <= len(failures) else (None, None)
        tries.append({"attempt": number, "delay_s": delay, "error": error})
        delay = waited or 0.0
    return tries


def _request_approval(run: Run) -> Steps[str]:
    config, intent, action = run.config, run.intent, run.action
    assert intent is not None and action is not None, "request_approval fires only after select_tool"
    tool = config.tools[action.tool_name]
    if not tool.side_effect:
        run.detail = {"tool": tool.name, "approval": "not needed"}
        return "not_needed"
    if config.approver is None:
        raise UsageError("this definition asks for approvals, but the loop has no approver: "
                         "pass AgentLoop(..., approver=...)")
    try:
        fingerprint = request_fingerprint(tool.name, intent.arguments)
    except NotFingerprintable as error:  # it could not run either: tell the policy, ask no one
        run.status, run.payload = "retryable_error", error
        run.detail = {"tool": tool.name, "approval": "refused", "status": run.status, "error": error_text(error)}
        return "rejected"
    request = ApprovalRequest(run.goal, run.step, tool.name, intent.arguments, fingerprint)
    answer = yield Call(config.approver, (request,), "the approver", "approver", "approver", fingerprint)
    if answer is None:
        run.error = None
        run.detail = {"tool": tool.name, "approval": "no answer"}
        return "no_answer"
    if not isinstance(answer, bool):
        raise WrongType(f"the approver returned {answer!r}; it must return True, False or None (no answer yet)")
    if answer:
        run.detail = {"tool": tool.name, "approval": "approved"}
        return "approved"
    run.status, run.payload = "retryable_error", ApprovalRejected(request)
    run.detail = {"tool": tool.name, "approval": "rejected", "status": run.status,
                  "error": f"ApprovalRejected: {run.payload}"}
    return "rejected"


def _record_observation(run: Run) -> Steps[str]:
    assert run.action is not None and run.status is not None, "record follows call_tool"
    name = run.action.tool_name
    if run.config.repeat_by == "tool":
        action = name
    else:  # the whole call: the same tool with the same canonical arguments (or the same answer)
        shown = run.payload.answer if isinstance(run.payload, Finish) else (run.intent.arguments if run.intent else {})
        try:
            action = f"{name}#{request_fingerprint(name, {'': shown} if isinstance(run.payload, Finish) else shown)[:12]}"
        except NotFingerprintable:  # no canonical form: each such call counts as its own
            action = f"{name}#{id(run.payload):x}.{run.loop_state.step_count}"
    observation = run.loop_state.record(name, run.status, run.payload, action=action)
    run.subject = observation  # the trace summarises its payload when read
    run.detail = {"status": observation.status}  # its sequence is the record's step: nothing unique per step
    return "recorded"
    yield  # a generator like every action, though it needs nothing from outside


def _verify_and_decide(run: Run) -> Steps[str]:
    config, state = run.config, run.loop_state
    last = state.observations[-1]
    verified = False
    if last.status == "ok":
        try:
            said = yield Call(config.verify, (last, state) if config.verify_takes_state else (last,), "verify",
                              "verify", "verify", {"sequence": last.sequence, "tool": last.tool_name, "status": last.status})
            if not isinstance(said, bool):
                raise WrongType(f"verify returned {said!r}; it must return True or False (a {type(said).__name__} "
                                "is never taken as success)")
            verified = said
        except Exception as error:  # verify is user code: its failure ends the run, recorded
            run.error = error
            run.detail = {"error": error_text(error)}
            return "verify_error"
    run.decision = config.controller.decide(
        step_count=state.step_count - run.base_steps,
        verified=verified,
        fatal_error=state.terminal,
        action_history=state.action_history,
    )
    reason = run.decision.reason
    verdict = reason.value if isinstance(reason, StopReason) else str(reason)  # one string per reason, not per step
    run.detail = {"verified": verified, "decision": verdict}
    return verdict


ACTIONS: Mapping[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            "select_tool", _select_tool,
            frozenset({"selected", "finished", "ambiguous", "no_tool", "policy_error"}),
            "ask the policy for an intent (select_action picks the one tool that fits) or its final answer",
        ),
        ActionSpec(
            "call_tool", _call_tool,
            frozenset({"ok", "retryable_error", "fatal_error"}),
            "execute_tool inside bounded retry; side effects through the idempotency registry",
        ),
        ActionSpec(
            "request_approval", _request_approval,
            frozenset({"approved", "rejected", "no_answer", "not_needed"}),
            "ask the approver about a side-effecting call; other tools need no approval",
        ),
        ActionSpec(
            "record_observation", _record_observation, frozenset({"recorded"}),
            "LoopState.record the call's outcome",
        ),
        ActionSpec(
            "verify_and_decide", _verify_and_decide,
            frozenset({reason.value for reason in StopReason} | {"verify_error"}),
            "verify an ok observation, then StopController.decide",
        ),
    )
}


def _guards() -> dict[str, GuardSpec]:
    fatal = StopReason.FATAL_ERROR.value
    specs = [
        GuardSpec("tool_selected", "select_tool", "selected"),
        GuardSpec("policy_finished", "select_tool", "finished"),
        GuardSpec("tool_choice_ambiguous", "select_tool", "ambiguous", "clarification_required"),
        GuardSpec("no_tool_fits", "select_tool", "no_tool", "capability_gap"),
        GuardSpec("policy_raised", "select_tool", "policy_error", fatal),
        GuardSpec("call_ok", "call_tool", "ok"),
        GuardSpec("call_retryable", "call_tool", "retryable_error"),
        GuardSpec("call_fatal", "call_tool", "fatal_error"),
        GuardSpec("approval_granted", "request_approval", "approved"),
        GuardSpec("approval_not_needed", "request_approval", "not_needed"),
        GuardSpec("approval_rejected", "request_approval", "rejected"),
        GuardSpec("approval_unanswered", "request_approval", "no_answer", "approval_required"),
        GuardSpec("verify_raised", "verify_and_decide", "verify_error", fatal),
    ]
    for reason in StopReason:
        stops_in = None if reason is StopReason.CONTINUE else reason.value
        specs.append(GuardSpec(f"decided_{reason.value}", "verify_and_decide", reason.value, stops_in))
    return {spec.name: spec for spec in specs}


GUARDS: Mapping[str, GuardSpec] = _guards()
BUILTIN_STAGES = StageCatalog(ACTIONS, GUARDS)
