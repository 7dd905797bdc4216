"""`AgentLoop`: what users build, configure and run."""

from __future__ import annotations

import os
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.agent.observations import LoopState
from forge.errors import UsageError, WrongType
from forge.machine.child import loop_tool
from forge.options import FLAT_NAMES, GROUPS, Clocks, Grouped, Hooks, Limits, Retry, grouped
from forge.running import RUN_PLUMBING, PerformerFactory, RunStart, arun_through, run_through, started, trace_file_name

if TYPE_CHECKING:
    from forge.agent.idempotency import IdempotencyRegistry
    from forge.agent.observations import Observation
    from forge.debug.session import DebugSession
    from forge.durable.durability import Durable
    from forge.events import StreamEvent
    from forge.guardrails import Guard
    from forge.machine.catalog import Stage, StageCatalog
    from forge.machine.engine import AsyncLoopEngine, LoopEngine, TransitionCallbacks
    from forge.machine.fork import Patch, RecordedRun
    from forge.machine.run import Run
    from forge.observe import LoopObserver
    from forge.output import Output
    from forge.policy import Policy
    from forge.records.definition import MachineDefinition
    from forge.records.journal import JournalCodec, JournalEntry
    from forge.records.trace import TransitionRecord
    from forge.result import LoopResult
    from forge.spec import LoopSpec
    from forge.tools import Tool

__all__ = ["AgentLoop", "PerformerFactory", "trace_file_name"]

class AgentLoop:
    """A single agent's tool loop, run as the state machine of a loop definition.

    `policy(goal, state) -> Intent | Finish` chooses what to do next (a tool call, or the
    final answer); `verify(observation) -> bool` or `verify(observation, state) -> bool` is
    the external acceptance check, the only way a run ends in `verified_success` (anything
    but a bool is an error, never success). `max_steps=8` allows at most eight steps (tool
    calls and answers) per run. `definition` is a built-in name, a file path or a loaded
    `MachineDefinition` (default: the shipped `single_agent` loop); `stages` adds user
    stages it may name (`{"audit": Stage(...)}`); `approver(request) -> True | False | None`
    answers the `request_approval` stage of `machines/approval.toml`. `output` (a pydantic
    model, a dataclass or a JSON Schema, `forge.output`) is the shape of the final answer:
    it is validated before `verify`, `result.answer` is the typed value, and an invalid
    answer is told to the policy, which replans within the step budget. Each run gets its own
    idempotency registry, so an identical side effect runs once per run; pass `registry` to
    share one across runs and loops, so that a side effect done once stays done.

    The rest comes in four values (`forge.options`): `limits` (`Limits`: the repeat limit,
    and a `token_budget` for the run's model calls: the run ends in `budget_exhausted`
    before a call that would go past it), `retry` (`Retry`: bounded retry of transient tool
    errors, exactly as `run_with_retry`; by default it does not wait), `clocks` (`Clocks`:
    the time, waiting and chance a run uses) and `hooks` (`Hooks`: observers told of every
    run, transition and tool attempt, after a `LoggingObserver` on the logger `forge`;
    transitions callbacks; `redact`, which sees every call's arguments and observation's
    payload before the trace keeps them; the journal's `codec`; `guards`, `forge.Guard`s that
    check the run's input, each call's arguments, each result and the answer in the guard
    states of `machines/guarded.toml` or `guarded_approval.toml`: each passes, fixes the
    value or trips). The flat names of an
    earlier forge (`repeat_limit=`, `observers=`, …) are taken with a DeprecationWarning.
    Every call a run makes to the world is in its `result.journal` (`forge.records.journal`).

    Raises:
        ValueError: no tools, duplicate tool names, a non-Tool in `tools`, a non-callable
            policy, verify or approver, a limit below 1, malformed stages or callbacks, or a
            definition that asks for approvals without an approver, an `output` that is no
            shape, or one given to a definition without an `answer_invalid` edge.
        TypeError: an unknown keyword argument, or a group given as something else.
        FileNotFoundError, DefinitionError: the definition cannot be found or loaded, or
            `forge check` would find an error in it (nondeterminism, a verdict no transition
            handles, a state with no way out, a cycle the step budget cannot end, …).
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        policy: Policy,
        verify: Callable[[Observation], bool],
        max_steps: int = 8,
        *,
        definition: str | Path | MachineDefinition = "single_agent",
        stages: Mapping[str, Stage] | StageCatalog | None = None,
        approver: Callable[..., Any] | None = None,
        registry: IdempotencyRegistry | None = None,
        limits: Limits | None = None,
        retry: Retry | None = None,
        clocks: Clocks | None = None,
        hooks: Hooks | None = None,
        output: Any = None,
        **flat: Any,
    ) -> None:
        from forge.spec import LoopSpec

        options = grouped({"limits": limits, "retry": retry, "clocks": clocks, "hooks": hooks}, flat)
        self.spec: LoopSpec = LoopSpec.of(tools, policy, verify, max_steps, definition=definition, stages=stages,
                                          approver=approver, registry=registry, options=options, output=output)

    @classmethod
    def of(cls, spec: LoopSpec) -> AgentLoop:
        """The loop whose spec is `spec` (made by `LoopSpec.of`, checked there)."""
        loop = cls.__new__(cls)
        loop.spec = spec
        return loop

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self.spec.tools

    @property
    def options(self) -> Grouped:
        """The loop's four grouped values (`forge.options`)."""
        return self.spec.options

    @property
    def definition(self) -> MachineDefinition:
        return self.spec.definition

    @property
    def stages(self) -> StageCatalog:
        return self.spec.stages

    @property
    def guards(self) -> tuple[Guard, ...]:
        """The loop's guardrails (`forge.guardrails`), in the order they check."""
        return self.spec.config.guards

    @property
    def callbacks(self) -> TransitionCallbacks:
        return self.spec.callbacks

    @property
    def engine(self) -> LoopEngine:
        return self.spec.engine

    def with_handoffs(self, loops: Mapping[str, AgentLoop] | None = None, /, **named: AgentLoop) -> AgentLoop:
        """A new loop like this one whose policy may hand the conversation to `loops` (and
        `named`), by the names its definition allows (`[handoffs] to`,
        `MachineDefinition.with_handoffs`); see `forge.Handoff`.

        Raises:
            ValueError: (a UsageError) a name the definition does not list, or a value that
                is not an AgentLoop.
        """
        return self.replace(handoffs={**self.handoffs, **(loops or {}), **named})

    @property
    def handoffs(self) -> Mapping[str, AgentLoop]:
        """The loops a policy of this loop may hand the conversation to (`forge.Handoff`), by name."""
        return self.spec.config.handoffs

    @property
    def max_steps(self) -> int:
        return self.spec.given["max_steps"]  # type: ignore[no-any-return]

    @property
    def registry(self) -> IdempotencyRegistry | None:
        """The idempotency registry shared by the loop's runs, or None (each run its own)."""
        return self.spec.given["registry"]  # type: ignore[no-any-return]

    @property
    def repeat_limit(self) -> int:
        return self.options.limits.repeat_limit

    @property
    def max_attempts(self) -> int:
        return self.options.retry.max_attempts

    @property
    def codec(self) -> JournalCodec | None:
        return self.options.hooks.codec  # type: ignore[no-any-return]

    @property
    def asynchronous(self) -> bool:
        """Whether a tool, the policy, verify, the approver or a stage is an `async def`, so
        that only `arun` can run the loop."""
        return bool(self.spec.async_parts)

    @property
    def output(self) -> Output | None:
        """The shape of the loop's answer (`forge.output`), or None when it is untyped."""
        return self.spec.config.output

    def runs(self, run: Run) -> bool:
        """Whether `run` is a run of this loop (a run whose step budget was lowered too)."""
        return run.config.tools is self.spec.config.tools

    @property
    def stops_at_token_budget(self) -> bool:
        """Whether a run of this loop can be given a token budget (`run(token_budget=...)`):
        its definition has an edge for a budget spent."""
        from forge.machine.stages import Selection

        return self.spec.handles(Selection.BUDGET_EXHAUSTED)

    @property
    def policy(self) -> Policy:
        """The policy this loop was given (before `with_tools` saw its tools)."""
        return self.spec.given["policy"]  # type: ignore[no-any-return]

    def replace(self, **changes: Any) -> AgentLoop:
        """A new loop with the same arguments as this one except `changes` (any of
        `__init__`'s, by name; a flat name of an earlier forge changes that field of its
        group, with a DeprecationWarning): how a durable run wraps the policy, tools and
        verify of a loop in checkpointed steps. The policy is the one this loop was given
        (before a `with_tools` hook saw the tools), so a new tool list reaches it too.

        Raises:
            TypeError: a change names no argument of AgentLoop.
            ValueError, DefinitionError: as `AgentLoop(...)`.
        """
        from forge.spec import GIVEN

        tools = changes.pop("tools", None)
        given = {name: changes.pop(name) for name in list(changes) if name in GIVEN}
        groups = {name: changes.pop(name) for name in list(changes) if name in GROUPS}
        unknown = set(changes) - set(FLAT_NAMES)
        if unknown:
            raise WrongType(f"AgentLoop.replace() got unknown arguments: {', '.join(sorted(unknown))}")
        return AgentLoop.of(self.spec.replaced(tools, grouped(groups, changes, self.options), **given))

    def as_tool(self, name: str, description: str = "", *, input: Any = None, side_effect: bool | None = None) -> Tool:
        """This loop as a `Tool` another loop may call: each call is a child run of the
        calling run (its path as run id, the parent's steps left as its budget, its usage
        rolled up, its result in the parent's `result.children`), and the tool's value is the
        child's answer. A child that does not end in success is a tool error of the parent,
        naming its stop reason (see `forge.machine.child`).

        Without `input` the tool takes `{"goal": "..."}`; with `input` (a pydantic model, a
        dataclass or an object's JSON Schema) it takes those arguments, checked, and gives
        the child their JSON as its goal. `side_effect` defaults to whether this loop has a
        side-effect tool.

        Raises:
            ValueError: a blank name, or an `input` that is not an object's shape.
        """
        return loop_tool(self, name, description, input, side_effect)

    def durable(self, name: str = "forge", db: str | os.PathLike[str] | None = None, *,
                extra_tools: Iterable[Tool] = ()) -> Durable:
        """This loop's runs, made durable (`pip install 'forge-fsm[durable]'`): each survives
        a crash, waits for a person's answer, and can be taken by any of many workers.
        Returns the loop's `Durable` (`forge.durable.durability`): `run`, `start`, `submit`,
        `fork`, and its runs read, waited for, answered and cancelled through the one client
        of stored runs. `name` is how recovered and queued runs find this loop again (every
        process that may run them attaches durability of that name); `db` is a SQLite path
        (default `forge-runs.sqlite` here) or a `postgresql://` URL; `extra_tools` are tools
        a person may add to a run waiting in `capability_gap`.

        Raises:
            UsageError: a blank name, one taken in this process already, or an extra tool
                whose name the loop has.
            ModuleNotFoundError: the `durable` extra is not installed.
        """
        from forge.durable.durability import Durable

        return Durable(self, name, db, extra_tools=extra_tools)

    @property
    def async_engine(self) -> AsyncLoopEngine:
        """The same definition, stages and callbacks on transitions' AsyncMachine."""
        from forge.machine.engine import async_engine_for

        return async_engine_for(self.definition, self.stages, self.callbacks)

    def start(self, goal: str | RunStart, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
              run_id: str | None = None, **plumbing: Any) -> Run:
        """A new run of `goal` in the initial state; nothing has fired yet. With `state` (an
        earlier run's `result.state`), it goes on from that run's observations and messages:
        the next turn of a conversation, with a step budget of its own. `run_id` names the
        run in its trace (default: 32 random hex digits).

        `goal` may be a whole `forge.RunStart`: the goal with the rest of the run's
        plumbing, one value (what forge's own layers pass: a durable run's performer and
        registry, a child run's lowered budgets, a deadline's `timed_out` state); see
        there. Its keywords given here one by one (`registry=`, `performer=`, `timed_out=`,
        `max_steps=`, `token_budget=`) are taken with a DeprecationWarning.

        Raises:
            ValueError: `goal` is blank, the definition allows a handoff this loop has no loop
                for (`with_handoffs`), `run_id` is not a non-blank string, `state`
                ended in a fatal error, `timed_out` names no state with a timeout edge,
                `max_steps` or `token_budget` is below 1, a `token_budget` is given to a
                loop whose definition has no budget_exhausted edge, or a `RunStart` is
                given with observers, state or run_id beside it.
            TypeError: an unknown keyword argument.
        """
        return started(self.spec, _start_of("start", goal, (observers, state, run_id), plumbing))

    def run(self, goal: str | RunStart, on_transition: Callable[[TransitionRecord], None] | None = None,
            observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
            run_id: str | None = None, **plumbing: Any) -> LoopResult:
        """Run `goal` to a terminal state and return how it ended.

        `on_transition(record)` is called after each fired transition (live progress);
        `observers` are told of this run only, after the loop's own; `state`, an earlier
        run's `result.state`, continues that conversation (see `start`); `run_id` names the
        run in its trace (default: 32 random hex digits). `goal` may be a whole
        `forge.RunStart` (see `start`): with it, `registry` replaces the loop's idempotency
        registry for this run; `performer(journal, run)` makes the `Performer` through which
        the run calls the world (default: the live one; a durable run's keeps its journal in
        the runs' database); `timed_out` starts the run by a waiting state's timeout edge
        and `max_steps` and `token_budget` lower its budgets. Never raises for what
        tools, the policy, `verify`, callbacks or observers do: those end the run in a
        terminal state with the exception in `result.error` and the trace intact.

        Raises:
            ValueError: `goal` is blank (and as `start`).
            AsyncNotSupported: (a TypeError) a tool, the policy, verify or the approver is
                an `async def`, which only `arun` can await; nothing has run.
            JournalMiss: `performer` answers from a journal (a durable run's recovery) and
                the run made a call the journal does not have there.
        """
        return run_through(self.spec, _start_of("run", goal, (observers, state, run_id), plumbing,
                                                  on_transition))

    async def arun(self, goal: str | RunStart, on_transition: Callable[[TransitionRecord], None] | None = None,
                   observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
                   run_id: str | None = None, **plumbing: Any) -> LoopResult:
        """`run`, awaited, on transitions' AsyncMachine: tools, policy, verify, the approver,
        user stages and callbacks may each be sync or `async def`; retries wait with
        `async_sleep`. The trace equals `run`'s on the same script. `goal` may be a
        `forge.RunStart`, as for `run`.

        Raises:
            ValueError: `goal` is blank (and as `start`).
            asyncio.CancelledError: the task was cancelled (the run stops where it was).
            JournalMiss: as `run`.
        """
        return await arun_through(self.spec,
                                  _start_of("arun", goal, (observers, state, run_id), plumbing,
                                            on_transition))

    def stream(self, goal: str | RunStart, *, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
               run_id: str | None = None, journal: Sequence[JournalEntry] | str | Path | None = None
               ) -> Iterator[StreamEvent]:
        """Run `goal` as `run` does, yielding its events as they happen (`forge.events`):
        each transition, tool attempt, model call and the text and tool-call deltas a
        `ChatPolicy` streams, what the run waits on, and last `RunFinished(result)`. The run
        is the same as `run`'s: its journal and trace are the ones `run` makes, and it runs
        under a copy of the context of the code iterating it (its context variables). With
        `journal` (a `LoopResult.journal` or a trace file), it is a replay of that journal
        (`replay`), calling nothing: a model's replies stream from the journal. `goal` may be
        a `forge.RunStart`, as for `run`.

        Breaking out of the loop (or closing the iterator) stops the run before its next
        call to the world (a tool, a model): it ends in `fatal_error` with
        `forge.events.StreamClosed` once the call under way has finished, which closing
        waits for (see `forge.running.stream`). The run does not wait for you: reading slower than
        it runs, you read events of calls it has already made.

        Raises (while iterating): what `run` or `replay` raises.
        """
        from forge.running.stream import stream

        return stream(self, _start_of("stream", goal, (observers, state, run_id), {}), journal)

    def astream(self, goal: str | RunStart, *, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
                run_id: str | None = None, journal: Sequence[JournalEntry] | str | Path | None = None
                ) -> AsyncIterator[StreamEvent]:
        """`stream`, for `async for`: the run is `arun` on this event loop, so tools, the
        policy and verify may be `async def`; its events reach the consumer each time the
        run awaits and before each tool call (a plain tool blocks the loop while it runs).
        Leaving the loop early stops the run as `stream`'s does (use
        `contextlib.aclosing` to stop it at once rather than when the generator is
        collected).

        Raises (while iterating): what `arun` or `replay` raises.
        """
        from forge.running.stream import astream

        return astream(self, _start_of("astream", goal, (observers, state, run_id), {}), journal)

    def debug(self, goal: str | RunStart, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
              run_id: str | None = None, **plumbing: Any) -> DebugSession:
        """A session that steps a new run of `goal` one transition at a time; nothing has run.
        `goal` may be a `forge.RunStart` (its `max_steps` and `token_budget` lower the run's
        budgets, as for `run`).

        Raises:
            ValueError: `goal` is blank.
            AsyncNotSupported: as `run`.
        """
        from forge.debug.session import DebugSession
        from forge.running import begin, refuse_async

        refuse_async(self.spec)
        run = started(self.spec, _start_of("debug", goal, (observers, state, run_id), plumbing))
        begin(self.spec, run)
        return DebugSession(self, run)

    def result(self, run: Run) -> LoopResult:
        """The `LoopResult` of a finished run. Raises ValueError if it has not finished."""
        from forge.running import result_of

        return result_of(self.spec, run)

    def replay(self, journal: Sequence[JournalEntry] | str | Path, goal: str | None = None,
               observers: Iterable[LoopObserver] = (), state: LoopState | None = None) -> LoopResult:
        """Make a recorded run again from its journal, calling nothing in the world: every
        policy decision, tool attempt, verify and approver answer is the recorded one, and
        retry waits do not wait. This loop's definition, stages, redact and observers run as
        they would; the result's trace equals the recorded run's when this loop is the one
        that recorded it. A replay of a replay is the same run again.

        `journal` is a `LoopResult.journal` or a trace file written with one
        (`write_trace(result.trace, path, journal=result.journal)`). `goal` defaults to the
        one the journal's first policy call was asked; `state` is the conversation the
        recorded run continued (its `state=`), if any.

        Raises:
            JournalMiss: the run made a call the journal does not have there (the loop's
                definition, tools or stages differ from the recorded run's), or the journal
                ended while the run went on. Nothing in the world was called.
            ValueError: no goal was given and the journal has no policy call to take it from.
            OSError, TraceFormatError: the file cannot be read.
        """
        from forge.running.replaying import replay

        return replay(self, journal, RunStart(goal, tuple(observers), state))

    def fork(self, source: LoopResult | RecordedRun | str | os.PathLike[str], at: int | None,
             patch: Patch | None = None, *,
             goal: str | RunStart | None = None, observers: Iterable[LoopObserver] = (),
             state: LoopState | None = None, run_id: str | None = None, child: str | None = None,
             max_steps: int | None = None) -> LoopResult:
        """A new run made from a recorded one: the same up to transition `at`, then live.

        Transitions before `at` replay `source`'s journal and call nothing in the world (no
        policy, tool, verify or approver; side effects done there are never done again). At
        `at`, `patch` (a `forge.Patch`) answers the first call recorded there instead of its
        recorded outcome: a tool's result or error, a policy decision, a verify or approver
        answer; the transition's trace record shows it (`detail["patched"]`). From `at` on,
        the run is live, with this loop's tools, policy and verify: a fork also tries new
        code against an old run. Without a patch, the fork goes live at `at`. With `at`
        None, the fork replays as long as this loop makes the recorded calls and goes live
        at the first it does not (its `forked_from.transition`): a recorded run continued
        from where changed code first departs from it.

        `source` is a `LoopResult` (with its journal) or a trace file written with one. The
        fork's journal says where it came from (`result.journal.forked_from`, a `ForkOrigin`
        written with the trace). `goal`, `observers` and `state` are as for `replay`;
        `run_id` names the fork (default: random); `max_steps` lowers its step budget (as `run`).
        `goal` may be a whole `forge.RunStart` (its goal None for the recorded one): how a
        child run is forked, with the budgets its parent has left.

        With `child` (a child run's path after the source's run id, `research.1`, or
        `research.1/notes.1` for a grandchild: see `result.children`), `at` and `patch` are a
        transition of that child run and its outcome: the fork replays the parent up to the
        transition that called the child, and the child, made again by its tool there, is a
        fork of its recorded run at `at`; so nothing is called before `at`, in the parent or
        the child. From there both are live: the parent hears the child's new answer.

        Raises:
            PatchRefused: (a ValueError) `at` is not one of the source's transitions, or the
                patch does not fit the call recorded at `at` (another kind of call, none, a
                decision for a tool this loop lacks or with arguments its contract refuses),
                or the source has no child run `child`; nothing has run.
            JournalMiss: before `at` the run made a call the journal does not have there
                (this loop's definition or stages differ from the recorded run's); nothing
                in the world was called.
            OSError, TraceFormatError: the file cannot be read.
            AsyncNotSupported: as `run`.
        """
        from forge.running.replaying import ForkPoint, fork

        if isinstance(goal, RunStart):  # a child's fork: the whole start, its budgets in it
            start = _start_of("fork", goal, (observers, state, run_id), {} if max_steps is None else {"max_steps": max_steps})
        else:
            start = RunStart(goal, tuple(observers), state, run_id, max_steps=max_steps)
        return fork(self, ForkPoint(source, at, patch, child), start)

    def debug_fork(self, source: LoopResult | RecordedRun | str | os.PathLike[str], at: int | None = None,
                   patch: Patch | None = None, *, goal: str | None = None, observers: Iterable[LoopObserver] = (),
                   state: LoopState | None = None) -> DebugSession:
        """A debugger session over a fork of a recorded run (see `fork`), positioned just
        before transition `at` (the transitions before it replayed, calling nothing); each
        step from there is live. With `at` None it is positioned at the start, and stepping
        replays the recorded run for as long as this loop makes its calls, then goes live:
        how `forge debug RUN.jsonl --scenario FILE` steps through a recorded run.
        `source` may also be a `RecordedRun` (a run as far as it went), and `at` one past
        its transitions: a patch then answers the first call of its kind there.

        Raises:
            PatchRefused, JournalMiss, OSError, TraceFormatError, AsyncNotSupported: as `fork`.
        """
        from forge.running.replaying import ForkPoint, debug_fork

        return debug_fork(self, ForkPoint(source, at, patch), RunStart(goal, tuple(observers), state))


def _start_of(method: str, goal: str | RunStart, beside: tuple[Iterable[LoopObserver], LoopState | None, str | None],
              plumbing: Mapping[str, Any], on_transition: Callable[[TransitionRecord], None] | None = None) -> RunStart:
    """The `RunStart` a call of `AgentLoop.METHOD` asks for: `goal` itself when it is one,
    else `goal` with what was passed `beside` it (the observers, state and run id) and the
    deprecated plumbing keywords; with `on_transition` told after the run's observers. (One
    value is made per run: this is on every run's way in.)

    Raises:
        ValueError: (a UsageError) a `RunStart` with observers, state, run_id or a
            plumbing keyword beside it.
        TypeError: (a WrongType) a keyword that is no part of a run's start.
    """
    observers, state, run_id = beside
    told: tuple[LoopObserver, ...] = ()
    if on_transition is not None:
        from forge.observe import TransitionCallback

        told = (TransitionCallback(on_transition),)
    if isinstance(goal, RunStart):
        given = [name for name, value in (("observers", tuple(observers)), ("state", state), ("run_id", run_id))
                 if value not in ((), None)] + sorted(plumbing)
        if given:
            raise UsageError(f"AgentLoop.{method}(RunStart(...)) takes the whole start in the RunStart; "
                             f"{', '.join(given)} given beside it: put them in the RunStart")
        return replace(goal, observers=(*goal.observers, *told)) if told else goal
    if plumbing:
        unknown = sorted(set(plumbing) - set(RUN_PLUMBING))
        if unknown:
            raise WrongType(f"AgentLoop.{method}() got an unexpected keyword argument {unknown[0]!r}")
        named = ", ".join(f"{name}=..." for name in plumbing)
        warnings.warn(f"AgentLoop.{method}({named}) is deprecated: a run's plumbing is one value, "
                      f"loop.{method}(forge.RunStart(goal, {named}))", DeprecationWarning, stacklevel=3)
    return RunStart(goal, (*observers, *told), state, run_id, **plumbing)
