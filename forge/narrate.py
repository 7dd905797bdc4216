"""One readable line per transition, for the demo's live output and the debugger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge.records.trace import TransitionRecord

__all__ = ["decided_by", "describe", "shorten", "summarise_detail"]


def decided_by(record: TransitionRecord) -> str:
    """The guard that enabled the fired transition, or "(unguarded)"."""
    return next((g.name for g in record.guards if g.value), "(unguarded)")


def shorten(text: str, width: int = 90) -> str:
    """`text`, cut to `width` characters with an ellipsis when longer."""
    return text if len(text) <= width else text[: width - 1] + "…"


def summarise_detail(detail: Mapping[str, Any], step: int | None = None) -> str:
    """What the stage did, in a few words: the tool and its outcome, the decision, the error.
    `step` numbers an observation whose detail does not (traces since the columnar trace).
    A detail missing a field (a hand-edited or foreign trace) shows what it has."""
    for rule in _RULES:
        said = rule(detail, step)
        if said is not None:
            return said
    return shorten(_get(detail, "error")) if "error" in detail else ""


def _get(detail: Mapping[str, Any], key: str) -> str:
    return str(detail.get(key, "?"))


def _failed_or_refused(detail: Mapping[str, Any], step: int | None) -> str | None:
    """A stage that raised, a tool named that does not exist, an approval, an answer."""
    if "failed" in detail:
        return shorten(f"{_get(detail, 'failed')} raised {_get(detail, 'error')}")
    if "unknown_tool" in detail:
        close = ", ".join(map(str, detail.get("suggestions") or ()))
        return f"no tool named {_get(detail, 'unknown_tool')} ({'closest: ' + close if close else 'none is close'})"
    if "approval" in detail:
        return f"{_get(detail, 'tool')}: approval {_get(detail, 'approval')}"
    if "finish" in detail:
        return shorten(f"finished: {_get(detail, 'finish')}")
    return None


def _one_call(detail: Mapping[str, Any], step: int | None) -> str | None:
    """A tool called (its outcome, its attempts) or chosen."""
    if "tool" not in detail:
        return None
    if "status" not in detail:
        return shorten(f"chose {_get(detail, 'tool')} {detail['arguments']}" if "arguments" in detail
                       else f"chose {_get(detail, 'tool')}")
    text = f"{_get(detail, 'tool')}: {_get(detail, 'status')}"
    if detail.get("replayed"):
        text += " (replayed from the idempotency registry, not run again)"
    elif isinstance(detail.get("attempts"), int) and detail["attempts"] > 1:
        text += f" after {detail['attempts']} attempts"
    if "error" in detail:
        text += f" — {shorten(_get(detail, 'error'))}"
    return text


def _calls_together(detail: Mapping[str, Any], step: int | None) -> str | None:
    """Calls made together: chosen, made, or their observations."""
    if "tools" in detail and "statuses" in detail:
        made = ", ".join(f"{tool}: {status}" for tool, status in zip(detail["tools"], detail["statuses"], strict=False))
        return shorten(f"{len(detail['tools'])} calls made together ({made})")
    if "tools" in detail:
        return shorten(f"chose {len(detail['tools'])} calls to make together: {', '.join(map(str, detail['tools']))}")
    if "statuses" in detail:
        text = f"{len(detail['statuses'])} observations: {', '.join(map(str, detail['statuses']))}"
        return shorten(f"{text} · {detail['payload']}") if "payload" in detail else text
    return None


def _no_single_tool(detail: Mapping[str, Any], step: int | None) -> str | None:
    """Tools that tied, or capabilities no tool offers."""
    if "tied" in detail:
        return f"tie between {', '.join(map(str, detail.get('tied') or ()))}"
    if "capabilities" in detail:
        return f"no tool offers any of {', '.join(map(str, detail.get('capabilities') or ()))}"
    return None


def _observed_or_decided(detail: Mapping[str, Any], step: int | None) -> str | None:
    """An observation recorded, or the verdict on it."""
    if "sequence" in detail or (set(detail) <= {"status", "payload"} and step is not None and "status" in detail):
        text = f"observation #{detail.get('sequence', step)}: {_get(detail, 'status')}"
        return shorten(f"{text} · {detail['payload']}") if "payload" in detail else text
    if "decision" in detail:
        return f"verified={_get(detail, 'verified')} → {_get(detail, 'decision')}"
    return None


_RULES = (_failed_or_refused, _one_call, _calls_together, _no_single_tool, _observed_or_decided)
"""What a detail says, first rule that knows it first."""


def describe(record: TransitionRecord) -> str:
    """`  5 step 2  select ─choose→ execute   tool_selected   chose read_note`"""
    move = f"{record.source} ─{record.trigger}→ {record.dest}"
    patched = " (patched in a fork)" if "patched" in record.detail else ""
    return (
        f"{record.sequence:>3} step {record.step:<2} {move:<36} {decided_by(record):<28} "
        f"{summarise_detail(record.detail, record.step)}{patched}"
    ).rstrip()
