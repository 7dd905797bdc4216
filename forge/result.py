"""How a run ended: `LoopResult`, what `run_agent`, `AgentLoop.run` and `arun` return.

It lives outside the seed's stage package (`forge.agent`), which it is shared with, because
the machine's runs fill in what the seed's runner does not: the trace, the error, the
outcome, the counters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forge.agent.observations import LoopState
from forge.policy import FINISH, Finish
from forge.records.definition import MachineDefinition, Outcome
from forge.records.details import repeated_call
from forge.records.journal import JournalEntry
from forge.records.trace import (  # at run time: get_type_hints(LoopResult) resolves
    TransitionRecord,
    error_text,
)
from forge.records.usage import Usage

__all__ = ["ChildRun", "LoopResult", "Outcome", "verified_answer"]


def verified_answer(state: LoopState | None, outcome: str | None) -> Any:
    """The `Finish` answer a run ended in success on (its last observation), else None."""
    if outcome != "success" or state is None or not state.observations:
        return None
    last = state.observations[-1]
    if last.tool_name != FINISH or not isinstance(last.payload, Finish):
        return None
    return last.payload.answer


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How a run ended: the stop reason, the number of steps taken, and the final state.

    Runs driven by the state machine (`forge.AgentLoop`) fill the rest: `trace`, one record
    per fired transition (a compact `forge.records.trace.Trace`, equal to any sequence of
    the same records); `error`, the exception that ended the run, if any; `outcome`, the
    terminal state's success / failure / needs_input; and the counters of retries and of
    side effects run and replayed; `definition`, the machine it ran; `journal`, every call
    to the world the run made. `run_agent` leaves them
    at their defaults. In Jupyter a result shows as the run inspector (`forge.inspect`).
    """

    reason: str
    steps: int
    state: LoopState
    trace: Sequence[TransitionRecord] = ()
    error: BaseException | None = None
    outcome: Outcome | None = None
    retries: int = 0
    side_effects_run: int = 0
    side_effects_replayed: int = 0
    definition: MachineDefinition | None = field(default=None, compare=False, repr=False)
    journal: Sequence[JournalEntry] = field(default=(), compare=False, repr=False)
    """Every call the run made to the world, in order (`forge.records.journal`):
    `AgentLoop.replay(result.journal)` makes the run again without calling anything."""
    html_view: Callable[[LoopResult], str] | None = field(default=None, compare=False, repr=False)
    """What shows the result as HTML in Jupyter: the run inspector, for a loop's results
    (`forge.inspect`; a result knows no view of its own, so it sits below them)."""
    question: str | None = None
    """The policy's question to the user, when the run ended because it asked one
    (`forge.Ask`, state `input_required`): answer with `loop.run(reply, state=result.state)`."""
    usage: Usage = field(default=Usage(), compare=False)
    """The tokens of the run's model calls, per call and in total (`forge.records.usage`)."""
    children: tuple[ChildRun, ...] = field(default=(), compare=False, repr=False)
    """The runs of other loops its tools made (`AgentLoop.as_tool`), in the order they were
    called: each one's path, tool, the transition it ran in and its own `LoopResult`."""
    wrap_up: Any = None
    """The answer the policy gave in a wrap-up call (`MachineDefinition.with_wrap_up`) when a
    budget ended the run: what it had found, unverified; None without one."""

    @property
    def answer(self) -> Any:
        """The policy's verified answer: the `Finish` answer that `verify` accepted, when the
        run ended in success on one; else None."""
        return verified_answer(self.state, self.outcome)

    def _repr_html_(self) -> str | None:
        """The run inspector, for Jupyter (None, so it shows as text, without a trace)."""
        if not self.trace:
            return None
        if self.html_view is None:
            return None
        return self.html_view(self)

    @property
    def dropped(self) -> tuple[Mapping[str, Any], ...]:
        """The calls a policy asked for in a list (a plan) that the run did not make, in
        order: each `{"tool": ..., "arguments": ...}` as the trace keeps them. A run drops a
        planned call when it ends before reaching it, or when a model policy asked again
        decided otherwise; the transition that dropped them says so (`detail["dropped"]`)."""
        return tuple(call for record in self.trace for call in record.detail.get("dropped", ()))

    @property
    def summary(self) -> str:
        """How the run ended and why, in a sentence or two: the error that ended it, the
        tools that tied, or, when a budget or repetition stopped it, what its last call was
        refused for (a misspelled argument ends in step_budget_exhausted with no error);
        and the planned calls it did not make (`dropped`)."""
        text = self._ended()
        dropped = self.dropped
        if dropped:
            names = ", ".join(str(call["tool"]) for call in dropped)
            text += f"; {len(dropped)} planned call{'s' if len(dropped) != 1 else ''} not made: {names}"
        return text

    def _ended(self) -> str:
        text = f"{self.reason} ({self.outcome or 'ended'}) after {self.steps} step{'s' if self.steps != 1 else ''}"
        tied = getattr(self.error, "tied", None)
        if tied:
            return f"{text}: {', '.join(tied)} tie for the intent's capabilities; name one (Intent.call) or clarify"
        if self.error is not None:
            last = self.state.observations[-1] if self.state.observations else None
            if last is not None and last.payload is self.error and last.tool_name != FINISH:
                return f"{text}: tool {last.tool_name!r} raised {error_text(self.error, 500)}"
            return f"{text}: {error_text(self.error, 500)}"
        repeated = repeated_call(self.trace) if self.reason == "repeated_action" else None
        if repeated is not None:
            return f"{text}: {repeated}"
        last = self.state.observations[-1] if self.state.observations else None
        if last is not None and last.status != "ok":
            return f"{text}; the last call, {last.tool_name}, failed: {error_text(last.payload, 500)}"
        return text


@dataclass(frozen=True, slots=True)
class ChildRun:
    """A run of another loop made by one of the parent's tool calls: its `path` (the child's
    run id), the parent's `tool` and the parent's `transition` number under way when it ran
    (the call's), and how it ended."""

    path: str
    tool: str
    transition: int
    result: LoopResult
