"""The abstract model of a stage, for `forge check`: what verdicts its action can give from an
abstract run, and what each leaves behind.

An abstract run (`AbstractRun`) is the machine state × the step count × how often the picked
call has been made before (capped at `repeat_limit`) × the last call's count once recorded ×
the last call's status, plus what the stages have produced since the last decision (a
selection, an outcome to record, a recorded observation). Each built-in stage carries its
model (`ActionSpec.model`), written with the stage's own verdicts; `forge.check.bounds`
explores them. A stage that cannot run from an abstract run (it lacks what an earlier stage
produces) gives `NEEDS`; its `ActionSpec.needs` says what it lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from forge.agent.stopping import StopController

__all__ = ["NEEDS", "AbstractModel", "AbstractRun", "any_verdict"]

NEEDS = "needs"
"""The verdict a model gives when its stage cannot run from the abstract run given."""


@dataclass(frozen=True, slots=True)
class AbstractRun:
    """A run as `forge check` sees it (see the module)."""

    state: str
    steps: int = 0
    pick: int | None = None  # how often the selected call was made before; None: nothing selected
    last: int = 0  # how often the last recorded call has been made, once recorded
    status: str | None = None  # the outcome waiting to be recorded
    recorded: str | None = None  # the status of the observation recorded and not yet decided on
    fatal: bool = False
    batch: int = 0  # how many calls were selected to be made together; 0: one (or none)


AbstractModel = Callable[[AbstractRun, StopController], Iterator[tuple[str, AbstractRun]]]
"""`model(run, controller)` yields each `(verdict, run after)` the stage's action can give."""


def any_verdict(verdicts: Iterable[str]) -> AbstractModel:
    """A user stage's model: it may return any verdict it declares, and changes nothing the
    stop decision reads (it records no observation), so a cycle through user stages alone
    is caught as unbounded."""
    ordered = sorted(verdicts)

    def model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
        for verdict in ordered:
            yield verdict, run

    return model
