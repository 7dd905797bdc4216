"""The diagram's look, shared by the DOT and Mermaid renderings."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FADED", "FAILED", "LINE_BREAK", "shown_guard", "OUTCOME_COLOURS", "TAKEN", "WORKING", "Palette", "edge_label"]


@dataclass(frozen=True, slots=True)
class Palette:
    fill: str
    line: str


WORKING = Palette("#e3f0fb", "#2f6fad")
OUTCOME_COLOURS = {
    "success": Palette("#dcf2dc", "#2e7d32"),
    "failure": Palette("#fbe0e0", "#c62828"),
    "needs_input": Palette("#fff1cc", "#b26a00"),
}
FADED = Palette("#f6f6f6", "#bdbdbd")
TAKEN = "#1f4e8c"
FAILED = "#c62828"  # a failing hook's implicit `fail` edge, drawn only when a run took it


LINE_BREAK = "\\n"  # DOT's own escape: the label source stays on one line


def edge_label(trigger: str, guard: str | None, count: int | None = None) -> str:
    """`choose ×3` over `[tool_selected]` (DOT text); the count only on an overlay."""
    head = trigger if count is None else f"{trigger} ×{count}"
    return f"{head}{LINE_BREAK}[{guard}]" if guard else head


def shown_guard(guard: str | None, dest: str) -> str | None:
    """The guard an edge shows: none when it only repeats the state it leads to
    (decided_repeated_action into repeated_action), since the arrow already says so."""
    return None if guard is None or guard.endswith(dest) else guard
