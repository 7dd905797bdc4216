"""`ReplaySession`: a recorded trace walked forwards and backwards; nothing is executed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from forge.debug.stepper import Stepper
from forge.diagram.overlay import overlay_of
from forge.machine.catalog import StageCatalog
from forge.machine.stages import BUILTIN_STAGES
from forge.records.definition import MachineDefinition
from forge.records.details import arguments_of, finish_of, messages_of, payload_of, tool_calls
from forge.records.trace import TransitionRecord

__all__ = ["RecordedObservation", "ReplaySession"]


@dataclass(frozen=True, slots=True)
class RecordedObservation:
    """What a trace says about an observation. A v2 trace has the call's `arguments` (JSON
    text) and a summary of its `payload`; a v1 trace has neither (None)."""

    sequence: int
    tool_name: str
    status: str
    arguments: str | None = None
    payload: str | None = None


class ReplaySession(Stepper):
    """Steps through `records` of a run of `definition`.

    Raises:
        TraceMismatch: the records are not a run of `definition`.
    """

    def __init__(self, definition: MachineDefinition, records: Iterable[TransitionRecord],
                 stages: StageCatalog = BUILTIN_STAGES) -> None:
        super().__init__(definition)
        self._records = tuple(records)
        overlay_of(definition, self._records)  # validates the whole trace up front
        self._position = 0
        self._calls = frozenset(  # the states whose stage's records are a tool call's outcome
            s.name for s in definition.states
            if s.action and s.action in stages.actions and stages.actions[s.action].observes)

    @property
    def state(self) -> str:
        return self._records[self._position - 1].dest if self._position else self.definition.initial

    @property
    def done(self) -> bool:
        """True at the end of the recording (a trace may stop before a terminal state; a
        terminal state before its end is where one turn of a whole durable run ended)."""
        return self._position == len(self._records)

    @property
    def observations(self) -> tuple[RecordedObservation, ...]:
        """Observations recorded so far, from the details of the records of stages that call
        tools (and the
        answers a policy finished with)."""
        out: list[RecordedObservation] = []
        arguments: str | None = None
        for record in self.trace:
            arguments = arguments_of(record) or arguments
            calls, answer, payload = tool_calls(record), finish_of(record), payload_of(record)
            if record.source in self._calls and calls:
                alone = len(calls) == 1  # calls made together share one arguments' text: none is kept per call
                out.extend(RecordedObservation(len(out) + 1, tool, status, arguments if alone else None)
                           for tool, status in calls)
            elif record.trigger == "finish" and answer is not None:
                out.append(RecordedObservation(len(out) + 1, "finish", "ok", None, answer))
            elif payload is not None and out and out[-1].payload is None:
                out[-1] = replace(out[-1], payload=payload)
        return tuple(out)

    @property
    def messages(self) -> tuple[dict[str, Any], ...]:
        """The policy's messages so far (an LLM policy's chat), as the trace recorded them."""
        return tuple(m for record in self.trace for m in messages_of(record))

    def _forward(self) -> TransitionRecord:
        self._position += 1
        return self._records[self._position - 1]

    def _backward(self) -> None:
        self._position -= 1
