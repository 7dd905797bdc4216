"""`diagrams/`: the rendered SVG and Mermaid of every definition in `machines/`, kept true.

Each SVG carries the SHA-256 of the DOT source it was rendered from, so staleness is judged
on the deterministic DOT (not on SVG bytes, which vary with the Graphviz version).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from forge.diagram.dot import to_digraph
from forge.diagram.mermaid import to_mermaid
from forge.diagram.render import image_of
from forge.errors import MissingFile
from forge.files import write_atomically
from forge.machine.loader import load_definition

__all__ = ["StaleDiagram", "refresh_gallery", "stale_diagrams"]

_STAMP = re.compile(r"<!-- forge-dot-sha256: ([0-9a-f]{64}) -->")


@dataclass(frozen=True, slots=True)
class StaleDiagram:
    path: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def _sources(machines: Path) -> list[tuple[str, str, str]]:
    """(name, dot source, mermaid source) per definition file, sorted by name.

    Raises:
        FileNotFoundError: `machines` is not a folder, or holds no definition (a gallery of
            nothing is a mistake: a wrong path, or not the project's folder).
    """
    if not machines.is_dir():
        raise MissingFile(f"no definitions folder {str(machines)!r} here; pass --machines DIR "
                                "(forge diagrams runs in a project with a machines/ folder)")
    paths = sorted(machines.glob("*.toml"))
    if not paths:
        raise MissingFile(f"{str(machines)!r} holds no *.toml loop definitions")
    out = []
    for path in paths:
        definition = load_definition(path)
        out.append((path.stem, to_digraph(definition).source, to_mermaid(definition)))
    return out


def _digest(dot: str) -> str:
    return hashlib.sha256(dot.encode()).hexdigest()


def refresh_gallery(machines: str | Path = "machines", out: str | Path = "diagrams") -> list[Path]:
    """Render `<name>.svg` and `<name>.mmd` into `out` for every `machines/*.toml`.

    Raises:
        GraphvizNotInstalled: no `dot` program (nothing is written).
        DefinitionError: a definition is broken.
        FileNotFoundError: `machines` is missing or holds no definition (nothing is written).
    """
    target = Path(out)
    written = []
    rendered = []
    for name, dot, mermaid in _sources(Path(machines)):
        svg = image_of(dot, "svg").decode()
        stamp = f"<!-- forge-dot-sha256: {_digest(dot)} -->\n"
        svg = svg.replace("<svg ", stamp + "<svg ", 1)
        rendered.append((name, svg, mermaid))
    target.mkdir(parents=True, exist_ok=True)
    for name, svg, mermaid in rendered:
        for path, text in ((target / f"{name}.svg", svg), (target / f"{name}.mmd", mermaid)):
            write_atomically(path, text)
            written.append(path)
    return written


def stale_diagrams(machines: str | Path = "machines", out: str | Path = "diagrams") -> list[StaleDiagram]:
    """Every diagram in `out` that is missing, outdated or has no definition; empty when true.

    Raises:
        FileNotFoundError: `machines` is missing or holds no definition.
    """
    target = Path(out)
    problems = []
    expected = set()
    for name, dot, mermaid in _sources(Path(machines)):
        svg_path, mmd_path = target / f"{name}.svg", target / f"{name}.mmd"
        expected |= {svg_path.name, mmd_path.name}
        if not svg_path.is_file():
            problems.append(StaleDiagram(svg_path, "missing"))
        else:
            found = _STAMP.search(svg_path.read_text(encoding="utf-8"))
            if found is None or found.group(1) != _digest(dot):
                problems.append(StaleDiagram(svg_path, "rendered from an older definition"))
        if not mmd_path.is_file():
            problems.append(StaleDiagram(mmd_path, "missing"))
        elif mmd_path.read_text(encoding="utf-8") != mermaid:
            problems.append(StaleDiagram(mmd_path, "differs from the definition"))
    for orphan in sorted(target.glob("*.svg")) + sorted(target.glob("*.mmd")):
        if orphan.name not in expected:
            problems.append(StaleDiagram(orphan, "no definition in machines/ draws it"))
    return problems
