"""What a stage's action returns: its verdict, the facts it produced, and what the trace keeps.

A stage never writes the run. Its action (a generator of effects, `forge.records.effects`)
returns a `StageOutcome`; the engine folds it into the run (`Run.fold`) and the trace:

- `verdict`, one of the stage's declared verdicts (a `StrEnum` member for the built-in
  stages, so mypy checks verdicts and guards alike);
- `detail`, what the trace keeps of the work (JSON-safe), and `subject`, what it keeps
  beyond that and makes into text only when read (the arguments' text, an observation);
- `facts`, the run's facts it replaces (`FactChanges`: `RunFacts` fields, typed as there:
  the step, the intent and action chosen, the call's status and payload, the stop decision,
  the error that ended the run, …);
- `counts`, what it adds to the run's counts (`CountChanges`: `RunCounts` fields);
- `observe`, an observation to record: `(tool, status, payload, action)` for
  `LoopState.record`, or `(tool, status, payload, action, repeat_of)` for a side effect
  answered from the idempotency registry (`Observation.repeat_of`); `observe_all`, the
  observations of calls made together, in the order they were asked.

A user stage may return a `StageOutcome` or, as before, its verdict alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict, cast

if TYPE_CHECKING:
    from forge.agent.actions import Action
    from forge.agent.stopping import StopDecision
    from forge.policy import Intent

__all__ = ["CountChanges", "FactChanges", "StageOutcome"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class FactChanges(TypedDict, total=False):
    """The run's facts a stage replaces: each key a `RunFacts` field, its value typed as
    there (a plain dict at run time: mypy checks what a stage says it decided)."""

    step: int
    intent: Intent | None
    action: Action | None
    status: str | None
    payload: Any
    decision: StopDecision | None
    error: BaseException | None
    question: str | None
    repeat_of: int | None
    ran: Mapping[str, int]
    pinned: Intent | None
    approvals: Mapping[str, bool]
    batch: tuple[tuple[Intent, Action], ...]
    outcomes: tuple[tuple[str, Any], ...]
    plan: tuple[Intent, ...]
    goal: str | None
    wrap_up: Any


class CountChanges(TypedDict, total=False):
    """What a stage adds to the run's counts: each key a `RunCounts` field."""

    retries: int
    side_effects_run: int
    side_effects_replayed: int
    messages_seen: int


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """A stage's verdict and what it produced (see the module)."""

    verdict: str
    detail: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    subject: Any = None
    facts: FactChanges = field(default_factory=lambda: cast(FactChanges, _EMPTY))
    counts: CountChanges = field(default_factory=lambda: cast(CountChanges, _EMPTY))
    observe: tuple[str, str, Any, str | None] | tuple[str, str, Any, str | None, int | None] | None = None
    observe_all: tuple[tuple[str, str, Any, str | None], ...] = ()
