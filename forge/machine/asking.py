"""The person's answer is a call: how a run that needs input asks, and how it goes on.

A run that reaches a terminal state whose outcome is `needs_input` (`approval_required`,
`input_required`, `clarification_required`, `capability_gap`, a definition's own) asks its
performer whether anyone answers there (`Performer.asks`):

- live in memory, nobody does: the run ends in that state, exactly as it always has, and
  `loop.run(reply, state=result.state)` goes on from it;
- a durable run's performer waits for a person, with the state's deadline;
- a replay, a fork or a recovery answers from the journal.

The question is a call of the journal, of kind `answer`: its identity is what the run asks
(`Waiting.identity`), its value the answer (`Answer.to_json()`), or None when the wait's
deadline passed first. An answered run goes on in the same run, by a transition of its own
from the waiting state back to the definition's initial state (trigger `answer`, the
`ANSWER_TRIGGER`; a deadline that passed takes the state's `timeout` edge instead): one
journal, one trace, however many answers. `continuation` says what an answer changes:

- a text reply (`input_required`) is the goal from then on, and starts a new turn of the
  conversation (its step budget and repetition count start again, as
  `loop.run(reply, state=...)` does);
- any other answer makes the waiting call the run's next decision (`pinned`): with the
  tool the answer names, with a tool added (`Answer.add_tool`), or approved or rejected by
  its fingerprint (the approval stage takes a given answer before asking its approver); an
  approval with edited arguments makes the edited call the decision, and the answer's
  record keeps the original.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forge.agent.actions import AmbiguousToolChoice, NoMatchingTool, UnknownTool
from forge.machine.run import Run
from forge.machine.stages.fingerprint import NotFingerprintable, request_fingerprint
from forge.policy import Intent
from forge.records.answers import Answer, Waiting
from forge.records.definition import ANSWER_TRIGGER
from forge.records.effects import Call, Steps
from forge.records.outcome import FactChanges

__all__ = ["ANSWER_TRIGGER", "UNASKED", "Continuation", "asked", "continuation", "question_of"]

UNASKED: Any = object()
"""What `asked` returns when nobody answers there: the run ends in its waiting state."""


@dataclass(frozen=True, slots=True)
class Continuation:
    """What an answer changes in the run it answers: the facts it sets (`pinned` decision,
    `approvals` given, the question and the error of the wait cleared), the goal from now on
    when it is a reply (a new turn of the conversation), a tool it adds, and what the
    answer's transition record says."""

    facts: FactChanges
    detail: Mapping[str, Any]
    goal: str | None = None
    added_tool: str | None = None
    approvals: Mapping[str, bool] = field(default_factory=dict)


def question_of(run: Run) -> Waiting:
    """What the run, in its waiting state, asks a person: the call it waits on (tool,
    arguments, fingerprint, contract), the tools that tied or the capabilities no tool
    offers, or the policy's own question."""
    state, facts = run.state, run.facts
    if facts.question is not None and state == "input_required":
        return Waiting(state, prompt=facts.question)
    intent, error = facts.intent, facts.error
    arguments = dict(intent.arguments) if intent is not None else {}
    tool = facts.action.tool_name if facts.action is not None else (intent.tool if intent is not None else None)
    tied = tuple(error.tied) if isinstance(error, AmbiguousToolChoice) else ()
    capabilities = tuple(sorted(error.required)) if isinstance(error, NoMatchingTool) else ()
    if isinstance(error, UnknownTool):
        tool = error.name
    fingerprint = fingerprint_of(tool, arguments) if tool else None
    found = run.config.tools.get(tool) if tool else None
    contract = None if found is None else {"required": sorted(found.required), "optional": sorted(found.optional),
                                           "schema": None if found.schema is None else dict(found.schema)}
    return Waiting(state, tool, arguments, fingerprint, tied, capabilities, contract=contract)


def fingerprint_of(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """The call's `request_fingerprint`, or None for arguments that have none."""
    try:
        return request_fingerprint(tool, arguments)
    except NotFingerprintable:
        return None


def asked(run: Run) -> Steps[Any]:
    """Ask the run's performer for an answer to what the run waits for: `(waiting, answer)`,
    the answer None when the wait's deadline passed first; `UNASKED` when nobody answers
    here (the run ends where it is)."""
    performer = run.performer
    if performer is None or not performer.asks():
        return UNASKED
    waiting = question_of(run)
    value = yield Call(performer.ask, (waiting,), "the person", "answer", waiting.state, waiting.identity)
    return waiting, (None if value is None else Answer.from_json(value))


def continuation(run: Run, answer: Answer, waiting: Waiting) -> Continuation:
    """What `answer` to `waiting` changes in `run` (see the module)."""
    cleared: FactChanges = {"question": None, "error": None}
    detail: dict[str, Any] = {"answer": answer.kind}
    if answer.kind == "text":
        return Continuation({**cleared, "pinned": None}, {**detail, "reply": str(answer.value)}, goal=str(answer.value))
    intent = run.facts.intent
    pinned = intent if intent is not None else Intent.call(waiting.tool or "", **waiting.arguments)
    if answer.kind == "tool":
        detail["tool"] = str(answer.value)
        pinned = Intent(pinned.capabilities, pinned.arguments, pinned.idempotency_key, tool=str(answer.value),
                        call_id=pinned.call_id)
    if answer.kind == "add_tool":
        detail["tool"] = str(answer.value)
        return Continuation({**cleared, "pinned": pinned}, detail, added_tool=str(answer.value))
    approvals: dict[str, bool] = {}
    if answer.kind == "approve" and answer.arguments is not None:
        tool = pinned.tool or waiting.tool or ""
        pinned = Intent(frozenset(), dict(answer.arguments), tool=tool, call_id=pinned.call_id)
        detail["edited"] = {"tool": tool, "original": _shown(run, tool, waiting.arguments),
                            "original_fingerprint": waiting.fingerprint,
                            "arguments": _shown(run, tool, answer.arguments)}
        approvals[request_fingerprint(tool, pinned.arguments)] = True
    elif answer.kind in ("approve", "reject"):
        approvals[str(answer.value)] = answer.kind == "approve"
    return Continuation({**cleared, "pinned": pinned}, detail, approvals=approvals)


def _shown(run: Run, tool: str, arguments: Mapping[str, Any]) -> Any:
    """Arguments as the trace may keep them: through the loop's `redact`, as every call's
    are (one that fails keeps nothing of them, saying so)."""
    redact = run.config.redact
    if redact is None:
        return dict(arguments)
    try:
        return redact(tool, "arguments", dict(arguments))
    except Exception as error:
        return f"<not shown: redact raised {type(error).__name__}>"

