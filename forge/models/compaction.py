"""Keeping a conversation within a model's context limit (`ChatPolicy(..., context=...)`).

A conversation only grows; a long-lived chat agent would pass its model's context limit and
fail. `ContextLimit(tokens, strategy)` keeps what is sent within `tokens`:

- `"trim"` leaves the oldest exchanges out of the request, whole: an assistant message that
  called tools goes with the tool messages that answer it, never one without the other, and
  the latest exchange always stays. A note takes their place;
- `"summarise"` asks the model to summarise them instead (a model call like any other, so it
  is journaled, and a replay answers it from the journal), and the summary takes their place.

Nothing is deleted: the run's messages keep the whole conversation, and a marker message
(`_compacted`: how far it covers, by which strategy, how many messages) says what later
requests leave out and what stands for it. The trace and the conversation panel show the
marker where it was made; the request the journal keeps is what was sent.

The system prompt, the task (the first user message, unless `keep_task=False`) and the
latest exchange are always sent. A request is sized as it is sent, with its note or summary;
one that is over the limit with everything that may go gone is not sent (`ContextOverflow`).
A request's size is counted by `count_tokens` when the policy has one, else estimated as
its JSON text's length over four (a rough rule for English text and JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forge.errors import ForgeError, UsageError

__all__ = ["COMPACTED", "ContextLimit", "ContextOverflow", "compacted_messages", "covered", "left_out", "summary_request",
           "trim_note"]

COMPACTED = "_compacted"
"""The key of a marker message: `{"upto": K, "strategy": ..., "messages": N}` — the
conversation's messages before index K (after its system prompt) are left out of later
requests, and the marker's content stands for them."""

STRATEGIES = ("trim", "summarise")


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """At most `tokens` sent per request, by `strategy` ("trim" or "summarise"); with
    `keep_task` (the default) the conversation's first user message, the task, is always
    sent, as the system prompt and the latest exchange are.

    Raises:
        ValueError: `tokens` is not a whole number >= 1, the strategy is neither, or
            `keep_task` is not a bool.
    """

    tokens: int
    strategy: str = "trim"
    keep_task: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 1:
            raise UsageError(f"ContextLimit(tokens=...) must be a whole number >= 1, got {self.tokens!r}")
        if self.strategy not in STRATEGIES:
            raise UsageError(f"ContextLimit(strategy=...) must be 'trim' or 'summarise', got {self.strategy!r}")
        if not isinstance(self.keep_task, bool):
            raise UsageError(f"ContextLimit(keep_task=...) must be True or False, got {self.keep_task!r}")


class ContextOverflow(ForgeError, RuntimeError):
    """A request is over its `ContextLimit` with everything that may be left out left out
    (what is always sent — the system prompt, the task, the latest exchange — is more than
    the limit): it is not sent, and the run ends in fatal_error saying so."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the request is {size:,} tokens, over the context limit of {limit:,} even after leaving out "
                         "everything that may be left out (the system prompt, the task and the latest exchange are "
                         "always sent): raise ContextLimit(tokens=...), or shorten what is always sent")
        self.size, self.limit = size, limit


def trim_note(dropped: int) -> str:
    """What stands for `dropped` messages a "trim" limit leaves out."""
    return f"({dropped} earlier messages of this conversation are left out to fit the context limit.)"


def size_of(request: Mapping[str, Any], count_tokens: Callable[[Mapping[str, Any]], int] | None) -> int:
    """The request's tokens: counted by `count_tokens`, else estimated (see the module)."""
    if count_tokens is not None:
        return int(count_tokens(request))
    return len(json.dumps({"messages": request.get("messages"), "tools": request.get("tools")}, default=str)) // 4


def covered(messages: Sequence[Mapping[str, Any]], keep_task: bool = True
            ) -> tuple[int, Mapping[str, Any] | None, int]:
    """Where what may be left out starts (after the system prompt and, with `keep_task`, the
    first user message: the task), the latest marker (None when there is none), and the
    index up to which that marker leaves the conversation out (the start when nothing is)."""
    start = 1 if messages and messages[0].get("role") == "system" else 0
    if keep_task and len(messages) > start and messages[start].get("role") == "user" and COMPACTED not in messages[start]:
        start += 1
    marker = next((m for m in reversed(messages) if COMPACTED in m), None)
    return start, marker, max(start, int(marker[COMPACTED]["upto"])) if marker is not None else start


def compacted_messages(messages: Sequence[Mapping[str, Any]], keep_task: bool = True) -> list[Mapping[str, Any]]:
    """The conversation as a request sends it: with the latest marker's messages left out
    and its content in their place, right after the system prompt and the task; markers
    themselves are not sent."""
    start, marker, upto = covered(messages, keep_task)
    if marker is None:
        return [m for m in messages if COMPACTED not in m]
    stand_in = {"role": "system", "content": str(marker.get("content") or "")}
    return [*messages[:start], stand_in, *(m for m in messages[upto:] if COMPACTED not in m)]


def left_out(messages: Sequence[Mapping[str, Any]], fits: Callable[[int], bool], keep_task: bool = True) -> int:
    """How far (an index into `messages`) to leave the conversation out so that what is
    left fits (`fits(upto)`): whole exchanges only, oldest first, the latest always kept;
    the index the latest marker covers already when nothing more needs to go."""
    _, _, already = covered(messages, keep_task)
    bounds = _exchanges(messages, already)
    for upto in bounds[:-1]:  # never past the start of the latest exchange
        if fits(upto):
            return upto
    return bounds[-1] if len(bounds) > 1 else already


def _exchanges(messages: Sequence[Mapping[str, Any]], start: int) -> list[int]:
    """The indexes where exchanges begin at or after `start` (an assistant message that
    called tools begins one, and its tool messages belong to it), `start` first."""
    bounds = [start]
    index = start
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.get("role") == "assistant" and message.get("tool_calls"):
            answered = {call.get("id") for call in message["tool_calls"]}
            while index < len(messages) and ((messages[index].get("role") == "tool"
                                             and messages[index].get("tool_call_id") in answered)
                                             or COMPACTED in messages[index]):
                index += 1
        if index < len(messages):
            bounds.append(index)
    return bounds


def summary_request(model: str, messages: Sequence[Mapping[str, Any]], options: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """The request that asks `model` to summarise `messages` (what a `"summarise"` limit
    leaves out): no tools, the conversation as JSON text in one user message."""
    shown = [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages if COMPACTED not in m]
    return {"model": model, "messages": [
        {"role": "system", "content": ("Summarise this earlier part of a conversation for yourself, to go on from "
                                       "it: keep every fact, value, decision and open question; leave out "
                                       "pleasantries. Answer with the summary only.")},
        {"role": "user", "content": json.dumps(shown, ensure_ascii=False, default=str)},
    ], **options}
