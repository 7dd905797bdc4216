"""The stage modules as the machine's callbacks: the named actions and guards a definition uses.

A non-terminal state runs one *action* when it fires; the action calls a stage module and
returns a *verdict*, one of the action's declared values. Every *guard* tests one value of
one action's verdict, so the guards on a state's transitions are mutually exclusive by
construction: which transition fires never depends on its order in the file.

Actions never raise for anything a tool, the policy or `verify` does: each failure becomes a
verdict (and `run.error` when it ends the run), so nothing escapes half-done.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from forge.agent.actions import AmbiguousToolChoice, NoMatchingTool, select_action
from forge.agent.execution import ArgumentContractError, execute_tool
from forge.agent.retry import TransientToolError, run_with_retry
from forge.agent.stopping import StopReason
from forge.machine.run import Run
from forge.policy import Intent

__all__ = ["ACTIONS", "GUARDS", "ActionSpec", "GuardSpec", "request_fingerprint"]


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """A stage action: `run(run) -> verdict`, with every verdict it can return."""

    name: str
    run: Callable[[Run], str]
    verdicts: frozenset[str]
    doc: str


@dataclass(frozen=True, slots=True)
class GuardSpec:
    """A guard: true exactly when `action` returned `verdict`.

    `stops_in` names the terminal state a true guard must lead to, for guards that mean the
    run is over (a stop reason or a selection failure); `forge check` holds definitions to it.
    """

    name: str
    action: str
    verdict: str
    stops_in: str | None = None


def request_fingerprint(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """A canonical SHA-256 of a call: the tool name and its arguments with sorted keys.

    Values JSON cannot encode are fingerprinted by `repr`, so give side-effecting tools
    plain data (str, numbers, lists, dicts) for the fingerprint to be stable across runs.
    """
    canonical = json.dumps([tool_name, arguments], sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _select_tool(run: Run) -> str:
    config = run.config
    run.step = run.loop_state.step_count + 1
    run.action = None
    try:
        intent = config.policy(run.goal, run.loop_state)
        if not isinstance(intent, Intent):
            raise TypeError(f"policy returned {intent!r}, not an Intent")
    except Exception as error:  # the policy is user code: any failure ends the run, recorded
        run.error = error
        run.detail = {"error": repr(error)}
        return "policy_error"
    run.intent = intent
    try:
        run.action = select_action(run.goal, intent.capabilities, config.specs)
    except AmbiguousToolChoice as error:
        run.error = error
        run.detail = {"tied": list(error.tied)}
        return "ambiguous"
    except NoMatchingTool as error:
        run.error = error
        run.detail = {"capabilities": sorted(error.required)}
        return "no_tool"
    run.detail = {"tool": run.action.tool_name}
    return "selected"


def _call_tool(run: Run) -> str:
    config, intent, action = run.config, run.intent, run.action
    assert intent is not None and action is not None, "call_tool fires only after select_tool"
    tool = config.tools[action.tool_name]
    contract, arguments = tool.contract, intent.arguments
    attempts = 0

    def attempt() -> Any:
        nonlocal attempts
        attempts += 1
        return execute_tool(contract, arguments).value

    def count_retry(attempt: int, error: TransientToolError, delay: float) -> None:
        run.retries += 1

    def call_with_retry() -> Any:
        return run_with_retry(attempt, config.max_attempts, on_retry=count_retry, **config.retry_options).value

    replayed = False
    try:
        if tool.side_effect:
            fingerprint = request_fingerprint(tool.name, arguments)
            key = intent.idempotency_key or f"{tool.name}:{fingerprint}"
            value, replayed = run.registry.execute_once(key, fingerprint, call_with_retry)
            if replayed:
                run.side_effects_replayed += 1
            else:
                run.side_effects_run += 1
        else:
            value = call_with_retry()
        run.status, run.payload = "ok", value
    except ArgumentContractError as error:
        run.status, run.payload = "retryable_error", error
    except TransientToolError as error:
        run.status, run.payload = "retryable_error", error
    except Exception as error:  # PermanentToolError, IdempotencyConflict, or a handler's own failure
        run.status, run.payload, run.error = "fatal_error", error, error
    run.detail = {"tool": tool.name, "status": run.status, "attempts": attempts}
    if tool.side_effect:
        run.detail["replayed"] = replayed
    if run.status != "ok":
        run.detail["error"] = f"{type(run.payload).__name__}: {run.payload}"
    return run.status


def _record_observation(run: Run) -> str:
    assert run.action is not None and run.status is not None, "record follows call_tool"
    observation = run.loop_state.record(run.action.tool_name, run.status, run.payload)
    run.detail = {"sequence": observation.sequence, "status": observation.status}
    return "recorded"


def _verify_and_decide(run: Run) -> str:
    config, state = run.config, run.loop_state
    last = state.observations[-1]
    verified = False
    if last.status == "ok":
        try:
            verified = bool(config.verify(last))
        except Exception as error:  # verify is user code: its failure ends the run, recorded
            run.error = error
            run.detail = {"error": repr(error)}
            return "verify_error"
    run.decision = config.controller.decide(
        step_count=state.step_count,
        verified=verified,
        fatal_error=state.terminal,
        action_history=state.action_history,
    )
    run.detail = {"verified": verified, "decision": str(run.decision.reason)}
    return str(run.decision.reason)


ACTIONS: Mapping[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            "select_tool", _select_tool,
            frozenset({"selected", "ambiguous", "no_tool", "policy_error"}),
            "ask the policy for an intent; select_action picks the one tool that fits",
        ),
        ActionSpec(
            "call_tool", _call_tool,
            frozenset({"ok", "retryable_error", "fatal_error"}),
            "execute_tool inside run_with_retry; side effects through the idempotency registry",
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
        GuardSpec("tool_choice_ambiguous", "select_tool", "ambiguous", "clarification_required"),
        GuardSpec("no_tool_fits", "select_tool", "no_tool", "capability_gap"),
        GuardSpec("policy_raised", "select_tool", "policy_error", fatal),
        GuardSpec("call_ok", "call_tool", "ok"),
        GuardSpec("call_retryable", "call_tool", "retryable_error"),
        GuardSpec("call_fatal", "call_tool", "fatal_error"),
        GuardSpec("verify_raised", "verify_and_decide", "verify_error", fatal),
    ]
    for reason in StopReason:
        stops_in = None if reason is StopReason.CONTINUE else reason.value
        specs.append(GuardSpec(f"decided_{reason.value}", "verify_and_decide", reason.value, stops_in))
    return {spec.name: spec for spec in specs}


GUARDS: Mapping[str, GuardSpec] = _guards()
