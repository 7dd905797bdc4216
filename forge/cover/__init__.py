"""Transition coverage: which transitions of a loop definition a set of recorded runs took.

`cover(definition, runs)` sets the runs' traces (trace files, cassettes, folders of them, or
records in memory) against the definition's transitions. A transition is an edge of the
definition: source, trigger, destination and guard (two edges may share the first three
and differ in their guard; a record took the one whose guard it evaluated true). What
`forge cover DEFINITION TRACES...` prints; `forge.cover.generate` writes a test for each
transition never taken that it can force.

To collect the traces of every run a process makes (a test suite, a staging service), set
`FORGE_TRACE_DIR`: each finished run writes its trace there as `RUN_ID.jsonl`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.diagram.overlay import TraceMismatch, transition_of
from forge.errors import MissingFile, UsageError
from forge.records.definition import MachineDefinition, TransitionDef
from forge.records.trace import TraceFormatError, TransitionRecord, read_trace

__all__ = ["Coverage", "Edge", "cover", "edge_of", "took", "trace_files"]


@dataclass(frozen=True, slots=True, order=True)
class Edge:
    """One transition of a definition: `source -trigger-> dest [guard]`."""

    source: str
    trigger: str
    dest: str
    guard: str | None = None

    @classmethod
    def of(cls, transition: TransitionDef) -> Edge:
        return cls(transition.source, transition.trigger, transition.dest, transition.guard)

    def __str__(self) -> str:
        return f"{self.source} -{self.trigger}-> {self.dest}" + (f" [{self.guard}]" if self.guard else "")


def edge_of(definition: MachineDefinition, record: TransitionRecord) -> Edge | None:
    """The edge of `definition` that `record` took, as the diagrams find it
    (`forge.diagram.overlay.transition_of`: of edges sharing source, trigger and
    destination, the one whose guard held); None for the engine's implicit `fail` edge, or
    a record that is no edge of `definition`."""
    try:
        transition = transition_of(definition, record)
    except TraceMismatch:
        return None
    return None if transition.index < 0 else Edge.of(transition)


def took(result: Any, source: str, trigger: str, dest: str, guard: str | None = None) -> bool:
    """Whether the run (a `LoopResult`, or its trace) took `source -trigger-> dest [guard]`:
    what a test `forge cover --generate` wrote asserts."""
    records = getattr(result, "trace", result)
    return any((r.source, r.trigger, r.dest) == (source, trigger, dest)
               and (guard is None or any(g.name == guard and g.value for g in r.guards)) for r in records)


@dataclass(frozen=True, slots=True)
class Coverage:
    """The transitions of `definition` and how often the `runs` recorded runs took each."""

    definition: str
    edges: tuple[Edge, ...]
    taken: Mapping[Edge, int]
    runs: int

    @property
    def untaken(self) -> tuple[Edge, ...]:
        return tuple(edge for edge in self.edges if not self.taken.get(edge))

    @property
    def percent(self) -> float:
        return 100.0 * (len(self.edges) - len(self.untaken)) / len(self.edges) if self.edges else 100.0

    def __str__(self) -> str:
        lines = [f"{self.definition}: {len(self.edges) - len(self.untaken)} of {len(self.edges)} transitions taken "
                 f"({self.percent:.0f}%) by {self.runs} run{'s' if self.runs != 1 else ''}"]
        width = max((len(str(edge)) for edge in self.edges), default=0)
        taken = [edge for edge in self.edges if self.taken.get(edge)]
        if taken:
            lines.append("taken:")
            lines.extend(f"  {edge!s:<{width}}  {self.taken[edge]} time{'s' if self.taken[edge] != 1 else ''}"
                         for edge in taken)
        if self.untaken:
            lines.append("never taken:")
            lines.extend(f"  {edge}" for edge in self.untaken)
        return "\n".join(lines)


def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The trace files `paths` name: files as given, folders searched for `*.jsonl`.

    Raises:
        MissingFile: a path does not exist.
    """
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found.extend(sorted(path.rglob("*.jsonl")))
        elif path.exists():
            found.append(path)
        else:
            raise MissingFile(f"no trace file or folder at {path}")
    return found


def cover(definition: MachineDefinition, runs: Iterable[str | os.PathLike[str] | Sequence[TransitionRecord]]
          ) -> Coverage:
    """Which of `definition`'s transitions `runs` took. A run is a trace file (or a folder
    of them) or a sequence of records; records of another definition (their `machine`
    names another) are not counted, nor is a file found in a folder that is not a trace.

    Raises:
        MissingFile: a path does not exist.
        UsageError: a file named (not found in a folder) is not a trace.
        UsageError: no run given.
    """
    edges = tuple(Edge.of(t) for t in definition.transitions)
    taken: dict[Edge, int] = {}
    counted = 0
    given = list(runs)
    if not given:
        raise UsageError("name at least one trace file or folder of traces to measure coverage with")
    paths = [run for run in given if isinstance(run, (str, os.PathLike))]
    recorded: list[Sequence[TransitionRecord]] = [run for run in given if not isinstance(run, (str, os.PathLike))]
    named = {Path(path) for path in paths if not Path(path).is_dir()}
    for path in trace_files(paths):
        try:
            recorded.append(read_trace(path))
        except (TraceFormatError, UnicodeDecodeError) as error:
            if path in named:  # a file given by name must be a trace; one found in a folder may be other JSON Lines
                raise UsageError(f"not a trace: {error}") from None
            continue
    for records in recorded:
        mine = [r for r in records if not r.machine or r.machine == definition.name]
        if not mine:
            continue
        counted += 1
        for record in mine:
            edge = edge_of(definition, record)
            if edge is not None:
                taken[edge] = taken.get(edge, 0) + 1
    return Coverage(definition.name, edges, taken, counted)
