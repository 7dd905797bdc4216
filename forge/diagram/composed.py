"""A loop with the loops its tools run (`AgentLoop.as_tool`) and the loops it may hand off
to (`forge.Handoff`), drawn as one machine.

Each child is drawn inside its parent: a Graphviz cluster (DOT, SVG, …) or a composite state
(Mermaid), titled with the tool that runs it, and joined by a dashed edge from every parent
state that calls tools (its action `call_tool` or `call_tools`) to the child's start; a loop
it may hand off to is drawn the same way, joined from the states where its policy decides
(`select_tool`) by an edge "handoff to NAME"; a child's own children nest inside it the
same way. With a result, each machine carries its
run's overlay: the parent's trace, and in each cluster the last run of that child the result
holds (`result.children`). A loop without children draws exactly as `forge.diagram.diagram`.
"""

from __future__ import annotations

from typing import Any

import graphviz

from forge.child import children_of
from forge.diagram.dot import START_NODE, to_digraph
from forge.diagram.mermaid import edge_lines, to_mermaid
from forge.diagram.overlay import RunOverlay, overlay_of
from forge.diagram.style import TAKEN, WORKING

__all__ = ["CALLING_ACTIONS", "composed_digraph", "composed_mermaid"]

CALLING_ACTIONS = frozenset({"call_tool", "call_tools"})
"""The stage actions of the states where a loop calls its tools, so where a child runs."""


def composed_digraph(loop: Any, result: Any = None) -> graphviz.Digraph:
    """The DOT diagram of `loop` (an `AgentLoop`) with its children as clusters; `result`,
    a `LoopResult` of it, overlays the runs (records overlay the parent's alone).

    Raises:
        TraceMismatch: `result` is not a run of `loop`'s definition."""
    graph = to_digraph(loop.definition, _overlay(loop, result))
    if _joined(loop):
        graph.attr(compound="true")
    _clusters(graph, loop, result, "")
    return graph


def composed_mermaid(loop: Any, result: Any = None) -> str:
    """The Mermaid diagram of `loop` with its children as composite states; `result`
    overlays the runs as `composed_digraph`'s does."""
    text = to_mermaid(loop.definition, _overlay(loop, result))
    lines = text.rstrip("\n").split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("classDef")) if any(
        line.strip().startswith("classDef") for line in lines) else len(lines)
    return "\n".join(lines[:at] + _composites(loop, result, "", "    ") + lines[at:]) + "\n"


def _overlay(loop: Any, result: Any) -> RunOverlay | None:
    """The overlay of `result` (a `LoopResult`, records, anything `overlay_of` takes)."""
    return overlay_of(loop.definition, result) if result is not None else None


def _last_run(result: Any, tool: str) -> Any:
    runs = [child.result for child in getattr(result, "children", ()) if child.tool == tool]
    return runs[-1] if runs else None


def _calling_states(loop: Any) -> list[str]:
    return [state.name for state in loop.definition.states if state.action in CALLING_ACTIONS]


def _joined(loop: Any) -> list[tuple[str, Any, list[str], str]]:
    """The loops drawn inside `loop`: each one's name, loop, the states joined to it and the
    joining edge's label (its agent tools' loops, then the loops it may hand off to)."""
    deciding = [state.name for state in loop.definition.states if state.action == "select_tool"]
    return ([(tool, child, _calling_states(loop), f"{tool} (child run)") for tool, child in children_of(loop).items()]
            + [(name, other, deciding, f"handoff to {name}") for name, other in loop.handoffs.items()])


def _clusters(graph: graphviz.Digraph, loop: Any, result: Any, prefix: str) -> None:
    for tool, child, states, label in _joined(loop):
        inner = f"{prefix}{tool}/"
        child_result = _last_run(result, tool)
        cluster = to_digraph(child.definition, _overlay(child, child_result), prefix=inner)
        cluster.attr(label=f"{tool}: {child.definition.title or child.definition.name}", style="rounded,dashed",
                     color=WORKING.line)
        _clusters(cluster, child, child_result, inner)
        graph.subgraph(cluster)
        for state in states:
            graph.edge(prefix + state, inner + START_NODE, label=label, style="dashed",
                       color=TAKEN if child_result is not None else WORKING.line, lhead=f"cluster_{inner}")


def _composites(loop: Any, result: Any, prefix: str, indent: str) -> list[str]:
    lines: list[str] = []
    for tool, child, states, label in _joined(loop):
        name = f"{prefix}{tool}".replace("/", "__")
        child_result = _last_run(result, tool)
        lines.append(f'{indent}state "{tool}: {child.definition.title or child.definition.name}" as {name} {{')
        inner_prefix = f"{name}__"
        lines.extend(f'{indent}    state "{state.name}" as {inner_prefix}{state.name}'
                     for state in child.definition.states)
        lines.extend(edge_lines(child.definition, _overlay(child, child_result), inner_prefix, indent + "    "))
        lines.extend(_composites(child, child_result, f"{name}/", indent + "    "))
        lines.append(f"{indent}}}")
        lines.extend(f"{indent}{prefix.replace('/', '__')}{state} --> {name}: {label}" for state in states)
    return lines
