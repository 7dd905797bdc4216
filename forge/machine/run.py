"""One run's mutable context: the model that the shared machine moves from state to state.

The machine itself is shared by every run of a definition, so all per-run facts live here:
the `LoopState`, the last intent, selection, call outcome and stop decision, counters for the
summary, and the trace so far.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forge.agent.actions import Action, ToolSpec
from forge.agent.idempotency import IdempotencyRegistry
from forge.agent.observations import LoopState, Observation
from forge.agent.stopping import StopController, StopDecision
from forge.machine.journal import Journal, JournalEntry
from forge.machine.trace import Redact, Trace
from forge.observe import Observers
from forge.policy import Intent, Policy
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.machine.performers import Performer
    from forge.machine.trace import TransitionRecord

__all__ = ["Run", "RunConfig", "RunSnapshot"]


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs from its loop, fixed for the run's lifetime."""

    tools: Mapping[str, Tool]
    specs: tuple[ToolSpec, ...]
    policy: Policy
    verify: Callable[[Observation], bool]
    controller: StopController
    max_attempts: int
    retry_options: Mapping[str, Any]  # base_delay, max_delay, deadline and random, for retry_delay
    sleep: Callable[[float], Any]
    async_sleep: Callable[[float], Any] | None  # None: asyncio.sleep
    clock: Callable[[], float]
    approver: Callable[..., Any] | None = None
    verify_takes_state: bool = False  # verify(observation, state) rather than verify(observation)
    chosen: dict[frozenset[str], Action] = field(default_factory=dict, compare=False)
    """select_action's choice per capability set: a pure function of the set and the tools,
    which are fixed for the loop, so each distinct set is decided once per loop."""
    repeat_by: str = "call"  # "call": repetition counts identical calls; "tool": uses of a tool
    redact: Redact | None = None  # what the trace may keep of arguments and payloads


@dataclass(eq=False, slots=True, weakref_slot=True)
class Run:
    """The state of one run. `state` is the machine state's name (the engine sets it).

    Attributes after the last fired transition: `verdict` is the source state's action
    result; `detail` what the trace keeps of it (tool, status, attempts, replayed …);
    `guard_values` every guard transitions evaluated, by name. While a transition fires,
    `hook` names what is running (the action, a guard, a callback, an observer), so a
    failure can say where it happened.
    """

    goal: str
    config: RunConfig
    state: str
    registry: IdempotencyRegistry = field(default_factory=IdempotencyRegistry)
    loop_state: LoopState = field(default_factory=LoopState)
    step: int = 0
    intent: Intent | None = None
    action: Action | None = None
    status: str | None = None
    payload: Any = None
    decision: StopDecision | None = None
    error: BaseException | None = None
    verdict: str | None = None
    guard_values: dict[str, bool] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    retries: int = 0
    side_effects_run: int = 0
    side_effects_replayed: int = 0
    trace: Trace = field(default_factory=Trace)
    record: TransitionRecord | None = None  # the last record written
    base_steps: int = 0  # observations carried over from an earlier turn of a conversation
    messages_seen: int = 0  # how many of the policy's messages the trace already holds
    observers: Observers = field(default_factory=Observers)
    machine: str = ""
    hook: str = ""
    source: str = ""
    started: float = 0.0
    recorded: bool = True
    interrupted: BaseException | None = None
    subject: Any = None  # what the trace keeps of this firing beyond its detail (see Trace)
    journal: Journal = field(default_factory=Journal)  # every call to the world, in order
    performer: Performer | None = None  # through which the stages' effects reach the world

    def snapshot(self) -> RunSnapshot:
        """Everything needed to put this run back exactly as it is now, given the
        observations and records it had (observations and the trace only ever grow)."""
        return RunSnapshot(
            state=self.state, step=self.step, intent=self.intent, action=self.action, status=self.status,
            payload=self.payload, decision=self.decision, error=self.error, verdict=self.verdict,
            guard_values=self.guard_values, detail=self.detail, retries=self.retries,
            side_effects_run=self.side_effects_run, side_effects_replayed=self.side_effects_replayed,
            observations=self.loop_state.step_count, terminal=self.loop_state.terminal, transitions=len(self.trace),
            messages=len(self.loop_state.messages), messages_seen=self.messages_seen, calls=len(self.journal),
        )

    def restore(self, snapshot: RunSnapshot, history: Sequence[Observation], actions: Sequence[str],
                conversation: Sequence[dict[str, Any]], records: Sequence[TransitionRecord],
                calls: Sequence[JournalEntry] = ()) -> None:
        """Put the run back as `snapshot` says, moving its state and trace to the snapshot's
        lengths with what the run recorded at its furthest (`history`, `actions`,
        `conversation`, `records`, `calls`): the cost is what one step changed."""
        for name in _SCALARS:
            setattr(self, name, getattr(snapshot, name))
        self.loop_state.move_to(snapshot.observations, snapshot.messages, snapshot.terminal, history, actions,
                                conversation)
        self.trace.move_to(snapshot.transitions, records)
        self.journal.move_to(snapshot.calls, calls)


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """A run's state between two transitions (see `Run.snapshot`)."""

    state: str
    step: int
    intent: Intent | None
    action: Action | None
    status: str | None
    payload: Any
    decision: StopDecision | None
    error: BaseException | None
    verdict: str | None
    guard_values: Mapping[str, bool]
    detail: dict[str, Any]
    retries: int
    side_effects_run: int
    side_effects_replayed: int
    messages_seen: int
    observations: int
    terminal: bool
    transitions: int
    messages: int
    calls: int = 0


_SCALARS = ("state", "step", "intent", "action", "status", "payload", "decision", "error", "verdict", "guard_values",
            "detail", "retries", "side_effects_run", "side_effects_replayed", "messages_seen")
