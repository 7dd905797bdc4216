"""request_approval: ask the approver about a side-effecting call; other tools need no
approval. Verdicts: `Approval`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from forge.agent.stopping import StopController
from forge.errors import ForgeError, UsageError, WrongType
from forge.machine.abstract import NEEDS, AbstractRun
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.effects import Call, Steps
from forge.machine.outcome import StageOutcome
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.fingerprint import NotFingerprintable, request_fingerprint
from forge.machine.trace import error_text

__all__ = ['GUARDS', 'SPEC', 'Approval', 'ApprovalRejected', 'ApprovalRequest']


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


class Approval(StrEnum):
    """request_approval's verdicts."""

    APPROVED = "approved"
    REJECTED = "rejected"
    NO_ANSWER = "no_answer"
    NOT_NEEDED = "not_needed"


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


def _approval_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    if run.pick is None:
        yield NEEDS, run
        return
    for verdict in (Approval.APPROVED, Approval.NOT_NEEDED, Approval.NO_ANSWER):
        yield verdict, run
    yield Approval.REJECTED, replace(run, status=CallOutcome.RETRYABLE_ERROR)  # recorded as an observation next


SPEC = ActionSpec("request_approval", _request_approval, frozenset(Approval),
                  "ask the approver about a side-effecting call; other tools need no approval",
                  _approval_model, "a tool selected by select_tool")
GUARDS = (
    GuardSpec("approval_granted", "request_approval", Approval.APPROVED),
    GuardSpec("approval_not_needed", "request_approval", Approval.NOT_NEEDED),
    GuardSpec("approval_rejected", "request_approval", Approval.REJECTED),
    GuardSpec("approval_unanswered", "request_approval", Approval.NO_ANSWER, "approval_required"),
)
