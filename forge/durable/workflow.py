"""The durable run itself: one DBOS workflow per run, `forge_run(loop_name, goal)`.

The workflow runs the loop's machine turn by turn. A turn is an ordinary `AgentLoop.run`
whose performer keeps the turn's journal in the runs' database (`forge.durable.performer`):
a recovered workflow replays it and goes on live where it ends. The only DBOS operations
of a run are its events (what it publishes) and its waits for answers. A turn that ends in a needs-input state DBOS can wait in
(`clarification_required`, `capability_gap`, `approval_required`) publishes what it needs
and waits durably (`DBOS.recv`) for an `Answer`; the answer shapes the next turn, which
goes on from the same observations (a conversation's next turn). A tool that was running
at a crash and says `on_crash="ask"` waits the same way, in `in_doubt`, inside its turn.

What the workflow publishes, as the DBOS event `run` (read by any process): `status`
(running / waiting / finished), the turns' traces as v2 JSON, and when waiting, what for.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from dbos import DBOS

from forge.agent.actions import AmbiguousToolChoice, NoMatchingTool, UnknownTool
from forge.durable.answers import Answer, AnswerRefused, Waiting
from forge.durable.database import RunsDatabase
from forge.durable.idempotency import StoredRegistry
from forge.durable.performer import DurablePerformer, StoredTurn
from forge.errors import UsageError
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

__all__ = ["ANSWER_TOPIC", "EVENT", "STATE_EVENT", "HOST", "LOOPS", "QUEUE_NAME", "STOPPING", "WAITING_HERE", "WORKFLOW_NAME", "Host",
           "Plan",
           "HostedLoop", "ProcessStopping", "forge_run"]

WORKFLOW_NAME = "forge_run"
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
    stored), and the runs waiting here for an answer, each with an event set once its wait
    ends."""

    loops: dict[str, HostedLoop] = field(default_factory=dict)
    url: str | None = None
    database: RunsDatabase | None = None
    queue: Any = None
    stopping: threading.Event = field(default_factory=threading.Event)
    waiting: dict[str, threading.Event] = field(default_factory=dict)


HOST = Host()
LOOPS, STOPPING, WAITING_HERE = HOST.loops, HOST.stopping, HOST.waiting  # the names earlier releases exported

_WAITS = ("clarification_required", "capability_gap", "approval_required", "input_required")


class ProcessStopping(BaseException):
    """Ends a waiting run's thread when its process shuts down. Not an Exception, so
    neither a stage nor DBOS records it: the run stays pending, for recovery."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What the answers so far change in the next turn: an intent to start with, tools
    added, approvals given (fingerprint → approved), and the user's last reply to the
    policy's question, the goal of the turns after it."""

    pinned: Intent | None = None
    extra_tools: tuple[str, ...] = ()
    approvals: Mapping[str, bool] = field(default_factory=dict)
    goal: str | None = None


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
        raise UsageError(f"this process has no DurableLoop named {loop_name!r} (it has: "
                          f"{', '.join(sorted(LOOPS)) or 'none'}); make it before launching, in every worker")
    return _Workflow(durable, goal, forked_from, conversation).run()


class _Workflow:
    def __init__(self, durable: HostedLoop, goal: str, forked_from: Mapping[str, Any] | None = None,
                 conversation: Mapping[str, Any] | None = None) -> None:
        self.durable, self.goal, self.forked_from = durable, goal, forked_from
        self.conversation = conversation or {}
        run_id = DBOS.workflow_id
        assert run_id is not None, "forge_run runs as a DBOS workflow"
        self.run_id = run_id
        self.turns: list[list[dict[str, Any]]] = []
        self.answers = 0

    def publish(self, status: str, **more: Any) -> dict[str, Any]:
        event = {"status": status, "loop": self.durable.name, "goal": self.goal, "turns": self.turns,
                 "answers": self.answers, **more}
        if self.forked_from is not None:
            event["forked_from"] = {k: v for k, v in self.forked_from.items() if k != "patched"}
        if self.conversation.get("continues"):
            event["continues"] = self.conversation["continues"]
        DBOS.set_event(EVENT, event)
        return event

    def run(self) -> dict[str, Any]:
        plan, state = Plan(), self.conversation.get("state")
        parent = self.forked_from["run_id"] if self.forked_from else None
        registry = StoredRegistry(self.durable.database, self.run_id, parent)  # one for every turn of the run
        if parent is not None:
            self.publish("running")  # a fork says where it came from while it runs
        steps = 0
        while True:
            result, run = self.turn(plan, state, registry)
            self.turns.append([record.to_json() for record in result.trace])
            steps += result.steps
            whole = replace(result, steps=steps)  # the run's summary counts every turn's steps
            waiting = _waiting_of(result, run) if result.reason in _WAITS else None
            DBOS.set_event(STATE_EVENT, result.state)  # apart from the run's event: read only when asked for
            if waiting is None:
                return self.publish("finished", reason=result.reason, outcome=result.outcome, summary=whole.summary,
                                    steps=steps, error=None if result.error is None else error_text(result.error))
            answer = self.wait(waiting, reason=result.reason, outcome=result.outcome, summary=whole.summary,
                               steps=steps)
            plan = _plan_after(plan, answer, waiting, run.intent)
            state = result.state

    def turn(self, plan: Plan, state: LoopState | None, registry: StoredRegistry) -> tuple[LoopResult, RunView]:
        """Run the next turn on its stored journal: replayed as far as it goes, then live."""
        turn = _Turn()
        loop = self.durable.loop_for(plan.extra_tools)
        stored = StoredTurn(self.durable.database, self.run_id, len(self.turns) + 1)
        performers: list[DurablePerformer] = []

        forked = self.forked_from if not self.turns else None

        def perform(journal: Journal, run: Run) -> DurablePerformer:
            performers.append(DurablePerformer(
                stored, journal, run, run_id=self.run_id, tools=run.config.tools, sleep=run.config.sleep,
                pinned=plan.pinned, approvals=plan.approvals, in_doubt=self.in_doubt,
                patched=forked.get("patched") if forked else None, patch=forked.get("patch") if forked else None))
            if forked is not None:
                journal.forked_from = ForkOrigin(forked["run_id"], forked["transition"], forked.get("patch"))
            registry.replaying = lambda: performers[0].remaining > 0
            return performers[-1]

        result = loop.run(plan.goal or self.goal, observers=[turn], state=state, run_id=self.run_id,
                          registry=registry, performer=perform)
        performers[0].flush()  # what the run's end settled: its last verify
        assert turn.run is not None
        return result, turn.run

    def wait(self, waiting: Waiting, **more: Any) -> Answer:
        """Publish what the run waits for (its next question, numbered) and wait, durably,
        for a fitting answer to that question."""
        waiting = replace(waiting, asked=self.answers + 1)
        tools = {tool.name for tool in self.durable.loop.tools}
        # registered before the run says it waits: a shutdown() that follows the caller seeing "waiting"
        # always finds this thread, and wakes it (else it would wait an hour in recv, and the process with it)
        ended = HOST.waiting[self.run_id] = threading.Event()
        try:
            self.publish("waiting", waiting=waiting.to_json(), tools=sorted(tools),
                         extra_tools=sorted(self.durable.extra_tools), **more)
            return self._receive(waiting, tools)
        finally:
            HOST.waiting.pop(self.run_id, None)
            ended.set()

    def _receive(self, waiting: Waiting, tools: set[str]) -> Answer:
        while True:
            if HOST.stopping.is_set():
                raise ProcessStopping(self.run_id)
            data = DBOS.recv(ANSWER_TOPIC, timeout_seconds=3600)
            if HOST.stopping.is_set():
                raise ProcessStopping(self.run_id)
            if data is None:
                continue
            try:
                answer = Answer.from_json(data)
                if answer.question != waiting.asked:
                    continue  # an answer to another question (an earlier one, or none): never this one's
                answer.check(waiting, tools, set(self.durable.extra_tools))
            except (AnswerRefused, KeyError, TypeError, ValueError):
                continue  # resume() checks before sending; a hand-made message that does not fit is dropped
            self.answers += 1
            self.publish("running")
            return answer

    def in_doubt(self, tool: Tool, arguments: Mapping[str, Any], key: str) -> tuple[bool, Any]:
        """A call of `tool` was running when the process died: ask whether it ran."""
        waiting = Waiting("in_doubt", tool.name, dict(arguments), _fingerprint(tool.name, arguments), key=key)
        answer = self.wait(waiting)
        return (True, answer.value) if answer.kind == "did_run" else (False, None)


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
    return Waiting(result.reason, tool, arguments, fingerprint, tied, capabilities)


def _plan_after(plan: Plan, answer: Answer, waiting: Waiting, intent: Intent | None) -> Plan:
    """The next turn: the waiting call again, as the answer says; after a text answer, the
    conversation's next turn, whose goal is the reply."""
    if answer.kind == "text":
        return replace(plan, pinned=None, goal=str(answer.value))
    pinned = intent if intent is not None else Intent.call(waiting.tool or "", **waiting.arguments)
    if answer.kind == "tool":
        pinned = Intent(pinned.capabilities, pinned.arguments, pinned.idempotency_key, tool=str(answer.value))
    if answer.kind == "add_tool":
        return replace(plan, pinned=pinned, extra_tools=(*plan.extra_tools, str(answer.value)))
    if answer.kind in ("approve", "reject"):
        return replace(plan, pinned=pinned, approvals={**plan.approvals, str(answer.value): answer.kind == "approve"})
    return replace(plan, pinned=pinned)
