"""What a transition record's `detail` says, read in one place.

The stages write a record's detail (`select_tool`: the tool chosen, a finish's answer, the
policy's new messages; `call_tool`: the call's tool, status and attempts; the trace itself:
the chosen call's arguments and the observation's payload as it may keep them; the engine:
what failed). Everything that reads a recorded run back (the debugger, the replay of a
trace, diagram overlays, redaction of a journal, a `repeated_action` summary, logging and
tracing) asks these functions rather than testing the detail for keys of its own, so what a
stage writes is read the same way everywhere, from a live run or a trace file of any
version.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from forge.records.trace import TransitionRecord

__all__ = ["arguments_of", "chosen_call", "failure_of", "finish_of", "messages_of", "payload_of", "repeated_call",
           "tool_call", "tool_calls"]

_SELECTED = "selected"
"""select_tool's verdict when the policy's intent chose a tool."""


def chosen_call(record: TransitionRecord) -> tuple[str, str] | None:
    """The tool a select chose and its arguments' text (`{}` when none were kept); None for
    a record that chose no tool."""
    tool = record.detail.get("tool")
    if record.verdict != _SELECTED or not isinstance(tool, str):
        return None
    return tool, str(record.detail.get("arguments", "{}"))


def tool_call(record: TransitionRecord) -> tuple[str, str] | None:
    """The tool a call stage ran and the status it ended in (ok, retryable_error,
    fatal_error); None for a record of anything else."""
    detail = record.detail
    tool, status = detail.get("tool"), detail.get("status")
    return (tool, str(status)) if isinstance(tool, str) and status is not None else None


def tool_calls(record: TransitionRecord) -> tuple[tuple[str, str], ...]:
    """Each tool a call stage ran and the status it ended in: one for `call_tool`'s record,
    each of the calls made together for `call_tools`' (in the order asked); () for a
    record of anything else."""
    one = tool_call(record)
    if one is not None:
        return (one,)
    tools, statuses = record.detail.get("tools"), record.detail.get("statuses")
    if isinstance(tools, list) and isinstance(statuses, list):
        return tuple((str(tool), str(status)) for tool, status in zip(tools, statuses, strict=False))
    return ()


def arguments_of(record: TransitionRecord) -> str | None:
    """The arguments' text the trace kept of the call a select chose (through `redact`,
    capped), or None when the record kept none."""
    arguments = record.detail.get("arguments")
    return None if arguments is None else str(arguments)


def finish_of(record: TransitionRecord) -> str | None:
    """The answer a policy finished with, as the record quotes it; None when it did not."""
    answer = record.detail.get("finish")
    return None if answer is None else str(answer)


_NOT_KEPT = object()


def payload_of(record: TransitionRecord, default: Any = None) -> Any:
    """The payload of the observation the record made, as the trace keeps it (a summary,
    through `redact`); `default` when the record made none."""
    value = record.detail.get("payload", _NOT_KEPT)
    return default if value is _NOT_KEPT else value


def messages_of(record: TransitionRecord) -> Sequence[dict[str, Any]]:
    """The policy's messages new at this record (an LLM policy's chat), as kept."""
    return tuple(record.detail.get("messages", ()))


def failure_of(record: TransitionRecord) -> tuple[str, str] | None:
    """What failed in the transition (the stage, guard, callback or observer) and its
    error's text, when the run ended in `fatal_error` by it; else None."""
    failed = record.detail.get("failed")
    return None if failed is None else (str(failed), str(record.detail.get("error", "")))


def repeated_call(records: Iterable[TransitionRecord]) -> str | None:
    """What a `repeated_action` ending names: the last call the records chose (its tool and
    arguments' text) and how many times they chose that same call, as a sentence; None when
    they chose no call."""
    calls = [chosen for record in records if (chosen := chosen_call(record)) is not None]
    if not calls:
        return None
    tool, arguments = calls[-1]
    return f"{tool} {arguments} was called {calls.count(calls[-1])} times"
