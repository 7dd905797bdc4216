"""`AgentLoop`: what users build, configure and run."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.agent.actions import duplicate_names
from forge.agent.idempotency import IdempotencyRegistry
from forge.agent.observations import Observation
from forge.agent.runner import LoopResult
from forge.agent.stopping import StopController
from forge.check import soundness_errors
from forge.machine.definition import DefinitionError, MachineDefinition, Problem
from forge.machine.loader import load_definition
from forge.machine.engine import LoopEngine, engine_for
from forge.machine.run import Run, RunConfig
from forge.machine.trace import TransitionRecord
from forge.policy import Policy
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.debug.session import DebugSession

__all__ = ["AgentLoop"]


class AgentLoop:
    """A single agent's tool loop, run as the state machine of a loop definition.

    `policy(goal, state) -> Intent` chooses what to do next; `verify(observation) -> bool`
    is the external acceptance check, the only way a run ends in `verified_success`.
    `max_steps=8` allows at most eight tool executions; `repeat_limit` stops a run whose
    last tool has been called that many times; `max_attempts` bounds the retries of a
    transient tool error within one step. Each run gets its own idempotency registry, so
    an identical side effect runs once per run; pass `registry` to share one across runs and
    loops, so that a side effect done once stays done. `definition` is a built-in name, a file path or
    a loaded `MachineDefinition` (default: the shipped `single_agent` loop).

    `base_delay`, `max_delay`, `deadline`, `sleep`, `clock` and `random` are passed to
    `run_with_retry` (by default it does not wait between attempts).

    Raises:
        ValueError: no tools, duplicate tool names, a non-Tool in `tools`, a non-callable
            policy or verify, or a limit below 1.
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
        repeat_limit: int = 3,
        max_attempts: int = 3,
        *,
        registry: IdempotencyRegistry | None = None,
        definition: str | Path | MachineDefinition = "single_agent",
        base_delay: float = 0.0,
        max_delay: float = 30.0,
        deadline: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] | None = None,
    ) -> None:
        tools = tuple(tools)
        if not tools:
            raise ValueError("AgentLoop needs at least one tool")
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ValueError(f"tools must be forge.Tool instances, got {tool!r}")
        duplicated = duplicate_names(tool.name for tool in tools)
        if duplicated:
            raise ValueError(f"duplicate tool names: {', '.join(duplicated)}")
        if not callable(policy):
            raise ValueError("policy must be callable as policy(goal, loop_state) -> Intent")
        if not callable(verify):
            raise ValueError("verify must be callable as verify(observation) -> bool")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        retry_options: dict[str, Any] = {
            "base_delay": base_delay, "max_delay": max_delay, "deadline": deadline,
            "sleep": sleep, "clock": clock,
        }
        if random is not None:
            retry_options["random"] = random
        self.tools = tools
        self.max_steps, self.repeat_limit, self.max_attempts = max_steps, repeat_limit, max_attempts
        self.registry = registry
        self.definition = (
            definition if isinstance(definition, MachineDefinition) else load_definition(definition)
        )
        errors = soundness_errors(self.definition)
        if errors:
            raise DefinitionError(
                self.definition.path,
                tuple(Problem(f.entry, f"{f.message} (run `forge check` for the full report)", f.code) for f in errors),
            )
        self.engine: LoopEngine = engine_for(self.definition)
        self._config = RunConfig(
            tools={tool.name: tool for tool in tools},
            specs=tuple(tool.spec for tool in tools),
            policy=policy,
            verify=verify,
            controller=StopController(max_steps=max_steps, repeat_limit=repeat_limit),
            max_attempts=max_attempts,
            retry_options=retry_options,
        )

    def start(self, goal: str) -> Run:
        """A new run of `goal` in the initial state; nothing has fired yet.

        Raises:
            ValueError: `goal` is blank.
        """
        if not isinstance(goal, str) or not goal.strip():
            raise ValueError("goal must be a non-blank string")
        registry = self.registry if self.registry is not None else IdempotencyRegistry()
        return Run(goal=goal, config=self._config, state=self.definition.initial, registry=registry)

    def run(self, goal: str, on_transition: Callable[[TransitionRecord], None] | None = None) -> LoopResult:
        """Run `goal` to a terminal state and return how it ended.

        `on_transition(record)` is called after each fired transition (live progress).
        Never raises for what tools, the policy or `verify` do: those end the run in a
        terminal state with the exception in `result.error` and the trace intact.

        Raises:
            ValueError: `goal` is blank.
        """
        run = self.start(goal)
        engine = self.engine
        while not engine.is_terminal(run):
            record = engine.fire(run)
            if on_transition is not None:
                on_transition(record)
        return self.result(run)

    def debug(self, goal: str) -> DebugSession:
        """A session that steps a new run of `goal` one transition at a time; nothing has run.

        Raises:
            ValueError: `goal` is blank.
        """
        from forge.debug.session import DebugSession

        return DebugSession(self, self.start(goal))

    def result(self, run: Run) -> LoopResult:
        """The `LoopResult` of a finished run. Raises ValueError if it has not finished."""
        if not self.engine.is_terminal(run):
            raise ValueError(f"the run has not finished; it is in state {run.state!r}")
        return LoopResult(
            reason=run.state,
            steps=run.loop_state.step_count,
            state=run.loop_state,
            trace=tuple(run.trace),
            error=run.error,
            outcome=self.definition.state(run.state).outcome,
            retries=run.retries,
            side_effects_run=run.side_effects_run,
            side_effects_replayed=run.side_effects_replayed,
        )
