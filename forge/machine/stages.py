"""The built-in stages: the seven stage modules as the machine's actions and guards.

Each action is written once, as a generator of effects (`forge.machine.effects`), and runs
unchanged under `run()` and `arun()`. It reads the run and returns a `StageOutcome`: its
verdict (a member of the stage's `StrEnum`), the facts it produced and what the trace keeps;
the engine folds that into the run. Actions never raise for anything a tool, the policy or
`verify` does: each such failure becomes a verdict (and the run's error when it ends the run).
What does raise (a bug in a stage, an approver or user stage that fails, an observer) is the
engine's to turn into `fatal_error`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import count
from typing import Any

from forge.agent.actions import Action, AmbiguousToolChoice, NoMatchingTool, UnknownTool, select_action, select_named
from forge.agent.execution import ArgumentContractError, SchemaViolation, ToolContract, execute_tool
from forge.agent.retry import ToolError, TransientToolError, retry_delay
from forge.agent.stopping import StopReason
from forge.errors import ForgeError, UsageError, WrongType
from forge.machine.catalog import ActionSpec, GuardSpec, StageCatalog
from forge.machine.effects import Call, Notify, Once, Sleep, Steps
from forge.machine.outcome import StageOutcome
from forge.machine.run import Run
from forge.machine.trace import ARGUMENTS_LIMIT, ERROR_TEXT_LIMIT, error_text, quoted, summary
from forge.observe import ToolAttempt
from forge.policy import FINISH, Finish, Intent
from forge.tools import Tool

__all__ = ["ACTIONS", "BUILTIN_STAGES", "ERROR_TEXT_LIMIT", "GUARDS", "Approval", "ApprovalRejected", "ApprovalRequest",
           "CallOutcome", "NotFingerprintable", "Recording", "Selection", "Verification", "error_text",
           "request_fingerprint"]


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


class Selection(StrEnum):
    """select_tool's verdicts."""

    SELECTED = "selected"
    FINISHED = "finished"
    AMBIGUOUS = "ambiguous"
    NO_TOOL = "no_tool"
    POLICY_ERROR = "policy_error"


class CallOutcome(StrEnum):
    """call_tool's verdicts: the observation status of the call."""

    OK = "ok"
    RETRYABLE_ERROR = "retryable_error"
    FATAL_ERROR = "fatal_error"


class Approval(StrEnum):
    """request_approval's verdicts."""

    APPROVED = "approved"
    REJECTED = "rejected"
    NO_ANSWER = "no_answer"
    NOT_NEEDED = "not_needed"


class Recording(StrEnum):
    """record_observation's verdict."""

    RECORDED = "recorded"


class Verification(StrEnum):
    """verify_and_decide's verdicts: the stop controller's reasons, and verify's failure."""

    VERIFIED_SUCCESS = "verified_success"
    FATAL_ERROR = "fatal_error"
    STEP_BUDGET_EXHAUSTED = "step_budget_exhausted"
    REPEATED_ACTION = "repeated_action"
    CONTINUE = "continue"
    VERIFY_ERROR = "verify_error"


def _select_tool(run: Run) -> Steps[StageOutcome]:
    config, state, goal = run.config, run.loop_state, run.goal
    step = state.step_count + 1
    try:
        intent = yield Call(config.policy, (goal, state), "the policy", "policy", "policy",
                            {"goal": goal, "observations": state.step_count}, state.messages, step=step)
        if not isinstance(intent, (Intent, Finish)):
            raise WrongType(f"policy returned {intent!r}, not an Intent or a Finish")
    except Exception as error:  # the policy is user code: any failure ends the run, recorded
        return StageOutcome(Selection.POLICY_ERROR, {"error": error_text(error)},
                            facts={"step": step, "action": None, "error": error})
    detail, seen = _new_messages(run)
    counts = {"messages_seen": seen} if seen else _NONE
    if isinstance(intent, Finish):
        detail["finish"] = quoted(repr(intent.answer), 200)
        return StageOutcome(Selection.FINISHED, detail, counts=counts,
                            facts={"step": step, "intent": None, "action": Action(FINISH, "the policy gave its answer"),
                                   "status": "ok", "payload": intent})
    action: Action | None = None
    refused: UnknownTool | AmbiguousToolChoice | NoMatchingTool | None = None
    try:
        if intent.tool is not None:
            action = select_named(intent.tool, config.specs)
        else:
            action = config.chosen.get(intent.capabilities)
            if action is None:  # failures are not kept: they end the run
                action = config.chosen[intent.capabilities] = select_action(goal, intent.capabilities, config.specs)
    except (UnknownTool, AmbiguousToolChoice, NoMatchingTool) as error:
        refused = error
    subject = yield from _arguments_text(run, action.tool_name if action else intent.tool or "", intent)
    facts: dict[str, Any] = {"step": step, "intent": intent, "action": action}
    if refused is not None:
        facts["error"] = refused
    if isinstance(refused, UnknownTool):
        detail.update(unknown_tool=refused.name, suggestions=list(refused.suggestions))
        return StageOutcome(Selection.NO_TOOL, detail, subject, facts, counts)
    if isinstance(refused, AmbiguousToolChoice):
        detail["tied"] = list(refused.tied)
        return StageOutcome(Selection.AMBIGUOUS, detail, subject, facts, counts)
    if isinstance(refused, NoMatchingTool):
        detail["capabilities"] = sorted(refused.required)
        return StageOutcome(Selection.NO_TOOL, detail, subject, facts, counts)
    assert action is not None
    detail["tool"] = action.tool_name
    return StageOutcome(Selection.SELECTED, detail, subject, facts, counts)


_NONE: Mapping[str, int] = {}


def _arguments_text(run: Run, tool: str, intent: Intent) -> Steps[str]:
    """What the trace keeps of the intent's arguments: JSON text capped at ARGUMENTS_LIMIT,
    after the loop's `redact` hook (user code: its failure ends the run, named "redact")."""
    arguments: Any = intent.arguments
    redact = run.config.redact
    if redact is not None:
        arguments = yield Call(redact, (tool, "arguments", arguments), "redact", hook="redact")
    return summary(arguments, ARGUMENTS_LIMIT)


def _new_messages(run: Run) -> tuple[dict[str, Any], int]:
    """The policy's messages added since the last step, for the trace (JSON-safe), and how
    many they are."""
    messages = run.loop_state.messages
    seen = run.counts.messages_seen
    if len(messages) <= seen:
        return {}, 0
    fresh = messages[seen:]
    return {"messages": json.loads(json.dumps(fresh, default=str))}, len(fresh)


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


def _call_tool(run: Run) -> Steps[StageOutcome]:
    config, facts = run.config, run.facts
    intent, action = facts.intent, facts.action
    assert intent is not None and action is not None, "call_tool fires only after select_tool"
    tool = config.tools[action.tool_name]
    arguments = intent.arguments
    tally: list[Any] = [0]
    replayed = False
    error: BaseException | None = None
    try:
        if tool.side_effect:
            fingerprint = request_fingerprint(tool.name, arguments)
            key = intent.idempotency_key or f"{tool.name}:{fingerprint}"
            value, replayed = yield Once(run.registry, key, fingerprint, lambda: _attempts(run, tool, arguments, tally))
        else:
            value = yield from _attempts(run, tool, arguments, tally)
        status: CallOutcome = CallOutcome.OK
        payload: Any = value
    except (ArgumentContractError, TransientToolError, ToolError) as failure:
        status, payload = CallOutcome.RETRYABLE_ERROR, failure
    except Exception as failure:  # PermanentToolError, IdempotencyConflict, or a handler's own failure
        status, payload, error = CallOutcome.FATAL_ERROR, failure, failure
    detail: dict[str, Any] = {"tool": tool.name, "status": str(status), "attempts": tally[0]}
    counts: dict[str, int] = {}
    if tool.side_effect:
        detail["replayed"] = replayed
        counts["side_effects_replayed" if replayed else "side_effects_run"] = 1
    if len(tally) > 1:
        counts["retries"] = sum(1 for _, waited in tally[1:] if waited is not None)
    if status is not CallOutcome.OK:
        detail["error"] = error_text(payload)
    if tally[0] > 1:
        detail["tries"] = _tries(tally)
    facts_now: dict[str, Any] = {"status": str(status), "payload": payload}
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


def _request_approval(run: Run) -> Steps[StageOutcome]:
    config, facts = run.config, run.facts
    intent, action = facts.intent, facts.action
    assert intent is not None and action is not None, "request_approval fires only after select_tool"
    tool = config.tools[action.tool_name]
    if not tool.side_effect:
        return StageOutcome(Approval.NOT_NEEDED, {"tool": tool.name, "approval": "not needed"})
    if config.approver is None:
        raise UsageError("this definition asks for approvals, but the loop has no approver: "
                         "pass AgentLoop(..., approver=...)")
    try:
        fingerprint = request_fingerprint(tool.name, intent.arguments)
    except NotFingerprintable as error:  # it could not run either: tell the policy, ask no one
        return StageOutcome(Approval.REJECTED, {"tool": tool.name, "approval": "refused", "status": "retryable_error",
                                                "error": error_text(error)},
                            facts={"status": "retryable_error", "payload": error})
    request = ApprovalRequest(run.goal, facts.step, tool.name, intent.arguments, fingerprint)
    answer = yield Call(config.approver, (request,), "the approver", "approver", "approver", fingerprint)
    if answer is None:
        return StageOutcome(Approval.NO_ANSWER, {"tool": tool.name, "approval": "no answer"}, facts={"error": None})
    if not isinstance(answer, bool):
        raise WrongType(f"the approver returned {answer!r}; it must return True, False or None (no answer yet)")
    if answer:
        return StageOutcome(Approval.APPROVED, {"tool": tool.name, "approval": "approved"})
    rejected = ApprovalRejected(request)
    return StageOutcome(Approval.REJECTED, {"tool": tool.name, "approval": "rejected", "status": "retryable_error",
                                            "error": f"ApprovalRejected: {rejected}"},
                        facts={"status": "retryable_error", "payload": rejected})


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
    return StageOutcome(Recording.RECORDED, {"status": facts.status}, observe=(name, facts.status, payload, action))
    yield  # a generator like every action, though it needs nothing from outside


def _verify_and_decide(run: Run) -> Steps[StageOutcome]:
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
            return StageOutcome(Verification.VERIFY_ERROR, {"error": error_text(error)}, facts={"error": error})
    decision = config.controller.decide(
        step_count=state.step_count - state.turn_start,
        verified=verified,
        fatal_error=state.terminal,
        action_history=state.action_history,
    )
    verdict = Verification(decision.reason.value if isinstance(decision.reason, StopReason) else str(decision.reason))
    return StageOutcome(verdict, {"verified": verified, "decision": str(verdict)}, facts={"decision": decision})


ACTIONS: Mapping[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            "select_tool", _select_tool,
            frozenset(Selection),
            "ask the policy for an intent (select_action picks the one tool that fits) or its final answer",
        ),
        ActionSpec(
            "call_tool", _call_tool,
            frozenset(CallOutcome),
            "execute_tool inside bounded retry; side effects through the idempotency registry",
        ),
        ActionSpec(
            "request_approval", _request_approval,
            frozenset(Approval),
            "ask the approver about a side-effecting call; other tools need no approval",
        ),
        ActionSpec(
            "record_observation", _record_observation, frozenset(Recording),
            "LoopState.record the call's outcome",
        ),
        ActionSpec(
            "verify_and_decide", _verify_and_decide,
            frozenset(Verification),
            "verify an ok observation, then StopController.decide",
        ),
    )
}


def _guards() -> dict[str, GuardSpec]:
    fatal = StopReason.FATAL_ERROR.value
    specs = [
        GuardSpec("tool_selected", "select_tool", Selection.SELECTED),
        GuardSpec("policy_finished", "select_tool", Selection.FINISHED),
        GuardSpec("tool_choice_ambiguous", "select_tool", Selection.AMBIGUOUS, "clarification_required"),
        GuardSpec("no_tool_fits", "select_tool", Selection.NO_TOOL, "capability_gap"),
        GuardSpec("policy_raised", "select_tool", Selection.POLICY_ERROR, fatal),
        GuardSpec("call_ok", "call_tool", CallOutcome.OK),
        GuardSpec("call_retryable", "call_tool", CallOutcome.RETRYABLE_ERROR),
        GuardSpec("call_fatal", "call_tool", CallOutcome.FATAL_ERROR),
        GuardSpec("approval_granted", "request_approval", Approval.APPROVED),
        GuardSpec("approval_not_needed", "request_approval", Approval.NOT_NEEDED),
        GuardSpec("approval_rejected", "request_approval", Approval.REJECTED),
        GuardSpec("approval_unanswered", "request_approval", Approval.NO_ANSWER, "approval_required"),
        GuardSpec("verify_raised", "verify_and_decide", Verification.VERIFY_ERROR, fatal),
    ]
    for reason in StopReason:
        stops_in = None if reason is StopReason.CONTINUE else reason.value
        specs.append(GuardSpec(f"decided_{reason.value}", "verify_and_decide", Verification(reason.value), stops_in))
    return {spec.name: spec for spec in specs}


GUARDS: Mapping[str, GuardSpec] = _guards()
BUILTIN_STAGES = StageCatalog(ACTIONS, GUARDS)
