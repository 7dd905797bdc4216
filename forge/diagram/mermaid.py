"""The machine as Mermaid `stateDiagram-v2` text, for Markdown docs: the same nodes and
edges as the DOT rendering, terminal states classed by outcome, an overlay as classes."""

from __future__ import annotations

import json

from forge.diagram.overlay import RunOverlay
from forge.diagram.style import FADED, OUTCOME_COLOURS, TAKEN, WORKING, shown_guard
from forge.records.definition import MachineDefinition

__all__ = ["edge_lines", "to_mermaid"]


def to_mermaid(definition: MachineDefinition, overlay: RunOverlay | None = None) -> str:
    """Mermaid source ending in a newline. `[*]` marks only the initial state."""
    title = json.dumps(definition.title or definition.name)
    lines = ["---", f"title: {title}", "---", "stateDiagram-v2", "    direction TB"]
    lines.extend(edge_lines(definition, overlay))
    classes = {
        "working": f"fill:{WORKING.fill},stroke:{WORKING.line}",
        **{outcome: f"fill:{p.fill},stroke:{p.line},stroke-width:3px" for outcome, p in OUTCOME_COLOURS.items()},
    }
    members: dict[str, list[str]] = {name: [] for name in classes}
    for state in definition.states:
        members[state.outcome if state.terminal and state.outcome else "working"].append(state.name)
    if overlay is not None:
        classes["unreached"] = f"fill:{FADED.fill},stroke:{FADED.line},color:#9e9e9e"
        classes["position"] = f"stroke:{TAKEN},stroke-width:4px"
        members["unreached"] = [s.name for s in definition.states if s.name not in overlay.visited]
        members["position"] = [overlay.position]
    for name, style in classes.items():
        lines.append(f"    classDef {name} {style}")
    for name, states in members.items():
        if states:
            lines.append(f"    class {','.join(states)} {name}")
    return "\n".join(lines) + "\n"


def edge_lines(definition: MachineDefinition, overlay: RunOverlay | None = None, prefix: str = "",
               indent: str = "    ") -> list[str]:
    """The start and every edge as Mermaid lines (with the overlay's counts), each state's
    id after `prefix` (`research__select`: a child loop's, inside its parent's diagram,
    where ids are shared by the whole drawing)."""
    lines = [f"{indent}[*] --> {prefix}{definition.initial}"]
    for t in definition.transitions:
        guard = shown_guard(t.guard, t.dest)
        label = t.trigger if not guard else f"{t.trigger} [{guard}]"
        if overlay is not None and overlay.edge_counts.get(t.index):
            label += f" ×{overlay.edge_counts[t.index]}"
        lines.append(f"{indent}{prefix}{t.source} --> {prefix}{t.dest}: {label}")
    for source, count in (overlay.failures if overlay is not None else {}).items():
        failure = definition.failure_edge(source)
        lines.append(f"{indent}{prefix}{source} --> {prefix}{failure.dest}: {failure.trigger} ×{count}")
    return lines
