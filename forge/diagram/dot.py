"""The machine as a `graphviz.Digraph`, drawn from the very definition that runs.

Working states flow top to bottom, so a loop fits a page 800 px wide; terminal states are
double-bordered and coloured by outcome; every edge carries its trigger and its guard,
unless the guard only repeats the name of the state it leads to. A legend says what the
colours and lines mean. With an overlay, visited states and taken edges are drawn strong
(edges labelled with how often they fired, and the tools that ran on them), the state where
the run ended is marked, and everything never reached is faded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import graphviz

from forge.diagram.overlay import RunOverlay
from forge.diagram.style import FADED, FAILED, LINE_BREAK, OUTCOME_COLOURS, TAKEN, WORKING, edge_label, shown_guard
from forge.records.definition import MachineDefinition

__all__ = ["LEGEND_NODE", "START_NODE", "to_digraph"]

START_NODE = "__start__"
LEGEND_NODE = "__legend__"
_FONT = "Helvetica"


def to_digraph(definition: MachineDefinition, overlay: RunOverlay | None = None, ids: bool = False,
               against: RunOverlay | None = None, diverged: str | None = None,
               names: tuple[str, str] = ("A", "B"), counterexample: Sequence[int] = (),
               many: tuple[Mapping[int, Any], int] | None = None, prefix: str = "") -> graphviz.Digraph:
    """Build the diagram. The only node that is not a state is `START_NODE`, whose one edge
    points at the initial state. With `ids`, each state, transition and drawn `fail` edge
    carries an id its SVG element keeps (`state-NAME`, `edge-INDEX`, `fail-SOURCE`), so a
    page can find what a record moved along (the run inspector).

    With `against`, a second run's overlay, both paths are drawn (`names` say which is
    which): an edge both took is drawn strong and labelled with each run's count, an edge
    only one took in that run's colour, and `diverged`, the state the runs were in when
    they first differed, is marked.

    `counterexample` (transition indices, in order: a path `forge check` found that breaks
    a property) is drawn in red, each edge numbered by its place on the path, and the state
    it ends in outlined in red.

    `many` (per-edge `forge.diagram.many.EdgeStats` and the number of runs) labels each edge
    with how many runs took it, its p50 and p95 durations and the share that failed; an
    edge no run took is dimmed, one whose runs mostly failed is drawn red."""
    if against is not None and overlay is not None:
        return _compared(definition, overlay, against, diverged, names)
    steps: dict[int, list[int]] = {}
    for number, index in enumerate(counterexample, start=1):
        steps.setdefault(index, []).append(number)
    ends_in = next((t.dest for t in definition.transitions if t.index == counterexample[-1]), None) \
        if counterexample else None
    graph = _started(definition, _title(definition, overlay, counterexample, many), prefix)
    for state in definition.states:
        label, attrs = _state_look(state, overlay, ends_in, ids)
        graph.node(prefix + state.name, label=label, **attrs)
    for transition in definition.transitions:
        label, attrs = _edge_look(definition, transition, overlay, many, steps.get(transition.index))
        graph.edge(prefix + transition.source, prefix + transition.dest, label=label, **attrs,
                   **({"id": f"edge-{transition.index}"} if ids else {}))
    for source, count in (overlay.failures if overlay is not None else {}).items():
        failure = definition.failure_edge(source)
        graph.edge(prefix + source, prefix + failure.dest, label=edge_label(failure.trigger, None, count),
                   color=FAILED, fontcolor=FAILED, style="dashed", penwidth="2",
                   **({"id": f"fail-{source}"} if ids else {}))
    if not prefix:
        _legend(graph, overlay is not None)
    return graph


def _title(definition: MachineDefinition, overlay: RunOverlay | None, counterexample: Sequence[int],
           many: tuple[Mapping[int, Any], int] | None) -> str:
    title = definition.title or definition.name
    if overlay is not None:
        where = _where(definition, overlay.position, overlay.finished)
        title += f"{LINE_BREAK}run: {overlay.transitions} transitions, {where} {overlay.position}"
    if counterexample:
        title += f"{LINE_BREAK}counterexample: {len(counterexample)} transitions, in red"
    if many is not None:
        title += f"{LINE_BREAK}{many[1]} runs"
    return title


def _state_look(state: Any, overlay: RunOverlay | None, ends_in: str | None, ids: bool) -> tuple[str, dict[str, str]]:
    """A state's label and look: its outcome's colours, faded where a run never went,
    marked where a run is, ended or waits, and where a counterexample ends."""
    palette = OUTCOME_COLOURS[state.outcome] if state.terminal and state.outcome else WORKING
    attrs = {"shape": "box", "style": "rounded,filled", "fillcolor": palette.fill, "color": palette.line,
             "tooltip": state.doc or state.name}
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
            label += LINE_BREAK + _here(state, overlay.finished)
    if state.name == ends_in:
        attrs.update(color=FAILED, penwidth="3.5")
        label += f"{LINE_BREAK}✗ the property fails here"
    if ids:
        attrs["id"] = f"state-{state.name}"
    return label, attrs


def _here(state: Any, finished: bool) -> str:
    """What the state a run is in says of it: it waits there for a person (a needs-input
    state), ended there, or is there now."""
    if finished and state.outcome == "needs_input":
        return "⏸ run waits here"
    return "■ run ended here" if finished else "▶ run is here"


def _edge_look(definition: MachineDefinition, transition: Any, overlay: RunOverlay | None,
               many: tuple[Mapping[int, Any], int] | None, places: list[int] | None) -> tuple[str, dict[str, str]]:
    """A transition's label and look: how often a run took it (and with which tools), or
    many runs' counts and durations, or its `places` on a counterexample (None: not on it)."""
    attrs = {"color": WORKING.line, "fontcolor": "#333333"}
    count = None
    if overlay is not None:
        count = overlay.edge_counts.get(transition.index)
        if count:
            attrs.update(color=TAKEN, fontcolor=TAKEN, penwidth=f"{min(6.0, 1.5 + math.log10(count) * 1.5):.2f}")
        else:
            attrs.update(color=FADED.line, fontcolor="#9e9e9e", style="dashed")
    if _is_back_edge(definition, transition.source, transition.dest):
        attrs.update(tailport="e", headport="e", constraint="false")
    elif not definition.state(transition.dest).terminal:
        attrs["weight"] = "8"
    label = edge_label(transition.trigger, shown_guard(transition.guard, transition.dest), count)
    tools = overlay.edge_tools.get(transition.index) if overlay is not None else None
    if tools:
        label += LINE_BREAK + _tool_counts(tools)
    if many is not None:
        stat = many[0].get(transition.index)
        label += LINE_BREAK + _stats_label(stat)
        if stat is None:
            attrs.update(color=FADED.line, fontcolor="#9e9e9e", style="dashed")
        else:
            colour = FAILED if stat.failed >= 0.5 else TAKEN
            attrs.update(color=colour, fontcolor=colour, penwidth=f"{min(6.0, 1.2 + math.log10(stat.runs) * 1.5):.2f}")
    if places:
        attrs.update(color=FAILED, fontcolor=FAILED, penwidth="3")
        label = f"{', '.join(map(str, places))}. {label}"
    return label, attrs


def _started(definition: MachineDefinition, title: str, prefix: str = "") -> graphviz.Digraph:
    """An empty diagram of `definition` titled `title`: its look, and the start node with
    its edge to the initial state (a cluster of its own, its names after `prefix`, when
    `prefix` is given)."""
    graph = graphviz.Digraph(
        name=f"cluster_{prefix}" if prefix else definition.name,
        graph_attr={
            "rankdir": "TB", "label": title, "labelloc": "t", "fontname": _FONT, "fontsize": "16",
            "nodesep": "0.35", "ranksep": "0.55", "pad": "0.3", "size": "8.3,30",
        },
        node_attr={"fontname": _FONT, "fontsize": "12", "style": "filled", "penwidth": "1.4"},
        edge_attr={"fontname": _FONT, "fontsize": "10", "arrowsize": "0.8"},
    )
    graph.node(prefix + START_NODE, label="", shape="circle", width="0.18", style="filled", fillcolor="black")
    graph.edge(prefix + START_NODE, prefix + definition.initial)
    return graph


FIRST_ONLY = "#1f77b4"
SECOND_ONLY = "#d35400"


def _compared(definition: MachineDefinition, a: RunOverlay, b: RunOverlay, diverged: str | None,
              names: tuple[str, str]) -> graphviz.Digraph:
    """Both runs' paths on one diagram (see `to_digraph`)."""
    ended = " · ".join(f"{name}: {o.transitions} transitions, {_where(definition, o.position, o.finished)} {o.position}"
                       for name, o in zip(names, (a, b), strict=True))
    graph = _started(definition, f"{definition.title or definition.name}{LINE_BREAK}{ended}")
    for state in definition.states:
        label, attrs = _compared_state(state, a, b, diverged, names)
        graph.node(state.name, label=label, id=f"state-{state.name}", **attrs)
    for transition in definition.transitions:
        first, second = a.edge_counts.get(transition.index, 0), b.edge_counts.get(transition.index, 0)
        attrs = {"color": FADED.line, "fontcolor": "#9e9e9e", "style": "dashed"}
        if first and second:
            attrs = {"color": TAKEN, "fontcolor": TAKEN, "penwidth": "2.5"}
        elif first or second:
            colour = FIRST_ONLY if first else SECOND_ONLY
            attrs = {"color": colour, "fontcolor": colour, "penwidth": "2.5"}
        if _is_back_edge(definition, transition.source, transition.dest):
            attrs.update(tailport="e", headport="e", constraint="false")
        elif not definition.state(transition.dest).terminal:
            attrs["weight"] = "8"
        counts = " ".join(f"{name}×{n}" for name, n in zip(names, (first, second), strict=True) if n)
        label = edge_label(transition.trigger, shown_guard(transition.guard, transition.dest))
        graph.edge(transition.source, transition.dest, label=label + (LINE_BREAK + counts if counts else ""),
                   id=f"edge-{transition.index}", **attrs)
    graph.node(LEGEND_NODE, shape="plaintext", fontsize="9", fillcolor="white", label=(
        f'<<table border="0" cellspacing="2" cellpadding="3"><tr><td bgcolor="{TAKEN}"><font color="white">both'
        f'</font></td><td bgcolor="{FIRST_ONLY}"><font color="white">{escape(names[0])} only</font></td>'
        f'<td bgcolor="{SECOND_ONLY}"><font color="white">{escape(names[1])} only</font></td>'
        '<td>dashed: neither · ◆ where they diverge</td></tr></table>>'))
    with graph.subgraph() as bottom:
        bottom.attr(rank="sink")
        bottom.node(LEGEND_NODE)
    return graph


def _compared_state(state: Any, a: RunOverlay, b: RunOverlay, diverged: str | None,
                    names: tuple[str, str]) -> tuple[str, dict[str, str]]:
    """A state's node on a diagram of two runs, its label and attributes: faded where
    neither went, marked where each is or ended and where they diverge."""
    palette = OUTCOME_COLOURS[state.outcome] if state.terminal and state.outcome else WORKING
    attrs = {"shape": "box", "style": "rounded,filled", "fillcolor": palette.fill, "color": palette.line}
    label = f"{state.name}{LINE_BREAK}({state.outcome})" if state.terminal else state.name
    if state.terminal:
        attrs["peripheries"] = "2"
    if state.name not in a.visited | b.visited:
        attrs.update(fillcolor=FADED.fill, color=FADED.line, fontcolor="#9e9e9e")
    for name, run in zip(names, (a, b), strict=True):
        if state.name == run.position:
            attrs["penwidth"] = "3.5"
            label += f"{LINE_BREAK}■ {name} ended here" if run.finished else f"{LINE_BREAK}▶ {name} is here"
    if state.name == diverged:
        attrs.update(penwidth="3.5", color=FAILED)
        label += f"{LINE_BREAK}◆ the runs diverge here"
    return label, attrs


def _tool_counts(tools: Mapping[str, int], per_line: int = 2) -> str:
    """`read_note 3 · analyse 4` lines: the tools that ran on an edge, most used first."""
    ranked = sorted(tools.items(), key=lambda item: (-item[1], item[0]))
    parts = [f"{name} {count}" for name, count in ranked]
    return LINE_BREAK.join(" · ".join(parts[i:i + per_line]) for i in range(0, len(parts), per_line))


def _legend(graph: graphviz.Digraph, overlay: bool) -> None:
    """A small key at the bottom: what the colours and lines mean."""
    swatch = "".join(
        f'<td bgcolor="{palette.fill}" border="1" color="{palette.line}">{outcome.replace("_", " ")}</td>'
        for outcome, palette in OUTCOME_COLOURS.items()
    )
    lines = ("taken ×N, with the tools that ran · dashed: never reached · red: a hook failed" if overlay
             else "edge: trigger [guard], the guard left out where it names the state it leads to")
    graph.node(LEGEND_NODE, shape="plaintext", fontsize="9", fillcolor="white", label=(
        f'<<table border="0" cellspacing="2" cellpadding="3"><tr><td>ends in</td>{swatch}'
        f'<td bgcolor="{WORKING.fill}" border="1" color="{WORKING.line}">working state</td></tr>'
        f'<tr><td colspan="5">{lines}</td></tr></table>>'
    ))
    with graph.subgraph() as bottom:
        bottom.attr(rank="sink")
        bottom.node(LEGEND_NODE)


def _is_back_edge(definition: MachineDefinition, source: str, dest: str) -> bool:
    """An edge to a state listed earlier in the file (replan → select) must not pull the
    layout backwards: drawn without rank constraint, the working states stay in one row."""
    order = [state.name for state in definition.states]
    return order.index(dest) <= order.index(source)


def _stats_label(stat: Any) -> str:
    """An edge's line over many runs (a `forge.diagram.many.EdgeStats`, or None: no run took it)."""
    if stat is None:
        return "no run"
    return (f"{stat.runs} runs · p50 {stat.p50 * 1000:.1f} ms · p95 {stat.p95 * 1000:.1f} ms · "
            f"{stat.failed:.0%} failed")


def _where(definition: MachineDefinition, position: str, finished: bool) -> str:
    """How a run's overlay says where it is: ended in a terminal state, waits in a
    needs-input one (for an answer), or now in a state it is passing through."""
    if not finished:
        return "now in"
    state = next((s for s in definition.states if s.name == position), None)
    return "waits in" if state is not None and state.outcome == "needs_input" else "ended in"
