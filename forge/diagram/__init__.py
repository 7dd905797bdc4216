"""Loop diagrams drawn from the definition that runs: DOT/SVG/PNG/PDF through graphviz,
Mermaid for Markdown, run overlays from a trace, and the `diagrams/` gallery."""

from forge.diagram.gallery import StaleDiagram, refresh_gallery, stale_diagrams
from forge.diagram.overlay import RunOverlay, TraceMismatch, overlay_of
from forge.diagram.render import (
    FORMATS,
    GraphvizNotInstalled,
    diagram,
    diagram_text,
    format_for,
    mermaid,
    render,
    render_counterexample,
)

__all__ = [
    "diagram",
    "mermaid",
    "render",
    "render_counterexample",
    "diagram_text",
    "format_for",
    "FORMATS",
    "GraphvizNotInstalled",
    "RunOverlay",
    "TraceMismatch",
    "overlay_of",
    "refresh_gallery",
    "stale_diagrams",
    "StaleDiagram",
]
