"""Logging as an observer: standard `logging` under the logger `forge`.

Run start and end at INFO, one line per transition at DEBUG, a failed transition at
WARNING. forge configures no handler or level: what is shown is the application's choice.
Every loop has this observer first. Whether the logger shows DEBUG is asked as each run
starts: without it, the run neither calls this observer per transition nor makes the
records for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from forge.narrate import describe
from forge.observe import LoopObserver, RunView
from forge.records.details import failure_of

if TYPE_CHECKING:
    from forge.records.trace import TransitionRecord
    from forge.result import LoopResult

__all__ = ["LoggingObserver"]

_QUIET = frozenset({"run_started", "transition_failed", "run_finished"})
_EVERY = _QUIET | {"transition_finished"}


class LoggingObserver(LoopObserver):
    """Log a run's life to `logger` (default: `logging.getLogger("forge")`)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger if logger is not None else logging.getLogger("forge")

    def hooks_wanted(self) -> frozenset[str]:
        """What this observer wants of a run starting now: a line per transition only while
        its logger shows DEBUG (checked as each run starts), the rest always."""
        return _EVERY if self.logger.isEnabledFor(logging.DEBUG) else _QUIET

    def run_started(self, run: RunView) -> None:
        if self.logger.isEnabledFor(logging.INFO):
            self.logger.info("run started: %r on machine %s in state %s", run.goal, run.machine, run.state)

    def transition_finished(self, run: RunView, record: TransitionRecord) -> None:
        if self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug("%s", describe(record))

    def transition_failed(self, run: RunView, record: TransitionRecord, error: BaseException) -> None:
        if self.logger.isEnabledFor(logging.WARNING):
            failed, why = failure_of(record) or (None, None)
            self.logger.warning("%s failed in state %s: %s", failed, record.source, why)

    def run_finished(self, run: RunView, result: LoopResult) -> None:
        if self.logger.isEnabledFor(logging.INFO):
            self.logger.info("run ended in %s (%s) after %d steps, %d transitions", result.reason, result.outcome,
                             result.steps, len(result.trace))
