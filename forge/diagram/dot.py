"""The machine as a `graphviz.Digraph`, drawn from the very definition that runs.

Working states flow left to right; terminal states are double-bordered and coloured by
outcome; every edge carries its trigger and guard. With an overlay, visited states and
taken edges are drawn strong (edges labelled with how often they fired), the state where
the run ended is marked, and everything never reached is faded.
"""

from __future__ import annotations

import math

import graphviz

from forge.diagram.overlay import RunOverlay
from forge.diagram.style import FADED, FAILED, LINE_BREAK, OUTCOME_COLOURS, TAKEN, WORKING, edge_label
from forge.machine.definition import MachineDefinition

__all__ = ["START_NODE", "to_digraph"]

START_NODE = "__start__"
_FONT = "Helvetica"


def to_digraph(definition: MachineDefinition, overlay: RunOverlay | None = None) -> graphviz.Digraph:
    """Build the diagram. The only node that is not a state is `START_NODE`, whose one edge
    points at the initial state."""
    title = definition.title or definition.name
    if overlay is not None:
        where = "ended in" if overlay.finished else "now in"
        title += f"{LINE_BREAK}run: {overlay.transitions} transitions, {where} {overlay.position}"
    graph = graphviz.Digraph(
        name=definition.name,
        graph_attr={
            "rankdir": "LR", "label": title, "labelloc": "t", "fontname": _FONT, "fontsize": "16",
            "nodesep": "0.45", "ranksep": "0.9", "pad": "0.3",
        },
        node_attr={"fontname": _FONT, "fontsize": "12", "style": "filled", "penwidth": "1.4"},
        edge_attr={"fontname": _FONT, "fontsize": "10", "arrowsize": "0.8"},
    )
    graph.node(START_NODE, label="", shape="circle", width="0.18", style="filled", fillcolor="black")
    graph.edge(START_NODE, definition.initial)

    for state in definition.states:
        palette = OUTCOME_COLOURS[state.outcome] if state.terminal and state.outcome else WORKING
        attrs = {
            "shape": "box", "style": "rounded,filled", "fillcolor": palette.fill, "color": palette.line,
            "tooltip": state.doc or state.name,
        }
        label = state.name
        if state.terminal:
            attrs["peripheries"] = "2"
            label = f"{state.name}{LINE_BREAK}({state.outcome})"
        elif state.action:
            label = f"{state.name}{LINE_BREAK}‹{state.action}›"
        if overlay is not None:
            if state.name not in overlay.visited:
                attrs.update(fillcolor=FADED.fill, color=FADED.line, fontcolor="#9e9e9e")
            else:
                attrs["penwidth"] = "2.2"
            if state.name == overlay.position:
                attrs["penwidth"] = "3.5"
                label += f"{LINE_BREAK}■ run ended here" if overlay.finished else f"{LINE_BREAK}▶ run is here"
        graph.node(state.name, label=label, **attrs)

    for transition in definition.transitions:
        attrs = {"color": WORKING.line, "fontcolor": "#333333"}
        count = None
        if overlay is not None:
            count = overlay.edge_counts.get(transition.index)
            if count:
                attrs.update(color=TAKEN, fontcolor=TAKEN, penwidth=f"{min(6.0, 1.5 + math.log10(count) * 1.5):.2f}")
            else:
                attrs.update(color=FADED.line, fontcolor="#9e9e9e", style="dashed")
        dest_terminal = definition.state(transition.dest).terminal
        if _is_back_edge(definition, transition.source, transition.dest):
            attrs.update(tailport="s", headport="s")
        elif not dest_terminal:
            attrs["weight"] = "8"
        graph.edge(transition.source, transition.dest, label=edge_label(transition.trigger, transition.guard, count),
                   **attrs)
    for source, count in (overlay.failures if overlay is not None else {}).items():
        failure = definition.failure_edge(source)
        graph.edge(source, failure.dest, label=edge_label(failure.trigger, None, count), color=FAILED,
                   fontcolor=FAILED, style="dashed", penwidth="2")
    return graph


def _is_back_edge(definition: MachineDefinition, source: str, dest: str) -> bool:
    """An edge to a state listed earlier in the file (replan → select) must not pull the
    layout backwards: drawn without rank constraint, the working states stay in one row."""
    order = [state.name for state in definition.states]
    return order.index(dest) <= order.index(source)
