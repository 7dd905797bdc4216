"""Turning a definition (and optionally a run) into a file or text in any supported format."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import graphviz

from forge.diagram.dot import to_digraph
from forge.diagram.mermaid import to_mermaid
from forge.diagram.overlay import overlay_of
from forge.errors import ForgeError, UsageError
from forge.files import write_atomically
from forge.machine.loader import load_definition
from forge.records.definition import MachineDefinition, TransitionDef
from forge.records.trace import TransitionRecord

__all__ = [
    "render_counterexample",
    "FORMATS",
    "GraphvizNotInstalled",
    "diagram",
    "diagram_text",
    "format_for",
    "image_of",
    "is_loop",
    "mermaid",
    "render",
]

FORMATS = ("svg", "png", "pdf", "dot", "mermaid")
TEXT_FORMATS = ("dot", "mermaid")
_SUFFIXES = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid",
             ".mermaid": "mermaid"}


class GraphvizNotInstalled(ForgeError, RuntimeError):
    """Rendering an image needs Graphviz's `dot` executable, which is not on PATH."""

    def __init__(self, fmt: str) -> None:
        super().__init__(
            f"rendering {fmt.upper()} needs Graphviz's `dot` program, which is not on PATH. "
            "Install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz), "
            "or ask for --format dot or --format mermaid, which need no Graphviz."
        )
        self.format = fmt


def _definition(definition: str | Path | MachineDefinition) -> MachineDefinition:
    return definition if isinstance(definition, MachineDefinition) else load_definition(definition)


def diagram(definition: str | Path | MachineDefinition | Any = "single_agent",
            trace: Iterable[TransitionRecord] | Any = None) -> graphviz.Digraph:
    """The loop as a `graphviz.Digraph` (it displays inline in Jupyter). With `trace` (records,
    a LoopResult or a debug session), the run is overlaid. Given an `AgentLoop` rather than
    a definition, the loops its tools run (`as_tool`) are drawn inside it as clusters, each
    with its run from the result (`forge.diagram.composed`).

    Raises:
        FileNotFoundError, DefinitionError: the definition cannot be loaded.
        TraceMismatch: the trace is not a run of this definition.
    """
    if is_loop(definition):
        from forge.diagram.composed import composed_digraph

        return composed_digraph(definition, trace)
    machine = _definition(definition)
    return to_digraph(machine, overlay_of(machine, trace) if trace is not None else None)


def mermaid(definition: str | Path | MachineDefinition | Any = "single_agent",
            trace: Iterable[TransitionRecord] | Any = None) -> str:
    """The loop as Mermaid `stateDiagram-v2` text, optionally with the run overlaid (an
    `AgentLoop`'s children as composite states, as `diagram` draws them)."""
    if is_loop(definition):
        from forge.diagram.composed import composed_mermaid

        return composed_mermaid(definition, trace)
    machine = _definition(definition)
    return to_mermaid(machine, overlay_of(machine, trace) if trace is not None else None)


def is_loop(definition: Any) -> bool:
    """Whether `definition` is a loop (an `AgentLoop`: this package sits below it)."""
    return isinstance(getattr(definition, "definition", None), MachineDefinition) and hasattr(definition, "tools")


def format_for(path: str | Path | None, fmt: str | None) -> str:
    """The format to write: `fmt` if given, else from `path`'s suffix, else DOT.

    Raises:
        ValueError: an unknown format, or a suffix that names none and no `fmt`.
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise UsageError(f"unknown diagram format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    if path is None:
        return "dot"
    suffix = Path(path).suffix.lower()
    if suffix not in _SUFFIXES:
        raise UsageError(
            f"cannot tell the format from {str(path)!r}; give --format ({', '.join(FORMATS)}) "
            f"or a suffix ({', '.join(sorted(_SUFFIXES))})"
        )
    return _SUFFIXES[suffix]


def diagram_text(definition: str | Path | MachineDefinition | Any, fmt: str,
                 trace: Iterable[TransitionRecord] | Any = None) -> str:
    """DOT or Mermaid source. Raises ValueError for an image format."""
    if fmt == "mermaid":
        return mermaid(definition, trace)
    if fmt == "dot":
        source: str = diagram(definition, trace).source
        return source
    raise UsageError(f"{fmt} is an image format, not text; write it to a file with render()")


def image_of(dot: str, fmt: str) -> bytes:
    """DOT source laid out and drawn by Graphviz as `fmt` (svg, png, pdf).

    Raises:
        GraphvizNotInstalled: the `dot` program is not on PATH.
    """
    try:
        image: bytes = graphviz.Source(dot).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise GraphvizNotInstalled(fmt) from None
    return image


def render_counterexample(definition: str | Path | MachineDefinition, path: str | Path,
                          counterexample: Sequence[TransitionDef], fmt: str | None = None) -> Path:
    """Write the definition's diagram with `counterexample` (a path `forge check` found that
    breaks a property) drawn in red, to `path` in `fmt` or the format its suffix names.

    Raises:
        GraphvizNotInstalled: an image format without the `dot` program; nothing is written.
        ValueError: the format cannot be told or is unknown.
    """
    fmt = format_for(path, fmt)
    if fmt not in ("dot", "gv", "svg", "png", "pdf"):
        raise UsageError(f"a counterexample is drawn as DOT, SVG, PNG or PDF, not {fmt}")
    graph = to_digraph(_definition(definition), counterexample=[t.index for t in counterexample])
    target = Path(path)
    if fmt in ("dot", "gv"):
        return write_atomically(target, graph.source)
    return write_atomically(target, image_of(graph.source, fmt))


def render(definition: str | Path | MachineDefinition | Any, path: str | Path, fmt: str | None = None,
           trace: Iterable[TransitionRecord] | Any = None) -> Path:
    """Write the diagram to `path` (parents created) in `fmt` or the format its suffix names.

    Raises:
        GraphvizNotInstalled: an image format without the `dot` program; nothing is written.
        ValueError: the format cannot be told or is unknown.
    """
    fmt = format_for(path, fmt)
    target = Path(path)
    if fmt in TEXT_FORMATS:
        return write_atomically(target, diagram_text(definition, fmt, trace))
    return write_atomically(target, image_of(diagram(definition, trace).source, fmt))
