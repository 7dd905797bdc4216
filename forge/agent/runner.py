"""Stage 7, run: the bounded loop that obeys every stop decision at once.

Continuing after a stop decision wastes budget and can repeat side effects after the goal
was already verified, so any `stop=True` returns immediately, whatever its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forge.agent.observations import LoopState
from forge.agent.stopping import StopController

if TYPE_CHECKING:
    from forge.machine.trace import TransitionRecord

__all__ = ["LoopResult", "run_agent"]


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How a run ended: the stop reason, the number of steps taken, and the final state.

    Runs driven by the state machine (`forge.AgentLoop`) fill the rest: `trace`, one record
    per fired transition (a compact `forge.machine.trace.Trace`, equal to any sequence of
    the same records); `error`, the exception that ended the run, if any; `outcome`, the
    terminal state's success / failure / needs_input; and the counters of retries and of
    side effects run and replayed. `run_agent` leaves them at their defaults.
    """

    reason: str
    steps: int
    state: LoopState
    trace: Sequence[TransitionRecord] = ()
    error: BaseException | None = None
    outcome: str | None = None
    retries: int = 0
    side_effects_run: int = 0
    side_effects_replayed: int = 0

    @property
    def summary(self) -> str:
        """How the run ended and why, in a sentence or two: the error that ended it, the
        tools that tied, or, when a budget or repetition stopped it, what its last call was
        refused for (a misspelled argument ends in step_budget_exhausted with no error)."""
        text = f"{self.reason} ({self.outcome or 'ended'}) after {self.steps} step{'s' if self.steps != 1 else ''}"
        tied = getattr(self.error, "tied", None)
        if tied:
            return f"{text}: {', '.join(tied)} tie for the intent's capabilities; name one (Intent.call) or clarify"
        if self.error is not None:
            return f"{text}: {_said(self.error)}"
        last = self.state.observations[-1] if self.state.observations else None
        if last is not None and last.status != "ok":
            return f"{text}; the last call, {last.tool_name}, failed: {_said(last.payload)}"
        return text


def _said(error: object) -> str:
    try:
        text = f"{type(error).__name__}: {error}"
    except Exception:
        text = type(error).__name__
    return text if len(text) <= 500 else text[:500] + "…"


def run_agent(
    step: Callable[[int], tuple[str, Any]],
    verify: Callable[[Any], bool],
    max_steps: int,
    repeat_limit: int = 3,
) -> LoopResult:
    """Call `step(n)` for n = 1, 2, … and stop on the first stop decision.

    Each `(action, output)` is recorded as an `ok` observation, `verify(output)` gives the
    external verdict, and a `StopController` decides. `step` is called at most `max_steps`
    times: `max_steps=3` allows exactly three steps; the run then ends in
    `step_budget_exhausted`.

    Raises:
        ValueError: `max_steps` or `repeat_limit` is below 1 (before any step).
        Whatever `step` or `verify` raises.
    """
    controller = StopController(max_steps=max_steps, repeat_limit=repeat_limit)
    state = LoopState()
    for n in range(1, max_steps + 1):
        action, output = step(n)
        state.record(action, "ok", output)
        decision = controller.decide(
            step_count=state.step_count,
            verified=bool(verify(output)),
            fatal_error=state.terminal,
            action_history=state.action_history,
        )
        if decision.stop:
            return LoopResult(decision.reason, n, state)
    raise AssertionError("unreachable: decide() stops once step_count reaches max_steps")
