"""One run: the model that the shared machine moves from state to state.

The machine is shared by every run of a definition, so all per-run facts live here. A run is
what it was asked (`goal`, `config`), where it is (`state`), what it has seen (`loop_state`,
the `trace` of its transitions, the `journal` of its calls to the world), what it has
decided (`facts`, `counts`) and the engine's scratch for the firing under way (`firing`).

The engine alone writes a run. Stages return a `StageOutcome` (`forge.records.outcome`)
and the engine folds it in (`Run.fold`): `facts` and `counts` are small values only the
engine changes, so a snapshot of a run (what the debugger steps back to) is a copy of three
small objects, whatever the stages produce. Observers and user code read the run through `forge.observe.RunView`;
the old attribute names (`run.step`, `run.intent`, `run.verdict`, …) are read-only views
of these values.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from forge.agent.actions import Action, ToolSpec
from forge.agent.idempotency import IdempotencyRegistry
from forge.agent.observations import LoopState, Observation
from forge.agent.stopping import StopController, StopDecision
from forge.observe import Observers
from forge.policy import Intent, Policy
from forge.records.journal import Journal, JournalEntry
from forge.records.outcome import CountChanges, FactChanges
from forge.records.trace import Redact, Trace
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.guardrails import Guard
    from forge.machine.performers import Performer
    from forge.output import Output
    from forge.records.trace import TransitionRecord

__all__ = ["Firing", "Furthest", "Run", "RunConfig", "RunCounts", "RunFacts", "RunSnapshot"]

@dataclass(slots=True)
class Furthest:
    """What a run stepped back and forth (a debugger session's) recorded at the furthest it
    got: its observations, the action each recorded, its conversation, its transitions'
    records and its calls to the world. Stepping back cuts the run's own to a snapshot's
    lengths (`Run.restore`); stepping forward again takes from these, and a new transition
    adds to them (`reached`)."""

    observations: list[Observation]
    actions: list[str]
    messages: list[dict[str, Any]]
    records: list[TransitionRecord]
    calls: list[JournalEntry]

    @classmethod
    def of(cls, run: Run) -> Furthest:
        """Where `run` is before its session's first transition: what it has recorded (a
        continued conversation's earlier turns), no record of the session's yet."""
        state = run.loop_state
        return cls(list(state.observations), list(state.action_history), list(state.messages), [], list(run.journal))

    def reached(self, run: Run, record: TransitionRecord) -> None:
        """Take in what `run` recorded past these in the new transition `record`."""
        state = run.loop_state
        self.records.append(record)
        self.observations.extend(state.observations[len(self.observations):])
        self.actions.extend(state.action_history[len(self.actions):])
        self.messages.extend(state.messages[len(self.messages):])
        self.calls.extend(run.journal[len(self.calls):])


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
    machine: str = ""  # the definition's name
    token_budget: int | None = None  # the run stops in budget_exhausted before spending more tokens
    cost_budget: float | None = None  # … or more US dollars (`forge.records.pricing`)
    prices: Mapping[str, Any] | None = None  # the loop's own prices, model name to `forge.records.pricing.Price`
    time_budget: float | None = None  # … or more seconds of working time (`forge.records.tally`)
    waiting_states: frozenset[str] = frozenset()  # the needs-input states: time in them is not working time
    handoffs: Mapping[str, Any] = field(default_factory=dict)  # the loops a policy may hand off to, by name
    can_ask: bool = False  # the definition has an input_required edge for a policy's Ask
    output: Output | None = None  # the shape a final answer must have (`forge.output`)
    max_parallel: int = 1  # calls without side effects asked for at once run this many at the same time
    can_batch: bool = False  # the definition has an edge for calls made together (tools_batched)
    asynchronous: frozenset[str] = frozenset()  # the tools whose handler is an `async def`
    timeouts: Mapping[str, float] = field(default_factory=dict)  # seconds an approval state waits for its approver
    guards: tuple[Guard, ...] = ()  # the loop's guardrails, checked by check_call and check_result states
    covering: dict[tuple[str, str | None], tuple[Guard, ...]] = field(default_factory=dict, compare=False)
    """The guards that check each (what, tool): worked out once per loop, as `chosen` is."""
    policy_replays: str = field(init=False, default="code")  # how a replay treats the policy: "code", "model"
    # (a ModelPolicy) or "journal"; worked out once from the policy, not on every step

    def __post_init__(self) -> None:
        from forge.policy import answered_from_journal, asks_a_model

        replays = "journal" if answered_from_journal(self.policy) else "model" if asks_a_model(self.policy) else "code"
        object.__setattr__(self, "policy_replays", replays)


@dataclass(eq=False, slots=True)
class RunFacts:
    """What the run's stages have decided so far: the loop step, the call under way (its
    intent and the action chosen for it), that call's outcome (`status`, `payload`), the
    stop decision, the error that ended the run, if any, and the policy's question to the
    user when it asked one; what a person's answers decided (the next decision, the
    calls approved or rejected); and the calls made together (`batch`) with their
    `outcomes`; and the calls of a policy's list still to be made (`plan`)."""

    step: int = 0
    intent: Intent | None = None
    action: Action | None = None
    status: str | None = None
    payload: Any = None
    decision: StopDecision | None = None
    error: BaseException | None = None
    question: str | None = None
    repeat_of: int | None = None  # the step that ran the side effect this call was answered with (until recorded)
    ran: Mapping[str, int] = field(default_factory=dict)  # idempotency key → the step that ran it, in this run
    pinned: Intent | None = None  # the next decision, made by a person's answer (`forge.machine.asking`)
    approvals: Mapping[str, bool] = field(default_factory=dict)  # a call's fingerprint → a person's answer
    batch: tuple[tuple[Intent, Action], ...] = ()  # calls to make together, until their outcomes are decided on
    outcomes: tuple[tuple[str, Any], ...] = ()  # the status and value (or failure) of each call of the batch
    plan: tuple[Intent, ...] = ()  # the calls a policy's list asked for that are still to be made, in order
    goal: str | None = None  # the goal as a guard of the input fixed it: what the policy is given (else the run's)
    wrap_up: Any = None  # the answer the policy gave in its wrap-up call, before a budget ended the run

    def copy(self) -> RunFacts:
        return replace(self)


@dataclass(eq=False, slots=True)
class RunCounts:
    """What a run counts for its result: retries of transient tool errors, side effects run
    and replayed from the idempotency registry, how many of the conversation's messages
    the trace already holds, how many steps the conversation had taken when the run
    began (its own are counted from there, whatever turns answers start), and where its
    messages start in the conversation's (its usage is theirs)."""

    retries: int = 0
    side_effects_run: int = 0
    side_effects_replayed: int = 0
    messages_seen: int = 0
    steps_before: int = 0
    first_message: int = 0  # where this run's messages start in a conversation's (its usage is theirs)

    def copy(self) -> RunCounts:
        return replace(self)


@dataclass(eq=False, slots=True)
class Firing:
    """The engine's scratch while a transition fires, and what it left after the last one:
    the source state, when it started, whether its record is made, which hook is running
    (so a failure can say where), every guard evaluated, the source action's verdict, the
    detail the trace keeps of it and the record's subject, the record made for observers,
    and an interrupt (KeyboardInterrupt, CancelledError) to raise once the firing ends.
    The engine alone writes it."""

    source: str = ""
    started: float = 0.0
    recorded: bool = True
    hook: str = ""
    guard_values: dict[str, bool] = field(default_factory=dict)
    verdict: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    subject: Any = None
    record: TransitionRecord | None = None
    interrupted: BaseException | None = None

    def copy(self) -> Firing:
        """This firing, less its interrupt (which belongs to the moment it was raised)."""
        return replace(self, interrupted=None)


@dataclass(eq=False, slots=True, weakref_slot=True)
class Run:
    """The state of one run (see the module). `state` is the machine state's name."""

    goal: str
    config: RunConfig
    state: str
    loop_state: LoopState = field(default_factory=LoopState)
    registry: IdempotencyRegistry = field(default_factory=IdempotencyRegistry)
    observers: Observers = field(default_factory=Observers)
    trace: Trace = field(default_factory=Trace)
    journal: Journal = field(default_factory=Journal)
    performer: Performer | None = None  # through which the stages' effects reach the world
    facts: RunFacts = field(default_factory=RunFacts)
    counts: RunCounts = field(default_factory=RunCounts)
    firing: Firing = field(default_factory=Firing)

    # read-only views by the names observers, callbacks and tools have used
    step = property(lambda self: self.facts.step)
    intent = property(lambda self: self.facts.intent)
    action = property(lambda self: self.facts.action)
    status = property(lambda self: self.facts.status)
    payload = property(lambda self: self.facts.payload)
    decision = property(lambda self: self.facts.decision)
    error = property(lambda self: self.facts.error)
    retries = property(lambda self: self.counts.retries)
    side_effects_run = property(lambda self: self.counts.side_effects_run)
    side_effects_replayed = property(lambda self: self.counts.side_effects_replayed)
    messages_seen = property(lambda self: self.counts.messages_seen)
    verdict = property(lambda self: self.firing.verdict)
    guard_values = property(lambda self: self.firing.guard_values)
    record = property(lambda self: self.firing.record)
    source = property(lambda self: self.firing.source)
    machine = property(lambda self: self.config.machine)
    first_message = property(lambda self: self.counts.first_message)
    base_steps = property(lambda self: self.loop_state.turn_start)

    @property
    def hook(self) -> str:
        """What is running now (the action, a guard, a callback, an observer)."""
        return self.firing.hook

    @hook.setter
    def hook(self, name: str) -> None:
        self.firing.hook = name

    @property
    def detail(self) -> Mapping[str, Any]:
        """What the trace keeps of the last fired transition's stage work."""
        return self.firing.detail

    @detail.setter
    def detail(self, detail: Mapping[str, Any]) -> None:
        warnings.warn("a stage that assigns run.detail is deprecated: return StageOutcome(verdict, detail=...) "
                      "instead (forge.StageOutcome)", DeprecationWarning, stacklevel=2)
        self.firing.detail = detail

    def snapshot(self) -> RunSnapshot:
        """Everything needed to put this run back exactly as it is now, given the
        observations, records and calls it had (they only ever grow): a few references,
        whatever the stages produced."""
        return RunSnapshot(self.state, self.facts.copy(), self.counts.copy(), self.firing.copy(),
                           self.loop_state.step_count,
                           self.loop_state.terminal, len(self.trace), len(self.loop_state.messages), len(self.journal),
                           self.goal, self.loop_state.turn_start, self.config)

    def restore(self, snapshot: RunSnapshot, furthest: Furthest) -> None:
        """Put the run back as `snapshot` says, moving its state, trace and journal to the
        snapshot's lengths with what the run recorded at its `furthest`: the cost is what
        one step changed."""
        self.state, self.facts, self.counts, self.firing = (snapshot.state, snapshot.facts.copy(),
                                                            snapshot.counts.copy(), snapshot.firing.copy())
        self.goal, self.loop_state.turn_start, self.config = snapshot.goal, snapshot.turn_start, snapshot.config
        self.loop_state.move_to(snapshot.observations, snapshot.messages, snapshot.terminal, furthest)
        self.trace.move_to(snapshot.transitions, furthest.records)
        self.journal.move_to(snapshot.calls, furthest.calls)

    def fold(self, facts: FactChanges, counts: CountChanges) -> None:
        """The engine's one way to change what a run has decided: these facts replaced,
        these counts added to (each key a field of `RunFacts` or `RunCounts`, typed by the
        stage that says it, `forge.records.outcome`)."""
        for name, value in facts.items():
            setattr(self.facts, name, value)
        current = self.counts
        for name, value in counts.items():
            setattr(current, name, getattr(current, name) + value)


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """A run between two transitions (see `Run.snapshot`)."""

    state: str
    facts: RunFacts
    counts: RunCounts
    firing: Firing
    observations: int
    terminal: bool
    transitions: int
    messages: int
    calls: int
    goal: str  # a person's answer may change these three (`forge.machine.asking`)
    turn_start: int
    config: RunConfig
