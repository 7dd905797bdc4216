"""Stage 2, observe: ordered observations with ok / retryable_error / fatal_error.

A transient failure (an HTTP 503) must never end the loop; only a fatal one does. So the
status is one of three explicit values, and only `fatal_error` sets the terminal flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OBSERVATION_STATUSES", "Observation", "LoopState"]

OBSERVATION_STATUSES: frozenset[str] = frozenset({"ok", "retryable_error", "fatal_error"})


@dataclass(frozen=True, slots=True)
class Observation:
    """One tool call's outcome. `sequence` counts from 1 in call order."""

    sequence: int
    tool_name: str
    status: str
    payload: Any


@dataclass
class LoopState:
    """The run's ordered record of what happened, and whether it may go on.

    It records; it never decides what to do next.
    """

    observations: list[Observation] = field(default_factory=list)
    terminal: bool = False

    def record(self, tool_name: str, status: str, payload: Any) -> Observation:
        """Append the next observation and return it.

        `fatal_error` sets `terminal`; `retryable_error` and `ok` never do.

        Raises:
            ValueError: the state is already terminal, or `status` is not one of `ok`,
                `retryable_error`, `fatal_error`. Nothing is recorded then.
        """
        if self.terminal:
            raise ValueError("loop state is terminal; no further observations are accepted")
        if status not in OBSERVATION_STATUSES:
            allowed = ", ".join(sorted(OBSERVATION_STATUSES))
            raise ValueError(f"unknown observation status {status!r}; expected one of {allowed}")
        observation = Observation(len(self.observations) + 1, tool_name, status, payload)
        self.observations.append(observation)
        if status == "fatal_error":
            self.terminal = True
        return observation

    @property
    def action_history(self) -> tuple[str, ...]:
        """Tool names of every observation, in call order."""
        return tuple(observation.tool_name for observation in self.observations)

    @property
    def step_count(self) -> int:
        """How many observations have been recorded."""
        return len(self.observations)
