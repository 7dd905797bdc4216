"""What a run did on its machine: states visited, edges taken and how often, where it ended.

Derived from the trace alone, so it works for a recorded file as well as a live result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from forge.errors import ForgeError
from forge.records.definition import ANSWER_TRIGGER, FAILURE_STATE, FAILURE_TRIGGER, MachineDefinition, TransitionDef
from forge.records.details import tool_calls
from forge.records.trace import TransitionRecord

__all__ = ["RunOverlay", "TraceMismatch", "overlay_of", "records_of", "transition_of"]


class TraceMismatch(ForgeError, ValueError):
    """A trace record is not a transition of the definition it is drawn on."""


@dataclass(frozen=True, slots=True)
class RunOverlay:
    """`edge_counts` maps a transition's index to how often it fired; `failures` maps a state
    to how often a failing hook left it by the implicit `fail` edge; `position` is the state
    the run is in after the last record (where it ended, when `finished`)."""

    visited: frozenset[str]
    edge_counts: Mapping[int, int]
    position: str
    finished: bool
    transitions: int
    failures: Mapping[str, int] = field(default_factory=dict)
    edge_tools: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """Per transition index, how often each tool ran on it (from the records' details)."""


def records_of(trace: Any) -> tuple[TransitionRecord, ...]:
    """Accept a trace as records, or anything with a `.trace` (a LoopResult, a session)."""
    records = getattr(trace, "trace", trace)
    return tuple(records)


def transition_of(definition: MachineDefinition, record: TransitionRecord) -> TransitionDef:
    """The definition's transition that `record` fired: same source, trigger and destination,
    and the guard that was true (or no guard); for a failing hook's record, the implicit
    `fail` edge (index -1) from its non-terminal source; for a person's answer, the implicit
    `answer` edge (index -2) from its needs-input source.

    Raises:
        TraceMismatch: no such transition in `definition`.
    """
    if (record.trigger, record.dest) == (FAILURE_TRIGGER, FAILURE_STATE):
        names = {s.name: s for s in definition.states}
        if record.source in names and not names[record.source].terminal:
            return definition.failure_edge(record.source)
    if record.trigger == ANSWER_TRIGGER:
        answered = definition.answer_edge(record.source)
        if answered is not None and answered.dest == record.dest:
            return answered
    true_guards = {g.name for g in record.guards if g.value}
    for transition in definition.transitions:
        same_edge = (transition.source, transition.trigger, transition.dest) == (record.source, record.trigger, record.dest)
        if same_edge and (transition.guard is None or transition.guard in true_guards):
            return transition
    raise TraceMismatch(
        f"trace record {record.sequence} ({record.source} -{record.trigger}-> {record.dest}) "
        f"is not a transition of machine {definition.name!r} ({definition.path})"
    )


def overlay_of(definition: MachineDefinition, trace: Iterable[TransitionRecord] | Any) -> RunOverlay:
    """Summarise `trace` on `definition`. A record that starts in the initial state after
    the run reached a terminal one begins the run's next turn (a durable run answered, a
    conversation continued): the turns of a whole run are one trace.

    Raises:
        TraceMismatch: a record is not one of the definition's transitions, or the records
            do not chain (a record starts where the previous one did not end).
    """
    records = records_of(trace)
    counts: Counter[int] = Counter()
    failures: Counter[str] = Counter()
    tools: dict[int, Counter[str]] = {}
    position = definition.initial
    visited = {position}
    for record in records:
        if record.source != position and not (record.source == definition.initial
                                              and definition.state(position).terminal):
            raise TraceMismatch(
                f"trace record {record.sequence} starts in {record.source!r}, "
                f"but the run was in {position!r}"
            )
        edge = transition_of(definition, record)
        if edge.index == -1:
            failures[edge.source] += 1
        elif edge.index >= 0:  # not a person's answer: the implicit edge back to the initial state
            counts[edge.index] += 1
            for tool, _ in tool_calls(record):  # a call (or calls made together): the tool ran on this edge
                tools.setdefault(edge.index, Counter())[tool] += 1
        position = record.dest
        visited.add(position)
    finished = definition.state(position).terminal if records else False
    return RunOverlay(frozenset(visited), dict(counts), position, finished, len(records), dict(failures),
                      {index: dict(ran) for index, ran in tools.items()})
