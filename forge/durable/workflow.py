"""The durable run itself: one DBOS workflow per run, `forge_run(loop_name, goal)`.

The workflow runs the loop's machine turn by turn. A turn is an ordinary `AgentLoop.run`
whose performer keeps the turn's journal in the runs' database (`forge.durable.performer`):
a recovered workflow replays it and goes on live where it ends. The only DBOS operations
of a run are its events (what it publishes), its waits for answers and the deadline of a
wait that has one. A turn that ends in a needs-input state (any terminal state with
`outcome = "needs_input"`, the built-in ones and a definition's own) publishes what it needs
and waits durably (`DBOS.recv`) for an `Answer`; the answer shapes the next turn, which
goes on from the same observations (a conversation's next turn). A tool that was running
at a crash and says `on_crash="ask"` waits the same way, in `in_doubt`, inside its turn.

What the workflow publishes, as the DBOS event `run` (read by any process): `status`
(running / waiting / finished), the turns' traces as v2 JSON, and when waiting, what for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from dbos import DBOS

from forge.agent.actions import AmbiguousToolChoice, NoMatchingTool, UnknownTool
from forge.durable.answers import Answer, AnswerRefused, Waiting
from forge.durable.database import RunsDatabase
from forge.durable.idempotency import StoredRegistry
from forge.durable.live import LiveTurns
from forge.durable.performer import DurablePerformer, ProcessStopping, StoredTurn
from forge.machine.journal import ForkOrigin
from forge.machine.stages import NotFingerprintable, request_fingerprint
from forge.machine.trace import error_text
from forge.observe import LoopObserver, RunView
from forge.policy import Intent
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.agent.observations import LoopState
    from forge.loop import AgentLoop
    from forge.machine.journal import Journal
    from forge.machine.run import Run
    from forge.result import LoopResult

__all__ = ["ANSWER_TOPIC", "EVENT", "HOST", "LOOPS", "QUEUE_NAME", "STATE_EVENT", "STOPPING", "WAITING_HERE",
           "WORKFLOW_NAME", "ASYNC_WORKFLOW_NAME", "Host", "HostedLoop", "Plan", "ProcessStopping", "forge_arun",
           "forge_run"]

WORKFLOW_NAME = "forge_run"
ASYNC_WORKFLOW_NAME = "forge_arun"
QUEUE_NAME = "forge"
EVENT = "run"
STATE_EVENT = "state"
"""The DBOS event holding the run's `LoopState` as its last turn left it (pickled)."""
ANSWER_TOPIC = "forge_answer"
class HostedLoop(Protocol):
    """What the workflow uses of a `forge.durable.DurableLoop` (a protocol, so the
    workflow sits below the loop that registers itself here)."""

    @property
    def name(self) -> str: ...

    @property
    def loop(self) -> AgentLoop: ...

    @property
    def extra_tools(self) -> Mapping[str, Tool]: ...

    @property
    def database(self) -> RunsDatabase: ...

    def loop_for(self, extra_tools: tuple[str, ...]) -> AgentLoop: ...


@dataclass(eq=False)
class Host:
    """What this process hosts of durable runs, the one process-wide value forge keeps for
    them (DBOS itself is one per process): the loops it can run by name (a recovered or
    dequeued run names its loop: what DBOS's registration of `forge_run` needs), what
    `launch` opened (the runs database's URL and forge's tables in it, and forge's queue),
    whether `shutdown()` is under way (a run waiting here then leaves its thread, staying
    stored), the runs waiting here for an answer, each with an event set once its wait
    ends, and the turns running here (whose transitions are stored while a page follows
    them)."""

    loops: dict[str, HostedLoop] = field(default_factory=dict)
    url: str | None = None
    database: RunsDatabase | None = None
    queue: Any = None
    stopping: threading.Event = field(default_factory=threading.Event)
    waiting: dict[str, threading.Event] = field(default_factory=dict)
    turns: LiveTurns = field(default_factory=LiveTurns)


_log = logging.getLogger("forge.durable")

HOST = Host()
LOOPS, STOPPING, WAITING_HERE = HOST.loops, HOST.stopping, HOST.waiting  # the names earlier releases exported



@dataclass(frozen=True, slots=True)
class Plan:
    """What the answers so far change in the next turn: an intent to start with, tools
    added, approvals given (fingerprint → approved), and the user's last reply to the
    policy's question, the goal of the turns after it."""

    pinned: Intent | None = None
    extra_tools: tuple[str, ...] = ()
    approvals: Mapping[str, bool] = field(default_factory=dict)
    goal: str | None = None
    timed_out: str | None = None
    """The waiting state whose deadline passed: the next turn starts by its timeout edge."""
    note: Mapping[str, Any] | None = None
    """What the next turn's first decision's record says of it (an edited approval)."""


class _Turn(LoopObserver):
    """Keeps the turn's run: its intent is what a waiting run asks about."""

    def __init__(self) -> None:
        self.run: RunView | None = None

    def run_started(self, run: RunView) -> None:
        self.run = run


@DBOS.workflow(name=WORKFLOW_NAME)
def forge_run(loop_name: str, goal: str, forked_from: Mapping[str, Any] | None = None,
              conversation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A durable run of `goal` on the loop registered as `loop_name` in this process;
    `forked_from` (`forge.durable.forks`) when it is a fork of a stored run; `conversation`
    when it is the next turn of one: the `state` it goes on from and the run it `continues`."""
    durable = LOOPS.get(loop_name)
    if durable is None:
        ended = _unknown_loop(loop_name, goal)
        DBOS.set_event(EVENT, ended)
        return ended
    return _Workflow(durable, goal, forked_from, conversation).run()


@DBOS.workflow(name=ASYNC_WORKFLOW_NAME)
async def forge_arun(loop_name: str, goal: str, forked_from: Mapping[str, Any] | None = None,
                     conversation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`forge_run` on DBOS's async API: each turn is `await loop.arun(...)`, so tools, the
    policy and verify may be `async def`, and the run's waits do not hold a thread."""
    durable = LOOPS.get(loop_name)
    if durable is None:
        ended = _unknown_loop(loop_name, goal)
        await DBOS.set_event_async(EVENT, ended)
        return ended
    return await _Workflow(durable, goal, forked_from, conversation).arun()


def _unknown_loop(loop_name: str, goal: str) -> dict[str, Any]:
    """The event that ends a run whose loop this process does not have: `fatal_error`, with
    the reason where `forge runs show` and the run's page read it (not a DBOS error with a
    traceback in the worker's log)."""
    error = (f"UsageError: the worker has no DurableLoop named {loop_name!r} (it has: "
             f"{', '.join(sorted(LOOPS)) or 'none'}); every worker must make each loop a run may name")
    _log.error("run %s: %s", DBOS.workflow_id, error)
    event = {"status": "finished", "loop": loop_name, "goal": goal, "turns": [], "answers": 0, "tokens": 0,
             "reason": "fatal_error", "outcome": "failure", "summary": f"fatal_error after 0 steps: {error}",
             "steps": 0, "error": error}
    return event


_Op = tuple[Any, ...]
"""What the workflow's flow asks its driver to do: ("publish", event), ("state", LoopState),
("deadline", seconds), ("recv", timeout), ("turn", plan, state, registry)."""


class _Workflow:
    """One durable run. Its logic is written once, as a generator of DBOS operations
    (`_flow`); `run` drives it with DBOS's sync API, `arun` with its async one."""

    def __init__(self, durable: HostedLoop, goal: str, forked_from: Mapping[str, Any] | None = None,
                 conversation: Mapping[str, Any] | None = None) -> None:
        self.durable, self.goal, self.forked_from = durable, goal, forked_from
        self.conversation = conversation or {}
        run_id = DBOS.workflow_id
        assert run_id is not None, "forge_run runs as a DBOS workflow"
        self.run_id = run_id
        self.turns: list[list[dict[str, Any]]] = []
        self.answers = 0
        self.tokens = 0

    def run(self) -> dict[str, Any]:
        finished: dict[str, Any] = self._drive(self._flow())
        return finished

    async def arun(self) -> dict[str, Any]:
        flow: Generator[_Op, Any, dict[str, Any]] = self._flow()
        reply: Any = None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                finished: dict[str, Any] = done.value
                return finished
            kind = op[0]
            if kind == "turn":
                reply = await self._aturn(*op[1:])
            elif kind in ("publish", "state"):
                await DBOS.set_event_async(EVENT if kind == "publish" else STATE_EVENT, op[1])
                reply = None
            elif kind == "deadline":
                reply = await _adeadline(op[1])
            else:
                reply = await DBOS.recv_async(ANSWER_TOPIC, timeout_seconds=op[1])

    def _drive(self, flow: Generator[_Op, Any, Any]) -> Any:
        reply: Any = None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                return done.value
            kind = op[0]
            if kind == "turn":
                reply = self._turn(*op[1:])
            elif kind in ("publish", "state"):
                DBOS.set_event(EVENT if kind == "publish" else STATE_EVENT, op[1])
                reply = None
            elif kind == "deadline":
                reply = _deadline(op[1])
            else:
                reply = DBOS.recv(ANSWER_TOPIC, timeout_seconds=op[1])

    def _publish(self, status: str, **more: Any) -> Generator[_Op, Any, dict[str, Any]]:
        event = {"status": status, "loop": self.durable.name, "goal": self.goal, "turns": self.turns,
                 "answers": self.answers, "tokens": self.tokens, **more}
        if self.forked_from is not None:
            event["forked_from"] = {k: v for k, v in self.forked_from.items() if k != "patched"}
        if self.conversation.get("continues"):
            event["continues"] = self.conversation["continues"]
        yield ("publish", event)
        return event

    def _flow(self) -> Generator[_Op, Any, dict[str, Any]]:
        plan, state = Plan(), self.conversation.get("state")
        parent = self.forked_from["run_id"] if self.forked_from else None
        registry = StoredRegistry(self.durable.database, self.run_id, parent)  # one for every turn of the run
        if parent is not None:
            yield from self._publish("running")  # a fork says where it came from while it runs
        steps = 0
        while True:
            result, run = yield ("turn", plan, state, registry)
            self.turns.append([record.to_json() for record in result.trace])
            steps += result.steps
            self.tokens += result.usage.total_tokens
            whole = replace(result, steps=steps)  # the run's summary counts every turn's steps
            waiting = _waiting_of(result, run) if result.outcome == "needs_input" else None
            yield ("state", result.state)  # apart from the run's event: read only when asked for
            if waiting is None:
                return (yield from self._publish(
                    "finished", reason=result.reason, outcome=result.outcome, summary=whole.summary, steps=steps,
                    error=None if result.error is None else error_text(result.error)))
            seconds = self.durable.loop.definition.state(result.reason).timeout
            if seconds is not None:
                waiting = replace(waiting, deadline=(yield ("deadline", seconds)))  # absolute, and stored
            answer = yield from self._wait(waiting, reason=result.reason, outcome=result.outcome,
                                           summary=whole.summary, steps=steps)
            plan = (replace(plan, pinned=None, timed_out=result.reason) if answer is None
                    else _plan_after(plan, answer, waiting, run.intent))
            state = result.state

    def _performers(self, plan: Plan, registry: StoredRegistry) -> Callable[[Journal, Run], DurablePerformer]:
        """What makes the next turn's performer: its stored journal, replayed as far as it
        goes, then live."""
        stored = StoredTurn(self.durable.database, self.run_id, len(self.turns) + 1)
        performers: list[DurablePerformer] = []
        forked = self.forked_from if not self.turns else None

        def perform(journal: Journal, run: Run) -> DurablePerformer:
            performers.append(DurablePerformer(
                stored, journal, run, run_id=self.run_id, tools=run.config.tools, sleep=run.config.sleep,
                pinned=plan.pinned, approvals=plan.approvals, in_doubt=self.in_doubt, note=plan.note,
                patched=forked.get("patched") if forked else None, patch=forked.get("patch") if forked else None,
                stopping=HOST.stopping))
            if forked is not None:
                journal.forked_from = ForkOrigin(forked["run_id"], forked["transition"], forked.get("patch"))
            registry.replaying = lambda: performers[0].remaining > 0
            HOST.turns.started(performers[-1])
            return performers[-1]

        perform.made = performers  # type: ignore[attr-defined]
        return perform

    def _turn(self, plan: Plan, state: LoopState | None, registry: StoredRegistry) -> tuple[LoopResult, RunView]:
        turn, perform = _Turn(), self._performers(plan, registry)
        try:
            result = self.durable.loop_for(plan.extra_tools).run(
                plan.goal or self.goal, observers=[turn], state=state, run_id=self.run_id, registry=registry,
                performer=perform, timed_out=plan.timed_out)
        finally:
            HOST.turns.ended(self.run_id, len(self.turns) + 1)
        return self._turned(result, turn, perform)

    async def _aturn(self, plan: Plan, state: LoopState | None, registry: StoredRegistry
                     ) -> tuple[LoopResult, RunView]:
        turn, perform = _Turn(), self._performers(plan, registry)
        try:
            result = await self.durable.loop_for(plan.extra_tools).arun(
                plan.goal or self.goal, observers=[turn], state=state, run_id=self.run_id, registry=registry,
                performer=perform, timed_out=plan.timed_out)
        finally:
            HOST.turns.ended(self.run_id, len(self.turns) + 1)
        return self._turned(result, turn, perform)

    @staticmethod
    def _turned(result: LoopResult, turn: _Turn, perform: Any) -> tuple[LoopResult, RunView]:
        perform.made[0].flush()  # what the run's end settled: its last verify
        assert turn.run is not None
        return result, turn.run

    def _wait(self, waiting: Waiting, **more: Any) -> Generator[_Op, Any, Answer | None]:
        """Publish what the run waits for (its next question, numbered) and wait, durably,
        for a fitting answer to that question; None when its deadline passes first."""
        waiting = replace(waiting, asked=self.answers + 1)
        tools = {tool.name for tool in self.durable.loop.tools}
        # registered before the run says it waits: a shutdown() that follows the caller seeing "waiting"
        # always finds this thread, and wakes it (else it would wait an hour in recv, and the process with it)
        ended = HOST.waiting[self.run_id] = threading.Event()
        try:
            yield from self._publish("waiting", waiting=waiting.to_json(), tools=sorted(tools),
                                     extra_tools=sorted(self.durable.extra_tools), **more)
            return (yield from self._receive(waiting, tools))
        finally:
            HOST.waiting.pop(self.run_id, None)
            ended.set()

    def _receive(self, waiting: Waiting, tools: set[str]) -> Generator[_Op, Any, Answer | None]:
        deadline = waiting.deadline
        while True:
            if HOST.stopping.is_set():
                raise ProcessStopping(self.run_id)
            data = yield ("recv", 3600 if deadline is None else max(0.0, deadline - time.time()))
            if HOST.stopping.is_set():
                raise ProcessStopping(self.run_id)
            if data is None:
                if deadline is not None and time.time() >= deadline:
                    yield from self._publish("running")
                    return None
                continue
            try:
                answer = Answer.from_json(data)
                if answer.question != waiting.asked:
                    continue  # an answer to another question (an earlier one, or none): never this one's
                answer.check(waiting, tools, set(self.durable.extra_tools))
            except (AnswerRefused, KeyError, TypeError, ValueError):
                continue  # resume() checks before sending; a hand-made message that does not fit is dropped
            self.answers += 1
            yield from self._publish("running")
            return answer

    def in_doubt(self, tool: Tool, arguments: Mapping[str, Any], key: str) -> tuple[bool, Any]:
        """A call of `tool` was running when the process died: ask whether it ran (on the
        sync API: the performer asks from inside the turn)."""
        waiting = Waiting("in_doubt", tool.name, dict(arguments), _fingerprint(tool.name, arguments), key=key)
        answer = self._drive(self._wait(waiting))
        assert answer is not None, "a call in doubt waits with no deadline"
        return (True, answer.value) if answer.kind == "did_run" else (False, None)


@DBOS.step(name="forge_deadline")
def _deadline(seconds: float) -> float:
    """When a wait of `seconds` that starts now ends, as a stored step: a recovered run
    waits for the same moment, not for `seconds` more."""
    return time.time() + seconds


@DBOS.step(name="forge_deadline_async")
async def _adeadline(seconds: float) -> float:
    """`_deadline`, as an async workflow's step."""
    return time.time() + seconds


def _fingerprint(tool: str, arguments: Mapping[str, Any]) -> str | None:
    try:
        return request_fingerprint(tool, arguments)
    except NotFingerprintable:
        return None


def _waiting_of(result: LoopResult, run: RunView) -> Waiting:
    intent = run.intent
    arguments = dict(intent.arguments) if intent is not None else {}
    tool = run.action.tool_name if run.action is not None else (intent.tool if intent is not None else None)
    error = run.error
    tied = tuple(error.tied) if isinstance(error, AmbiguousToolChoice) else ()
    capabilities = tuple(sorted(error.required)) if isinstance(error, NoMatchingTool) else ()
    if isinstance(error, UnknownTool):
        tool = error.name
    if result.reason == "input_required":
        return Waiting(result.reason, prompt=result.question)
    fingerprint = _fingerprint(tool, arguments) if tool else None
    found = getattr(getattr(run, "config", None), "tools", {}).get(tool) if tool else None
    contract = None if found is None else {"required": sorted(found.required), "optional": sorted(found.optional),
                                           "schema": None if found.schema is None else dict(found.schema)}
    return Waiting(result.reason, tool, arguments, fingerprint, tied, capabilities, contract=contract)


def _plan_after(plan: Plan, answer: Answer, waiting: Waiting, intent: Intent | None) -> Plan:
    """The next turn: the waiting call again, as the answer says; after a text answer, the
    conversation's next turn, whose goal is the reply."""
    plan = replace(plan, timed_out=None, note=None)
    if answer.kind == "text":
        return replace(plan, pinned=None, goal=str(answer.value))
    pinned = intent if intent is not None else Intent.call(waiting.tool or "", **waiting.arguments)
    if answer.kind == "tool":
        pinned = Intent(pinned.capabilities, pinned.arguments, pinned.idempotency_key, tool=str(answer.value))
    if answer.kind == "add_tool":
        return replace(plan, pinned=pinned, extra_tools=(*plan.extra_tools, str(answer.value)))
    if answer.kind == "approve" and answer.arguments is not None:
        tool = pinned.tool or waiting.tool or ""
        edited = Intent(frozenset(), dict(answer.arguments), tool=tool, call_id=pinned.call_id)
        note = {"edited": {"tool": tool, "original": dict(waiting.arguments), "original_fingerprint": waiting.fingerprint,
                           "arguments": dict(answer.arguments)}}
        return replace(plan, pinned=edited, note=note,
                       approvals={**plan.approvals, request_fingerprint(tool, edited.arguments): True})
    if answer.kind in ("approve", "reject"):
        return replace(plan, pinned=pinned, approvals={**plan.approvals, str(answer.value): answer.kind == "approve"})
    return replace(plan, pinned=pinned)
