"""A run written as a cassette: its trace and journal in a file meant for review, that
`AgentLoop.replay` makes the run again from (what forge's pytest plugin, `forge.testing`,
and `forge eval` record).

One JSON object per line with sorted keys, no clock times or durations, and the loop's
`redact` applied to arguments, results and messages, so two recordings of one run are the
same file and no secret `redact` masks reaches it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.files import write_atomically
from forge.machine.redaction import redacted_journal
from forge.records.journal import journal_lines
from forge.records.trace import Redact, TransitionRecord, child_blocks, in_file_order, redacted_messages

if TYPE_CHECKING:
    from forge.result import LoopResult

__all__ = ["timeless_usage", "write_cassette"]


def write_cassette(path: Path, result: LoopResult, codec: Any = None, redact: Redact | None = None) -> Path:
    """Write `result`'s trace and journal to `path` as a cassette (see the module): sorted
    keys, no times, `redact` applied; each child run (`result.children`) where
    `write_trace` puts it, through its own loop's redact. Raises JournalEncodeError as
    `write_trace` does."""
    return write_atomically(path, map(_line, _cassette_lines(result.trace, redacted_journal(
        result.journal, redact, result.trace), result.journal, codec, redact)))


def _cassette_lines(records: Sequence[TransitionRecord], kept: Sequence[Any], journal: Any, codec: Any,
                    redact: Redact | None) -> Iterable[Mapping[str, Any]]:
    """A run's cassette lines: `kept` is its journal as written (redacted), `journal` the
    one whose children it writes."""
    calls = journal_lines(kept, codec)
    for call in calls:
        if "messages" in call:
            call["messages"] = _timeless(call["messages"])
        reply = call.get("value")
        if call["kind"] == "model" and isinstance(reply, dict) and isinstance(reply.get("usage"), dict):
            call["value"] = {**reply, "usage": timeless_usage(reply["usage"])}
    children = child_blocks(journal, lambda child: list(_child_lines(child.result, codec)))
    return in_file_order((_stable(record, redact) for record in records), calls, children)


def _child_lines(result: LoopResult, codec: Any) -> Iterable[Mapping[str, Any]]:
    journal = result.journal
    masking = getattr(journal, "masking", None)
    kept = masking(journal, result.trace) if masking is not None else journal
    return _cassette_lines(result.trace, kept, journal, codec if codec is not None else getattr(journal, "codec", None),
                           None)


def _line(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str) + "\n"


def _stable(record: TransitionRecord, redact: Redact | None) -> dict[str, Any]:
    data = replace(record, at=0.0, duration_s=0.0).to_json()
    messages = data["detail"].get("messages")
    if isinstance(messages, list):
        data["detail"]["messages"] = _timeless(redacted_messages(messages, redact) if redact is not None else messages)
    return data


def _timeless(messages: Sequence[Any]) -> list[Any]:
    """`messages` without the wall-clock parts of a model call's usage (`started`,
    `seconds`), so two recordings of one run are the same file."""
    from forge.records.usage import USAGE_KEY

    out = []
    for message in messages:
        usage = message.get(USAGE_KEY) if isinstance(message, dict) else None
        if isinstance(usage, dict):
            message = {**message, USAGE_KEY: timeless_usage(usage)}
        out.append(message)
    return out


def timeless_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """A model call's usage without its wall-clock parts (`started`, `seconds`)."""
    return {**usage, "started": None, "seconds": None}
