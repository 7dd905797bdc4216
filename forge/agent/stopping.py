"""Stage 6, stop: one explicit decision from external evidence.

Producing an answer is model behaviour; verification is evidence. Only the `verified` flag
that the harness passes in can mean success, never an "answer" in the action history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from forge.errors import UsageError

__all__ = ["StopController", "StopDecision", "StopReason"]


class StopReason(StrEnum):
    """Every value `StopController.decide` can give, in priority order."""

    VERIFIED_SUCCESS = "verified_success"
    FATAL_ERROR = "fatal_error"
    STEP_BUDGET_EXHAUSTED = "step_budget_exhausted"
    REPEATED_ACTION = "repeated_action"
    CONTINUE = "continue"


@dataclass(frozen=True, slots=True)
class StopDecision:
    """Whether to stop, and why. `reason` compares equal to its plain string."""

    stop: bool
    reason: str


class StopController:
    """Aggregates the loop's stop conditions into one decision.

    Raises:
        ValueError: `max_steps` or `repeat_limit` is below 1.
    """

    def __init__(self, max_steps: int, repeat_limit: int) -> None:
        if max_steps < 1:
            raise UsageError(f"max_steps must be >= 1, got {max_steps}")
        if repeat_limit < 1:
            raise UsageError(f"repeat_limit must be >= 1, got {repeat_limit}")
        self.max_steps = max_steps
        self.repeat_limit = repeat_limit

    def decide(
        self,
        step_count: int,
        verified: bool,
        fatal_error: bool,
        action_history: Sequence[str],
    ) -> StopDecision:
        """Decide, in this priority: verified, fatal error, step budget, repetition.

        `step_count >= max_steps` stops with `step_budget_exhausted`; the last action
        occurring `repeat_limit` or more times anywhere in `action_history` stops with
        `repeated_action`; otherwise `StopDecision(False, "continue")`.
        """
        if verified:
            return StopDecision(True, StopReason.VERIFIED_SUCCESS)
        if fatal_error:
            return StopDecision(True, StopReason.FATAL_ERROR)
        if step_count >= self.max_steps:
            return StopDecision(True, StopReason.STEP_BUDGET_EXHAUSTED)
        if action_history and action_history.count(action_history[-1]) >= self.repeat_limit:
            return StopDecision(True, StopReason.REPEATED_ACTION)
        return StopDecision(False, StopReason.CONTINUE)
