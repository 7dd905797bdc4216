"""A loop called as another loop's tool: the child run (`AgentLoop.as_tool`).

Why a tool: to the parent a sub-agent is one more thing its policy may call, chosen,
checked, retried, approved and journaled as any tool is; what makes it more is that the
call is a run of its own, with a machine of its own. That child run is a run of the parent:

- its run id is its *path*, `PARENT/TOOL.N` (the N-th child run of that parent), so its
  records say which run they belong to, and a child of a child is `PARENT/A.1/B.1`;
- its step budget is at most what the parent has left (a parent with two steps left gives
  a child of `max_steps=8` two), and so is its token budget (the parent's `token_budget`
  less the tokens its conversation and its earlier children spent); its usage rolls up into
  the parent's (`LoopResult.usage` counts the children's model calls too);
- its result stays with the parent's (`LoopResult.children`, a `ChildRun` each, in the
  order they were called), and the parent's journal holds its answer as the tool call's
  value, so a replay of the parent calls nothing, the child included;
- a child that does not end in success is a `ToolError` of the parent naming the child's
  stop reason (and its error or question): the parent's policy hears of it and replans.

A loop cannot call itself, directly or through others: the call is refused (`LoopCycle`)
before the child runs. Loops are built bottom-up from frozen parts, so a cycle can only be
made by a handler that closes over a loop built later. `children_of` names the loops a
loop's tools run (what `forge.diagram` draws inside it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import asdict, dataclass, is_dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from forge.agent.retry import ToolError
from forge.errors import ForgeError, UsageError
from forge.machine.start import RunStart

if TYPE_CHECKING:
    from forge.machine.run import Run
    from forge.result import ChildRun, LoopResult
    from forge.tools import Tool

__all__ = ["CALLING", "GOAL_SCHEMA", "MAX_DEPTH", "ChildFork", "LoopCycle", "RemoteAgent", "calling", "children_of",
           "finished_children", "as_json", "goal_of", "hand_off", "has_side_effects", "loop_at", "loop_tool", "planned",
           "remote_agents_of", "why_not", "RAN"]

GOAL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"goal": {"type": "string", "description": "what the agent is to do"}},
    "required": ["goal"],
    "additionalProperties": False,
}
"""A child's arguments without `input=`: the goal it is given, in words."""

CALLING: ContextVar[tuple[Run, ...]] = ContextVar("forge_calling_runs", default=())
"""The runs under way in this context, outermost first: the last is the one whose tool is
being called. Set by `AgentLoop.run` and `arun` around a run (`calling`); a worker thread or
task of a run copies it, so a child called from parallel calls knows its parent."""

_NUMBERING = threading.Lock()


class LoopCycle(ForgeError, RecursionError):
    """A loop's tool would run a loop that is already running below it, or child runs would
    nest deeper than `MAX_DEPTH`: it would never end."""


MAX_DEPTH = 32
"""How deep child runs may nest, checked apart from the cycle check (a loop whose `runs`
fails to see itself would otherwise recurse until memory runs out)."""


class calling:
    """`with calling(run):` marks `run` as under way in this context (see `CALLING`)."""

    __slots__ = ("_run", "_token")

    def __init__(self, run: Run) -> None:
        self._run = run

    def __enter__(self) -> None:
        self._token = CALLING.set((*CALLING.get(), self._run))

    def __exit__(self, *_: object) -> None:
        CALLING.reset(self._token)


def loop_tool(loop: Any, name: str, description: str = "", input: Any = None,
              side_effect: bool | None = None) -> Tool:
    """The Tool that runs `loop` (an `AgentLoop`: this module sits below it) as a child run
    (see the module); `AgentLoop.as_tool`.

    Without `input`, the tool takes `{"goal": "..."}`; with it (a pydantic model, a dataclass
    or a JSON Schema, as `output=` takes), the arguments are checked against that shape and
    the child's goal is their JSON (sorted keys). `side_effect` defaults to whether the
    child has a side-effect tool, so the parent's approvals, idempotency keys and
    `forge check` treat the call as what it may do. The tool's value is the child's answer
    (a typed answer as JSON: a pydantic model dumped, a dataclass as a dict).

    Raises:
        ValueError: a blank name, or an `input` that is no shape (as `output=`).
    """
    from forge.tools import Tool

    schema = GOAL_SCHEMA if input is None else _input_schema(input)
    if side_effect is None:
        side_effect = has_side_effects(loop)
    text = description or f"run the agent {name!r} ({loop.definition.title or loop.definition.name}) on a goal"

    if loop.asynchronous:
        async def run_child(**arguments: Any) -> Any:
            child = _child(loop, name)
            told = _told_started(child.called)
            result = await loop.arun(replace(child.start, goal=goal_of(schema, arguments)))
            _told_finished(told, child.called, result)
            return _answer(name, result, child.called)
        handler: Any = run_child
    else:
        def run_child_sync(**arguments: Any) -> Any:
            return _made_child(loop, name, goal_of(schema, arguments))
        handler = run_child_sync
    made = Tool(name, {name}, handler, side_effect=side_effect, description=text, schema=schema)
    object.__setattr__(made, "child", loop)
    return made


def hand_off(loop: Any, name: str, goal: str, state: Any) -> Any:
    """Run `loop`, the handoff `name` of the run under way, as its child run going on from
    `state` (the run's conversation), and return its answer (`forge.Handoff`).

    Raises:
        ToolError: it did not end in success (its reason, and its error or question).
        LoopCycle: `loop` is running below this call already.
    """
    return _made_child(loop, name, goal, state)


def _made_child(loop: Any, name: str, goal: str, state: Any = None) -> Any:
    """The answer of the child run of `loop` that tool (or handoff) `name` makes now, going
    on from `state` when given: run, or, when the run under way says so, taken from a run
    that already ran (a debugger's `step_into`) or made as a fork of its recorded run.

    Raises:
        ToolError, LoopCycle: as `_answer` and `_child`.
    """
    child = _child(loop, name)
    start = replace(child.start, goal=goal, state=state)
    told = _told_started(child.called)
    if child.ran is not None:
        result = child.ran
    elif child.fork is not None:
        result = _forked(loop, child.fork, start)
    else:
        result = loop.run(start)
    _told_finished(told, child.called, result)
    return _answer(name, result, child.called)


def _told_started(called: _Called) -> Any:
    """Tell a stream that listens (`forge.events.sink`) of the child run beginning; the
    listener, or None (no stream, or no parent run)."""
    from forge.events import ChildRunStarted, sink

    listener = sink() if called.parent is not None else None
    if listener is not None:
        listener(ChildRunStarted(called.path, called.tool))
    return listener


def _told_finished(listener: Any, called: _Called, result: LoopResult) -> None:
    if listener is not None:
        from forge.events import ChildRunFinished

        listener(ChildRunFinished(called.path, str(result.reason), result.outcome))


def has_side_effects(loop: Any) -> bool:
    """Whether a run of `loop` may make a side effect: a tool of its own has one (an agent
    tool has one when its loop may), or a loop it may hand off to may."""
    return any(tool.side_effect for tool in loop.tools) or any(has_side_effects(other)
                                                               for other in loop.handoffs.values())


def children_of(loop: Any) -> dict[str, Any]:
    """The loops `loop`'s tools run as children, by tool name (its own tools only)."""
    return {tool.name: tool.child for tool in loop.tools if tool.child is not None}


@dataclass(frozen=True, slots=True)
class RemoteAgent:
    """An agent in another process that a tool sends its goal to (an A2A agent:
    `forge.protocols.a2a.a2a_tool`), as its handler says it (`handler.remote`): drawn beside
    the loop as a child run is (`forge.diagram`), though its machine is not forge's to draw."""

    name: str
    url: str
    protocol: str = "A2A"


def remote_agents_of(loop: Any) -> dict[str, RemoteAgent]:
    """The agents in other processes `loop`'s tools call, by tool name (its own tools only)."""
    return {tool.name: remote for tool in loop.tools
            if isinstance(remote := getattr(tool.handler, "remote", None), RemoteAgent)}


@dataclass(frozen=True, slots=True)
class ChildFork:
    """A fork inside a child run (`AgentLoop.fork(..., child=...)`): the parent's fork
    replays up to `transition`, where its tool makes the child run `name` (`research.1`)
    again as a fork of `recorded` (its recorded run) at `at` with `patch`, or, when
    `within` names a grandchild, a fork of the child that forks that one."""

    name: str
    transition: int
    recorded: Any
    at: int | None
    patch: Any
    within: str | None


def _forked(loop: Any, fork: ChildFork, start: RunStart) -> LoopResult:
    """The child run, started as `start` says, made again as a fork of its recorded run
    (see `ChildFork`); a journal miss inside it stops the parent's fork as one of the
    parent's own would."""
    from forge.machine.performers import ReplayStopped
    from forge.records.journal import JournalMiss

    try:
        return loop.fork(fork.recorded, fork.at, fork.patch, goal=start, child=fork.within)  # type: ignore[no-any-return]
    except JournalMiss as miss:
        raise ReplayStopped(miss) from None


def loop_at(loop: Any, path: str) -> Any:
    """The loop that makes the child run at `path` below a run of `loop`: `path` is the
    child's path after that run's id, each run on the way down a `TOOL.N` (`research.2`,
    `research.2/notes.1`).

    Raises:
        ValueError: (a UsageError) a tool on the way does not run a loop.
    """
    for part in path.split("/"):
        tool = part.rpartition(".")[0] or part
        found = children_of(loop).get(tool)
        if found is None:
            raise UsageError(f"no child run {path!r} below a run of {loop.definition.name!r}: it has no agent tool "
                             f"{tool!r} (its agent tools: {', '.join(sorted(children_of(loop))) or 'none'})")
        loop = found
    return loop


@dataclass(slots=True)
class _Called:
    """Where a child run hangs in its parent: filled in once the child has ended."""

    parent: Run | None
    path: str
    tool: str
    transition: int


@dataclass(frozen=True, slots=True)
class _Child:
    """A child run about to be made: where it hangs in its parent (`called`), how it
    starts (`start`, its goal still to be filled in), and, when the run under way says so,
    the run it is taken from (`ran`, a debugger's `step_into`) or the fork of its recorded
    run it is made as (`fork`)."""

    called: _Called
    start: RunStart
    ran: LoopResult | None = None
    fork: ChildFork | None = None


def _child(loop: Any, name: str) -> _Child:
    """The child run tool `name` makes of `loop` now: its place under the run under way
    (none when the tool is called outside a run) and its start, its path as run id and
    what the parent has left as its budgets (`planned`).

    Raises:
        LoopCycle: `loop` is running below this call already.
    """
    lineage = CALLING.get()
    if len(lineage) >= MAX_DEPTH:
        path = " → ".join(r.trace.run_id for r in lineage)
        raise LoopCycle(f"tool {name!r} would start a child run {len(lineage)} levels deep ({path}): child runs nest "
                        f"at most {MAX_DEPTH} deep (forge.machine.child.MAX_DEPTH), whatever the loops")
    for run in lineage:
        if loop.runs(run):
            path = " → ".join(r.trace.run_id for r in lineage)
            raise LoopCycle(f"tool {name!r} would run loop {loop.definition.name!r} inside itself ({path}): "
                            "a loop cannot call itself, directly or through another")
    if not lineage:
        return _Child(_Called(None, "", name, 0), RunStart(None))
    parent = lineage[-1]
    if parent.performer is not None:
        parent.performer.replayed_children(len(parent.trace) + 1)
    with _NUMBERING:
        start = planned(parent, loop, name)
        path = start.run_id or ""
        called = _Called(parent, path, name, len(parent.trace) + 1)
        parent.journal.children.append(called)
    performer: Any = parent.performer
    fork = getattr(performer, "child_fork", None)
    ran = RAN.get().get(path)
    if ran is not None:
        return _Child(called, start, ran=ran)
    if fork is not None and fork.name == path.rsplit("/", 1)[1]:
        performer.child_fork = None
        return _Child(called, start, fork=fork)
    if performer is not None and (made := performer.child_performer(path)) is not None:
        return _Child(called, replace(start, performer=made))
    return _Child(called, start)


def planned(parent: Run, loop: Any, name: str) -> RunStart:
    """How the next child run of tool `name` under `parent` starts, its goal not yet filled
    in: its path as run id (`PARENT/TOOL.N`), and as its `max_steps` and `token_budget`
    what the parent has left."""
    number = 1 + sum(1 for child in parent.journal.children if child.tool == name)
    path = f"{parent.trace.run_id}/{name}.{number}"
    used = parent.loop_state.step_count - parent.counts.steps_before
    left = max(1, parent.config.controller.max_steps - used)  # the step under way is not counted yet
    token_budget = None
    budget = parent.config.token_budget
    if budget is not None and loop.stops_at_token_budget:
        from forge.records.usage import usage_of, with_children

        spent = with_children(usage_of(parent.loop_state.messages), finished_children(parent)).total_tokens
        token_budget = max(1, budget - spent)
    return RunStart(None, run_id=path, max_steps=min(left, loop.max_steps), token_budget=token_budget)


RAN: ContextVar[Mapping[str, LoopResult]] = ContextVar("forge_children_ran", default=MappingProxyType({}))
"""Child runs that already ran, by path (a debugger's `step_into`, stepped to their end): the
tool that would make one takes its result instead of running it again."""


def _answer(name: str, result: LoopResult, called: _Called) -> Any:
    """The child's answer as the tool's value; its place under the parent filled in.

    Raises:
        ToolError: the child did not end in success (its reason, and its error or question).
    """
    from forge.result import ChildRun

    if called.parent is not None:
        children = called.parent.journal.children
        with _NUMBERING:
            children[children.index(called)] = ChildRun(called.path, called.tool, called.transition, result)
    if result.outcome != "success":
        why = why_not(result)
        raise ToolError(f"agent {name!r} ended in {result.reason}" + (f": {why}" if why else ""))
    return as_json(result.answer)


def why_not(result: LoopResult) -> str:
    """Why a run did not end in success, in its own words: the question it waits on, or
    the error that ended it as `Type: message`; empty when it has neither (a budget ran out)."""
    from forge.records.trace import error_text

    return result.question or (error_text(result.error) if result.error else "")


def goal_of(schema: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> str:
    """A child's goal from its tool's arguments: the `goal` given, or, for a tool with
    `input=` (any other schema), the arguments' JSON with sorted keys."""
    if schema is GOAL_SCHEMA:
        return str(arguments["goal"])
    return json.dumps(dict(arguments), sort_keys=True, default=str)


def as_json(answer: Any) -> Any:
    """A typed answer as JSON data: a pydantic model dumped, a dataclass as a dict; any
    other answer as it is."""
    dump = getattr(answer, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if is_dataclass(answer) and not isinstance(answer, type):
        return asdict(answer)
    return answer


def _input_schema(shape: Any) -> Mapping[str, Any]:
    from forge.output import Output

    schema = Output.of(shape).schema
    if schema.get("type") != "object":
        raise UsageError(f"as_tool input must be an object's shape (a model, a dataclass or an object's JSON Schema), "
                         f"got one of type {schema.get('type')!r}")
    return schema


def finished_children(run: Run) -> tuple[ChildRun, ...]:
    """The run's child runs that ended, in the order they were called."""
    from forge.result import ChildRun

    return tuple(child for child in run.journal.children if isinstance(child, ChildRun))

