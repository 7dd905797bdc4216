"""A loop with the loops its tools run (`AgentLoop.as_tool`) and the loops it may hand off
to (`forge.Handoff`), drawn as one machine.

Each child is drawn inside its parent: a Graphviz cluster (DOT, SVG, …) or a composite state
(Mermaid), titled with the tool that runs it, and joined by a dashed edge from every parent
state that calls tools (its action `call_tool` or `call_tools`) to the child's start; a loop
it may hand off to is drawn the same way, joined from the states where its policy decides
(`select_tool`) by an edge "handoff to NAME"; a child's own children nest inside it the
same way. An agent in another process a tool calls (an A2A agent, `forge.machine.child.RemoteAgent`)
is a box beside the loop, joined as a child is: its machine is not forge's to draw. A loop
whose policy falls back from model to model (`forge.models.fallback`) has a note beside those
states naming the models in turn. With a result, each machine carries its
run's overlay: the parent's trace, and in each cluster the last run of that child the result
holds (`result.children`). A loop without children draws exactly as `forge.diagram.diagram`.
"""

from __future__ import annotations

from typing import Any

import graphviz

from forge.diagram.dot import START_NODE, to_digraph
from forge.diagram.mermaid import edge_lines, to_mermaid
from forge.diagram.overlay import RunOverlay, overlay_of
from forge.diagram.style import TAKEN, WORKING
from forge.machine.child import children_of, remote_agents_of

__all__ = ["CALLING_ACTIONS", "MODELS_NODE", "REMOTE_NODE", "composed_digraph", "composed_mermaid", "fallback_chain"]

CALLING_ACTIONS = frozenset({"call_tool", "call_tools"})
"""The stage actions of the states where a loop calls its tools, so where a child runs."""

REMOTE_NODE = "__remote"
"""The box of an agent in another process a tool calls (`forge.machine.child.RemoteAgent`), after the tool's name."""

MODELS_NODE = "__models"
"""The note naming a fallback's models (`fallback_chain`), beside the states where its policy decides."""


def composed_digraph(loop: Any, result: Any = None) -> graphviz.Digraph:
    """The DOT diagram of `loop` (an `AgentLoop`) with its children as clusters; `result`,
    a `LoopResult` of it, overlays the runs (records overlay the parent's alone).

    Raises:
        TraceMismatch: `result` is not a run of `loop`'s definition."""
    graph = to_digraph(loop.definition, _overlay(loop, result))
    if _joined(loop):
        graph.attr(compound="true")
    _models(graph, loop, "")
    _clusters(graph, loop, result, "")
    _remotes(graph, loop, "")
    return graph


def _remotes(graph: graphviz.Digraph, loop: Any, prefix: str) -> None:
    """Each agent in another process a tool calls (an A2A agent), as a box beside the
    loop, joined as a child run is, from the states that call tools."""
    for tool, remote in remote_agents_of(loop).items():
        node = f"{prefix}{tool}/{REMOTE_NODE}"
        graph.node(node, f"{tool}: {remote.protocol} agent {remote.name}\\n{remote.url}", shape="box3d",
                   style="dashed", color=WORKING.line, fontsize="10")
        for state in _calling_states(loop):
            graph.edge(prefix + state, node, label=f"{tool} ({remote.protocol} task)", style="dashed",
                       color=WORKING.line)


def fallback_chain(loop: Any) -> str | None:
    """The models a loop's policy asks in turn when one fails (`forge.models.fallback.FallbackPolicy`),
    as the diagram says them (`claude-sonnet-4-5 (anthropic) → gpt-4.1-mini (openai)`); None
    for a policy that is not a fallback."""
    models = getattr(getattr(loop, "policy", None), "models", None)
    if not isinstance(models, tuple) or len(models) < 2:
        return None
    return " → ".join(f"{getattr(model, 'model', type(model).__name__)} ({getattr(model, 'provider', '?')})"
                      for model in models)


def _models(graph: graphviz.Digraph, loop: Any, prefix: str) -> None:
    """A note beside the states where the policy decides, naming the models a fallback asks
    in turn (a model call that fails for a passing reason goes to the next)."""
    chain = fallback_chain(loop)
    if chain is None:
        return
    note = f"{prefix}{MODELS_NODE}"
    graph.node(note, f"models, in turn: {chain}", shape="note", style="dashed", color=WORKING.line,
               fontsize="10")
    for state in loop.definition.states:
        if state.action == "select_tool":
            graph.edge(prefix + state.name, note, label="model fails: next", style="dashed", arrowhead="none",
                       color=WORKING.line)


def composed_mermaid(loop: Any, result: Any = None) -> str:
    """The Mermaid diagram of `loop` with its children as composite states; `result`
    overlays the runs as `composed_digraph`'s does."""
    text = to_mermaid(loop.definition, _overlay(loop, result))
    chain = fallback_chain(loop)
    if chain is not None:
        deciding = [state.name for state in loop.definition.states if state.action == "select_tool"]
        text = text.rstrip("\n") + "\n" + "".join(f"    note right of {state} : models, in turn: {chain}\n"
                                                 for state in deciding)
    for tool, remote in remote_agents_of(loop).items():
        name = f"{tool}{REMOTE_NODE}"
        text = text.rstrip("\n") + f'\n    state "{tool}: {remote.protocol} agent {remote.name} ({remote.url})" as {name}\n' \
            + "".join(f"    {state} --> {name}: {tool} ({remote.protocol} task)\n" for state in _calling_states(loop))
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
        _models(cluster, child, inner)
        _clusters(cluster, child, child_result, inner)
        _remotes(cluster, child, inner)
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
