"""What a file keeps of a run's journal: every value `redact` masks is masked there too.

A trace's records pass their arguments, payloads and messages through the loop's
`redact(tool, field, value)` as they are made; the journal keeps what the run really did,
for a replay in the same process. When a journal is written to a file (`write_trace`, a
cassette), this makes what it keeps match: a tool's arguments and result, every decision's
arguments (a refused or never-made call's too), an approver's fingerprint (made of the
masked arguments), the messages a policy added, a model request's messages and reply, and
a person's answer about a call (its arguments and an approval's edited ones; the
fingerprint it is bound to stays the call's own, a hash, which a replay running the policy
again as code makes again from the real arguments).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from forge.records.details import chosen_call
from forge.records.journal import JournalEntry
from forge.records.trace import Redact, TransitionRecord, redacted_messages

if TYPE_CHECKING:
    from forge.policy import Intent

__all__ = ["masked_entry", "redacted_journal"]


def redacted_journal(journal: Sequence[JournalEntry], redact: Redact | None,
                     records: Iterable[TransitionRecord] = (),
                     chosen: Callable[[Intent], str | None] | None = None) -> list[JournalEntry]:
    """`journal` with `redact` applied to what it keeps (see the module). A decision's tool
    is the one its step called, else the one it names, else the one the step's select
    record (in `records`) names, else the one `chosen(intent)` says its capabilities select;
    a decision no tool can be named for is masked as tool "". Hashes of masked arguments
    are made anew, so a replay of the masked decisions matches."""
    entries = list(journal)
    if redact is None:
        return entries
    from forge.machine.stages import NotFingerprintable, request_fingerprint
    from forge.policy import Intent

    selected = {record.step: call[0] for record in records if (call := chosen_call(record)) is not None}
    called = {entry.step: (entry.name, entry.identity) for entry in entries
              if entry.kind == "tool" and entry.identity is not None}
    decided = {entry.step: entry.value for entry in entries if entry.kind == "policy" and isinstance(entry.value, Intent)}

    def tool_at(step: int) -> str:
        intent = decided.get(step)
        return called[step][0] if step in called else (intent.tool if intent is not None and intent.tool else None) or \
            selected.get(step) or (chosen(intent) if chosen is not None and intent is not None else None) or ""

    out = []
    for entry in entries:
        if entry.kind == "tool" and entry.identity is not None:
            masked = redact(entry.name, "arguments", entry.identity)
            value = entry.value if entry.error is not None else redact(entry.name, "payload", entry.value)
            entry = replace(entry, identity=masked, value=value)
        elif entry.kind == "policy" and isinstance(entry.value, Intent):
            intent = entry.value
            entry = replace(entry, value=Intent(intent.capabilities, _masked(redact, tool_at(entry.step), intent.arguments),
                                                intent.idempotency_key, tool=intent.tool, call_id=intent.call_id))
        elif entry.kind == "model" and isinstance(entry.identity, dict):
            entry = _masked_request(entry, redact)
        elif entry.kind == "approver" and (entry.step in called or entry.step in decided):
            name = tool_at(entry.step)
            asked = called[entry.step][1] if entry.step in called else decided[entry.step].arguments
            with contextlib.suppress(NotFingerprintable):  # then the call was refused before it was asked
                entry = replace(entry, identity=request_fingerprint(name, _masked(redact, name, asked)))
        elif entry.kind == "answer" and isinstance(entry.identity, dict) and entry.identity.get("tool"):
            entry = _masked_answer(entry, redact)
        if entry.messages:
            entry = replace(entry, messages=tuple(redacted_messages(entry.messages, redact)))
        out.append(entry)
    return out


def _masked_answer(entry: JournalEntry, redact: Redact) -> JournalEntry:
    """A person's answer about a call (`forge.machine.asking`) with the call's arguments
    masked, in the question and in an approval's edited arguments (its fingerprint kept:
    see the module)."""
    tool = str(entry.identity["tool"])
    identity = {**entry.identity, "arguments": _masked(redact, tool, entry.identity.get("arguments") or {})}
    value = entry.value
    if isinstance(value, dict) and isinstance(value.get("arguments"), dict):
        value = {**value, "arguments": _masked(redact, tool, value["arguments"])}
    return replace(entry, identity=identity, value=value, stored_hash=None)


def _masked_request(entry: JournalEntry, redact: Redact) -> JournalEntry:
    """A model call with its request's messages and its reply masked as the trace masks a
    conversation (tool calls' arguments, tool results)."""
    request = dict(entry.identity)
    sent = request.get("messages")
    if isinstance(sent, list):
        request["messages"] = redacted_messages(sent, redact)
    value = entry.value
    if entry.error is None and isinstance(value, dict) and isinstance(value.get("message"), dict):
        value = {**value, "message": redacted_messages([value["message"]], redact, sent or [])[0]}
    return replace(entry, identity=request, value=value, stored_hash=None)


def masked_entry(entry: JournalEntry, step_calls: Sequence[JournalEntry], redact: Redact,
                 records: Iterable[TransitionRecord] = (),
                 chosen: Callable[[Intent], str | None] | None = None) -> JournalEntry:
    """`entry` as `redacted_journal` masks it, given the calls of its step (`entry` among
    them, by identity): how a replay compares a call it made with one a masked file keeps."""
    masked = redacted_journal(step_calls, redact, records, chosen)
    return masked[next(i for i, call in enumerate(step_calls) if call is entry)]


def _masked(redact: Redact, tool: str, arguments: Any) -> Any:
    return redact(tool, "arguments", dict(arguments))
