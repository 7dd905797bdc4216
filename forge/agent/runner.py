"""Stage 7, run: the bounded loop that obeys every stop decision at once.

Continuing after a stop decision wastes budget and can repeat side effects after the goal
was already verified, so any `stop=True` returns immediately, whatever its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forge.agent.observations import LoopState
from forge.agent.stopping import StopController
from forge.result import LoopResult

__all__ = ["LoopResult", "run_agent"]  # LoopResult lives in forge.result; named here for the seed's contract


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
