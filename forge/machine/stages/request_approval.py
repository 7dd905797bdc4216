"""request_approval: ask the approver about a side-effecting call; other tools need no
approval. Verdicts: `Approval`."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from forge.agent.stopping import StopController
from forge.errors import ForgeError, UsageError, WrongType
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.fingerprint import NotFingerprintable, request_fingerprint
from forge.records.abstract import NEEDS, AbstractRun
from forge.records.effects import Call, Steps
from forge.records.outcome import StageOutcome
from forge.records.trace import error_text

__all__ = ['GUARDS', 'SPEC', 'Approval', 'ApprovalRejected', 'ApprovalRequest', 'ApprovalTimedOut']


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


class ApprovalTimedOut(ForgeError, TimeoutError):
    """The approver did not answer within the approval state's timeout; recorded as a
    `retryable_error` observation, as a rejection is, and the state's timeout edge is taken.
    `request` is what went unanswered, `seconds` the deadline."""

    def __init__(self, request: ApprovalRequest, seconds: float) -> None:
        super().__init__(f"the approver did not answer about {request.tool} within {seconds:g} s")
        self.request, self.seconds = request, seconds


class Approval(StrEnum):
    """request_approval's verdicts."""

    APPROVED = "approved"
    REJECTED = "rejected"
    NO_ANSWER = "no_answer"
    NOT_NEEDED = "not_needed"
    TIMED_OUT = "timed_out"


class _Within:
    """The approver, given `seconds` to answer (an approval state's timeout): a sync approver
    runs in a thread of its own and is waited for that long; an `async def` one is awaited
    under `asyncio.wait_for`. A late answer is dropped.

    Raises (when called):
        ApprovalTimedOut: no answer within `seconds`.
    """

    def __init__(self, approver: Callable[..., Any], seconds: float) -> None:
        self.approver, self.seconds = approver, seconds

    def __call__(self, request: ApprovalRequest) -> Any:
        if inspect.iscoroutinefunction(self.approver) or inspect.iscoroutinefunction(type(self.approver).__call__):
            return self._awaited(request)
        box: dict[str, Any] = {}
        done = threading.Event()

        def answer() -> None:
            try:
                box["value"] = self.approver(request)
            except BaseException as error:  # handed to the caller's thread below
                box["error"] = error
            finally:
                done.set()

        threading.Thread(target=answer, name="forge-approver", daemon=True).start()
        if not done.wait(self.seconds):
            raise ApprovalTimedOut(request, self.seconds)
        if "error" in box:
            raise box["error"]
        return box.get("value")

    async def _awaited(self, request: ApprovalRequest) -> Any:
        import asyncio

        try:
            return await asyncio.wait_for(self.approver(request), self.seconds)
        except TimeoutError:
            raise ApprovalTimedOut(request, self.seconds) from None


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
    request = ApprovalRequest(facts.goal or run.goal, facts.step, tool.name, intent.arguments, fingerprint)
    seconds = config.timeouts.get(run.state)
    approver = config.approver if seconds is None else _Within(config.approver, seconds)
    try:
        answer = facts.approvals.get(fingerprint)  # a person's answer to this exact call (`forge.machine.asking`)
        if answer is None:
            answer = yield Call(approver, (request,), "the approver", "approver", "approver", fingerprint)
    except ApprovalTimedOut as late:
        return StageOutcome(Approval.TIMED_OUT, {"tool": tool.name, "approval": "timed out", "status": "retryable_error",
                                                 "error": f"ApprovalTimedOut: {late}"},
                            facts={"status": "retryable_error", "payload": late})
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


def _approval_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None:
        yield NEEDS, run
        return
    for verdict in (Approval.APPROVED, Approval.NOT_NEEDED, Approval.NO_ANSWER):
        yield verdict, run
    yield Approval.REJECTED, replace(run, status=CallOutcome.RETRYABLE_ERROR)  # recorded as an observation next
    yield Approval.TIMED_OUT, replace(run, status=CallOutcome.RETRYABLE_ERROR)


SPEC = ActionSpec("request_approval", _request_approval, frozenset(Approval),
                  "ask the approver about a side-effecting call; other tools need no approval",
                  _approval_model, "a tool selected by select_tool", timed=frozenset({Approval.TIMED_OUT}))
GUARDS = (
    GuardSpec("approval_granted", "request_approval", Approval.APPROVED),
    GuardSpec("approval_not_needed", "request_approval", Approval.NOT_NEEDED),
    GuardSpec("approval_rejected", "request_approval", Approval.REJECTED),
    GuardSpec("approval_unanswered", "request_approval", Approval.NO_ANSWER, "approval_required"),
    GuardSpec("approval_timed_out", "request_approval", Approval.TIMED_OUT),
)
