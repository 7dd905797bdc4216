"""What a run's transitions add up to: the steps it took, and its time spent working and
waiting for a person.

One count of steps everywhere (issue 54): a **step** is one observation recorded — a tool
call's outcome, a refused call, or the policy's answer — so a batch of three calls is three
steps, as `LoopResult.steps` and the step budget count them. A transition's `step` is the
step it belongs to: a run that waits for an approval in its fourth step has taken three
steps and waits in step 4. `steps_taken` reads that count back from the transitions alone
(what `forge inspect`, the run page and `forge runs` show), equal to the run's
`LoopResult.steps` by construction of the stages (tested).

A run's time splits in two: **waiting** is the time from each transition into a needs-input
state to the next transition (a person answering, or a deadline passing); **working** is
the rest of the time from the first transition to the last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from forge.errors import ForgeError
from forge.records.definition import MachineDefinition
from forge.records.trace import TransitionRecord

__all__ = ["RECORDS_OBSERVATIONS", "TimeBudgetExhausted", "Timing", "WorkingTime", "seconds_text", "steps_taken",
           "timing"]

RECORDS_OBSERVATIONS = "record_observation"
"""The stage action whose transitions record observations: each counts its steps."""


def steps_taken(definition: MachineDefinition, records: Iterable[TransitionRecord]) -> int:
    """The steps the transitions `records` took: one per observation recorded by a state
    running `record_observation` (a batch's transition records one per call,
    `detail["statuses"]`). For a definition with no such state, the number of distinct
    steps the transitions belong to."""
    observing = {state.name for state in definition.states if state.action == RECORDS_OBSERVATIONS}
    if not observing:
        return len({record.step for record in records})
    taken = 0
    for record in records:
        if record.source in observing:
            statuses = record.detail.get("statuses")
            taken += len(statuses) if isinstance(statuses, list | tuple) else 1
    return taken


@dataclass(frozen=True, slots=True)
class Timing:
    """How long a run's transitions took, from the first to the last, split into time at
    work and time waiting for a person (both in seconds)."""

    working: float
    waiting: float

    @property
    def total(self) -> float:
        return self.working + self.waiting

    def __str__(self) -> str:
        """`1.2 s working` or `1.2 s working, 3 min 5 s waiting`."""
        text = f"{seconds_text(self.working)} working"
        return text + (f", {seconds_text(self.waiting)} waiting" if self.waiting > 0 else "")


def timing(definition: MachineDefinition, records: Sequence[TransitionRecord]) -> Timing | None:
    """The working and waiting time of `records` (in order): each gap after a transition
    into a needs-input state is waiting. None when there are none, or they carry no
    wall-clock times (a v1 trace)."""
    times = [record.at for record in records]
    if not times or not all(times):
        return None
    asking = frozenset(state.name for state in definition.states if state.outcome == "needs_input")
    working = WorkingTime(asking).of(records, times[-1])
    return Timing(working, max(0.0, times[-1] - times[0]) - working)


class WorkingTime:
    """A run's working time so far, kept up as its trace grows: each call reads only the
    transitions fired since the last (a time budget asks at every step), and adds the time
    since the last transition unless the run is waiting in a needs-input state."""

    __slots__ = ("_asking", "_read", "_waited")

    def __init__(self, waiting_states: frozenset[str]) -> None:
        self._asking = waiting_states  # the needs-input states
        self._read, self._waited = 0, 0.0

    def of(self, records: Sequence[TransitionRecord], now: float) -> float:
        """The working seconds of the run whose transitions are `records`, at `now` (the
        clock of the records' `at`); 0 before its first transition."""
        if not records or not records[0].at:
            return 0.0
        for index in range(max(self._read, 1), len(records)):
            before = records[index - 1]
            if before.dest in self._asking:
                self._waited += max(0.0, records[index].at - before.at)
        self._read = len(records)
        waiting_now = max(0.0, now - records[-1].at) if records[-1].dest in self._asking else 0.0
        return max(0.0, now - records[0].at - self._waited - waiting_now)


class TimeBudgetExhausted(ForgeError, RuntimeError):
    """The run has worked `worked` seconds, its `budget` (`Limits(time_budget=...)`): it asks
    its policy nothing more and ends in `budget_exhausted`."""

    def __init__(self, worked: float, budget: float) -> None:
        super().__init__(f"the time budget is {seconds_text(budget)} of work: the run has worked {seconds_text(worked)}")
        self.worked, self.budget = worked, budget


def seconds_text(seconds: float) -> str:
    """`40 ms`, `12.5 s`, `3 min 5 s`, `2 h 10 min`: a duration for people."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"

