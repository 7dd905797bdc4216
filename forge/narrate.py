"""One readable line per transition, for the demo's live output and the debugger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge.machine.trace import TransitionRecord

__all__ = ["decided_by", "describe", "shorten", "summarise_detail"]


def decided_by(record: TransitionRecord) -> str:
    """The guard that enabled the fired transition, or "(unguarded)"."""
    return next((g.name for g in record.guards if g.value), "(unguarded)")


def shorten(text: str, width: int = 90) -> str:
    """`text`, cut to `width` characters with an ellipsis when longer."""
    return text if len(text) <= width else text[: width - 1] + "…"


def summarise_detail(detail: Mapping[str, Any], step: int | None = None) -> str:
    """What the stage did, in a few words: the tool and its outcome, the decision, the error.
    `step` numbers an observation whose detail does not (traces since the columnar trace)."""
    if "failed" in detail:
        return shorten(f"{detail['failed']} raised {detail.get('error', '')}")
    if "unknown_tool" in detail:
        return f"no tool named {detail['unknown_tool']} (closest: {', '.join(detail['suggestions'])})"
    if "approval" in detail:
        return f"{detail['tool']}: approval {detail['approval']}"
    if "status" in detail and "tool" in detail:
        text = f"{detail['tool']}: {detail['status']}"
        if detail.get("replayed"):
            text += " (replayed from the idempotency registry, not run again)"
        elif detail.get("attempts", 1) > 1:
            text += f" after {detail['attempts']} attempts"
        if "error" in detail:
            text += f" — {shorten(detail['error'])}"
        return text
    if "tool" in detail:
        return f"chose {detail['tool']}"
    if "tied" in detail:
        return f"tie between {', '.join(detail['tied'])}"
    if "capabilities" in detail:
        return f"no tool offers any of {', '.join(detail['capabilities'])}"
    if "sequence" in detail or (set(detail) == {"status"} and step is not None):
        return f"observation #{detail.get('sequence', step)}: {detail['status']}"
    if "decision" in detail:
        return f"verified={detail['verified']} → {detail['decision']}"
    if "error" in detail:
        return shorten(str(detail["error"]))
    return ""


def describe(record: TransitionRecord) -> str:
    """`  5 step 2  select ─choose→ execute   tool_selected   chose read_note`"""
    move = f"{record.source} ─{record.trigger}→ {record.dest}"
    return (
        f"{record.sequence:>3} step {record.step:<2} {move:<36} {decided_by(record):<28} "
        f"{summarise_detail(record.detail, record.step)}"
    ).rstrip()
