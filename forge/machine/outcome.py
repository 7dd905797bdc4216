"""What a stage's action returns: its verdict, the facts it produced, and what the trace keeps.

A stage never writes the run. Its action (a generator of effects, `forge.machine.effects`)
returns a `StageOutcome`; the engine folds it into the run (`Run.fold`) and the trace:

- `verdict`, one of the stage's declared verdicts (a `StrEnum` member for the built-in
  stages, so mypy checks verdicts and guards alike);
- `detail`, what the trace keeps of the work (JSON-safe), and `subject`, what it keeps
  beyond that and makes into text only when read (the arguments' text, an observation);
- `facts`, the run's facts it replaces (`RunFacts` fields: the step, the intent and action
  chosen, the call's status and payload, the stop decision, the error that ended the run);
- `counts`, what it adds to the run's counts (`RunCounts` fields);
- `observe`, an observation to record: `(tool, status, payload, action)` for
  `LoopState.record`, or `(tool, status, payload, action, repeat_of)` for a side effect
  answered from the idempotency registry (`Observation.repeat_of`).

A user stage may return a `StageOutcome` or, as before, its verdict alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["StageOutcome"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """A stage's verdict and what it produced (see the module)."""

    verdict: str
    detail: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    subject: Any = None
    facts: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    counts: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    observe: tuple[str, str, Any, str | None] | tuple[str, str, Any, str | None, int | None] | None = None
