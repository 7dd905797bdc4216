"""`LoopSpec`: a loop as one value — what the user gave, checked once, and everything a run
reads from it.

`AgentLoop` is a face over a `LoopSpec`: it builds one (`LoopSpec.of`, where every check
of a loop's arguments is made, so a bad loop is refused before anything runs) and runs
it. Everything else that needs a loop's parts — a stream's relay, a durable workflow, a
cassette, a replay or a fork (`forge.running.replaying`), a run's driver (`forge.running`) —
reads them here, through public names: no module reads a private attribute of `AgentLoop`.
"""

from __future__ import annotations

import functools
import inspect  # already loaded by dataclasses: importing it here costs nothing
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.agent.retry import check_count
from forge.errors import UsageError
from forge.options import Grouped

if TYPE_CHECKING:
    from forge.agent.idempotency import IdempotencyRegistry
    from forge.guardrails import Guard
    from forge.machine.catalog import Stage, StageCatalog
    from forge.machine.engine import LoopEngine, TransitionCallbacks
    from forge.machine.run import RunConfig
    from forge.machine.stages import Selection
    from forge.observe import Observers
    from forge.output import Output
    from forge.policy import Policy
    from forge.records.definition import MachineDefinition
    from forge.tools import Tool

__all__ = ["GIVEN", "LoopSpec"]

GIVEN = ("policy", "verify", "max_steps", "definition", "stages", "approver", "registry", "output", "handoffs")
"""The arguments of a loop a `LoopSpec` keeps as given (beside its tools and options), by
name: what `AgentLoop.replace` may change."""


@dataclass(frozen=True, slots=True, eq=False)
class LoopSpec:
    """A loop, checked: `given` is what the user passed (the policy before a `with_tools`
    hook saw the tools; see `GIVEN`), `options` its four grouped values; the rest is made
    from them once: the tools, the stage catalog and callbacks, the loaded and proven
    `definition` and its `engine`, the observers every run gets first, the `config` each
    run reads (`forge.machine.run.RunConfig`), what in it is `async def`
    (`async_parts`, as words) and the handoffs the definition allows that no loop was
    given for (`unhanded`)."""

    given: Mapping[str, Any]
    options: Grouped
    tools: tuple[Tool, ...]
    stages: StageCatalog
    callbacks: TransitionCallbacks
    definition: MachineDefinition
    engine: LoopEngine
    observers: Observers
    config: RunConfig
    async_parts: tuple[str, ...]
    unhanded: tuple[str, ...]

    @classmethod
    def of(cls, tools: Iterable[Tool], policy: Policy, verify: Callable[..., bool], max_steps: int = 8, *,
           definition: str | Path | MachineDefinition = "single_agent",
           stages: Mapping[str, Stage] | StageCatalog | None = None, approver: Callable[..., Any] | None = None,
           registry: IdempotencyRegistry | None = None, options: Grouped | None = None, output: Any = None,
           handoffs: Mapping[str, Any] | None = None) -> LoopSpec:
        """The spec of a loop of these arguments (see `AgentLoop`), checked.

        Raises:
            ValueError, TypeError, FileNotFoundError, DefinitionError: as `AgentLoop(...)`.
        """
        from forge.machine.engine import engine_for
        from forge.machine.loader import catalog_of, load_definition
        from forge.records.definition import MachineDefinition

        options = options if options is not None else Grouped()
        given = types.MappingProxyType({"policy": policy, "verify": verify, "max_steps": max_steps,
                                        "definition": definition, "stages": stages, "approver": approver,
                                        "registry": registry, "output": output, "handoffs": handoffs})
        tools = _checked_tools(tools)
        policy, shape = _prepared_policy(policy, tools, output, options)
        if not callable(verify):
            raise UsageError("verify must be callable as verify(observation) -> bool")
        if approver is not None and not callable(approver):
            raise UsageError("approver must be callable as approver(request) -> True | False | None")
        check_count("max_steps", max_steps)
        catalog = catalog_of(stages)
        callbacks = _checked_callbacks(options)
        loaded = definition if isinstance(definition, MachineDefinition) else load_definition(definition, catalog)
        handed, unhanded = _checked_handoffs(loaded, handoffs)
        _prove(loaded, catalog, tools, handed)
        _check_edges(loaded, catalog, options, shape, approver)
        checked_guards = _checked_guards(options.hooks.guards, loaded, tools)
        config = _run_config(tools, policy, verify, {
            "approver": approver, "output": shape, "guards": checked_guards,
            **_option_parts(options, max_steps), **_definition_parts(loaded, catalog, handed)})
        parts = (*((f"tool {t.name!r}", t.handler) for t in tools),
                 ("the policy", policy), ("verify", verify), ("the approver", approver),
                 *((f"guard {guard.name!r}", guard.check) for guard in checked_guards),
                 *((f"stage {name!r}", getattr(spec.run, "user_action", None)) for name, spec in catalog.actions.items()))
        return cls(given, options, tools, catalog, callbacks, loaded, engine_for(loaded, catalog, callbacks),
                   _observers_of(options), config,
                   tuple(what for what, function in parts if function is not None and is_async(function)),
                   unhanded)

    def replaced(self, tools: Iterable[Tool] | None = None, options: Grouped | None = None,
                 **given: Any) -> LoopSpec:
        """This spec made again with `tools`, `options` and the `GIVEN` arguments in `given`
        changed (and checked again, as `of`)."""
        return LoopSpec.of(self.tools if tools is None else tools, options=options or self.options,
                           **{**self.given, **given})

    def handles(self, verdict: Selection) -> bool:
        """Whether the definition has a transition for this verdict of select_tool."""
        return _handles(self.definition, self.stages, verdict)

    def lowered(self, max_steps: int | None, token_budget: int | None) -> RunConfig:
        """The run configuration with a step or token budget lowered below the loop's (a
        child's, its parent's budget left; a larger one is the loop's).

        Raises:
            ValueError: a budget below 1, or a token budget for a definition with no
                budget_exhausted edge.
        """
        from forge.machine.stages import Selection

        config = self.config
        if max_steps is not None:
            check_count("max_steps", max_steps)
            if max_steps < config.controller.max_steps:
                from forge.agent.stopping import StopController

                config = replace(config, controller=StopController(max_steps, config.controller.repeat_limit))
        if token_budget is not None:
            check_count("token_budget", token_budget)
            if config.token_budget is None or token_budget < config.token_budget:
                if not self.handles(Selection.BUDGET_EXHAUSTED):
                    raise UsageError(f"definition {self.definition.name!r} cannot stop a run at a token budget: it has "
                                     "no transition guarded by token_budget_exhausted")
                with_budget = getattr(config.policy, "with_token_budget", None)
                policy = with_budget(token_budget) if callable(with_budget) else config.policy
                config = replace(config, token_budget=token_budget, policy=policy)
        return config


def _checked_tools(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    from forge.agent.actions import duplicate_names
    from forge.tools import Tool

    tools = tuple(tools)
    if not tools:
        raise UsageError("AgentLoop needs at least one tool")
    for tool in tools:
        if not isinstance(tool, Tool):
            raise UsageError(f"tools must be forge.Tool instances, got {tool!r}")
    duplicated = duplicate_names(tool.name for tool in tools)
    if duplicated:
        raise UsageError(f"duplicate tool names: {', '.join(duplicated)}")
    return tools


def _prepared_policy(policy: Policy, tools: tuple[Tool, ...], output: Any,
                     options: Grouped) -> tuple[Policy, Output | None]:
    """The policy a run calls, told what it may need to know (a policy that asks a model,
    `ChatPolicy`: the tools to offer, the answer's shape, the token budget), and the
    answer's shape."""
    if not callable(policy):
        raise UsageError("policy must be callable as policy(goal, loop_state) -> Intent | Finish")
    with_tools = getattr(policy, "with_tools", None)
    if callable(with_tools):
        policy = with_tools(tools)
    shape = None
    if output is not None:
        from forge.output import Output

        shape = Output.of(output)
        with_output = getattr(policy, "with_output", None)
        if callable(with_output):
            policy = with_output(shape)
    budget = options.limits.token_budget
    if budget is not None:
        with_budget = getattr(policy, "with_token_budget", None)
        if callable(with_budget):  # stops before a model call that would exceed it
            policy = with_budget(budget)
    return policy, shape


def _checked_callbacks(options: Grouped) -> TransitionCallbacks:
    from forge.machine.engine import NO_CALLBACKS, TransitionCallbacks

    given = options.hooks.callbacks
    callbacks = given if given is not None else NO_CALLBACKS
    if not isinstance(callbacks, TransitionCallbacks):
        raise UsageError(f"callbacks must be a forge TransitionCallbacks, got {type(given).__name__}")
    return callbacks


def _checked_handoffs(definition: MachineDefinition,
                      handoffs: Mapping[str, Any] | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The loops a policy may hand off to, checked against the definition's `[handoffs]
    to` (the same names, each a loop: a thing with a `LoopSpec`), and the names it allows
    that have no loop yet.

    Raises:
        ValueError: (a UsageError) a name the definition does not list, or a value that is
            not an AgentLoop.
    """
    given = dict(handoffs or {})
    allowed = definition.handoffs
    for name, loop in given.items():
        if not isinstance(getattr(loop, "spec", None), LoopSpec):
            raise UsageError(f"handoffs[{name!r}] must be an AgentLoop, got {type(loop).__name__}")
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        listed = f"it lists {', '.join(map(repr, allowed))}" if allowed else "it lists none"
        raise UsageError(f"definition {definition.name!r} allows no handoff to {', '.join(map(repr, unknown))} "
                         f"({listed}): add the names to its [handoffs] to = [...]")
    return given, tuple(name for name in allowed if name not in given)


def _prove(definition: MachineDefinition, stages: StageCatalog, tools: tuple[Tool, ...],
           handed: Mapping[str, Any]) -> None:
    """Refuse a definition `forge check` would find an error in, or one that breaks a
    property it `requires`.

    Raises:
        DefinitionError: each problem, with a counterexample path for a property.
    """
    from forge.check import Finding, Severity, soundness_errors
    from forge.machine.child import has_side_effects
    from forge.records.definition import DefinitionError, Problem

    errors = soundness_errors(definition, stages)
    if definition.requires:
        from forge.check.properties import violations

        side_effects = any(tool.side_effect for tool in tools) or any(has_side_effects(loop) for loop in handed.values())
        errors = (*errors, *(Finding(Severity.ERROR, "property", definition.path, v.entry,
                                     f"{v.property}: {v.message}; counterexample: "
                                     + " → ".join(f"{t.source} -{t.trigger}-> {t.dest}" for t in v.path))
                             for v in violations(definition, definition.requires, stages, side_effects)))
    if errors:
        raise DefinitionError(
            definition.path,
            tuple(Problem(f.entry, f"{f.message} (run `forge check` for the full report)", f.code) for f in errors),
        )


def _check_edges(definition: MachineDefinition, stages: StageCatalog, options: Grouped, shape: Output | None,
                 approver: Callable[..., Any] | None) -> None:
    """Refuse a loop whose definition has no edge for what it was given: a token budget, an
    answer's shape, an approver (and one that asks for approvals with no approver)."""
    from forge.machine.stages import Selection

    for budget in ("token_budget", "cost_budget", "time_budget"):
        if getattr(options.limits, budget) is not None and not _handles(definition, stages, Selection.BUDGET_EXHAUSTED):
            raise UsageError(f"definition {definition.name!r} has no budget_exhausted edge, so it cannot stop a run "
                             f"at its {budget}: add a transition from the policy's state guarded by "
                             "token_budget_exhausted (as machines/single_agent.toml has)")
    if shape is not None and not _handles(definition, stages, Selection.ANSWER_INVALID):
        raise UsageError(f"definition {definition.name!r} has no answer_invalid edge, so it cannot replan after "
                         "an answer that is not a valid output: add a transition from the policy's state guarded "
                         "by answer_invalid (as machines/single_agent.toml has)")
    asks_approval = any(s.action == "request_approval" for s in definition.states)
    if approver is None and asks_approval:
        raise UsageError(f"definition {definition.name!r} asks for approvals (request_approval): "
                         "pass AgentLoop(..., approver=...)")
    if approver is not None and not asks_approval:
        raise UsageError(f"AgentLoop got an approver, but definition {definition.name!r} never asks for "
                         "approvals (it has no request_approval state), so no call would wait for it: pass "
                         "definition=\"approval\" (machines/approval.toml) or a definition of your own with a "
                         "request_approval state before its side effects")


def _checked_guards(guards: Any, definition: MachineDefinition,
                   tools: tuple[Tool, ...]) -> tuple[Guard, ...]:
    """The loop's guards, checked: each a `Guard`, names distinct, tools the loop has, and a
    definition with a state that checks them (`check_call`, and `check_result` for a guard
    of results).

    Raises:
        UsageError: any of those is not so, naming it.
    """
    from forge.guardrails import Guard

    if isinstance(guards, Guard) or not isinstance(guards, Iterable) or isinstance(guards, str | bytes):
        raise UsageError(f"Hooks(guards=...) is a list of Guard, got {guards!r:.100}")
    given = tuple(guards)
    odd = [guard for guard in given if not isinstance(guard, Guard)]
    if odd:
        raise UsageError(f"guards are forge.Guard values, got {odd[0]!r:.100}")
    names = [guard.name for guard in given]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"two guards are named {twice[0]!r}: a guard's name says which one tripped, so each is its own")
    known = {tool.name for tool in tools}
    for guard in given:
        unknown = sorted((guard.tools or frozenset()) - known)
        if unknown:
            raise UsageError(f"guard {guard.name!r} covers {', '.join(unknown)}, which the loop has no tool called "
                             f"(its tools: {', '.join(sorted(known))})")
    actions = {state.action for state in definition.states}
    for action, on, what in (("check_call", ("arguments", "answer"), "call or answer"),
                             ("check_result", ("result",), "result"), ("check_input", ("input",), "run's input")):
        unchecked = [guard.name for guard in given if guard.on in on]
        if unchecked and action not in actions:
            raise UsageError(f"guard {unchecked[0]!r} checks a {what}, but definition {definition.name!r} has no "
                             f"{action} state to check it in, so it would "
                             "never run: pass definition=\"guarded\" (or \"guarded_approval\", with an approver), or a "
                             f"definition of your own with a {action} state")
    return given


def _run_config(tools: tuple[Tool, ...], policy: Policy, verify: Callable[..., bool],
                parts: Mapping[str, Any]) -> RunConfig:
    """The configuration each run reads, from the loop's checked tools, policy and verify,
    and `parts`: its approver and output shape, `_option_parts` and `_definition_parts`."""
    from forge.machine.run import RunConfig

    return RunConfig(
        tools={tool.name: tool for tool in tools},
        specs=tuple(tool.spec for tool in tools),
        policy=policy,
        verify=verify,
        verify_takes_state=takes_state(verify),
        asynchronous=frozenset(tool.name for tool in tools if is_async(tool.handler)),
        **parts,
    )


def _option_parts(options: Grouped, max_steps: int) -> dict[str, Any]:
    """What a run's configuration takes from the loop's grouped options (and its step budget)."""
    from forge.agent.stopping import StopController

    limits, retry, clocks = options.limits, options.retry, options.clocks
    retry_options: dict[str, Any] = {"base_delay": retry.base_delay, "max_delay": retry.max_delay,
                                     "deadline": retry.deadline}
    if clocks.random is not None:
        retry_options["random"] = clocks.random
    return {"controller": StopController(max_steps=max_steps, repeat_limit=limits.repeat_limit),
            "max_attempts": retry.max_attempts, "retry_options": retry_options, "sleep": clocks.sleep,
            "async_sleep": clocks.async_sleep, "clock": clocks.clock, "repeat_by": limits.repeat_by,
            "redact": options.hooks.redact, "token_budget": limits.token_budget, "cost_budget": limits.cost_budget,
            "prices": limits.prices, "time_budget": limits.time_budget, "max_parallel": limits.max_parallel}


def _definition_parts(definition: MachineDefinition, stages: StageCatalog, handed: Mapping[str, Any]) -> dict[str, Any]:
    """What a run's configuration takes from the loop's definition, its stages and the
    loops it hands off to."""
    from forge.machine.stages import Selection

    return {"machine": definition.name,
            "waiting_states": frozenset(state.name for state in definition.states if state.outcome == "needs_input"),
            "handoffs": types.MappingProxyType(handed), "can_ask": _handles(definition, stages, Selection.ASKED),
            "can_batch": _handles(definition, stages, Selection.BATCHED),
            "timeouts": {s.name: s.timeout for s in definition.states if s.timeout is not None and not s.terminal}}


def _observers_of(options: Grouped) -> Observers:
    from forge.observe import Observers
    from forge.observe.log import LoggingObserver

    extra = options.hooks.observers
    return Observers((LoggingObserver(), *extra)) if extra else _default_observers()


@functools.cache
def _default_observers() -> Observers:
    """The observers of a loop given none: the logging one, shared by every such loop (it
    keeps nothing per loop), so a new loop does not work out again what it wants told."""
    from forge.observe import Observers
    from forge.observe.log import LoggingObserver

    return Observers((LoggingObserver(),))


def _handles(definition: MachineDefinition, stages: StageCatalog, verdict: Selection) -> bool:
    guards = stages.guards
    return any(t.guard is not None and guards[t.guard].action == "select_tool" and guards[t.guard].verdict == verdict
               for t in definition.transitions)


def takes_state(verify: Callable[..., Any]) -> bool:
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


def is_async(function: Any) -> bool:
    """Whether calling `function` makes a coroutine: an `async def` function or method, or
    an object whose `__call__` is one."""
    if type(function) is types.FunctionType:  # an `async def` has the flag; read directly, as loops are built often
        return bool(function.__code__.co_flags & inspect.CO_COROUTINE)
    if inspect.iscoroutinefunction(function):
        return True
    if isinstance(function, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return False  # a plain function that is not `async def`: no __call__ to look into
    return inspect.iscoroutinefunction(type(function).__call__)
