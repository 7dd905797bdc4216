"""Many runs on one diagram: per edge of a definition, how many runs took it, the p50 and p95
of its transitions' durations, and the share of the runs that took it and ended in failure;
edges no run took are dimmed. What `forge ui` shows on a loop's page and `forge diagram
--runs URL` draws as a picture."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forge.diagram.dot import to_digraph
from forge.diagram.overlay import transition_of
from forge.records.definition import MachineDefinition
from forge.records.trace import TransitionRecord

__all__ = ["EdgeStats", "edge_stats", "many_runs_digraph"]


@dataclass(frozen=True, slots=True)
class EdgeStats:
    """One edge over many runs: `runs` that took it, its durations' `p50` and `p95` (seconds),
    and the share of those runs that ended in failure."""

    runs: int
    p50: float
    p95: float
    failed: float


def edge_stats(definition: MachineDefinition,
               runs: Iterable[tuple[Sequence[TransitionRecord], str | None]]) -> tuple[dict[int, EdgeStats], int]:
    """Each edge's `EdgeStats` (by transition index; the implicit fail edge of a state is
    `-1 - its position`), from `runs` given as (records, outcome); and how many runs."""
    took: dict[int, int] = {}
    failed: dict[int, int] = {}
    durations: dict[int, list[float]] = {}
    count = 0
    for records, outcome in runs:
        count += 1
        seen: set[int] = set()
        for record in records:
            index = transition_of(definition, record).index
            durations.setdefault(index, []).append(record.duration_s)
            seen.add(index)
        for index in seen:
            took[index] = took.get(index, 0) + 1
            if outcome == "failure":
                failed[index] = failed.get(index, 0) + 1
    return {index: EdgeStats(took[index], _quantile(durations[index], 0.5), _quantile(durations[index], 0.95),
                             failed.get(index, 0) / took[index]) for index in took}, count


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def many_runs_digraph(definition: MachineDefinition, stats: Mapping[int, EdgeStats], runs: int) -> Any:
    """The definition's diagram with `stats` on its edges (see the module)."""
    return to_digraph(definition, many=(stats, runs))
