"""`AgentLoop`: what users build, configure and run."""

from __future__ import annotations

import functools
import inspect  # already loaded by dataclasses: importing it here costs nothing
import os
import time
import types
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.agent.observations import LoopState
from forge.agent.retry import check_count
from forge.child import calling, children_of, finished_children, has_side_effects, loop_tool
from forge.errors import UsageError, WrongType
from forge.machine.effects import SYNCHRONOUS
from forge.options import FLAT_NAMES, GROUPS, Clocks, Grouped, Hooks, Limits, Retry, grouped

if TYPE_CHECKING:
    from forge.agent.idempotency import IdempotencyRegistry
    from forge.agent.observations import Observation
    from forge.child import ChildFork
    from forge.debug.session import DebugSession
    from forge.durable.durability import Durable
    from forge.events import StreamEvent
    from forge.machine.catalog import Stage, StageCatalog
    from forge.machine.definition import MachineDefinition
    from forge.machine.engine import AsyncLoopEngine, LoopEngine
    from forge.machine.fork import ForkPlan, Patch, RecordedRun
    from forge.machine.journal import Journal, JournalCodec, JournalEntry
    from forge.machine.performers import ForkingPerformer, Masking, Performer, ReplayingPerformer
    from forge.machine.run import Run, RunConfig, RunCounts
    from forge.machine.stages import Selection
    from forge.machine.trace import Trace, TransitionRecord
    from forge.observe import LoopObserver, Observers
    from forge.output import Output
    from forge.policy import Intent, Policy
    from forge.result import ChildRun, LoopResult
    from forge.tools import Tool

__all__ = ["AgentLoop", "PerformerFactory"]

PerformerFactory = Callable[["Journal", "Run"], "Performer"]
"""`factory(journal, run) -> Performer`: how a run calls the world (see `AgentLoop.run`)."""


@functools.cache
def _run_parts() -> tuple[type[Journal], type[Performer], type[Run], type[RunCounts], type[Trace]]:
    """What `AgentLoop.start` makes a run of, imported on the first run rather than with
    forge (and looked up once: an import statement per run costs a few microseconds)."""
    from forge.machine.journal import Journal
    from forge.machine.performers import Performer
    from forge.machine.run import Run, RunCounts
    from forge.machine.trace import Trace

    return Journal, Performer, Run, RunCounts, Trace


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
    payload before the trace keeps them; the journal's `codec`). The flat names of an
    earlier forge (`repeat_limit=`, `observers=`, …) are taken with a DeprecationWarning.
    Every call a run makes to the world is in its `result.journal` (`forge.machine.journal`).

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
        options = grouped({"limits": limits, "retry": retry, "clocks": clocks, "hooks": hooks}, flat)
        self._made(tools, policy, verify, max_steps, definition, stages, approver, registry, options, output)

    def _made(self, tools: Iterable[Tool], policy: Policy, verify: Callable[[Observation], bool], max_steps: int,
              definition: str | Path | MachineDefinition, stages: Mapping[str, Stage] | StageCatalog | None,
              approver: Callable[..., Any] | None, registry: IdempotencyRegistry | None, options: Grouped,
              output: Any = None, handoffs: Mapping[str, AgentLoop] | None = None) -> None:
        from forge.agent.actions import duplicate_names
        from forge.agent.stopping import StopController
        from forge.machine.definition import DefinitionError, MachineDefinition, Problem
        from forge.machine.engine import NO_CALLBACKS, TransitionCallbacks, engine_for
        from forge.machine.loader import catalog_of, load_definition
        from forge.machine.run import RunConfig
        from forge.machine.stages import Selection
        from forge.observe import Observers
        from forge.observe.log import LoggingObserver
        from forge.tools import Tool

        self._given: dict[str, Any] = {"policy": policy, "verify": verify, "max_steps": max_steps,
                                       "definition": definition, "stages": stages, "approver": approver,
                                       "registry": registry, "output": output, "handoffs": handoffs}
        self.options = options
        limits, hooks = options.limits, options.hooks
        tools = tuple(tools)
        if not tools:
            raise UsageError("AgentLoop needs at least one tool")
        for tool in tools:
            if not isinstance(tool, Tool):
                raise UsageError(f"tools must be forge.Tool instances, got {tool!r}")
        duplicated = duplicate_names(tool.name for tool in tools)
        if duplicated:
            raise UsageError(f"duplicate tool names: {', '.join(duplicated)}")
        if not callable(policy):
            raise UsageError("policy must be callable as policy(goal, loop_state) -> Intent | Finish")
        with_tools = getattr(policy, "with_tools", None)
        if callable(with_tools):  # a policy that offers the tools to a model (ChatPolicy) is given them
            policy = with_tools(tools)
        shape = None
        if output is not None:
            from forge.output import Output

            shape = Output.of(output)
            with_output = getattr(policy, "with_output", None)
            if callable(with_output):  # a policy that asks a model (ChatPolicy) asks it for the shape
                policy = with_output(shape)
        if limits.token_budget is not None:
            with_budget = getattr(policy, "with_token_budget", None)
            if callable(with_budget):  # a policy that calls a model stops before a call that would exceed it
                policy = with_budget(limits.token_budget)
        if not callable(verify):
            raise UsageError("verify must be callable as verify(observation) -> bool")
        if approver is not None and not callable(approver):
            raise UsageError("approver must be callable as approver(request) -> True | False | None")
        check_count("max_steps", max_steps)
        retry_options: dict[str, Any] = {"base_delay": options.retry.base_delay, "max_delay": options.retry.max_delay,
                                         "deadline": options.retry.deadline}
        if options.clocks.random is not None:
            retry_options["random"] = options.clocks.random
        self.tools = tools
        self.stages = catalog_of(stages)
        self.callbacks = hooks.callbacks if hooks.callbacks is not None else NO_CALLBACKS
        if not isinstance(self.callbacks, TransitionCallbacks):
            raise UsageError(f"callbacks must be a forge TransitionCallbacks, got {type(hooks.callbacks).__name__}")
        self.definition = (
            definition if isinstance(definition, MachineDefinition) else load_definition(definition, self.stages)
        )
        handed = self._handoffs_checked(handoffs)
        from forge.check import Finding, Severity, soundness_errors  # here: imported once a loop is built

        errors = soundness_errors(self.definition, self.stages)
        if self.definition.requires:
            from forge.check.properties import violations

            errors = (*errors, *(Finding(Severity.ERROR, "property", self.definition.path, v.entry,
                                         f"{v.property}: {v.message}; counterexample: "
                                         + " → ".join(f"{t.source} -{t.trigger}-> {t.dest}" for t in v.path))
                                 for v in violations(self.definition, self.definition.requires, self.stages,
                                                     any(tool.side_effect for tool in tools)
                                                     or any(has_side_effects(loop) for loop in handed.values()))))
        if errors:
            raise DefinitionError(
                self.definition.path,
                tuple(Problem(f.entry, f"{f.message} (run `forge check` for the full report)", f.code) for f in errors),
            )
        if limits.token_budget is not None and not self._handles(Selection.BUDGET_EXHAUSTED):
            raise UsageError(f"definition {self.definition.name!r} has no budget_exhausted edge, so it cannot stop a run "
                             "at its token_budget: add a transition from the policy's state guarded by "
                             "token_budget_exhausted (as machines/single_agent.toml has)")
        if shape is not None and not self._handles(Selection.ANSWER_INVALID):
            raise UsageError(f"definition {self.definition.name!r} has no answer_invalid edge, so it cannot replan after "
                             "an answer that is not a valid output: add a transition from the policy's state guarded "
                             "by answer_invalid (as machines/single_agent.toml has)")
        asks_approval = any(s.action == "request_approval" for s in self.definition.states)
        if approver is None and asks_approval:
            raise UsageError(f"definition {self.definition.name!r} asks for approvals (request_approval): "
                             "pass AgentLoop(..., approver=...)")
        if approver is not None and not asks_approval:
            raise UsageError(f"AgentLoop got an approver, but definition {self.definition.name!r} never asks for "
                             "approvals (it has no request_approval state), so no call would wait for it: pass "
                             "definition=\"approval\" (machines/approval.toml) or a definition of your own with a "
                             "request_approval state before its side effects")
        self.engine: LoopEngine = engine_for(self.definition, self.stages, self.callbacks)
        self._async_parts = tuple(
            what for what, function in (
                *((f"tool {t.name!r}", t.handler) for t in tools),
                ("the policy", policy), ("verify", verify), ("the approver", approver),
                *((f"stage {name!r}", getattr(spec.run, "user_action", None)) for name, spec in self.stages.actions.items()),
            )
            if function is not None and _is_async(function)
        )
        extra: tuple[LoopObserver, ...] = hooks.observers
        self._observers = Observers((LoggingObserver(), *extra)) if extra else _default_observers()
        clocks = options.clocks
        self._config = RunConfig(
            tools={tool.name: tool for tool in tools},
            specs=tuple(tool.spec for tool in tools),
            policy=policy,
            verify=verify,
            controller=StopController(max_steps=max_steps, repeat_limit=limits.repeat_limit),
            max_attempts=options.retry.max_attempts,
            retry_options=retry_options,
            sleep=clocks.sleep,
            async_sleep=clocks.async_sleep,
            clock=clocks.clock,
            approver=approver,
            verify_takes_state=_takes_state(verify),
            repeat_by=limits.repeat_by,
            redact=hooks.redact,
            machine=self.definition.name,
            token_budget=limits.token_budget,
            handoffs=types.MappingProxyType(handed),
            can_ask=self._handles(Selection.ASKED),
            output=shape,
            max_parallel=limits.max_parallel,
            can_batch=self._handles(Selection.BATCHED),
            asynchronous=frozenset(tool.name for tool in tools if _is_async(tool.handler)),
            timeouts={s.name: s.timeout for s in self.definition.states if s.timeout is not None and not s.terminal},
        )

    def _handoffs_checked(self, handoffs: Mapping[str, AgentLoop] | None) -> dict[str, AgentLoop]:
        """The loops a policy of this loop may hand off to, checked against the definition's
        `[handoffs] to`: the same names, each an AgentLoop.

        Raises:
            ValueError: (a UsageError) a name the definition does not list, or a value that is
                not an AgentLoop.
        """
        given = dict(handoffs or {})
        allowed = self.definition.handoffs
        for name, loop in given.items():
            if not isinstance(loop, AgentLoop):
                raise UsageError(f"handoffs[{name!r}] must be an AgentLoop, got {type(loop).__name__}")
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            listed = f"it lists {', '.join(map(repr, allowed))}" if allowed else "it lists none"
            raise UsageError(f"definition {self.definition.name!r} allows no handoff to {', '.join(map(repr, unknown))} "
                             f"({listed}): add the names to its [handoffs] to = [...]")
        self._unhanded = tuple(name for name in allowed if name not in given)
        return given

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
        return self._config.handoffs

    def _handles(self, verdict: Selection) -> bool:
        """Whether the definition has a transition for this verdict of select_tool."""
        return any(t.guard is not None and self.stages.guards[t.guard].action == "select_tool"
                   and self.stages.guards[t.guard].verdict == verdict for t in self.definition.transitions)

    @property
    def max_steps(self) -> int:
        return self._given["max_steps"]  # type: ignore[no-any-return]

    @property
    def registry(self) -> IdempotencyRegistry | None:
        """The idempotency registry shared by the loop's runs, or None (each run its own)."""
        return self._given["registry"]  # type: ignore[no-any-return]

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
        return bool(self._async_parts)

    @property
    def output(self) -> Output | None:
        """The shape of the loop's answer (`forge.output`), or None when it is untyped."""
        return self._config.output

    def runs(self, run: Run) -> bool:
        """Whether `run` is a run of this loop (a run whose step budget was lowered too)."""
        return run.config.tools is self._config.tools

    @property
    def stops_at_token_budget(self) -> bool:
        """Whether a run of this loop can be given a token budget (`run(token_budget=...)`):
        its definition has an edge for a budget spent."""
        from forge.machine.stages import Selection

        return self._handles(Selection.BUDGET_EXHAUSTED)

    @property
    def policy(self) -> Policy:
        """The policy this loop was given (before `with_tools` saw its tools)."""
        return self._given["policy"]  # type: ignore[no-any-return]

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
        tools = changes.pop("tools", self.tools)
        given = {name: changes.pop(name) for name in list(changes) if name in self._given}
        groups = {name: changes.pop(name) for name in list(changes) if name in GROUPS}
        unknown = set(changes) - set(FLAT_NAMES)
        if unknown:
            raise WrongType(f"AgentLoop.replace() got unknown arguments: {', '.join(sorted(unknown))}")
        options = grouped(groups, changes, self.options)
        made = AgentLoop.__new__(AgentLoop)
        made._made(tools, **{**self._given, **given}, options=options)
        return made

    def as_tool(self, name: str, description: str = "", *, input: Any = None, side_effect: bool | None = None) -> Tool:
        """This loop as a `Tool` another loop may call: each call is a child run of the
        calling run (its path as run id, the parent's steps left as its budget, its usage
        rolled up, its result in the parent's `result.children`), and the tool's value is the
        child's answer. A child that does not end in success is a tool error of the parent,
        naming its stop reason (see `forge.child`).

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

    def start(self, goal: str, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
              run_id: str | None = None, *, registry: IdempotencyRegistry | None = None,
              performer: PerformerFactory | None = None, timed_out: str | None = None,
              max_steps: int | None = None, token_budget: int | None = None) -> Run:
        """A new run of `goal` in the initial state; nothing has fired yet. With `state` (an
        earlier run's `result.state`), it goes on from that run's observations and messages:
        the next turn of a conversation, with a step budget of its own. `run_id` names the
        run in its trace (default: 32 random hex digits). `registry` and `performer` are
        as for `run`.

        `timed_out` names a waiting state whose deadline passed: the run starts there and its
        first transition is that state's `timeout` edge (what a durable run does when no
        answer came in time). `max_steps` lowers this run's step budget below the loop's
        (what a child run is given of its parent's, `as_tool`); a larger one is the loop's.
        `token_budget` lowers its token budget the same way (a child's: what its parent has
        left).

        Raises:
            ValueError: `goal` is blank, the definition allows a handoff this loop has no loop
                for (`with_handoffs`), `run_id` is not a non-blank string, `state`
                ended in a fatal error, `timed_out` names no state with a timeout edge,
                `max_steps` or `token_budget` is below 1, or a `token_budget` is given to a
                loop whose definition has no budget_exhausted edge.
        """
        Journal, Performer, Run, RunCounts, Trace = _run_parts()
        if not isinstance(goal, str) or not goal.strip():
            raise UsageError("goal must be a non-blank string")
        if self._unhanded:
            raise UsageError(f"definition {self.definition.name!r} allows handoffs to "
                             f"{', '.join(map(repr, self._unhanded))}, which this loop has no loop for: "
                             "loop.with_handoffs(NAME=other_loop)")
        if timed_out is not None and self.definition.timeout_edge(timed_out) is None:
            raise UsageError(f"state {timed_out!r} of {self.definition.name!r} has no timeout edge to take")
        if run_id is None:
            run_id = os.urandom(16).hex()
        elif not isinstance(run_id, str) or not run_id.strip():
            raise UsageError(f"run_id must be a non-blank string, got {run_id!r}")
        if registry is None:
            from forge.agent.idempotency import IdempotencyRegistry

            registry = self.registry if self.registry is not None else IdempotencyRegistry()
        loop_state = LoopState() if state is None else state.continued()
        journal = Journal(run_id=run_id, codec=self.codec)
        redact = self._config.redact
        if redact is not None:  # what write_trace writes of the journal: masked as the records were
            from forge.machine.redaction import redacted_journal

            journal.masking = lambda entries, records: redacted_journal(entries, redact, records)
        run = Run(goal=goal, config=self._config, state=timed_out or self.definition.initial, registry=registry,
                  loop_state=loop_state,
                  counts=RunCounts(messages_seen=len(loop_state.messages), steps_before=loop_state.turn_start,
                                   first_message=len(loop_state.messages)),
                  observers=self._observers.for_run() + observers,
                  trace=Trace(machine=self.definition.name, run_id=run_id, started_at=time.time(),
                              redact=self._config.redact), journal=journal)
        config = run.config = self._lowered(max_steps, token_budget)
        run.performer = (performer(journal, run) if performer is not None
                         else Performer(journal, run, config.sleep, config.async_sleep))
        return run

    def _lowered(self, max_steps: int | None, token_budget: int | None) -> RunConfig:
        """The loop's run configuration with a step or token budget lowered (see `start`)."""
        from dataclasses import replace

        config = self._config
        if max_steps is not None:
            check_count("max_steps", max_steps)
            if max_steps < config.controller.max_steps:
                from forge.agent.stopping import StopController

                config = replace(config, controller=StopController(max_steps, config.controller.repeat_limit))
        if token_budget is not None:
            check_count("token_budget", token_budget)
            if config.token_budget is None or token_budget < config.token_budget:
                if not self.stops_at_token_budget:
                    raise UsageError(f"definition {self.definition.name!r} cannot stop a run at a token budget: it has "
                                     "no transition guarded by token_budget_exhausted")
                with_budget = getattr(config.policy, "with_token_budget", None)
                policy = with_budget(token_budget) if callable(with_budget) else config.policy
                config = replace(config, token_budget=token_budget, policy=policy)
        return config

    def run(self, goal: str, on_transition: Callable[[TransitionRecord], None] | None = None,
            observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
            run_id: str | None = None, *, registry: IdempotencyRegistry | None = None,
            performer: PerformerFactory | None = None, timed_out: str | None = None,
            max_steps: int | None = None, token_budget: int | None = None) -> LoopResult:
        """Run `goal` to a terminal state and return how it ended.

        `on_transition(record)` is called after each fired transition (live progress);
        `observers` are told of this run only, after the loop's own; `state`, an earlier
        run's `result.state`, continues that conversation (see `start`); `run_id` names the
        run in its trace (default: 32 random hex digits). `registry` replaces the loop's
        idempotency registry for this run; `performer(journal, run)` makes the `Performer`
        through which the run calls the world (default: the live one; a durable run's keeps
        its journal in the runs' database); `timed_out` starts the run by a waiting state's
        timeout edge and `max_steps` and `token_budget` lower its budgets (see `start`). Never raises for what
        tools, the policy, `verify`, callbacks or observers do: those end the run in a
        terminal state with the exception in `result.error` and the trace intact.

        Raises:
            ValueError: `goal` is blank.
            AsyncNotSupported: (a TypeError) a tool, the policy, verify or the approver is
                an `async def`, which only `arun` can await; nothing has run.
            JournalMiss: `performer` answers from a journal (a durable run's recovery) and
                the run made a call the journal does not have there.
        """
        from forge.machine.performers import ReplayStopped

        self._refuse_async()
        run = self.start(goal, _with_callback(observers, on_transition), state, run_id, registry=registry,
                         performer=performer, timed_out=timed_out, max_steps=max_steps,
                         token_budget=token_budget)
        try:
            with calling(run):
                self._complete(run)
        except ReplayStopped as stopped:
            raise stopped.miss from None
        return self._finish(run)

    async def arun(self, goal: str, on_transition: Callable[[TransitionRecord], None] | None = None,
                   observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
                   run_id: str | None = None, *, registry: IdempotencyRegistry | None = None,
                   performer: PerformerFactory | None = None, timed_out: str | None = None,
                   max_steps: int | None = None, token_budget: int | None = None) -> LoopResult:
        """`run`, awaited, on transitions' AsyncMachine: tools, policy, verify, the approver,
        user stages and callbacks may each be sync or `async def`; retries wait with
        `async_sleep`. The trace equals `run`'s on the same script. `registry`,
        `performer`, `timed_out`, `max_steps` and `token_budget` are as for `run`.

        Raises:
            ValueError: `goal` is blank.
            asyncio.CancelledError: the task was cancelled (the run stops where it was).
            JournalMiss: as `run`.
        """
        from forge.machine.performers import ReplayStopped

        run = self.start(goal, _with_callback(observers, on_transition), state, run_id, registry=registry,
                         performer=performer, timed_out=timed_out, max_steps=max_steps,
                         token_budget=token_budget)
        engine = self.async_engine
        try:
            with calling(run):
                self._started(run)
                while True:
                    while not engine.is_terminal(run):
                        await engine.aadvance(run)
                    if not await engine.aanswer(run):
                        break
        except ReplayStopped as stopped:
            raise stopped.miss from None
        return self._finish(run)

    def stream(self, goal: str, *, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
               run_id: str | None = None, journal: Sequence[JournalEntry] | str | Path | None = None
               ) -> Iterator[StreamEvent]:
        """Run `goal` as `run` does, yielding its events as they happen (`forge.events`):
        each transition, tool attempt, model call and the text and tool-call deltas a
        `ChatPolicy` streams, what the run waits on, and last `RunFinished(result)`. The run
        is the same as `run`'s: its journal and trace are the ones `run` makes, and it runs
        under a copy of the context of the code iterating it (its context variables). With
        `journal` (a `LoopResult.journal` or a trace file), it is a replay of that journal
        (`replay`), calling nothing: a model's replies stream from the journal.

        Breaking out of the loop (or closing the iterator) stops the run before its next
        call to the world (a tool, a model): it ends in `fatal_error` with
        `forge.events.StreamClosed` once the call under way has finished, which closing
        waits for (see `forge.stream`). The run does not wait for you: reading slower than
        it runs, you read events of calls it has already made.

        Raises (while iterating): what `run` or `replay` raises.
        """
        from forge.stream import stream

        return stream(self, goal, observers, state, run_id, journal)

    def astream(self, goal: str, *, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
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
        from forge.stream import astream

        return astream(self, goal, observers, state, run_id, journal)

    def debug(self, goal: str, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
              run_id: str | None = None, *, max_steps: int | None = None,
              token_budget: int | None = None) -> DebugSession:
        """A session that steps a new run of `goal` one transition at a time; nothing has run.
        `max_steps` and `token_budget` lower its budgets (as `run`).

        Raises:
            ValueError: `goal` is blank.
            AsyncNotSupported: as `run`.
        """
        from forge.debug.session import DebugSession

        self._refuse_async()
        run = self.start(goal, observers, state, run_id, max_steps=max_steps, token_budget=token_budget)
        self._started(run)
        return DebugSession(self, run)

    def _complete(self, run: Run) -> None:
        """Tell the observers the run started, and fire it to a terminal state where nobody
        answers (see `forge.machine.asking`). The whole run is synchronous (`SYNCHRONOUS`,
        set once here rather than around each action)."""
        synchronous = SYNCHRONOUS.set(True)
        try:
            self._started(run)
            engine = self.engine
            while True:
                while not engine.is_terminal(run):
                    engine.advance(run)
                if not engine.answer(run):
                    return
        finally:
            SYNCHRONOUS.reset(synchronous)

    def _started(self, run: Run) -> None:
        """Tell the observers the run started. One that raises ends the run in fatal_error
        before any transition (the `fail` edge from the initial state, naming it), as a
        failing observer does inside a transition; the caller is not the one to hear of it.
        A run started anywhere but the initial state was started by a deadline that passed
        (`timed_out`): it then takes that state's timeout edge."""
        try:
            run.observers.notify(run, "run_started")
        except Exception as error:
            self.engine.fail_outside(run, error)
            return
        if run.state != self.definition.initial:
            self.engine.time_out(run)

    def _finish(self, run: Run) -> LoopResult:
        result = self.result(run)
        run.observers.finished(run, result)
        kept = os.environ.get("FORGE_TRACE_DIR")
        if kept:
            _keep_trace(Path(kept), run.trace)
        return result

    def _refuse_async(self) -> None:
        from forge.machine.effects import AsyncNotSupported

        if self._async_parts:
            raise AsyncNotSupported(self._async_parts[0], declared=True)

    def result(self, run: Run) -> LoopResult:
        """The `LoopResult` of a finished run. Raises ValueError if it has not finished."""
        from forge.result import LoopResult
        from forge.usage import usage_of, with_children

        if not self.engine.is_terminal(run):
            raise UsageError(f"the run has not finished; it is in state {run.state!r}")
        children = finished_children(run)
        return LoopResult(
            reason=run.state,
            steps=run.loop_state.step_count - run.counts.steps_before,
            state=run.loop_state,
            trace=run.trace,
            error=run.error,
            outcome=self.definition.state(run.state).outcome,
            retries=run.retries,
            side_effects_run=run.side_effects_run,
            side_effects_replayed=run.side_effects_replayed,
            definition=self.definition,
            journal=run.journal,
            html_view=_inspector,
            question=run.facts.question,
            usage=with_children(usage_of(run.loop_state.messages, run.first_message), children),
            children=children,
        )

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
        from forge.machine.fork import goal_of

        if isinstance(journal, (str, os.PathLike)):
            read = self._recorded(journal)
            recorded: Sequence[JournalEntry] = read.journal
            children: Sequence[Any] = read.children
        else:
            recorded = journal
            children = tuple(child for child in getattr(journal, "children", ()) if hasattr(child, "result"))
        if goal is None:
            goal = goal_of(recorded)
            if goal is None:
                raise UsageError("the journal records no policy call to take the goal from: pass replay(..., goal=...)")
        return self._replay_of(recorded, children, goal, observers, state)

    def _replay_of(self, recorded: Sequence[JournalEntry], children: Sequence[ChildRun], goal: str,
                   observers: Iterable[LoopObserver], state: LoopState | None) -> LoopResult:
        """A replay of `recorded` (see `replay`), whose tools made the child runs `children`."""
        from forge.agent.idempotency import IdempotencyRegistry
        from forge.machine.performers import ReplayingPerformer

        replaying: list[ReplayingPerformer] = []

        def answering(journal: Journal, run: Run) -> ReplayingPerformer:
            replaying.append(ReplayingPerformer(recorded, journal, run, masked=self._masking(run), children=children))
            return replaying[0]

        # a registry of its own: a side effect recorded as run is replayed from the journal, not the registry
        run = self.start(goal, observers, state, recorded[0].run_id if len(recorded) else None,
                         registry=IdempotencyRegistry(), performer=answering)
        self._replay_to_end(run, replaying[0], unreplayed_is_a_miss=True)
        return self._finish(run)

    def fork(self, source: LoopResult | RecordedRun | str | os.PathLike[str], at: int | None,
             patch: Patch | None = None, *,
             goal: str | None = None, observers: Iterable[LoopObserver] = (), state: LoopState | None = None,
             run_id: str | None = None, child: str | None = None, max_steps: int | None = None) -> LoopResult:
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
        from dataclasses import replace

        self._refuse_async()
        run, plan, performer = self._forked(source, at, patch, goal, observers, state, run_id, child, max_steps)
        self._replay_to_end(run, performer, unreplayed_is_a_miss=plan.at is not None)
        if plan.at is None:
            run.journal.forked_from = replace(plan.origin, transition=performer.went_live or len(run.trace))
        run.trace.forked_from = run.journal.forked_from
        return self._finish(run)

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
        from forge.debug.session import DebugSession
        from forge.machine.performers import ReplayStopped

        self._refuse_async()
        run, plan, _ = self._forked(source, at, patch, goal, observers, state, None)
        self._started(run)
        session = DebugSession(self, run)
        try:
            for _ in range((plan.at or 1) - 1):
                session.step()
        except ReplayStopped as stopped:
            raise stopped.miss from None
        return session

    def _replay_to_end(self, run: Run, performer: ReplayingPerformer, unreplayed_is_a_miss: bool) -> None:
        """Fire `run`, whose `performer` answers from a recorded journal, to its end.

        Raises:
            JournalMiss: the run made a call the journal does not have where it was due, or
                (`unreplayed_is_a_miss`) it ended with recorded calls not yet made.
        """
        from forge.machine.journal import JournalMiss
        from forge.machine.performers import ReplayStopped

        try:
            with calling(run):
                self._complete(run)
        except ReplayStopped as stopped:
            raise stopped.miss from None
        performer.replayed_children(len(run.trace) + 1)
        if unreplayed_is_a_miss and performer.remaining:
            raise JournalMiss(performer.recorded[len(performer.recorded) - performer.remaining], None, run.state)

    def _forked(self, source: LoopResult | RecordedRun | str | os.PathLike[str], at: int | None,
                patch: Patch | None, goal: str | None, observers: Iterable[LoopObserver], state: LoopState | None,
                run_id: str | None, child: str | None = None, max_steps: int | None = None
                ) -> tuple[Run, ForkPlan, ForkingPerformer]:
        """A new run of a fork of `source` (see `fork`), not yet started."""
        from forge.agent.idempotency import IdempotencyRegistry
        from forge.machine.performers import ForkingPerformer

        source = self._recorded(source)
        child_fork = None
        if child is not None:
            child_fork = self._child_fork(source, child, at, patch)
            at, patch = child_fork.transition, None
        plan = self._fork_plan(source, at, patch, goal)
        config = self._config
        forking: list[ForkingPerformer] = []

        def forks(journal: Journal, run: Run) -> ForkingPerformer:
            journal.forked_from = run.trace.forked_from = plan.origin
            forking.append(ForkingPerformer(plan.replayed, journal, run, plan.at, config.sleep, config.async_sleep,
                                            plan.patched, plan.origin.patch, plan.pending, self._masking(run),
                                            source.children))
            forking[0].child_fork = child_fork
            return forking[0]

        run = self.start(plan.goal, observers, state, run_id, registry=IdempotencyRegistry(), performer=forks,
                         max_steps=max_steps)
        return run, plan, forking[0]

    def _recorded(self, source: LoopResult | RecordedRun | str | os.PathLike[str]) -> LoopResult | RecordedRun:
        """A fork's source as a recorded run, read from its file (children too) if a path;
        each child run read from a file made again by replaying it with its loop, so it is a
        `ChildRun` with its whole `LoopResult`."""
        from dataclasses import replace

        from forge.machine.fork import RecordedRun, read_recorded
        from forge.result import LoopResult

        if isinstance(source, (str, os.PathLike)):
            source = read_recorded(source, self.codec)
        if isinstance(source, RecordedRun):
            return replace(source, children=self._child_runs(source.children))
        if isinstance(source, LoopResult):
            return source
        raise WrongType(f"fork() takes a LoopResult or a trace file's path, got {type(source).__name__}")

    def _child_runs(self, children: Sequence[Any]) -> tuple[ChildRun, ...]:
        """Recorded child runs as `ChildRun`s: one read from a file (a `RecordedChild`) is
        replayed by the loop its tool runs; one whose tool is not an agent tool of this
        loop, or runs an asynchronous loop, is left out (this loop does not make it)."""
        from forge.result import ChildRun

        made = []
        for child in children:
            if isinstance(child, ChildRun):
                made.append(child)
                continue
            loop = children_of(self).get(child.tool)
            if loop is None or loop.asynchronous:
                continue
            made.append(ChildRun(child.path, child.tool, child.transition, loop._replayed(child.result)))
        return tuple(made)

    def _replayed(self, recorded: RecordedRun) -> LoopResult:
        """`recorded` (a run read from a file, children too) made again by replaying it."""
        from forge.machine.fork import goal_of

        return self._replay_of(recorded.journal, self._child_runs(recorded.children),
                               goal_of(recorded.journal) or "(the journal records no goal)", (), None)

    def _fork_plan(self, source: LoopResult | RecordedRun, at: int | None, patch: Patch | None,
                   goal: str | None) -> ForkPlan:
        """What a fork of `source` at `at` replays (see `forge.machine.fork.fork_plan`).

        Raises:
            PatchRefused, ValueError: as `fork_plan`; the source has no journal.
        """
        from forge.machine.fork import fork_plan

        recorded, records = source.journal, source.trace
        if not len(recorded) and (goal is None or len(records)):
            raise UsageError("the source has no journal to fork from: fork a LoopResult of AgentLoop.run, or a "
                             "trace written with write_trace(result.trace, path, journal=result.journal)")
        before = records[-1].dest if records else self.definition.initial
        state_before = next((s for s in self.definition.states if s.name == before), None)
        return fork_plan(recorded, len(records), at, patch, self._config.tools, goal,
                         getattr(recorded, "run_id", None) or (recorded[0].run_id if len(recorded) else ""),
                         state_before.action if state_before is not None and not state_before.terminal else None)

    def _child_fork(self, source: LoopResult | RecordedRun, child: str, at: int | None,
                    patch: Patch | None) -> ChildFork:
        """The fork of `source`'s child run `child` at `at` with `patch`, checked against the
        child's loop (and so on down, for a grandchild) before anything runs.

        Raises:
            PatchRefused: no such child run, or `at` / `patch` do not fit it.
            AsyncNotSupported: the child's loop is asynchronous (a fork runs synchronously).
        """
        from forge.child import ChildFork
        from forge.machine.fork import PatchRefused, recorded_child

        recorded, within = recorded_child(source, child)
        loop = children_of(self).get(recorded.tool)
        if loop is None and recorded.tool in self.handoffs:
            raise PatchRefused(f"child run {recorded.path!r} is a handoff to {recorded.tool!r}: a fork inside a loop "
                               f"handed to is not offered yet; fork this run at its handing transition "
                               f"{recorded.transition}")
        if loop is None:
            raise PatchRefused(f"child run {recorded.path!r} was made by tool {recorded.tool!r}, which is not one of "
                               f"this loop's agent tools ({', '.join(sorted(children_of(self))) or 'none'})")
        loop._refuse_async()
        if within is None:
            loop._fork_plan(recorded.result, at, patch, None)
        else:
            loop._child_fork(recorded.result, within, at, patch)
        return ChildFork(recorded.path.rsplit("/", 1)[1], recorded.transition, recorded.result, at, patch, within)


    def _chosen_tool(self, intent: Intent) -> str | None:
        """The tool `intent` selects among this loop's tools, or None when it selects none."""
        from forge.machine.stages.select_tool import chosen_tool

        return chosen_tool(intent, self._config.specs)

    def _masking(self, run: Run) -> Masking | None:
        """How a replay of `run` masks a call it made to compare it with one a file written
        with this loop's `redact` keeps (None without `redact`)."""
        redact = self._config.redact
        if redact is None:
            return None
        from forge.machine.redaction import masked_entry

        def masked(entry: JournalEntry, step_calls: Sequence[JournalEntry]) -> JournalEntry:
            return masked_entry(entry, step_calls, redact, run.trace, self._chosen_tool)

        return masked


@functools.lru_cache(maxsize=1)
def _default_observers() -> Observers:
    """The observers of a loop given none: the logging one, shared by every such loop (it
    keeps nothing per loop), so a new loop does not work out again what it wants told."""
    from forge.observe import Observers
    from forge.observe.log import LoggingObserver

    return Observers((LoggingObserver(),))


def _keep_trace(folder: Path, trace: Trace) -> None:
    """Write a finished run's trace to `folder` (what `FORGE_TRACE_DIR` asks, for `forge
    cover`) as RUN_ID.jsonl, or RUN_ID.N.jsonl when a run of that id was kept already (a
    durable run's next turn); RUN_ID is the run id made a safe file name (`trace_file_name`),
    so no run id writes outside `folder`. Never fails the run: a folder it cannot write to
    is logged."""
    import logging

    from forge.machine.trace import write_trace

    try:
        folder.mkdir(parents=True, exist_ok=True)
        name = trace_file_name(trace.run_id)
        path, number = folder / f"{name}.jsonl", 1
        while path.exists():
            number += 1
            path = folder / f"{name}.{number}.jsonl"
        write_trace(trace, path)
    except (OSError, ValueError) as error:
        logging.getLogger("forge").warning("FORGE_TRACE_DIR: cannot keep the trace of run %r: %s", trace.run_id, error)


def trace_file_name(run_id: str) -> str:
    """`run_id` as one file name that stays in its folder: percent-encoded but for letters,
    digits, `_`, `-` and inner dots (so `../x`, `/etc/x`, a NUL byte or a lone surrogate
    cannot escape or fail), and a long id cut, with a hash of the whole kept, to fit 200
    bytes. An id made of those characters only is its own file name."""
    import hashlib
    from urllib.parse import quote

    encoded = quote(run_id.encode("utf-8", "surrogatepass"), safe="-_.")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > 200:
        encoded = f"{encoded[:150]}~{hashlib.sha256(encoded.encode()).hexdigest()[:16]}"
    return encoded


def _inspector(result: LoopResult) -> str:
    """A run's inspector page as a notebook fragment (imported when a notebook asks)."""
    from forge.inspect import html

    return html(result, fragment=True)


def _takes_state(verify: Callable[..., Any]) -> bool:
    """Whether `verify` is called as verify(observation, state) rather than
    verify(observation): decided by the positional parameters a caller must pass (a
    bound method's `self` and parameters with defaults do not count), or `*args`."""
    if type(verify) is types.FunctionType and not verify.__defaults__ and not verify.__code__.co_flags & 0x04:
        return verify.__code__.co_argcount >= 2  # a plain function: no need for inspect.signature
    try:
        parameters = inspect.signature(verify).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: called with the observation
        return False
    required = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return len(required) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _is_async(function: Any) -> bool:
    if type(function) is types.FunctionType:  # an `async def` has the flag; read directly, as loops are built often
        return bool(function.__code__.co_flags & inspect.CO_COROUTINE)
    if inspect.iscoroutinefunction(function):
        return True
    if isinstance(function, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return False  # a plain function that is not `async def`: no __call__ to look into
    return inspect.iscoroutinefunction(type(function).__call__)


def _with_callback(observers: Iterable[LoopObserver],
                   on_transition: Callable[[TransitionRecord], None] | None) -> tuple[LoopObserver, ...]:
    from forge.observe import TransitionCallback

    extra = tuple(observers)
    return extra if on_transition is None else (*extra, TransitionCallback(on_transition))
